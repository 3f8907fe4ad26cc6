//! The `gre`, `mpls`, `icmp` and `icmpv6` headers: what a configuration
//! makes of them (the frames, byte for byte, frame n carrying what the
//! model says), and what is not taken refused by path in one answer.

use super::*;
use linerate_traffic::flows::Range;
use linerate_traffic::stack::{Gre, Label, Stack};
use linerate_wire::Probe;

fn agent() -> Agent {
    Agent::new(Options::loopback(&["wire0", "wire1"]))
}

fn post(a: &Agent, v: &Value) -> Reply {
    a.handle("POST", "/config", v.to_string().as_bytes())
}

fn v(x: Value) -> Value {
    json!({"choice": "value", "value": x})
}

fn eth() -> Value {
    json!({"choice": "ethernet", "ethernet": {"src": v(json!("02:00:00:00:00:01")), "dst": v(json!("02:00:00:00:00:02"))}})
}

fn ipv4(src: &str, dst: &str) -> Value {
    json!({"choice": "ipv4", "ipv4": {"src": v(json!(src)), "dst": v(json!(dst))}})
}

fn udp() -> Value {
    json!({"choice": "udp", "udp": {"src_port": v(json!(5000)),
        "dst_port": {"choice": "increment", "increment": {"start": 6000, "step": 1, "count": 3}}}})
}

/// A one-flow configuration of `packet`, 100 frames of `size` bytes.
fn config(packet: Value, size: u64) -> Value {
    json!({
        "ports": [{"name": "p1", "location": "wire0"}, {"name": "p2", "location": "wire1"}],
        "flows": [{
            "name": "f",
            "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 100}},
            "size": {"choice": "fixed", "fixed": size},
            "packet": packet
        }]
    })
}

fn hex(s: &str) -> Vec<u8> {
    let d: Vec<u8> = s
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_digit(16).unwrap() as u8)
        .collect();
    d.chunks(2).map(|p| p[0] << 4 | p[1]).collect()
}

/// Frame `n` of the configuration's one flow, as blast writes it (probe
/// flow id 0, sequence 1, stamp 0).
fn frame(a: &Agent, n: u64) -> Vec<u8> {
    let s = lock(&a.state);
    let f = &s.campaign.as_ref().unwrap().plan.flows[0];
    let b = &f.blast;
    let stack = b.framing.stack.as_ref().expect("a stacked flow");
    let size = usize::from(b.sizes.cycle()[0]);
    let mut out = vec![0u8; size];
    let probe = Probe {
        flow_id: 0,
        seq: 1,
        tx_ns: 0,
    };
    let len = stack.write(&mut out, size, &b.framing, &b.flows.flow(n), probe, n);
    out.truncate(len);
    out
}

fn stack(a: &Agent) -> Stack {
    let s = lock(&a.state);
    s.campaign.as_ref().unwrap().plan.flows[0]
        .blast
        .framing
        .stack
        .clone()
        .unwrap()
}

#[test]
fn gre_frames_byte_for_byte() {
    let a = agent();
    let packet = json!([eth(), ipv4("198.18.1.1", "198.18.1.2"),
        {"choice": "gre", "gre": {"checksum_present": v(json!(1))}},
        ipv4("198.18.0.1", "198.18.0.2"), udp()]);
    let r = post(&a, &config(packet, 96));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        stack(&a).gre,
        Some(Gre {
            src: "198.18.1.1".parse().unwrap(),
            dst: "198.18.1.2".parse().unwrap(),
            dscp: 0,
            ttl: 64,
            checksum_present: true,
            reserved0: 0,
            version: 0,
            protocol: None,
            reserved1: 0,
        })
    );
    let want = hex("020000000002 020000000001 0800
         45 00 004e 0000 4000 40 2f ac59 c6120101 c6120102
         8000 0800 0457 0000
         45 00 0032 0000 4000 40 11 ae93 c6120001 c6120002
         1388 1770 001e 9d8b
         a901 0000 0000000000000001 000000000000 00010203");
    assert_eq!(frame(&a, 0), want);
    // Frame n: destination port 6000 + n mod 3.
    for n in 1..7u64 {
        let b = frame(&a, n);
        assert_eq!(
            &b[64..66],
            &(6000 + (n % 3) as u16).to_be_bytes(),
            "frame {n}"
        );
        assert_eq!(linerate_wire::probe_of(&b).map(|p| p.seq), Some(1));
    }
}

