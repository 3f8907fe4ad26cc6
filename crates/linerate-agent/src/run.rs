//! The agent's flows through the run contract (`linerate-run`), like every
//! other mode: each start of traffic is a run (mode `agent`) with its
//! `Start` (the flows it started, typed), an interval every
//! [`Reporting::interval`] with a `tx` row (counted by the sender) and an
//! `rx` row (counted by the receivers) per flow, and its `End` once every
//! flow it started has ended: the flows' exact counts (the reports', not
//! the running ones) as a typed [`AgentOutcome`]. The reporters are the
//! binary's (`--json-stream`, `--csv`, `--metrics`, text).

use crate::campaign::{FlowCounts, FlowRun};
pub use crate::plan::Reporting;
use crate::plan::{Plan, PlanFlow};
use linerate_packet::Rate;
use linerate_run::{CountedBy, Counts, Measured, Mode, Outcome, Row, Run, Sampler, Scope};
use serde::Serialize;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a run was asked to do: its `Start` event's `config`.
#[derive(Debug, Clone, Serialize)]
pub struct RunConfig {
    pub flows: Vec<FlowConfig>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowConfig {
    pub name: String,
    pub port_tx: String,
    pub ports_rx: Vec<String>,
    /// Frames to send (`None`: for `seconds`).
    pub frames: Option<u64>,
    /// The longest it sends.
    pub seconds: f64,
    pub rate: Rate,
    pub delay_s: f64,
    /// Probe flow ids `[first, last]` its frames carry.
    pub probe_ids: [u16; 2],
}

impl FlowConfig {
    fn of(plan: &Plan, f: &PlanFlow) -> Self {
        FlowConfig {
            name: f.name.clone(),
            port_tx: plan.ports[f.tx].name.clone(),
            ports_rx: f.rx.iter().map(|&r| plan.ports[r].name.clone()).collect(),
            frames: f.blast.count,
            seconds: f.blast.duration.as_secs_f64(),
            rate: f.blast.rate,
            delay_s: f.delay.as_secs_f64(),
            probe_ids: [f.ids.base, f.ids.base + (f.ids.span() - 1) as u16],
        }
    }
}

/// A run's result: each flow's exact counts.
#[derive(Debug, Clone, Serialize)]
pub struct AgentOutcome {
    pub flows: Vec<FlowResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowResult {
    pub name: String,
    pub port_tx: String,
    pub ports_rx: Vec<String>,
    /// Counted by the sender (frames the backend took).
    pub frames_tx: u64,
    /// Counted by the receivers (the flow's probe ids only), every
    /// receive port together.
    pub frames_rx: u64,
    /// Frame bytes, FCS included.
    pub bytes_tx: u64,
    pub bytes_rx: u64,
    /// (frames_tx - frames_rx) / frames_tx, percent, as the model's flow
    /// metric `loss` (0 when nothing was sent).
    pub loss_pct: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<Latency>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One-way latency over the flow's frames, nanoseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Latency {
    pub minimum: f64,
    pub maximum: f64,
    pub average: f64,
}

impl FlowResult {
    fn of(cfg: &FlowConfig, c: &FlowCounts) -> Self {
        let rx = c.rx_packets();
        FlowResult {
            name: cfg.name.clone(),
            port_tx: cfg.port_tx.clone(),
            ports_rx: cfg.ports_rx.clone(),
            frames_tx: c.tx_packets,
            frames_rx: rx,
            bytes_tx: c.tx_bytes,
            bytes_rx: c.rx_bytes(),
            loss_pct: loss_pct(c.tx_packets, rx),
            latency_ns: c.latency.map(|(minimum, maximum, average)| Latency {
                minimum,
                maximum,
                average,
            }),
            error: c.error.clone(),
        }
    }
}

pub use crate::rates::loss_pct;

impl Outcome for AgentOutcome {
    fn document(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn text(&self) -> String {
        let mut s = format!(
            "{:<20} {:>12} {:>12} {:>14} {:>14} {:>8}\n",
            "flow", "frames tx", "frames rx", "bytes tx", "bytes rx", "loss"
        );
        for f in &self.flows {
            s.push_str(&format!(
                "{:<20} {:>12} {:>12} {:>14} {:>14} {:>7.3}%\n",
                f.name, f.frames_tx, f.frames_rx, f.bytes_tx, f.bytes_rx, f.loss_pct
            ));
            if let Some(l) = f.latency_ns {
                s.push_str(&format!(
                    "  latency (one-way) min {:.0} ns, avg {:.0} ns, max {:.0} ns\n",
                    l.minimum, l.average, l.maximum
                ));
            }
            if let Some(e) = &f.error {
                s.push_str(&format!("  error: {e}\n"));
            }
        }
        s.push_str("(tx counted by the sender, rx by the receivers; frame bytes with FCS)\n");
        s
    }
}

/// A flow's rows from its counts: `tx` by the sender, `rx` by the
/// receivers (every receive port together).
fn rows(name: &str, c: &FlowCounts) -> [Row; 2] {
    let tx = Row::new(Scope::Flow, name, "tx", CountedBy::Sender).with_counts(Counts {
        packets: Some(c.tx_packets),
        bytes: Some(c.tx_bytes),
        ..Counts::default()
    });
    let rx = Row::new(Scope::Flow, name, "rx", CountedBy::Receiver).with_counts(Counts {
        packets: Some(c.rx_packets()),
        bytes: Some(c.rx_bytes()),
        ..Counts::default()
    });
    [tx, rx]
}

/// A run being watched: the flows it started (their place in the
/// campaign, their state, the generation they were started as).
#[derive(Debug)]
pub struct Watch {
    pub flows: Vec<(usize, Arc<FlowRun>, u64)>,
    pub config: RunConfig,
    /// Each flow's final counts, sent by its thread as it ends.
    pub ended: Receiver<(usize, FlowCounts)>,
}

impl Watch {
    /// A watch of the flows of `plan` that started (their place, state and
    /// generation), whose threads send their end on `ended`'s sender.
    pub fn new(
        plan: &Plan,
        flows: Vec<(usize, Arc<FlowRun>, u64)>,
        ended: Receiver<(usize, FlowCounts)>,
    ) -> Self {
        let config = RunConfig {
            flows: flows
                .iter()
                .map(|(i, _, _)| FlowConfig::of(plan, &plan.flows[*i]))
                .collect(),
        };
        Watch {
            flows,
            config,
            ended,
        }
    }

