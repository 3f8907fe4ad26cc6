//! Coalesced wake-ups for an AF_XDP receiver at a light load, as
//! TPACKET_V3's block timeout coalesces them: when the last receive left
//! its rings empty, its frames all stamped by the XDP program with
//! their kernel receive time (`xdp::stamp_then`), the next receive naps a
//! short bounded time after its wake-up before it drains, so each wake-up
//! finds many frames and its fixed work is spread over them. The frames'
//! latency comes from their stamps, so the nap does not inflate it.
//!
//! Bounds: the nap is at most [`NAP_MAX_NS`] (the end of a run, a stop or
//! an end marker is seen that much later at most) and never longer than
//! the caller's wait; it is short enough that the RX ring cannot fill at
//! the link's peak frame rate (64 B frames at its speed; for a veth or a
//! link of unknown speed, [`PEAK_PPS_UNKNOWN`]); and the first drop the
//! socket counts (XDP_STATISTICS' rx_dropped or rx_ring_full) ends
//! napping for the receiver's life: it wakes per frame again, as before.

use std::io;
use std::time::Duration;

/// The longest nap: the most a receiver delays what it hands over.
pub(super) const NAP_MAX_NS: u64 = 1_000_000;

/// The peak frame rate assumed into one RX ring where the link's speed
/// says nothing: a veth (which reports a nominal 10 Gb/s, or none) moves
/// frames at its CPUs' pace, some 1-2 Mpps a queue in AF_XDP's copy mode;
/// twice that and more is assumed.
pub(super) const PEAK_PPS_UNKNOWN: u64 = 4_000_000;

/// A 64-byte frame on the wire with preamble, start delimiter and
/// inter-frame gap, in bits.
const MIN_FRAME_WIRE_BITS: u64 = (64 + 20) * 8;

/// Whether and how long a receiver naps before draining (see the module).
#[derive(Debug)]
pub(super) struct Nap {
    /// The longest nap (ns); 0: napping is off.
    max_ns: u64,
    /// The last receive left its rings empty, every frame stamped: the
    /// next one naps.
    light: bool,
    /// This receive napped before its drain.
    napped: bool,
}

impl Nap {
    /// Napping for a receiver on `iface` whose rings hold `ring_frames`
    /// frames each.
    pub(super) fn new(iface: &str, ring_frames: usize) -> Self {
        Self::with_bound(bound_ns(peak_pps(iface), ring_frames))
    }

    /// Napping at most `max_ns` (0: never).
    pub(super) fn with_bound(max_ns: u64) -> Self {
        Self {
            max_ns,
            light: false,
            napped: false,
        }
    }

    /// The longest nap (ns; 0: napping is off).
    pub(super) fn bound(&self) -> u64 {
        self.max_ns
    }

    /// Whether this receive naps (once frames are pending).
    #[inline(always)]
    pub(super) fn wanted(&self) -> bool {
        self.light
    }

    /// Naps before the drain (see [`length_ns`](Self::length_ns)).
    #[inline(never)]
    pub(super) fn take(&mut self, timeout: Duration) {
        let ns = self.length_ns(timeout);
        self.napped = true;
        if ns > 0 {
            sleep_ns(ns);
        }
    }

    /// A nap's length: the bound, or the caller's `timeout` if shorter.
    pub(super) fn length_ns(&self, timeout: Duration) -> u64 {
        let wait_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        self.max_ns.min(wait_ns)
    }

    /// After a drain that left frames in the rings (`more`: it took its
    /// most, descriptors not frames: a multi-buffer frame is several) or
    /// none, `stamped` when every frame of its queues' last batches
    /// carried a kernel receive time: whether the next receive naps. A
    /// drain after a nap that left frames behind may have met a full
    /// ring: `drops` (the sockets' rx_dropped + rx_ring_full) is read
    /// then, and any drop turns napping off.
    #[inline(always)]
    pub(super) fn after(
        &mut self,
        more: bool,
        stamped: bool,
        drops: impl FnOnce() -> io::Result<u64>,
    ) {
        if self.napped && more {
            self.check(drops);
        }
        self.napped = false;
        self.light = self.max_ns != 0 && !more && stamped;
    }

    #[cold]
    #[inline(never)]
    fn check(&mut self, drops: impl FnOnce() -> io::Result<u64>) {
        // (Not readable: off too, the safe side.)
        if drops().map_or(true, |d| d > 0) {
            self.max_ns = 0;
        }
    }
}

