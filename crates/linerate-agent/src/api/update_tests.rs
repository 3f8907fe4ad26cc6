//! `PATCH /config` (flows' rate and size), `/config/append` and
//! `/config/delete`, on loopback ports: what the next run sends follows
//! the update, exactly.

use super::*;
use linerate_packet::Rate;

/// An agent whose two ports are the ends of one loopback wire (kept with
/// it).
fn agent() -> (Agent, linerate_backend::loopback::Port) {
    let opts = Options::loopback(&["upwire"]);
    let wire = linerate_backend::loopback::Port::create(
        &opts.wires,
        "upwire",
        1500,
        linerate_backend::loopback::Faults::default(),
    )
    .unwrap();
    (Agent::new(opts), wire)
}

fn flow(name: &str, size: u64, packets: u64) -> Value {
    json!({
        "name": name,
        "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
        "packet": [{"choice": "ethernet"}, {"choice": "ipv4"}, {"choice": "udp"}],
        "size": {"choice": "fixed", "fixed": size},
        "rate": {"choice": "pps", "pps": "1000"},
        "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": packets}}
    })
}

fn config() -> Value {
    json!({
        "ports": [{"name": "tx", "location": "upwire"}, {"name": "rx", "location": "upwire"}],
        "flows": [flow("f1", 128, 10), flow("f2", 64, 5)]
    })
}

fn call(a: &Agent, method: &str, path: &str, v: &Value) -> Reply {
    a.handle(method, path, v.to_string().as_bytes())
}

fn transmit(a: &Agent, state: &str, names: &[&str]) -> Reply {
    let ctl = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit",
        "flow_transmit": {"state": state, "flow_names": names}}});
    call(a, "POST", "/control/state", &ctl)
}

/// Runs `name` to its end: (frames_tx, bytes_tx, frames_rx).
fn run(a: &Agent, name: &str) -> (String, String, String) {
    let r = transmit(a, "start", &[name]);
    assert_eq!(r.status, 200, "{}", r.body);
    let req = json!({"choice": "flow", "flow": {"flow_names": [name]}});
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let m = call(a, "POST", "/monitor/metrics", &req).body["flow_metrics"][0].clone();
        if m["transmit"] == "stopped" {
            let w = transmit(a, "stop", &[name]);
            assert_eq!(w.body, json!({"warnings": []}), "{m}");
            let s = |k: &str| m[k].as_str().unwrap_or("?").to_string();
            return (s("frames_tx"), s("bytes_tx"), s("frames_rx"));
        }
        assert!(std::time::Instant::now() < end, "the flow did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn update(props: &[&str], flows: Value) -> Value {
    json!({"choice": "flows", "flows": {"property_names": props, "flows": flows}})
}

#[test]
fn an_updated_size_and_rate_are_the_next_runs() {
    let (a, _wire) = agent();
    assert_eq!(call(&a, "POST", "/config", &config()).status, 200);
    let s = |n: u64| (n.to_string(), (n * 128).to_string(), n.to_string());
    assert_eq!(run(&a, "f1"), s(10));
    // The flow as snappi sends it back: whole, with a new size and rate;
    // only the size is named.
    let mut f = flow("f1", 256, 99);
    f["rate"] = json!({"choice": "pps", "pps": "2000"});
    let r = call(
        &a,
        "PATCH",
        "/config",
        &update(&["size"], json!([f.clone()])),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body, json!({"warnings": []}));
    let got = a.handle("GET", "/config", b"").body;
    assert_eq!(
        got["flows"][0]["size"],
        json!({"choice": "fixed", "fixed": 256})
    );
    assert_eq!(
        got["flows"][0]["rate"]["pps"], "1000",
        "the rate was not named"
    );
    assert_eq!(
        got["flows"][0]["duration"]["fixed_packets"]["packets"], 10,
        "nor the duration"
    );
    assert_eq!(got["flows"][1], config()["flows"][1], "f2 untouched");
    assert_eq!(run(&a, "f1"), ("10".into(), "2560".into(), "10".into()));
    let rate = |a: &Agent| {
        let st = lock(&a.state);
        st.campaign.as_ref().unwrap().plan.flows[0].blast.rate
    };
    assert_eq!(rate(&a), Rate::Pps(1000));
    // Now the rate, and the size back to the model's default (absent).
    f.as_object_mut().unwrap().remove("size");
    let r = call(
        &a,
        "PATCH",
        "/config",
        &update(&["rate", "size"], json!([f])),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(rate(&a), Rate::Pps(2000));
    assert_eq!(run(&a, "f1"), ("10".into(), "640".into(), "10".into()));
    assert_eq!(run(&a, "f2"), ("5".into(), "320".into(), "5".into()));
}

#[test]
fn an_update_is_refused_with_every_error_and_while_the_flow_runs() {
    let (a, _wire) = agent();
    let r = call(
        &a,
        "PATCH",
        "/config",
        &update(&["size"], json!([flow("f1", 64, 1)])),
    );
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["no configuration: POST /config first"])
    );
    let mut doc = config();
    doc["flows"][0]["duration"] = json!({"choice": "continuous"});
    assert_eq!(call(&a, "POST", "/config", &doc).status, 200);
    let bad = json!({"choice": "flows", "flows": {"property_names": ["size", "tx_rx"],
        "flows": [flow("nope", 64, 1), {"size": {"choice": "fixed", "fixed": 70}}]}});
    let r = call(&a, "PATCH", "/config", &bad);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!([
            "flows.property_names[1]: 'tx_rx' is not a property the agent updates (rate, size)",
            "flows.flows[1].name: required"
        ])
    );
    let r = call(
        &a,
        "PATCH",
        "/config",
        &json!({"choice": "protocols", "protocols": {}}),
    );
    assert_eq!(r.status, 400);
    assert!(
        r.body["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("choice: 'protocols': not supported"),
        "{}",
        r.body
    );
    let r = call(
        &a,
        "PATCH",
        "/config",
        &update(&["size"], json!([flow("nope", 64, 1)])),
    );
    assert_eq!(
        r.body["errors"],
        json!(["flows.flows[0].name: no flow is named 'nope'"])
    );
    // A size the model refuses: the configuration's own check, by path.
    let r = call(
        &a,
        "PATCH",
        "/config",
        &update(&["size"], json!([flow("f2", 20_000, 1)])),
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body["errors"][0]
            .as_str()
            .unwrap()
            .starts_with("flows[1].size"),
        "{}",
        r.body
    );
    assert_eq!(a.handle("GET", "/config", b"").body, doc, "nothing changed");
    assert_eq!(transmit(&a, "start", &["f1"]).status, 200);
    let r = call(
        &a,
        "PATCH",
        "/config",
        &update(&["rate"], json!([flow("f1", 64, 1)])),
    );
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!([
            "flows.flows[0]: flow 'f1' is transmitting: linerate agent does not change a flow's rate or size while it runs (stop it, update it, start it again)"
        ])
    );
    // f2 is not running: it may change meanwhile.
    let r = call(
        &a,
        "PATCH",
        "/config",
        &update(&["size"], json!([flow("f2", 100, 1)])),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(transmit(&a, "stop", &["f1"]).status, 200);
    assert_eq!(run(&a, "f2"), ("5".into(), "500".into(), "5".into()));
}

