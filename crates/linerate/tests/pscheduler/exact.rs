//! Each method on fixtures, where the output is exact.

use crate::common::{Answer, NO_CONFIG, fixture, method, method_with, ok};
use serde_json::{Value, json};
use std::time::Duration;

#[test]
fn enumerate_describes_the_tool() {
    // Shape: pscheduler-tool-iperf3/iperf3/enumerate, validated against
    // #/pScheduler/PluginEnumeration/Tool (python-pscheduler jsonval.py).
    let a = method_with("enumerate", "", NO_CONFIG, Duration::from_secs(10));
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(
        a.json,
        json!({
            "schema": 1,
            "name": "linerate",
            "description": "Measure throughput (iperf3-compatible) and round-trip time (rr) with linerate",
            "version": env!("CARGO_PKG_VERSION"),
            "tests": ["throughput", "rtt"],
            "preference": -10,
            "maintainer": { "name": "linerate maintainers" }
        })
    );
}

#[test]
fn can_run_takes_every_field_it_maps() {
    // Input: the task's test, as database/tool.sql's tool_can_run_test
    // passes it; every throughput_v7 field linerate maps
    // (pscheduler-test-throughput/throughput/validate.py).
    assert_eq!(
        ok("can-run", &fixture("can-run-throughput.json")),
        json!({ "can-run": true })
    );
    // What the iperf3 tool's can-run takes (issue 40): a negative
    // affinity, a fractional omit, an interval under 0.1 s or over an
    // hour, a zero duration, fq-rate without bandwidth.
    for (k, v) in [
        ("client-cpu-affinity", json!(-1)),
        ("omit", json!("PT0.5S")),
        ("interval", json!("PT0.05S")),
        ("interval", json!("PT1H0.5S")),
        ("duration", json!("PT0S")),
        ("fq-rate", json!(2_000_000_000u64)),
    ] {
        let mut spec = json!({ "schema": 7, "dest": "198.18.0.2" });
        spec[k] = v;
        let test = json!({ "type": "throughput", "spec": spec });
        assert_eq!(ok("can-run", &test), json!({ "can-run": true }), "{test}");
    }
    // An rtt_v4 spec (pscheduler-test-rtt/rtt/validate.py) for rr.
    assert_eq!(
        ok("can-run", &fixture("can-run-rtt.json")),
        json!({ "can-run": true })
    );
}

#[test]
fn can_run_says_why_not() {
    let reasons = |f: &str| {
        let v = ok("can-run", &fixture(f));
        assert_eq!(v["can-run"], json!(false), "{f}: {v}");
        v["reasons"].clone()
    };
    // Fields linerate has no flag for (nuttcp's bandwidth-strict and
    // reverse-connections), and values that are not of their kind; the
    // wording of the first as pscheduler-tool-iperf3/iperf3/can-run's.
    assert_eq!(
        reasons("can-run-throughput-fields.json"),
        // (In the order the spec gives its fields.)
        json!([
            "linerate does not support the bandwidth-strict option",
            "linerate does not support the reverse-connections option",
            "parallel must be a whole number above 0, not 0",
            "ip-version must be 4 or 6, not 5",
            "duration must be an ISO 8601 duration (PT10S), not \"10 seconds\""
        ])
    );
    // pscheduler-tool-iperf3's refusal, in its words; burst-size is
    // linerate's (the iperf3 tool refuses the field).
    assert_eq!(
        reasons("can-run-throughput-semantics.json"),
        json!(["Cannot have bandwidth and fq-rate set simultaneously."])
    );
    let mut burst = fixture("can-run-throughput-semantics.json");
    burst["spec"] = json!({ "dest": "198.18.0.2", "burst-size": 10 });
    assert_eq!(
        ok("can-run", &burst)["reasons"],
        json!(["burst-size needs a bandwidth (linerate's -b RATE/BURST)"])
    );
    // pscheduler's json_check_schema wording.
    assert_eq!(
        reasons("can-run-throughput-schema.json"),
        json!(["Schema version 8 is not supported (highest is 7)"])
    );
    // A latency spec (pscheduler-test-latency/latency/validate.py).
    assert_eq!(
        reasons("can-run-latency.json"),
        json!([
            "linerate measures round trips (the rtt test, through linerate rr), not the one-way delays of the latency test"
        ])
    );
    assert_eq!(
        reasons("can-run-rtt-refused.json"),
        json!([
            "linerate does not support the ttl option",
            "linerate does not support the ip-tos option",
            "linerate does not support the flow-label option",
            "linerate does not support the fragment option",
            "linerate does not support the suppress-loopback option"
        ])
    );
    assert_eq!(
        reasons("can-run-rtt-interval.json"),
        json!([
            "interval must be 1/N of a second (PT1S, PT0.5S, PT0.1S): linerate rr paces whole requests per second, and PT2S is not"
        ])
    );
    assert_eq!(
        ok("can-run", &json!({ "spec": { "dest": "x" } })),
        json!({ "can-run": false, "reasons": ["Missing test type"] })
    );
    assert_eq!(
        ok(
            "can-run",
            &json!({ "type": "rtt", "spec": { "dest": "x", "schema": "2" } })
        ),
        json!({ "can-run": false, "reasons": ["schema must be a whole number above 0, not \"2\""] })
    );
    assert_eq!(
        ok("can-run", &json!({ "type": "rtt" })),
        json!({ "can-run": false, "reasons": ["Missing test specification"] })
    );
}

