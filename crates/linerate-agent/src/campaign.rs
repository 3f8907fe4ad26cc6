//! Running a plan's flows: each flow on a thread of its own, its sinks
//! counting on its receive ports before its first frame and a drain after
//! its last (`linerate_packet::pair`), running counts taken from their
//! intervals, and the exact counts of the reports once the flow ends.

pub use crate::lock::lock;
use crate::peer::{RxCounts, RxId, RxIds, RxStart};
use crate::plan::{Plan, PlanFlow};
use linerate_packet::{BlastReport, SinkReport};
use linerate_run::{Interval, Scope};
use linerate_traffic::accounting::LatencyHist3;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What a flow has done so far: running counts while it sends, the
/// reports' counts once it ended.
#[derive(Debug, Clone, Default)]
pub struct FlowCounts {
    pub running: bool,
    /// It ran at least once since the configuration.
    pub ran: bool,
    /// Which start of the flow these counts are of (1 for the first).
    pub generation: u64,
    pub tx_packets: u64,
    /// Frame bytes, FCS included.
    pub tx_bytes: u64,
    /// Per receive port (in the flow's `rx` order).
    pub rx: Vec<(u64, u64)>,
    /// The last interval's rates (0 once ended).
    pub tx_pps: f64,
    pub tx_bps: f64,
    pub rx_pps: Vec<f64>,
    pub rx_bps: Vec<f64>,
    /// min, max, mean one-way latency, ns (when measured).
    pub latency: Option<(f64, f64, f64)>,
    pub error: Option<String>,
    /// A tagged flow's (`crate::tags`) counts per probe id of its block
    /// (by place from the base): frames sent (from the sender's report,
    /// once ended; empty before), and frames and bytes received on this
    /// agent's receive ports together.
    pub tx_ids: Vec<u64>,
    pub rx_ids: Vec<(u64, u64)>,
    /// A tagged flow's per receive port, per probe id slot: the last
    /// interval's frames and bits a second (as `rx_pps` and `rx_bps`).
    pub rx_id_rates: Vec<Vec<(f64, f64)>>,
    /// A tagged flow's per key (`TagPlan::keys`): one-way latency, as
    /// `latency` (once ended).
    pub tag_latency: Vec<Option<(f64, f64, f64)>>,
}

impl FlowCounts {
    /// The counts its tags' rows are made of (`latency`: the flow
    /// reports latency).
    pub fn tag_counts(&self, latency: bool) -> crate::tags::TagCounts<'_> {
        crate::tags::TagCounts {
            running: self.running,
            tx_packets: self.tx_packets,
            tx_bytes: self.tx_bytes,
            tx_pps: self.tx_pps,
            tx_bps: self.tx_bps,
            tx_ids: &self.tx_ids,
            rx_ids: &self.rx_ids,
            rx_id_rates: &self.rx_id_rates,
            latency: latency.then_some(&self.tag_latency[..]),
        }
    }
}

impl FlowCounts {
    pub fn rx_packets(&self) -> u64 {
        self.rx.iter().map(|r| r.0).sum()
    }

    pub fn rx_bytes(&self) -> u64 {
        self.rx.iter().map(|r| r.1).sum()
    }
}

/// One flow's state, shared by its thread and the API.
#[derive(Debug)]
pub struct FlowRun {
    pub stop: AtomicBool,
    pub counts: Mutex<FlowCounts>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

/// Where a flow's thread reports its final counts as it ends: the run
/// watching it (`crate::run`), with the flow's place in the campaign.
pub type EndReport = (usize, std::sync::mpsc::Sender<(usize, FlowCounts)>);

impl FlowRun {
    pub fn new(rx_ports: usize) -> Self {
        Self {
            stop: AtomicBool::new(false),
            counts: Mutex::new(FlowCounts {
                rx: vec![(0, 0); rx_ports],
                rx_pps: vec![0.0; rx_ports],
                rx_bps: vec![0.0; rx_ports],
                ..FlowCounts::default()
            }),
            thread: Mutex::new(None),
        }
    }

