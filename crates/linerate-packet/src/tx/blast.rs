//! Sending crafted frames: templates patched per packet, batched sends,
//! pacing to a packet or bit rate, exact per-flow counts.

use super::send::{BlastConfig, BlastError, BlastReport, Fill, SPIN, target_pps, worker_row};
use crate::pool::{RunClock, Watch, run_pinned};
use linerate_backend::clock;
use linerate_backend::port::{Endpoints, PayloadSource};
use linerate_backend::port::{Traffic, Tx, open_tx, send_refused};
use linerate_traffic::pacing::{Departures, Due, Schedule, Shape, spin_until};

use linerate_backend::{Buffers, FrameSource};
use linerate_run::{Interval, Row, Sampler};
use linerate_traffic::template::Framing;
use linerate_traffic::template::WireFlow;
use linerate_traffic::template::{csum_of_folded, folded_of_csum, next_csum};
use linerate_traffic::vxlan::{Encap, Vxlan};
use linerate_traffic::{Stamp, Template, WireCursor};
use linerate_wire::PROBE_LEN;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
/// Sends as `cfg` asks until the count, the duration or `stop`; calls
/// `on_interval` with each interval as it ends (the intervals add up to
/// the totals).
pub fn blast(
    cfg: &BlastConfig,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<BlastReport, BlastError> {
    if let Some(r) = &cfg.replay {
        return super::replay::replay(cfg, r, stop, on_interval);
    }
    let (templates, encaps, framing) = templates(cfg)?;
    let layout = templates.values().next().map(Template::layout);
    let workers = cfg.cores.len().max(1);
    let flows = cfg.flows.count();
    check_workers(cfg, workers, flows)?;
    let max_frame = cfg.sizes.cycle().iter().copied().max().unwrap_or(64) as usize;
    let (socks, note) = open_workers(cfg, framing, max_frame, workers)?;
    check_room(&cfg.iface, &socks[0], max_frame)?;
    let backend = socks[0].name();
    let kernel_addressed = socks[0].kernel_addressed();
    let capabilities = socks[0].capabilities(&cfg.iface);
    let avg = cfg.sizes.cycle().iter().map(|&s| f64::from(s)).sum::<f64>()
        / cfg.sizes.cycle().len() as f64;
    let interval_ns = target_pps(cfg.rate, avg).map(|pps| 1e9 * workers as f64 / pps.max(1e-9));
    let counters: Vec<Counters> = (0..workers).map(|_| Counters::default()).collect();
    let clock = RunClock::now();
    let start = clock.start;
    let mut sampler = Sampler::new(start, cfg.interval);
    // The intervals are over the sending span as the summary is: the first
    // starts at the first frame (set-up is not sending time).
    let first_send = || {
        (counters.iter())
            .map(|c| c.first_ns.load(Ordering::Relaxed))
            .filter(|&ns| ns > 0)
            .min()
            .map(|ns| clock.secs(ns))
    };
    let mut intervals = Vec::new();
    let jobs = jobs(cfg, (&templates, &encaps), socks, interval_ns, &counters);
    let results = run_pinned(
        &cfg.cores,
        jobs,
        |_, (job, sock), pinned| {
            pinned.map_err(BlastError::Pin)?;
            run_layout(layout, job, sock, stop)
        },
        // Each interval: what every worker did (netblast's per-second report).
        Watch {
            sampler: &mut sampler,
            rows: &mut |_| live_rows(&counters),
            on_interval,
            kept: &mut intervals,
            begin: Some(&first_send),
        },
    );
    let end = Instant::now();
    let outs: Vec<WorkerOut> = results
        .into_iter()
        .map(|r| r.ok_or(BlastError::Worker)?)
        .collect::<Result<_, _>>()?;
    let (duration_s, duration_from, end) = sending_time(&outs, clock, end, &mut sampler);
    let mut report = BlastReport {
        duration_from,
        backend,
        capabilities,
        note,
        packets: 0,
        bytes: 0,
        duration_s,
        send_calls: 0,
        send_errors: 0,
        flows,
        per_flow: BTreeMap::new(),
        intervals,
        worker_rows: Vec::new(),
        workers,
        backend_stats: Vec::new(),
        pacing: Vec::new(),
        shape: None,
        catch_up: cfg.catch_up,
        end_marker_frames: 0,
        end_marker_note: None,
        streams: Vec::new(),
    };
    for (i, o) in outs.into_iter().enumerate() {
        report.absorb(i, o, interval_ns);
    }
    end_markers(cfg, &templates, kernel_addressed, &mut report)?;
    for iv in sampler.finish(end, report.worker_rows.clone()) {
        on_interval(&iv);
        report.intervals.push(iv);
    }
    Ok(report)
}

/// The run's duration and what it spans, and where its intervals end.
/// The rate is over the sending span, first frame to last, as the sink's
/// is over the arrivals: the set-up before (sockets, rings, threads,
/// pinning) and the backend's finish after are not sending time (they
/// made a short run's rate low: 9329 pps for --pps 10000 -t 0.3). The
/// intervals span the same: the first begins at the first frame, the last
/// ends at the last.
fn sending_time(
    outs: &[WorkerOut],
    clock: RunClock,
    end: Instant,
    sampler: &mut Sampler,
) -> (f64, &'static str, Instant) {
    let span = outs
        .iter()
        .filter_map(|o| o.span)
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    match (sending_span_s(outs.iter().map(|o| o.span)), span) {
        (Some(s), Some((first, last))) => {
            sampler.begin_at(clock.secs(first));
            (s, crate::tx::send::SENDING_SPAN, clock.instant(last))
        }
        _ => (
            end.duration_since(clock.start).as_secs_f64(),
            crate::tx::send::WHOLE_RUN,
            end,
        ),
    }
}

/// Refuses more workers than flows to split among them (and, past 65536
/// flows, a worker count that does not divide the flow space), and CPUs
/// this process may not run on.
fn check_workers(cfg: &BlastConfig, workers: usize, flows: u64) -> Result<(), BlastError> {
    if workers > 1 && (flows < workers as u64 || (flows > 1 << 16 && !workers.is_power_of_two())) {
        return Err(BlastError::Cores { workers, flows });
    }
    let bad = linerate_backend::cpu::not_allowed(&cfg.cores);
    if !bad.is_empty() {
        return Err(BlastError::CpusNotAllowed(bad));
    }
    Ok(())
}

/// Frames are built in the backend's own buffers: a size that does not
/// fit one is refused before anything is sent.
pub(super) fn check_room(iface: &str, sock: &Tx, max_frame: usize) -> Result<(), BlastError> {
    let room = sock.slot_len();
    if max_frame - 4 > room {
        return Err(BlastError::Send {
            iface: iface.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "a {max_frame}-byte frame does not fit the {} backend's {}-byte buffers (FCS excluded)",
                    sock.name(),
                    room
                ),
            ),
        });
    }
    Ok(())
}

