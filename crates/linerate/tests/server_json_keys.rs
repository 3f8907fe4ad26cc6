//! The server's `-J` document has iperf3 3.21's server document's keys:
//! `iperf3-3.21 -s -1 -J` and `linerate -s -1 -J`, each driven by the same
//! 3.21 client for TCP, UDP, -R, -P 4 and --bidir, must have the same key
//! tree (every object's keys, nesting, value types, the lengths of arrays
//! such as `streams`). Values differ, and so do, knowingly:
//!
//! - the top-level `linerate` object (linerate's extra figures, which 3.21
//!   does not have): left out of the comparison;
//! - how many `intervals` there are (3.21 may add a sliver of a last
//!   interval, linerate does not): every interval of either document is
//!   compared with 3.21's first;
//! - 3.21's duplicated `start.target_bitrate`: a parsed document does not
//!   show it.
//!
//! Keys come in 3.21's order (serde_json's `preserve_order` keeps the
//! order written, in linerate and in this test's parsing).

mod support;

use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;
use support::{Proc, free_port, json, linerate, wait_listening};

/// One case at a time: the two CPUs carry one test's streams, not five.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The JSON type of a value, as the key tree records it.
fn ty(v: &Value) -> &'static str {
    match v {
        Value::Object(_) => "object",
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null => "null",
    }
}

/// The first place (a path such as `.end.streams[0].sender`) where `ours`'
/// key tree differs from `theirs`, and how.
fn first_difference(theirs: &Value, ours: &Value, path: &str) -> Option<String> {
    if ty(theirs) != ty(ours) {
        return Some(format!(
            "{path}: 3.21 has a {}, linerate a {}",
            ty(theirs),
            ty(ours)
        ));
    }
    match (theirs, ours) {
        (Value::Object(t), Value::Object(o)) => {
            // linerate's own figures, under their top-level key.
            let extension = |k: &str| path.is_empty() && k == "linerate";
            let only_theirs: Vec<&String> = t.keys().filter(|k| !o.contains_key(*k)).collect();
            let only_ours: Vec<&String> = o
                .keys()
                .filter(|k| !t.contains_key(*k) && !extension(k))
                .collect();
            if !only_theirs.is_empty() || !only_ours.is_empty() {
                return Some(format!(
                    "{path}: keys only 3.21 writes {only_theirs:?}, keys only linerate writes {only_ours:?}"
                ));
            }
            // In 3.21's order (linerate's own figures last).
            let ours_in_order: Vec<&String> = o.keys().filter(|k| !extension(k)).collect();
            if !t.keys().eq(ours_in_order.iter().copied()) {
                return Some(format!(
                    "{path}: keys in another order: 3.21 {:?}, linerate {ours_in_order:?}",
                    t.keys().collect::<Vec<_>>()
                ));
            }
            t.iter().find_map(|(k, tv)| {
                let p = format!("{path}.{k}");
                if p == ".intervals" {
                    intervals_difference(tv, &o[k])
                } else {
                    first_difference(tv, &o[k], &p)
                }
            })
        }
        (Value::Array(t), Value::Array(o)) => {
            if t.len() != o.len() {
                return Some(format!(
                    "{path}: 3.21 has {} elements, linerate {}",
                    t.len(),
                    o.len()
                ));
            }
            t.iter()
                .zip(o)
                .enumerate()
                .find_map(|(i, (tv, ov))| first_difference(tv, ov, &format!("{path}[{i}]")))
        }
        _ => None,
    }
}

/// `intervals`: both have some, and each of either's has the tree of
/// 3.21's first.
fn intervals_difference(theirs: &Value, ours: &Value) -> Option<String> {
    let (Some(t), Some(o)) = (theirs.as_array(), ours.as_array()) else {
        return Some(".intervals: not an array in both".into());
    };
    let Some(model) = t.first() else {
        return Some(".intervals: 3.21 wrote none".into());
    };
    if o.is_empty() {
        return Some(".intervals: linerate wrote none".into());
    }
    let theirs_each = t.iter().enumerate().map(|(i, x)| ("3.21", i, x));
    let ours_each = o.iter().enumerate().map(|(i, x)| ("linerate", i, x));
    theirs_each.chain(ours_each).find_map(|(who, i, x)| {
        first_difference(
            model,
            x,
            &format!(".intervals[{i}] ({who}'s, against 3.21's [0])"),
        )
    })
}

