//! Control requests take effect in the order they arrived, whichever is
//! answered first: a stop that arrived after a start always stops what
//! the start began (on a loopback port: nothing here touches an
//! interface).

use linerate_agent::{Agent, Options};
use linerate_backend::loopback::{Faults, Port, Wires};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn agent(wires: &Wires, wire: &str) -> Agent {
    Agent::new(Options {
        wires: wires.clone(),
        drain: Duration::from_millis(20),
        run_max: Duration::from_secs(20),
        ..Options::loopback(&[wire])
    })
}

fn continuous(wire: &str) -> Value {
    json!({
        "ports": [{"name": "a", "location": wire}, {"name": "b", "location": wire}],
        "flows": [{
            "name": "f",
            "tx_rx": {"choice": "port", "port": {"tx_name": "a", "rx_names": ["b"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": {"choice": "value", "value": "02:00:00:00:00:01"}}},
                {"choice": "ipv4", "ipv4": {"dst": {"choice": "value", "value": "198.18.0.2"}}},
                {"choice": "udp", "udp": {"dst_port": {"choice": "value", "value": 7000}}}
            ],
            "rate": {"choice": "pps", "pps": "1000"},
            "duration": {"choice": "continuous"},
        }],
    })
}

fn state(s: &str) -> Vec<u8> {
    json!({"choice": "traffic", "traffic": {"choice": "flow_transmit",
        "flow_transmit": {"state": s}}})
    .to_string()
    .into_bytes()
}

fn transmit(a: &Agent) -> Value {
    let m = a.handle(
        "POST",
        "/monitor/metrics",
        br#"{"choice": "flow", "flow": {"flow_names": ["f"]}}"#,
    );
    m.body["flow_metrics"][0].clone()
}

#[test]
fn a_stop_that_arrived_after_a_start_wins_whichever_is_answered_first() {
    let wires = Wires::default();
    let _wire = Port::create(&wires, "orderwire0", 1500, Faults::default()).unwrap();
    let a = agent(&wires, "orderwire0");
    let r = a.handle(
        "POST",
        "/config",
        continuous("orderwire0").to_string().as_bytes(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    // Arrived: the start, then the stop; answered: the stop first.
    let (start, stop) = (a.arrival(), a.arrival());
    let r = a.handle_arrived(stop, "POST", "/control/state", &state("stop"));
    assert_eq!(r.status, 200);
    let r = a.handle_arrived(start, "POST", "/control/state", &state("start"));
    assert_eq!(r.status, 200);
    assert!(
        r.body["warnings"][0]
            .as_str()
            .unwrap()
            .contains("nothing started"),
        "{}",
        r.body
    );
    std::thread::sleep(Duration::from_millis(200));
    let m = transmit(&a);
    assert_eq!(
        (&m["transmit"], &m["frames_tx"]),
        (&json!("stopped"), &json!("0")),
        "{m}"
    );

    // In order: a start then a stop 10 ms later, many times over: the
    // flow is stopped every time.
    for round in 0..20 {
        let r = a.handle("POST", "/control/state", &state("start"));
        assert_eq!(r.status, 200, "round {round}: {}", r.body);
        std::thread::sleep(Duration::from_millis(10));
        let r = a.handle("POST", "/control/state", &state("stop"));
        assert_eq!(r.status, 200, "round {round}: {}", r.body);
        let m = transmit(&a);
        assert_eq!(m["transmit"], "stopped", "round {round}: {m}");
        let sent = m["frames_tx"].clone();
        let t = Instant::now() + Duration::from_millis(100);
        while Instant::now() < t {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            transmit(&a)["frames_tx"],
            sent,
            "round {round}: still sending"
        );
    }
}
