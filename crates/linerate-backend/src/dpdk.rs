//! The DPDK port (`--backend dpdk`, built with the `dpdk` feature): a port
//! is a DPDK ethdev of this process's EAL (a vdev such as `net_af_packet0`
//! or `net_null0`, a PCI address, or a port id), the EAL set up once with
//! the arguments of [`set_eal_args`] (`--eal "…"`). Frames are built in
//! the TX queue's own mbufs ([`DpdkTx::send_with`]); received frames go to
//! the [`FrameSink`](crate::FrameSink) with the burst's handover time. Worker
//! `w` takes queue `w` of the port. The FFI is in `linerate-dpdk`; without
//! the feature every entry here says the build has no DPDK.

use std::io;

/// Why `--backend dpdk` cannot run in a build without the feature.
pub const NOT_BUILT: &str = "backend dpdk: this linerate was built without the dpdk feature (cargo build --features dpdk, with libdpdk-dev and pkg-config installed)";

#[cfg(not(feature = "dpdk"))]
fn not_built() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, NOT_BUILT)
}

/// Whether this build has the DPDK backend.
pub const BUILT: bool = cfg!(feature = "dpdk");

/// The EAL's arguments for this process (words of `--eal`), before the
/// first DPDK port is opened.
pub fn set_eal_args(args: &[String]) -> io::Result<()> {
    #[cfg(feature = "dpdk")]
    return linerate_dpdk::set_eal_args(args);
    #[cfg(not(feature = "dpdk"))]
    {
        let _ = args;
        Err(not_built())
    }
}

/// The port's MTU.
pub fn mtu(name: &str) -> io::Result<usize> {
    #[cfg(feature = "dpdk")]
    return linerate_dpdk::mtu(name);
    #[cfg(not(feature = "dpdk"))]
    {
        let _ = name;
        Err(not_built())
    }
}

/// The port's MAC address.
pub fn mac(name: &str) -> io::Result<[u8; 6]> {
    #[cfg(feature = "dpdk")]
    return linerate_dpdk::mac(name);
    #[cfg(not(feature = "dpdk"))]
    {
        let _ = name;
        Err(not_built())
    }
}

/// Whether the port's link is up.
pub fn link_up(name: &str) -> io::Result<bool> {
    #[cfg(feature = "dpdk")]
    return linerate_dpdk::link_up(name);
    #[cfg(not(feature = "dpdk"))]
    {
        let _ = name;
        Err(not_built())
    }
}

/// Names the port's driver and queues, for the note of an opened queue.
#[cfg(feature = "dpdk")]
fn note(iface: &str, port: u16, what: &str, queue: u16) -> String {
    let (driver, queues) = linerate_dpdk::port_info(port).unwrap_or_default();
    format!("dpdk: {iface} (port {port}, {driver}, {queues} queue pair(s)), {what} queue {queue}")
}

/// One TX queue of a DPDK port.
#[cfg(feature = "dpdk")]
#[derive(Debug)]
pub struct DpdkTx {
    q: linerate_dpdk::TxQueue,
}

#[cfg(feature = "dpdk")]
impl DpdkTx {
    /// TX queue `queue` of port `iface`; the note names the port's driver
    /// and queues.
    pub fn open(iface: &str, queue: u16) -> io::Result<(Self, String)> {
        let q = linerate_dpdk::TxQueue::open(iface, queue)?;
        let note = note(iface, q.port(), "TX", queue);
        Ok((Self { q }, note))
    }

    /// Frames per burst.
    pub fn batch(&self) -> usize {
        linerate_dpdk::BURST
    }

    pub fn slot_len(&self) -> usize {
        self.q.slot_len()
    }

    pub fn slots(&self) -> usize {
        self.q.slots()
    }

    /// Builds up to `n` frames in the queue's mbufs and sends them (see
    /// the port layer's `Tx::send_with`): the source builds the burst in
    /// one [`build_each`](crate::FrameSource::build_each), as on every
    /// backend.
    #[inline]
    pub fn send_with<F: crate::FrameSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        self.q.send_burst(n, |burst| {
            burst.take_received(|slot| fill.forget(slot));
            fill.build_each(&mut Mbufs(burst));
        })
    }

    /// Frames built elsewhere, copied into mbufs.
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        self.q.send(frames)
    }
}

/// A burst's mbufs as the frame builders' [`Buffers`](crate::Buffers).
#[cfg(feature = "dpdk")]
struct Mbufs<'a, 'b>(&'a mut linerate_dpdk::TxBurst<'b>);

#[cfg(feature = "dpdk")]
impl crate::Buffers for Mbufs<'_, '_> {
    #[inline(always)]
    fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
        self.0.next_mbuf()
    }

    #[inline(always)]
    fn built(&mut self, len: usize) {
        self.0.built(len);
    }
}

/// One RX queue of a DPDK port.
#[cfg(feature = "dpdk")]
#[derive(Debug)]
pub struct DpdkRx {
    q: linerate_dpdk::RxQueue,
}

#[cfg(feature = "dpdk")]
impl DpdkRx {
    /// RX queue `queue` of port `iface`, and its note.
    pub fn open(iface: &str, queue: u16) -> io::Result<(Self, String)> {
        let q = linerate_dpdk::RxQueue::open(iface, queue)?;
        let note = note(iface, q.port(), "RX", queue);
        Ok((Self { q }, note))
    }

    /// Forwards a burst out of `tx` in place, polling up to `wait` for it:
    /// `rewrite` changes each frame in its buffer (false: dropped, not
    /// sent). Returns (received, sent, not taken by `tx`).
    #[inline]
    pub fn forward(
        &mut self,
        tx: &mut DpdkTx,
        wait: std::time::Duration,
        rewrite: impl FnMut(&mut [u8]) -> bool,
    ) -> (usize, usize, usize) {
        self.q.forward(wait, &mut tx.q, rewrite)
    }

    /// Forwards a burst out of `tx` as it arrived, no frame read but for
    /// its length (polling up to `wait` for it); frames longer than
    /// `frame_max` dropped. Returns (received, sent, too long).
    #[inline]
    pub fn forward_untouched(
        &mut self,
        tx: &mut DpdkTx,
        wait: std::time::Duration,
        frame_max: usize,
    ) -> (usize, usize, usize) {
        self.q.forward_untouched(wait, &mut tx.q, frame_max)
    }

    pub fn batch(&self) -> usize {
        linerate_dpdk::BURST
    }

    pub fn max_frame(&self) -> usize {
        linerate_dpdk::DATA_ROOM
    }

    /// Hands a burst of received frames to `sink` (each with the burst's
    /// handover time), polling up to `wait` for the first.
    #[inline]
    pub fn recv<S: crate::FrameSink + ?Sized>(
        &mut self,
        wait: std::time::Duration,
        sink: &mut S,
    ) -> usize {
        let mut at = 0;
        let n = self.q.recv(wait, |i, frame| {
            if i == 0 {
                at = sink.handover_time();
            }
            sink.frame(frame, at);
        });
        if n > 0 {
            sink.handed_over(n);
        }
        n
    }

    /// Frames the port dropped since this queue was opened.
    pub fn drops(&self) -> u64 {
        self.q.drops()
    }
}
