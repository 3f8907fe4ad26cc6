//! ARP flows without I/O: what a configuration makes of them (the frames
//! laid out, byte for byte, frame n carrying what the model says) and
//! what is refused, by path.

use super::*;
use crate::plan::Options;
use serde_json::{Value, json};

fn v(x: Value) -> Value {
    json!({"choice": "value", "value": x})
}

/// A one-flow configuration of ethernet and `arp` (or `packet`), `size`
/// bytes a frame.
fn config(packet: Value, size: Value) -> Value {
    json!({
        "ports": [{"name": "p1", "location": "wire0"}, {"name": "p2", "location": "wire1"}],
        "flows": [{
            "name": "f",
            "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 10}},
            "size": size,
            "packet": packet
        }]
    })
}

fn eth() -> Value {
    json!({"choice": "ethernet", "ethernet": {
        "src": v(json!("02:00:00:00:00:01")), "dst": v(json!("ff:ff:ff:ff:ff:ff"))}})
}

fn arp(fields: Value) -> Value {
    json!([eth(), {"choice": "arp", "arp": fields}])
}

fn fixed(n: u64) -> Value {
    json!({"choice": "fixed", "fixed": n})
}

/// Loopback ports sending, an interface's backend counting (the plan is
/// made, nothing runs).
fn opts() -> Options {
    Options {
        rx_backend: linerate_packet::BackendKind::Raw,
        ..Options::loopback(&["wire0", "wire1"])
    }
}

fn planned_frames(doc: &Value) -> Result<Vec<Vec<u8>>, String> {
    let cfg = crate::model::config(doc).map_err(|e| e.to_string())?;
    let plan = crate::plan::plan(&cfg, &opts()).map_err(|e| e.to_string())?;
    let f = &plan.flows[0];
    assert!(is_arp_flow(f));
    assert!(!f.latency && !f.blast.end_markers);
    Ok(f.blast.replay.as_ref().unwrap().trace.frames.clone())
}

