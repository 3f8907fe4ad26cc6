//! iperf3's RSA authentication, both ways, against Debian's iperf3 3.12 and
//! iperf3 3.21: right, wrong and missing credentials. Keys are made by
//! OpenSSL as iperf3's documentation tells users to, and the users file
//! holds `user,sha256("{user}password")` computed by sha256sum, so nothing
//! on the path is linerate's own but linerate.

mod support;

use linerate_testkit::{iperf3_321, require_iperf3_321, require_program, should_skip};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use support::{Proc, free_port, json, linerate, wait_listening};

struct Keys {
    _dir: tempfile::TempDir,
    /// PKCS#8 (`BEGIN PRIVATE KEY`), what `openssl genrsa` writes.
    private: PathBuf,
    /// PKCS#1 (`BEGIN RSA PRIVATE KEY`), `openssl rsa -traditional`.
    private_pkcs1: PathBuf,
    public: PathBuf,
    users: PathBuf,
}

fn sh(cmd: &str) {
    let st = Command::new("sh").args(["-c", cmd]).status().unwrap();
    assert!(st.success(), "{cmd}");
}

fn keys() -> Keys {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    sh(&format!(
        "openssl genrsa -out {d}/private.pem 2048 2>/dev/null"
    ));
    sh(&format!(
        "openssl rsa -in {d}/private.pem -pubout -out {d}/public.pem 2>/dev/null"
    ));
    sh(&format!(
        "openssl rsa -in {d}/private.pem -traditional -out {d}/private1.pem 2>/dev/null"
    ));
    sh(&format!(
        "printf '# users\\nluigi,%s\\nmario,%s\\n' \
         $(printf '{{luigi}}verdi' | sha256sum | cut -d' ' -f1) \
         $(printf '{{mario}}rossi' | sha256sum | cut -d' ' -f1) > {d}/users.csv"
    ));
    Keys {
        private: dir.path().join("private.pem"),
        private_pkcs1: dir.path().join("private1.pem"),
        public: dir.path().join("public.pem"),
        users: dir.path().join("users.csv"),
        _dir: dir,
    }
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Peer {
    Linerate,
    Iperf312,
    Iperf321,
}

fn program(peer: Peer) -> Command {
    match peer {
        Peer::Linerate => linerate(),
        Peer::Iperf312 => Command::new("iperf3"),
        Peer::Iperf321 => Command::new(iperf3_321().unwrap()),
    }
}

/// A server of `peer` with the keys, not one-off, its output in a file.
fn auth_server(peer: Peer, k: &Keys, private: &Path, extra: &[&str]) -> (Proc, u16, PathBuf) {
    let port = free_port();
    let log = k._dir.path().join(format!("server-{port}.log"));
    let srv = Proc::spawn(
        program(peer)
            .args(["-s", "-p", &port.to_string(), "--logfile", p(&log)])
            .args(["--rsa-private-key-path", p(private)])
            .args(["--authorized-users-path", p(&k.users)])
            .args(extra),
    );
    wait_listening(port);
    (srv, port, log)
}

/// A 1 s -J client of `peer`; `creds` = (user, password) or none.
fn auth_client(
    peer: Peer,
    port: u16,
    k: &Keys,
    creds: Option<(&str, &str)>,
    extra: &[&str],
) -> Output {
    let mut c = program(peer);
    c.args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"])
        .args(extra)
        .stdin(Stdio::null())
        .env_remove("IPERF3_PASSWORD");
    if let Some((user, pw)) = creds {
        c.args(["--username", user, "--rsa-public-key-path", p(&k.public)])
            .env("IPERF3_PASSWORD", pw);
    }
    Proc::spawn(&mut c).wait(Duration::from_secs(30))
}

/// The test ran: exit 0, no error, bytes counted by the receiver.
fn ran(o: &Output, what: &str) {
    let v = json(&o.stdout);
    assert!(
        o.status.success() && v.get("error").is_none(),
        "{what}: {}\n{}",
        v["error"],
        String::from_utf8_lossy(&o.stderr)
    );
    let got = v["end"]["sum_received"]["bytes"].as_u64().unwrap_or(0);
    assert!(got > 0, "{what}: receiver counted {got} bytes");
}

/// The test was refused before it ran: exit 1 from iperf3 3.21 (3.12's
/// client exits 0 after any error with -J), 2 from linerate (it could not
/// run, as its README says), an error, no interval.
fn refused(o: &Output, what: &str, says: &str) {
    let v = json(&o.stdout);
    let err = v["error"].as_str().unwrap_or("");
    let version = v["start"]["version"].as_str().unwrap_or("");
    if version.contains("linerate") {
        assert_eq!(o.status.code(), Some(2), "{what}: {v}");
    } else if version != "iperf 3.12" {
        assert_eq!(o.status.code(), Some(1), "{what}: {v}");
    }
    assert!(
        !err.is_empty() && err.contains(says),
        "{what}: error {err:?}, wanted {says:?}"
    );
    let intervals = v["intervals"].as_array().map_or(0, Vec::len);
    assert_eq!(
        intervals, 0,
        "{what}: a refused test ran {intervals} intervals"
    );
}

const DENIED: &str = "test authorization failed";

/// linerate's server (OAEP, PKCS#8 key): linerate's and iperf3 3.21's
/// clients get in with the right password, are refused with a wrong one or
/// none; the server says why in its log and keeps serving.
#[test]
fn linerate_server_admits_right_credentials_only() {
    if should_skip(
        "linerate_server_admits_right_credentials_only",
        &[require_program("openssl"), require_iperf3_321()],
    ) {
        return;
    }
    let k = keys();
    let (_srv, port, log) = auth_server(Peer::Linerate, &k, &k.private, &[]);
    for peer in [Peer::Linerate, Peer::Iperf321] {
        let what = format!("{peer:?} client");
        ran(
            &auth_client(peer, port, &k, Some(("mario", "rossi")), &[]),
            &what,
        );
        ran(
            &auth_client(peer, port, &k, Some(("luigi", "verdi")), &["-u"]),
            &what,
        );
        refused(
            &auth_client(peer, port, &k, Some(("mario", "verdi")), &[]),
            &format!("{what}, wrong password"),
            DENIED,
        );
        refused(
            &auth_client(peer, port, &k, Some(("peach", "rossi")), &[]),
            &format!("{what}, unknown user"),
            DENIED,
        );
        refused(
            &auth_client(peer, port, &k, None, &[]),
            &format!("{what}, no credentials"),
            DENIED,
        );
    }
    let text = std::fs::read_to_string(&log).unwrap();
    let failed = text.matches("authentication failed").count();
    assert_eq!(failed, 6, "{text}");
    assert!(
        text.contains("unknown user or wrong password for 'peach'"),
        "{text}"
    );
    assert!(text.contains("no authentication token"), "{text}");
    assert!(
        !text.contains("rossi") && !text.contains("verdi"),
        "a password in the log: {text}"
    );
}

/// Older servers decrypt with PKCS#1 v1.5: `--use-pkcs1-padding` reaches
/// Debian's iperf3 3.12 server (without it, even the right password
/// fails), and linerate's server with the flag takes 3.12's clients.
#[test]
fn pkcs1_padding_reaches_iperf3_3_12_both_ways() {
    if should_skip(
        "pkcs1_padding_reaches_iperf3_3_12_both_ways",
        &[require_program("openssl"), require_program("iperf3")],
    ) {
        return;
    }
    let k = keys();
    let pkcs1 = ["--use-pkcs1-padding"];
    let (_old, port, _) = auth_server(Peer::Iperf312, &k, &k.private, &[]);
    let right = Some(("mario", "rossi"));
    ran(
        &auth_client(Peer::Linerate, port, &k, right, &pkcs1),
        "linerate --use-pkcs1-padding to iperf3 3.12",
    );
    refused(
        &auth_client(Peer::Linerate, port, &k, right, &[]),
        "linerate (OAEP) to iperf3 3.12",
        DENIED,
    );
    refused(
        &auth_client(Peer::Linerate, port, &k, Some(("mario", "x")), &pkcs1),
        "wrong password to iperf3 3.12",
        DENIED,
    );
    let (_ours, port, _) = auth_server(Peer::Linerate, &k, &k.private_pkcs1, &pkcs1);
    ran(
        &auth_client(Peer::Iperf312, port, &k, right, &[]),
        "iperf3 3.12 to linerate --use-pkcs1-padding",
    );
    refused(
        &auth_client(Peer::Iperf312, port, &k, Some(("mario", "x")), &[]),
        "iperf3 3.12, wrong password",
        DENIED,
    );
}

/// linerate's client against iperf3 3.21's server: in with the right
/// password; refused otherwise (3.21 closes the control connection, or
/// sends SERVER_ERROR with whatever error code it last had: no text to
/// expect).
#[test]
fn linerate_client_authenticates_to_iperf3_3_21() {
    if should_skip(
        "linerate_client_authenticates_to_iperf3_3_21",
        &[require_program("openssl"), require_iperf3_321()],
    ) {
        return;
    }
    let k = keys();
    let (_srv, port, _) = auth_server(Peer::Iperf321, &k, &k.private, &[]);
    ran(
        &auth_client(Peer::Linerate, port, &k, Some(("mario", "rossi")), &[]),
        "right password",
    );
    ran(
        &auth_client(Peer::Linerate, port, &k, Some(("mario", "rossi")), &["-R"]),
        "right password, -R",
    );
    for creds in [Some(("mario", "verdi")), None] {
        refused(
            &auth_client(Peer::Linerate, port, &k, creds, &[]),
            &format!("{creds:?}"),
            "",
        );
    }
}

/// With `-1`, refused attempts do not use up the one test (iperf3's rule):
/// the server stays up through them, serves the right client, then exits.
#[test]
fn a_one_off_server_outlasts_refused_attempts() {
    if should_skip(
        "a_one_off_server_outlasts_refused_attempts",
        &[require_program("openssl")],
    ) {
        return;
    }
    let k = keys();
    let (mut srv, port, _) = auth_server(Peer::Linerate, &k, &k.private_pkcs1, &["-1"]);
    for _ in 0..2 {
        refused(
            &auth_client(Peer::Linerate, port, &k, Some(("mario", "no")), &[]),
            "wrong password",
            DENIED,
        );
        std::thread::sleep(Duration::from_millis(200));
        assert!(srv.is_running(), "the one-off server left after a refusal");
    }
    ran(
        &auth_client(Peer::Linerate, port, &k, Some(("mario", "rossi")), &[]),
        "right password",
    );
    let out = srv.wait(Duration::from_secs(10));
    assert!(out.status.success(), "{out:?}");
}

/// Configuration mistakes fail at once with iperf3's messages, exit 1.
#[test]
fn auth_configuration_errors_say_what_is_wrong() {
    if should_skip(
        "auth_configuration_errors_say_what_is_wrong",
        &[require_program("openssl")],
    ) {
        return;
    }
    let k = keys();
    let junk = k._dir.path().join("junk.pem");
    std::fs::write(&junk, "not a key\n").unwrap();
    let none = k._dir.path().join("absent.csv");
    let port = free_port().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["-s", "-p", &port, "--rsa-private-key-path", p(&k.private)],
            "you must specify a path to a valid RSA private key and a user credential file",
        ),
        (
            vec!["-s", "-p", &port, "--authorized-users-path", p(&k.users)],
            "you must specify a path to a valid RSA private key and a user credential file",
        ),
        (
            vec![
                "-s",
                "-p",
                &port,
                "--rsa-private-key-path",
                p(&junk),
                "--authorized-users-path",
                p(&k.users),
            ],
            "you must specify a path to a valid RSA private key and a user credential file",
        ),
        (
            vec![
                "-s",
                "-p",
                &port,
                "--rsa-private-key-path",
                p(&k.private),
                "--authorized-users-path",
                p(&none),
            ],
            "cannot access authorized users file",
        ),
        (
            vec!["-c", "127.0.0.1", "-p", &port, "--username", "mario"],
            "you must specify a username, password, and path to a valid RSA public key",
        ),
        (
            vec![
                "-c",
                "127.0.0.1",
                "-p",
                &port,
                "--username",
                "mario",
                "--rsa-public-key-path",
                p(&junk),
            ],
            "you must specify a username, password, and path to a valid RSA public key",
        ),
        (
            vec![
                "-c",
                "127.0.0.1",
                "-p",
                &port,
                "--username",
                "mario",
                "--rsa-public-key-path",
                p(&k.public),
            ],
            "no IPERF3_PASSWORD, and no terminal to ask on",
        ),
        (
            vec!["-s", "-p", &port, "--username", "mario"],
            "client only: --username",
        ),
        (
            vec!["-c", "127.0.0.1", "--rsa-private-key-path", p(&k.private)],
            "server only: --rsa-private-key-path",
        ),
        (
            vec!["-s", "--time-skew-threshold", "0"],
            "--time-skew-threshold",
        ),
    ];
    for (args, says) in cases {
        let o = Proc::spawn(
            linerate()
                .args(&args)
                .stdin(Stdio::null())
                .env_remove("IPERF3_PASSWORD"),
        )
        .wait(Duration::from_secs(10));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_ne!(o.status.code(), Some(0), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// `-d` on both sides: the control messages by name and as JSON, the
/// authentication result, each stream at level 3; never the token or the
/// password.
#[test]
fn debug_output_shows_the_exchange_but_no_secrets() {
    if should_skip(
        "debug_output_shows_the_exchange_but_no_secrets",
        &[require_program("openssl")],
    ) {
        return;
    }
    let k = keys();
    let (srv, port, _) = auth_server(Peer::Linerate, &k, &k.private, &["-d", "-1"]);
    let c = auth_client(
        Peer::Linerate,
        port,
        &k,
        Some(("mario", "rossi")),
        &["-d=3"],
    );
    ran(&c, "-d client");
    let s = srv.wait(Duration::from_secs(10));
    let (ce, se) = (
        String::from_utf8_lossy(&c.stderr).to_string(),
        String::from_utf8_lossy(&s.stderr).to_string(),
    );
    for want in [
        "debug: sent cookie",
        r#""authtoken":"(hidden)""#,
        "debug: received CREATE_STREAMS",
        "debug: stream 1 connected",
        "debug: sent TEST_END",
        "debug: received DISPLAY_RESULTS",
    ] {
        assert!(ce.contains(want), "client lacks {want:?}:\n{ce}");
    }
    for want in [
        "received parameters",
        "Authentication succeeded for user 'mario'",
        "sent TEST_START + TEST_RUNNING",
        "received TEST_END",
    ] {
        assert!(se.contains(want), "server lacks {want:?}:\n{se}");
    }
    let token_like = ce
        .lines()
        .chain(se.lines())
        .any(|l| l.contains("rossi") || l.contains("\"authtoken\":\"") && !l.contains("(hidden)"));
    assert!(!token_like, "a secret in the debug output:\n{ce}\n{se}");
}
