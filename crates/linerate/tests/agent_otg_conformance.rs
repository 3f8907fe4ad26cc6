//! `linerate agent` judged by the Open Traffic Generator conformance
//! suite's own data-plane tests (`pytest -m dp feature/b2b/packet`, the
//! copy in `../shared/otg-conformance`, or `LINERATE_OTG_CONFORMANCE`):
//! each test configures layer1, captures and one flow with snappi, runs
//! it, checks frames_tx = frames_rx = its count, then reads the receive
//! port's capture and checks every header field of every frame. The suite
//! runs twice: over HTTP, and over gRPC (`otg_grpc_transport: true`).
//!
//! The agent has both ports: a rig's veth pair, host 1's end moved into
//! host 0's namespace (as `veth1`); pytest runs in that namespace. The
//! suite's directory is read-only: it is copied, with its
//! `test-config.yaml` and a `conftest.py` that gives snappi the token
//! (and, over gRPC, a channel with the agent's certificate).
//!
//! Needs root, `ip`, the suite, and a Python with snappi 1.62 (with its
//! grpcio and protobuf), pytest, pytest-timeout, pypcapfile and pyyaml
//! (scripts/test installs them into `target/snappi-venv`; or
//! `LINERATE_SNAPPI_PYTHON`).

mod support;

use linerate_lab::Rig;
use linerate_testkit::{Requirement, require_program, require_root, should_skip};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::Proc;

const BIN: &str = env!("CARGO_BIN_EXE_linerate");
const PORT: u16 = 8443;
const GRPC_PORT: u16 = 8444;

/// The suite's data-plane tests the agent passes; a test missing from
/// this list that passes, or one in it that fails, fails this test.
const PASSING: &[&str] = &[
    "feature/b2b/packet/tcp/test_tcp_port_incr_decr.py::test_tcp_port_incr_decr",
    "feature/b2b/packet/tcp/test_tcp_port_value.py::test_tcp_port_value",
    "feature/b2b/packet/tcp/test_tcp_port_values.py::test_tcp_port_values",
    "feature/b2b/packet/udp/test_ipv6_udp_port_values.py::test_ipv6_udp_port_values",
    "feature/b2b/packet/udp/test_udp_port_incr_decr.py::test_udp_port_incr_decr",
    "feature/b2b/packet/udp/test_udp_port_value.py::test_udp_port_value",
    "feature/b2b/packet/udp/test_udp_port_values.py::test_udp_port_values",
    "feature/b2b/packet/vxlan/test_vxlan_inner_ipv4.py::test_vxlan_inner_ipv4",
    "feature/b2b/packet/vxlan/test_vxlan_inner_ipv6.py::test_vxlan_inner_ipv6",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The suite: `LINERATE_OTG_CONFORMANCE`, or `../shared/otg-conformance`
/// beside the repository.
fn suite() -> Result<PathBuf, String> {
    let dir = std::env::var_os("LINERATE_OTG_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared/otg-conformance"));
    if dir.join("feature/b2b/packet").is_dir() && dir.join("helpers/otg/otg.py").is_file() {
        Ok(dir)
    } else {
        Err(format!(
            "needs the OTG conformance suite at {} (or LINERATE_OTG_CONFORMANCE)",
            dir.display()
        ))
    }
}

/// The Python with the suite's client side.
fn python() -> Result<PathBuf, String> {
    let candidates: Vec<PathBuf> = std::env::var_os("LINERATE_SNAPPI_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([repo().join("target/snappi-venv/bin/python")])
        .collect();
    for p in &candidates {
        let ok = Command::new(p)
            .args([
                "-c",
                "import importlib.metadata, snappi, grpc, google.protobuf, pytest, pytest_timeout, pcapfile, yaml; assert importlib.metadata.version('snappi').startswith('1.62.')",
            ])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Ok(p.clone());
        }
    }
    Err("needs Python with snappi 1.62 (grpcio, protobuf), pytest, pytest-timeout, pypcapfile and pyyaml (scripts/test installs them into target/snappi-venv; or set LINERATE_SNAPPI_PYTHON)".into())
}

fn require(r: Result<PathBuf, String>) -> Requirement {
    r.map(|_| ())
}

