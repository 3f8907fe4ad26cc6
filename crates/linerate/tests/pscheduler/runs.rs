//! Real runs on 127.0.0.1 through `run`, their merged figures checked
//! against the -J documents kept in their diags.

use crate::common::{fixture, method, method_with, ok};
use crate::support;
use crate::support::{Proc, free_port};
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// `t` as pScheduler writes a run's start (UTC).
fn iso_utc(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // H. Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// The -J document a run kept in its diags (the first, after the command
/// line; a loopback run's diags have the client's, then the server's).
fn diag_doc(result: &Value) -> Value {
    let diags = result["diags"].as_str().expect("diags");
    let at = diags.find("\n\n{").expect("a JSON document in diags") + 2;
    serde_json::Deserializer::from_str(&diags[at..])
        .into_iter::<Value>()
        .next()
        .expect("a document")
        .expect("the document parses")
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

/// `a` equals `b` to within rounding.
fn close(a: &Value, b: &Value, what: &str) {
    let (a, b) = (f(a), f(b));
    assert!(
        (a - b).abs() <= 1e-9 * b.abs().max(1.0),
        "{what}: {a} is not {b}"
    );
}

/// A two-participant throughput run on 127.0.0.1: participant 1's `run`
/// and participant 0's at once, then merged-results. Returns both
/// results and the merged one.
fn two_participants(spec: Value) -> (Value, Value, Value) {
    // Input: the runner's tool_input (daemons/runner).
    let mut input = fixture("run-throughput.json");
    let start = SystemTime::now() + Duration::from_secs(1);
    input["schedule"]["start"] = json!(iso_utc(start));
    for (k, v) in spec.as_object().unwrap() {
        input["test"]["spec"][k] = v.clone();
    }
    // Each participant's data as its participant-data made it: the
    // server's credentials for this task, handed to both.
    let data = |p: u64| {
        ok(
            "participant-data",
            &json!({ "participant": p, "test": input["test"] }),
        )
    };
    input["participant-data"] = json!([data(0), data(1)]);
    input["participant-data"][1]["server_port"] = json!(free_port());
    let secret = input["participant-data"][1]["_auth"]["password"].clone();
    let mut server = input.clone();
    server["participant"] = json!(1);
    let p1 = std::thread::spawn(move || method("run", &server));
    let r0 = method("run", &input);
    let r1 = p1.join().unwrap();
    assert_eq!((r0.code, r1.code), (0, 0), "{} {}", r0.stderr, r1.stderr);
    let (r0, r1) = (r0.json, r1.json);
    assert_eq!(r0["succeeded"], json!(true), "participant 0: {r0}");
    assert_eq!(r1["succeeded"], json!(true), "participant 1: {r1}");
    // The client waited for the start and the server's 3 s.
    let began = diag_doc(&r0)["start"]["timestamp"]["timesecs"]
        .as_u64()
        .unwrap();
    let start_s = start.duration_since(UNIX_EPOCH).unwrap().as_secs();
    assert!(
        began + 1 >= start_s + 3,
        "client began at {began}, start {start_s}"
    );
    // Authenticated, and nothing secret in what the runs say.
    let said = format!("{r0}{r1}");
    assert!(said.contains(" --username "), "{said}");
    assert!(
        !said.contains(secret.as_str().unwrap()) && !said.contains("PRIVATE KEY"),
        "{said}"
    );
    // Input: the runner's merge_input.
    let merged = ok(
        "merged-results",
        &json!({ "test": input["test"], "results": [r0, r1] }),
    );
    (r0, r1, merged)
}

/// Each interval of the merged result is the document's, renamed.
fn intervals_match(merged: &Value, doc: &Value) {
    let (ours, theirs) = (
        merged["intervals"].as_array().unwrap(),
        doc["intervals"].as_array().unwrap(),
    );
    assert_eq!(ours.len(), theirs.len());
    assert!(!ours.is_empty());
    for (o, t) in ours.iter().zip(theirs) {
        close(
            &o["summary"]["throughput-bits"],
            &t["sum"]["bits_per_second"],
            "interval",
        );
        assert_eq!(o["summary"]["throughput-bytes"], t["sum"]["bytes"]);
        assert_eq!(o["summary"]["omitted"], t["sum"]["omitted"]);
        assert_eq!(
            o["streams"].as_array().unwrap().len(),
            t["streams"].as_array().unwrap().len()
        );
        for (os, ts) in o["streams"]
            .as_array()
            .unwrap()
            .iter()
            .zip(t["streams"].as_array().unwrap())
        {
            assert_eq!(os["stream-id"], ts["socket"]);
            close(
                &os["throughput-bits"],
                &ts["bits_per_second"],
                "stream interval",
            );
        }
    }
}

#[test]
fn throughput_tcp_two_participants() {
    let (r0, r1, m) = two_participants(json!({
        "parallel": 2, "omit": "PT1S", "interval": "PT1S", "window-size": 1048576
    }));
    let client = diag_doc(&r0);
    let ts = &client["start"]["test_start"];
    assert_eq!(
        (
            &ts["protocol"],
            &ts["num_streams"],
            &ts["omit"],
            &ts["duration"],
            &ts["reverse"]
        ),
        (&json!("TCP"), &json!(2), &json!(1), &json!(2), &json!(0)),
        "{ts}"
    );
    assert_eq!(
        diag_doc(&r1)["start"]["test_start"]["num_streams"],
        json!(2)
    );
    let (sum, end) = (&m["summary"]["summary"], &client["end"]);
    close(
        &sum["throughput-bits"],
        &end["sum_sent"]["bits_per_second"],
        "throughput-bits",
    );
    assert!(f(&sum["throughput-bits"]) > 1e6, "{sum}");
    assert_eq!(sum["throughput-bytes"], end["sum_sent"]["bytes"]);
    assert_eq!(sum["retransmits"], end["sum_sent"]["retransmits"]);
    close(
        &sum["receiver-throughput-bits"],
        &end["sum_received"]["bits_per_second"],
        "receiver-throughput-bits",
    );
    let streams = m["summary"]["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 2);
    for (s, e) in streams.iter().zip(end["streams"].as_array().unwrap()) {
        close(
            &s["throughput-bits"],
            &e["sender"]["bits_per_second"],
            "stream",
        );
        assert_eq!(s["rtt"], e["sender"]["mean_rtt"]);
        assert_eq!(s["retransmits"], e["sender"]["retransmits"]);
    }
    // 1 s omitted and 2 s measured, every second.
    intervals_match(&m, &client);
    assert_eq!(m["intervals"][0]["summary"]["omitted"], json!(true));
    assert_eq!(
        m["intervals"].as_array().unwrap().last().unwrap()["summary"]["omitted"],
        json!(false)
    );
    let diags = m["diags"].as_str().unwrap();
    assert!(
        diags.starts_with("Participant 0:\n") && diags.contains("\nParticipant 1:\n"),
        "{diags}"
    );
    assert!(
        !diags.contains("system_info\": \"Linux"),
        "system_info is redacted"
    );
}

#[test]
fn throughput_udp_two_participants() {
    let (r0, r1, m) = two_participants(json!({
        "udp": true, "bandwidth": 20_000_000, "ip-version": 4, "buffer-length": 1200
    }));
    let client = diag_doc(&r0);
    let ts = &client["start"]["test_start"];
    assert_eq!(
        (&ts["protocol"], &ts["blksize"]),
        (&json!("UDP"), &json!(1200)),
        "{ts}"
    );
    assert_eq!(client["start"]["target_bitrate"], json!(20_000_000));
    assert!(r1["diags"].as_str().unwrap().contains(" -B 127.0.0.1 -4"));
    let (sum, end) = (&m["summary"]["summary"], &client["end"]);
    close(
        &sum["throughput-bits"],
        &end["sum_sent"]["bits_per_second"],
        "throughput-bits",
    );
    // The bandwidth asked for is what was sent.
    let bits = f(&sum["throughput-bits"]);
    assert!(
        (bits - 20e6).abs() < 2e6,
        "sent {bits} bit/s, asked 20 Mbit/s"
    );
    assert_eq!(sum["sent"], end["sum_sent"]["packets"]);
    // Loss and jitter are the receiver's.
    assert_eq!(sum["lost"], end["sum_received"]["lost_packets"]);
    close(&sum["jitter"], &end["sum_received"]["jitter_ms"], "jitter");
    close(
        &sum["receiver-throughput-bits"],
        &end["sum_received"]["bits_per_second"],
        "receiver-throughput-bits",
    );
    let stream = &m["summary"]["streams"][0];
    close(
        &stream["jitter"],
        &end["streams"][0]["udp"]["jitter_ms"],
        "stream jitter",
    );
    assert_eq!(stream["sent"], end["streams"][0]["udp"]["packets"]);
    intervals_match(&m, &client);
}

#[test]
fn throughput_reverse_two_participants() {
    let (r0, r1, m) = two_participants(json!({ "reverse": true, "bandwidth": 50_000_000 }));
    let (client, server) = (diag_doc(&r0), diag_doc(&r1));
    assert_eq!(client["start"]["test_start"]["reverse"], json!(1));
    // The sender is the server: its figures, intervals and TCP state; the
    // receiver's rate from the client.
    let sum = &m["summary"]["summary"];
    close(
        &sum["throughput-bits"],
        &server["end"]["sum_sent"]["bits_per_second"],
        "throughput-bits",
    );
    let bits = f(&sum["throughput-bits"]);
    assert!(
        (bits - 50e6).abs() < 7.5e6,
        "sent {bits} bit/s, asked 50 Mbit/s"
    );
    assert_eq!(sum["retransmits"], server["end"]["sum_sent"]["retransmits"]);
    close(
        &sum["receiver-throughput-bits"],
        &client["end"]["sum_received"]["bits_per_second"],
        "receiver-throughput-bits",
    );
    intervals_match(&m, &server);
    let first = &m["intervals"][0]["streams"][0];
    assert_eq!(first["rtt"], server["intervals"][0]["streams"][0]["rtt"]);
    assert_eq!(
        first["tcp-window-size"],
        server["intervals"][0]["streams"][0]["snd_cwnd"]
    );
}

#[test]
fn throughput_loopback_runs_both_ends() {
    // One participant runs the server and the client, on the configured port.
    let port = free_port();
    let conf = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(conf.path(), format!("server_port = {port}\n")).unwrap();
    let mut input = fixture("run-throughput.json");
    input["schedule"]["start"] = json!(iso_utc(SystemTime::now()));
    input["test"]["spec"]["loopback"] = json!(true);
    input["test"]["spec"]["duration"] = json!("PT1S");
    input["participant-data"] = json!([{ "schema": 1 }]);
    let a = method_with(
        "run",
        &input.to_string(),
        conf.path().to_str().unwrap(),
        Duration::from_secs(30),
    );
    assert_eq!(a.code, 0, "{}", a.stderr);
    assert_eq!(a.json["succeeded"], json!(true), "{}", a.json);
    let diags = a.json["diags"].as_str().unwrap();
    assert!(
        diags.starts_with("Client:\n\n") && diags.contains("\n\nServer:\n\n"),
        "{diags}"
    );
    assert!(diags.contains(&format!(" -p {port} ")), "{diags}");
    let m = ok(
        "merged-results",
        &json!({ "test": input["test"], "results": [a.json] }),
    );
    let client = diag_doc(&a.json);
    close(
        &m["summary"]["summary"]["throughput-bits"],
        &client["end"]["sum_sent"]["bits_per_second"],
        "throughput-bits",
    );
}

#[test]
fn throughput_server_without_a_client_says_so() {
    // Participant 1 alone: its server gives up after the client's wait
    // (3 s) and the set-up (1 s for a link-rtt of 50 ms), not at the kill.
    let mut input = fixture("run-throughput.json");
    input["schedule"]["start"] = json!(iso_utc(SystemTime::now()));
    input["participant"] = json!(1);
    input["participant-data"][1]["server_port"] = json!(free_port());
    input["test"]["spec"]["link-rtt"] = json!("PT0.05S");
    let began = Instant::now();
    let r = ok("run", &input);
    assert!(
        began.elapsed() < Duration::from_secs(8),
        "{:?}",
        began.elapsed()
    );
    assert_eq!(
        (&r["succeeded"], &r["error"]),
        (
            &json!(false),
            &json!(
                "no client came to the server before its --idle-timeout (is participant 0 running?)"
            )
        )
    );
    assert!(
        r["diags"].as_str().unwrap().contains(" -s -1 -J -p "),
        "{r}"
    );
}

/// Whether something is bound to UDP `port` on this host (/proc/net/udp).
fn udp_bound(port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    std::fs::read_to_string("/proc/net/udp").is_ok_and(|t| t.lines().any(|l| l.contains(&hex)))
}

/// Seconds of an ISO 8601 duration of seconds only (PT0.000189S).
fn iso_s(v: &Value) -> f64 {
    let s = v
        .as_str()
        .unwrap_or_else(|| panic!("{v} is not a duration"));
    s.strip_prefix("PT")
        .and_then(|s| s.strip_suffix('S'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{s} is not PTnS"))
}

#[test]
fn rtt_through_rr() {
    let port = free_port();
    let _server = Proc::spawn(
        support::linerate()
            .args(["rr", "server", "-B", "127.0.0.1", "-p", &port.to_string()])
            .args(["--cores", "0", "-t", "20"]),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while !udp_bound(port) {
        assert!(Instant::now() < deadline, "no rr server on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Input: the runner's tool_input for an rtt_v4 spec.
    let mut input = fixture("run-rtt.json");
    input["schedule"]["start"] = json!(iso_utc(SystemTime::now()));
    input["test"]["spec"]["port"] = json!(port);
    let r = ok("run", &input);
    assert_eq!(r["succeeded"], json!(true), "{r}");
    let doc = diag_doc(&r);
    // 5 requests 0.2 s apart of 100 bytes, 1 s timeout.
    assert_eq!(doc["load"]["rate_tps"], json!(5.0));
    assert_eq!(doc["request_bytes"], json!(100));
    assert_eq!(doc["timeout_ms"], json!(1000.0));
    assert_eq!((&r["sent"], &doc["counts"]["sent"]), (&json!(5), &json!(5)));
    assert_eq!(r["received"], doc["counts"]["completed"]);
    assert_eq!((&r["lost"], &r["loss"]), (&json!(0), &json!(0.0)));
    for k in ["min", "mean", "max"] {
        let want = f(&doc["latency_us"][k]) / 1e6;
        assert!(
            (iso_s(&r[k]) - want).abs() < 1e-6,
            "{k}: {} vs {want}",
            r[k]
        );
    }
    assert!(iso_s(&r["min"]) <= iso_s(&r["mean"]) && iso_s(&r["mean"]) <= iso_s(&r["max"]));
    // The ping tools' shape: a standard deviation, at most the spread.
    let sd = iso_s(&r["stddev"]);
    assert!(
        sd <= iso_s(&r["max"]) - iso_s(&r["min"]) + 1e-6,
        "stddev {sd}"
    );
    // Each reply listed as ping's: numbered from 1 in order, its length
    // and who answered, its round trip within [min, max] (the histogram's
    // three digits), no reorder on one loopback flow.
    let trips = r["roundtrips"].as_array().unwrap();
    assert_eq!(trips.len(), 5, "{r}");
    for (i, t) in trips.iter().enumerate() {
        assert_eq!(t["seq"], json!(i + 1), "{t}");
        assert_eq!((&t["length"], &t["ip"]), (&json!(100), &json!("127.0.0.1")));
        let rtt = iso_s(&t["rtt"]);
        assert!(
            rtt >= iso_s(&r["min"]) * 0.99 && rtt <= iso_s(&r["max"]) * 1.01,
            "{t} against {} .. {}",
            r["min"],
            r["max"]
        );
    }
    assert_eq!(r["reorders"], json!(0));
    // merged-results: the one participant's (as pscheduler-tool-ping's).
    let m = ok(
        "merged-results",
        &json!({ "test": input["test"], "results": [r] }),
    );
    for k in [
        "succeeded",
        "sent",
        "received",
        "lost",
        "loss",
        "min",
        "mean",
        "max",
        "stddev",
        "roundtrips",
        "reorders",
        "diags",
    ] {
        assert_eq!(m[k], r[k], "{k}");
    }
    assert_eq!(m["schema"], json!(1));
}

#[test]
fn rtt_without_an_rr_server_fails_with_the_reason() {
    let mut input = fixture("run-rtt.json");
    input["schedule"]["start"] = json!(iso_utc(SystemTime::now()));
    input["test"]["spec"]["port"] = json!(free_port());
    input["test"]["spec"]["count"] = json!(2);
    let r = ok("run", &input);
    assert_eq!(r["succeeded"], json!(false));
    let e = r["error"].as_str().unwrap();
    assert!(
        e.starts_with("linerate rr: no answer from 127.0.0.1:"),
        "{e}"
    );
    assert!(
        e.contains("is a linerate rr server listening there?"),
        "{e}"
    );
}
