//! What a sink counts: per flow (the probe's flow id) and in total,
//! packets, bytes, loss, reordering and duplicates from the probe sequence
//! numbers, and one-way latency from the probe timestamp.
//!
//! Latency needs the sender's and receiver's clocks to be the same clock
//! (one host, as on the namespace rig); the report says which it assumed.

use hdrhistogram::Histogram;
use linerate_wire::{
    FastLen, Probe, SameAs, SameHeader, SeqTracker, fast_probe_ipv4_header, fast_probe_upto,
    probe_of,
};
use std::collections::BTreeMap;

mod flows;
mod latency;

pub use flows::*;
pub use latency::*;

/// A flow's state while a run of its frames is counted
/// ([`SinkCounts::on_frames`]): the sequence number its next frame must
/// carry (the flow's own highest, left as it was until the run ends, is
/// the run's start),
/// jitter and the last transit time shifted up by 16 bits (see
/// [`jitter_step16`]).
struct Run {
    /// The sequence number the run's next frame must carry (its highest
    /// so far plus one), byte-swapped: as the frame carries it, compared
    /// with the frame's word as it lies and moved on in that order.
    next_wire: u64,
    jitter16: u64,
    last16: u64,
}

/// A batch of received frames in arrival order, read one at a time by
/// [`SinkCounts::on_frames`] (a backend's receive loop turned inside out,
/// so that the counting keeps its state in locals across frames).
pub trait FrameRun {
    /// The next frame (without FCS) and its arrival time (CLOCK_MONOTONIC
    /// ns); `None` at the batch's end.
    fn next_frame(&mut self) -> Option<(&[u8], u64)>;
}

/// Totals and per-flow counts of what arrived.
#[derive(Debug)]
pub struct SinkCounts {
    /// Per flow; the frames with a linerate probe are their
    /// [`packets`](Self::packets).
    pub flows: FlowTable,
    /// Frames without a probe (ARP, other traffic), not counted as packets.
    pub other: u64,
    /// One-way latency, ns: each frame's latency is counted once, in its
    /// flow's histogram or the rest's (slot 0);
    /// [`latency_all`](Self::latency_all) adds them up. With unshared
    /// clocks every flow counts in the rest (what it counts is transit
    /// time, the clocks' offset in it: never reported), so that counting
    /// takes no test of the clocks per frame.
    latency: LatencyStore,
    /// End-marker frames received (not counted as packets).
    pub markers: u64,
    /// Probe frames left out of their flow: a sequence jump no flow could
    /// have (forged or corrupt; see `SeqTracker::anomalies`).
    pub anomalous: u64,
    /// Frames longer than one packet makes ([`with_frame_max`](Self::with_frame_max)):
    /// GSO/GRO batches handed over whole (e.g. by a veth whose sender left
    /// tx-udp-segmentation on), counted all the same: only their first
    /// datagram's probe.
    pub oversized: u64,
    frame_max: usize,
    /// The lengths the fast path takes: up to `frame_max`, so that longer
    /// frames are counted as oversized off it, in the compare it makes
    /// anyway.
    fast_len: FastLen,
    /// The header of the last untagged IPv4 probe frame counted on the
    /// fast path, and its flow's index in `flows`: a frame with the same
    /// header is counted in its flow without the fast path's field checks
    /// nor the flow table (the same answer: see [`SameHeader`]).
    recent: SameHeader,
    recent_flow: usize,
    clocks_shared: bool,
}

impl SinkCounts {
    /// `clocks_shared`: sender and receiver read the same clock (one host).
    pub fn new(clocks_shared: bool) -> Self {
        Self {
            flows: FlowTable::default(),
            other: 0,
            latency: LatencyStore::new(),
            markers: 0,
            anomalous: 0,
            oversized: 0,
            frame_max: usize::MAX,
            fast_len: FastLen::ALL,
            recent: SameHeader::NONE,
            recent_flow: 0,
            clocks_shared,
        }
    }

    /// Counts frames longer than `max` bytes (the longest one packet makes
    /// on the receiving interface) as [`oversized`](Self::oversized).
    pub fn with_frame_max(mut self, max: usize) -> Self {
        self.frame_max = max;
        self.fast_len = FastLen::upto(max);
        // (a header kept under another bound)
        self.recent = SameHeader::NONE;
        self
    }

    /// Accounts one received frame (without FCS) received at `rx_ns`
    /// (CLOCK_MONOTONIC of the receiver). A probe frame with the header of
    /// the last one counted on the fast path (the same flow, or another
    /// already seen) is counted inline; the other untagged IPv4 probe
    /// frames of flows already seen, and those of the other fast layouts
    /// (VLAN, IPv6), in a call; everything else (a new flow, an end
    /// marker, a frame off the fast layouts, a frame without a probe) out
    /// of line.
    #[inline(always)]
    pub fn on_frame(&mut self, frame: &[u8], rx_ns: u64) {
        self.on_match(self.recent.probe(frame), frame, rx_ns)
    }

    /// [`on_frame`](Self::on_frame) with the frame compared to the kept
    /// header already (`m`).
    #[inline(always)]
    fn on_match(&mut self, m: SameAs, frame: &[u8], rx_ns: u64) {
        match m {
            SameAs::Flow { seq, tx_ns } if seq & linerate_wire::END_MARKER == 0 => {
                if let Some(f) = self.flows.at(self.recent_flow) {
                    let frame = (seq, tx_ns, frame.len() as u64, rx_ns);
                    return Self::count(f, &mut self.latency, &mut self.anomalous, frame);
                }
            }
            SameAs::OtherFlow(p, flow) if p.seq & linerate_wire::END_MARKER == 0 => {
                if let Some(i) = self.flows.find_index(p.flow_id) {
                    self.recent.set_flow(flow);
                    self.recent_flow = i;
                    let f = self.flows.at(i).expect("found above");
                    let frame = (p.seq, p.tx_ns, frame.len() as u64, rx_ns);
                    return Self::count(f, &mut self.latency, &mut self.anomalous, frame);
                }
            }
            _ => {}
        }
        self.on_frame_new_header(frame, rx_ns)
    }