/// The frame rate a link of `iface`'s kind peaks at: 64 B frames at its
/// speed, or [`PEAK_PPS_UNKNOWN`] for a veth or a link without one.
fn peak_pps(iface: &str) -> u64 {
    let veth = crate::ethtool::drvinfo(iface).is_ok_and(|d| d.driver == "veth");
    match crate::iface::speed_bps(iface) {
        Some(bps) if !veth => (bps / MIN_FRAME_WIRE_BITS).max(1),
        _ => PEAK_PPS_UNKNOWN,
    }
}

/// The longest nap for rings of `ring_frames` at `peak_pps`: three
/// quarters of a ring at the peak rate (the rest for what was already
/// waiting), at most [`NAP_MAX_NS`].
pub(super) fn bound_ns(peak_pps: u64, ring_frames: usize) -> u64 {
    let frames = ring_frames as u64 * 3 / 4;
    (frames.saturating_mul(1_000_000_000) / peak_pps.max(1)).min(NAP_MAX_NS)
}

/// nanosleep(2) for `ns`: the system call itself, as `poll` in
/// `mod.rs` (libc's wrapper is a cancellation point: two calls around the
/// sleep, some 40 instructions a nap).
fn sleep_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: nanosleep reads the timespec at `ts`, valid for the call,
    // and writes no remainder (null); the kernel clobbers rcx and r11.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") libc::SYS_nanosleep => _,
            in("rdi") &ts as *const libc::timespec,
            in("rsi") 0usize,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack, readonly),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: a valid timespec; no remainder wanted (an interrupted nap
    // is just shorter).
    unsafe {
        libc::nanosleep(&ts, std::ptr::null_mut())
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nap_leaves_room_in_the_ring_at_the_links_peak_rate() {
        // 10 Gb/s: 14,880,952 64 B frames a second; 3,072 of a 4,096
        // ring take 206 us.
        assert_eq!(
            bound_ns(10_000_000_000 / MIN_FRAME_WIRE_BITS, 4096),
            206_438
        );
        // 100 Gb/s: 20.6 us.
        assert_eq!(
            bound_ns(100_000_000_000 / MIN_FRAME_WIRE_BITS, 4096),
            20_643
        );
        // 1 Gb/s would allow 2 ms: held to 1 ms.
        assert_eq!(
            bound_ns(1_000_000_000 / MIN_FRAME_WIRE_BITS, 4096),
            NAP_MAX_NS
        );
        // A veth or an unknown link: 768 us.
        assert_eq!(bound_ns(PEAK_PPS_UNKNOWN, 4096), 768_000);
        assert_eq!(bound_ns(0, 4096), NAP_MAX_NS);
    }

    #[test]
    fn naps_only_after_an_emptied_stamped_ring_and_never_after_a_drop() {
        let none = || -> io::Result<u64> { panic!("read only after a nap that left frames") };
        let mut n = Nap::with_bound(500_000);
        assert!(!n.wanted(), "not before the first batch");
        n.after(false, true, none);
        assert!(n.wanted(), "rings emptied, frames stamped");
        n.after(false, false, none);
        assert!(
            !n.wanted(),
            "frames without a kernel time: their latency would grow"
        );
        n.after(true, true, none);
        assert!(!n.wanted(), "frames left in the rings: more is waiting");
        // A nap, then a drain that empties the rings: napping goes on,
        // nothing read.
        n.after(false, true, none);
        n.take(Duration::ZERO);
        n.after(false, true, none);
        assert!(n.wanted());
        // A nap, then a drain that leaves frames, no drops: on.
        n.take(Duration::ZERO);
        n.after(true, true, || Ok(0));
        assert_eq!(n.bound(), 500_000);
        n.after(false, true, none);
        assert!(n.wanted());
        // A nap, then a drain that leaves frames, a drop: off for good.
        n.take(Duration::ZERO);
        n.after(true, true, || Ok(1));
        assert_eq!(n.bound(), 0);
        n.after(false, true, none);
        assert!(!n.wanted(), "off after a drop");
        // Unreadable statistics: off too.
        let mut n = Nap::with_bound(500_000);
        n.take(Duration::ZERO);
        n.after(true, true, || Err(io::Error::other("gone")));
        assert_eq!(n.bound(), 0);
        // Napping off from the start: never.
        let mut n = Nap::with_bound(0);
        n.after(false, true, none);
        assert!(!n.wanted());
    }

    #[test]
    fn a_nap_is_bounded_by_the_callers_wait() {
        let n = Nap::with_bound(768_000);
        assert_eq!(n.length_ns(Duration::from_millis(50)), 768_000);
        assert_eq!(n.length_ns(Duration::from_micros(100)), 100_000);
        assert_eq!(n.length_ns(Duration::ZERO), 0);
        assert_eq!(n.length_ns(Duration::MAX), 768_000);
    }
}