#[test]
fn duration_of_a_spec() {
    // Input: the task's test (database/task.sql). Throughput counts as
    // pscheduler-tool-iperf3/iperf3/duration: set-up (1 s per 50 ms of
    // link-rtt, PT0.2S by default) + omit + duration (10 s by default)
    // + 3 s wait + 2 s shut-down.
    let d = |f: &str| ok("duration", &fixture(f))["duration"].clone();
    assert_eq!(d("duration-throughput-default.json"), json!("PT19S"));
    // 6 + 5 + 30 + 3 + 2
    assert_eq!(d("duration-throughput.json"), json!("PT46S"));
    // rtt: 10 requests 0.5 s apart, the last one's 1 s timeout, 2 s.
    assert_eq!(d("duration-rtt.json"), json!("PT8S"));
}

/// participant-data's answer with the configuration file `config`.
fn participant_data_with(input: &Value, config: &str) -> Answer {
    method_with(
        "participant-data",
        &input.to_string(),
        config,
        Duration::from_secs(30),
    )
}

#[test]
fn participant_data_gives_the_server_port_and_credentials() {
    // Input: database/run.sql's {"participant", "test"}. Participant 1
    // says its port and makes the task's credentials as
    // pscheduler-tool-iperf3/iperf3/participant-data does (schema 3,
    // `_auth`: private, public, username, password, credentials).
    let mut input = fixture("participant-data.json");
    let d = ok("participant-data", &input);
    assert_eq!(
        (&d["schema"], &d["linerate-version"], &d["server_port"]),
        (&json!(3), &json!(env!("CARGO_PKG_VERSION")), &json!(5201))
    );
    let auth = d["_auth"].as_object().expect("_auth");
    let keys: Vec<&str> = auth.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        ["private", "public", "username", "password", "credentials"]
    );
    let user = auth["username"].as_str().unwrap();
    let password = auth["password"].as_str().unwrap();
    assert_eq!((user.len(), password.len()), (20, 20));
    assert!(
        auth["private"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN RSA PRIVATE KEY-----")
    );
    assert!(
        auth["public"]
            .as_str()
            .unwrap()
            .starts_with("-----BEGIN PUBLIC KEY-----")
    );
    assert!(
        auth["credentials"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{user},")),
        "{auth:?}"
    );
    // A new task, new credentials.
    let again = ok("participant-data", &input);
    assert_ne!(again["_auth"]["username"], auth["username"]);
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(conf.path(), "[linerate]\n# firewall\nserver_port = 15201\n").unwrap();
    let a = participant_data_with(&input, conf.path().to_str().unwrap());
    assert_eq!(a.json["server_port"], json!(15201), "{}", a.stderr);
    input["participant"] = json!(0);
    assert_eq!(
        ok("participant-data", &input),
        json!({ "schema": 3, "linerate-version": env!("CARGO_PKG_VERSION") })
    );
    input["participant"] = json!(2);
    let a = method("participant-data", &input);
    assert_eq!(a.code, 2);
    assert_eq!(
        a.stderr,
        "linerate: error: participant: 2 is not a participant of this test\n"
    );
}

#[test]
fn a_configuration_file_never_stops_participant_data() {
    // Issue 40's inputs: a key the tool does not know, an inline comment,
    // a file it cannot read. Each is a warning on standard error (which
    // pScheduler logs); the method answers and exits 0.
    let input = fixture("participant-data.json");
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        conf.path(),
        "[linerate]\nlinerate_cmd = /opt/linerate/bin/linerate\nserver_port=5999 # fw\n",
    )
    .unwrap();
    let a = participant_data_with(&input, conf.path().to_str().unwrap());
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(a.json["server_port"], json!(5999));
    assert_eq!(
        a.stderr,
        format!(
            "linerate: warning: {}:2: unknown key 'linerate_cmd' ignored\n",
            conf.path().display()
        )
    );
    // Unreadable (a directory cannot be read as a file, even by root).
    let dir = tempfile::tempdir().unwrap();
    let a = participant_data_with(&input, dir.path().to_str().unwrap());
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(a.json["server_port"], json!(5201));
    let head = format!("linerate: warning: {}: ", dir.path().display());
    assert!(
        a.stderr.starts_with(&head) && a.stderr.ends_with("; proceeding with the defaults\n"),
        "{}",
        a.stderr
    );
}

