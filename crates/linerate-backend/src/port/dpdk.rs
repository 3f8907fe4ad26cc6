//! The dpdk backend (built with the `dpdk` feature): queues of DPDK ports
//! (`crate::dpdk`), worker `w` on queue `w`, forwarding in place between
//! two ports' queues; without the feature every opening says so.

#[cfg(not(feature = "dpdk"))]
use super::contract::{Backend, Never, RxHold};
use super::error::BackendError;
use super::udp::Traffic;
use crate::xdp::RxFilter;
use std::io;

#[derive(Debug, Clone, Copy)]
pub struct Dpdk;

/// An opening error on `iface` (DPDK's own: no privilege hint).
fn open_err(iface: &str) -> impl FnOnce(io::Error) -> BackendError + '_ {
    move |source| BackendError::Open {
        iface: iface.to_string(),
        source,
    }
}

#[cfg(not(feature = "dpdk"))]
impl Backend for Dpdk {
    type Tx = Never;
    type Rx = Never;
    type Fwd = Never;

    const OWN_PORTS: bool = true;

    fn new(_: &crate::loopback::Wires) -> Self {
        Dpdk
    }

    fn open_tx(
        &self,
        iface: &str,
        _: usize,
        _: u32,
        _: &Traffic,
    ) -> Result<(Never, Option<String>), BackendError> {
        Err(open_err(iface)(not_built()))
    }

    fn open_rx(
        &self,
        iface: &str,
        _: RxFilter,
        _: RxHold,
    ) -> Result<(Never, Option<String>), BackendError> {
        Err(open_err(iface)(not_built()))
    }

    fn share_rx(&self, first: Never, _: &str, _: usize) -> Result<Vec<Never>, BackendError> {
        match first {}
    }

    fn mtu(&self, iface: &str) -> io::Result<usize> {
        crate::dpdk::mtu(iface)
    }

    fn mac(&self, iface: &str) -> io::Result<[u8; 6]> {
        crate::dpdk::mac(iface)
    }

    fn link_up(&self, iface: &str) -> io::Result<bool> {
        crate::dpdk::link_up(iface)
    }
}

#[cfg(not(feature = "dpdk"))]
fn not_built() -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, crate::dpdk::NOT_BUILT)
}

#[cfg(feature = "dpdk")]
pub use built::DpdkFwd;

#[cfg(feature = "dpdk")]
mod built {
    use super::super::contract::{
        Backend, Capabilities, FwdPort, Opened, RxCapabilities, RxHold, RxPort, TxPort,
    };
    use super::super::udp::PayloadSource;
    use super::*;
    use crate::dpdk::{DpdkRx, DpdkTx};
    use crate::{FrameSink, FrameSource};
    use std::time::Duration;

    /// An RX queue forwarding in place out of a TX queue.
    #[derive(Debug)]
    pub struct DpdkFwd {
        rx: DpdkRx,
        tx: DpdkTx,
    }

    fn queue(q: impl TryInto<u16>) -> u16 {
        q.try_into().unwrap_or(u16::MAX)
    }

    impl Backend for Dpdk {
        type Tx = DpdkTx;
        type Rx = DpdkRx;
        type Fwd = DpdkFwd;

        const OWN_PORTS: bool = true;

        fn new(_: &crate::loopback::Wires) -> Self {
            Dpdk
        }

        fn open_tx(
            &self,
            iface: &str,
            _: usize,
            q: u32,
            _: &Traffic,
        ) -> Result<(DpdkTx, Option<String>), BackendError> {
            let (tx, note) = DpdkTx::open(iface, queue(q)).map_err(open_err(iface))?;
            Ok((tx, Some(note)))
        }

        fn open_rx(
            &self,
            iface: &str,
            _: RxFilter,
            _: RxHold,
        ) -> Result<(DpdkRx, Option<String>), BackendError> {
            let (rx, note) = DpdkRx::open(iface, 0).map_err(open_err(iface))?;
            Ok((rx, Some(note)))
        }

        /// Worker w takes RX queue w of the port.
        fn share_rx(
            &self,
            first: DpdkRx,
            iface: &str,
            workers: usize,
        ) -> Result<Vec<DpdkRx>, BackendError> {
            let mut out = vec![first];
            for q in 1..workers {
                out.push(DpdkRx::open(iface, queue(q)).map_err(open_err(iface))?.0);
            }
            Ok(out)
        }

