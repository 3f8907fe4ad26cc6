//! Sending a traffic profile: every stream's frames from one sending
//! thread, which walks the streams' departures merged in time order
//! (`linerate_traffic::profile::Schedule`) and sends each batch of frames
//! that have fallen due.
//!
//! One scheduler rather than streams spread over workers: the streams'
//! departures interleave exactly as their pacers say (a burst of one
//! stream and the Poisson gaps of another keep their shapes against each
//! other), and a stream's sequence and seeded fields stay in one place,
//! so the same profile and seed give the same frames in the same order.
//! The price is one core's sending rate for the whole profile (a few
//! million frames per second at most, less with large frames); a profile
//! past it falls behind its schedule, which the per-stream gaps show.

use super::send::{BlastError, BlastReport, SPIN, StreamSent};
use crate::pool::{Watch, run_pinned};
use linerate_backend::clock;
use linerate_backend::port::{BackendKind, Traffic, Tx, open_tx, send_refused};
use linerate_run::{CountedBy, Counts, Interval, Row, Sampler, Scope};
use linerate_traffic::pacing::{Departures, wait_until};
use linerate_traffic::profile::{Pacer, Profile, Rate, Schedule, StreamFrames};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Frames sent per send call at most.
const BATCH_MAX: usize = 64;

/// Longest the sender waits for a departure before it looks at the stop.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// A profile to send.
#[derive(Debug, Clone)]
pub struct ProfileConfig {
    pub iface: String,
    pub profile: Profile,
    /// Each stream's rate (`%` rates resolved against the line rate).
    pub rates: Vec<Rate>,
    /// Every stream's rate times this (RFC 2544's trials; 1 otherwise).
    pub scale: f64,
    /// The run ends at this time whatever the streams still have to send.
    pub duration: Duration,
    pub backend: BackendKind,
    /// The loopback ports `backend` loopback opens (the caller's
    /// registry; empty for kernel interfaces).
    pub wires: linerate_backend::port::Wires,
    /// The source MAC of streams that do not give one.
    pub src_mac: [u8; 6],
    /// The CPU the sending thread is pinned to.
    pub core: Option<usize>,
    pub interval: Option<Duration>,
    /// After the last frame, each stream's end marker (three times).
    pub end_markers: bool,
}

/// A stream's live counts (single writer: the sending thread, per batch).
#[derive(Debug, Default)]
struct Live {
    packets: AtomicU64,
    bytes: AtomicU64,
}

/// The streams' rows (sender's count).
fn stream_rows(p: &Profile, counts: impl Iterator<Item = (u64, u64)>) -> Vec<Row> {
    p.streams
        .iter()
        .zip(counts)
        .map(|(s, (packets, bytes))| {
            Row::new(Scope::Stream, s.name.clone(), "tx", CountedBy::Sender).with_counts(Counts {
                packets: Some(packets),
                bytes: Some(bytes),
                ..Counts::default()
            })
        })
        .collect()
}

/// What the sending thread did.
struct Out {
    tally: Tally,
    frames: Vec<StreamFrames>,
    sock: Tx,
}

