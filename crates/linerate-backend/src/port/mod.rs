//! The port layer: a port is a backend's [`TxPort`], [`RxPort`] and,
//! where the backend can, [`FwdPort`] (forwarding in place), opened by its
//! [`Backend`]; each backend is one file here (`af_xdp.rs`,
//! `af_packet.rs`, `socket.rs`, `loopback.rs`, `dpdk.rs`) and one line in
//! `backends!`'s list below, which makes its [`BackendKind`] name, its
//! variants of [`Tx`], [`Rx`] and [`Fwd`] and their dispatch (a match per
//! call, that is per batch: a frame's work stays inlined in the backend's
//! loop). [`open_tx`] / [`open_rx`] / [`open_rx_workers`] / [`open_fwd`]
//! open a named backend, or choose one for `auto` and say why when it
//! falls back. A port is a kernel interface (af_xdp, af_packet, the raw
//! or UDP sockets of `socket`) or a port of the backend's own (an
//! in-memory [`loopback`](crate::loopback) port, a DPDK port).

mod af_packet;
mod af_xdp;
mod contract;
#[macro_use]
mod dispatch;
mod dpdk;
pub mod error;
mod gso;
mod loopback;
mod socket;
mod udp;

pub use crate::xdp::RxFilter;
pub use af_packet::{AfPacket, RX_RING_BYTES, RingRx};
pub use af_xdp::AfXdp;
pub use contract::{
    Backend, Capabilities, FwdPort, Never, Opened, RxCapabilities, RxHold, RxPort, TxPort, TxStats,
};
pub use dpdk::Dpdk;
#[cfg(feature = "dpdk")]
pub use dpdk::DpdkFwd;
pub use error::{BackendError, NEEDS_PRIVILEGE, recv_idle, send_refused, with_privilege_hint};
pub use loopback::Loopback;
pub use socket::{Socket, SocketRx, SocketTx};
pub use udp::{
    Endpoints, Gso, PayloadBufs, PayloadSource, Span, TX_BATCH_MAX, Traffic, UDP_SOCKETS_MAX,
    UdpFlows, UdpTx, payload_each_by_one,
};

pub use crate::loopback::Wires;
use crate::{FrameSink, FrameSource};
use error::open_err;
use std::io;
use std::time::Duration;

// The backends: a new one is its file above and a line here.
backends! {
    Socket "socket" => socket::Socket,
    AfPacket "af_packet" => af_packet::AfPacket,
    AfXdp "af_xdp" => af_xdp::AfXdp,
    Loopback "loopback" => loopback::Loopback,
    Dpdk "dpdk" => dpdk::Dpdk,
}

/// A name no backend has: said with every name there is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend '{0}' (one of: {names})", names = BackendKind::names())]
pub struct UnknownBackend(pub String);

impl BackendKind {
    /// The backend named `s` (its name, or `udp` / `raw` for
    /// `socket:udp` / `socket:raw`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "udp" => Some(Self::Udp),
            "raw" => Some(Self::Raw),
            _ => Self::ALL.iter().copied().find(|k| k.name() == s),
        }
    }

    /// Other names it is known by.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Self::Udp => &["udp"],
            Self::Raw => &["raw"],
            _ => &[],
        }
    }

    /// Every name, comma-separated (help and errors).
    pub fn names() -> String {
        let names: Vec<_> = Self::ALL.iter().map(|k| k.name()).collect();
        names.join(", ")
    }

    /// The kind that sends a few crafted frames on the same port whatever
    /// carried the traffic (blast's end markers): a backend with ports of
    /// its own (a loopback port's wire, DPDK) itself, else a raw AF_PACKET
    /// socket.
    pub fn crafted_sender(self) -> Self {
        match self.named(&Wires::default()) {
            Some(n) if n.own_ports() => self,
            _ => Self::Raw,
        }
    }
}

impl std::str::FromStr for BackendKind {
    type Err = UnknownBackend;

