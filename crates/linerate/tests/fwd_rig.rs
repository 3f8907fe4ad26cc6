//! `linerate fwd` on the namespace rig: blast on host 0 sends to host 1,
//! fwd on host 1 reflects, the sink on host 0 counts every probe coming
//! back; the loaded-server simulation, a lost interface, and bad input.

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use serde_json::Value;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

fn skip(test: &str) -> bool {
    should_skip(test, &[require_root(), require_program("ip")])
}

fn spawn(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn finish(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

/// Reflects `n` probes through fwd (started with `fwd_args`) and returns
/// (fwd's JSON, the sink's JSON).
fn reflect(rig: &Rig, n: u64, fwd_args: &[&str]) -> (Value, Value) {
    let count = n.to_string();
    let fwd = spawn(
        rig.command(1, BIN)
            // no --count: fwd also reflects what is not a probe (the ICMP
            // errors host 0 sends back for 5tswap'd datagrams, say)
            .args(["fwd", "--iface", "veth0", "--json", "--duration", "2"])
            .args(fwd_args),
    );
    let sink = spawn(rig.command(0, BIN).args([
        "sink",
        "--iface",
        "veth0",
        "--backend",
        "af_packet",
        "--json",
        "--duration",
        "4",
        "--count",
        &count,
    ]));
    std::thread::sleep(Duration::from_millis(600));
    let dst_ip = rig.host(1).ipv4.to_string();
    let blast = rig
        .command(0, BIN)
        .args(["blast", "--iface", "veth0", "--dst-mac", &rig.host(1).mac])
        .args(["--dst-ip", &dst_ip, "--src-port", "1000-1015"])
        .args(["--count", &count, "--pps", "50k"])
        .output()
        .unwrap();
    assert!(
        blast.status.success(),
        "{}",
        String::from_utf8_lossy(&blast.stderr)
    );
    let (f, s) = (finish(fwd), finish(sink));
    assert!(
        f.status.success(),
        "fwd: {}",
        String::from_utf8_lossy(&f.stderr)
    );
    assert!(
        s.status.success(),
        "sink: {}",
        String::from_utf8_lossy(&s.stderr)
    );
    (support::json(&f.stdout), support::json(&s.stdout))
}

#[test]
fn fwd_reflects_every_frame_with_each_backend_and_mode() {
    if skip("fwd_reflects_every_frame_with_each_backend_and_mode") {
        return;
    }
    let rig = Rig::pair().unwrap();
    for (backend, mode, extra, rx, tx) in [
        ("af_packet", "macswap", &[][..], "af_packet", "af_packet"),
        ("socket", "5tswap", &[], "socket", "socket"),
        // AF_XDP in place: one socket per queue receives and sends
        ("auto", "5tswap", &[], "af_xdp", "af_xdp"),
        ("af_xdp", "macswap", &[], "af_xdp", "af_xdp"),
        // frames held in a FIFO cannot stay in the UMEM: the ring sends
        (
            "auto",
            "macswap",
            &["--fifo", "64", "--flush-us", "500"],
            "af_xdp",
            "af_packet",
        ),
        // io sends frames back unchanged: addressed to host 1 itself, so
        // host 0's sink sees them only because a veth delivers whatever
        // it is given; count them all the same.
        ("af_packet", "io", &[], "af_packet", "af_packet"),
    ] {
        let mut args = vec!["--backend", backend, "--mode", mode];
        args.extend_from_slice(extra);
        let (f, s) = reflect(&rig, 2000, &args);
        assert_eq!(s["packets"], 2000, "{backend} {mode}: sink {s}");
        assert_eq!(s["lost"], 0, "{backend} {mode}: sink {s}");
        assert_eq!(f["rx_backend"], rx, "{f}");
        assert_eq!(f["tx_backend"], tx, "{f}");
        // fwd saw and sent at least the probes (and whatever else arrived)
        assert!(f["counts"]["tx"].as_u64().unwrap() >= 2000, "{f}");
        assert_eq!(f["counts"]["tx_dropped"], 0, "{f}");
        assert_eq!(f["mode"], mode);
        assert_eq!(f["doctor"]["iface"], "veth0");
    }
}

#[test]
fn fwd_with_two_workers_shares_the_frames_and_loses_none() {
    if skip("fwd_with_two_workers_shares_the_frames_and_loses_none") {
        return;
    }
    let rig = Rig::new(&linerate_lab::RigConfig {
        queues: 2,
        ..Default::default()
    })
    .unwrap();
    for backend in ["af_packet", "socket", "af_xdp"] {
        let (f, s) = reflect(
            &rig,
            4000,
            &["--backend", backend, "--mode", "macswap", "--cores", "0,1"],
        );
        assert_eq!(s["packets"], 4000, "{backend}: {s}");
        let w = f["workers"].as_array().unwrap();
        assert_eq!(w.len(), 2, "{f}");
        // 16 flows hashed over two workers: both forwarded some (AF_XDP
        // splits by RX queue, and a veth's RX queue is its peer's TX queue)
        if backend != "af_xdp" {
            assert!(
                w.iter().all(|c| c["tx"].as_u64().unwrap() > 0),
                "{backend}: {f}"
            );
        }
        let sum: u64 = w.iter().map(|c| c["tx"].as_u64().unwrap()).sum();
        assert_eq!(sum, f["counts"]["tx"].as_u64().unwrap());
    }
}

#[test]
fn fwd_as_a_loaded_server_holds_frames_and_does_memory_work() {
    if skip("fwd_as_a_loaded_server_holds_frames_and_does_memory_work") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (f, s) = reflect(
        &rig,
        3000,
        &[
            "--backend",
            "af_packet",
            "--fifo",
            "512",
            "--flush-us",
            "2000",
            "--mem-mb",
            "8",
            "--reads",
            "16",
            "--writes",
            "4",
            "--read-writes",
            "2",
        ],
    );
    assert_eq!(s["packets"], 3000, "{s}");
    let peak = f["counts"]["fifo_peak"].as_u64().unwrap();
    // 50k frames/s for 2 ms is ~100 frames; the FIFO held more than a batch
    assert!(peak > 1 && peak <= 512, "{f}");
    assert_ne!(f["mem_sum"], 0, "{f}");
    assert_eq!(f["noisy"]["reads_per_frame"], 16);
}

/// The memory work without a FIFO on AF_XDP (frames rewritten in place,
/// the work done per frame inside the receive loop): every frame comes
/// back, and the work was done (its sum is kept).
#[test]
fn fwd_in_place_does_memory_work_per_frame() {
    if skip("fwd_in_place_does_memory_work_per_frame") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let (f, s) = reflect(
        &rig,
        3000,
        &[
            "--backend",
            "af_xdp",
            "--mode",
            "macswap",
            "--mem-mb",
            "8",
            "--reads",
            "16",
            "--writes",
            "4",
        ],
    );
    assert_eq!(s["packets"], 3000, "{s}");
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(f["rx_backend"], "af_xdp", "{f}");
    assert_ne!(f["mem_sum"], 0, "{f}");
    assert_eq!(f["noisy"]["writes_per_frame"], 4);
}

#[test]
fn fwd_keeps_its_counts_when_the_interface_goes_down() {
    if skip("fwd_keeps_its_counts_when_the_interface_goes_down") {
        return;
    }
    let rig = Rig::pair().unwrap();
    let t0 = Instant::now();
    let fwd = spawn(
        rig.command(1, BIN)
            .args(["fwd", "--iface", "veth0", "--backend", "af_packet"])
            .args(["--json", "--duration", "8"]),
    );
    std::thread::sleep(Duration::from_millis(500));
    let blast = rig
        .command(0, BIN)
        .args(["blast", "--iface", "veth0", "--dst-mac", &rig.host(1).mac])
        .args([
            "--dst-ip",
            &rig.host(1).ipv4.to_string(),
            "--count",
            "300",
            "--pps",
            "50k",
        ])
        .output()
        .unwrap();
    assert!(blast.status.success());
    std::thread::sleep(Duration::from_millis(300));
    support::set_link(&rig, 1, "down");
    let out = finish(fwd);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = support::json(&out.stdout);
    assert!(v["counts"]["rx"].as_u64().unwrap() >= 300, "{v}");
    assert!(v["error"].as_str().unwrap().contains("went down"), "{v}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "fwd noticed, it did not run out its 8 s"
    );
}

#[test]
fn fwd_refuses_what_cannot_work() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "--iface",
                "lo",
                "--backend",
                "af_xdp",
                "--fifo",
                "64",
                "--flush-us",
                "100",
            ],
            "cannot hold frames in a FIFO",
        ),
        (
            &["--iface", "lo", "--backend", "socket:udp"],
            "socket:udp cannot forward",
        ),
        (
            &["--iface", "lo", "--mode", "mac"],
            "--mode mac needs --dst-mac",
        ),
        (
            &["--iface", "lo", "--mode", "swap"],
            "--mode is io, mac, macswap or 5tswap",
        ),
        (
            &["--iface", "lo", "--fifo", "64"],
            "--fifo needs --flush-us",
        ),
        (&["--iface", "lo", "--reads", "4"], "need a memory area"),
        (&["--iface", "no-such-if0"], "no-such-if0"),
        // Checked before anything opens (it ran 29 s, then failed).
        (
            &["--iface", "lo", "--cores", "0-99", "-t", "2"],
            "are not online or not allowed",
        ),
        (
            &["--iface", "lo", "--backend", "netmap"],
            "unknown backend 'netmap'",
        ),
    ];
    // (with the feature, tests/dpdk_rig.rs has dpdk's refusals)
    let cases = if cfg!(feature = "dpdk") {
        cases.to_vec()
    } else {
        let dpdk: &[(&[&str], &str)] = &[(
            &["--iface", "lo", "--backend", "dpdk"],
            "built without the dpdk feature",
        )];
        [cases, dpdk].concat()
    };
    for (args, needle) in &cases {
        let out = Command::new(BIN).arg("fwd").args(*args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
