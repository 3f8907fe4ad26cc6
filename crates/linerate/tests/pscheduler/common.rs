//! Fixtures, one method run with its answer, and reading its output.

use serde_json::Value;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/pscheduler/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// What one method did: exit code, its JSON (Null if none), standard error.
#[derive(Debug)]
pub struct Answer {
    pub code: i32,
    pub json: Value,
    pub stderr: String,
}

/// Runs `linerate pscheduler METHOD` with `input` on standard input, at
/// most `limit` (then it is killed by its PID). `config` is the
/// configuration file it reads (a missing one: the defaults).
pub fn method_with(method: &str, input: &str, config: &str, limit: Duration) -> Answer {
    let mut child = Command::new(env!("CARGO_BIN_EXE_linerate"))
        .args(["pscheduler", method])
        .env("LINERATE_PSCHEDULER_CONFIG", config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn linerate");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        out.read_to_string(&mut o).unwrap();
        err.read_to_string(&mut e).unwrap();
        (o, e)
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("linerate pscheduler {method} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = reader.join().unwrap();
    Answer {
        code: status.code().unwrap_or(-1),
        json: serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stderr,
    }
}

pub const NO_CONFIG: &str = "/nonexistent/linerate-pscheduler.conf";

pub fn method(method: &str, input: &Value) -> Answer {
    method_with(
        method,
        &input.to_string(),
        NO_CONFIG,
        Duration::from_secs(30),
    )
}

/// The method's JSON, which must have exited 0.
pub fn ok(m: &str, input: &Value) -> Value {
    let a = method(m, input);
    assert_eq!(a.code, 0, "{m}: {}", a.stderr);
    a.json
}