    fn from_str(s: &str) -> Result<Self, UnknownBackend> {
        Self::parse(s).ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for BackendKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Tx {
    /// The UDP sockets of the socket backend, if they are what sends.
    pub fn udp_mut(&mut self) -> Option<&mut UdpTx> {
        match self {
            Tx::Socket(SocketTx::Udp(u)) => Some(u),
            _ => None,
        }
    }
}

impl Rx {
    /// Hands each received frame (without FCS) to `f`; waits up to 50 ms
    /// for the first. Frames this host sent itself are skipped. Each
    /// comes with its arrival time: the kernel's receive time where the
    /// backend has one (the af_packet ring, the raw socket's
    /// SO_TIMESTAMPNS, AF_XDP's XDP program stamp), else the batch's
    /// handover time. Returns
    /// exactly the frames handed to `f` (the sink counts its probes per
    /// batch from it).
    #[inline]
    pub fn recv<F: FrameSink>(&mut self, f: &mut F) -> io::Result<usize> {
        self.recv_within(Duration::from_millis(50), f)
    }
}

/// Opens the sending backend for worker `queue` (AF_XDP binds one socket
/// per TX queue; the other backends let the kernel pick the queue of the
/// worker's CPU). The note says what `auto` (or `socket`) chose and why.
pub fn open_tx(
    kind: BackendKind,
    wires: &Wires,
    iface: &str,
    max_frame: usize,
    queue: u32,
    traffic: &Traffic,
) -> Result<(Tx, Option<String>), BackendError> {
    if let Some(named) = kind.named(wires) {
        return named.open_tx(iface, max_frame, queue, traffic);
    }
    // AF_XDP only when its frames carry the largest asked for (over 2048
    // bytes only where the kernel takes multi-buffer frames; if not, a
    // 9000-byte frame on a jumbo link goes by af_packet).
    let xsk = AfXdp::open_xsk(iface, max_frame, queue).and_then(|x| {
        if TxPort::slot_len(&x) + 4 >= max_frame {
            Ok(x)
        } else {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "its {}-byte frames do not carry {max_frame}-byte ones",
                    TxPort::slot_len(&x)
                ),
            ))
        }
    });
    let xe = match xsk {
        Ok(x) => {
            return Ok((
                Tx::AfXdp(x),
                Some(format!("af_xdp on {iface} queue {queue}")),
            ));
        }
        Err(xe) => xe,
    };
    match AfPacket::open_tx_ring(iface, max_frame) {
        Ok(r) => Ok((
            Tx::AfPacket(r),
            Some(format!(
                "af_xdp: {xe}, using af_packet (TPACKET_V3 TX ring) on {iface}"
            )),
        )),
        Err(re) => {
            let (t, n) = Socket::auto_tx(iface, max_frame, traffic)?;
            Ok((
                Tx::Socket(t),
                Some(format!("af_xdp: {xe}; af_packet: {re}; using {n}")),
            ))
        }
    }
}