    /// The counts as the API shows them. While the flow runs, the
    /// sender's and the receivers' running counts come from intervals
    /// closed apart, so a receiver's can be ahead of the sender's: each
    /// receive port's count is shown at most the sent count (what
    /// arrived cannot exceed what left). Once ended, the reports' exact
    /// counts.
    pub fn snapshot(&self) -> FlowCounts {
        let mut c = lock(&self.counts).clone();
        if c.running {
            let (p, b) = (c.tx_packets, c.tx_bytes);
            for r in &mut c.rx {
                *r = (r.0.min(p), r.1.min(b));
            }
        }
        c
    }

    pub fn running(&self) -> bool {
        lock(&self.counts).running
    }

    /// Starts the flow: counts reset, its thread spawned; its final
    /// counts go to `report` as it ends. Returns the generation started.
    pub fn start(
        self: &Arc<Self>,
        flow: PlanFlow,
        report: Option<EndReport>,
    ) -> std::io::Result<u64> {
        let mut slot = lock(&self.thread);
        if let Some(old) = slot.take() {
            // Ended (the caller checked it is not running): reaped.
            let _ = old.join();
        }
        self.stop.store(false, Ordering::Relaxed);
        let generation = {
            let mut c = lock(&self.counts);
            let n = flow.rx.len();
            let tagged_span = flow.tags.as_ref().map_or(0, |_| flow.ids.span() as usize);
            *c = FlowCounts {
                running: true,
                ran: true,
                generation: c.generation + 1,
                rx: vec![(0, 0); n],
                rx_pps: vec![0.0; n],
                rx_bps: vec![0.0; n],
                rx_ids: vec![(0, 0); tagged_span],
                rx_id_rates: vec![vec![(0.0, 0.0); tagged_span]; n],
                ..FlowCounts::default()
            };
            c.generation
        };
        let me = Arc::clone(self);
        let h = std::thread::Builder::new()
            .name(format!("agent-flow-{}", flow.ids.base))
            .spawn(move || me.run(&flow, report))
            .inspect_err(|_| lock(&self.counts).running = false)?;
        *slot = Some(h);
        Ok(generation)
    }

