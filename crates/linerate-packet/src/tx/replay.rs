//! Replaying a pcap/pcapng trace: rewritten once up front, then sent in
//! order, looping, with the capture's timing (scaled) or as fast as the
//! rate allows.

use super::send::{
    BlastConfig, BlastError, BlastReport, Replay, SPIN, Timing, target_pps, worker_row,
};
use linerate_backend::port::Traffic;
use linerate_backend::port::{TX_BATCH_MAX, open_tx, send_refused};
use linerate_run::{Interval, Sampler};
use linerate_traffic::pacing::wait_until;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The trace's frames with the rewrite applied, each checked against the
/// MTU before anything is sent.
fn rewritten(cfg: &BlastConfig, r: &Replay) -> Result<Vec<Vec<u8>>, BlastError> {
    let mtu = cfg
        .framing
        .mtu
        .or_else(|| linerate_backend::port::port_mtu(cfg.backend, &cfg.wires, &cfg.iface).ok())
        .unwrap_or(1500);
    let frames: Vec<Vec<u8>> = r
        .trace
        .frames
        .iter()
        .map(|f| {
            let mut f = f.clone();
            linerate_traffic::pcap::rewrite(&mut f, &r.rewrite);
            f
        })
        .collect();
    for (index, f) in frames.iter().enumerate() {
        // 14 bytes of Ethernet header, 4 more if the frame is VLAN-tagged.
        let tagged = f.len() >= 14 && f[12..14] == [0x81, 0x00];
        if f.len() > mtu + 14 + if tagged { 4 } else { 0 } {
            return Err(BlastError::TraceOverMtu {
                index,
                len: f.len(),
                mtu,
            });
        }
    }
    Ok(frames)
}

/// When each frame of a replay is due.
struct Schedule<'a> {
    timing: Timing,
    /// Fast with a rate: ns between frames.
    interval_ns: Option<f64>,
    /// The capture's own times and their span (one lap).
    times: &'a [Duration],
    period: Duration,
    start: Instant,
}

impl Schedule<'_> {
    /// When the frame sent as number `packets` (index `i` of lap `lap`) is
    /// due; `None`: at once.
    fn at(&self, packets: u64, i: usize, lap: u64) -> Option<Instant> {
        match (self.timing, self.interval_ns) {
            (Timing::Scaled(k), _) => {
                let t = (self.period + Duration::from_micros(1)) * lap as u32 + self.times[i];
                Some(self.start + t.div_f64(k.max(1e-9)))
            }
            (Timing::Fast, Some(ns)) => {
                Some(self.start + Duration::from_nanos((packets as f64 * ns) as u64))
            }
            (Timing::Fast, None) => None,
        }
    }

    /// How many frames from number `packets` (index `i` of lap `lap`) go
    /// in one call: those due now, at least one, at most `room` (a batch,
    /// not past the end of the trace) and not past `total`.
    fn due_now(&self, packets: u64, i: usize, lap: u64, room: usize, total: u64) -> usize {
        let mut n = 1;
        while n < room
            && packets + (n as u64) < total
            && self
                .at(packets + n as u64, i + n, lap)
                .is_none_or(|t| t <= Instant::now())
        {
            n += 1;
        }
        n
    }
}

/// How many frames a replay sends: `loops` laps of the trace (0: no end),
/// at most `count`.
fn frames_to_send(loops: u64, count: Option<u64>, frames: usize) -> u64 {
    match (loops, count) {
        (0, c) => c.unwrap_or(u64::MAX),
        (l, c) => (l * frames as u64).min(c.unwrap_or(u64::MAX)),
    }
}

/// Writes one send time (now) into every probe of a batch, as blast's
/// frames carry one per batch.
fn stamp_batch(frames: &mut [Vec<u8>], probes: &[Option<linerate_traffic::rewrite::ProbeSpot>]) {
    let now = linerate_backend::clock::monotonic_ns();
    for (f, p) in frames.iter_mut().zip(probes) {
        if let Some(p) = p {
            linerate_traffic::rewrite::restamp(f, *p, now);
        }
    }
}

/// Running counts of a replay.
#[derive(Default)]
struct Sent {
    packets: u64,
    bytes: u64,
    calls: u64,
    errors: u64,
    /// When the first send call began and the last that sent returned
    /// (monotonic ns).
    span: Option<(u64, u64)>,
}

