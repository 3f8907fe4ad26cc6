//! The af_packet backend: TPACKET_V3 rings (`crate::packet_ring`), a TX
//! ring per sender and an RX ring per receiver, receivers sharing an
//! interface through a PACKET_FANOUT group.

use super::contract::{Backend, Capabilities, Never, RxCapabilities, RxHold, RxPort, TxPort};
use super::error::{BackendError, open_err};
use super::udp::{PayloadSource, TX_BATCH_MAX, Traffic};
use crate::packet_ring::{RxRing, TxRing};
use crate::xdp::RxFilter;
use crate::{FrameSink, FrameSource};
use std::io;
use std::time::Duration;

/// TPACKET_V3 receive ring: blocks of 256 KiB (128 frame slots), 256 of
/// them (64 MiB). The kernel closes a block after 1 ms at the latest (a
/// forwarder's ring, [`RxHold::Prompt`]) or 4 ms (a counter's,
/// [`RxHold::Gather`]), so at low rates each block holds that long: many
/// small blocks let a receive worker that stalls (a busy host) fall at
/// least ~256 ms behind before the kernel drops, where 64 blocks of 1 MiB
/// gave it 64 ms.
const RX_BLOCK: usize = 1 << 18;
const RX_BLOCKS: usize = 256;
/// One receive ring's memory.
pub const RX_RING_BYTES: usize = RX_BLOCK * RX_BLOCKS;

#[derive(Debug, Clone, Copy)]
pub struct AfPacket;

/// An RX ring and the kernel's drop count so far.
#[derive(Debug)]
pub struct RingRx {
    ring: RxRing,
    drops: u64,
    /// As it was opened (the rings that share its frames open so too).
    hold: RxHold,
}

impl AfPacket {
    /// A ring whose blocks the kernel retires after `hold`'s timeout at
    /// the latest.
    pub(super) fn open_ring(iface: &str, hold: RxHold) -> io::Result<RingRx> {
        Ok(RingRx {
            ring: RxRing::open(iface, RX_BLOCK, RX_BLOCKS, hold.block_timeout_ms())?,
            drops: 0,
            hold,
        })
    }

    pub(super) fn open_tx_ring(iface: &str, max_frame: usize) -> io::Result<TxRing> {
        TxRing::open(iface, max_frame, 4096)
    }
}

impl Backend for AfPacket {
    type Tx = TxRing;
    type Rx = RingRx;
    type Fwd = Never;

    fn new(_: &crate::loopback::Wires) -> Self {
        AfPacket
    }

    fn open_tx(
        &self,
        iface: &str,
        max_frame: usize,
        _: u32,
        _: &Traffic,
    ) -> Result<(TxRing, Option<String>), BackendError> {
        Ok((
            Self::open_tx_ring(iface, max_frame).map_err(open_err(iface))?,
            None,
        ))
    }

    fn open_rx(
        &self,
        iface: &str,
        _: RxFilter,
        hold: RxHold,
    ) -> Result<(RingRx, Option<String>), BackendError> {
        Ok((Self::open_ring(iface, hold).map_err(open_err(iface))?, None))
    }

    /// One fanout group per process and interface, keeping each flow on
    /// one ring.
    fn share_rx(
        &self,
        mut first: RingRx,
        iface: &str,
        workers: usize,
    ) -> Result<Vec<RingRx>, BackendError> {
        let group = super::contract::fanout_group();
        first.ring.join_fanout(group).map_err(open_err(iface))?;
        let hold = first.hold;
        let mut out = vec![first];
        for _ in 1..workers {
            let mut r = Self::open_ring(iface, hold).map_err(open_err(iface))?;
            r.ring.join_fanout_late(group).map_err(open_err(iface))?;
            out.push(r);
        }
        Ok(out)
    }
}

impl TxPort for TxRing {
    fn name(&self) -> &'static str {
        "af_packet"
    }

    /// One kick of the ring sends every queued slot.
    fn batch(&self) -> usize {
        self.capacity().min(TX_BATCH_MAX)
    }

    fn capabilities(&self, mut c: Capabilities) -> Capabilities {
        c.max_frame = self.max_frame();
        c.qdisc_bypass = true;
        c
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        super::contract::fits(frames, self.slot_len())?;
        TxRing::send_with(self, frames.len(), &mut crate::CopyFrames::new(frames)).map(|(n, _)| n)
    }

    #[inline]
    fn send_with<F: FrameSource + PayloadSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        TxRing::send_with(self, n, fill)
    }

    fn slot_len(&self) -> usize {
        self.max_frame()
    }

    fn slots(&self) -> usize {
        TxRing::slots(self)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush()
    }
}

impl RxPort for RingRx {
    fn name(&self) -> &'static str {
        "af_packet"
    }

    fn capabilities(&self) -> RxCapabilities {
        RxCapabilities {
            batch: self.ring.frames_per_block(),
            max_frame: self.ring.max_frame(),
            queues: None,
            zero_copy: false,
            kernel_receive_stamps: true,
        }
    }

    /// (The ring waits to the millisecond, at most a second.)
    #[inline]
    fn recv_within<F: FrameSink>(&mut self, wait: Duration, f: &mut F) -> io::Result<usize> {
        self.ring.recv(wait.as_millis().min(1000) as i32, f)
    }

    fn drops(&mut self) -> u64 {
        self.drops += u64::from(self.ring.drops().unwrap_or(0));
        self.drops
    }
}