    /// Accounts every frame of a batch as [`on_frame`](Self::on_frame)
    /// does, in order. After a frame of the kept header's flow, the frames
    /// that follow with that header, each the flow's next sequence number,
    /// are counted as a run: the flow's state (highest sequence, jitter,
    /// last transit time, histogram) in locals, its bytes and sequence
    /// written back once at the run's end, which leaves the flow as
    /// `on_frame` for each frame would (the test
    /// `the_kept_header_counts_as_the_full_checks` compares them).
    #[inline(always)]
    pub fn on_frames<R: FrameRun + ?Sized>(&mut self, frames: &mut R) {
        while let Some((b, at)) = frames.next_frame() {
            let m = self.recent.probe(b);
            let run = matches!(m, SameAs::Flow { seq, .. } if seq & linerate_wire::END_MARKER == 0);
            self.on_match(m, b, at);
            if run && !self.run(frames) {
                return;
            }
        }
    }

    /// A run of the kept flow's frames from `frames`, then the first frame
    /// that is not one, counted; false if the batch ended first.
    #[inline(always)]
    fn run<R: FrameRun + ?Sized>(&mut self, frames: &mut R) -> bool {
        let header = self.recent;
        let Some(f) = self
            .flows
            .at(self.recent_flow)
            // (A run is shorter than a batch: every sequence number in it
            // is below the end-marker bit when the first is this far.)
            .filter(|f| f.seq.highest < linerate_wire::END_MARKER - (1 << 32))
        else {
            return true;
        };
        let mut run = Run {
            next_wire: f.seq.highest.wrapping_add(1).swap_bytes(),
            jitter16: f.jitter16,
            last16: (f.last_transit as u64) << 16,
        };
        let slot = self.latency.slot_mut(f.hist_at);
        // (The frame that ends the run, if one does before the batch.)
        let breaker = loop {
            let Some((b, at)) = frames.next_frame() else {
                break None;
            };
            match header.flow_next(b, run.next_wire) {
                Some(tx_ns) => {
                    run.next_wire = run.next_wire.swap_bytes().wrapping_add(1).swap_bytes();
                    // The transit time modulo 2^48, in the top 48 bits.
                    let t16 = at.wrapping_sub(tx_ns) << 16;
                    jitter_step16(&mut run.jitter16, &mut run.last16, t16);
                    // (`transit(at, tx_ns)` shifted up: see `index16`.)
                    LatencyStore::record_in16(slot, t16);
                }
                _ => break Some((b, at)),
            }
        };
        self.end_run(&run, &header);
        match breaker {
            // (compared again: nothing of the comparison kept through
            // the run)
            Some((b, at)) => {
                self.on_frame(b, at);
                true
            }
            None => false,
        }
    }

    /// The end of a run of the kept flow's frames (with `header`): its
    /// state written back.
    #[inline(always)]
    fn end_run(&mut self, run: &Run, header: &SameHeader) {
        let f = self.flows.at(self.recent_flow).expect("the run's flow");
        // (The flow's highest is still the run's start.)
        let highest = run.next_wire.swap_bytes().wrapping_sub(1);
        f.bytes += header.frame_len() as u64 * (highest - f.seq.highest);
        f.seq.in_order_to(highest);
        (f.jitter16, f.last_transit) = (run.jitter16, (run.last16 as i64) >> 16);
    }

    /// A frame without the last counted header: an untagged IPv4 probe
    /// frame of a flow already seen is counted here, and its header kept;
    /// the rest go on.
    #[inline(never)]
    fn on_frame_new_header(&mut self, frame: &[u8], rx_ns: u64) {
        if let Some((p, header)) = fast_probe_ipv4_header(frame, self.fast_len)
            && p.seq & linerate_wire::END_MARKER == 0
            && let Some(i) = self.flows.find_index(p.flow_id)
        {
            (self.recent, self.recent_flow) = (header, i);
            let f = self.flows.at(i).expect("found above");
            let frame = (p.seq, p.tx_ns, frame.len() as u64, rx_ns);
            return Self::count(f, &mut self.latency, &mut self.anomalous, frame);
        }
        self.on_frame_other(frame, rx_ns)
    }

    /// The frames before: a probe frame of a flow already seen on another
    /// fast layout (VLAN-tagged, IPv6) is counted here; the rest go on to
    /// the slow path.
    #[inline(always)]
    fn on_frame_other(&mut self, frame: &[u8], rx_ns: u64) {
        if !self.count_seen(fast_probe_upto(frame, self.fast_len), frame, rx_ns) {
            self.on_frame_slow(frame, rx_ns)
        }
    }

    /// [`on_frame`](Self::on_frame) without the kept header: every frame
    /// through the fast layouts' checks and the flow table (what the
    /// kept header must agree with, frame by frame).
    #[cfg(test)]
    fn on_frame_unkept(&mut self, frame: &[u8], rx_ns: u64) {
        self.on_frame_other(frame, rx_ns)
    }

    /// Counts `probe`, found in `frame`, if it is a frame (not an end
    /// marker) of a flow already seen; whether it did.
    #[inline(always)]
    fn count_seen(&mut self, probe: Option<Probe>, frame: &[u8], rx_ns: u64) -> bool {
        if let Some(p) = probe
            && p.seq & linerate_wire::END_MARKER == 0
            && let Some(f) = self.flows.find(p.flow_id)
        {
            let frame = (p.seq, p.tx_ns, frame.len() as u64, rx_ns);
            Self::count(f, &mut self.latency, &mut self.anomalous, frame);
            return true;
        }
        false
    }

    /// Counts a probe that is not an end marker (sequence `seq`, stamp
    /// `tx_ns`, in a frame of `len` bytes received at `rx_ns`) in its flow
    /// `f` (and its latency in `latency`, passed apart as `f` borrows the
    /// flow table), or as an anomaly in `anomalous`, left out.
    #[inline(always)]
    fn count(
        f: &mut FlowCounts,
        latency: &mut LatencyStore,
        anomalous: &mut u64,
        (seq, tx_ns, len, rx_ns): (u64, u64, u64, u64),
    ) {
        // Transit time: latency (shared clocks) and jitter.
        let transit = transit(rx_ns, tx_ns);
        // (In order inline; anything else, and an anomaly's count, in a
        // call.)
        if !f.seq.next_in_order(seq) && !Self::count_other_seq(f, seq, anomalous) {
            return;
        }
        f.bytes += len;
        f.on_transit(transit);
        // (0 counts as 1 ns, above an hour as an hour when read; below 0 as
        // clock skew. With unshared clocks flows have no histogram: the
        // rest is never read.)
        latency.record(f.hist_at, transit);
    }