/// Sends `cfg`'s profile until every stream has ended, the duration or
/// `stop`; calls `on_interval` with each interval (per stream rows).
pub fn blast_profile(
    cfg: &ProfileConfig,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<BlastReport, BlastError> {
    let mtu = linerate_backend::port::port_mtu(cfg.backend, &cfg.wires, &cfg.iface).ok();
    let frames = (cfg.profile.streams.iter())
        .map(|s| {
            StreamFrames::new(s, cfg.src_mac, mtu).map_err(|e| BlastError::Template {
                size: e.size,
                source: e.source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let max_frame = frames
        .iter()
        .map(|f| usize::from(f.largest()))
        .max()
        .unwrap_or(64);
    let traffic = Traffic::raw("profile frames are crafted");
    let (sock, note) = open_tx(cfg.backend, &cfg.wires, &cfg.iface, max_frame, 0, &traffic)?;
    super::blast::check_room(&cfg.iface, &sock, max_frame)?;
    let (backend, capabilities) = (sock.name(), sock.capabilities(&cfg.iface));
    let live: Vec<Live> = frames.iter().map(|_| Live::default()).collect();
    let start = Instant::now();
    let mut sampler = Sampler::new(start, cfg.interval);
    let mut intervals = Vec::new();
    let cores: Vec<usize> = cfg.core.into_iter().collect();
    let mut results = run_pinned(
        &cores,
        vec![(frames, sock)],
        |_, (frames, sock), pinned| {
            pinned.map_err(BlastError::Pin)?;
            send(cfg, frames, sock, &live, stop)
        },
        Watch {
            sampler: &mut sampler,
            rows: &mut |_| {
                let counts = live.iter().map(|l| {
                    (
                        l.packets.load(Ordering::Relaxed),
                        l.bytes.load(Ordering::Relaxed),
                    )
                });
                stream_rows(&cfg.profile, counts)
            },
            on_interval,
            kept: &mut intervals,
            begin: None,
        },
    );
    let end = Instant::now();
    let mut out = results.remove(0).ok_or(BlastError::Worker)??;
    let mut report = report(
        cfg,
        &out,
        backend,
        capabilities,
        note,
        start,
        end,
        intervals,
    );
    if cfg.end_markers {
        report.end_marker_frames = send_markers(cfg, &out.frames, &out.tally.sent, &mut out.sock)?;
    }
    let rows = stream_rows(
        &cfg.profile,
        out.tally.sent.iter().map(|s| (s.packets, s.bytes)),
    );
    for iv in sampler.finish(end, rows) {
        on_interval(&iv);
        report.intervals.push(iv);
    }
    out.sock.finish().map_err(|source| BlastError::Send {
        iface: cfg.iface.clone(),
        source,
    })?;
    Ok(report)
}

/// The report of a profile's run from what the sending thread did.
#[allow(clippy::too_many_arguments)]
fn report(
    cfg: &ProfileConfig,
    out: &Out,
    backend: &'static str,
    capabilities: linerate_backend::port::Capabilities,
    note: Option<String>,
    start: Instant,
    end: Instant,
    intervals: Vec<Interval>,
) -> BlastReport {
    let (duration_s, duration_from) = match out.tally.span {
        Some((f, l)) => (l.saturating_sub(f) as f64 / 1e9, super::send::SENDING_SPAN),
        None => (
            end.duration_since(start).as_secs_f64(),
            super::send::WHOLE_RUN,
        ),
    };
    let packets = out.tally.sent.iter().map(|s| s.packets).sum();
    let bytes = out.tally.sent.iter().map(|s| s.bytes).sum();
    let per_flow: BTreeMap<u16, u64> = out.tally.sent.iter().map(|s| (s.id, s.packets)).collect();
    BlastReport {
        backend,
        note,
        packets,
        bytes,
        duration_s,
        duration_from,
        send_calls: out.tally.calls,
        send_errors: out.tally.refused,
        flows: cfg.profile.streams.len() as u64,
        per_flow,
        intervals,
        // The intervals' rows are per stream: so are the totals'.
        worker_rows: stream_rows(
            &cfg.profile,
            out.tally.sent.iter().map(|s| (s.packets, s.bytes)),
        ),
        backend_stats: out.sock.stats().into_iter().collect(),
        capabilities,
        pacing: Vec::new(),
        shape: None,
        catch_up: linerate_traffic::pacing::CatchUp::Burst,
        workers: 1,
        end_marker_frames: 0,
        end_marker_note: None,
        count_note: None,
        streams: out.tally.sent.clone(),
    }
}

/// Each stream's end marker (its count), three times 1 ms apart.
fn send_markers(
    cfg: &ProfileConfig,
    frames: &[StreamFrames],
    sent: &[StreamSent],
    sock: &mut Tx,
) -> Result<u64, BlastError> {
    let now = clock::monotonic_ns();
    let markers: Vec<Vec<u8>> = (frames.iter())
        .zip(sent)
        .filter(|(_, s)| s.packets > 0)
        .map(|(f, s)| {
            let mut b = vec![0u8; usize::from(f.largest())];
            let n = f.end_marker(&mut b, s.packets, now);
            b.truncate(n);
            b
        })
        .collect();
    super::send::send_thrice(sock, &markers, &cfg.iface)
}

/// The frames due now (at most `BATCH_MAX`), built into `bufs`; returns
/// how many, with each one's length and stream in `lens` and `who`.
fn build_due(
    sched: &mut Schedule,
    frames: &mut [StreamFrames],
    now_ns: u64,
    tx_ns: u64,
    bufs: &mut [Vec<u8>],
    lens: &mut [usize],
    who: &mut [usize],
) -> usize {
    let mut n = 0;
    while n < bufs.len() {
        match sched.peek() {
            Some(d) if d.at_ns <= now_ns => {
                let f = &mut frames[d.stream];
                lens[n] = f.write(&mut bufs[n], tx_ns);
                who[n] = d.stream;
                sched.advance(f.next_size());
                n += 1;
            }
            _ => break,
        }
    }
    n
}

/// The sending thread: waits for each departure, builds the frames due
/// and sends them (a full ring or buffer retried until the stop, or a
/// second past the end).
fn send(
    cfg: &ProfileConfig,
    mut frames: Vec<StreamFrames>,
    mut sock: Tx,
    live: &[Live],
    stop: &AtomicBool,
) -> Result<Out, BlastError> {
    let pacers = (cfg.profile.streams.iter().zip(&cfg.rates))
        .map(|(s, r)| Pacer::new(s, *r, cfg.scale))
        .collect();
    let mut sched = Schedule::new(pacers, |i| frames[i].next_size());
    let batch = sock.batch().clamp(1, BATCH_MAX);
    let slot = frames
        .iter()
        .map(|f| usize::from(f.largest()))
        .max()
        .unwrap_or(64);
    let mut bufs = vec![vec![0u8; slot]; batch];
    let (mut lens, mut who) = (vec![0usize; batch], vec![0usize; batch]);
    let mut tally = Tally {
        span: None,
        calls: 0,
        refused: 0,
        sent: (cfg.profile.streams.iter())
            .map(|s| StreamSent {
                name: s.name.clone(),
                id: s.id,
                packets: 0,
                bytes: 0,
                departures: Departures::default(),
            })
            .collect(),
    };
    let _ = clock::set_timer_slack_ns(1_000);
    let start = Instant::now();
    let deadline = start + cfg.duration;
    while !stop.load(Ordering::Relaxed) {
        let Some(d) = sched.peek() else { break };
        let due = start + Duration::from_nanos(d.at_ns);
        if due >= deadline {
            break;
        }
        let now = Instant::now();
        if now < due {
            // In steps, so a stop is seen within one (a start delay or an
            // off period can be long).
            wait_until(due.min(now + STOP_CHECK), SPIN);
            continue;
        }
        let now_ns = start.elapsed().as_nanos() as u64;
        let n = build_due(
            &mut sched,
            &mut frames,
            now_ns,
            clock::monotonic_ns(),
            &mut bufs,
            &mut lens,
            &mut who,
        );
        let mut refs: [&[u8]; BATCH_MAX] = [&[]; BATCH_MAX];
        for (r, (b, &l)) in refs.iter_mut().zip(bufs.iter().zip(&lens)).take(n) {
            *r = &b[..l];
        }
        let give_up = deadline + Duration::from_secs(1);
        tally
            .hand_over(&mut sock, &refs[..n], &lens, &who, give_up, stop)
            .map_err(|source| BlastError::Send {
                iface: cfg.iface.clone(),
                source,
            })?;
        for &i in &who[..n] {
            let s = &tally.sent[i];
            live[i].packets.store(s.packets, Ordering::Relaxed);
            live[i].bytes.store(s.bytes, Ordering::Relaxed);
        }
    }
    Ok(Out {
        tally,
        frames,
        sock,
    })
}

/// What the sending thread counted.
struct Tally {
    /// When the first send call began and the last returned (monotonic
    /// ns); `None`: nothing was sent.
    span: Option<(u64, u64)>,
    calls: u64,
    refused: u64,
    sent: Vec<StreamSent>,
}

impl Tally {
    /// Hands `frames` (of streams `who`, `lens` long) to the backend,
    /// retrying what a full ring or buffer refused until `stop` or
    /// `give_up`; counts each frame sent to its stream.
    fn hand_over(
        &mut self,
        sock: &mut Tx,
        frames: &[&[u8]],
        lens: &[usize],
        who: &[usize],
        give_up: Instant,
        stop: &AtomicBool,
    ) -> std::io::Result<()> {
        let mut done = 0;
        while done < frames.len() {
            self.calls += 1;
            let before = clock::monotonic_ns();
            match sock.send(&frames[done..]) {
                Ok(k) if k > 0 => {
                    let first = self.span.map_or(before, |(f, _)| f);
                    self.span = Some((first, clock::monotonic_ns()));
                    let at = Instant::now();
                    for i in done..done + k {
                        let s = &mut self.sent[who[i]];
                        s.packets += 1;
                        s.bytes += lens[i] as u64 + 4;
                        s.departures.record(at, 1);
                    }
                    done += k;
                }
                Ok(_) => self.refused += 1,
                Err(e) if send_refused(&e) => self.refused += 1,
                Err(e) => return Err(e),
            }
            if done < frames.len() {
                if stop.load(Ordering::Relaxed) || Instant::now() >= give_up {
                    break;
                }
                std::thread::yield_now();
            }
        }
        Ok(())
    }
}