/// Hands `frames` to the backend (retrying while it is full, until `stop`);
/// returns how many went.
fn send_run(
    sock: &mut linerate_backend::port::Tx,
    frames: &[Vec<u8>],
    stop: &AtomicBool,
    c: &mut Sent,
) -> std::io::Result<usize> {
    let mut sent = 0;
    while sent < frames.len() {
        let mut refs: [&[u8]; TX_BATCH_MAX] = [&[]; TX_BATCH_MAX];
        for (r, f) in refs.iter_mut().zip(&frames[sent..]) {
            *r = f;
        }
        let n = frames.len() - sent;
        c.calls += 1;
        let before = linerate_backend::clock::monotonic_ns();
        match sock.send(&refs[..n]) {
            Ok(0) => {
                c.errors += 1;
                std::thread::yield_now();
            }
            Ok(k) => {
                c.bytes += refs[..k].iter().map(|f| f.len() as u64 + 4).sum::<u64>();
                sent += k;
                let after = linerate_backend::clock::monotonic_ns();
                c.span = Some((c.span.map_or(before, |(f, _)| f), after));
            }
            Err(e) if send_refused(&e) => {
                c.errors += 1;
                std::thread::yield_now();
            }
            Err(e) => return Err(e),
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    Ok(sent)
}

/// Sends a trace: rewritten once up front, then in order, looping, with
/// the capture's timing (scaled) or as fast as the rate allows.
pub(crate) fn replay(
    cfg: &BlastConfig,
    r: &Replay,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<BlastReport, BlastError> {
    let send_err = |source| BlastError::Send {
        iface: cfg.iface.clone(),
        source,
    };
    let mut frames = rewritten(cfg, r)?;
    // Frames that carry a linerate probe get their send time written into
    // it as they go: a capture's own stamps are its age at the receiver
    // (a sink read a 56 s latency off a trace captured a minute before).
    let probes: Vec<Option<linerate_traffic::rewrite::ProbeSpot>> = frames
        .iter()
        .map(|f| linerate_traffic::rewrite::probe_spot(f))
        .collect();
    let restamp = probes.iter().any(Option::is_some);
    let max_frame = frames.iter().map(Vec::len).max().unwrap_or(64);
    // No flow spec: a replay's frames go as captured (raw).
    let traffic = Traffic::raw("a pcap replay sends the captured frames as they are");
    let (mut sock, note) = open_tx(cfg.backend, &cfg.wires, &cfg.iface, max_frame, 0, &traffic)?;
    let (backend, capabilities, batch) = (sock.name(), sock.capabilities(&cfg.iface), sock.batch());
    let avg = frames.iter().map(|f| (f.len() + 4) as f64).sum::<f64>() / frames.len() as f64;
    let total = frames_to_send(r.loops, cfg.count, frames.len());
    let start = Instant::now();
    let sched = Schedule {
        timing: r.timing,
        interval_ns: target_pps(cfg.rate, avg).map(|pps| 1e9 / pps.max(1e-9)),
        times: &r.trace.times,
        period: r.trace.times.last().copied().unwrap_or_default(),
        start,
    };
    let mut c = Sent::default();
    let mut sampler = Sampler::new(start, cfg.interval);
    let mut intervals = Vec::new();
    let deadline = start + cfg.duration;
    while c.packets < total && !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let i = (c.packets % frames.len() as u64) as usize;
        let lap = c.packets / frames.len() as u64;
        if let Some(t) = sched.at(c.packets, i, lap) {
            wait_until(t.min(deadline), SPIN);
        }
        let n = sched.due_now(c.packets, i, lap, batch.min(frames.len() - i), total);
        if restamp {
            stamp_batch(&mut frames[i..i + n], &probes[i..i + n]);
        }
        c.packets += send_run(&mut sock, &frames[i..i + n], stop, &mut c).map_err(send_err)? as u64;
        let now = Instant::now();
        if sampler.due(now)
            && let Some(iv) = sampler.sample(now, vec![worker_row(0, c.packets, c.bytes, c.errors)])
        {
            on_interval(&iv);
            intervals.push(iv);
        }
    }
    sock.finish().map_err(send_err)?;
    let end = Instant::now();
    let rows = vec![worker_row(0, c.packets, c.bytes, c.errors)];
    for iv in sampler.finish(end, rows.clone()) {
        on_interval(&iv);
        intervals.push(iv);
    }
    Ok(BlastReport {
        backend,
        capabilities,
        note,
        packets: c.packets,
        bytes: c.bytes,
        // Over the sending span, first frame to last (as blast's).
        duration_s: c.span.map_or_else(
            || end.duration_since(start).as_secs_f64(),
            |(f, l)| l.saturating_sub(f) as f64 / 1e9,
        ),
        duration_from: if c.span.is_some() {
            crate::tx::send::SENDING_SPAN
        } else {
            crate::tx::send::WHOLE_RUN
        },
        send_calls: c.calls,
        send_errors: c.errors,
        flows: 0,
        per_flow: BTreeMap::new(),
        intervals,
        worker_rows: rows,
        workers: 1,
        backend_stats: sock.stats().into_iter().collect(),
        pacing: Vec::new(),
        shape: None,
        catch_up: linerate_traffic::pacing::CatchUp::Burst,
        // A replayed trace's frames are not linerate's flows.
        end_marker_frames: 0,
        end_marker_note: None,
        count_note: None,
        streams: Vec::new(),
    })
}
