//! A test's set of data streams, shared by the client and the server:
//! opening their worker threads (pinned, TCP senders that share a CPU in one
//! worker), stopping and draining them, and handing a report's run-model
//! events to the shared reporters.

use crate::net;
use crate::stream::{self, Pacing, StreamShared};
use linerate_iperf_proto::Params;
use linerate_iperf_proto::report::{Report, StreamDesc};
use std::net::{TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

/// Hands the report's run-model events to the shared reporters.
pub(crate) fn forward_events(rep: &mut Report, to: Option<&linerate_run::SharedReporter>) {
    while let Some(ev) = rep.poll_run_event() {
        if let Some(t) = to {
            t.report(&ev);
        }
    }
}

/// Streams and their worker threads (a handle is taken when joined).
pub(crate) struct Running {
    pub(crate) streams: Vec<Arc<StreamShared>>,
    pub(crate) handles: Vec<Option<JoinHandle<()>>>,
    /// The CPUs streams were pinned to (each once; empty: not pinned).
    pub(crate) cpus: Vec<usize>,
    /// What this side's senders may still send (`-n` / `-k`).
    pub(crate) budget: Arc<stream::Budget>,
    /// The threads wait here until [`Running::go`].
    gate: Arc<Gate>,
    /// Wakes waiting receivers when they are told to drain or stop.
    wake: Option<Arc<stream::Wake>>,
    /// Wakes draining receivers when they are told to stop.
    stop_wake: Option<Arc<stream::Wake>>,
}

impl Running {
    /// The streams start moving data; senders stop by themselves at
    /// `end_at` (a test that ends by time). Threads are spawned before
    /// (when the streams connect), so starting them costs nothing here.
    pub(crate) fn go(&self, end_at: Option<std::time::Instant>) {
        if let Some(end) = end_at {
            for s in &self.streams {
                if s.sender {
                    s.stop_at(end);
                } else {
                    s.expect_end(end);
                }
            }
        }
        self.gate.open();
    }

    /// Stops and joins the workers (only the sending ones if asked).
    pub(crate) fn stop(&mut self, senders_only: bool) {
        self.stop_with(senders_only, false);
    }

    /// Stops the senders, lets receivers take what is already queued
    /// (bounded by [`stream::DRAIN_MAX`]), and joins them all: what the
    /// peer sent before TEST_END is counted.
    pub(crate) fn drain_and_stop(&mut self) {
        self.stop_with(false, true);
    }

    /// Stops the senders and tells the receivers to take what was sent
    /// (at most [`stream::DRAIN_MAX`]), without waiting for them: the
    /// server's TEST_END, whose drain goes on while the results are
    /// exchanged; [`Running::stop`] ends it.
    pub(crate) fn begin_drain(&mut self) {
        self.signal(false, true);
    }

    fn stop_with(&mut self, senders_only: bool, drain: bool) {
        self.signal(senders_only, drain);
        for (h, s) in self.handles.iter_mut().zip(&self.streams) {
            if (!senders_only || s.sender)
                && let Some(h) = h.take()
            {
                let _ = h.join();
            }
        }
        // The TCP_INFO handle keeps each socket open: close every stopped
        // connection now, as iperf3 does at the end of a test. Streams that
        // share a worker have no handle of their own, so this goes by
        // stream, after every worker was joined (closing only the first
        // stream of a shared worker left iperf3 3.12 blocked reading the
        // others with -R -P n, and the results exchange was lost).
        for s in &self.streams {
            if (!senders_only || s.sender)
                && let Some(t) = &s.tcp
            {
                let _ = t.shutdown(std::net::Shutdown::Both);
            }
        }
    }

    /// Sets the flags and wakes the workers that wait.
    fn signal(&mut self, senders_only: bool, drain: bool) {
        // Threads that never started see their stop flag at once.
        let gate_was_open = self.gate.is_open();
        let until = linerate_backend::clock::monotonic_ns() + stream::DRAIN_MAX.as_nanos() as u64;
        for s in &self.streams {
            if drain && !s.sender {
                s.drain_until_ns.store(until, Ordering::Relaxed);
            } else if !senders_only || s.sender {
                s.stop.store(true, Ordering::Relaxed);
            }
        }
        if !gate_was_open {
            // Stopped before it started: every thread ends (none moved data).
            for s in &self.streams {
                s.stop.store(true, Ordering::Relaxed);
            }
        }
        self.gate.open();
        // Receivers waiting for data see their flag now, not at their next
        // timeout; a sender blocked on a full socket is woken by shutting
        // its sending side (what it had queued still goes, then the FIN,
        // which ends the peer's drain as soon as all the data is in).
        // A draining receiver is woken by the second wake when it is told
        // to stop (its drain is over: the server has what the client sent).
        if !senders_only {
            if let Some(w) = &self.wake {
                w.fire();
            }
            if !drain && let Some(w) = &self.stop_wake {
                w.fire();
            }
        }
        for s in self.streams.iter().filter(|s| s.sender) {
            if let Some(t) = &s.tcp {
                let _ = t.shutdown(std::net::Shutdown::Write);
            }
        }
    }
}

/// A client's data stream before it runs.
pub(crate) enum Conn {
    Tcp(TcpStream),
    Udp(UdpSocket),
}

/// How stream threads run: GSO, CPU pinning, zero-copy sends.
#[derive(Debug, Clone, Default)]
pub(crate) struct StreamOpts {
    pub(crate) udp_gso: bool,
    pub(crate) affinity: Vec<usize>,
    pub(crate) zerocopy: bool,
    /// `-F`: TCP senders send this file, receivers write to it.
    pub(crate) file: Option<std::path::PathBuf>,
}

use linerate_backend::cpu::allowed as allowed_cpus;

/// Pins the calling stream thread; a failure fails the stream as iperf3's
/// IEAFFINITY does ("unable to set CPU affinity"), so the test ends with
/// the error instead of running unpinned unseen.
fn pin(cpu: usize, sh: &StreamShared) -> bool {
    match linerate_backend::cpu::pin(cpu) {
        Ok(()) => true,
        Err(e) => {
            sh.fail(format!("unable to set CPU affinity (CPU {cpu}): {e}"));
            false
        }
    }
}

/// A stream's shared figures, with its socket options applied (a failure
/// fails the stream, as iperf3 fails the test).
fn shared(
    c: &Conn,
    d: &StreamDesc,
    p: &Params,
    sending: bool,
    wake: Option<&Arc<stream::Wake>>,
    stop_wake: Option<&Arc<stream::Wake>>,
) -> Arc<StreamShared> {
    let (applied, tcp) = match c {
        Conn::Tcp(t) => (net::apply_tcp(t, p, sending), t.try_clone().ok()),
        Conn::Udp(u) => {
            // Buffer sizes and TOS are best effort for UDP, as before.
            let _ = net::apply_udp(u, p, sending);
            (Ok(()), None)
        }
    };
    let mut sh = StreamShared::new(d.id, d.sender, d.socket, tcp);
    sh.wake = wake.cloned();
    sh.stop_wake = stop_wake.cloned();
    let sh = Arc::new(sh);
    if let Err(e) = applied {
        sh.fail(e.to_string());
    }
    sh
}

/// Holds every stream thread until all are spawned: on an overloaded host
/// (hundreds of streams on 2 CPUs) threads that ran at once starved the
/// thread spawning the rest, and set-up took seconds of the test's time.
#[derive(Default)]
struct Gate {
    open: std::sync::Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Gate {
    fn wait(&self) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while !*g {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn open(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    fn is_open(&self) -> bool {
        *self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The thread of one stream that has a worker of its own.
fn spawn_one(
    c: Conn,
    sh: Arc<StreamShared>,
    cpu: Option<usize>,
    p: &Params,
    so: &StreamOpts,
    pacing: Pacing,
    gate: Arc<Gate>,
) -> JoinHandle<()> {
    let len = p.len as usize;
    let buf = stream::payload(len, p.repeating_payload);
    let (zerocopy, c64, gso) = (so.zerocopy, p.udp_counters_64bit, so.udp_gso);
    let skip = p.skip_rx_copy;
    let file = so.file.clone();
    std::thread::spawn(move || {
        gate.wait();
        if cpu.is_some_and(|c| !pin(c, &sh)) {
            sh.finished.store(true, Ordering::Release);
            return;
        }
        match (c, sh.sender) {
            (Conn::Tcp(t), true) => match file {
                Some(f) => stream::tcp_send_file(t, sh, &f, len, pacing),
                None => stream::tcp_send(t, sh, buf, pacing, zerocopy),
            },
            (Conn::Tcp(t), false) => {
                // iperf3 opens the file for each receiving stream, truncated.
                let create = |f: &std::path::Path| {
                    use std::os::unix::fs::OpenOptionsExt;
                    std::fs::OpenOptions::new()
                        .write(true)
                        .create(true)
                        .truncate(true)
                        .mode(0o600)
                        .open(f)
                };
                let out = match file.as_deref().map(create).transpose() {
                    Ok(f) => f,
                    Err(e) => {
                        sh.fail(format!("unable to create the -F file: {e}"));
                        sh.finished.store(true, Ordering::Release);
                        return;
                    }
                };
                stream::tcp_recv(t, sh, len, skip, out)
            }
            (Conn::Udp(u), true) => stream::udp_send(u, sh, buf, pacing, c64, gso),
            (Conn::Udp(u), false) => stream::udp_recv(u, sh, len, c64, skip),
        }
    })
}

/// Spawns every stream's worker, waiting for [`Running::go`]: pinned where
/// asked (or where TCP senders outnumber the CPUs), TCP senders that share
/// a CPU in one worker.
pub(crate) fn spawn_streams(
    conns: Vec<(Conn, StreamDesc)>,
    p: &Params,
    so: &StreamOpts,
) -> Running {
    let budget = Arc::new(stream::Budget::new(
        p,
        p.protocol == linerate_iperf_proto::Protocol::Udp,
    ));
    let pacing = Pacing {
        rate_bps: p.bandwidth_bps,
        burst: p.burst,
        budget: budget.clone(),
    };
    let mut streams = Vec::new();
    let mut handles = Vec::new();
    // TCP senders that share a CPU share one worker thread.
    let allowed = allowed_cpus();
    let senders = conns
        .iter()
        .filter(|(c, d)| d.sender && matches!(c, Conn::Tcp(_)))
        .count();
    let mut groups: std::collections::BTreeMap<usize, Vec<(TcpStream, Arc<StreamShared>)>> =
        Default::default();
    let mut group_slot: std::collections::BTreeMap<usize, usize> = Default::default();
    let mut pinned = std::collections::BTreeSet::new();
    let gate = Arc::new(Gate::default());
    // Without it (no descriptors left) receivers wake at their timeouts.
    let wake = stream::Wake::new().ok().map(Arc::new);
    let stop_wake = stream::Wake::new().ok().map(Arc::new);
    for (i, (c, d)) in conns.into_iter().enumerate() {
        let cpu = if !so.affinity.is_empty() {
            Some(so.affinity[i % so.affinity.len()])
        } else if senders > allowed.len() && !allowed.is_empty() {
            Some(allowed[i % allowed.len()])
        } else {
            None
        };
        pinned.extend(cpu);
        let sh = shared(&c, &d, p, d.sender, wake.as_ref(), stop_wake.as_ref());
        match (c, cpu) {
            (Conn::Tcp(t), Some(cpu)) if d.sender && senders > 1 && so.file.is_none() => {
                groups.entry(cpu).or_default().push((t, sh.clone()));
                group_slot.entry(cpu).or_insert(streams.len());
                handles.push(None);
            }
            (c, cpu) => handles.push(Some(spawn_one(
                c,
                sh.clone(),
                cpu,
                p,
                so,
                pacing.clone(),
                gate.clone(),
            ))),
        }
        streams.push(sh);
    }
    for (cpu, members) in groups {
        let buf = stream::payload(p.len as usize, p.repeating_payload);
        let zerocopy = so.zerocopy;
        // The group's thread is joined through its first stream's slot.
        let slot = group_slot[&cpu];
        let pacing = pacing.clone();
        let gate = gate.clone();
        handles[slot] = Some(std::thread::spawn(move || {
            gate.wait();
            if !pin(cpu, &members[0].1) {
                for (_, sh) in &members {
                    sh.finished.store(true, Ordering::Release);
                }
                return;
            }
            stream::tcp_send_group(members, buf, pacing, zerocopy);
        }));
    }
    Running {
        streams,
        handles,
        cpus: pinned.into_iter().collect(),
        budget,
        gate,
        wake,
        stop_wake,
    }
}
