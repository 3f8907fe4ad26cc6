//! Sending crafted frames: templates patched per packet, batched sends,
//! pacing to a packet or bit rate, exact per-flow counts.

use super::filler::{Counters, Filler, Job, VxlanFiller, one_flow};
use super::send::{BlastConfig, BlastError, BlastReport, Fill, SPIN, target_pps, worker_row};
use crate::pool::{RunClock, Watch, run_pinned};
use linerate_backend::clock;
use linerate_backend::port::{Traffic, Tx, open_tx, send_refused};
use linerate_traffic::pacing::{Departures, Due, Schedule, Shape, spin_until};

use linerate_run::{Interval, Row, Sampler};
use linerate_traffic::Template;
use linerate_traffic::template::Framing;
use linerate_traffic::vxlan::Encap;
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
        count_note: None,
        streams: Vec::new(),
    };
    for (i, o) in outs.into_iter().enumerate() {
        report.absorb(i, o, interval_ns);
    }
    report.count_note = count_cut_short(cfg, &report, stop.load(Ordering::Relaxed));
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

/// What to say when the duration ended a run before its `--count` (not
/// a stop): `-t` bounds a count, 3 s by default, and a count at a rate
/// that needs about that long is cut by a sender a little late at its
/// end (6,000 at 2,000 frames/s: the last departure at 2.9995 s).
fn count_cut_short(cfg: &BlastConfig, r: &BlastReport, stopped: bool) -> Option<String> {
    let asked = cfg.count?;
    // (A departure skipped by a late sender was taken off the count.)
    let taken = r.packets + r.shape.map_or(0, |s| s.skipped);
    (taken < asked && !stopped).then(|| {
        format!(
            "the duration ({} s) ended the run at {} of the {asked} frames --count asked; \
             -t bounds a count: give a longer one",
            cfg.duration.as_secs_f64(),
            r.packets
        )
    })
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

/// How many frames a worker may send now, or `None` after waiting for
/// the next burst to fall due (unpaced: a whole batch).
fn due_now(
    job: &Job,
    schedule: Option<&mut Schedule>,
    elapsed_ns: u64,
    times: &Times,
    batch: u64,
) -> Option<u64> {
    let (start, deadline) = (times.start, times.deadline);
    let Some(schedule) = schedule else {
        return Some(batch);
    };
    match schedule.due(elapsed_ns, batch) {
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

/// A worker's tally: what it sent and when.
#[derive(Default)]
struct Tally {
    packets: u64,
    bytes: u64,
    calls: u64,
    errors: u64,
    departures: Departures,
    /// The first send's start and the last send's end (ns).
    span: Option<(u64, u64)>,
    /// The last send's end is the next clock read's.
    span_open: bool,
}

impl Tally {
    #[inline(always)]
    fn close_span(&mut self, t: u64) {
        if std::mem::take(&mut self.span_open) {
            self.span = self.span.map(|(f, _)| (f, t));
        }
    }
}

/// When a worker's run started and ends, on both clocks.
struct Times {
    start: Instant,
    start_ns: u64,
    deadline: Instant,
    deadline_ns: u64,
}

/// [`run_worker`]'s loop, built for a one-flow run or any other (inlined
/// into it, where the instructions are counted). One clock read a batch,
/// at its start: the deadline, the probes' send time, the pacing, the
/// first send's start and the last send's end (closed by the next
/// batch's read, or the one after the loop).
#[inline(always)]
fn send_all<F: Fill>(
    job: Job,
    mut sock: Tx,
    stop: &AtomicBool,
    mut fill: F,
) -> Result<WorkerOut, BlastError> {
    let cfg = job.cfg;
    let batch = sock.batch();
    let mut t = Tally::default();
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
    let (start, start_ns) = (Instant::now(), clock::monotonic_ns());
    let times = Times {
        start,
        start_ns,
        deadline: start + cfg.duration,
        deadline_ns: start_ns.saturating_add(cfg.duration.as_nanos() as u64),
    };
    loop {
        let now_ns = clock::monotonic_ns();
        t.close_span(now_ns);
        if stop.load(Ordering::Relaxed) || now_ns >= times.deadline_ns {
            break;
        }
        // A count is of departures: sent, or skipped by a late sender.
        let used = schedule.as_ref().map_or(t.packets, Schedule::slots);
        let left = job.count.map_or(u64::MAX, |c| c.saturating_sub(used));
        if left == 0 {
            break;
        }
        let elapsed_ns = now_ns - start_ns;
        let due = due_now(&job, schedule.as_mut(), elapsed_ns, &times, batch as u64);
        let Some(due) = due else {
            continue;
        };
        let n = due.min(left) as usize;
        // One send time per batch (the probe's time is when the batch was
        // built, not each frame's departure: blast -J says so).
        fill.set_stamp(now_ns);
        if !send_batch(&job, &mut sock, &mut fill, n, now_ns, stop, &times, &mut t)? {
            break;
        }
        if let Some(s) = schedule.as_mut() {
            s.sent(n as u64);
        }
        job.counters.publish(
            t.packets,
            t.bytes,
            t.calls,
            t.errors,
            t.span.map_or(0, |s| s.0),
        );
    }
    t.close_span(clock::monotonic_ns());
    sock.finish().map_err(|source| send_error(&job, source))?;
    Ok(WorkerOut {
        span: t.span,
        packets: t.packets,
        bytes: t.bytes,
        calls: t.calls,
        errors: t.errors,
        per_flow: fill.per_flow(),
        backend_stats: sock.stats(),
        departures: t.departures,
        shape: schedule.map(|s| s.shape()),
    })
}

fn send_error(job: &Job, source: std::io::Error) -> BlastError {
    BlastError::Send {
        iface: job.cfg.iface.clone(),
        source,
    }
}

/// Sends `n` frames built by `fill` (its stamp set), the batch's clock
/// read `now_ns`; false when the worker is to stop (a full ring past the
/// deadline's grace, or a stop), its frames sent so far counted.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn send_batch<F: Fill>(
    job: &Job,
    sock: &mut Tx,
    fill: &mut F,
    n: usize,
    now_ns: u64,
    stop: &AtomicBool,
    times: &Times,
    t: &mut Tally,
) -> Result<bool, BlastError> {
    let (mut sent, mut before) = (0, now_ns);
    while sent < n {
        t.calls += 1;
        let r = sock.send_with(n - sent, fill);
        if refused(&r) {
            // Ring or socket buffer full: let the kernel catch up.
            t.errors += 1;
            let now = clock::monotonic_ns();
            t.close_span(now);
            if stop.load(Ordering::Relaxed)
                || now >= times.deadline_ns.saturating_add(1_000_000_000)
            {
                t.packets += sent as u64;
                return Ok(false);
            }
            std::thread::yield_now();
            before = clock::monotonic_ns();
            continue;
        }
        let (k, b) = r.map_err(|source| send_error(job, source))?;
        if k > 0 {
            t.span = Some((t.span.map_or(before, |(f, _)| f), before));
            t.span_open = true;
        }
        if job.interval_ns.is_some() {
            let at = times.start + Duration::from_nanos(before - times.start_ns);
            t.departures.record(at, k as u64);
        }
        // On the wire each frame also carries its FCS.
        t.bytes += b + 4 * k as u64;
        sent += k;
        if sent < n {
            // (a part taken: the rest's call is timed on its own)
            before = clock::monotonic_ns();
        }
    }
    t.packets += n as u64;
    Ok(true)
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
