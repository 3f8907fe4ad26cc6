//! The loopback backend: in-memory ports of this process
//! (`crate::loopback`), with fault injection; every receiver of a port
//! takes from its one wire.

use super::contract::{
    Backend, Capabilities, Never, RxCapabilities, RxHold, RxPort, TxPort, TxStats,
};
use super::error::{BackendError, open_err};
use super::udp::{PayloadSource, TX_BATCH_MAX, Traffic};
use crate::loopback::{LoopRx, LoopTx, Wires};
use crate::xdp::RxFilter;
use crate::{FrameSink, FrameSource};
use std::io;
use std::time::Duration;

/// Frames a loopback receiver takes per call at most.
const RX_BATCH: usize = 256;

/// The loopback backend over the ports of one registry.
#[derive(Debug, Clone)]
pub struct Loopback(Wires);

impl Backend for Loopback {
    type Tx = LoopTx;
    type Rx = LoopRx;
    type Fwd = Never;

    const OWN_PORTS: bool = true;

    fn new(wires: &Wires) -> Self {
        Loopback(wires.clone())
    }

    fn open_tx(
        &self,
        iface: &str,
        max_frame: usize,
        _: u32,
        _: &Traffic,
    ) -> Result<(LoopTx, Option<String>), BackendError> {
        Ok((
            LoopTx::open(&self.0, iface, max_frame, TX_BATCH_MAX).map_err(open_err(iface))?,
            None,
        ))
    }

    fn open_rx(
        &self,
        iface: &str,
        _: RxFilter,
        _: RxHold,
    ) -> Result<(LoopRx, Option<String>), BackendError> {
        Ok((LoopRx::open(&self.0, iface).map_err(open_err(iface))?, None))
    }

    fn share_rx(
        &self,
        first: LoopRx,
        iface: &str,
        workers: usize,
    ) -> Result<Vec<LoopRx>, BackendError> {
        let mut out = vec![first];
        for _ in 1..workers {
            out.push(LoopRx::open(&self.0, iface).map_err(open_err(iface))?);
        }
        Ok(out)
    }

    fn mtu(&self, iface: &str) -> io::Result<usize> {
        self.0.open(iface).map(|w| w.mtu())
    }

    fn mac(&self, iface: &str) -> io::Result<[u8; 6]> {
        self.0.open(iface).map(|w| w.mac())
    }

    fn link_up(&self, iface: &str) -> io::Result<bool> {
        self.0.open(iface).map(|w| w.is_up())
    }
}

impl TxPort for LoopTx {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn batch(&self) -> usize {
        LoopTx::slots(self)
    }

    fn capabilities(&self, mut c: Capabilities) -> Capabilities {
        c.max_frame = LoopTx::slot_len(self);
        c
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        super::contract::fits(frames, LoopTx::slot_len(self))?;
        LoopTx::send(self, frames)
    }

    #[inline]
    fn send_with<F: FrameSource + PayloadSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        LoopTx::send_with(self, n, fill)
    }

    fn slot_len(&self) -> usize {
        LoopTx::slot_len(self)
    }

    fn slots(&self) -> usize {
        LoopTx::slots(self)
    }

    fn stats(&self) -> Option<TxStats> {
        let c = self.wire().counts();
        Some(TxStats::Loop {
            loopback_port: self.wire().name().to_string(),
            wire_offered: c.offered,
            wire_dropped: c.dropped,
            wire_duplicated: c.duplicated,
            wire_reordered: c.reordered,
        })
    }
}

impl RxPort for LoopRx {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn capabilities(&self) -> RxCapabilities {
        RxCapabilities {
            batch: RX_BATCH,
            max_frame: self.wire().mtu() + 18,
            queues: None,
            zero_copy: false,
            kernel_receive_stamps: false,
        }
    }

    #[inline]
    fn recv_within<F: FrameSink>(&mut self, wait: Duration, f: &mut F) -> io::Result<usize> {
        Ok(self.recv(RX_BATCH, wait, f))
    }

    /// The wire's own drops are faults injected, not the receiver's.
    fn drops(&mut self) -> u64 {
        0
    }
}