    /// A sequence number out of order (a gap, late, a duplicate) taken in
    /// `f`; an anomaly counted in `anomalous` (and false: the frame is
    /// left out).
    #[cold]
    #[inline(never)]
    fn count_other_seq(f: &mut FlowCounts, seq: u64, anomalous: &mut u64) -> bool {
        let counted = f.seq.on_seq(seq) != linerate_wire::Arrival::Anomaly;
        *anomalous += u64::from(!counted);
        counted
    }

    /// Counts a probe that is not an end marker, its flow's entry made if
    /// this is its first.
    fn count_probe(&mut self, p: Probe, len: u64, rx_ns: u64) {
        if self.flows.find(p.flow_id).is_none() {
            let hist_at = if self.clocks_shared {
                self.latency.take_slot()
            } else {
                0
            };
            // A flow whose end marker came first keeps the sender's count.
            let sent_marker = self.flows.get(&p.flow_id).and_then(|f| f.sent_marker);
            let f = FlowCounts {
                sent_marker,
                ..FlowCounts::first(transit(rx_ns, p.tx_ns), hist_at)
            };
            self.flows.insert(p.flow_id, f);
        }
        let f = self.flows.find(p.flow_id).expect("made above");
        let frame = (p.seq, p.tx_ns, len, rx_ns);
        Self::count(f, &mut self.latency, &mut self.anomalous, frame);
    }

    /// Frames off the fast path: a flow's first, end markers, probes behind
    /// options or extension headers, frames without a probe.
    #[cold]
    #[inline(never)]
    fn on_frame_slow(&mut self, frame: &[u8], rx_ns: u64) {
        self.oversized += u64::from(frame.len() > self.frame_max);
        let Some(mut probe) = probe_of(frame) else {
            self.other += 1;
            return;
        };
        probe.tx_ns &= TS_MASK;
        if probe.seq & linerate_wire::END_MARKER != 0 {
            // The sender's count for the flow, counted apart (a marker
            // opens no jitter or latency record: its stamp is not a
            // frame's).
            self.markers += 1;
            let f = self.flows.entry(probe.flow_id);
            let sent = probe.seq & !linerate_wire::END_MARKER;
            // A count the flow could not have (forged, corrupt) is an
            // anomaly, not a tail of losses.
            if f.seq.plausible_sent(sent) {
                f.sent_marker = Some(sent);
            } else {
                f.seq.anomalies += 1;
            }
            return;
        }
        self.count_probe(probe, frame.len() as u64, rx_ns);
    }

    /// Takes in the counts of another receive worker of the same run.
    pub fn absorb(&mut self, other: &SinkCounts) {
        for (id, f) in &other.flows {
            let at = match self.flows.get_mut(id) {
                Some(mine) => {
                    mine.seq.absorb(&f.seq);
                    mine.bytes += f.bytes;
                    // A flow with a histogram there gets one here too (if
                    // one is left: else its latencies go to the rest's).
                    if f.hist_at != 0 && mine.hist_at == 0 {
                        mine.hist_at = self.latency.take_slot_merging();
                    }
                    // Jitter is a running estimate per arrival order: a flow
                    // split over workers keeps the larger one.
                    mine.jitter16 = mine.jitter16.max(f.jitter16);
                    mine.sent_marker = mine.sent_marker.or(f.sent_marker);
                    mine.hist_at
                }
                None => {
                    let at = if f.hist_at != 0 {
                        self.latency.take_slot_merging()
                    } else {
                        0
                    };
                    self.flows.insert(
                        *id,
                        FlowCounts {
                            hist_at: at,
                            ..f.clone()
                        },
                    );
                    at
                }
            };
            if f.hist_at != 0 {
                self.latency.add_slot(at, other.latency.slot(f.hist_at));
            }
        }
        self.other += other.other;
        self.markers += other.markers;
        self.anomalous += other.anomalous;
        self.oversized += other.oversized;
        self.latency.add_slot(0, other.latency.slot(0));
    }

    /// Frames with a linerate probe (not end markers): the flows'
    /// received frames added up (counted once per frame, by the flow).
    pub fn packets(&self) -> u64 {
        saturating_sum(self.flows.values().map(|f| f.seq.received()))
    }

    /// Probes and end markers left out of the flows' counts: sequence
    /// jumps or senders' counts no flow could have (forged or corrupt).
    pub fn anomalies(&self) -> u64 {
        saturating_sum(self.flows.values().map(|f| f.seq.anomalies))
    }

    /// Probes whose timestamp was ahead of the receive time (with shared
    /// clocks: with unshared ones it says nothing).
    pub fn clock_skew(&self) -> u64 {
        self.latency.skew()
    }

    /// A flow's own latency histogram, ns, if it has one (shared clocks,
    /// one of the first [`FLOW_HISTOGRAMS_MAX`] flows).
    pub fn latency_of(&self, f: &FlowCounts) -> Option<LatencyHist3> {
        (self.clocks_shared && f.hist_at != 0).then(|| {
            let mut h = LatencyHist3::new();
            self.latency.add_to(f.hist_at, &mut h);
            h
        })
    }

    /// min, mean, p50, p99, p99.9, max of a flow's latency, ns, if it has
    /// a histogram of its own with something in it.
    pub fn latency_summary(&self, f: &FlowCounts) -> Option<[f64; 6]> {
        latency_summary(&self.latency_of(f)?)
    }