/// Each worker's job with its port: its share of the count (the
/// remainder to the first workers) and its counters.
fn jobs<'a>(
    cfg: &'a BlastConfig,
    (templates, encaps): (&'a HashMap<u16, Template>, &'a HashMap<u16, Encap>),
    socks: Vec<Tx>,
    interval_ns: Option<f64>,
    counters: &'a [Counters],
) -> Vec<(Job<'a>, Tx)> {
    let workers = socks.len();
    socks
        .into_iter()
        .enumerate()
        .map(|(w, sock)| {
            let job = Job {
                cfg,
                templates,
                encaps,
                worker: w,
                workers,
                count: cfg
                    .count
                    .map(|c| c / workers as u64 + u64::from((w as u64) < c % workers as u64)),
                interval_ns,
                counters: &counters[w],
            };
            (job, sock)
        })
        .collect()
}

/// Sends the end markers `cfg` asks for, or notes why a backend whose
/// frames the kernel addresses cannot.
fn end_markers(
    cfg: &BlastConfig,
    templates: &HashMap<u16, Template>,
    kernel_addressed: bool,
    report: &mut BlastReport,
) -> Result<(), BlastError> {
    if cfg.end_markers {
        if cfg.framing.vxlan.is_some() {
            report.end_marker_note =
                Some("end markers not sent: they are not encapsulated in VXLAN".into());
        } else if cfg.framing.stack.is_some() {
            report.end_marker_note =
                Some("end markers not sent: they do not carry MPLS, GRE or ICMP headers".into());
        } else if kernel_addressed {
            report.end_marker_note = Some(
                "end markers not sent: the kernel addresses the UDP sockets' frames and a marker is a crafted frame (socket:raw, af_packet and af_xdp send them)".into(),
            );
        } else {
            report.end_marker_frames = send_end_markers(cfg, templates, &report.per_flow)?;
        }
    }
    Ok(())
}

/// Runs a worker built for the run's frame layout: every frame of a run
/// has the same (VLAN tag, family, transport), and its offsets become
/// constants.
fn run_layout(
    layout: Option<(bool, bool, bool)>,
    job: Job<'_>,
    sock: Tx,
    stop: &AtomicBool,
) -> Result<WorkerOut, BlastError> {
    if job.cfg.framing.vxlan.is_some() {
        return run_vxlan_layout(layout, job, sock, stop);
    }
    if job.cfg.framing.stack.is_some() {
        return run_stack(job, sock, stop);
    }
    match layout {
        Some((false, false, false)) | None => run_worker::<false, false, false>(job, sock, stop),
        Some((false, false, true)) => run_worker::<false, false, true>(job, sock, stop),
        Some((false, true, false)) => run_worker::<false, true, false>(job, sock, stop),
        Some((false, true, true)) => run_worker::<false, true, true>(job, sock, stop),
        Some((true, false, false)) => run_worker::<true, false, false>(job, sock, stop),
        Some((true, false, true)) => run_worker::<true, false, true>(job, sock, stop),
        Some((true, true, false)) => run_worker::<true, true, false>(job, sock, stop),
        Some((true, true, true)) => run_worker::<true, true, true>(job, sock, stop),
    }
}