/// Copies `from` into `to` (files and directories only; the suite has
/// nothing else).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = e.file_type().unwrap();
        let dest = to.join(e.file_name());
        if t.is_dir() {
            copy_tree(&e.path(), &dest);
        } else if t.is_file() {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The suite's test ids that pytest reported as passed, and the whole
/// report.
fn run_suite(
    rig: &Rig,
    python: &Path,
    dir: &Path,
    token: &str,
    cert: &Path,
) -> (BTreeSet<String>, String) {
    let out = rig
        .command(0, python.to_str().unwrap())
        .current_dir(dir)
        .env("OTG_TOKEN", token)
        .env("OTG_CERT", cert)
        .args([
            "-m",
            "pytest",
            "-m",
            "dp",
            "feature/b2b/packet",
            "-p",
            "no:cacheprovider",
            "--timeout",
            "120",
            "-rA",
            "-o",
            "log_cli=false",
        ])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = text
        .lines()
        .filter_map(|l| l.strip_prefix("PASSED "))
        .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    (passed, text)
}

/// The conftest: snappi has no option for a token. Over HTTP its
/// session's headers carry it; over gRPC (snappi makes an insecure channel
/// when not verifying) its channel is made secure with the agent's
/// certificate and the token as call credentials (the metadata
/// `authorization: Bearer <token>`).
const CONFTEST: &str = r#"import os

import grpc
import snappi
from snappi import otg_pb2_grpc

_api = snappi.api


def _secure(api):
    def get_stub():
        if api._stub is None:
            cert = open(os.environ["OTG_CERT"], "rb").read()
            creds = grpc.composite_channel_credentials(
                grpc.ssl_channel_credentials(cert),
                grpc.access_token_call_credentials(os.environ["OTG_TOKEN"]),
            )
            options = [("grpc.max_receive_message_length", api._maximum_receive_buffer_size)]
            api._channel = grpc.secure_channel(api._location, creds, options=options)
            api._stub = otg_pb2_grpc.OpenapiStub(api._channel)
        return api._stub

    api._get_stub = get_stub


def _with_token(*args, **kwargs):
    api = _api(*args, **kwargs)
    if hasattr(api, "_get_stub"):
        _secure(api)
    else:
        api._transport._session.headers["Authorization"] = "Bearer " + os.environ["OTG_TOKEN"]
    return api


snappi.api = _with_token
"#;

/// The two transports' runs one at a time (each its own rig and agent).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn the_otg_conformance_suites_data_plane_tests_pass() {
    conformance("the_otg_conformance_suites_data_plane_tests_pass", false);
}

/// The same tests with `otg_grpc_transport: true`: snappi's gRPC
/// transport against `linerate agent --grpc-listen`.
#[test]
fn the_otg_conformance_suites_data_plane_tests_pass_over_grpc() {
    conformance(
        "the_otg_conformance_suites_data_plane_tests_pass_over_grpc",
        true,
    );
}

fn conformance(test: &str, grpc: bool) {
    if should_skip(
        test,
        &[
            require_root(),
            require_program("ip"),
            require(suite()),
            require(python()),
        ],
    ) {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (suite, python) = (suite().unwrap(), python().unwrap());
    let rig = Rig::looped().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let token = "otg-conformance-token-0123456789";
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let cert = dir.path().join("cert.pem");
    let work = dir.path().join("suite");
    copy_tree(&suite, &work);
    let host = if grpc {
        format!("127.0.0.1:{GRPC_PORT}")
    } else {
        format!("https://127.0.0.1:{PORT}")
    };
    std::fs::write(
        work.join("test-config.yaml"),
        format!(
            "otg_host: {host}\notg_ports: [veth0, veth1]\notg_speed: speed_1_gbps\notg_capture_check: true\notg_grpc_transport: {grpc}\n"
        ),
    )
    .unwrap();
    std::fs::write(work.join("conftest.py"), CONFTEST).unwrap();
    let mut agent = Proc::spawn(rig.command(0, BIN).args([
        "agent",
        "--listen",
        &format!("127.0.0.1:{PORT}"),
        "--grpc-listen",
        &format!("127.0.0.1:{GRPC_PORT}"),
        "--allow-iface",
        "veth0,veth1",
        "--token-file",
        token_file.to_str().unwrap(),
        "--write-cert",
        cert.to_str().unwrap(),
    ]));
    let port = if grpc { GRPC_PORT } else { PORT };
    support::wait_agent(&rig, 0, port, &mut agent);
    let (passed, report) = run_suite(&rig, &python, &work, token, &cert);
    // The report, for the log (cargo shows it when the test fails, or
    // with --nocapture).
    println!("{report}");
    let want: BTreeSet<String> = PASSING.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        passed,
        want,
        "the suite's tests that passed (left) against those expected to (right), over {}",
        if grpc { "gRPC" } else { "HTTP" }
    );
    drop(agent);
}