    /// Reports the run on its own thread: start now, intervals, the end
    /// once every flow has ended.
    pub fn spawn(self, to: &Reporting) -> std::io::Result<JoinHandle<()>> {
        let to = to.clone();
        std::thread::Builder::new()
            .name("agent-run".into())
            .spawn(move || self.report(&to))
    }

    fn report(self, to: &Reporting) {
        let config = serde_json::to_value(&self.config).unwrap_or_default();
        let mut run = Run::start(Box::new(to.events.0.clone()), Mode::Agent, config, None);
        let t0 = Instant::now();
        let mut sampler = Sampler::new(t0, to.interval);
        let n = self.flows.len();
        let mut finals: Vec<Option<FlowCounts>> = vec![None; n];
        let place = |i: usize| self.flows.iter().position(|(j, _, _)| *j == i);
        // The last snapshot of each flow still in this run's generation.
        let mut last: Vec<FlowCounts> = vec![FlowCounts::default(); n];
        while finals.iter().any(Option::is_none) {
            let wait = sampler.wait(Instant::now(), Duration::from_millis(200));
            match self.ended.recv_timeout(wait) {
                Ok((i, c)) => {
                    if let Some(k) = place(i) {
                        finals[k] = Some(c);
                    }
                    continue;
                }
                // Every flow's sender gone without its end: a thread that
                // could not report (its panic); its counts so far stand.
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            if sampler.due(now) {
                let snap = self.snapshot(&finals, &mut last);
                if let Some(iv) = sampler.sample(now, snap) {
                    run.interval(&iv);
                }
            }
        }
        let ended: Vec<FlowCounts> = finals
            .into_iter()
            .zip(last)
            .map(|(f, l)| f.unwrap_or(l))
            .collect();
        let totals: Vec<Row> = self
            .config
            .flows
            .iter()
            .zip(&ended)
            .flat_map(|(f, c)| rows(&f.name, c))
            .collect();
        for iv in sampler.finish(Instant::now(), totals.clone()) {
            run.interval(&iv);
        }
        let flows: Vec<FlowResult> = self
            .config
            .flows
            .iter()
            .zip(&ended)
            .map(|(f, c)| FlowResult::of(f, c))
            .collect();
        let error = flows
            .iter()
            .find_map(|f| f.error.as_ref().map(|e| format!("flow '{}': {e}", f.name)));
        run.end(Measured {
            duration_s: t0.elapsed().as_secs_f64(),
            rows: totals,
            outcome: Arc::new(AgentOutcome { flows }),
            error,
        });
    }

    /// Every flow's running counts (an ended flow's final ones), as rows.
    fn snapshot(&self, finals: &[Option<FlowCounts>], last: &mut [FlowCounts]) -> Vec<Row> {
        let mut out = Vec::with_capacity(2 * self.flows.len());
        for (k, (_, f, generation)) in self.flows.iter().enumerate() {
            let c = match &finals[k] {
                Some(c) => c.clone(),
                None => {
                    let s = f.snapshot();
                    // Started again by a later run: this run's end is on
                    // its way; its last counts stand until then.
                    if s.generation == *generation {
                        last[k] = s;
                    }
                    last[k].clone()
                }
            };
            out.extend(rows(&self.config.flows[k].name, &c));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outcome_serializes_its_typed_fields() {
        let o = AgentOutcome {
            flows: vec![FlowResult {
                name: "f1".into(),
                port_tx: "p1".into(),
                ports_rx: vec!["p2".into()],
                frames_tx: 100,
                frames_rx: 98,
                bytes_tx: 12_800,
                bytes_rx: 12_544,
                loss_pct: loss_pct(100, 98),
                latency_ns: None,
                error: None,
            }],
        };
        let d = o.document();
        assert_eq!(
            d,
            serde_json::json!({"flows": [{
                "name": "f1", "port_tx": "p1", "ports_rx": ["p2"],
                "frames_tx": 100, "frames_rx": 98, "bytes_tx": 12800,
                "bytes_rx": 12544, "loss_pct": 2.0
            }]})
        );
        assert!(o.text().contains("f1"), "{}", o.text());
        assert_eq!(loss_pct(0, 0), 0.0);
        assert_eq!(loss_pct(10, 20), 0.0);
    }
}