/// The first `seconds` or `end` under `v` (a document's `end`) that is
/// not a positive number: every half of a test that ran has a duration,
/// the peer's half of a server's document included (3.21 writes its own).
fn unreal_seconds(v: &Value, path: &str) -> Option<String> {
    match v {
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            let p = format!("{path}.{k}");
            if (k == "seconds" || k == "end") && x.as_f64().is_none_or(|s| s <= 0.0) {
                Some(format!("{p} is {x}"))
            } else {
                unreal_seconds(x, &p)
            }
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| unreal_seconds(x, &format!("{path}[{i}]"))),
        _ => None,
    }
}

/// Runs `server -s -1 -J` on a fresh loopback port, drives it with the
/// 3.21 client and `args`, and returns the server's document. Both
/// processes are killed (by PID, in `Proc`'s drop) if anything fails.
fn server_document(server: Command, i321: &std::path::Path, args: &[&str]) -> Value {
    let mut server = server;
    let port = free_port();
    let p = port.to_string();
    let srv = Proc::spawn(server.args(["-s", "-1", "-J", "-p", &p]));
    wait_listening(port);
    let cli = Proc::spawn(
        Command::new(i321)
            .args(["-c", "127.0.0.1", "-p", &p, "-J", "-t", "1"])
            .args(args),
    );
    let c = cli.wait(Duration::from_secs(30));
    let s = srv.wait(Duration::from_secs(20));
    let (cj, sj) = (json(&c.stdout), json(&s.stdout));
    assert!(
        c.status.success() && cj.get("error").is_none(),
        "{server:?} {args:?}: the 3.21 client failed: {cj}"
    );
    assert!(
        s.status.success() && sj.get("error").is_none(),
        "{server:?} {args:?}: the server failed: {sj}\n{}",
        String::from_utf8_lossy(&s.stderr)
    );
    sj
}

/// 3.21's document and linerate's, made by `document` (one case at a time),
/// compared key for key; `None` when the test skips.
fn both_documents(
    name: &str,
    side: &str,
    args: &[&str],
    document: fn(Command, &std::path::Path, &[&str]) -> Value,
) -> Option<(Value, Value)> {
    if linerate_testkit::should_skip(name, &[linerate_testkit::require_iperf3_321()]) {
        return None;
    }
    let i321 = linerate_testkit::iperf3_321().unwrap();
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let theirs = document(Command::new(&i321), &i321, args);
    let ours = document(linerate(), &i321, args);
    if let Some(d) = first_difference(&theirs, &ours, "") {
        panic!(
            "{args:?}: linerate's {side} document differs from 3.21's at {d}\n3.21: {theirs}\nlinerate: {ours}"
        );
    }
    Some((theirs, ours))
}

fn same_keys_as_3_21(name: &str, args: &[&str]) {
    let Some((theirs, ours)) = both_documents(name, "server", args, server_document) else {
        return;
    };
    for (who, doc) in [("3.21", &theirs), ("linerate", &ours)] {
        if let Some(d) = unreal_seconds(&doc["end"], ".end") {
            panic!("{args:?}: {who}'s server document: {d}\n{}", doc["end"]);
        }
    }
}

/// A 3.21 server on a fresh port driven by `client -J -t 1 args`: the
/// client's document.
fn client_document(client: Command, i321: &std::path::Path, args: &[&str]) -> Value {
    let mut client = client;
    let port = free_port();
    let p = port.to_string();
    let srv = Proc::spawn(Command::new(i321).args(["-s", "-1", "-p", &p]));
    wait_listening(port);
    let c = Proc::spawn(
        client
            .args(["-c", "127.0.0.1", "-p", &p, "-J", "-t", "1"])
            .args(args),
    )
    .wait(Duration::from_secs(30));
    srv.wait(Duration::from_secs(20));
    let cj = json(&c.stdout);
    assert!(
        c.status.success() && cj.get("error").is_none(),
        "{client:?} {args:?}: the client failed: {cj}"
    );
    cj
}

