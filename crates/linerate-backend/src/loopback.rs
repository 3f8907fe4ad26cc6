//! The loopback port: an in-memory wire inside this process, with fault
//! injection. A port is created under a name in a registry the caller owns
//! ([`Wires`], [`Port::create`]) and opened by that name with `--backend
//! loopback` like an interface, by whoever is given the registry (the
//! configurations' `wires`): what one side
//! sends the other receives, through a bounded queue, after the faults the
//! port was made with (drop, duplicate, reorder, delay, a link that goes
//! down). blast, sink, fwd and rfc2544 run on it in unit tests without
//! root, namespaces or a kernel interface.
//!
//! Faults are deterministic (every Nth frame), so a test knows exactly what
//! the receiver must count.

use crate::{FrameSink, FrameSource};
use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// What the wire does to the frames sent into it. Counters are 1-based
/// over the frames offered: `drop_every: 10` drops frames 10, 20, 30, …
/// (0: never).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Drop every Nth frame.
    pub drop_every: u64,
    /// Deliver every Nth frame twice.
    pub duplicate_every: u64,
    /// Deliver every Nth frame after the frame that follows it.
    pub reorder_every: u64,
    /// Each frame is received no earlier than this after it was sent.
    pub delay: Duration,
    /// Frames the wire holds at most; a send into a full wire takes none
    /// (the sender retries, as with a full ring).
    pub capacity: usize,
    /// A policer, as a device that passes a known rate: frames/s (0: none)
    /// from a bucket of `police_burst` frames; frames over it are dropped.
    pub police_fps: u64,
    pub police_burst: u64,
}

impl Default for Faults {
    fn default() -> Self {
        Faults {
            drop_every: 0,
            duplicate_every: 0,
            reorder_every: 0,
            delay: Duration::ZERO,
            capacity: 1 << 16,
            police_fps: 0,
            police_burst: 0,
        }
    }
}

/// What the wire did, counted as it did it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireCounts {
    /// Frames taken from senders (dropped ones included).
    pub offered: u64,
    pub dropped: u64,
    pub duplicated: u64,
    pub reordered: u64,
    /// Dropped by the policer (not in `dropped`).
    pub policed: u64,
    /// Frames handed to receivers.
    pub delivered: u64,
}

#[derive(Debug, Default)]
struct Queue {
    /// (frame, when it may be received)
    frames: VecDeque<(Vec<u8>, Instant)>,
    /// A frame held back to go after the next one (reorder).
    held: Option<(Vec<u8>, Instant)>,
    counts: WireCounts,
    /// The policer's bucket: frames it may still pass, when last filled.
    tokens: f64,
    filled: Option<Instant>,
}

impl Queue {
    /// Whether the policer passes one more frame now.
    fn police(&mut self, fps: u64, burst: u64) -> bool {
        let now = Instant::now();
        let cap = burst.max(1) as f64;
        let since = self.filled.map_or(Duration::ZERO, |t| now - t);
        if self.filled.is_none() {
            self.tokens = cap;
        }
        self.tokens = (self.tokens + since.as_secs_f64() * fps as f64).min(cap);
        self.filled = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// One in-memory wire: what is sent into it comes out of it.
#[derive(Debug)]
pub struct Wire {
    name: String,
    faults: Faults,
    mtu: usize,
    mac: [u8; 6],
    up: AtomicBool,
    queue: Mutex<Queue>,
    arrived: Condvar,
}

/// The loopback ports a caller made, by name: a handle it owns and
/// passes to whatever opens them (clones share the ports). A new registry
/// has none.
#[derive(Debug, Clone, Default)]
pub struct Wires(Arc<Mutex<Registry>>);

#[derive(Debug, Default)]
struct Registry {
    ports: HashMap<String, Arc<Wire>>,
    /// Ports made so far (their MACs' last byte, wrapping after 255).
    made: u8,
}

impl Wires {
    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The port of that name, if one exists.
    pub fn lookup(&self, name: &str) -> Option<Arc<Wire>> {
        self.lock().ports.get(name).cloned()
    }

    /// The port of that name, or an error that says why there is none.
    pub fn open(&self, name: &str) -> io::Result<Arc<Wire>> {
        self.lookup(name).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "no loopback port named {name} (loopback ports exist inside the process that made them)"
                ),
            )
        })
    }
}