    /// One-way latency of every frame, ns: the flows' histograms and the
    /// rest's, added up (at read time: each frame is counted once). Empty
    /// with unshared clocks (latency is not measured).
    pub fn latency_all(&self) -> LatencyHist3 {
        if !self.clocks_shared {
            return LatencyHist3::new();
        }
        let mut all = LatencyHist3::new();
        for slot in 0..=self.latency.used {
            self.latency.add_to(slot * LatencyStore::SLOT, &mut all);
        }
        all
    }

    /// Bytes of the frames with a probe (L2, without FCS): the flows'
    /// bytes added up.
    pub fn bytes(&self) -> u64 {
        saturating_sum(self.flows.values().map(|f| f.bytes))
    }

    pub fn clocks_shared(&self) -> bool {
        self.clocks_shared
    }

    /// Lost over all flows: sequence numbers never seen up to each flow's
    /// highest (loss after a flow's last arrival needs the sender's count:
    /// see [`reconcile`](Self::reconcile)).
    pub fn lost(&self) -> u64 {
        saturating_sum(self.flows.values().map(FlowCounts::lost))
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
        saturating_sum(self.flows.values().map(|f| f.seq.late))
    }

    pub fn duplicates(&self) -> u64 {
        saturating_sum(self.flows.values().map(|f| f.seq.duplicates))
    }

