//! The receiving side of a port: the sink's and fwd's frames in from one backend.

use super::*;

/// Where the sink's frames come from.
#[derive(Debug)]
pub enum Rx {
    /// Raw AF_PACKET socket, recvmmsg (frames copied into these buffers;
    /// the kernel's drop count so far; the receive timeout now set).
    Socket(RawSocket, Vec<Vec<u8>>, u64, std::time::Duration),
    /// AF_XDP, one socket per RX queue, with the redirect program attached.
    Xdp(XskRx),
    /// AF_PACKET TPACKET_V3 RX ring (and the kernel's drop count so far).
    Ring(RxRing, u64),
    /// An in-memory loopback port.
    Loop(LoopRx),
    /// An RX queue of a DPDK port.
    #[cfg(feature = "dpdk")]
    Dpdk(crate::dpdk::DpdkRx),
}

impl Rx {
    pub fn name(&self) -> &'static str {
        match self {
            Rx::Socket(..) => "socket",
            Rx::Xdp(_) => "af_xdp",
            Rx::Ring(..) => "af_packet",
            Rx::Loop(_) => "loopback",
            #[cfg(feature = "dpdk")]
            Rx::Dpdk(_) => "dpdk",
        }
    }

    /// The receiver is bound to its interface's queues (AF_XDP), so a
    /// sender on the same interface cannot bind them too.
    pub fn holds_queue(&self) -> bool {
        matches!(self, Rx::Xdp(_))
    }

    /// What this receiving backend can do here.
    pub fn capabilities(&self) -> RxCapabilities {
        match self {
            Rx::Socket(_, store, ..) => RxCapabilities {
                batch: store.len(),
                max_frame: store.first().map_or(0, Vec::len),
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: true,
            },
            Rx::Xdp(x) => RxCapabilities {
                batch: 256,
                max_frame: x.max_frame(),
                queues: Some(x.queues()),
                zero_copy: x.zero_copy,
                kernel_receive_stamps: false,
            },
            Rx::Ring(r, _) => RxCapabilities {
                batch: r.frames_per_block(),
                max_frame: r.max_frame(),
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: true,
            },
            Rx::Loop(l) => RxCapabilities {
                batch: LOOP_RX_BATCH,
                max_frame: l.wire().mtu() + 18,
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: false,
            },
            #[cfg(feature = "dpdk")]
            Rx::Dpdk(d) => RxCapabilities {
                batch: d.batch(),
                max_frame: d.max_frame(),
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: false,
            },
        }
    }

    /// Hands each received frame (without FCS) to `f`; waits up to 50 ms
    /// for the first. Frames this host sent itself are skipped. Each
    /// comes with its arrival time: the kernel's receive time where the
    /// backend has one (the af_packet ring, the raw socket's
    /// SO_TIMESTAMPNS), else the batch's handover time (AF_XDP). Returns
    /// exactly the frames handed to `f` (the sink counts its probes per
    /// batch from it).
    #[inline]
    pub fn recv<F: FrameSink>(&mut self, f: &mut F) -> io::Result<usize> {
        self.recv_within(std::time::Duration::from_millis(50), f)
    }

    /// [`Rx::recv`], waiting at most `wait` for the first frame (to the
    /// millisecond on the rings; the raw socket's wait is set per call).
    #[inline]
    pub fn recv_within<F: FrameSink>(
        &mut self,
        wait: std::time::Duration,
        f: &mut F,
    ) -> io::Result<usize> {
        match self {
            Rx::Socket(sock, store, _, timeout) => {
                // SO_RCVTIMEO, set only when it changes (zero would mean forever)
                let wait = wait.max(std::time::Duration::from_micros(1));
                if wait != *timeout {
                    sock.set_read_timeout(wait)?;
                    *timeout = wait;
                }
                let mut lens = [0usize; crate::raw::RAW_BATCH_MAX];
                let mut stamps = [0u64; crate::raw::RAW_BATCH_MAX];
                let n = sock.recv_stamped(store, &mut lens, &mut stamps)?;
                // The kernel's receive stamps are on the wall clock; probes
                // carry the monotonic one.
                let offset = crate::clock::realtime_offset_ns();
                let (mut handed, mut unstamped) = (0, 0);
                for ((b, &l), &st) in store.iter().zip(&lens).zip(&stamps).take(n) {
                    // (0: a frame this host sent, not handed over.)
                    if l > 0 {
                        handed += 1;
                        let at = match (st > 0)
                            .then(|| u64::try_from(i128::from(st) - offset).ok())
                            .flatten()
                        {
                            Some(at) => at,
                            None => {
                                unstamped += 1;
                                f.handover_time()
                            }
                        };
                        f.frame(&b[..l], at);
                    }
                }
                if unstamped > 0 {
                    f.handed_over(unstamped);
                }
                Ok(handed)
            }
            Rx::Xdp(x) => x.recv(256, wait, f),
            Rx::Ring(r, _) => r.recv(wait.as_millis().min(1000) as i32, f),
            Rx::Loop(l) => Ok(l.recv(LOOP_RX_BATCH, wait, f)),
            #[cfg(feature = "dpdk")]
            Rx::Dpdk(d) => Ok(d.recv(wait, f)),
        }
    }

    /// Frames the kernel dropped before the sink could take them, so far.
    pub fn drops(&mut self) -> u64 {
        match self {
            // PACKET_STATISTICS resets on every read: accumulate.
            Rx::Socket(sock, _, acc, _) => {
                *acc += sock.stats().map_or(0, |(_, d)| u64::from(d));
                *acc
            }
            Rx::Xdp(x) => x.stats().map_or(0, |(d, full, _)| d + full),
            Rx::Ring(r, acc) => {
                *acc += u64::from(r.drops().unwrap_or(0));
                *acc
            }
            // The wire's own drops are faults injected, not the receiver's.
            Rx::Loop(_) => 0,
            #[cfg(feature = "dpdk")]
            Rx::Dpdk(d) => d.drops(),
        }
    }
}