/// Each field stepped on its own per frame (values in turn, increment,
/// decrement from its start downward), the period the counts' least
/// common multiple, zeros to the size.
#[test]
fn frame_n_carries_what_the_model_says() {
    let doc = config(
        arp(json!({
            "operation": {"choice": "values", "values": [1, 2]},
            "sender_hardware_addr": {"choice": "increment", "increment":
                {"start": "02:00:00:00:0a:00", "step": "00:00:00:00:00:01", "count": 3}},
            "sender_protocol_addr": v(json!("198.18.5.1")),
            "target_protocol_addr": {"choice": "decrement", "decrement":
                {"start": "198.18.6.10", "step": "0.0.0.2", "count": 4}},
        })),
        json!({"choice": "increment", "increment": {"start": 64, "end": 66, "step": 2}}),
    );
    let frames = planned_frames(&doc).unwrap();
    assert_eq!(frames.len(), 12, "lcm(2, 3, 4, 2 sizes)");
    for (n, f) in frames.iter().enumerate() {
        let mut want = vec![0xff; 6];
        want.extend_from_slice(&[2, 0, 0, 0, 0, 1, 8, 6, 0, 1, 8, 0, 6, 4]);
        want.extend_from_slice(&[0, [1, 2][n % 2]]);
        want.extend_from_slice(&[2, 0, 0, 0, 0x0a, (n % 3) as u8, 198, 18, 5, 1]);
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 198, 18, 6, 10 - 2 * (n % 4) as u8]);
        want.resize([60, 62][n % 2], 0);
        assert_eq!(f, &want, "frame {n}");
    }
    // The defaults: an Ethernet/IPv4 request, addresses 0.
    let f = &planned_frames(&config(arp(json!({})), fixed(64))).unwrap()[0];
    assert_eq!(f[12..22], [8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
    assert!(f[22..].iter().all(|&b| b == 0));
}

/// What an ARP flow cannot be, refused by path.
#[test]
fn what_an_arp_flow_cannot_be_is_refused_by_path() {
    let refused = |doc: Value, want: &str| {
        let e = planned_frames(&doc).unwrap_err();
        assert!(e.contains(want), "{e} (wanted {want})");
    };
    refused(
        config(arp(json!({})), fixed(63)),
        "flows[0].size.fixed: 63 bytes",
    );
    refused(
        config(
            arp(json!({})),
            json!({"choice": "weight_pairs", "weight_pairs": {"choice": "predefined", "predefined": "ipv6_imix"}}),
        ),
        "flows[0].size.weight_pairs: 60 bytes",
    );
    refused(
        config(
            json!([eth(), {"choice": "arp", "arp": {}}, {"choice": "vlan", "vlan": {}}]),
            fixed(64),
        ),
        "flows[0].packet: headers [ethernet, arp, vlan]: an arp flow's packet is ethernet, an optional vlan, then arp",
    );
    refused(
        config(
            json!([eth(), {"choice": "vlan", "vlan": {"id": {"choice": "values", "values": [1, 2]}}},
                   {"choice": "arp", "arp": {}}]),
            fixed(64),
        ),
        "flows[0].packet[1].vlan.id",
    );
    refused(
        config(
            json!([eth(), {"choice": "arp", "arp": {}}, {"choice": "udp", "udp": {}}]),
            fixed(64),
        ),
        "flows[0].packet: headers [ethernet, arp, udp]",
    );
    refused(
        config(arp(json!({"operation": v(json!(65536))})), fixed(64)),
        "flows[0].packet[1].arp.operation",
    );
    refused(
        config(arp(json!({"opcode": v(json!(1))})), fixed(64)),
        "flows[0].packet[1].arp.opcode",
    );
    let counts =
        |c: u64| json!({"choice": "increment", "increment": {"start": 1, "step": 1, "count": c}});
    refused(
        config(
            arp(json!({"hardware_type": counts(509), "protocol_type": counts(521)})),
            fixed(64),
        ),
        "repeat after more than 65536 frames",
    );
    let mut tagged = config(arp(json!({})), fixed(64));
    tagged["flows"][0]["packet"][0]["ethernet"]["src"]["metric_tags"] =
        json!([{"name": "t", "offset": 0, "length": 4}]);
    refused(
        tagged,
        "flows[0].packet: metric_tags: an arp flow's frames carry no probe",
    );
    // On loopback ports (no interface to count on): refused.
    let cfg = crate::model::config(&config(arp(json!({})), fixed(64))).unwrap();
    let e = crate::plan::plan(&cfg, &Options::loopback(&["wire0", "wire1"])).unwrap_err();
    assert!(e.to_string().contains("not on loopback ports"), "{e}");
}

/// A vlan between ethernet and arp: each frame tagged (0x8100, the
/// priority and id), the ARP header after it, zeros to the size; the
/// counting sockets read it untagged (the kernel takes the tag off) and
/// filter on the tag.
#[test]
fn a_vlan_tagged_arp_flow_is_ethernet_vlan_arp() {
    let packet = json!([eth(),
        {"choice": "vlan", "vlan": {"id": v(json!(100)), "priority": v(json!(5))}},
        {"choice": "arp", "arp": {"operation": {"choice": "values", "values": [1, 2]},
            "sender_protocol_addr": v(json!("198.18.5.1"))}}]);
    let frames = planned_frames(&config(packet, fixed(64))).unwrap();
    assert_eq!(frames.len(), 2);
    for (n, f) in frames.iter().enumerate() {
        let mut want = vec![0xff; 6];
        want.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        want.extend_from_slice(&[0x81, 0x00, 0xa0, 100, 8, 6]);
        want.extend_from_slice(&[0, 1, 8, 0, 6, 4, 0, [1, 2][n]]);
        want.extend_from_slice(&[0, 0, 0, 0, 0, 0, 198, 18, 5, 1]);
        want.resize(60, 0);
        assert_eq!(f, &want, "frame {n}");
        // As a counting socket reads it: the same without the tag.
        let h = header_of(f, true).unwrap();
        assert_eq!(h[..12], f[..12]);
        assert_eq!(h[12..], f[16..46]);
    }
    assert_eq!(header_of(&frames[0], false).unwrap()[..], frames[0][..42]);
    // The filter: ARP, tagged, priority 5 and id 100 (DEI left out).
    let prog = filter(Some((100, 5)));
    assert_eq!(prog[6], (0x15, 0, 1, 0xa064));
    assert_eq!(prog.len(), 9);
    assert_eq!(filter(None).len(), 6);
}

/// `weight_pairs`: the mix's sizes in its cycle (IMIX: 7 of 64 bytes, 4
/// of 570, 1 of 1518, spread as a plain flow's), each frame padded with
/// zeros to its size.
#[test]
fn an_arp_flow_takes_a_mix_of_sizes() {
    let doc = config(
        arp(json!({})),
        json!({"choice": "weight_pairs", "weight_pairs": {"choice": "predefined", "predefined": "imix"}}),
    );
    let frames = planned_frames(&doc).unwrap();
    assert_eq!(frames.len(), 12, "one cycle of the mix");
    let sizes: Vec<usize> = frames.iter().map(|f| f.len() + 4).collect();
    for (size, n) in [(64, 7), (570, 4), (1518, 1)] {
        assert_eq!(sizes.iter().filter(|&&s| s == size).count(), n, "{sizes:?}");
    }
    assert!(frames.iter().all(|f| f[42..].iter().all(|&b| b == 0)));
    let custom = config(
        arp(json!({})),
        json!({"choice": "weight_pairs", "weight_pairs": {"choice": "custom",
            "custom": [{"size": 100, "weight": 1}, {"size": 64, "weight": 3}]}}),
    );
    let sizes: Vec<usize> = planned_frames(&custom)
        .unwrap()
        .iter()
        .map(|f| f.len() + 4)
        .collect();
    assert_eq!(sizes.len(), 4);
    assert_eq!(sizes.iter().filter(|&&s| s == 100).count(), 1, "{sizes:?}");
}