    /// Asks the flow to stop and waits for its end (its drain included),
    /// at most `within`.
    pub fn stop_within(&self, within: Duration) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        let end = Instant::now() + within;
        while self.running() {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    fn run(&self, flow: &PlanFlow, report: Option<EndReport>) {
        // The start delay, cut short by a stop.
        let start_at = Instant::now() + flow.delay;
        while Instant::now() < start_at && !self.stop.load(Ordering::Relaxed) {
            std::thread::sleep((start_at - Instant::now()).min(Duration::from_millis(10)));
        }
        let result = if self.stop.load(Ordering::Relaxed) {
            Err("stopped before its start delay ended".to_string())
        } else {
            self.send_and_count(flow)
        };
        let mut c = lock(&self.counts);
        match result {
            Ok(o) => settle(&mut c, flow, &o),
            Err(e) => c.error = Some(e),
        }
        c.tx_pps = 0.0;
        c.tx_bps = 0.0;
        c.rx_pps.iter_mut().for_each(|r| *r = 0.0);
        c.rx_bps.iter_mut().for_each(|r| *r = 0.0);
        c.rx_id_rates
            .iter_mut()
            .for_each(|r| r.iter_mut().for_each(|x| *x = (0.0, 0.0)));
        // Reported before `running` falls, under the lock: no new start
        // can reset the counts before the run watching this one has them.
        if let Some((i, to)) = report {
            let _ = to.send((i, c.clone()));
        }
        c.running = false;
    }

    fn send_and_count(&self, flow: &PlanFlow) -> Result<Outcome, String> {
        // Receivers on peers first: each ready before the first frame.
        let remote = self.start_remote(flow)?;
        let done = AtomicBool::new(false);
        let result = std::thread::scope(|sc| {
            if !remote.is_empty() {
                sc.spawn(|| self.poll_remote(flow, &remote, &done));
            }
            let r = self.send_local(flow);
            done.store(true, Ordering::Relaxed);
            r
        });
        // Stopped whatever happened to the send (they end by their
        // seconds in any case).
        let finals = self.stop_remote(flow, &remote);
        let (sent, got) = result?;
        Ok(Outcome {
            sent,
            got,
            remote: finals,
        })
    }

    /// Starts a receiver on each of the flow's peer ports: (place in
    /// `rx`, peer, receiver id).
    fn start_remote(&self, flow: &PlanFlow) -> Result<Vec<(usize, String, u64)>, String> {
        let mut started = Vec::new();
        let Some(peers) = &flow.peers else {
            return Ok(started);
        };
        let seconds = (flow.delay + flow.blast.duration + flow.drain).as_secs_f64() + 60.0;
        for (k, base, iface) in &flow.remote_rx {
            let body = RxStart {
                iface,
                ids: RxIds {
                    base: flow.ids.base,
                    span: flow.ids.span(),
                },
                seconds,
                clocks_shared: flow.latency && peers.clock_shared,
            };
            match peers.call::<RxId>(base, "/linerate/rx/start", &body, PEER_START_WITHIN) {
                Ok(r) => started.push((*k, base.clone(), r.id)),
                Err(e) => {
                    self.stop_remote(flow, &started);
                    return Err(e);
                }
            }
        }
        Ok(started)
    }

    /// The peers' running counts, every interval, until `done`.
    fn poll_remote(&self, flow: &PlanFlow, remote: &[(usize, String, u64)], done: &AtomicBool) {
        let Some(peers) = &flow.peers else { return };
        while !done.load(Ordering::Relaxed) {
            for (k, base, id) in remote {
                let body = RxId { id: *id };
                if let Ok(r) =
                    peers.call::<RxCounts>(base, "/linerate/rx/counts", &body, PEER_CALL_WITHIN)
                {
                    let mut c = lock(&self.counts);
                    if !done.load(Ordering::Relaxed) {
                        c.rx[*k] = (r.frames, r.bytes);
                        c.rx_pps[*k] = r.pps;
                        c.rx_bps[*k] = r.bps;
                    }
                }
            }
            let until = Instant::now() + Duration::from_millis(200);
            while Instant::now() < until && !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Stops the flow's peer receivers: each one's final counts, or why
    /// there are none.
    fn stop_remote(
        &self,
        flow: &PlanFlow,
        remote: &[(usize, String, u64)],
    ) -> Vec<(usize, Result<RxCounts, String>)> {
        let Some(peers) = &flow.peers else {
            return Vec::new();
        };
        remote
            .iter()
            .map(|(k, base, id)| {
                let body = RxId { id: *id };
                (
                    *k,
                    peers.call(base, "/linerate/rx/stop", &body, PEER_CALL_WITHIN),
                )
            })
            .collect()
    }

    fn send_local(
        &self,
        flow: &PlanFlow,
    ) -> Result<(BlastReport, Vec<Result<SinkReport, String>>), String> {
        let on_sink = |i: usize, iv: &Interval| {
            let Some(&i) = flow.sink_rx.get(i) else {
                return;
            };
            let (mut p, mut b) = (0u64, 0u64);
            let secs = (iv.end_s - iv.start_s).max(1e-3);
            let mut c = lock(&self.counts);
            if let Some(r) = c.rx_id_rates.get_mut(i) {
                // This port's per-id rates are this interval's.
                r.iter_mut().for_each(|x| *x = (0.0, 0.0));
            }
            for r in iv.rows.iter().filter(|r| r.scope == Scope::Flow) {
                let Some(id) = r.key.and_then(|k| u16::try_from(k).ok()) else {
                    continue;
                };
                if flow.ids.contains(id) {
                    let (rp, rb) = (r.counts.packets.unwrap_or(0), r.counts.bytes.unwrap_or(0));
                    p += rp;
                    b += rb;
                    let slot = usize::from(id.wrapping_sub(flow.ids.base));
                    if let Some(t) = c.rx_ids.get_mut(slot) {
                        // With the FCS, as the final counts have it.
                        t.0 += rp;
                        t.1 += rb + 4 * rp;
                    }
                    if let Some(t) = c.rx_id_rates.get_mut(i).and_then(|r| r.get_mut(slot)) {
                        // As the port's own rates below.
                        *t = (rp as f64 / secs, rb as f64 * 8.0 / secs);
                    }
                }
            }
            if let Some(slot) = c.rx.get_mut(i) {
                slot.0 += p;
                slot.1 += b;
            }
            if let Some(r) = c.rx_pps.get_mut(i) {
                *r = p as f64 / secs;
            }
            if let Some(r) = c.rx_bps.get_mut(i) {
                *r = b as f64 * 8.0 / secs;
            }
        };
        let on_tx = &mut |iv: &Interval| {
            let (mut p, mut b) = (0u64, 0u64);
            for r in iv.rows.iter().filter(|r| r.scope == Scope::Worker) {
                p += r.counts.packets.unwrap_or(0);
                b += r.counts.bytes.unwrap_or(0);
            }
            let secs = (iv.end_s - iv.start_s).max(1e-3);
            let mut c = lock(&self.counts);
            c.tx_packets += p;
            c.tx_bytes += b;
            c.tx_pps = p as f64 / secs;
            c.tx_bps = b as f64 * 8.0 / secs;
        };
        if crate::arp_flow::is_arp_flow(flow) {
            // The running rates over at least the last 200 ms, from the
            // counts published every 100 ms.
            let ports = lock(&self.counts).rx.len();
            let last: Vec<Mutex<(Instant, u64, u64)>> = (0..ports)
                .map(|_| Mutex::new((Instant::now(), 0, 0)))
                .collect();
            let on_rx = |k: usize, p: u64, b: u64| {
                let now = Instant::now();
                let mut c = lock(&self.counts);
                if let Some(slot) = c.rx.get_mut(k) {
                    *slot = (p, b);
                }
                let Some(l) = last.get(k) else {
                    return;
                };
                let mut l = lock(l);
                let secs = now.duration_since(l.0).as_secs_f64();
                if secs >= 0.2 {
                    if let Some(r) = c.rx_pps.get_mut(k) {
                        *r = p.saturating_sub(l.1) as f64 / secs;
                    }
                    if let Some(r) = c.rx_bps.get_mut(k) {
                        *r = b.saturating_sub(l.2) as f64 * 8.0 / secs;
                    }
                    *l = (now, p, b);
                }
            };
            return crate::arp_flow::send_and_count(flow, &self.stop, on_tx, &on_rx);
        }
        let (sent, got) = linerate_packet::pair::while_counting_live(
            &flow.sinks,
            flow.drain,
            || linerate_packet::blast(&flow.blast, &self.stop, on_tx),
            Result::is_ok,
            &on_sink,
        )?;
        let sent = sent.map_err(|e| format!("sending on {}: {e}", flow.blast.iface))?;
        Ok((sent, got))
    }
}

/// The reports' exact counts in place of the running ones.
fn settle(c: &mut FlowCounts, flow: &PlanFlow, o: &Outcome) {
    c.tx_packets = o.sent.packets;
    c.tx_bytes = o.sent.bytes;
    if flow.tags.is_some() {
        let span = flow.ids.span() as usize;
        c.tx_ids = vec![0; span];
        for (&id, &n) in &o.sent.per_flow {
            if let Some(t) = c
                .tx_ids
                .get_mut(usize::from(id.wrapping_sub(flow.ids.base)))
            {
                *t += n;
            }
        }
        c.rx_ids = vec![(0, 0); span];
    }
    let mut hist = LatencyHist3::new();
    // A tagged flow's per key: (min, max, mean, frames) of its ids'.
    let mut by_key: Vec<Option<Lat>> = vec![None; flow.tags.as_ref().map_or(0, |t| t.keys.len())];
    for (j, r) in o.got.iter().enumerate() {
        let i = flow.sink_rx[j];
        match r {
            Ok(s) => {
                let (mut p, mut b) = (0u64, 0u64);
                for (id, f) in s.counts.flows.iter() {
                    if flow.ids.contains(*id) {
                        let n = f.seq.received();
                        p += n;
                        // The sink counts bytes without the FCS.
                        b += f.bytes + 4 * n;
                        let slot = usize::from(id.wrapping_sub(flow.ids.base));
                        if let Some(t) = c.rx_ids.get_mut(slot) {
                            t.0 += n;
                            t.1 += f.bytes + 4 * n;
                        }
                        if let Some(h) = s.counts.latency_of(f) {
                            hist.add(&h);
                            let key = flow.tags.as_ref().and_then(|t| *t.of_id.get(slot)?);
                            if let (Some(k), Some(l)) = (key, summary(&h)) {
                                let acc = &mut by_key[k as usize];
                                *acc = Some(fold(*acc, l));
                            }
                        }
                    }
                }
                c.rx[i] = (p, b);
                if let Some(e) = &s.error {
                    c.error.get_or_insert_with(|| {
                        format!("receiving on {}: {e}", flow.sinks[j].iface)
                    });
                }
            }
            Err(e) => {
                c.error.get_or_insert_with(|| e.clone());
            }
        }
    }
    // Local latency from the histograms; the peers' min, max and mean
    // folded in (the mean weighted by frames).
    let mut lat = summary(&hist);
    for (k, r) in &o.remote {
        match r {
            Ok(r) => {
                c.rx[*k] = (r.frames, r.bytes);
                if let Some(e) = &r.error {
                    c.error
                        .get_or_insert_with(|| format!("receiving on a peer: {e}"));
                }
                if let Some((min, max, avg)) = r.latency {
                    lat = Some(fold(lat, (min, max, avg, r.frames as f64)));
                }
            }
            Err(e) => {
                c.error.get_or_insert_with(|| e.clone());
            }
        }
    }
    c.latency = lat.map(|(a, b, m, _)| (a, b, m));
    c.tag_latency = by_key
        .into_iter()
        .map(|l| l.map(|(a, b, m, _)| (a, b, m)))
        .collect();
}

/// One-way latency: min, max, mean (ns) and the frames it is over.
type Lat = (f64, f64, f64, f64);

/// Histogram `h`'s latency, if it holds any.
fn summary(h: &LatencyHist3) -> Option<Lat> {
    linerate_traffic::accounting::latency_summary(h).map(|l| (l[0], l[5], l[1], h.len() as f64))
}

/// Latency `l` folded into `acc`: the least minimum, the greatest
/// maximum, the mean weighted by frames.
fn fold(acc: Option<Lat>, l: Lat) -> Lat {
    let (min, max, avg, n) = l;
    match acc {
        None => l,
        Some((a, b, m, w)) => (
            a.min(min),
            b.max(max),
            (m * w + avg * n) / (w + n).max(1.0),
            w + n,
        ),
    }
}

/// What a flow's run gave: blast's report, each local sink's, each peer
/// receiver's final counts.
struct Outcome {
    sent: BlastReport,
    got: Vec<Result<SinkReport, String>>,
    remote: Vec<(usize, Result<RxCounts, String>)>,
}

/// How long a peer may take to have a receiver ready, and to answer
/// anything else.
const PEER_START_WITHIN: Duration = Duration::from_secs(15);
const PEER_CALL_WITHIN: Duration = Duration::from_secs(10);

/// The plan in force and its flows' states.
#[derive(Debug)]
pub struct Campaign {
    pub plan: Plan,
    pub flows: Vec<Arc<FlowRun>>,
}

impl Campaign {
    pub fn new(plan: Plan) -> Self {
        let flows = plan
            .flows
            .iter()
            .map(|f| Arc::new(FlowRun::new(f.rx.len())))
            .collect();
        Self { plan, flows }
    }

    pub fn any_running(&self) -> bool {
        self.flows.iter().any(|f| f.running())
    }

    /// Stops every flow; waits for each at most `within` (all together).
    pub fn stop_all(&self, within: Duration) -> bool {
        for f in &self.flows {
            f.stop.store(true, Ordering::Relaxed);
        }
        let end = Instant::now() + within;
        self.flows
            .iter()
            .all(|f| f.stop_within(end.saturating_duration_since(Instant::now())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A receiver's running count ahead of the sender's is shown at the
    /// sender's; an ended flow's counts are the reports', untouched.
    #[test]
    fn running_rx_is_never_shown_above_tx() {
        let f = FlowRun::new(2);
        {
            let mut c = lock(&f.counts);
            c.running = true;
            c.tx_packets = 10;
            c.tx_bytes = 1280;
            c.rx = vec![(11, 1408), (9, 1152)];
        }
        let s = f.snapshot();
        assert_eq!(s.rx, [(10, 1280), (9, 1152)]);
        lock(&f.counts).running = false;
        assert_eq!(f.snapshot().rx, [(11, 1408), (9, 1152)]);
    }
}