/// Opens the receiving backend; the note says what `auto` chose and why.
/// With AF_XDP only the frames `filter` takes leave the kernel; `hold`
/// says how long af_packet's kernel may gather them.
pub fn open_rx(
    kind: BackendKind,
    wires: &Wires,
    iface: &str,
    filter: RxFilter,
    hold: RxHold,
) -> Result<(Rx, Option<String>), BackendError> {
    if let Some(named) = kind.named(wires) {
        return named.open_rx(iface, filter, hold);
    }
    match crate::xsk::XskRx::open(iface, 4096, filter) {
        Ok(x) => {
            let note = format!(
                "af_xdp on {iface}, {} RX queue(s), one socket each (redirect program attached, taking {})",
                x.queues(),
                filter.describe()
            );
            Ok((Rx::AfXdp(x), Some(note)))
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
        Err(xe) => match AfPacket::open_ring(iface, hold) {
            Ok(r) => Ok((
                Rx::AfPacket(r),
                Some(format!(
                    "af_xdp: {xe}, receiving with af_packet (TPACKET_V3 RX ring) on {iface}"
                )),
            )),
            Err(re) => Ok((
                Rx::Socket(Socket::open_raw_rx(iface)?),
                Some(format!(
                    "af_xdp: {xe}; af_packet: {re}; receiving with socket on {iface}"
                )),
            )),
        },
    }
}

/// Opens `workers` receivers that share the interface's frames, one per
/// receive thread: AF_XDP splits its RX queues between them (at least one
/// queue each), af_packet and socket join a PACKET_FANOUT group that keeps
/// each flow on one of them. `auto` falls back from AF_XDP to af_packet when
/// there are fewer queues than workers. The workers' rings must fit in
/// half the host's available memory, checked before any is opened.
pub fn open_rx_workers(
    kind: BackendKind,
    wires: &Wires,
    iface: &str,
    workers: usize,
    filter: RxFilter,
    hold: RxHold,
) -> Result<(Vec<Rx>, Option<String>), BackendError> {
    rings_fit(workers, available_memory())?;
    let (first, mut note) = open_rx(kind, wires, iface, filter, hold)?;
    if workers <= 1 {
        return Ok((vec![first], note));
    }
    let first = match first {
        Rx::AfXdp(x) if kind == BackendKind::Auto && x.queues() < workers => {
            let queues = x.queues();
            drop(x);
            note = Some(format!(
                "af_xdp: {queues} RX queue(s) for {workers} workers, receiving with af_packet (TPACKET_V3 RX rings, PACKET_FANOUT by flow) on {iface}"
            ));
            Rx::AfPacket(AfPacket::open_ring(iface, hold).map_err(open_err(iface))?)
        }
        other => other,
    };
    Ok((first.share(wires, iface, workers)?, note))
}

/// Opens `workers` forwarders from `rx_iface` to `tx_iface` in place
/// where `kind` can (`auto`: as af_xdp); `None` where it cannot.
pub fn open_fwd(
    kind: BackendKind,
    wires: &Wires,
    rx_iface: &str,
    tx_iface: &str,
    workers: usize,
    filter: RxFilter,
) -> Option<Opened<Fwd>> {
    let named = kind.named(wires).unwrap_or(Named::AfXdp(AfXdp));
    named.open_fwd(rx_iface, tx_iface, workers, filter)
}

/// Why receiving on `iface` cannot go on, if it cannot: the interface went
/// down or away. (Rings just go quiet when that happens, so the loops look
/// a few times a second and every backend ends the same way.)
pub fn link_lost(kind: BackendKind, wires: &Wires, iface: &str) -> Option<String> {
    let up = match kind.named(wires) {
        Some(n) => n.link_up(iface),
        None => crate::iface::is_up(iface),
    };
    let why = match up {
        Ok(true) => return None,
        Ok(false) => "the interface went down".to_string(),
        Err(e) => format!("the interface is gone ({e})"),
    };
    Some(format!("receiving on {iface}: {why}"))
}

/// The MTU of port `iface` as `kind` opens it: a backend's own port's,
/// else the kernel interface's.
pub fn port_mtu(kind: BackendKind, wires: &Wires, iface: &str) -> io::Result<usize> {
    match kind.named(wires) {
        Some(n) => n.mtu(iface),
        None => crate::iface::mtu(iface),
    }
}

/// The MAC of port `iface` as `kind` opens it.
pub fn port_mac(kind: BackendKind, wires: &Wires, iface: &str) -> io::Result<[u8; 6]> {
    match kind.named(wires) {
        Some(n) => n.mac(iface),
        None => crate::iface::mac(iface),
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
mod tests {
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

    #[test]
    fn every_name_parses_back_and_an_unknown_one_lists_them() {
        assert_eq!(
            BackendKind::names(),
            "auto, socket, af_packet, af_xdp, loopback, dpdk, socket:udp, socket:raw"
        );
        for &k in BackendKind::ALL {
            assert_eq!(k.name().parse::<BackendKind>(), Ok(k));
            for a in k.aliases() {
                assert_eq!(a.parse::<BackendKind>(), Ok(k));
            }
        }
        assert_eq!("udp".parse(), Ok(BackendKind::Udp));
        assert_eq!("raw".parse(), Ok(BackendKind::Raw));
        let e = "netmap".parse::<BackendKind>().unwrap_err().to_string();
        assert_eq!(
            e,
            "unknown backend 'netmap' (one of: auto, socket, af_packet, af_xdp, loopback, dpdk, socket:udp, socket:raw)"
        );
        assert!(BackendKind::parse("Auto").is_none());
    }

    #[test]
    fn crafted_frames_go_by_raw_socket_except_on_a_backend_s_own_ports() {
        assert_eq!(
            BackendKind::Loopback.crafted_sender(),
            BackendKind::Loopback
        );
        assert_eq!(BackendKind::Dpdk.crafted_sender(), BackendKind::Dpdk);
        for k in [
            BackendKind::Auto,
            BackendKind::Socket,
            BackendKind::Udp,
            BackendKind::AfPacket,
            BackendKind::AfXdp,
        ] {
            assert_eq!(k.crafted_sender(), BackendKind::Raw, "{k}");
        }
    }
}
