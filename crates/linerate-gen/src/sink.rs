//! What a sink counts: per flow (the probe's flow id) and in total,
//! packets, bytes, loss, reordering and duplicates from the probe sequence
//! numbers, and one-way latency from the probe timestamp.
//!
//! Latency needs the sender's and receiver's clocks to be the same clock
//! (one host, as on the namespace rig); the report says which it assumed.

use hdrhistogram::Histogram;
use linerate_wire::{SeqTracker, parse_frame, unwrap_tx_ns};
use std::collections::BTreeMap;

/// One flow's counts.
#[derive(Debug, Clone, Default)]
pub struct FlowCounts {
    pub seq: SeqTracker,
    pub bytes: u64,
}

/// Totals and per-flow counts of what arrived.
#[derive(Debug)]
pub struct SinkCounts {
    pub flows: BTreeMap<u16, FlowCounts>,
    /// Frames with a linerate probe.
    pub packets: u64,
    /// Their bytes (L2, without FCS).
    pub bytes: u64,
    /// Frames without a probe (ARP, other traffic), not counted above.
    pub other: u64,
    /// One-way latency, ns (only when clocks are shared).
    pub latency_ns: Histogram<u64>,
    /// Probes whose timestamp was ahead of the receive time.
    pub clock_skew: u64,
    clocks_shared: bool,
}

/// Latency above this (an hour) is recorded as this.
const LATENCY_MAX_NS: u64 = 3_600_000_000_000;

impl SinkCounts {
    /// `clocks_shared`: sender and receiver read the same clock (one host).
    pub fn new(clocks_shared: bool) -> Self {
        Self {
            flows: BTreeMap::new(),
            packets: 0,
            bytes: 0,
            other: 0,
            latency_ns: Histogram::new_with_bounds(1, LATENCY_MAX_NS, 3)
                .expect("constant bounds are valid"),
            clock_skew: 0,
            clocks_shared,
        }
    }

    /// Accounts one received frame (without FCS) received at `rx_ns`
    /// (CLOCK_MONOTONIC of the receiver).
    pub fn on_frame(&mut self, frame: &[u8], rx_ns: u64) {
        let Ok(p) = parse_frame(frame) else {
            self.other += 1;
            return;
        };
        let Some(probe) = p.probe else {
            self.other += 1;
            return;
        };
        self.packets += 1;
        self.bytes += frame.len() as u64;
        let f = self.flows.entry(probe.flow_id).or_default();
        f.seq.on_seq(probe.seq);
        f.bytes += frame.len() as u64;
        if self.clocks_shared {
            let tx = unwrap_tx_ns(probe.tx_ns, rx_ns);
            match rx_ns.checked_sub(tx) {
                Some(lat) => {
                    let _ = self.latency_ns.record(lat.clamp(1, LATENCY_MAX_NS));
                }
                None => self.clock_skew += 1,
            }
        }
    }

    /// Takes in the counts of another receive worker of the same run.
    pub fn absorb(&mut self, other: &SinkCounts) {
        for (id, f) in &other.flows {
            match self.flows.get_mut(id) {
                Some(mine) => {
                    mine.seq.absorb(&f.seq);
                    mine.bytes += f.bytes;
                }
                None => {
                    self.flows.insert(*id, f.clone());
                }
            }
        }
        self.packets += other.packets;
        self.bytes += other.bytes;
        self.other += other.other;
        self.clock_skew += other.clock_skew;
        let _ = self.latency_ns.add(&other.latency_ns);
    }

    pub fn clocks_shared(&self) -> bool {
        self.clocks_shared
    }

    /// Lost over all flows: sequence numbers never seen up to each flow's
    /// highest (loss after a flow's last arrival needs the sender's count:
    /// see [`reconcile`](Self::reconcile)).
    pub fn lost(&self) -> u64 {
        self.flows.values().map(|f| f.seq.lost()).sum()
    }

    pub fn reordered(&self) -> u64 {
        self.flows.values().map(|f| f.seq.late).sum()
    }

    pub fn duplicates(&self) -> u64 {
        self.flows.values().map(|f| f.seq.duplicates).sum()
    }

