//! The af_xdp backend: AF_XDP sockets (`crate::xsk`), one per TX queue for
//! a sender, one per RX queue with the redirect program for a receiver;
//! forwarding in place on one interface over one UMEM.

use super::contract::{
    Backend, Capabilities, FwdPort, Opened, RxCapabilities, RxHold, TxPort, TxStats,
};
use super::error::{BackendError, open_err};
use super::udp::{PayloadSource, TX_BATCH_MAX, Traffic};
use crate::xdp::RxFilter;
use crate::xsk::{XskFwd, XskRx, XskTx};
use crate::{FrameSink, FrameSource};
use std::io;
use std::time::Duration;

/// Frames a receiver takes per queue and call at most.
const RX_BATCH: usize = 1024;

#[derive(Debug, Clone, Copy)]
pub struct AfXdp;

impl AfXdp {
    /// A sender of frames up to `max_frame` bytes: frames over one
    /// 2048-byte chunk span several (multi-buffer), with fewer buffers so
    /// the UMEM stays within 64 MiB.
    pub(super) fn open_xsk(iface: &str, max_frame: usize, queue: u32) -> io::Result<XskTx> {
        let built = max_frame.saturating_sub(4);
        let frames = ((64 << 20) / built.max(2048).next_power_of_two()).min(4096);
        XskTx::open(iface, queue, frames, built)
    }
}

impl Backend for AfXdp {
    type Tx = XskTx;
    type Rx = XskRx;
    type Fwd = XskFwd;

    fn new(_: &crate::loopback::Wires) -> Self {
        AfXdp
    }

    fn open_tx(
        &self,
        iface: &str,
        max_frame: usize,
        queue: u32,
        _: &Traffic,
    ) -> Result<(XskTx, Option<String>), BackendError> {
        Ok((
            Self::open_xsk(iface, max_frame, queue).map_err(open_err(iface))?,
            None,
        ))
    }

    fn open_rx(
        &self,
        iface: &str,
        filter: RxFilter,
        _: RxHold,
    ) -> Result<(XskRx, Option<String>), BackendError> {
        Ok((
            XskRx::open(iface, 4096, filter).map_err(open_err(iface))?,
            None,
        ))
    }

    /// The RX queues split between the workers (at least one each).
    fn share_rx(
        &self,
        first: XskRx,
        iface: &str,
        workers: usize,
    ) -> Result<Vec<XskRx>, BackendError> {
        first.split(workers).map_err(open_err(iface))
    }

    /// On one interface: one socket per queue receives and sends back in
    /// place over one UMEM.
    fn open_fwd(
        &self,
        rx_iface: &str,
        tx_iface: &str,
        workers: usize,
        filter: RxFilter,
    ) -> Option<Opened<XskFwd>> {
        if rx_iface != tx_iface {
            return None;
        }
        let opened = XskFwd::open(rx_iface, 4096, filter).and_then(|x| {
            if workers > 1 {
                x.split(workers)
            } else {
                Ok(vec![x])
            }
        });
        Some(match opened {
            Ok(parts) => {
                let note = format!(
                    "af_xdp on {rx_iface}: one socket per queue receives and sends back in place over one UMEM ({} mode)",
                    if parts[0].zero_copy {
                        "zero-copy"
                    } else {
                        "copy"
                    }
                );
                Ok((parts, vec![note]))
            }
            Err(source) => Err(BackendError::Open {
                iface: rx_iface.to_string(),
                source,
            }),
        })
    }
}

impl TxPort for XskTx {
    fn name(&self) -> &'static str {
        "af_xdp"
    }

    fn batch(&self) -> usize {
        self.capacity().min(TX_BATCH_MAX)
    }

    fn capabilities(&self, mut c: Capabilities) -> Capabilities {
        c.max_frame = self.max_frame();
        c.zero_copy = self.zero_copy;
        c.per_queue = true;
        c.qdisc_bypass = true;
        c
    }

    fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        super::contract::fits(frames, self.slot_len())?;
        XskTx::send_with(self, frames.len(), &mut crate::CopyFrames::new(frames)).map(|(n, _)| n)
    }

    #[inline]
    fn send_with<F: FrameSource + PayloadSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        XskTx::send_with(self, n, fill)
    }

    fn slot_len(&self) -> usize {
        self.max_frame()
    }

    fn slots(&self) -> usize {
        self.capacity()
    }

    fn stats(&self) -> Option<TxStats> {
        Some(TxStats::Xdp {
            xsk_tx_completed: self.completed,
            xsk_tx_invalid_descs: XskTx::stats(self).map_or(0, |(invalid, _)| invalid),
            zero_copy: self.zero_copy,
            xsk_tx_budget: self.tx_budget,
        })
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush()
    }
}

impl super::contract::RxPort for XskRx {
    fn name(&self) -> &'static str {
        "af_xdp"
    }

    fn holds_queue(&self) -> bool {
        true
    }

    fn capabilities(&self) -> RxCapabilities {
        RxCapabilities {
            batch: RX_BATCH,
            max_frame: self.max_frame(),
            queues: Some(self.queues()),
            zero_copy: self.zero_copy,
            // The redirect program's stamp in each frame's metadata
            // (frames of a driver without metadata: the handover time,
            // counted as such).
            kernel_receive_stamps: true,
        }
    }

    #[inline]
    fn recv_within<F: FrameSink>(&mut self, wait: Duration, f: &mut F) -> io::Result<usize> {
        self.recv(RX_BATCH, wait, f)
    }

    fn drops(&mut self) -> u64 {
        self.stats().map_or(0, |(d, full, _)| d + full)
    }
}

impl FwdPort for XskFwd {
    fn name(&self) -> &'static str {
        "af_xdp"
    }

    #[inline]
    fn forward<F: FnMut(&mut [u8]) -> bool>(
        &mut self,
        wait: Duration,
        rewrite: &mut F,
    ) -> io::Result<(u64, u64, u64)> {
        XskFwd::forward(self, wait, rewrite)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush()
    }

    fn drops(&mut self) -> u64 {
        self.stats().map_or(0, |(d, full, _)| d + full)
    }
}