#[test]
fn mpls_labels_step_as_the_model_says() {
    let a = agent();
    let label = |l: Value| json!({"choice": "mpls", "mpls": {"label": l}});
    let packet = json!([eth(),
        label(json!({"choice": "increment", "increment": {"start": 100, "step": 10, "count": 3}})),
        label(json!({"choice": "values", "values": [7, 5, 3, 1]})),
        {"choice": "mpls", "mpls": {"label": {"choice": "decrement", "decrement": {"start": 50, "step": 1, "count": 2}},
            "traffic_class": v(json!(3)), "time_to_live": v(json!(9))}},
        ipv4("198.18.0.1", "198.18.0.2"), udp()]);
    let r = post(&a, &config(packet, 128));
    assert_eq!(r.status, 200, "{}", r.body);
    let s = stack(&a);
    assert_eq!(s.mpls.len(), 3);
    assert_eq!(
        s.mpls[2],
        Label {
            label: Range {
                first: 50,
                count: 2,
                step: (1 << 20) - 1
            },
            traffic_class: Range::single(3),
            bottom_of_stack: None,
            ttl: Range::single(9),
        }
    );
    let want0 = hex("8847 00064040 00007040 00032709");
    assert_eq!(&frame(&a, 0)[12..26], &want0[..]);
    for n in 0..13u64 {
        let b = frame(&a, n);
        let word = |i: usize| u32::from_be_bytes(b[14 + 4 * i..18 + 4 * i].try_into().unwrap());
        assert_eq!(word(0) >> 12, 100 + 10 * (n % 3) as u32, "frame {n}");
        assert_eq!(word(1) >> 12, 7 - 2 * (n % 4) as u32, "frame {n}");
        assert_eq!(word(2) >> 12, 50 - (n % 2) as u32, "frame {n}");
        // Bottom of stack on the last label only; the model's ttl 64.
        assert_eq!(
            [word(0) >> 8 & 1, word(1) >> 8 & 1, word(2) >> 8 & 1],
            [0, 0, 1]
        );
        assert_eq!([word(0) & 0xff, word(2) >> 9 & 7], [64, 3]);
        assert_eq!(linerate_wire::probe_of(&b).map(|p| p.seq), Some(1));
    }
}