    /// With the sender's per-flow counts: `(flow, sent, received, lost)`,
    /// where sent = received (distinct) + lost holds exactly per flow.
    pub fn reconcile(&self, sent: &BTreeMap<u16, u64>) -> Vec<(u16, u64, u64, u64)> {
        sent.iter()
            .map(|(&id, &n)| {
                let got = self
                    .flows
                    .get(&id)
                    .map_or(0, |f| f.seq.received - f.seq.duplicates);
                (id, n, got, n.saturating_sub(got))
            })
            .collect()
    }

    /// Latency percentiles in ns: (p50, p90, p99, p99.9, max), if measured.
    pub fn latency_percentiles(&self) -> Option<[u64; 5]> {
        (self.clocks_shared && !self.latency_ns.is_empty()).then(|| {
            [
                self.latency_ns.value_at_quantile(0.5),
                self.latency_ns.value_at_quantile(0.9),
                self.latency_ns.value_at_quantile(0.99),
                self.latency_ns.value_at_quantile(0.999),
                self.latency_ns.max(),
            ]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::Framing;
    use crate::{FlowSpec, Template};

    fn frames(n: u64, flows: &FlowSpec, t: &Template) -> Vec<(Vec<u8>, u16, u64)> {
        let mut out = Vec::new();
        let mut seq = BTreeMap::<u16, u64>::new();
        for i in 0..n {
            let f = flows.flow(i);
            let id = (i % flows.count()) as u16;
            let s = seq.entry(id).or_insert(0);
            *s += 1;
            let mut b = vec![0u8; t.len()];
            t.write(&mut b, &f, id, *s, 1_000_000 + i * 1000);
            out.push((b, id, *s));
        }
        out
    }

    fn setup() -> (FlowSpec, Template) {
        let flows = FlowSpec::parse(
            "02:00:00:00:00:0a",
            "02:00:00:00:00:0b",
            "198.18.0.1-198.18.0.4",
            "198.18.1.1",
            "9",
            "9",
        )
        .unwrap();
        let t = Template::new(64, &flows.flow(0), &Framing::default()).unwrap();
        (flows, t)
    }

    #[test]
    fn exact_accounting_per_flow() {
        let (flows, t) = setup();
        let mut all = frames(400, &flows, &t);
        // Lose two frames of flow 1, swap two frames of flow 2, duplicate one of flow 3.
        all.retain(|(_, id, s)| !(*id == 1 && (*s == 10 || *s == 11)));
        let a = all
            .iter()
            .position(|(_, id, s)| *id == 2 && *s == 5)
            .unwrap();
        let b = all
            .iter()
            .position(|(_, id, s)| *id == 2 && *s == 6)
            .unwrap();
        all.swap(a, b);
        let dup = all
            .iter()
            .find(|(_, id, s)| *id == 3 && *s == 7)
            .unwrap()
            .clone();
        all.push(dup);
        let mut sink = SinkCounts::new(true);
        for (i, (f, _, _)) in all.iter().enumerate() {
            sink.on_frame(f, 1_000_000 + i as u64 * 1000 + 2_500);
        }
        sink.on_frame(&[0u8; 10], 0);
        assert_eq!(sink.other, 1);
        assert_eq!(sink.flows.len(), 4);
        assert_eq!(
            (sink.lost(), sink.reordered(), sink.duplicates()),
            (2, 1, 1)
        );
        assert_eq!(sink.packets, 399);
        let sent: BTreeMap<u16, u64> = (0..4).map(|id| (id, 100)).collect();
        for (id, n, got, lost) in sink.reconcile(&sent) {
            assert_eq!(n, got + lost, "flow {id}: sent = received + lost");
            assert_eq!(lost, if id == 1 { 2 } else { 0 });
        }
        let p = sink.latency_percentiles().unwrap();
        assert!(p[0] > 0 && p[4] < 10_000_000, "{p:?}");
    }

    #[test]
    fn no_latency_without_shared_clocks() {
        let (flows, t) = setup();
        let mut sink = SinkCounts::new(false);
        for (f, _, _) in frames(10, &flows, &t) {
            sink.on_frame(&f, 5);
        }
        assert_eq!(sink.packets, 10);
        assert!(sink.latency_percentiles().is_none());
    }
}
