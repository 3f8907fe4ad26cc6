//! Authentication per task, end to end on 127.0.0.1: participant 1's
//! `run` (a one-test server asking for the task's credentials) refuses a
//! client without them and one with another task's, then serves the
//! client with them, and its result is the measurement.

use linerate_iperf::client::run as client_run;
use linerate_pscheduler::{Method, ParticipantData, answer, plan};
use serde_json::{Value, json};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// participant-data of participant `p` for `test`, typed.
fn data(p: u64, test: &Value) -> ParticipantData {
    let input = json!({ "participant": p, "test": test }).to_string();
    let a = answer(Method::ParticipantData, &input).expect("participant-data");
    serde_json::from_str(&a.json).expect("participant-data is its type")
}

/// A run's start already past: the run starts at once.
const PAST: &str = "2024-05-01T12:00:00+00:00";

#[test]
fn the_one_test_server_serves_only_the_task_s_client() {
    let test = json!({
        "type": "throughput",
        "spec": {
            "schema": 1, "source": "127.0.0.1", "dest": "127.0.0.1",
            "duration": "PT1S", "link-rtt": "PT0.05S"
        }
    });
    let port = free_port();
    let mut server_data = data(1, &test);
    server_data.server_port = Some(port.into());
    let auth = server_data
        .auth
        .clone()
        .expect("participant 1 makes credentials");
    let other = data(1, &test).auth.expect("another task's");
    assert_ne!(auth.username, other.username);
    let input = json!({
        "schedule": { "start": PAST },
        "test": test,
        "participant": 1,
        "participant-data": [data(0, &test), server_data]
    })
    .to_string();
    let server = std::thread::spawn(move || answer(Method::Run, &input));
    std::thread::sleep(Duration::from_millis(700));
    let spec = serde_json::from_value(test["spec"].clone()).unwrap();
    let stop = AtomicBool::new(false);
    for (who, creds) in [("no credentials", None), ("another task's", Some(&other))] {
        let p = plan::client(&spec, port, creds).unwrap();
        let e = client_run(&p.opts, &mut std::io::sink(), &stop)
            .expect_err(&format!("a client with {who} is refused"));
        assert!(!e.ran(), "{who}: {e}");
        assert!(e.to_string().contains("authoriz"), "{who}: {e}");
    }
    let p = plan::client(&spec, port, Some(&auth)).unwrap();
    assert!(
        p.cmdline
            .contains(&format!(" --username {} ", auth.username))
    );
    let began = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    // At once after the refusals: a refused test leaves the one place to
    // the next client (the server holds it while the refused one ends).
    client_run(&p.opts, &mut std::io::sink(), &stop).expect("the task's client runs");
    let a = server.join().unwrap().expect("run");
    let r: Value = serde_json::from_str(&a.json).unwrap();
    assert_eq!(r["succeeded"], json!(true), "{r}");
    // The server received (its own sum_sent is 0: it sent nothing).
    let received = &r["summary"]["summary"]["receiver-throughput-bits"];
    assert!(received.as_f64().unwrap() > 1e6, "{r}");
    // The server's users file is named, no secret is shown.
    let diags = r["diags"].as_str().unwrap();
    assert!(diags.contains(" --authorized-users-path "), "{diags}");
    assert!(!diags.contains(&auth.password) && !diags.contains("PRIVATE KEY"));
    assert!(
        SystemTime::now().duration_since(UNIX_EPOCH).unwrap() - began < Duration::from_secs(10)
    );
}
