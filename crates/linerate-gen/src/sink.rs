//! What a sink counts: per flow (the probe's flow id) and in total,
//! packets, bytes, loss, reordering and duplicates from the probe sequence
//! numbers, and one-way latency from the probe timestamp.
//!
//! Latency needs the sender's and receiver's clocks to be the same clock
//! (one host, as on the namespace rig); the report says which it assumed.

use hdrhistogram::Histogram;
use linerate_wire::{SeqTracker, probe_of, unwrap_tx_ns};
use std::collections::BTreeMap;

/// One flow's counts.
#[derive(Debug, Clone, Default)]
pub struct FlowCounts {
    pub seq: SeqTracker,
    pub bytes: u64,
    /// One-way latency of this flow, ns (shared clocks; the first
    /// [`FLOW_HISTOGRAMS_MAX`] flows seen have one).
    pub latency_ns: Option<Histogram<u64>>,
    /// RFC 3550 interarrival jitter, ns: J += (|D| - J) / 16 over arrivals,
    /// D the change in transit time (valid with unshared clocks too: their
    /// offset cancels).
    pub jitter_ns: f64,
    /// The last arrival's transit time, modulo 2^48 (the probe's width).
    last_transit: Option<u64>,
    /// The sender's count from the flow's end marker, if one arrived.
    pub sent_marker: Option<u64>,
}

/// Flows that get a latency histogram of their own, at most (each grows
/// with the latencies it holds: a few KiB for microseconds).
pub const FLOW_HISTOGRAMS_MAX: usize = 1024;

const TS_MASK: u64 = (1 << 48) - 1;

