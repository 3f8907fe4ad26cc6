//! `metric_tags`: a flow's frames counted per value of its tagged bits
//! (over the loopback backend, so the counts are exact), the request's
//! `tagged_metrics` (include, empty rows, counters, filters), and tags
//! the agent cannot count refused by path.

use super::refusals::errors;
use super::*;

/// An agent whose two ports are one loopback wire ("tagwire": what is
/// sent on it arrives on it), kept while the wire lives.
fn agent() -> (Agent, linerate_backend::loopback::Port) {
    let opts = Options::loopback(&["tagwire"]);
    let wire = linerate_backend::loopback::Port::create(
        &opts.wires,
        "tagwire",
        1500,
        linerate_backend::loopback::Faults::default(),
    )
    .unwrap();
    (Agent::new(opts), wire)
}

fn post(a: &Agent, path: &str, v: &Value) -> Reply {
    a.handle("POST", path, v.to_string().as_bytes())
}

/// One flow of 22 frames of 128 bytes: udp dst_port 6000..6003 tagged
/// whole ("dst") and by its top 15 bits ("pair"), ipv4 src .1/.2 by its
/// last byte ("host"); `tags` replaces udp's dst_port tags.
fn tagged(dst_tags: Value) -> Value {
    let v = |x: &str| json!({"choice": "value", "value": x});
    json!({
        "ports": [{"name": "tx", "location": "tagwire"}, {"name": "rx", "location": "tagwire"}],
        "flows": [{
            "name": "f",
            "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": v("02:00:00:00:00:01"), "dst": v("02:00:00:00:00:02")}},
                {"choice": "ipv4", "ipv4": {
                    "src": {"choice": "values", "values": ["198.18.0.1", "198.18.0.2"],
                            "metric_tags": [{"name": "host", "offset": 24, "length": 8}]},
                    "dst": v("198.18.1.1")}},
                {"choice": "udp", "udp": {
                    "src_port": {"choice": "value", "value": 5000},
                    "dst_port": {"choice": "increment", "increment": {"start": 6000, "step": 1, "count": 4},
                                 "metric_tags": dst_tags}}}
            ],
            "size": {"choice": "fixed", "fixed": 128},
            "rate": {"choice": "pps", "pps": "2000"},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 22}}
        }]
    })
}