/// [`run_layout`] for VXLAN frames: the inner frame's layout.
fn run_vxlan_layout(
    layout: Option<(bool, bool, bool)>,
    job: Job<'_>,
    sock: Tx,
    stop: &AtomicBool,
) -> Result<WorkerOut, BlastError> {
    match layout {
        Some((false, false, false)) | None => run_vxlan::<false, false, false>(job, sock, stop),
        Some((false, false, true)) => run_vxlan::<false, false, true>(job, sock, stop),
        Some((false, true, false)) => run_vxlan::<false, true, false>(job, sock, stop),
        Some((false, true, true)) => run_vxlan::<false, true, true>(job, sock, stop),
        Some((true, false, false)) => run_vxlan::<true, false, false>(job, sock, stop),
        Some((true, false, true)) => run_vxlan::<true, false, true>(job, sock, stop),
        Some((true, true, false)) => run_vxlan::<true, true, false>(job, sock, stop),
        Some((true, true, true)) => run_vxlan::<true, true, true>(job, sock, stop),
    }
}

/// Flows with an end marker, at most (a sink keeps a count per flow id).
const END_MARKER_FLOWS_MAX: usize = 65_536;

/// Each flow's end marker, three times 1 ms apart (a lost marker only
/// leaves the tail uncounted, as without markers).
fn send_end_markers(
    cfg: &BlastConfig,
    templates: &HashMap<u16, Template>,
    per_flow: &BTreeMap<u16, u64>,
) -> Result<u64, BlastError> {
    let size = *cfg.sizes.cycle().first().unwrap_or(&64);
    let t = &templates[&size];
    // On the port blast sent on: a raw socket, or the loopback port itself.
    let (mut sock, _) = open_tx(
        cfg.backend.crafted_sender(),
        &cfg.wires,
        &cfg.iface,
        t.len() + 4,
        0,
        &Traffic::raw("end markers are crafted frames"),
    )?;
    let frames: Vec<Vec<u8>> = per_flow
        .iter()
        .take(END_MARKER_FLOWS_MAX)
        .map(|(&id, &n)| {
            let mut b = vec![0u8; t.len()];
            let now = linerate_backend::clock::monotonic_ns();
            t.write(
                &mut b,
                // A tuple of the flows that carried the id.
                &cfg.flows
                    .flow(u64::from(id.wrapping_sub(cfg.flows.ids.base))),
                id,
                linerate_wire::END_MARKER | n,
                now,
            );
            b
        })
        .collect();
    super::send::send_thrice(&mut sock, &frames, &cfg.iface)
}

/// Every frame size's template (with VXLAN, the inner frame's, and its
/// encapsulation), built (and checked against the MTU) before anything is
/// sent; with stacked headers, none (each frame is written whole), each
/// size checked.
type Templates = (HashMap<u16, Template>, HashMap<u16, Encap>, Framing);
fn templates(cfg: &BlastConfig) -> Result<Templates, BlastError> {
    let mtu = linerate_backend::port::port_mtu(cfg.backend, &cfg.wires, &cfg.iface).ok();
    let framing = Framing {
        mtu: cfg.framing.mtu.or(mtu),
        ..cfg.framing.clone()
    };
    let flow0 = cfg.flows.flow(0);
    let mut templates: HashMap<u16, Template> = HashMap::new();
    let mut encaps: HashMap<u16, Encap> = HashMap::new();
    for &size in cfg.sizes.cycle() {
        if let std::collections::hash_map::Entry::Vacant(e) = templates.entry(size) {
            let err = |source| BlastError::Template { size, source };
            if let Some(stack) = &framing.stack {
                stack
                    .check(usize::from(size), &flow0, &framing)
                    .map_err(err)?;
            } else if framing.vxlan.is_some() {
                let (t, encap) =
                    linerate_traffic::vxlan::templates(usize::from(size), &flow0, &framing)
                        .map_err(err)?;
                e.insert(t);
                encaps.insert(size, encap);
            } else {
                e.insert(Template::new(usize::from(size), &flow0, &framing).map_err(err)?);
            }
        }
    }
    Ok((templates, encaps, framing))
}

/// Every worker's backend, opened before anything is sent; the first
/// worker's note on the backend chosen.
fn open_workers(
    cfg: &BlastConfig,
    framing: Framing,
    max_frame: usize,
    workers: usize,
) -> Result<(Vec<Tx>, Option<String>), BlastError> {
    let mut socks = Vec::with_capacity(workers);
    let mut note = None;
    for w in 0..workers {
        let traffic = super::send::traffic(&cfg.flows, &framing, cfg.macs_given, cfg.gso);
        let (mut sock, n) = open_tx(
            cfg.backend,
            &cfg.wires,
            &cfg.iface,
            max_frame,
            w as u32,
            &traffic,
        )?;
        if let Some(u) = sock.udp_mut() {
            // A worker's frames repeat every flows x sizes frames (its
            // flows are every workers-th, a divisor of that period).
            let flows = usize::try_from(cfg.flows.count()).unwrap_or(usize::MAX);
            u.keep_flows(flows.saturating_mul(cfg.sizes.cycle().len()));
        }
        note = note.or(n);
        socks.push(sock);
    }
    Ok((socks, note))
}