#[test]
fn flows_are_appended_and_deleted_by_name() {
    let (a, _wire) = agent();
    assert_eq!(call(&a, "POST", "/config", &config()).status, 200);
    let append = json!({"config_append_list": [{"choice": "flows", "flows": [flow("f3", 96, 3)]}]});
    let r = call(&a, "PATCH", "/config/append", &append);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.body["warnings"][0]
            .as_str()
            .unwrap()
            .contains("taken again whole"),
        "{}",
        r.body
    );
    let names = |a: &Agent| {
        a.handle("GET", "/config", b"").body["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&a), ["f1", "f2", "f3"]);
    assert_eq!(run(&a, "f3"), ("3".into(), "288".into(), "3".into()));
    let r = call(&a, "PATCH", "/config/append", &append);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!([
            "config_append_list[0].flows[0].name: a flow is named 'f3' already (DeleteConfig it first)"
        ])
    );
    let del = json!({"config_delete_list": [{"choice": "flows", "flows": ["f1", "zz"]}]});
    let r = call(&a, "PATCH", "/config/delete", &del);
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!(["config_delete_list[0].flows[1]: no flow is named 'zz'"])
    );
    assert_eq!(names(&a), ["f1", "f2", "f3"], "nothing deleted");
    let del = json!({"config_delete_list": [{"choice": "flows", "flows": ["f1"]}]});
    assert_eq!(call(&a, "PATCH", "/config/delete", &del).status, 200);
    assert_eq!(names(&a), ["f2", "f3"]);
    assert_eq!(run(&a, "f2"), ("5".into(), "320".into(), "5".into()));
    let r = transmit(&a, "start", &["f1"]);
    assert_eq!(r.status, 400, "f1 is gone: {}", r.body);
}

/// The three methods over gRPC: the same routes, their errors
/// INVALID_ARGUMENT with the path.
#[test]
fn update_append_and_delete_over_grpc() {
    use crate::grpc::service::{Answer, Rpc, call};
    use crate::grpc::{schema, table_action as t};
    let (a, _wire) = agent();
    assert_eq!(call_json(&a, "POST", "/config", &config()), 200);
    let wire = |m, v: &Value| schema::encode(m, v, "").unwrap();
    let up = update(&["size"], json!([flow("f1", 200, 1)]));
    let r = call(
        &a,
        Rpc::UpdateConfig,
        &wire(&t::M_CONFIG_UPDATE, &up),
        a.arrival(),
    )
    .unwrap();
    assert!(matches!(r, Answer::Held(_)));
    assert_eq!(run(&a, "f1"), ("10".into(), "2000".into(), "10".into()));
    let bad = update(&["size"], json!([flow("zz", 200, 1)]));
    let s = call(
        &a,
        Rpc::UpdateConfig,
        &wire(&t::M_CONFIG_UPDATE, &bad),
        a.arrival(),
    )
    .unwrap_err();
    assert_eq!(s.code(), tonic::Code::InvalidArgument);
    assert!(
        s.message()
            .contains("flows.flows[0].name: no flow is named 'zz'"),
        "{}",
        s.message()
    );
    let app = json!({"config_append_list": [{"choice": "flows", "flows": [flow("f9", 64, 2)]}]});
    call(
        &a,
        Rpc::AppendConfig,
        &wire(&t::M_CONFIG_APPEND, &app),
        a.arrival(),
    )
    .unwrap();
    let del = json!({"config_delete_list": [{"choice": "flows", "flows": ["f1", "f2"]}]});
    call(
        &a,
        Rpc::DeleteConfig,
        &wire(&t::M_CONFIG_DELETE, &del),
        a.arrival(),
    )
    .unwrap();
    let got = a.handle("GET", "/config", b"").body;
    assert_eq!(got["flows"].as_array().unwrap().len(), 1);
    assert_eq!(got["flows"][0]["name"], "f9");
    assert_eq!(run(&a, "f9"), ("2".into(), "128".into(), "2".into()));
}

fn call_json(a: &Agent, method: &str, path: &str, v: &Value) -> u16 {
    call(a, method, path, v).status
}