/// Runs the configuration's flows to their end; the flow metrics `req`
/// asks for.
fn run(a: &Agent, doc: &Value, req: &Value) -> Value {
    assert_eq!(post(a, "/config", doc).status, 200);
    let ctl = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}});
    assert_eq!(post(a, "/control/state", &ctl).status, 200);
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let m = post(a, "/monitor/metrics", req).body["flow_metrics"][0].clone();
        if m["transmit"] == "stopped" {
            let stop = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "stop"}}});
            let r = post(a, "/control/state", &stop);
            assert!(
                r.body["warnings"].as_array().is_none_or(|w| w.is_empty()),
                "{}",
                r.body
            );
            return m;
        }
        assert!(std::time::Instant::now() < end, "the flow did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A row's tags as (name, hex), and its frames_tx, frames_rx, bytes_tx
/// and bytes_rx.
type Row = (Vec<(String, String)>, [Option<u64>; 4]);

/// A flow metric's rows.
fn rows(m: &Value) -> Vec<Row> {
    let n = |r: &Value, k: &str| r[k].as_str().map(|s| s.parse::<u64>().unwrap());
    m["tagged_metrics"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|r| {
                    let tags = r["tags"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|t| {
                            assert_eq!(t["value"]["choice"], "hex", "{t}");
                            (
                                t["name"].as_str().unwrap().to_string(),
                                t["value"]["hex"].as_str().unwrap().to_string(),
                            )
                        })
                        .collect();
                    let c = [
                        n(r, "frames_tx"),
                        n(r, "frames_rx"),
                        n(r, "bytes_tx"),
                        n(r, "bytes_rx"),
                    ];
                    (tags, c)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn t(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// 22 frames over 4 tuples: tuples 0 and 1 carry 6 frames, 2 and 3 five.
#[test]
fn each_tag_values_frames_are_counted_exactly() {
    let (a, _wire) = agent();
    let doc = tagged(json!([{"name": "dst"}, {"name": "pair", "offset": 0, "length": 15}]));
    let req = json!({"choice": "flow", "flow": {"flow_names": ["f"]}});
    let m = run(&a, &doc, &req);
    assert_eq!(
        (&m["frames_tx"], &m["frames_rx"]),
        (&json!("22"), &json!("22")),
        "{m}"
    );
    let c = |n: u64| [Some(n), Some(n), Some(128 * n), Some(128 * n)];
    assert_eq!(
        rows(&m),
        vec![
            (
                t(&[("host", "0x1"), ("dst", "0x1770"), ("pair", "0xbb8")]),
                c(6)
            ),
            (
                t(&[("host", "0x2"), ("dst", "0x1771"), ("pair", "0xbb8")]),
                c(6)
            ),
            (
                t(&[("host", "0x1"), ("dst", "0x1772"), ("pair", "0xbb9")]),
                c(5)
            ),
            (
                t(&[("host", "0x2"), ("dst", "0x1773"), ("pair", "0xbb9")]),
                c(5)
            ),
        ],
        "{m}"
    );
}

/// One coarse tag: the tuples carrying one value are summed in one row.
#[test]
fn tuples_with_one_tag_value_are_summed_and_the_request_shapes_the_rows() {
    let (a, _wire) = agent();
    let mut doc = tagged(json!([{"name": "pair", "offset": 0, "length": 15}]));
    doc["flows"][0]["packet"][1]["ipv4"]["src"]
        .as_object_mut()
        .unwrap()
        .remove("metric_tags");
    let req =
        |tm: Value| json!({"choice": "flow", "flow": {"flow_names": ["f"], "tagged_metrics": tm}});
    let m = run(&a, &doc, &req(json!({})));
    let c = |n: u64| [Some(n), Some(n), Some(128 * n), Some(128 * n)];
    assert_eq!(
        rows(&m),
        vec![
            (t(&[("pair", "0xbb8")]), c(12)),
            (t(&[("pair", "0xbb9")]), c(10)),
        ]
    );
    let again = |tm: Value| post(&a, "/monitor/metrics", &req(tm)).body["flow_metrics"][0].clone();
    assert!(
        again(json!({"include": false}))
            .get("tagged_metrics")
            .is_none()
    );
    assert_eq!(
        rows(&again(json!({"metric_names": ["frames_rx"]}))),
        vec![
            (t(&[("pair", "0xbb8")]), [None, Some(12), None, None]),
            (t(&[("pair", "0xbb9")]), [None, Some(10), None, None]),
        ]
    );
    assert_eq!(
        rows(&again(
            json!({"filters": [{"name": "pair", "values": ["0xBB9"]}]})
        )),
        vec![(t(&[("pair", "0xbb9")]), c(10))]
    );
    let r = post(
        &a,
        "/monitor/metrics",
        &req(json!({"filters": [{"name": "nope"}]})),
    );
    assert!(
        errors(&r)[0].starts_with(
            "flow.tagged_metrics.filters[0].name: no flow carries a metric tag named 'nope'"
        ),
        "{}",
        r.body
    );
}

/// Before any frame, rows are empty unless empty rows are asked for.
#[test]
fn empty_rows_only_when_asked() {
    let (a, _wire) = agent();
    let doc = tagged(json!([{"name": "dst"}]));
    assert_eq!(post(&a, "/config", &doc).status, 200);
    let req = |tm: Value| json!({"choice": "flow", "flow": {"tagged_metrics": tm}});
    let m = post(&a, "/monitor/metrics", &req(json!({}))).body["flow_metrics"][0].clone();
    assert!(m.get("tagged_metrics").is_none(), "{m}");
    let m = post(
        &a,
        "/monitor/metrics",
        &req(json!({"include_empty_metrics": true})),
    )
    .body["flow_metrics"][0]
        .clone();
    let rs = rows(&m);
    assert_eq!(rs.len(), 4, "{m}");
    assert_eq!(rs[3].0, t(&[("host", "0x2"), ("dst", "0x1773")]));
    assert_eq!(
        rs[3].1,
        [Some(0), Some(0), None, Some(0)],
        "no frame sent: no size known"
    );
}

/// Tags the agent cannot count per value, each refused at its path in
/// one answer.
#[test]
fn tags_it_cannot_count_are_refused_by_path() {
    let (a, _wire) = agent();
    let tag = json!([{"name": "x"}]);
    let mut cases: Vec<(Value, &str, &str)> = Vec::new();
    let mut ttl = tagged(json!([]));
    ttl["flows"][0]["packet"][1]["ipv4"]["time_to_live"] =
        json!({"choice": "value", "value": 9, "metric_tags": tag});
    cases.push((
        ttl,
        "flows[0].packet[1].ipv4.time_to_live.metric_tags",
        "not supported on this field",
    ));
    let mut dscp = tagged(json!([]));
    dscp["flows"][0]["packet"][1]["ipv4"]["priority"] = json!({"choice": "dscp", "dscp": {"phb": {"choice": "value", "value": 0, "metric_tags": tag}}});
    cases.push((
        dscp,
        "flows[0].packet[1].ipv4.priority.dscp.phb.metric_tags",
        "not supported on this field",
    ));
    cases.push((
        tagged(json!([{"name": "d", "offset": 16}])),
        "flows[0].packet[2].udp.dst_port.metric_tags[0].offset",
        "the field has 16 bits",
    ));
    cases.push((
        tagged(json!([{"name": "d", "offset": 8, "length": 9}])),
        "flows[0].packet[2].udp.dst_port.metric_tags[0].length",
        "1 to 8",
    ));
    cases.push((
        tagged(json!([{"name": "host"}])),
        "flows[0].packet",
        "'host' is named twice",
    ));
    cases.push((
        tagged(json!([{"offset": 1}])),
        "flows[0].packet[2].udp.dst_port.metric_tags[0].name",
        "required",
    ));
    let doc = json!({
        "ports": cases[0].0["ports"],
        "flows": cases.iter().enumerate().map(|(i, (d, _, _))| {
            let mut f = d["flows"][0].clone();
            f["name"] = json!(format!("f{i}"));
            f
        }).collect::<Vec<_>>()
    });
    let errs = errors(&post(&a, "/config", &doc));
    assert_eq!(errs.len(), cases.len(), "{errs:?}");
    super::refusals::each_at_its_path(&errs, &cases);
    // 300 source ports share the flow's 256 probe ids: tuple 256 carries
    // port 1256 under tuple 0's id. Refused; tagged on the destination
    // port alone (4 values, dividing 256), taken.
    let mut shared = tagged(json!([{"name": "d"}]));
    shared["flows"][0]["packet"][2]["udp"]["src_port"] = json!({"choice": "increment", "increment": {"start": 1000, "step": 1, "count": 300},
               "metric_tags": [{"name": "s"}]});
    let errs = errors(&post(&a, "/config", &shared));
    assert!(
        errs[0]
            .starts_with("flows[0].packet: metric tags: the flow's 300 tuples share 256 probe ids"),
        "{errs:?}"
    );
    shared["flows"][0]["packet"][2]["udp"]["src_port"]
        .as_object_mut()
        .unwrap()
        .remove("metric_tags");
    let r = post(&a, "/config", &shared);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// A VXLAN flow's inner fields take tags; its outer headers' do not.
#[test]
fn a_vxlan_flows_outer_fields_take_no_tags() {
    let (a, _wire) = agent();
    let v = |x: &str| json!({"choice": "value", "value": x});
    let tag = json!([{"name": "x"}]);
    let doc = |outer_tag: bool| {
        json!({
            "ports": [{"name": "tx", "location": "tagwire"}, {"name": "rx", "location": "tagwire"}],
            "flows": [{
                "name": "f",
                "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
                "packet": [
                    {"choice": "ethernet", "ethernet": {"src": v("02:00:00:00:00:01"), "dst": v("02:00:00:00:00:02")}},
                    {"choice": "ipv4", "ipv4": {"src": if outer_tag { json!({"choice": "value", "value": "198.18.0.1", "metric_tags": tag}) } else { v("198.18.0.1") }, "dst": v("198.18.1.1")}},
                    {"choice": "udp", "udp": {"dst_port": {"choice": "value", "value": 4789}}},
                    {"choice": "vxlan", "vxlan": {"vni": {"choice": "value", "value": 7}}},
                    {"choice": "ethernet", "ethernet": {"src": v("02:00:00:00:01:01"), "dst": v("02:00:00:00:01:02")}},
                    {"choice": "ipv4", "ipv4": {"src": {"choice": "value", "value": "198.18.2.1", "metric_tags": tag}, "dst": v("198.18.3.1")}},
                    {"choice": "udp", "udp": {}}
                ],
                "size": {"choice": "fixed", "fixed": 256}
            }]
        })
    };
    let r = post(&a, "/config", &doc(false));
    assert_eq!(r.status, 200, "{}", r.body);
    let errs = errors(&post(&a, "/config", &doc(true)));
    assert!(
        errs[0].starts_with(
            "flows[0].packet[1].ipv4.src.metric_tags: not supported on a VXLAN flow's outer headers"
        ),
        "{errs:?}"
    );
}

/// The models' per-tag rates, loss and latency: a flow of 3,000 frames
/// at 2,000 a second tagged by a port's top 15 bits (two values, each
/// on half the tuples). While it runs, each row's frames sent a second
/// are exactly half the flow's, the rows' received rates sum to the
/// flow's, and each row's rates lie within 30% of 1,000 a second (the
/// median of the samples); once stopped, the rows' frames sum to the
/// flow's, their loss is 0 (the loopback wire loses none), their rates
/// 0, and each gives its latency, within the flow's.
#[test]
fn rows_rates_while_running_loss_and_latency_are_the_rows_own() {
    let (a, _wire) = agent();
    let mut doc = tagged(json!([{"name": "pair", "offset": 0, "length": 15}]));
    let f = &mut doc["flows"][0];
    f["packet"][1]["ipv4"]["src"]
        .as_object_mut()
        .unwrap()
        .remove("metric_tags");
    f["duration"] = json!({"choice": "fixed_packets", "fixed_packets": {"packets": 3000}});
    f["metrics"] = json!({"enable": true, "latency": {"enable": true, "mode": "store_forward"}});
    assert_eq!(post(&a, "/config", &doc).status, 200);
    let ctl = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}});
    assert_eq!(post(&a, "/control/state", &ctl).status, 200);
    let req = json!({"choice": "flow", "flow": {"flow_names": ["f"]}});
    let num = |v: &Value| v.as_f64().unwrap();
    let (mut tx_rates, mut rx_rates) = (Vec::new(), Vec::new());
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let m = loop {
        let m = post(&a, "/monitor/metrics", &req).body["flow_metrics"][0].clone();
        if m["transmit"] == "stopped" {
            break m;
        }
        let rows = m["tagged_metrics"].as_array().cloned().unwrap_or_default();
        if num(&m["frames_tx_rate"]) > 0.0 && rows.len() == 2 {
            let half = num(&m["frames_tx_rate"]) / 2.0;
            let mut rx = 0.0;
            for r in &rows {
                assert!((num(&r["frames_tx_rate"]) - half).abs() < 1e-6, "{m}");
                tx_rates.push(num(&r["frames_tx_rate"]));
                rx += num(&r["frames_rx_rate"]);
                rx_rates.push(num(&r["frames_rx_rate"]));
            }
            let flow_rx = num(&m["frames_rx_rate"]);
            assert!((rx - flow_rx).abs() <= 1e-6 * flow_rx.max(1.0), "{m}");
        }
        assert!(std::time::Instant::now() < end, "the flow did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        tx_rates.len() >= 4,
        "rates seen while running: {tx_rates:?}"
    );
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    for (what, v) in [("sent", &mut tx_rates), ("received", &mut rx_rates)] {
        let mid = median(v);
        assert!(
            (700.0..=1300.0).contains(&mid),
            "a row's frames {what} a second: median {mid} of {v:?}"
        );
    }
    assert_eq!(
        (&m["frames_tx"], &m["frames_rx"]),
        (&json!("3000"), &json!("3000")),
        "{m}"
    );
    let rows = m["tagged_metrics"].as_array().unwrap();
    let sum = |k: &str| -> u64 {
        rows.iter()
            .map(|r| r[k].as_str().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!((sum("frames_tx"), sum("frames_rx")), (3000, 3000), "{m}");
    let flow_lat = &m["latency"];
    for r in rows {
        assert_eq!(r["loss"], 0.0, "{r}");
        assert_eq!(
            (&r["frames_tx_rate"], &r["frames_rx_rate"]),
            (&json!(0.0), &json!(0.0)),
            "{r}"
        );
        let l = &r["latency"];
        let (min, max, avg) = (
            num(&l["minimum_ns"]),
            num(&l["maximum_ns"]),
            num(&l["average_ns"]),
        );
        assert!(0.0 < min && min <= avg && avg <= max, "{r}");
        assert!(
            min >= num(&flow_lat["minimum_ns"]) && max <= num(&flow_lat["maximum_ns"]),
            "{m}"
        );
    }
}
