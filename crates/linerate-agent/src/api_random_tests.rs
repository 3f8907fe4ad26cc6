//! The model's `random` pattern (ports, IPv4 addresses): `count` values of
//! a seeded SplitMix64 sequence (`linerate_traffic::random`), frame n
//! carrying value n mod count; what it does not take refused by path in
//! one answer.

use super::*;

fn agent() -> Agent {
    Agent::new(Options::loopback(&["wire0", "wire1"]))
}

fn post(a: &Agent, v: &Value) -> Reply {
    a.handle("POST", "/config", v.to_string().as_bytes())
}

/// A flow from wire0 to wire1, udp with these ports, ipv4 with this dst.
fn doc(udp: Value, dst: Value) -> Value {
    let v = |x: &str| json!({"choice": "value", "value": x});
    json!({
        "ports": [{"name": "p1", "location": "wire0"}, {"name": "p2", "location": "wire1"}],
        "flows": [{
            "name": "f",
            "tx_rx": {"choice": "port", "port": {"tx_name": "p1", "rx_names": ["p2"]}},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 100}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": v("02:00:00:00:00:01"), "dst": v("02:00:00:00:00:02")}},
                {"choice": "ipv4", "ipv4": {"src": v("198.18.1.1"), "dst": dst}},
                {"choice": "udp", "udp": udp}
            ]
        }]
    })
}

fn spec_of(a: &Agent) -> linerate_traffic::FlowSpec {
    let s = lock(&a.state);
    s.campaign.as_ref().unwrap().plan.flows[0]
        .blast
        .flows
        .clone()
}

#[test]
fn random_ports_and_addresses_follow_the_documented_sequence() {
    let a = agent();
    let udp = json!({
        "src_port": {"choice": "random", "random": {"min": 1024, "max": 65535, "seed": 42, "count": 5}},
        "dst_port": {"choice": "random", "random": {"min": 5000, "max": 5009, "count": 4}}
    });
    let dst = json!({"choice": "random", "random": {"min": "198.18.0.0", "max": "198.18.255.255", "seed": 9, "count": 3}});
    let r = post(&a, &doc(udp, dst));
    assert_eq!(r.status, 200, "{}", r.body);
    let spec = spec_of(&a);
    assert_eq!(spec.count(), 60, "lcm(5, 4, 3)");
    // Values from the SplitMix64 formula in docs/agent.md (seed 1 the
    // model's default for dst_port).
    let src = [17045u16, 50435, 3922, 28564, 4082];
    let dstp = [5005u16, 5009, 5000, 5005];
    let dst = ["198.18.96.100", "198.18.234.98", "198.18.137.182"];
    let mut c = linerate_traffic::WireCursor::new(&spec);
    for n in 0..130u64 {
        let f = spec.flow(n);
        assert_eq!(f.src_port, src[(n % 5) as usize], "frame {n}");
        assert_eq!(f.dst_port, dstp[(n % 4) as usize], "frame {n}");
        assert_eq!(
            f.dst_ip,
            dst[(n % 3) as usize].parse::<std::net::IpAddr>().unwrap()
        );
        assert_eq!(f.src_ip, std::net::IpAddr::from([198, 18, 1, 1]));
        assert_eq!(c.wire(), &linerate_traffic::WireFlow::new(&f), "frame {n}");
        c.advance();
    }
    // The same configuration again: the same frames; another seed: others.
    let again = doc(
        json!({"src_port": {"choice": "random", "random": {"min": 1024, "max": 65535, "seed": 42, "count": 5}}}),
        json!({"choice": "value", "value": "198.18.2.1"}),
    );
    assert_eq!(post(&a, &again).status, 200);
    let ports: Vec<u16> = (0..5).map(|n| spec_of(&a).flow(n).src_port).collect();
    assert_eq!(ports, src);
    let mut other = again.clone();
    other["flows"][0]["packet"][2]["udp"]["src_port"]["random"]["seed"] = json!(43);
    assert_eq!(post(&a, &other).status, 200);
    let ports: Vec<u16> = (0..5).map(|n| spec_of(&a).flow(n).src_port).collect();
    assert_eq!(ports, [23432, 24395, 46183, 49023, 3583]);
    // The model's defaults: the whole span, seed 1, count 1 (one value).
    let dflt = doc(
        json!({"src_port": {"choice": "random"}}),
        json!({"choice": "value", "value": "198.18.2.1"}),
    );
    assert_eq!(post(&a, &dflt).status, 200);
    let spec = spec_of(&a);
    let one = linerate_traffic::random::splitmix64(1, 0) % 65536;
    assert!((0..7).all(|n| u64::from(spec.flow(n).src_port) == one));
}

#[test]
fn what_random_does_not_take_is_refused_by_path_in_one_answer() {
    let a = agent();
    let v = json!({"choice": "value", "value": "198.18.2.1"});
    let cases = [
        (
            json!({"src_port": {"choice": "random", "random": {"min": 9, "max": 8}}}),
            "flows[0].packet[2].udp.src_port.random.max",
            "below min",
        ),
        (
            json!({"src_port": {"choice": "random", "random": {"count": 0}}}),
            "flows[0].packet[2].udp.src_port.random.count",
            "from 1",
        ),
        (
            json!({"src_port": {"choice": "random", "random": {"max": 65536}}}),
            "flows[0].packet[2].udp.src_port.random.max",
            "above 65535",
        ),
        (
            json!({"dst_port": {"choice": "random", "random": {"seed": 4294967296u64}}}),
            "flows[0].packet[2].udp.dst_port.random.seed",
            "above",
        ),
        (
            json!({"dst_port": {"choice": "random", "random": {"step": 1}}}),
            "flows[0].packet[2].udp.dst_port.random.step",
            "not supported",
        ),
        (
            json!({"length": {"choice": "random"}}),
            "flows[0].packet[2].udp.length.choice",
            "'random' is not one",
        ),
    ];
    let flow = doc(json!({}), v.clone())["flows"][0].clone();
    let flows: Vec<Value> = cases
        .iter()
        .enumerate()
        .map(|(i, (udp, _, _))| {
            let mut f = flow.clone();
            f["name"] = json!(format!("f{i}"));
            f["packet"][2]["udp"] = udp.clone();
            f
        })
        .collect();
    let mut d = doc(json!({}), v);
    d["flows"] = json!(flows);
    let r = post(&a, &d);
    let errs = super::refusals::errors(&r);
    assert_eq!(errs.len(), cases.len(), "{errs:?}");
    super::refusals::each_at_its_path(&errs, &cases);
}