#[test]
fn icmp_and_icmpv6_echo_frames_byte_for_byte() {
    let a = agent();
    let echo = json!({"choice": "echo", "echo": {
        "identifier": {"choice": "increment", "increment": {"start": 1, "step": 1, "count": 4}},
        "sequence_number": {"choice": "values", "values": [10, 20]}}});
    let packet = json!([eth(), ipv4("198.18.0.1", "198.18.0.2"), {"choice": "icmp", "icmp": echo}]);
    let r = post(&a, &config(packet, 64));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(stack(&a).icmp, Some((8, 0)));
    let want = hex("020000000002 020000000001 0800
         45 00 002e 0000 4000 40 01 aea7 c6120001 c6120002
         08 00 4ef2 0001 000a
         a901 0000 0000000000000001 000000000000");
    assert_eq!(frame(&a, 0), want);
    for n in 0..9u64 {
        let b = frame(&a, n);
        assert_eq!(&b[38..40], &(1 + (n % 4) as u16).to_be_bytes(), "frame {n}");
        assert_eq!(&b[40..42], &(10 + 10 * (n % 2) as u16).to_be_bytes());
        assert_eq!(linerate_wire::probe_of(&b).map(|p| p.seq), Some(1));
    }
    let v6 = |a: &str| json!({"choice": "ipv6", "ipv6": {"src": v(json!(a)), "dst": v(json!("2001:db8::2"))}});
    let packet = json!([eth(), v6("2001:db8::1"),
        {"choice": "icmpv6", "icmpv6": {"echo": {"identifier": v(json!(0x1234)), "sequence_number": v(json!(7))}}}]);
    let r = post(&a, &config(packet, 84));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(stack(&a).icmp, Some((128, 0)));
    let want = hex("020000000002 020000000001 86dd
         60000000 001a 3a 40 20010db8000000000000000000000001 20010db8000000000000000000000002
         80 00 68f8 1234 0007
         a901 0000 0000000000000001 000000000000");
    assert_eq!(frame(&a, 0), want);
}

fn gre_packet(g: Value) -> Value {
    json!([eth(), ipv4("198.18.1.1", "198.18.1.2"), {"choice": "gre", "gre": g}, ipv4("198.18.0.1", "198.18.0.2"), udp()])
}

/// Packets refused, with the path and words of their refusal.
fn refused_packets() -> Vec<(Value, &'static str, &'static str)> {
    let gre = gre_packet;
    let mpls = |m: Value| json!([eth(), {"choice": "mpls", "mpls": m}, ipv4("198.18.0.1", "198.18.0.2"), udp()]);
    let icmp = |e: Value| json!([eth(), ipv4("198.18.0.1", "198.18.0.2"), {"choice": "icmp", "icmp": {"echo": e}}]);
    vec![
        (
            gre(json!({"protocol": v(json!(0x86dd))})),
            "flows[0].packet[2].gre.protocol",
            "0x0800 (auto)",
        ),
        (
            gre(json!({"reserved0": v(json!(0x800))})),
            "flows[0].packet[2].gre.reserved0",
            "RFC 1701",
        ),
        (
            gre(json!({"checksum": {"choice": "custom", "custom": 1}})),
            "flows[0].packet[2].gre.checksum",
            "good checksums",
        ),
        (gre(json!({"key": 1})), "flows[0].packet[2].gre.key", ""),
        (
            json!([eth(), {"choice": "ipv4", "ipv4": {"src": {"choice": "increment", "increment": {"start": "198.18.1.1", "count": 2}}}},
            {"choice": "gre"}, ipv4("198.18.0.1", "198.18.0.2"), udp()]),
            "flows[0].packet[1].ipv4.src",
            "one value of an outer",
        ),
        (
            mpls(json!({"bottom_of_stack": {"choice": "values", "values": [0, 1]}})),
            "flows[0].packet[1].mpls.bottom_of_stack",
            "value or auto",
        ),
        (
            mpls(json!({"label": {"choice": "value", "value": 1 << 20}})),
            "flows[0].packet[1].mpls.label.value",
            "above",
        ),
        (
            mpls(
                json!({"label": {"choice": "value", "value": 16, "metric_tags": [{"name": "l"}]}}),
            ),
            "flows[0].packet[1].mpls.label.metric_tags",
            "not supported",
        ),
        (
            icmp(json!({"type": v(json!(3))})),
            "flows[0].packet[2].icmp.echo.type",
            "echo requests (8) or replies (0)",
        ),
        (
            icmp(json!({"identifier": {"choice": "random"}})),
            "flows[0].packet[2].icmp.echo.identifier.choice",
            "",
        ),
        (
            json!([eth(), {"choice": "ipv6"}, {"choice": "icmp"}]),
            "flows[0].packet",
            "icmpv6 (over ipv6)",
        ),
        (
            json!([eth(), ipv4("198.18.0.1", "198.18.0.2"), {"choice": "gre"}, udp()]),
            "flows[0].packet",
            "then gre",
        ),
    ]
}

/// Refusals come by path, every flow's in one answer.
#[test]
fn what_these_headers_do_not_take_is_refused_by_path_in_one_answer() {
    let a = agent();
    let cases = refused_packets();
    let mut doc = config(json!([]), 128);
    let flow = doc["flows"][0].clone();
    let mut flows = Vec::new();
    for (i, (packet, _, _)) in cases.iter().enumerate() {
        let mut f = flow.clone();
        f["name"] = json!(format!("f{i}"));
        f["packet"] = packet.clone();
        flows.push(f);
    }
    doc["flows"] = json!(flows);
    let r = post(&a, &doc);
    let errs = super::refusals::errors(&r);
    assert_eq!(errs.len(), cases.len(), "{errs:?}");
    super::refusals::each_at_its_path(&errs, &cases);
}

#[test]
fn a_frame_too_small_for_gres_headers_is_refused_by_its_size() {
    let a = agent();
    // A frame too small for GRE's headers: the size's error.
    let mut doc = config(gre_packet(json!({})), 64);
    let r = post(&a, &doc);
    assert_eq!(r.status, 400, "{}", r.body);
    let e = r.body["errors"][0].as_str().unwrap();
    assert!(
        e.starts_with("flows[0].size:") && e.contains("needs at least 88"),
        "{e}"
    );
    doc["flows"][0]["size"]["fixed"] = json!(88);
    assert_eq!(post(&a, &doc).status, 200);
}