/// Frames a loopback receiver takes per call at most.
const LOOP_RX_BATCH: usize = 256;

/// How long the raw socket receiver waits (its SO_RCVTIMEO as opened).
const SOCKET_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// The raw socket receiver: a large buffer, a 50 ms wait, kernel stamps.
fn socket_rx(iface: &str) -> Result<Rx, BackendError> {
    let s = RawSocket::open(iface).map_err(open_err(iface))?;
    let _ = s.set_rcvbuf(64 << 20);
    let _ = s.set_read_timeout(SOCKET_WAIT);
    let _ = s.enable_rx_timestamps();
    let _ = s.stats();
    Ok(Rx::Socket(
        s,
        (0..crate::raw::RAW_BATCH_MAX)
            .map(|_| vec![0u8; 9216])
            .collect(),
        0,
        SOCKET_WAIT,
    ))
}

/// Opens `workers` receivers that share the interface's frames, one per
/// receive thread: AF_XDP splits its RX queues between them (at least one
/// queue each), af_packet and socket join a PACKET_FANOUT group that keeps
/// each flow on one of them. `auto` falls back from AF_XDP to af_packet when
/// there are fewer queues than workers. The workers' rings must fit in
/// half the host's available memory, checked before any is opened.
pub fn open_rx_workers(
    kind: BackendKind,
    iface: &str,
    workers: usize,
    filter: RxFilter,
) -> Result<(Vec<Rx>, Option<String>), BackendError> {
    rings_fit(workers, available_memory())?;
    let (first, mut note) = open_rx(kind, iface, filter)?;
    if workers <= 1 {
        return Ok((vec![first], note));
    }
    let first = match first {
        Rx::Xdp(x) if kind == BackendKind::Auto && x.queues() < workers => {
            let queues = x.queues();
            drop(x);
            note = Some(format!(
                "af_xdp: {queues} RX queue(s) for {workers} workers, receiving with af_packet (TPACKET_V3 RX rings, PACKET_FANOUT by flow) on {iface}"
            ));
            Rx::Ring(
                RxRing::open(iface, RX_BLOCK, RX_BLOCKS).map_err(open_err(iface))?,
                0,
            )
        }
        other => other,
    };
    // One fanout group per process and interface.
    let group = (std::process::id() & 0xffff) as u16;
    let mut out = Vec::with_capacity(workers);
    match first {
        // Worker w takes RX queue w of the port.
        #[cfg(feature = "dpdk")]
        Rx::Dpdk(d) => {
            out.push(Rx::Dpdk(d));
            for q in 1..workers {
                let q = u16::try_from(q).unwrap_or(u16::MAX);
                out.push(crate::dpdk::open_rx(iface, q)?.0);
            }
        }
        // Every receiver of a loopback port takes from the one wire.
        Rx::Loop(l) => {
            out.push(Rx::Loop(l));
            for _ in 1..workers {
                out.push(Rx::Loop(LoopRx::open(iface).map_err(open_err(iface))?));
            }
        }
        Rx::Xdp(x) => out.extend(
            x.split(workers)
                .map_err(open_err(iface))?
                .into_iter()
                .map(Rx::Xdp),
        ),
        Rx::Ring(mut r, _) => {
            r.join_fanout(group).map_err(open_err(iface))?;
            out.push(Rx::Ring(r, 0));
            for _ in 1..workers {
                let mut r = RxRing::open(iface, RX_BLOCK, RX_BLOCKS).map_err(open_err(iface))?;
                r.join_fanout_late(group).map_err(open_err(iface))?;
                out.push(Rx::Ring(r, 0));
            }
        }
        Rx::Socket(s, bufs, n, wait) => {
            s.join_fanout(group).map_err(open_err(iface))?;
            out.push(Rx::Socket(s, bufs, n, wait));
            for _ in 1..workers {
                let mut rx = socket_rx(iface)?;
                if let Rx::Socket(s, ..) = &mut rx {
                    s.join_fanout_late(group).map_err(open_err(iface))?;
                }
                out.push(rx);
            }
        }
    }
    Ok((out, note))
}