impl FlowCounts {
    /// Transit `rx - tx` modulo 2^48 for jitter; the change from the last
    /// arrival as a signed 48-bit number.
    fn on_transit(&mut self, tx48: u64, rx_ns: u64) {
        let transit = rx_ns.wrapping_sub(tx48) & TS_MASK;
        if let Some(last) = self.last_transit {
            let d = transit.wrapping_sub(last) & TS_MASK;
            // Sign-extend from 48 bits.
            let d = ((d << 16) as i64 >> 16).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
    }

    /// Lost frames: with the sender's end marker, sent - distinct received
    /// (the tail included); without, the gaps below the highest sequence.
    pub fn lost(&self) -> u64 {
        match self.sent_marker {
            Some(sent) => sent.saturating_sub(self.seq.received - self.seq.duplicates),
            None => self.seq.lost(),
        }
    }

    /// min, mean, p50, p99, p99.9, max of this flow's latency, ns.
    pub fn latency_summary(&self) -> Option<[f64; 6]> {
        let h = self.latency_ns.as_ref().filter(|h| !h.is_empty())?;
        Some([
            h.min() as f64,
            h.mean(),
            h.value_at_quantile(0.5) as f64,
            h.value_at_quantile(0.99) as f64,
            h.value_at_quantile(0.999) as f64,
            h.max() as f64,
        ])
    }
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
    /// End-marker frames received (not counted as packets).
    pub markers: u64,
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
            markers: 0,
            clocks_shared,
        }
    }

    /// Accounts one received frame (without FCS) received at `rx_ns`
    /// (CLOCK_MONOTONIC of the receiver).
    pub fn on_frame(&mut self, frame: &[u8], rx_ns: u64) {
        let Some(probe) = probe_of(frame) else {
            self.other += 1;
            return;
        };
        if probe.seq & linerate_wire::END_MARKER != 0 {
            // The sender's count for the flow, counted apart.
            self.markers += 1;
            let f = self.flows.entry(probe.flow_id).or_default();
            f.sent_marker = Some(probe.seq & !linerate_wire::END_MARKER);
            return;
        }
        self.packets += 1;
        self.bytes += frame.len() as u64;
        let flows = self.flows.len();
        let f = self.flows.entry(probe.flow_id).or_default();
        f.seq.on_seq(probe.seq);
        f.bytes += frame.len() as u64;
        f.on_transit(probe.tx_ns & TS_MASK, rx_ns);
        if self.clocks_shared {
            let tx = unwrap_tx_ns(probe.tx_ns, rx_ns);
            match rx_ns.checked_sub(tx) {
                Some(lat) => {
                    let lat = lat.clamp(1, LATENCY_MAX_NS);
                    let _ = self.latency_ns.record(lat);
                    if f.latency_ns.is_none() && f.seq.received == 1 && flows < FLOW_HISTOGRAMS_MAX
                    {
                        f.latency_ns = Histogram::new(2).ok();
                    }
                    if let Some(h) = f.latency_ns.as_mut() {
                        let _ = h.record(lat);
                    }
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
                    match (mine.latency_ns.as_mut(), f.latency_ns.as_ref()) {
                        (Some(a), Some(b)) => {
                            let _ = a.add(b);
                        }
                        (None, Some(b)) => mine.latency_ns = Some(b.clone()),
                        _ => {}
                    }
                    // Jitter is a running estimate per arrival order: a flow
                    // split over workers keeps the larger one.
                    mine.jitter_ns = mine.jitter_ns.max(f.jitter_ns);
                    mine.sent_marker = mine.sent_marker.or(f.sent_marker);
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
        self.markers += other.markers;
        let _ = self.latency_ns.add(&other.latency_ns);
    }

    pub fn clocks_shared(&self) -> bool {
        self.clocks_shared
    }

    /// Lost over all flows: sequence numbers never seen up to each flow's
    /// highest (loss after a flow's last arrival needs the sender's count:
    /// see [`reconcile`](Self::reconcile)).
    pub fn lost(&self) -> u64 {
        self.flows.values().map(FlowCounts::lost).sum()
    }

    /// Flows whose end marker arrived, of all flows.
    pub fn markers_seen(&self) -> (usize, usize) {
        let seen = self
            .flows
            .values()
            .filter(|f| f.sent_marker.is_some())
            .count();
        (seen, self.flows.len())
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

    /// `sink --hist`: the latency histograms in HdrHistogram's interval log
    /// format (V2, compressed), one entry per flow that has one (tag
    /// `flow=ID`) and one for all (`all`), spanning the run; values in ns.
    /// Readable by HdrHistogram's log tools (HistogramLogProcessor) and
    /// every HdrHistogram port.
    pub fn write_histogram_log<W: std::io::Write>(
        &self,
        w: &mut W,
        start_unix_s: f64,
        duration_s: f64,
    ) -> std::io::Result<()> {
        use hdrhistogram::serialization::V2DeflateSerializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogWriterBuilder, Tag};
        let start = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs_f64(start_unix_s.max(0.0));
        let mut ser = V2DeflateSerializer::new();
        let mut b = IntervalLogWriterBuilder::new();
        b.add_comment("linerate sink: one-way latency in nanoseconds, per flow (tag flow=ID) and for all flows (tag all)")
            .with_start_time(start)
            .with_base_time(start)
            .with_max_value_divisor(1.0);
        let mut log = b
            .begin_log_with(w, &mut ser)
            .map_err(std::io::Error::other)?;
        let span = std::time::Duration::from_secs_f64(duration_s.max(0.0));
        let zero = std::time::Duration::ZERO;
        for (id, f) in &self.flows {
            if let Some(h) = f.latency_ns.as_ref().filter(|h| !h.is_empty()) {
                let name = format!("flow={id}");
                let tag = Tag::new(&name).ok_or_else(|| std::io::Error::other("bad tag"))?;
                log.write_histogram(h, zero, span, Some(tag))
                    .map_err(std::io::Error::other)?;
            }
        }
        if !self.latency_ns.is_empty() {
            log.write_histogram(&self.latency_ns, zero, span, Tag::new("all"))
                .map_err(std::io::Error::other)?;
        }
        Ok(())
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

    /// Two flows with known send and arrival times: flow 0's latency
    /// alternates 5 µs / 7 µs (|D| = 2 µs every arrival), flow 1's is a
    /// steady 3 µs (no jitter).
    fn timed() -> SinkCounts {
        let (flows, t) = setup();
        let mut c = SinkCounts::new(true);
        for k in 1..=100u64 {
            for (id, lat) in [(0u16, 5_000 + (k % 2) * 2_000), (1, 3_000)] {
                let mut b = vec![0u8; t.len()];
                let tx = 1_000_000 + k * 10_000;
                t.write(&mut b, &flows.flow(u64::from(id)), id, k, tx);
                c.on_frame(&b, tx + lat);
            }
        }
        c
    }

    #[test]
    fn per_flow_latency_and_rfc3550_jitter() {
        let c = timed();
        let near = |a: f64, b: f64| (a - b).abs() <= b * 0.01;
        let f0 = c.flows[&0].latency_summary().unwrap();
        assert!(near(f0[0], 5_000.0) && near(f0[5], 7_000.0), "{f0:?}");
        assert!(near(f0[1], 6_000.0), "mean {}", f0[1]);
        let f1 = c.flows[&1].latency_summary().unwrap();
        assert!(near(f1[0], 3_000.0) && near(f1[5], 3_000.0), "{f1:?}");
        // J_n = 2000 (1 - (15/16)^(n-1)) after n arrivals of |D| = 2000.
        let want = 2_000.0 * (1.0 - (15.0f64 / 16.0).powi(99));
        assert!(
            (c.flows[&0].jitter_ns - want).abs() < 1e-6,
            "{}",
            c.flows[&0].jitter_ns
        );
        assert_eq!(c.flows[&1].jitter_ns, 0.0);
        // The flows add up to the aggregate.
        let n: u64 = c
            .flows
            .values()
            .map(|f| f.latency_ns.as_ref().unwrap().len())
            .sum();
        assert_eq!(n, c.latency_ns.len());
        // Per-flow histograms keep 2 significant digits, the aggregate 3.
        let (all, flow) = (c.latency_ns.max() as f64, f0[5]);
        assert!(near(all, flow), "{all} vs {flow}");
    }

    #[test]
    fn jitter_needs_no_shared_clock_and_survives_the_48_bit_wrap() {
        let (flows, t) = setup();
        let mut c = SinkCounts::new(false);
        // The receiver's clock is far from the sender's, and the sender's
        // 48-bit stamp wraps in the middle.
        let base = (1u64 << 48) - 50_000;
        for k in 0..10u64 {
            let mut b = vec![0u8; t.len()];
            let tx = base + k * 10_000;
            t.write(&mut b, &flows.flow(0), 0, k + 1, tx);
            c.on_frame(&b, 7_000_000_000_000 + k * 10_000 + (k % 2) * 1_000);
        }
        let want = 1_000.0 * (1.0 - (15.0f64 / 16.0).powi(9));
        assert!(
            (c.flows[&0].jitter_ns - want).abs() < 1e-6,
            "{}",
            c.flows[&0].jitter_ns
        );
        assert!(
            c.flows[&0].latency_ns.is_none(),
            "no latency without a shared clock"
        );
    }

    #[test]
    fn the_histogram_log_reads_back_per_flow() {
        use hdrhistogram::serialization::Deserializer;
        use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
        let c = timed();
        let mut out = Vec::new();
        c.write_histogram_log(&mut out, 1_700_000_000.0, 1.0)
            .unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains("#[StartTime: 1700000000"), "{text}");
        let mut got = Vec::new();
        for e in IntervalLogIterator::new(&out) {
            if let Ok(LogEntry::Interval(h)) = e {
                let bytes = base64::Engine::decode(
                    &base64::engine::general_purpose::STANDARD,
                    h.encoded_histogram(),
                )
                .unwrap();
                let hist: Histogram<u64> =
                    Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                got.push((
                    h.tag().map(|t| t.as_str().to_string()),
                    hist.len(),
                    hist.max(),
                ));
            }
        }
        assert_eq!(got.len(), 3, "{text}");
        assert_eq!(got[0].0.as_deref(), Some("flow=0"));
        assert_eq!(got[0].1, 100);
        assert_eq!(got[1].0.as_deref(), Some("flow=1"));
        assert_eq!((got[2].0.as_deref(), got[2].1), (Some("all"), 200));
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
