//! Capture `filters` end to end on a loopback wire: a flow's frames
//! stepped over four UDP destination ports, a capture whose filters
//! (ethernet, ipv4, a custom field after them) keep two of the four; the
//! capture answered holds exactly those frames.

use super::*;

/// Runs one flow of 20 frames (UDP dst 6000..6003 in turn) with port
/// "rx"'s capture filtered by `filters`; the captured UDP dst ports.
fn captured_ports(filters: Value) -> Vec<u16> {
    let opts = Options::loopback(&["capwire"]);
    let _wire = linerate_backend::loopback::Port::create(
        &opts.wires,
        "capwire",
        1500,
        linerate_backend::loopback::Faults::default(),
    )
    .unwrap();
    let a = Agent::new(opts);
    let v = |x: &str| json!({"choice": "value", "value": x});
    let doc = json!({
        "ports": [{"name": "tx", "location": "capwire"}, {"name": "rx", "location": "capwire"}],
        "captures": [{"name": "c", "port_names": ["rx"], "format": "pcap", "filters": filters}],
        "flows": [{
            "name": "f",
            "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": v("02:00:00:00:00:01"), "dst": v("02:00:00:00:00:02")}},
                {"choice": "ipv4", "ipv4": {"src": v("198.18.0.1"), "dst": v("198.18.1.1")}},
                {"choice": "udp", "udp": {"src_port": v("5000"),
                    "dst_port": {"choice": "increment", "increment": {"start": 6000, "step": 1, "count": 4}}}}
            ],
            "size": {"choice": "fixed", "fixed": 128},
            "rate": {"choice": "pps", "pps": "2000"},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 20}}
        }]
    });
    let post = |path: &str, v: &Value| a.handle("POST", path, v.to_string().as_bytes());
    let r = post("/config", &doc);
    assert_eq!(r.status, 200, "{}", r.body);
    let cap = json!({"choice": "port", "port": {"choice": "capture", "capture": {"state": "start", "port_names": ["rx"]}}});
    assert_eq!(post("/control/state", &cap).status, 200);
    let ctl = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit", "flow_transmit": {"state": "start"}}});
    assert_eq!(post("/control/state", &ctl).status, 200);
    let req = json!({"choice": "flow", "flow": {"flow_names": ["f"]}});
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let m = post("/monitor/metrics", &req).body["flow_metrics"][0].clone();
        if m["transmit"] == "stopped" {
            assert_eq!(m["frames_rx"], json!("20"), "{m}");
            break;
        }
        assert!(std::time::Instant::now() < end, "the flow did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = post("/monitor/capture", &json!({"port_name": "rx"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let bytes = r.bytes.unwrap();
    let mut rd = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
    let mut ports = Vec::new();
    while let Some(p) = rd.next_packet() {
        let d = p.unwrap().data;
        ports.push(u16::from_be_bytes([d[36], d[37]]));
    }
    ports
}

#[test]
fn a_captures_filters_keep_only_the_frames_they_match() {
    let all: Vec<u16> = (0..20).map(|n| 6000 + n % 4).collect();
    assert_eq!(captured_ports(json!([])), all, "no filter: every frame");
    // UDP dst 6000 or 6001 (its last bit not compared), from the flow's
    // source MAC, to 198.18.1.1, UDP: 10 of the 20.
    let two = json!([
        {"choice": "ethernet", "ethernet": {"src": {"value": "020000000001"}}},
        {"choice": "ipv4", "ipv4": {"dst": {"value": "c6120101"}, "protocol": {"value": "11"}}},
        {"choice": "custom", "custom": {"offset": 16, "bit_length": 16, "value": "1770", "mask": "0001"}}
    ]);
    let want: Vec<u16> = all.iter().copied().filter(|p| *p < 6002).collect();
    assert_eq!(captured_ports(two), want);
    // Negated: the other 10.
    let not = json!([{"choice": "custom", "custom": {"offset": 288, "bit_length": 16, "value": "1770", "mask": "0001", "negate": true}}]);
    let want: Vec<u16> = all.iter().copied().filter(|p| *p >= 6002).collect();
    assert_eq!(captured_ports(not), want);
    // Another source MAC: nothing kept.
    let other = json!([{"choice": "ethernet", "ethernet": {"src": {"value": "020000000009"}}}]);
    assert_eq!(captured_ports(other), Vec::<u16>::new());
}
