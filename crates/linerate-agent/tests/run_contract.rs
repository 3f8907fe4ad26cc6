//! The agent's flows through the run contract: a start of traffic is a
//! run whose intervals add up exactly to its end's totals, and whose end
//! carries the flows' exact counts, typed (on loopback ports: nothing here
//! touches an interface).

use linerate_agent::{Agent, Options, Reporting};
use linerate_backend::loopback::{Faults, Port, Wires};
use linerate_run::{Event, Mode, Reporter, Scope, SharedReporter};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<Event>>>);

impl Reporter for Kept {
    fn report(&mut self, ev: &Event) -> std::io::Result<()> {
        self.0.lock().unwrap().push(ev.clone());
        Ok(())
    }
}

impl Kept {
    fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }

    /// Waits (at most 20 s) for `n` end events.
    fn ends(&self, n: usize) -> Vec<Event> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ev = self.events();
            if ev.iter().filter(|e| matches!(e, Event::End(_))).count() >= n {
                return ev;
            }
            assert!(Instant::now() < deadline, "no end reported: {ev:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn agent(wires: &Wires, wire: &str, kept: &Kept) -> Agent {
    Agent::new(Options {
        wires: wires.clone(),
        drain: Duration::from_millis(20),
        run_max: Duration::from_secs(10),
        reporting: Some(Reporting {
            events: SharedReporter::new(kept.clone()),
            interval: Some(Duration::from_millis(100)),
        }),
        ..Options::loopback(&[wire])
    })
}

fn config(wire: &str, packets: u64, pps: u64, lose: bool) -> Value {
    let flow = |name: &str, src: &str| {
        json!({
            "name": name,
            "tx_rx": {"choice": "port", "port": {"tx_name": "a", "rx_names": ["b"]}},
            "packet": [
                {"choice": "ethernet", "ethernet": {"src": {"choice": "value", "value": src}}},
                {"choice": "ipv4", "ipv4": {"dst": {"choice": "value", "value": "198.18.0.2"}}},
                {"choice": "udp", "udp": {"dst_port": {"choice": "value", "value": 7000}}}
            ],
            "size": {"choice": "fixed", "fixed": 128},
            "rate": {"choice": "pps", "pps": pps.to_string()},
            "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": packets.to_string()}},
        })
    };
    let mut flows = vec![flow("f1", "02:00:00:00:00:01")];
    if lose {
        flows.push(flow("f2", "02:00:00:00:00:02"));
    }
    json!({
        "ports": [{"name": "a", "location": wire}, {"name": "b", "location": wire}],
        "flows": flows,
    })
}

fn post(a: &Agent, path: &str, v: &Value) -> linerate_agent::Reply {
    a.handle("POST", path, &serde_json::to_vec(v).unwrap())
}

fn start(a: &Agent, names: &[&str]) {
    let ctl = json!({"choice": "traffic", "traffic": {"choice": "flow_transmit",
        "flow_transmit": {"state": "start", "flow_names": names}}});
    let r = post(a, "/control/state", &ctl);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Sums a role's flow rows over the run's intervals: (packets, bytes).
fn summed(ev: &[Event], flow: &str, role: &str) -> (u64, u64) {
    let mut t = (0, 0);
    for e in ev {
        if let Event::Interval(iv) = e {
            for r in &iv.rows {
                if r.scope == Scope::Flow && r.id == flow && r.role == role {
                    t.0 += r.counts.packets.unwrap();
                    t.1 += r.counts.bytes.unwrap();
                }
            }
        }
    }
    t
}

#[test]
fn a_start_of_traffic_is_a_run_with_intervals_and_a_typed_end() {
    let wires = Wires::default();
    let _wire = Port::create(&wires, "runwire0", 1500, Faults::default()).unwrap();
    let kept = Kept::default();
    let a = agent(&wires, "runwire0", &kept);
    assert_eq!(
        post(&a, "/config", &config("runwire0", 1000, 2000, false)).status,
        200
    );
    start(&a, &[]);
    let ev = kept.ends(1);
    let Event::Start(s) = &ev[0] else {
        panic!("the first event is the start: {ev:?}")
    };
    assert_eq!(s.mode, Mode::Agent);
    assert_eq!(s.config["flows"][0]["name"], "f1");
    assert_eq!(s.config["flows"][0]["frames"], 1000);
    assert_eq!(s.config["flows"][0]["rate"], json!({"pps": 2000}));
    assert_eq!(s.config["flows"][0]["ports_rx"], json!(["b"]));
    let intervals = ev
        .iter()
        .filter(|e| matches!(e, Event::Interval(_)))
        .count();
    // 0.5 s of sending reported every 0.1 s.
    assert!(intervals >= 3, "{intervals} intervals: {ev:?}");
    // The intervals add up exactly to the end's totals.
    assert_eq!(summed(&ev, "f1", "tx"), (1000, 128_000));
    assert_eq!(summed(&ev, "f1", "rx"), (1000, 128_000));
    let Some(Event::End(end)) = ev.last() else {
        panic!("the last event is the end: {ev:?}")
    };
    assert_eq!(end.exit_code, 0);
    let doc = end.outcome.document();
    let f = &doc["flows"][0];
    assert_eq!(
        (
            &f["frames_tx"],
            &f["frames_rx"],
            &f["bytes_rx"],
            &f["loss_pct"]
        ),
        (&json!(1000), &json!(1000), &json!(128_000), &json!(0.0)),
        "{doc}"
    );
    let tx = end.sums.iter().find(|r| r.role == "tx").unwrap();
    assert_eq!(tx.counts.packets, Some(1000));
}

/// Two starts are two runs, each of the flows it started; a flow the
/// wire loses shows its loss in its run's end.
#[test]
fn each_start_is_its_own_run_of_its_own_flows() {
    let faults = Faults {
        drop_every: 4,
        ..Faults::default()
    };
    let wires = Wires::default();
    let _wire = Port::create(&wires, "runwire1", 1500, faults).unwrap();
    let kept = Kept::default();
    let a = agent(&wires, "runwire1", &kept);
    assert_eq!(
        post(&a, "/config", &config("runwire1", 400, 4000, true)).status,
        200
    );
    start(&a, &["f1"]);
    kept.ends(1);
    start(&a, &["f2"]);
    let ev = kept.ends(2);
    let ends: Vec<_> = ev
        .iter()
        .filter_map(|e| match e {
            Event::End(end) => Some(end.outcome.document()),
            _ => None,
        })
        .collect();
    assert_eq!(ends[0]["flows"].as_array().unwrap().len(), 1);
    assert_eq!(ends[0]["flows"][0]["name"], "f1");
    assert_eq!(ends[1]["flows"][0]["name"], "f2");
    for e in &ends {
        let f = &e["flows"][0];
        assert_eq!(f["frames_tx"], 400, "{e}");
        assert_eq!(f["frames_rx"], 300, "every 4th frame dropped: {e}");
        assert_eq!(f["loss_pct"], 25.0, "{e}");
    }
}