    /// With the sender's per-flow counts: `(flow, sent, received, lost)`,
    /// where sent = received (distinct) + lost holds exactly per flow.
    pub fn reconcile(&self, sent: &BTreeMap<u16, u64>) -> Vec<(u16, u64, u64, u64)> {
        sent.iter()
            .map(|(&id, &n)| {
                let got = self
                    .flows
                    .get(&id)
                    .map_or(0, |f| f.seq.received() - f.seq.duplicates);
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
            if let Some(h) = self.latency_of(f).filter(|h| !h.is_empty()) {
                let name = format!("flow={id}");
                let tag = Tag::new(&name).ok_or_else(|| std::io::Error::other("bad tag"))?;
                log.write_histogram(&h.to_hdr(), zero, span, Some(tag))
                    .map_err(std::io::Error::other)?;
            }
        }
        let all = self.latency_all();
        if !all.is_empty() {
            log.write_histogram(&all.to_hdr(), zero, span, Tag::new("all"))
                .map_err(std::io::Error::other)?;
        }
        Ok(())
    }

    /// Every frame's one-way latency (ns) as an HdrHistogram, if measured
    /// (shared clocks, some latency counted): the flows' histograms merged
    /// once per call.
    pub fn latency_hdr(&self) -> Option<Histogram<u64>> {
        if !self.clocks_shared {
            return None;
        }
        let all = self.latency_all();
        (!all.is_empty()).then(|| all.to_hdr())
    }

    /// Latency percentiles in ns: (p50, p90, p99, p99.9, max), if measured.
    pub fn latency_percentiles(&self) -> Option<[u64; 5]> {
        self.latency_hdr().map(|h| percentiles(&h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The interval latency is of the arrivals since the last read only:
    /// 1,000 frames at 10 µs, then 1,000 at 50 µs, read after each.
    #[test]
    fn interval_latency_is_of_the_last_interval_only() {
        let mut c = SinkCounts::new(true);
        let mut il = IntervalLatency::default();
        let probe = |seq: u64, tx_ns: u64| linerate_wire::Probe {
            flow_id: 3,
            seq,
            tx_ns,
        };
        let base = 1_000_000_000u64;
        for i in 0..1000 {
            c.count_probe(probe(i, base), 100, base + 10_000);
        }
        let first = il.take(&c);
        assert_eq!(first.len(), 1);
        let (id, p50, p99) = first[0];
        assert_eq!(id, 3);
        assert!((9_990..=10_010).contains(&p50), "{p50}");
        assert!((9_990..=10_010).contains(&p99), "{p99}");
        for i in 1000..2000 {
            c.count_probe(probe(i, base), 100, base + 50_000);
        }
        let (_, p50, p99) = il.take(&c)[0];
        assert!(
            (49_950..=50_050).contains(&p50),
            "the second interval's only: {p50}"
        );
        assert!((49_950..=50_050).contains(&p99), "{p99}");
        // Nothing new: no figure.
        assert!(il.take(&c).is_empty());
    }

    /// A store's slots: every transit time (0 to 2^47 - 1 ns) lands in its
    /// own slot, never the next; read back, the buckets are
    /// `LatencyHist3`'s, values above an hour counted as an hour.
    #[test]
    fn latency_store_slots_hold_every_transit_time() {
        let mut s = LatencyStore::new();
        let (a, b) = (s.take_slot(), s.take_slot());
        assert_eq!((a, b), (LatencyStore::SLOT, 2 * LatencyStore::SLOT));
        let values = [
            0,
            1,
            2_047,
            2_048,
            1_000_000,
            LATENCY_MAX_NS,
            LATENCY_MAX_NS + 1,
            (1 << 47) - 1,
        ];
        for v in values {
            s.record(a, v as i64);
        }
        // Clock skew: counted apart, in the slot's last bucket.
        for t in [-1, -1_000_000, -(1 << 47)] {
            s.record(a, t);
        }
        s.record(b, -5);
        assert_eq!(s.skew(), 4);
        assert_eq!(s.slot(a)[LatencyStore::SKEW], 3);
        assert_eq!(LatencyStore::SKEW, LatencyStore::SLOT - 1);
        s.counts[b + LatencyStore::SKEW] = 0;
        assert!(s.slot(0).iter().all(|&c| c == 0), "nothing in the rest");
        assert!(
            s.slot(b).iter().all(|&c| c == 0),
            "nothing in the next slot"
        );
        assert_eq!(s.slot(a).iter().sum::<u64>(), values.len() as u64 + 3);
        let mut h = LatencyHist3::new();
        s.add_to(a, &mut h);
        let mut want = LatencyHist3::new();
        for v in values {
            want.record(v);
        }
        assert_eq!(h.counts, want.counts);
        assert_eq!(h.to_hdr().max(), want.to_hdr().max());
        // Slots run out: then the rest's.
        for _ in 2..FLOW_HISTOGRAMS_MAX {
            assert_ne!(s.take_slot(), 0);
        }
        assert_eq!(s.take_slot(), 0);
        assert_eq!(
            s.counts.len(),
            (FLOW_HISTOGRAMS_MAX + 1) * LatencyStore::SLOT
        );
    }

    /// `index16` (a run's bucket from the transit time shifted up 16 bits,
    /// through an f64) is `LatencyHist3::index` for every transit time
    /// from 0 to 2^47 - 1: at and beside every power of two, and at
    /// every sub-bucket's edge of some; a negative one is past the slot
    /// (counted as skew). A run's counting then matches `record`'s.
    #[test]
    fn the_float_bucket_is_the_bit_scan_bucket() {
        let check = |t: u64| {
            assert_eq!(index16(t << 16), LatencyHist3::index(t), "{t}");
            // The run's bucket without the small-value test: past the
            // slot (then `index16` out of line) below 1,024 ns.
            let i = index16_from_1us(t << 16);
            if t >= 1024 {
                assert_eq!(i + 1024, LatencyHist3::index(t), "{t}");
            } else {
                assert!(i >= LatencyStore::SLOT - 1024, "{t}: {i}");
            }
        };
        for t in 0..5_000 {
            check(t);
        }
        for k in 11..47 {
            let p = 1u64 << k;
            for t in [
                p - 2,
                p - 1,
                p,
                p + 1,
                p + 2,
                p + (p >> 10) - 1,
                p + (p >> 10),
            ] {
                check(t);
            }
            // Every sub-bucket's first and last value of this power.
            for sub in (0..1024u64).step_by(37) {
                let lo = p + sub * (p >> 10);
                check(lo);
                check(lo + (p >> 10) - 1);
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(x >> (17 + x % 40));
            check((x >> 17) & ((1 << 47) - 1));
        }
        check((1 << 47) - 1);
        for t in [-1i64, -2, -1_000, -(1 << 20), -(1 << 46) - 3, -(1 << 47)] {
            let i = index16((t as u64) << 16);
            assert!(i >= LatencyStore::SLOT, "{t}: {i}");
            let i = index16_from_1us((t as u64) << 16);
            assert!(i >= LatencyStore::SLOT - 1024, "{t}: {i}");
        }
        // Counted in a slot: the same buckets as `record`, skew apart.
        let mut s = LatencyStore::new();
        let (a, b) = (s.take_slot(), s.take_slot());
        for t in [
            0i64,
            1,
            511,
            512,
            1_023,
            1_024,
            1_025,
            2_047,
            2_048,
            1_000_000,
            (1 << 47) - 1,
            -1,
            -(1 << 47),
        ] {
            s.record(a, t);
            LatencyStore::record_in16(s.slot_mut(b), (t as u64) << 16);
        }
        assert_eq!(s.slot(a), s.slot(b));
        assert_eq!(s.slot(b)[LatencyStore::SKEW], 2);
    }

    /// The fast histogram read through `to_hdr` gives what HdrHistogram
    /// recording every value itself gives: count, min, max, mean and
    /// quantiles, at both precisions, over values from 1 ns to an hour.
    #[test]
    fn latency_hist_matches_hdrhistogram() {
        matches_hdrhistogram::<8>(2);
        matches_hdrhistogram::<11>(3);
    }

    fn matches_hdrhistogram<const SUB: u32>(sigfig: u8) {
        assert_eq!(LatencyHist::<SUB>::SIGFIG, sigfig);
        {
            let mut fast = LatencyHist::<SUB>::new();
            let mut hdr = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, sigfig).unwrap();
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for i in 0..200_000u64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Spread over every power of two up to the maximum.
                // (0 and values past the maximum, up to the 47 bits a
                // probe's transit time can give, count as 1 and the maximum.)
                let v = match i % 6 {
                    0 => x % 300,
                    1 => x % 70_000 + 1,
                    2 => (x >> (x % 40)) % LATENCY_MAX_NS + 1,
                    3 => LATENCY_MAX_NS - x % 1000,
                    4 => LATENCY_MAX_NS + x % (1 << 47),
                    _ => x % 3,
                };
                fast.record(v);
                hdr.record(v.clamp(1, LATENCY_MAX_NS)).unwrap();
            }
            let mut half = LatencyHist::<SUB>::new();
            half.add(&fast);
            half.add(&fast);
            let got = fast.to_hdr();
            assert_eq!(got.len(), hdr.len());
            assert_eq!(
                (got.min(), got.max()),
                (hdr.min(), hdr.max()),
                "sigfig {sigfig}"
            );
            assert!(
                (got.mean() - hdr.mean()).abs() <= hdr.mean() * 1e-9,
                "sigfig {sigfig}"
            );
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
                assert_eq!(
                    got.value_at_quantile(q),
                    hdr.value_at_quantile(q),
                    "sigfig {sigfig} q {q}"
                );
            }
            assert_eq!(half.len(), 2 * hdr.len());
            assert_eq!(
                half.to_hdr().value_at_quantile(0.5),
                hdr.value_at_quantile(0.5)
            );
        }
    }

    /// Every value lands where HdrHistogram puts it, at the edges too:
    /// the last bucket is LATENCY_MAX_NS's, values past it count there;
    /// histograms add up bucket by bucket.
    #[test]
    fn latency_hist_holds_every_bucket_to_the_maximum() {
        // An hour is 3.6e12 ns, top bit 41: bucket 41 - 10, sub-bucket
        // 3.6e12 >> 31 = 1676 (3 digits); 41 - 7 and >> 34 = 209 (2 digits).
        assert_eq!(LatencyHist3::LEN, (31 << 10) + 1676 + 1);
        assert_eq!(LatencyHist::<8>::LEN, (34 << 7) + 209 + 1);
        let mut h = LatencyHist3::new();
        let mut hdr = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, 3).unwrap();
        for v in [1, 2047, 2048, 70_000, LATENCY_MAX_NS - 1, LATENCY_MAX_NS] {
            h.record(v);
            hdr.record(v).unwrap();
        }
        h.record((1 << 48) - 1);
        hdr.record(LATENCY_MAX_NS).unwrap();
        let mut two = h.clone();
        two.add(&h);
        let r = h.to_hdr();
        assert_eq!((r.len(), r.min(), r.max()), (7, hdr.min(), hdr.max()));
        for q in [0.3, 0.5, 0.6, 0.9] {
            assert_eq!(r.value_at_quantile(q), hdr.value_at_quantile(q));
        }
        assert_eq!((two.len(), two.to_hdr().max()), (14, hdr.max()));
    }

    /// Flows are found by id, created once, and read in id order.
    #[test]
    fn flow_table_finds_by_id_and_reads_in_order() {
        let mut t = FlowTable::default();
        for id in [9u16, 65535, 0, 9, 300, 65535] {
            t.entry(id).bytes += u64::from(id) + 1;
        }
        assert_eq!(t.len(), 4);
        let ids: Vec<u16> = t.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, [0, 9, 300, 65535]);
        assert_eq!(t[&9].bytes, 20);
        assert_eq!(t[&65535].bytes, 2 * 65536);
        assert!(t.get(&1).is_none());
        t.insert(9, FlowCounts::default());
        assert_eq!((t.len(), t[&9].bytes), (4, 0));
    }
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

