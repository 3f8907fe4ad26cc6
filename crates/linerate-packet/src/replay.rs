//! Replaying a pcap/pcapng trace: rewritten once up front, then sent in
//! order, looping, with the capture's timing (scaled) or as fast as the
//! rate allows.

use crate::backend::{TX_BATCH_MAX, open_tx};
use crate::blast::{BlastConfig, BlastError, BlastReport, SPIN, target_pps, worker_row};
use crate::udp::Traffic;
use linerate_gen::pacing::wait_until;
use linerate_run::{Interval, Sampler};
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How a trace is replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Timing {
    /// As fast as allowed (or at `--rate`).
    Fast,
    /// The capture's own gaps, divided by this factor (1.0 = original).
    Scaled(f64),
}

/// A pcap/pcapng trace to send instead of generated frames.
#[derive(Debug, Clone)]
pub struct Replay {
    pub trace: linerate_gen::pcap::Trace,
    pub rewrite: linerate_gen::pcap::Rewrite,
    /// Times through the trace (0 = until the duration or count ends).
    pub loops: u64,
    pub timing: Timing,
}

/// Sends a trace: rewritten once up front, then in order, looping, with
/// the capture's timing (scaled) or as fast as the rate allows.
pub(crate) fn replay(
    cfg: &BlastConfig,
    r: &Replay,
    stop: &AtomicBool,
    on_interval: &mut dyn FnMut(&Interval),
) -> Result<BlastReport, BlastError> {
    let mtu = cfg
        .framing
        .mtu
        .or_else(|| linerate_backend::iface::mtu(&cfg.iface).ok())
        .unwrap_or(1500);
    let frames: Vec<Vec<u8>> = r
        .trace
        .frames
        .iter()
        .map(|f| {
            let mut f = f.clone();
            linerate_gen::pcap::rewrite(&mut f, &r.rewrite);
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
    let max_frame = frames.iter().map(Vec::len).max().unwrap_or(64);
    // No flow spec: a replay's frames go as captured (raw).
    let traffic = Traffic {
        flows: None,
        framing: cfg.framing,
        macs_given: cfg.macs_given,
        gso: cfg.gso,
    };
    let (mut sock, note) = open_tx(cfg.backend, &cfg.iface, max_frame, 0, &traffic)?;
    let backend = sock.name();
    let capabilities = sock.capabilities(&cfg.iface);
    let batch = sock.batch();
    let avg = frames.iter().map(|f| (f.len() + 4) as f64).sum::<f64>() / frames.len() as f64;
    let interval_ns = target_pps(cfg.rate, avg).map(|pps| 1e9 / pps.max(1e-9));
    let period = r.trace.times.last().copied().unwrap_or_default();
    let total = match (r.loops, cfg.count) {
        (0, c) => c.unwrap_or(u64::MAX),
        (l, c) => (l * frames.len() as u64).min(c.unwrap_or(u64::MAX)),
    };
    let (mut packets, mut bytes, mut calls, mut errors) = (0u64, 0u64, 0u64, 0u64);
    let start = Instant::now();
    let mut sampler = Sampler::new(start, cfg.interval);
    let mut intervals = Vec::new();
    let deadline = start + cfg.duration;
    while packets < total && !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        let i = (packets % frames.len() as u64) as usize;
        let lap = packets / frames.len() as u64;
        // When the next frame is due.
        let due = match (r.timing, interval_ns) {
            (Timing::Scaled(k), _) => {
                let t = (period + Duration::from_micros(1)) * lap as u32 + r.trace.times[i];
                Some(start + t.div_f64(k.max(1e-9)))
            }
            (Timing::Fast, Some(ns)) => {
                Some(start + Duration::from_nanos((packets as f64 * ns) as u64))
            }
            (Timing::Fast, None) => None,
        };
        if let Some(t) = due {
            wait_until(t.min(deadline), SPIN);
        }
        // Frames due now, up to a batch, not past the end of the trace.
        let mut n = 1;
        while n < batch && (i + n) < frames.len() && packets + (n as u64) < total {
            let next_due = match (r.timing, interval_ns) {
                (Timing::Scaled(k), _) => {
                    let t = (period + Duration::from_micros(1)) * lap as u32 + r.trace.times[i + n];
                    start + t.div_f64(k.max(1e-9)) <= Instant::now()
                }
                (Timing::Fast, Some(ns)) => {
                    start + Duration::from_nanos(((packets + n as u64) as f64 * ns) as u64)
                        <= Instant::now()
                }
                (Timing::Fast, None) => true,
            };
            if !next_due {
                break;
            }
            n += 1;
        }
        let mut sent = 0;
        while sent < n {
            let mut refs: [&[u8]; TX_BATCH_MAX] = [&[]; TX_BATCH_MAX];
            for (r, f) in refs.iter_mut().zip(&frames[i + sent..i + n]) {
                *r = f;
            }
            calls += 1;
            match sock.send(&refs[..n - sent]) {
                Ok(0) => {
                    errors += 1;
                    std::thread::yield_now();
                }
                Ok(k) => {
                    bytes += refs[..k].iter().map(|f| f.len() as u64 + 4).sum::<u64>();
                    sent += k;
                }
                Err(e)
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted)
                        || e.raw_os_error() == Some(105) =>
                {
                    errors += 1;
                    std::thread::yield_now();
                }
                Err(source) => {
                    return Err(BlastError::Send {
                        iface: cfg.iface.clone(),
                        source,
                    });
                }
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        packets += sent as u64;
        let now = Instant::now();
        if sampler.due(now)
            && let Some(iv) = sampler.sample(now, vec![worker_row(0, packets, bytes, errors)])
        {
            on_interval(&iv);
            intervals.push(iv);
        }
    }
    sock.finish().map_err(|source| BlastError::Send {
        iface: cfg.iface.clone(),
        source,
    })?;
    let end = Instant::now();
    let rows = vec![worker_row(0, packets, bytes, errors)];
    for iv in sampler.finish(end, rows.clone()) {
        on_interval(&iv);
        intervals.push(iv);
    }
    Ok(BlastReport {
        backend,
        capabilities,
        note,
        packets,
        bytes,
        duration_s: end.duration_since(start).as_secs_f64(),
        send_calls: calls,
        send_errors: errors,
        flows: 0,
        per_flow: BTreeMap::new(),
        intervals,
        worker_rows: rows,
        workers: 1,
        backend_stats: sock.stats().into_iter().collect(),
        pacing: Vec::new(),
    })
}