        /// Each frame rewritten in its mbuf and sent from there: worker w
        /// from RX queue w to TX queue w.
        fn open_fwd(
            &self,
            rx_iface: &str,
            tx_iface: &str,
            workers: usize,
            _: RxFilter,
        ) -> Option<Opened<DpdkFwd>> {
            let open = || {
                let mut notes = Vec::new();
                let mut out = Vec::with_capacity(workers);
                for w in 0..workers {
                    let (rx, rn) = DpdkRx::open(rx_iface, queue(w)).map_err(open_err(rx_iface))?;
                    let (tx, tn) = DpdkTx::open(tx_iface, queue(w)).map_err(open_err(tx_iface))?;
                    if w == 0 {
                        notes = vec![rn, tn];
                    }
                    out.push(DpdkFwd { rx, tx });
                }
                Ok((out, notes))
            };
            Some(open())
        }

        fn mtu(&self, iface: &str) -> io::Result<usize> {
            crate::dpdk::mtu(iface)
        }

        fn mac(&self, iface: &str) -> io::Result<[u8; 6]> {
            crate::dpdk::mac(iface)
        }

        fn link_up(&self, iface: &str) -> io::Result<bool> {
            crate::dpdk::link_up(iface)
        }
    }

    impl TxPort for DpdkTx {
        fn name(&self) -> &'static str {
            "dpdk"
        }

        fn batch(&self) -> usize {
            DpdkTx::batch(self)
        }

        fn capabilities(&self, mut c: Capabilities) -> Capabilities {
            c.max_frame = DpdkTx::slot_len(self);
            c.per_queue = true;
            c.qdisc_bypass = true;
            c
        }

        fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
            super::super::contract::fits(frames, DpdkTx::slot_len(self))?;
            DpdkTx::send(self, frames)
        }

        #[inline]
        fn send_with<F: FrameSource + PayloadSource>(
            &mut self,
            n: usize,
            fill: &mut F,
        ) -> io::Result<(usize, u64)> {
            DpdkTx::send_with(self, n, fill)
        }

        fn slot_len(&self) -> usize {
            DpdkTx::slot_len(self)
        }

        fn slots(&self) -> usize {
            DpdkTx::slots(self)
        }
    }

    impl RxPort for DpdkRx {
        fn name(&self) -> &'static str {
            "dpdk"
        }

        fn capabilities(&self) -> RxCapabilities {
            RxCapabilities {
                batch: DpdkRx::batch(self),
                max_frame: DpdkRx::max_frame(self),
                queues: None,
                zero_copy: false,
                kernel_receive_stamps: false,
            }
        }

        #[inline]
        fn recv_within<F: FrameSink>(&mut self, wait: Duration, f: &mut F) -> io::Result<usize> {
            Ok(self.recv(wait, f))
        }

        fn drops(&mut self) -> u64 {
            DpdkRx::drops(self)
        }
    }

    impl FwdPort for DpdkFwd {
        fn name(&self) -> &'static str {
            "dpdk"
        }

        #[inline]
        fn forward<F: FnMut(&mut [u8]) -> bool>(
            &mut self,
            wait: Duration,
            rewrite: &mut F,
        ) -> io::Result<(u64, u64, u64)> {
            // (what `rewrite` dropped and what the queue did not take)
            let (got, sent, _) = self.rx.forward(&mut self.tx, wait, rewrite);
            Ok((got as u64, sent as u64, (got - sent) as u64))
        }

        fn can_forward_untouched(&self) -> bool {
            true
        }

        #[inline]
        fn forward_untouched(
            &mut self,
            wait: Duration,
            frame_max: usize,
        ) -> io::Result<(u64, u64, u64, u64)> {
            let (got, sent, too_long) = self.rx.forward_untouched(&mut self.tx, wait, frame_max);
            Ok((
                got as u64,
                sent as u64,
                (got - sent) as u64,
                too_long as u64,
            ))
        }

        fn drops(&mut self) -> u64 {
            DpdkRx::drops(&self.rx)
        }
    }
}
