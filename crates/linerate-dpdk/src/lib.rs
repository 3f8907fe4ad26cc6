//! linerate's DPDK layer: DPDK 22.11 (Debian's libdpdk-dev) through a small
//! C shim (`csrc/shim.c`, compiled by `build.rs`), since DPDK's burst and
//! mbuf functions are static inline in its headers. Everything here is
//! behind the `ffi` feature; without it the crate is empty and the build
//! needs neither a C compiler nor DPDK.
//!
//! One EAL per process, set up on first use with the arguments given to
//! [`set_eal_args`] (`linerate … --eal "…"`). A port (an ethdev: a vdev
//! such as `net_af_packet0` or `net_null0`, a PCI address, or a port id)
//! is configured and started once, with one RX and one TX queue per
//! worker it may have ([`QUEUES_MAX`] at most), and stays started for the
//! process: [`TxQueue`] and [`RxQueue`] take one of its queues while they
//! live. linerate's workers are threads of its own, each registered as an
//! EAL lcore on its first burst (mempools have per-lcore caches; see
//! [`thread_lcore`]), and every queue is used by one thread at a time.

#[cfg(feature = "ffi")]
mod ffi;
#[cfg(feature = "ffi")]
pub use ffi::*;
