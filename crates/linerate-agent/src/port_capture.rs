//! A capturing port's own receive path: from its capture's start to its
//! stop, an AF_PACKET socket of its own on the port's interface (the
//! backend's `RawSocket`, as the devices' responders have) takes every
//! frame that arrives there, whether a flow receives there or not, whole,
//! with the kernel's receive time, into the capture's file (the sinks'
//! capture writer, `linerate_traffic::pcap::CaptureWriter`, bounded by
//! the file's frame count). Frames the host sends out of the port are not
//! captured (a capture is of what arrived).
//!
//! While a port's own path runs, the flows' receivers there write no
//! capture ([`crate::capture::Captures::file_for`]): a frame is kept
//! once. The path ends (socket closed, thread joined, file flushed) at the
//! capture's stop, at the next configuration and at the agent's end.

use linerate_backend::raw::RawSocket;
use linerate_traffic::pcap::CaptureWriter;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a receive call waits: the longest a stop waits for the thread
/// to see it.
const POLL: Duration = Duration::from_millis(20);
/// Frames a receive call takes.
const BATCH: usize = 16;
/// A receive buffer: the largest frame an interface hands up (a GRO or
/// jumbo frame whole, so that its length is its own).
const FRAME_MAX: usize = 65_550;
/// The socket's receive buffer: a burst queued while the thread writes.
const RCVBUF: i32 = 8 << 20;
/// After the stop, the longest the thread still reads what was queued
/// before it.
const DRAIN_MAX: Duration = Duration::from_secs(1);

/// One port's own capture, running.
#[derive(Debug)]
pub struct OwnCapture {
    stop: Arc<AtomicBool>,
    /// Frames the kernel dropped for the socket (its queue full).
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<Option<String>>>,
}

impl OwnCapture {
    /// Opens the socket on `iface` (frames queue from here on) and starts
    /// the thread writing them to `writer`.
    pub fn start(iface: &str, writer: CaptureWriter) -> std::io::Result<Self> {
        let sock = RawSocket::open(iface)?;
        // A bigger queue where the host allows it (none is fine).
        let _ = sock.set_rcvbuf(RCVBUF);
        sock.enable_rx_timestamps()?;
        sock.set_read_timeout(POLL)?;
        let stop = Arc::new(AtomicBool::new(false));
        let dropped = Arc::new(AtomicU64::new(0));
        let (s, d) = (stop.clone(), dropped.clone());
        let thread = std::thread::Builder::new()
            .name(format!("capture {iface}"))
            .spawn(move || run(sock, writer, &s, &d))?;
        Ok(Self {
            stop,
            dropped,
            thread: Some(thread),
        })
    }

    /// Stops the capture: what was queued read, the file flushed. Returns
    /// what went wrong (a receive or write error, frames the kernel
    /// dropped), if anything did.
    pub fn stop(mut self) -> Option<String> {
        self.end()
    }

    fn end(&mut self) -> Option<String> {
        self.stop.store(true, Ordering::Relaxed);
        let err = self.thread.take().and_then(|h| h.join().ok().flatten());
        let dropped = self.dropped.load(Ordering::Relaxed);
        match (err, dropped) {
            (Some(e), _) => Some(e),
            (None, 0) => None,
            (None, n) => Some(format!(
                "the kernel dropped {n} frames for the capture (its queue was full)"
            )),
        }
    }
}

impl Drop for OwnCapture {
    fn drop(&mut self) {
        let _ = self.end();
    }
}

/// The thread: frames read and written until `stop`, then what was
/// queued before the stop (at most [`DRAIN_MAX`]).
fn run(
    mut sock: RawSocket,
    mut writer: CaptureWriter,
    stop: &AtomicBool,
    dropped: &AtomicU64,
) -> Option<String> {
    let mut bufs = vec![vec![0u8; FRAME_MAX]; BATCH];
    let mut lens = [0usize; BATCH];
    let mut stamps = [0u64; BATCH];
    let mut drain_until: Option<Instant> = None;
    let mut error = None;
    loop {
        if drain_until.is_none() && stop.load(Ordering::Relaxed) {
            drain_until = Some(Instant::now() + DRAIN_MAX);
        }
        if drain_until.is_some_and(|t| Instant::now() >= t) {
            break;
        }
        let n = match sock.recv_stamped(&mut bufs, &mut lens, &mut stamps) {
            Ok(n) => n,
            Err(e) if linerate_backend::port::recv_idle(&e) => 0,
            Err(e) => {
                error = Some(format!("receiving: {e}"));
                break;
            }
        };
        // Stopped and nothing more queued: done.
        if n == 0 && drain_until.is_some() {
            break;
        }
        for i in 0..n {
            // 0: a frame this host sent out of the port.
            if lens[i] == 0 {
                continue;
            }
            let ns = if stamps[i] == 0 { wall_ns() } else { stamps[i] };
            writer.write(ns, &bufs[i][..lens[i]]);
        }
    }
    if let Ok((_, d)) = sock.stats() {
        dropped.fetch_add(u64::from(d), Ordering::Relaxed);
    }
    error.or(writer.finish())
}

fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Each port's interface for a receive path of its own (`None` for a port
/// on a peer agent).
pub fn interfaces(ports: &[crate::plan::PlanPort]) -> Vec<Option<String>> {
    ports
        .iter()
        .map(|p| p.remote.is_none().then(|| p.iface.clone()))
        .collect()
}