    /// Flows from 198.18.0.1 port 9 to 198.18.1.1, one per port of
    /// `ports`.
    fn to_ports(ports: &str) -> FlowSpec {
        FlowSpec::parse(
            "02:00:00:00:00:0a",
            "02:00:00:00:00:0b",
            "198.18.0.1",
            "198.18.1.1",
            "9",
            ports,
        )
        .unwrap()
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

    /// Every fast layout (untagged IPv4 inline, VLAN-tagged and IPv6 in
    /// the call beside it) counts the same: packets, bytes, loss, reorder,
    /// latency; a frame longer than the receiver's frame_max is counted
    /// and also as oversized, whichever layout.
    #[test]
    fn every_fast_layout_counts_the_same() {
        for (src, dst) in [("198.18.0.1", "198.18.1.1"), ("2001:db8::1", "2001:db8::2")] {
            for vlan in [None, Some((5, 0))] {
                let flows =
                    FlowSpec::parse("02:00:00:00:00:0a", "02:00:00:00:00:0b", src, dst, "9", "9")
                        .unwrap();
                let framing = Framing {
                    vlan,
                    ..Framing::default()
                };
                let t = Template::new(128, &flows.flow(0), &framing).unwrap();
                let mut c = SinkCounts::new(true).with_frame_max(t.len() - 1);
                // Sequences 1..=10 but 4 (lost) and 7 before 6 (late).
                for (k, seq) in [1u64, 2, 3, 5, 7, 6, 8, 9, 10].into_iter().enumerate() {
                    let mut b = vec![0u8; t.len()];
                    let tx = 1_000_000 + k as u64 * 10_000;
                    t.write(&mut b, &flows.flow(0), 3, seq, tx);
                    c.on_frame(&b, tx + 4_000);
                }
                let what = format!("{src} vlan {vlan:?}");
                let f = &c.flows[&3];
                assert_eq!(
                    (c.packets(), c.bytes(), f.lost(), f.seq.late, c.other),
                    (9, 9 * t.len() as u64, 1, 1, 0),
                    "{what}"
                );
                assert_eq!(c.oversized, 9, "{what}");
                let l = c.latency_summary(f).unwrap();
                assert!(
                    (l[0] - 4_000.0).abs() < 10.0 && (l[5] - 4_000.0).abs() < 10.0,
                    "{what}: {l:?}"
                );
                // Within frame_max: not oversized.
                let mut c = SinkCounts::new(true).with_frame_max(t.len());
                let mut b = vec![0u8; t.len()];
                t.write(&mut b, &flows.flow(0), 3, 1, 5);
                c.on_frame(&b, 10);
                c.on_frame(&b, 10);
                assert_eq!(
                    (c.packets(), c.oversized, c.duplicates()),
                    (2, 0, 1),
                    "{what}"
                );
            }
        }
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

    /// Each frame's latency is counted once: in its flow's histogram for
    /// the first FLOW_HISTOGRAMS_MAX flows, in the rest's after; the
    /// aggregate adds them up, from every flow and every worker.
    #[test]
    fn every_latency_is_counted_once_in_the_aggregate() {
        let flows = to_ports("1-300");
        let t = Template::new(64, &flows.flow(0), &Framing::default()).unwrap();
        let (mut a, mut b) = (SinkCounts::new(true), SinkCounts::new(true));
        // flow id = latency in us, 3 frames each; flows 0..150 to worker a
        for id in 0..300u16 {
            for k in 1..=3u64 {
                let mut f = vec![0u8; t.len()];
                let tx = 1_000_000 + k * 10_000_000;
                t.write(&mut f, &flows.flow(u64::from(id)), id, k, tx);
                let w = if id < 150 { &mut a } else { &mut b };
                w.on_frame(&f, tx + (u64::from(id) + 1) * 1_000);
            }
        }
        let own = |c: &SinkCounts| {
            c.flows
                .values()
                .filter(|f| c.latency_of(f).is_some())
                .count()
        };
        assert_eq!((own(&a), own(&b)), (150, 150));
        assert_eq!((a.latency_all().len(), b.latency_all().len()), (450, 450));
        let mut one = SinkCounts::new(true);
        one.absorb(&a);
        one.absorb(&b);
        assert_eq!(own(&one), 300, "absorbed flows keep their histograms");
        assert_eq!(one.latency_all().len(), 900);
        // HdrHistogram recording the same latencies itself: 1..=300 us
        let mut want = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, 3).unwrap();
        for us in 1..=300u64 {
            want.record_n(us * 1_000, 3).unwrap();
        }
        let h = one.latency_all().to_hdr();
        assert_eq!((h.min(), h.max()), (want.min(), want.max()), "{h:?}");
        // One worker seeing all 300: the first 256 have their own.
        let mut c = SinkCounts::new(true);
        for id in 0..300u16 {
            let mut f = vec![0u8; t.len()];
            t.write(&mut f, &flows.flow(u64::from(id)), id, 1, 1_000_000);
            c.on_frame(&f, 1_000_000 + (u64::from(id) + 1) * 1_000);
        }
        assert_eq!(own(&c), FLOW_HISTOGRAMS_MAX);
        let mut rest = LatencyHist3::new();
        c.latency.add_to(0, &mut rest);
        assert_eq!(rest.len(), 300 - FLOW_HISTOGRAMS_MAX as u64);
        // the same percentiles as HdrHistogram's own over 1..=300 us
        assert_eq!(c.latency_percentiles(), Some(percentiles(&want)));
    }

    #[test]
    fn per_flow_latency_and_rfc3550_jitter() {
        let c = timed();
        let near = |a: f64, b: f64| (a - b).abs() <= b * 0.01;
        let f0 = c.latency_summary(&c.flows[&0]).unwrap();
        assert!(near(f0[0], 5_000.0) && near(f0[5], 7_000.0), "{f0:?}");
        assert!(near(f0[1], 6_000.0), "mean {}", f0[1]);
        let f1 = c.latency_summary(&c.flows[&1]).unwrap();
        assert!(near(f1[0], 3_000.0) && near(f1[5], 3_000.0), "{f1:?}");
        // J_n = 2000 (1 - (15/16)^(n-1)) after n arrivals of |D| = 2000,
        // to within RFC 3550's integer rounding (half a unit of J16/16).
        let want = 2_000.0 * (1.0 - (15.0f64 / 16.0).powi(99));
        assert!(
            (c.flows[&0].jitter_ns() - want).abs() <= 0.5,
            "{} vs {want}",
            c.flows[&0].jitter_ns()
        );
        assert_eq!(c.flows[&1].jitter_ns(), 0.0);
        // The flows add up to the aggregate.
        let n: u64 = c
            .flows
            .values()
            .map(|f| c.latency_of(f).unwrap().len())
            .sum();
        assert_eq!(n, c.latency_all().len());
        // Per-flow histograms and the aggregate keep 3 significant digits.
        let (all, flow) = (c.latency_all().to_hdr().max() as f64, f0[5]);
        assert!(near(all, flow), "{all} vs {flow}");
    }

    /// A flow whose end marker arrives before its frames (another queue,
    /// reordering): the marker's count is kept, and the frames start the
    /// flow's jitter and latency records as if the marker had not come.
    #[test]
    fn a_marker_before_the_frames_keeps_the_count_and_starts_nothing() {
        let (flows, t) = setup();
        let mut c = SinkCounts::new(true);
        let mut b = vec![0u8; t.len()];
        t.write(&mut b, &flows.flow(0), 0, linerate_wire::END_MARKER | 10, 5);
        c.on_frame(&b, 7_000_000_000);
        assert_eq!((c.markers, c.flows[&0].sent_marker), (1, Some(10)));
        for k in 1..=10u64 {
            let tx = 1_000_000 + k * 10_000;
            t.write(&mut b, &flows.flow(0), 0, k, tx);
            c.on_frame(&b, tx + 3_000);
        }
        let f = &c.flows[&0];
        assert_eq!(
            (f.seq.received(), f.lost(), f.sent_marker),
            (10, 0, Some(10))
        );
        assert_eq!(f.jitter_ns(), 0.0);
        let l = c.latency_summary(f).unwrap();
        assert!(
            (l[0] - 3_000.0).abs() < 30.0 && (l[5] - 3_000.0).abs() < 30.0,
            "{l:?}"
        );
        assert_eq!(c.latency_of(f).unwrap().len(), 10);
        assert_eq!(
            (c.packets(), c.latency_all().len(), c.clock_skew()),
            (10, 10, 0)
        );
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
            (c.flows[&0].jitter_ns() - want).abs() <= 0.5,
            "{} vs {want}",
            c.flows[&0].jitter_ns()
        );
        assert!(
            c.latency_of(&c.flows[&0]).is_none() && c.latency_all().is_empty(),
            "no latency without a shared clock"
        );
        assert_eq!(c.latency_percentiles(), None);
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
        assert_eq!(sink.packets(), 399);
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
        assert_eq!(sink.packets(), 10);
        assert!(sink.latency_percentiles().is_none());
    }