/// A loopback port as created: it exists until this handle is dropped.
#[derive(Debug)]
pub struct Port(Arc<Wire>, Wires);

impl Port {
    /// Creates the port `name` in `wires` (an MTU of `mtu` bytes, a
    /// locally administered MAC of its own); fails if a port of that name
    /// exists there.
    pub fn create(wires: &Wires, name: &str, mtu: usize, faults: Faults) -> io::Result<Port> {
        let mut p = wires.lock();
        if p.ports.contains_key(name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("loopback port {name} exists"),
            ));
        }
        let n = p.made;
        p.made = n.wrapping_add(1);
        let w = Arc::new(Wire {
            name: name.to_string(),
            faults: Faults {
                // A frame, its duplicate and a held frame may go in at once.
                capacity: faults.capacity.max(3),
                ..faults
            },
            mtu,
            mac: [0x02, 0x4c, 0x52, 0x00, 0x00, n.wrapping_add(1)],
            up: AtomicBool::new(true),
            queue: Mutex::new(Queue::default()),
            arrived: Condvar::new(),
        });
        p.ports.insert(name.to_string(), w.clone());
        Ok(Port(w, wires.clone()))
    }

    pub fn wire(&self) -> &Arc<Wire> {
        &self.0
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        self.1.lock().ports.remove(&self.0.name);
    }
}

impl Wire {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn mtu(&self) -> usize {
        self.mtu
    }

    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// Takes the link down (or up): receivers see it as an interface that
    /// went down.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::Relaxed);
        self.arrived.notify_all();
    }

    pub fn counts(&self) -> WireCounts {
        self.lock().counts
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Offers frames to the wire; returns how many it took (0: full).
    fn offer<'f>(&self, frames: impl Iterator<Item = &'f [u8]>) -> usize {
        let f = self.faults;
        let due = Instant::now() + f.delay;
        let every = |n: u64, k: u64| k > 0 && n.is_multiple_of(k);
        let mut q = self.lock();
        let mut taken = 0;
        for frame in frames {
            // Never over capacity: the frame, its duplicate, a held frame.
            let n = q.counts.offered + 1;
            let adds = 1 + usize::from(every(n, f.duplicate_every)) + usize::from(q.held.is_some());
            if q.frames.len() + adds > f.capacity {
                break;
            }
            taken += 1;
            q.counts.offered = n;
            if every(n, f.drop_every) {
                q.counts.dropped += 1;
                continue;
            }
            if f.police_fps > 0 && !q.police(f.police_fps, f.police_burst) {
                q.counts.policed += 1;
                continue;
            }
            if every(n, f.reorder_every) && q.held.is_none() {
                q.held = Some((frame.to_vec(), due));
                q.counts.reordered += 1;
                continue;
            }
            q.frames.push_back((frame.to_vec(), due));
            if every(n, f.duplicate_every) {
                q.frames.push_back((frame.to_vec(), due));
                q.counts.duplicated += 1;
            }
            if let Some(h) = q.held.take() {
                q.frames.push_back(h);
            }
        }
        drop(q);
        if taken > 0 {
            self.arrived.notify_all();
        }
        taken
    }

    /// Hands up to `max` frames that are due to `sink`, waiting up to
    /// `wait` for the first; returns how many.
    fn take<S: FrameSink + ?Sized>(&self, max: usize, wait: Duration, sink: &mut S) -> usize {
        let deadline = Instant::now() + wait;
        let mut q = self.lock();
        loop {
            let now = Instant::now();
            let ready = q.frames.front().is_some_and(|(_, due)| *due <= now);
            if ready && self.is_up() {
                break;
            }
            if now >= deadline {
                return 0;
            }
            // Until the first frame is due, or the wait ends.
            let until = q
                .frames
                .front()
                .map_or(deadline, |(_, due)| (*due).min(deadline));
            let (g, _) = self
                .arrived
                .wait_timeout(
                    q,
                    until
                        .saturating_duration_since(now)
                        .max(Duration::from_micros(50)),
                )
                .unwrap_or_else(|p| p.into_inner());
            q = g;
        }
        let now = Instant::now();
        let mut batch = Vec::new();
        while batch.len() < max && q.frames.front().is_some_and(|(_, due)| *due <= now) {
            if let Some((f, _)) = q.frames.pop_front() {
                batch.push(f);
            }
        }
        q.counts.delivered += batch.len() as u64;
        drop(q);
        let at = sink.handover_time();
        for f in &batch {
            sink.frame(f, at);
        }
        if !batch.is_empty() {
            sink.handed_over(batch.len());
        }
        batch.len()
    }
}