/// The workers' running totals as rows.
fn live_rows(counters: &[Counters]) -> Vec<Row> {
    counters
        .iter()
        .enumerate()
        .map(|(w, c)| {
            worker_row(
                w,
                c.packets.load(Ordering::Relaxed),
                c.bytes.load(Ordering::Relaxed),
                c.errors.load(Ordering::Relaxed),
            )
        })
        .collect()
}

impl BlastReport {
    /// Adds worker `i`'s results.
    fn absorb(&mut self, i: usize, w: WorkerOut, interval_ns: Option<f64>) {
        self.worker_rows
            .push(worker_row(i, w.packets, w.bytes, w.errors));
        self.packets += w.packets;
        self.bytes += w.bytes;
        self.send_calls += w.calls;
        self.send_errors += w.errors;
        for (id, n) in w.per_flow {
            *self.per_flow.entry(id).or_default() += n;
        }
        self.backend_stats.extend(w.backend_stats);
        if let Some(ns) = interval_ns
            && w.departures.calls > 2
        {
            self.pacing.push((w.departures, ns));
        }
        if let Some(s) = w.shape {
            self.shape.get_or_insert_with(Shape::default).merge(&s);
        }
    }
}

/// A worker's live counters (single writer), for the per-second report.
#[derive(Debug, Default)]
struct Counters {
    packets: std::sync::atomic::AtomicU64,
    bytes: std::sync::atomic::AtomicU64,
    calls: std::sync::atomic::AtomicU64,
    errors: std::sync::atomic::AtomicU64,
    /// When the first send call began (monotonic ns; 0: none yet).
    first_ns: std::sync::atomic::AtomicU64,
}

impl Counters {
    fn publish(&self, packets: u64, bytes: u64, calls: u64, errors: u64, first_ns: u64) {
        self.first_ns.store(first_ns, Ordering::Relaxed);
        self.packets.store(packets, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
        self.calls.store(calls, Ordering::Relaxed);
        self.errors.store(errors, Ordering::Relaxed);
    }
}

struct Job<'a> {
    cfg: &'a BlastConfig,
    templates: &'a HashMap<u16, Template>,
    /// Each size's VXLAN encapsulation (none without VXLAN).
    encaps: &'a HashMap<u16, Encap>,
    worker: usize,
    workers: usize,
    count: Option<u64>,
    interval_ns: Option<f64>,
    counters: &'a Counters,
}

/// The sending span of a run, in seconds: from the first send call's start
/// to the last's return over every worker (monotonic ns); `None` when no
/// worker sent anything.
fn sending_span_s(spans: impl Iterator<Item = Option<(u64, u64)>>) -> Option<f64> {
    let (first, last) = spans
        .flatten()
        .fold(None, |acc: Option<(u64, u64)>, (f, l)| {
            Some(acc.map_or((f, l), |(af, al)| (af.min(f), al.max(l))))
        })?;
    Some(last.saturating_sub(first) as f64 / 1e9)
}

struct WorkerOut {
    /// When the first send call began and the last returned (monotonic
    /// ns); `None`: nothing was sent.
    span: Option<(u64, u64)>,
    packets: u64,
    bytes: u64,
    calls: u64,
    errors: u64,
    per_flow: Vec<(u16, u64)>,
    backend_stats: Option<linerate_backend::port::TxStats>,
    departures: Departures,
    /// Paced: how the worker kept its schedule.
    shape: Option<Shape>,
}