    /// Frames handed over one at a time, as a backend does.
    struct Batch<'a>(std::slice::Iter<'a, (Vec<u8>, u64)>);

    impl FrameRun for Batch<'_> {
        fn next_frame(&mut self) -> Option<(&[u8], u64)> {
            self.0.next().map(|(b, at)| (&b[..], *at))
        }
    }

    /// Everything a receiver's counts say, flow by flow (jitter, latency
    /// histograms and sequence state included).
    fn everything(c: &SinkCounts) -> String {
        let mut out = format!(
            "other {} markers {} anomalous {} oversized {} skew {}\n",
            c.other,
            c.markers,
            c.anomalous,
            c.oversized,
            c.clock_skew()
        );
        for (id, f) in &c.flows {
            let s = &f.seq;
            let hist: Vec<(usize, u64)> = c.latency_of(f).map_or(Vec::new(), |h| {
                h.counts
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| **n != 0)
                    .map(|(i, n)| (i, *n))
                    .collect()
            });
            out += &format!(
                "flow {id}: received {} highest {} dup {} late {} anomalies {} lost {} \
                 bytes {} jitter16 {} last {} marker {:?} hist {hist:?}\n",
                s.received(),
                s.highest,
                s.duplicates,
                s.late,
                s.anomalies,
                f.lost(),
                f.bytes,
                f.jitter16,
                f.last_transit,
                f.sent_marker,
            );
        }
        let all: Vec<(usize, u64)> = (c.latency_all().counts.iter().enumerate())
            .filter(|(_, n)| **n != 0)
            .map(|(i, n)| (i, *n))
            .collect();
        out + &format!("all {all:?}\n")
    }

    /// What one generated frame is.
    #[derive(Debug, Clone)]
    enum Step {
        /// Flow `flow`'s next sequence number after skipping `gap`, in a
        /// frame of `size` (64 or 128) bytes, `vlan` tagged or not, sent
        /// `late_ns` before it arrives.
        Next {
            flow: u16,
            gap: u64,
            big: bool,
            vlan: bool,
            late_ns: u64,
        },
        /// One of the flow's sequence numbers again, `back` below its
        /// highest sent (a late arrival or a duplicate).
        Again { flow: u16, back: u64 },
        /// The flow's end marker (its count so far).
        Marker { flow: u16 },
        /// The last frame again with byte `at` set to `to`.
        Damaged { at: usize, to: u8 },
        /// The last frame cut or padded to this length.
        Resized { len: usize },
        /// Not a probe.
        Junk(Vec<u8>),
        /// `n` frames of one flow in order (64 B), each `late_ns` after
        /// it was sent.
        Burst { flow: u16, n: u64, late_ns: u64 },
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            8 => (0u16..4, prop_oneof![6 => Just(0u64), 1 => 1u64..5, 1 => Just(1u64 << 30)],
                any::<bool>(), prop::bool::weighted(0.1), 0u64..200_000)
                .prop_map(|(flow, gap, big, vlan, late_ns)| Step::Next { flow, gap, big: big && gap == 0, vlan, late_ns }),
            1 => (0u16..4, 0u64..6).prop_map(|(flow, back)| Step::Again { flow, back }),
            1 => (0u16..4).prop_map(|flow| Step::Marker { flow }),
            1 => (0usize..64, any::<u8>()).prop_map(|(at, to)| Step::Damaged { at, to }),
            1 => (40usize..140).prop_map(|len| Step::Resized { len }),
            1 => prop::collection::vec(any::<u8>(), 0..80).prop_map(Step::Junk),
            3 => (0u16..4, 1u64..40, 0u64..200_000).prop_map(|(flow, n, late_ns)| Step::Burst { flow, n, late_ns }),
            // (Sent far ahead or behind: transit times across the 48-bit
            // wrap and clock skew, within a run.)
            1 => (0u16..4, 1u64..40, prop_oneof![Just(1u64 << 47), (1u64 << 47) - 500..(1u64 << 47) + 500, any::<u64>()])
                .prop_map(|(flow, n, late_ns)| Step::Burst { flow, n, late_ns }),
        ]
    }

    /// The frames of `steps` with their arrival times.
    fn frames_of(steps: &[Step]) -> Vec<(Vec<u8>, u64)> {
        let flows = to_ports("9-12");
        let t = |size: usize, vlan: bool| {
            let framing = Framing {
                vlan: vlan.then_some((5, 0)),
                ..Framing::default()
            };
            Template::new(size + 4 * usize::from(vlan), &flows.flow(0), &framing).unwrap()
        };
        let mut sent = [0u64; 4];
        let mut last = Vec::new();
        let mut now = 1_000_000_000u64;
        let mut out = Vec::new();
        for s in steps {
            now += 1_000;
            let (flow, seq, size, vlan, late) = match s {
                Step::Next {
                    flow,
                    gap,
                    big,
                    vlan,
                    late_ns,
                } => {
                    sent[usize::from(*flow)] += 1 + gap;
                    let size = if *big { 128 } else { 64 };
                    (*flow, sent[usize::from(*flow)], size, *vlan, *late_ns)
                }
                Step::Again { flow, back } => {
                    let s = sent[usize::from(*flow)].saturating_sub(*back);
                    (*flow, s, 64, false, 5_000)
                }
                Step::Marker { flow } => {
                    let n = sent[usize::from(*flow)];
                    (*flow, linerate_wire::END_MARKER | n, 64, false, 0)
                }
                Step::Damaged { at, to } => {
                    let mut f: Vec<u8> = last.clone();
                    if let Some(b) = f.get_mut(*at) {
                        *b = *to;
                    }
                    out.push((f, now));
                    continue;
                }
                Step::Resized { len } => {
                    let mut f: Vec<u8> = last.clone();
                    f.resize(*len, 0);
                    out.push((f, now));
                    continue;
                }
                Step::Junk(b) => {
                    out.push((b.clone(), now));
                    continue;
                }
                Step::Burst { flow, n, late_ns } => {
                    let t = t(64, false);
                    for k in 0..*n {
                        sent[usize::from(*flow)] += 1;
                        let mut b = vec![0u8; t.len()];
                        let tx = now.wrapping_sub(*late_ns) + k * 7 + (k % 3) * 100;
                        t.write(
                            &mut b,
                            &flows.flow(u64::from(*flow)),
                            *flow,
                            sent[usize::from(*flow)],
                            tx,
                        );
                        last = b.clone();
                        out.push((b, now));
                    }
                    continue;
                }
            };
            let t = t(size, vlan);
            let mut b = vec![0u8; t.len()];
            t.write(&mut b, &flows.flow(u64::from(flow)), flow, seq, now - late);
            last = b.clone();
            out.push((b, now));
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(300))]

        /// The kept header (a frame counted against the last one's header,
        /// its flow without the table) counts exactly as every frame
        /// through the fast layouts' checks and the flow table does: the
        /// same packets, bytes, losses, late, duplicates, anomalies,
        /// markers, jitter and latency buckets, flow by flow, whatever
        /// the frames (flows interleaved, gaps, late, duplicates, markers,
        /// damaged or resized frames, sizes over frame_max, junk).
        #[test]
        fn the_kept_header_counts_as_the_full_checks(
            steps in proptest::collection::vec(step(), 1..300),
            frame_max in proptest::prop_oneof![proptest::strategy::Just(usize::MAX), 60usize..140],
            shared in proptest::prelude::any::<bool>(),
            cuts in proptest::collection::vec(1usize..80, 1..20),
        ) {
            let new = || SinkCounts::new(shared).with_frame_max(frame_max);
            let (mut kept, mut batched, mut full) = (new(), new(), new());
            let frames = frames_of(&steps);
            for (f, at) in &frames {
                kept.on_frame(f, *at);
                full.on_frame_unkept(f, *at);
            }
            // The same frames in batches of the sizes in `cuts`, in turn.
            let mut rest = &frames[..];
            for n in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (batch, after) = rest.split_at((*n).min(rest.len()));
                batched.on_frames(&mut Batch(batch.iter()));
                rest = after;
            }
            let want = everything(&full);
            proptest::prop_assert_eq!(everything(&kept), want.clone());
            proptest::prop_assert_eq!(everything(&batched), want);
        }
    }
}