/// The sending side of a loopback port: frames built in its own buffers,
/// then copied onto the wire.
#[derive(Debug)]
pub struct LoopTx {
    wire: Arc<Wire>,
    slots: Vec<Vec<u8>>,
    lens: Vec<usize>,
    /// Slots built but not yet taken by a full wire: sent first next time.
    pending: std::ops::Range<usize>,
}

impl LoopTx {
    /// Opens port `name` of `wires` for sending: `slots` buffers of
    /// `max_frame` bytes.
    pub fn open(wires: &Wires, name: &str, max_frame: usize, slots: usize) -> io::Result<LoopTx> {
        let wire = wires.open(name)?;
        let len = max_frame.min(wire.mtu + 18).max(64);
        Ok(LoopTx {
            wire,
            slots: vec![vec![0u8; len]; slots.max(1)],
            lens: vec![0; slots.max(1)],
            pending: 0..0,
        })
    }

    pub fn wire(&self) -> &Arc<Wire> {
        &self.wire
    }

    /// Bytes of each buffer.
    pub fn slot_len(&self) -> usize {
        self.slots[0].len()
    }

    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Builds up to `n` frames in the port's buffers and sends them;
    /// returns the frames the wire took and their bytes (0: full). Frames
    /// built but not taken are sent before anything more is built.
    pub fn send_with<F: FrameSource + ?Sized>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        if !self.wire.is_up() {
            return Err(io::Error::new(
                io::ErrorKind::NetworkDown,
                "the loopback port is down",
            ));
        }
        if self.pending.is_empty() {
            let n = n.min(self.slots.len());
            for (slot, (buf, len)) in self
                .slots
                .iter_mut()
                .zip(&mut self.lens)
                .take(n)
                .enumerate()
            {
                *len = fill.build(buf, slot);
            }
            self.pending = 0..n;
        }
        let r = self.pending.clone();
        let frames = (self.slots[r.clone()].iter())
            .zip(&self.lens[r.clone()])
            .map(|(b, &l)| &b[..l]);
        let taken = self.wire.offer(frames);
        let bytes = self.lens[r.start..r.start + taken]
            .iter()
            .map(|&l| l as u64)
            .sum();
        self.pending = r.start + taken..r.end;
        Ok((taken, bytes))
    }

    /// Sends frames built elsewhere; returns how many the wire took.
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        if !self.wire.is_up() {
            return Err(io::Error::new(
                io::ErrorKind::NetworkDown,
                "the loopback port is down",
            ));
        }
        Ok(self.wire.offer(frames.iter().copied()))
    }
}

/// The receiving side of a loopback port.
#[derive(Debug)]
pub struct LoopRx {
    wire: Arc<Wire>,
}

impl LoopRx {
    /// Opens port `name` of `wires` for receiving.
    pub fn open(wires: &Wires, name: &str) -> io::Result<LoopRx> {
        Ok(LoopRx {
            wire: wires.open(name)?,
        })
    }

    pub fn wire(&self) -> &Arc<Wire> {
        &self.wire
    }

    /// Hands up to `max` received frames to `sink`, waiting up to `wait`
    /// for the first; each carries the batch's handover time.
    pub fn recv<S: FrameSink + ?Sized>(
        &mut self,
        max: usize,
        wait: Duration,
        sink: &mut S,
    ) -> usize {
        self.wire.take(max, wait, sink)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn received(rx: &mut LoopRx) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        while rx.recv(64, Duration::from_millis(20), &mut |f: &[u8], _| {
            got.push(f.to_vec())
        }) > 0
        {}
        got
    }

