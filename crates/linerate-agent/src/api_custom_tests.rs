//! The `custom` header (the OTG suite's quickstart example): its bytes in
//! every frame after the probe, the fields beside it stepped as the model
//! says, and what is not taken refused by path in one answer.

use super::*;
use linerate_traffic::Template;

fn agent() -> Agent {
    Agent::new(Options::loopback(&["wire0", "wire1"]))
}

fn post(a: &Agent, v: &Value) -> Reply {
    a.handle("POST", "/config", v.to_string().as_bytes())
}

/// The quickstart's bytes, as it writes them (two hex digits a byte).
fn quickstart_hex() -> String {
    b"..QUICKSTART SNAPPI.."
        .iter()
        .map(|c| format!("{c:x}"))
        .collect()
}

/// The OTG conformance suite's quickstart configuration, as snappi sends
/// it (its addresses in linerate's test range): a transmit port only,
/// ethernet/ipv4/udp/custom, 100 frames of 128 bytes.
fn quickstart(custom: Value) -> Value {
    let v = |x: &str| json!({"choice": "value", "value": x});
    json!({
        "ports": [{"name": "ptx", "location": "wire0"}],
        "flows": [{
            "name": "flow",
            "tx_rx": {"choice": "port", "port": {"tx_name": "ptx"}},
            "metrics": {"enable": true},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 100}},
            "size": {"choice": "fixed", "fixed": 128},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": v("00:11:22:33:44:55"), "dst": v("00:11:22:33:44:66")}},
                {"choice": "ipv4", "ipv4": {"src": v("198.18.1.1"), "dst": v("198.18.2.1")}},
                {"choice": "udp", "udp": {
                    "src_port": {"choice": "values", "values": [5010, 5015, 5020, 5025, 5030]},
                    "dst_port": {"choice": "increment", "increment": {"start": 6010, "step": 5, "count": 5}}}},
                {"choice": "custom", "custom": custom}
            ]
        }]
    })
}

#[test]
fn the_quickstarts_custom_bytes_follow_the_probe_in_every_frame() {
    let a = agent();
    let r = post(&a, &quickstart(json!({"bytes": quickstart_hex()})));
    assert_eq!(r.status, 200, "{}", r.body);
    let s = lock(&a.state);
    let f = &s.campaign.as_ref().unwrap().plan.flows[0];
    let framing = &f.blast.framing;
    assert_eq!(
        framing.payload.as_deref(),
        Some(&b"..QUICKSTART SNAPPI.."[..])
    );
    assert_eq!(f.blast.flows.count(), 5, "lcm(5, 5)");
    let spec = &f.blast.flows;
    let t = Template::new(128, &spec.flow(0), framing).unwrap();
    let mut b = vec![0u8; 256];
    for n in 0..12u64 {
        t.write(&mut b, &spec.flow(n), 0, n, 0);
        let k = (n % 5) as u16;
        // Frame n: src values[n % 5], dst 6010 + (n % 5) * 5.
        assert_eq!(&b[34..36], &(5010 + 5 * k).to_be_bytes(), "frame {n}");
        assert_eq!(&b[36..38], &(6010 + 5 * k).to_be_bytes(), "frame {n}");
        // Ethernet 14, IPv4 20, UDP 8, the 18-byte probe: the bytes at 60.
        assert_eq!(&b[60..81], b"..QUICKSTART SNAPPI..", "frame {n}");
        assert_eq!(&b[26..30], &[198, 18, 1, 1]);
        assert_eq!(&b[0..6], &[0x00, 0x11, 0x22, 0x33, 0x44, 0x66]);
    }
}

#[test]
fn custom_bytes_take_the_models_hex_forms() {
    let a = agent();
    for (given, want) in [
        ("0x2e2E51", vec![0x2e, 0x2e, 0x51]),
        ("2e:2e:51", vec![0x2e, 0x2e, 0x51]),
        ("00 ff", vec![0x00, 0xff]),
    ] {
        let r = post(&a, &quickstart(json!({"bytes": given, "metric_tags": []})));
        assert_eq!(r.status, 200, "{given}: {}", r.body);
        let s = lock(&a.state);
        let f = &s.campaign.as_ref().unwrap().plan.flows[0];
        assert_eq!(
            f.blast.framing.payload.as_deref(),
            Some(&want[..]),
            "{given}"
        );
    }
}

/// Refusals come by path, every flow's in one answer.
#[test]
fn what_custom_does_not_take_is_refused_by_path_in_one_answer() {
    let a = agent();
    let cases = [
        (
            json!({"bytes": "2e2"}),
            "flows[0].packet[3].custom.bytes",
            "3 hex digits",
        ),
        (
            json!({"bytes": "zz"}),
            "flows[0].packet[3].custom.bytes",
            "hex digits",
        ),
        (json!({}), "flows[0].packet[3].custom.bytes", "required"),
        (
            json!({"bytes": "2e", "metric_tags": [{"name": "t", "offset": 0, "length": 8}]}),
            "flows[0].packet[3].custom.metric_tags",
            "not supported",
        ),
        (
            json!({"bytes": "2e", "x": 1}),
            "flows[0].packet[3].custom.x",
            "",
        ),
    ];
    let mut doc = quickstart(json!({"bytes": "2e"}));
    let flow = doc["flows"][0].clone();
    let mut flows = Vec::new();
    for (i, (custom, _, _)) in cases.iter().enumerate() {
        let mut f = flow.clone();
        f["name"] = json!(format!("f{i}"));
        f["packet"][3]["custom"] = custom.clone();
        flows.push(f);
    }
    // Too many bytes for the frame: the size's error.
    let mut big = flow.clone();
    big["name"] = json!("big");
    big["packet"][3]["custom"] = json!({"bytes": "00".repeat(100)});
    flows.push(big);
    // Not last: the packet's shape.
    let mut early = flow.clone();
    early["name"] = json!("early");
    let p = early["packet"].as_array_mut().unwrap();
    p.swap(2, 3);
    flows.push(early);
    doc["flows"] = json!(flows);
    let r = post(&a, &doc);
    let errs = super::refusals::errors(&r);
    // The model's errors for every flow (the big one's size is the
    // plan's, checked once the model's are right).
    assert_eq!(errs.len(), cases.len() + 1, "{errs:?}");
    super::refusals::each_at_its_path(&errs, &cases);
    let last = &errs[cases.len()];
    assert!(
        last.starts_with("flows[6].packet:") && last.contains("custom header may come last"),
        "{last}"
    );
    // With the others right, the big one's size is refused by its path.
    let mut doc = quickstart(json!({"bytes": "00".repeat(100)}));
    let r = post(&a, &doc);
    assert_eq!(r.status, 400, "{}", r.body);
    let e = r.body["errors"][0].as_str().unwrap();
    assert!(
        e.starts_with("flows[0].size:") && e.contains("custom bytes"),
        "{e}"
    );
    // 128 bytes hold 62 custom bytes (42 + 18 + 62 + 4 of FCS).
    doc["flows"][0]["packet"][3]["custom"] = json!({"bytes": "00".repeat(62)});
    assert_eq!(post(&a, &doc).status, 200);
}