/// The client's document against 3.21's client's, both driving a 3.21
/// server: the same key tree, keys in the same order.
fn client_keys_as_3_21(name: &str, args: &[&str]) {
    both_documents(name, "client", args, client_document);
}

#[test]
fn tcp_client_document_has_3_21s_keys_in_order() {
    client_keys_as_3_21("tcp_client_document_has_3_21s_keys_in_order", &[]);
}

#[test]
fn udp_client_document_has_3_21s_keys_in_order() {
    client_keys_as_3_21(
        "udp_client_document_has_3_21s_keys_in_order",
        &["-u", "-b", "20M"],
    );
}

#[test]
fn reverse_client_document_has_3_21s_keys_in_order() {
    client_keys_as_3_21("reverse_client_document_has_3_21s_keys_in_order", &["-R"]);
}

#[test]
fn tcp_server_document_has_3_21s_keys() {
    same_keys_as_3_21("tcp_server_document_has_3_21s_keys", &[]);
}

#[test]
fn udp_server_document_has_3_21s_keys() {
    same_keys_as_3_21("udp_server_document_has_3_21s_keys", &["-u", "-b", "20M"]);
}

#[test]
fn reverse_server_document_has_3_21s_keys() {
    same_keys_as_3_21("reverse_server_document_has_3_21s_keys", &["-R"]);
}

#[test]
fn parallel_server_document_has_3_21s_keys() {
    same_keys_as_3_21("parallel_server_document_has_3_21s_keys", &["-P", "4"]);
}

#[test]
fn bidir_server_document_has_3_21s_keys() {
    same_keys_as_3_21("bidir_server_document_has_3_21s_keys", &["--bidir"]);
}

/// The comparison itself: it finds a missing key, an extra one, a type
/// and an array length, and takes what it should let pass.
#[test]
fn the_key_tree_comparison_finds_differences() {
    use serde_json::json;
    let theirs = json!({"start": {"a": 1}, "intervals": [{"s": [{"x": 1}]}, {"s": [{"x": 2}]}],
                        "end": {"streams": [{"sender": {"rtt": 1}}]}});
    let same = json!({"start": {"a": 2.5}, "intervals": [{"s": [{"x": 0}]}],
                      "end": {"streams": [{"sender": {"rtt": 0}}]}, "linerate": {}});
    assert_eq!(first_difference(&theirs, &same, ""), None);
    let extra = json!({"start": {"a": 1}, "intervals": [{"s": [{"x": 1}]}],
                       "end": {"streams": [{"sender": {"rtt": 0, "max_rtt": 0}}]}});
    let d = first_difference(&theirs, &extra, "").unwrap();
    assert!(
        d.starts_with(".end.streams[0].sender:") && d.contains("max_rtt"),
        "{d}"
    );
    let reordered = json!({"end": {"streams": [{"sender": {"rtt": 1}}]},
                           "start": {"a": 1}, "intervals": [{"s": [{"x": 1}]}]});
    assert!(
        first_difference(&theirs, &reordered, "")
            .unwrap()
            .contains("another order"),
        "key order is compared"
    );
    let typed = json!({"start": {"a": "1"}, "intervals": [{"s": [{"x": 1}]}],
                       "end": {"streams": [{"sender": {"rtt": 1}}]}});
    assert!(
        first_difference(&theirs, &typed, "")
            .unwrap()
            .starts_with(".start.a:")
    );
    let end = json!({"streams": [{"sender": {"end": 1.5, "seconds": 1.5},
                                   "receiver": {"end": 1.5, "seconds": 0.0}}]});
    assert_eq!(
        unreal_seconds(&end, ".end").unwrap(),
        ".end.streams[0].receiver.seconds is 0.0"
    );
    let short = json!({"start": {"a": 1}, "intervals": [{"s": []}],
                       "end": {"streams": [{"sender": {"rtt": 1}}]}});
    assert!(
        first_difference(&theirs, &short, "")
            .unwrap()
            .starts_with(".intervals[0] (linerate's")
    );
}