    #[test]
    fn faults_happen_to_exactly_the_frames_they_name() {
        let wires = Wires::default();
        let _p = Port::create(
            &wires,
            "lt-faults",
            1500,
            Faults {
                drop_every: 5,
                duplicate_every: 3,
                reorder_every: 7,
                ..Faults::default()
            },
        )
        .unwrap();
        let mut tx = LoopTx::open(&wires, "lt-faults", 2048, 16).unwrap();
        let mut rx = LoopRx::open(&wires, "lt-faults").unwrap();
        let frames: Vec<Vec<u8>> = (1..=10u8).map(|i| vec![i; 60]).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        assert_eq!(tx.send(&refs).unwrap(), 10);
        let got: Vec<u8> = received(&mut rx).iter().map(|f| f[0]).collect();
        // 5 and 10 dropped; 3, 6 and 9 twice; 7 after 8
        assert_eq!(got, [1, 2, 3, 3, 4, 6, 6, 8, 7, 9, 9]);
        let c = rx.wire().counts();
        assert_eq!(
            (c.offered, c.dropped, c.duplicated, c.reordered, c.delivered),
            (10, 2, 3, 1, 11)
        );
    }

    #[test]
    fn a_full_wire_takes_nothing_a_delay_holds_frames_and_a_down_link_refuses() {
        let wires = Wires::default();
        let p = Port::create(
            &wires,
            "lt-full",
            1500,
            Faults {
                capacity: 3,
                delay: Duration::from_millis(30),
                ..Faults::default()
            },
        )
        .unwrap();
        let mut tx = LoopTx::open(&wires, "lt-full", 2048, 8).unwrap();
        let mut rx = LoopRx::open(&wires, "lt-full").unwrap();
        let mut n = 0u8;
        let mut build = |b: &mut [u8], _: usize| {
            n += 1;
            b[..60].fill(n);
            60
        };
        struct B<F>(F);
        impl<F: FnMut(&mut [u8], usize) -> usize> FrameSource for B<F> {
            fn build(&mut self, buf: &mut [u8], slot: usize) -> usize {
                (self.0)(buf, slot)
            }
            fn forget(&mut self, _slot: usize) {}
        }
        let (taken, bytes) = tx.send_with(8, &mut B(&mut build)).unwrap();
        assert_eq!((taken, bytes), (3, 180));
        // what the full wire left is sent first, nothing new is built
        assert_eq!(
            tx.send_with(8, &mut B(|_: &mut [u8], _| panic!())).unwrap(),
            (0, 0)
        );
        let t = Instant::now();
        assert_eq!(
            rx.recv(64, Duration::from_millis(5), &mut |_: &[u8], _| {}),
            0
        );
        let mut got = Vec::new();
        assert_eq!(
            rx.recv(64, Duration::from_secs(1), &mut |f: &[u8], _| got
                .push(f[0])),
            3
        );
        assert!(t.elapsed() >= Duration::from_millis(30));
        let (taken, _) = tx.send_with(8, &mut B(|_: &mut [u8], _| panic!())).unwrap();
        assert_eq!(taken, 3);
        assert_eq!(
            rx.recv(64, Duration::from_secs(1), &mut |f: &[u8], _| got
                .push(f[0])),
            3
        );
        assert_eq!(got, [1, 2, 3, 4, 5, 6]);
        p.wire().set_up(false);
        assert!(tx.send(&[&[0u8; 60]]).is_err());
        drop(p);
        assert!(wires.lookup("lt-full").is_none());
        assert!(LoopRx::open(&wires, "lt-full").is_err());
    }

    #[test]
    fn a_wire_never_holds_more_than_its_capacity_duplicates_included() {
        let wires = Wires::default();
        let _p = Port::create(
            &wires,
            "lt-cap",
            1500,
            Faults {
                capacity: 3,
                duplicate_every: 1,
                ..Faults::default()
            },
        )
        .unwrap();
        let mut tx = LoopTx::open(&wires, "lt-cap", 2048, 8).unwrap();
        let mut rx = LoopRx::open(&wires, "lt-cap").unwrap();
        // the first frame and its duplicate fill 2 of 3 places: no room
        // for the second and its duplicate
        assert_eq!(tx.send(&[&[1u8; 60], &[2u8; 60]]).unwrap(), 1);
        assert_eq!(received(&mut rx).len(), 2);
        assert_eq!(rx.wire().counts().duplicated, 1);
    }
}