/// Builds the frames of one worker's flows in turn, in the backend's own
/// buffers: flow fields, probe (flow id, sequence, send time) and size
/// from the cycle. It remembers which template and flow each buffer
/// (slot) holds: a slot of another size gets the template laid anew, a
/// slot of another flow gets the flow's fields, and every frame gets its
/// sequence, time and transport checksum (updated from the flow's sums,
/// never summed over the bytes).
struct Filler<'a, const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> {
    /// The size cycle's templates and their sizes (<< 48, as in `held`).
    cycle: Vec<(&'a Template, u64)>,
    pos: usize,
    /// `cycle[pos]`, at hand.
    cur: (&'a Template, u64),
    cursor: WireCursor,
    /// Probe flow ids (flow index mod 65536) and their last sequence (a
    /// u16 indexes it without a bounds check).
    seq: Box<[u64; 1 << 16]>,
    stride: usize,
    /// One size and one worker (the usual case): the next frame is the
    /// cursor's next flow, told by one test per frame.
    plain: bool,
    /// What each slot holds: size << 48 | flow index (`EMPTY`: nothing yet).
    held: Vec<u64>,
    /// The send time of the batch being built.
    stamp: Stamp,
    /// The UDP path moves on to the next frame when it starts one (the
    /// flow's endpoints it hands back stay borrowed until then).
    payload_started: bool,
    /// `ONE` (one flow, one size, one worker): every frame is the same
    /// but for its sequence, which moves by one (see [`One`]).
    one: One,
}

/// The one flow of a one-flow run, one size: its slot tag and probe flow
/// id, its sequence (kept here, not in `seq`, until the run ends) and its
/// transport checksum's sum modulo 0xffff, which moves by one with the
/// sequence (set again for each batch's stamp): no table, no cursor and
/// no checksum folding per frame.
struct One {
    tag: u64,
    id: u16,
    /// The frame's length, and its UDP payload's.
    len: usize,
    payload_len: usize,
    seq: u64,
    /// The sum for `seq` (the last frame's), reduced modulo 0xffff.
    folded: u16,
}

/// A slot nothing was built in.
const EMPTY: u64 = u64::MAX;
/// The bits of a slot's tag that hold the frame size.
const SIZE_TAG: u64 = 0xffff << 48;

impl<'a, const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool>
    Filler<'a, VLAN, V6, TCP, ONE>
{
    fn new(job: &Job<'a>, slots: usize) -> Self {
        let cfg = job.cfg;
        let cycle = cfg
            .sizes
            .cycle()
            .iter()
            .map(|s| (&job.templates[s], u64::from(*s) << 48))
            .collect::<Vec<_>>();
        let mut cursor = WireCursor::new(&cfg.flows);
        for _ in 0..job.worker {
            cursor.advance();
        }
        let cycle_len = cycle.len();
        debug_assert!(!ONE || one_flow(job));
        let one = One {
            tag: cycle[0].1 | cursor.index(),
            id: cursor.flow_id(),
            len: cycle[0].0.len(),
            payload_len: cycle[0].0.payload().len(),
            seq: 0,
            folded: 0,
        };
        Filler {
            cur: cycle[0],
            cycle,
            pos: 0,
            cursor,
            seq: vec![0u64; 1 << 16]
                .into_boxed_slice()
                .try_into()
                .expect("65536 entries"),
            stride: job.workers,
            plain: cycle_len == 1 && job.workers == 1,
            held: vec![EMPTY; slots],
            stamp: Stamp::new(0),
            payload_started: false,
            one,
        }
    }

    /// The send time of the frames built from now on (one per batch).
    #[inline]
    fn set_stamp(&mut self, tx_ns: u64) {
        self.stamp = Stamp::new(tx_ns);
        if ONE {
            let o = &mut self.one;
            let base = self
                .cur
                .0
                .seq_sum_base(self.cursor.wire(), o.id, &self.stamp);
            o.folded = ((u64::from(base) + o.seq % 0xffff) % 0xffff) as u16;
        }
    }

    /// Frames sent per probe flow id.
    fn per_flow(&self) -> Vec<(u16, u64)> {
        let one = ONE.then_some((self.one.id, self.one.seq));
        (self.seq.iter().enumerate())
            .map(|(i, s)| match one {
                Some((id, seq)) if usize::from(id) == i => (i as u16, seq),
                _ => (i as u16, *s),
            })
            .filter(|(_, s)| *s > 0)
            .collect()
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> FrameSource
    for Filler<'_, VLAN, V6, TCP, ONE>
{
    /// Builds the next frame in `buf`, which holds what was last built in
    /// `slot`; returns its length.
    #[inline(always)]
    fn build(&mut self, buf: &mut [u8], slot: usize) -> usize {
        if ONE {
            let o = &mut self.one;
            let t = self.cur.0;
            let held = &mut self.held[slot];
            if *held != o.tag {
                if *held & SIZE_TAG != o.tag & SIZE_TAG {
                    t.lay(buf);
                }
                t.put_flow_at::<VLAN, V6, TCP>(buf, self.cursor.wire(), o.id);
                *held = o.tag;
            }
            o.seq += 1;
            // (past u64::MAX the sequence wraps: frames enough for that
            // are not sent)
            o.folded = if o.folded == 0xfffe { 0 } else { o.folded + 1 };
            t.put_seq_folded_at::<VLAN, V6, TCP>(buf, o.seq, o.folded, &self.stamp);
            return o.len;
        }
        let stamp = &self.stamp;
        let (t, size_tag) = self.cur;
        let w = self.cursor.wire();
        let tag = size_tag | self.cursor.index();
        let held = &mut self.held[slot];
        if *held != tag {
            if *held & SIZE_TAG != size_tag {
                t.lay(buf);
            }
            t.put_flow_at::<VLAN, V6, TCP>(buf, w, self.cursor.flow_id());
            *held = tag;
        }
        let id = self.cursor.flow_id();
        let seq = &mut self.seq[usize::from(id)];
        *seq += 1;
        t.put_seq_at::<VLAN, V6, TCP>(buf, w, id, *seq, stamp);
        self.next_frame();
        t.len()
    }

    /// A frame was received into `slot`: its next frame is laid whole.
    #[inline]
    fn forget(&mut self, slot: usize) {
        if let Some(h) = self.held.get_mut(slot) {
            *h = EMPTY;
        }
    }

    /// One flow, one size: the batch's frames with the sequence and its
    /// checksum's sum in locals (registers), written back once at the
    /// batch's end; otherwise one [`build`](Self::build) at a time.
    #[inline(always)]
    fn build_each<B: Buffers>(&mut self, bufs: &mut B) -> u64 {
        if !ONE {
            return linerate_backend::build_each_by_one(self, bufs);
        }
        let t = self.cur.0;
        let (tag, id, len) = (self.one.tag, self.one.id, self.one.len);
        // The checksum as written, moved by one compare a frame.
        let (mut seq, mut c) = (self.one.seq, csum_of_folded::<TCP>(self.one.folded));
        let stamp = self.stamp;
        let w = self.cursor.wire();
        let mut frames = 0u64;
        while let Some((buf, slot)) = bufs.next_buf() {
            let held = &mut self.held[slot];
            if *held != tag {
                if *held & SIZE_TAG != tag & SIZE_TAG {
                    t.lay(buf);
                }
                t.put_flow_at::<VLAN, V6, TCP>(buf, w, id);
                *held = tag;
            }
            // (past u64::MAX the sequence wraps: frames enough for that
            // are not sent)
            seq += 1;
            c = next_csum::<TCP>(c);
            t.put_seq_csum_at::<VLAN, V6, TCP>(buf, seq, c, &stamp);
            bufs.built(len);
            frames += 1;
        }
        self.one.seq = seq;
        self.one.folded = folded_of_csum::<TCP>(c);
        frames * len as u64
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool>
    Filler<'_, VLAN, V6, TCP, ONE>
{
    /// Moves on to the next frame's size and flow.
    #[inline(always)]
    fn next_frame(&mut self) {
        if self.plain {
            // One flow: the cursor stands still (its first test says so).
            self.cursor.advance();
            return;
        }
        if self.cycle.len() > 1 {
            self.pos = if self.pos + 1 == self.cycle.len() {
                0
            } else {
                self.pos + 1
            };
            self.cur = self.cycle[self.pos];
        }
        // One flow: the cursor stands still (its first test says so).
        self.cursor.advance();
        for _ in 1..self.stride {
            self.cursor.advance();
        }
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> PayloadSource
    for Filler<'_, VLAN, V6, TCP, ONE>
{
    /// The UDP path: the next frame's payload only (probe, then the
    /// template's pattern) in `buf`, which holds what was last written
    /// for `slot`; the flow's endpoints when the slot's flow changed.
    #[inline(always)]
    fn payload(&mut self, buf: &mut [u8], slot: usize) -> (usize, usize, Option<Endpoints<'_>>) {
        if ONE {
            let o = &mut self.one;
            // One flow: the cursor stands still.
            let held = &mut self.held[slot];
            let mut ends = None;
            if *held != o.tag {
                if *held & SIZE_TAG != o.tag & SIZE_TAG {
                    buf[..o.payload_len].copy_from_slice(self.cur.0.payload());
                }
                buf[2..4].copy_from_slice(&o.id.to_be_bytes());
                ends = Some(endpoints::<V6>(self.cursor.wire()));
                *held = o.tag;
            }
            o.seq += 1;
            let probe = &mut buf[..PROBE_LEN];
            probe[4..12].copy_from_slice(&o.seq.to_be_bytes());
            probe[12..16].copy_from_slice(&self.stamp.hi());
            probe[16..18].copy_from_slice(&self.stamp.lo());
            return (o.payload_len, o.len, ends);
        }
        if self.payload_started {
            self.next_frame();
        }
        self.payload_started = true;
        let stamp = &self.stamp;
        let (t, size_tag) = self.cur;
        let p = t.payload();
        let tag = size_tag | self.cursor.index();
        let id = self.cursor.flow_id();
        let held = &mut self.held[slot];
        let mut ends = None;
        if *held != tag {
            if *held & SIZE_TAG != size_tag {
                buf[..p.len()].copy_from_slice(p);
            }
            buf[2..4].copy_from_slice(&id.to_be_bytes());
            ends = Some(endpoints::<V6>(self.cursor.wire()));
            *held = tag;
        }
        let seq = &mut self.seq[usize::from(id)];
        *seq += 1;
        let probe = &mut buf[..PROBE_LEN];
        probe[4..12].copy_from_slice(&seq.to_be_bytes());
        probe[12..16].copy_from_slice(&stamp.hi());
        probe[16..18].copy_from_slice(&stamp.lo());
        (p.len(), t.len(), ends)
    }
}

/// A flow's endpoints from its wire fields.
#[inline(always)]
fn endpoints<const V6: bool>(w: &WireFlow) -> Endpoints<'_> {
    Endpoints {
        addrs: &w.addrs,
        ports: w.ports,
        v6: V6,
    }
}

/// How many frames a worker may send now, or `None` after waiting for
/// the next burst to fall due (unpaced: a whole batch).
fn due_now(
    job: &Job,
    schedule: Option<&mut Schedule>,
    start: Instant,
    deadline: Instant,
    batch: u64,
) -> Option<u64> {
    let Some(schedule) = schedule else {
        return Some(batch);
    };
    match schedule.due(start.elapsed().as_nanos() as u64, batch) {
        Due::Send(n) => Some(n),
        Due::WaitUntil(at) => {
            // Evenly spaced frames spin the last microseconds for
            // precision; bursts just sleep (a late wake-up is then the
            // catch-up rule's: a bigger burst, or departures skipped).
            let burst = job.cfg.burst > 1;
            spin_until(
                (start + Duration::from_nanos(at)).min(deadline),
                if burst { Duration::ZERO } else { SPIN },
            );
            None
        }
    }
}

/// Whether a send result means "full for now, try again".
fn refused(r: &std::io::Result<(usize, u64)>) -> bool {
    match r {
        Ok((0, _)) => true,
        Err(e) => send_refused(e),
        Ok(_) => false,
    }
}

/// One worker: flows `worker, worker + workers, …`, its own backend socket.
/// Never inlined: `linerate-bench instr` counts the instructions spent in it.
#[inline(never)]
fn run_worker<const VLAN: bool, const V6: bool, const TCP: bool>(
    job: Job,
    sock: Tx,
    stop: &AtomicBool,
) -> Result<WorkerOut, BlastError> {
    if one_flow(&job) {
        let fill = Filler::<VLAN, V6, TCP, true>::new(&job, sock.slots());
        send_all(job, sock, stop, fill)
    } else {
        let fill = Filler::<VLAN, V6, TCP, false>::new(&job, sock.slots());
        send_all(job, sock, stop, fill)
    }
}

/// [`run_worker`] for VXLAN frames (inner frames of one layout).
#[inline(never)]
fn run_vxlan<const VLAN: bool, const V6: bool, const TCP: bool>(
    job: Job,
    sock: Tx,
    stop: &AtomicBool,
) -> Result<WorkerOut, BlastError> {
    let fill = VxlanFiller::<VLAN, V6, TCP>::new(&job, sock.slots());
    send_all(job, sock, stop, fill)
}

/// [`run_worker`] for frames of stacked headers (written whole).
#[inline(never)]
fn run_stack(job: Job, sock: Tx, stop: &AtomicBool) -> Result<WorkerOut, BlastError> {
    let cfg = job.cfg;
    let fill = super::stack_fill::StackFiller::new(
        &cfg.framing,
        &cfg.flows,
        cfg.sizes.cycle(),
        (job.worker, job.workers),
    );
    send_all(job, sock, stop, fill)
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> Fill
    for Filler<'_, VLAN, V6, TCP, ONE>
{
    #[inline(always)]
    fn set_stamp(&mut self, tx_ns: u64) {
        Filler::set_stamp(self, tx_ns)
    }

    fn per_flow(&self) -> Vec<(u16, u64)> {
        Filler::per_flow(self)
    }
}

/// Builds VXLAN frames: the inner frame as [`Filler`] builds it (its flow,
/// probe and checksums), after outer headers laid once per slot and size,
/// then the frame's VNI and the outer UDP checksum. Frame n (of the run,
/// every worker counted) carries VNI value n mod the VNIs' count.
struct VxlanFiller<'a, const VLAN: bool, const V6: bool, const TCP: bool> {
    inner: Filler<'a, VLAN, V6, TCP, false>,
    vx: Vxlan,
    /// The size cycle's encapsulations, in the cycle's order.
    encaps: Vec<&'a Encap>,
    /// The size tag of the outer headers each slot holds.
    laid: Vec<u64>,
    /// The VNI's digit (below its count) and the step per frame.
    vni_digit: u64,
    stride: u64,
}

impl<'a, const VLAN: bool, const V6: bool, const TCP: bool> VxlanFiller<'a, VLAN, V6, TCP> {
    fn new(job: &Job<'a>, slots: usize) -> Self {
        let vx = job.cfg.framing.vxlan.expect("a VXLAN run");
        let count = vx.vni.count.max(1);
        VxlanFiller {
            inner: Filler::new(job, slots),
            vx,
            encaps: job
                .cfg
                .sizes
                .cycle()
                .iter()
                .map(|s| &job.encaps[s])
                .collect(),
            laid: vec![EMPTY; slots],
            vni_digit: job.worker as u64 % count,
            stride: job.workers as u64 % count,
        }
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool> FrameSource
    for VxlanFiller<'_, VLAN, V6, TCP>
{
    #[inline(always)]
    fn build(&mut self, buf: &mut [u8], slot: usize) -> usize {
        let e = self.encaps[self.inner.pos];
        let size_tag = self.inner.cur.1;
        // (the inner builder moves its cursor on: its flow taken first)
        let w = *self.inner.cursor.wire();
        if self.laid[slot] != size_tag {
            e.lay(buf);
            self.laid[slot] = size_tag;
        }
        self.inner.build(&mut buf[e.prefix_len()..], slot);
        e.put(buf, &w, self.vx.vni_of(self.vni_digit));
        self.vni_digit += self.stride;
        if self.vni_digit >= self.vx.vni.count {
            self.vni_digit -= self.vx.vni.count;
        }
        e.len()
    }

    #[inline]
    fn forget(&mut self, slot: usize) {
        self.inner.forget(slot);
        if let Some(h) = self.laid.get_mut(slot) {
            *h = EMPTY;
        }
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool> PayloadSource
    for VxlanFiller<'_, VLAN, V6, TCP>
{
    fn payload(&mut self, _: &mut [u8], _: usize) -> (usize, usize, Option<Endpoints<'_>>) {
        unreachable!("VXLAN frames are crafted: `traffic` never gives them the UDP socket path")
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool> Fill for VxlanFiller<'_, VLAN, V6, TCP> {
    fn set_stamp(&mut self, tx_ns: u64) {
        self.inner.set_stamp(tx_ns)
    }

    fn per_flow(&self) -> Vec<(u16, u64)> {
        self.inner.per_flow()
    }
}

/// Whether a worker sends one flow of one size, every frame the same but
/// for its sequence (one worker: workers never outnumber flows).
fn one_flow(job: &Job) -> bool {
    job.cfg.sizes.cycle().len() == 1 && job.workers == 1 && job.cfg.flows.count() == 1
}

/// [`run_worker`]'s loop, built for a one-flow run or any other (inlined
/// into it, where the instructions are counted).
#[inline(always)]
fn send_all<F: Fill>(
    job: Job,
    mut sock: Tx,
    stop: &AtomicBool,
    mut fill: F,
) -> Result<WorkerOut, BlastError> {
    let cfg = job.cfg;
    let batch = sock.batch();
    let (mut packets, mut bytes, mut calls, mut errors) = (0u64, 0u64, 0u64, 0u64);
    let mut departures = Departures::default();
    let mut span: Option<(u64, u64)> = None;
    let send_err = |source| BlastError::Send {
        iface: cfg.iface.clone(),
        source,
    };
    // Precise sleeps instead of spinning through the gaps between bursts.
    let _ = clock::set_timer_slack_ns(1_000);
    let mut schedule = job.interval_ns.map(|ns| {
        Schedule::new(
            ns,
            u64::from(cfg.burst),
            cfg.catch_up,
            u64::from(cfg.burst_tolerance),
        )
    });
    let start = Instant::now();
    let deadline = start + cfg.duration;
    'run: while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        // A count is of departures: sent, or skipped by a late sender.
        let used = schedule.as_ref().map_or(packets, Schedule::slots);
        let left = job.count.map_or(u64::MAX, |c| c.saturating_sub(used));
        if left == 0 {
            break;
        }
        let Some(due) = due_now(&job, schedule.as_mut(), start, deadline, batch as u64) else {
            continue;
        };
        let n = due.min(left) as usize;
        // One send time per batch (the probe's time is when the batch was
        // built, not each frame's departure: blast -J says so).
        fill.set_stamp(clock::monotonic_ns());
        let mut sent = 0;
        while sent < n {
            calls += 1;
            let before = clock::monotonic_ns();
            let r = sock.send_with(n - sent, &mut fill);
            if refused(&r) {
                // Ring or socket buffer full: let the kernel catch up.
                errors += 1;
                if stop.load(Ordering::Relaxed)
                    || Instant::now() >= deadline + Duration::from_secs(1)
                {
                    packets += sent as u64;
                    break 'run;
                }
                std::thread::yield_now();
                continue;
            }
            let (k, b) = r.map_err(send_err)?;
            if k > 0 {
                let after = clock::monotonic_ns();
                span = Some((span.map_or(before, |(f, _)| f), after));
            }
            if job.interval_ns.is_some() {
                departures.record(Instant::now(), k as u64);
            }
            // On the wire each frame also carries its FCS.
            bytes += b + 4 * k as u64;
            sent += k;
        }
        packets += n as u64;
        if let Some(s) = schedule.as_mut() {
            s.sent(n as u64);
        }
        job.counters
            .publish(packets, bytes, calls, errors, span.map_or(0, |s| s.0));
    }
    sock.finish().map_err(send_err)?;
    Ok(WorkerOut {
        span,
        packets,
        bytes,
        calls,
        errors,
        per_flow: fill.per_flow(),
        backend_stats: sock.stats(),
        departures,
        shape: schedule.map(|s| s.shape()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sending_span_is_first_send_to_last_over_every_worker() {
        // Two workers: one sent from 1.000 s to 1.300 s, the other from
        // 1.002 s to 1.299 s; one sent nothing.
        let spans = [
            Some((1_000_000_000, 1_300_000_000)),
            None,
            Some((1_002_000_000, 1_299_000_000)),
        ];
        let s = sending_span_s(spans.into_iter()).unwrap();
        assert!((s - 0.3).abs() < 1e-12, "{s}");
        assert_eq!(sending_span_s([None, None].into_iter()), None);
        assert_eq!(
            sending_span_s([Some((5, 5))].into_iter()),
            Some(0.0),
            "one send call: no span"
        );
    }
}