#[test]
fn bad_input_exits_2_with_the_reason() {
    for (m, input, said) in [
        (
            "can-run",
            "not json",
            "linerate: error: the input is not JSON: expected ident at line 1 column 2\n",
        ),
        (
            "duration",
            "[1]",
            "linerate: error: the input: is not a JSON object\n",
        ),
        (
            "run",
            r#"{"participant": 0, "test": {"type": "throughput", "spec": {"dest": "x"}}}"#,
            "linerate: error: the input has no 'participant-data'\n",
        ),
        (
            "merged-results",
            r#"{"test": {"type": "throughput", "spec": {"dest": "x"}}, "results": [{}]}"#,
            "linerate: error: results: expected 2 results in merged-results, got 1\n",
        ),
    ] {
        let a = method_with(m, input, NO_CONFIG, Duration::from_secs(10));
        assert_eq!((a.code, a.stderr.as_str()), (2, said), "{m} {input}");
        assert_eq!(a.json, Value::Null);
    }
}

#[test]
fn merged_results_of_a_reverse_test_is_the_senders() {
    // Input: the runner's merge_input {"test", "results"}; merged as
    // pscheduler-tool-iperf3/iperf3/merged-results does: with reverse,
    // participant 1's result (the sender) with participant 0's
    // receiver-throughput-bits, diags of both.
    let input = fixture("merged-throughput-reverse.json");
    let m = ok("merged-results", &input);
    let mut want = input["results"][1].clone();
    want["summary"]["summary"]["receiver-throughput-bits"] = json!(49_000_000.0);
    want["diags"] = json!(
        "Participant 0:\nlinerate -c 198.18.0.2 -p 5201 -t 1 -J -R\n\
         Participant 1:\nlinerate -s -1 -J -p 5201\n"
    );
    assert_eq!(m, want);
    // Not reversed: participant 0's.
    let mut forward = input.clone();
    forward["test"]["spec"]["reverse"] = json!(false);
    let m = ok("merged-results", &forward);
    assert_eq!(m["summary"], input["results"][0]["summary"]);
    assert_eq!(m["intervals"], input["results"][0]["intervals"]);
    // Reversed, but the sender gave no result: no measurement.
    let mut lost = input.clone();
    lost["results"][1] = Value::Null;
    assert_eq!(
        ok("merged-results", &lost),
        json!({
            "succeeded": false,
            "error": "participant 1 (the sender) gave no result",
            "diags": "Participant 0:\nlinerate -c 198.18.0.2 -p 5201 -t 1 -J -R\n"
        })
    );
}

#[test]
fn merged_results_of_a_failed_participant_is_a_failure() {
    // Issue 40: [participant 0 failed, participant 1 ok], TCP, not
    // reversed and reversed: `succeeded: false` as the iperf3 tool's,
    // never the server's 0.0 as a measurement.
    let refused = "linerate returned an error: unable to connect to server 198.18.0.2:5201: Connection refused (os error 111)";
    let mut input = fixture("merged-throughput-reverse.json");
    input["results"][0] = json!({
        "succeeded": false,
        "error": refused,
        "diags": "linerate -c 198.18.0.2 -p 5201 -t 1 -J"
    });
    for (reverse, side) in [(false, "the sender"), (true, "the receiver")] {
        input["test"]["spec"]["reverse"] = json!(reverse);
        assert_eq!(
            ok("merged-results", &input),
            json!({
                "succeeded": false,
                "error": format!("participant 0 ({side}) failed: {refused}"),
                "diags": "Participant 0:\nlinerate -c 198.18.0.2 -p 5201 -t 1 -J\n\
                          Participant 1:\nlinerate -s -1 -J -p 5201\n"
            }),
            "reverse {reverse}"
        );
    }
}