/// Opens the receiving backend; the note says what `auto` chose and why.
/// With AF_XDP only the frames `filter` takes leave the kernel.
pub fn open_rx(
    kind: BackendKind,
    iface: &str,
    filter: RxFilter,
) -> Result<(Rx, Option<String>), BackendError> {
    let ring = || RxRing::open(iface, RX_BLOCK, RX_BLOCKS);
    let socket = || socket_rx(iface);
    match kind {
        BackendKind::Dpdk => crate::dpdk::open_rx(iface, 0),
        BackendKind::Loopback => Ok((
            Rx::Loop(LoopRx::open(iface).map_err(open_err(iface))?),
            None,
        )),
        BackendKind::AfXdp => Ok((
            Rx::Xdp(XskRx::open(iface, 4096, filter).map_err(open_err(iface))?),
            None,
        )),
        BackendKind::Socket | BackendKind::Raw => Ok((socket()?, None)),
        BackendKind::Udp => Err(BackendError::SendOnly("socket:udp")),
        BackendKind::AfPacket => Ok((Rx::Ring(ring().map_err(open_err(iface))?, 0), None)),
        BackendKind::Auto => match XskRx::open(iface, 4096, filter) {
            Ok(x) => {
                let note = format!(
                    "af_xdp on {iface}, {} RX queue(s), one socket each (redirect program attached, taking {})",
                    x.queues(),
                    filter.describe()
                );
                Ok((Rx::Xdp(x), Some(note)))
            }
            // Another receiver holds the queue, and its XDP program takes
            // the frames: af_packet beside it would count nothing.
            Err(xe)
                if xe.raw_os_error() == Some(libc::EBUSY)
                    || xe.kind() == io::ErrorKind::ResourceBusy =>
            {
                Err(BackendError::Unsupported(format!(
                    "{iface}: another receiver holds its AF_XDP queue (EBUSY), and its XDP program takes the frames: this one would count nothing. Stop the other, or give --backend af_packet to receive beside it (only what the other's program passes on reaches af_packet)"
                )))
            }
            Err(xe) => match ring() {
                Ok(r) => Ok((
                    Rx::Ring(r, 0),
                    Some(format!(
                        "af_xdp: {xe}, receiving with af_packet (TPACKET_V3 RX ring) on {iface}"
                    )),
                )),
                Err(re) => Ok((
                    socket()?,
                    Some(format!(
                        "af_xdp: {xe}; af_packet: {re}; receiving with socket on {iface}"
                    )),
                )),
            },
        },
    }
}

/// The host's available memory, bytes (`MemAvailable`; `None` unknown).
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// `workers` receive rings (one each, [`RX_RING_BYTES`]) within half of
/// `available` bytes, or the reason they would not be.
pub fn rings_fit(workers: usize, available: Option<u64>) -> Result<(), BackendError> {
    let Some(avail) = available else {
        return Ok(());
    };
    let need = workers as u64 * RX_RING_BYTES as u64;
    if workers > 1 && need > avail / 2 {
        return Err(BackendError::Unsupported(format!(
            "{workers} receive workers would take {} MiB of rings ({} MiB each): more than half of the {} MiB this host has available; give fewer --cores",
            need >> 20,
            RX_RING_BYTES >> 20,
            avail >> 20
        )));
    }
    Ok(())
}

#[cfg(test)]
mod budget_tests {
    use super::*;

    #[test]
    fn rings_are_bounded_by_the_memory_available() {
        let gib = 1u64 << 30;
        assert!(rings_fit(8, Some(24 * gib)).is_ok());
        // 1024 rings of 64 MiB: 64 GiB.
        let e = rings_fit(1024, Some(24 * gib)).unwrap_err().to_string();
        assert!(
            e.contains("1024 receive workers would take 65536 MiB"),
            "{e}"
        );
        // One ring is always tried (the kernel says if it cannot).
        assert!(rings_fit(1, Some(1)).is_ok());
        assert!(rings_fit(64, None).is_ok());
    }
}
