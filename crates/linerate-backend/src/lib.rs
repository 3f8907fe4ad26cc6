//! The platform layer. Everything that needs `unsafe` or a raw syscall lives
//! here, behind safe functions: socket options the std library and socket2
//! do not cover (TCP_INFO, TCP_CONGESTION, SO_MAX_PACING_RATE), batched UDP
//! I/O (sendmmsg/recvmmsg) and clocks.

pub mod clock;
pub mod cpu;
pub mod dpdk;
pub mod epoll;
pub mod ethtool;
pub mod iface;
pub mod loopback;
pub mod neigh;
pub mod packet_ring;
pub mod port;
pub mod raw;
pub mod rtnl;
pub mod sockopt;
pub mod stream;
pub mod term;
pub mod udp_batch;
pub mod udp_rr;
pub mod udp_tx;
pub mod xdp;
pub mod xsk;
pub mod zerocopy;

/// Whether a test that `what` (needs root) must skip: not root, and not
/// under LINERATE_STRICT=1 (where that fails it). The tests of every
/// module here share it.
#[cfg(test)]
pub(crate) fn skip_unless_root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return false;
    }
    assert!(
        std::env::var("LINERATE_STRICT").as_deref() != Ok("1"),
        "LINERATE_STRICT=1: {what} needs root"
    );
    eprintln!("SKIP: {what} needs root");
    true
}

/// What builds frames in a sending backend's own buffers (see
/// `XskTx::send_with`, `TxRing::send_with`): a trait rather than a closure
/// so the builder's method can be inlined into the backend's loop.
pub trait FrameSource {
    /// Writes one frame into `buf` and returns its length; `slot` names
    /// the buffer, which holds what was last built in it.
    fn build(&mut self, buf: &mut [u8], slot: usize) -> usize;

    /// Buffer `slot` no longer holds what was last built in it (a frame
    /// was received into it: a DPDK net_af_xdp pool is its RX queue's
    /// too); the next [`build`](Self::build) there writes it whole.
    fn forget(&mut self, slot: usize);

    /// Builds a frame in each buffer `bufs` hands out, in order, and tells
    /// it each frame's length; returns their bytes. The backend's batch is
    /// one call: a source whose per-frame state fits in registers
    /// overrides it to keep that state in locals for the batch (a field
    /// behind `&mut self` is reloaded and stored around every store into
    /// the backend's memory and every atomic the backend makes).
    #[inline(always)]
    fn build_each<B: Buffers>(&mut self, bufs: &mut B) -> u64
    where
        Self: Sized,
    {
        build_each_by_one(self, bufs)
    }
}

/// [`FrameSource::build_each`] one [`build`](FrameSource::build) at a
/// time (the default, and an override's path for the cases it does not
/// specialise).
#[inline(always)]
pub fn build_each_by_one<S: FrameSource, B: Buffers>(source: &mut S, bufs: &mut B) -> u64 {
    let mut bytes = 0u64;
    while let Some((buf, slot)) = bufs.next_buf() {
        let len = source.build(buf, slot);
        bufs.built(len);
        bytes += len as u64;
    }
    bytes
}

/// A sending backend's free buffers for one batch, handed out in order
/// (see [`FrameSource::build_each`]).
pub trait Buffers {
    /// The next buffer to build a frame in and its slot; `None` when the
    /// batch is full.
    fn next_buf(&mut self) -> Option<(&mut [u8], usize)>;
    /// The frame just built in the last buffer handed out is `len` bytes.
    fn built(&mut self, len: usize);
}

/// What takes received frames from a receiving backend's buffers (see
/// `RxRing::recv`, `XskRx::recv`): a trait so the taker's method can be
/// inlined into the backend's loop (mark it `#[inline(always)]`); any
/// `FnMut(&[u8], u64)` closure is one too (its handover time: a clock
/// read per call).
pub trait FrameSink {
    /// One received frame and its arrival time (CLOCK_MONOTONIC ns): the
    /// kernel's receive time where the backend has one, else the batch's
    /// [`handover_time`](Self::handover_time).
    fn frame(&mut self, frame: &[u8], at: u64);

    /// The arrival time of frames without a kernel receive time (AF_XDP's,
    /// a socket's without a stamp): asked by the backend after its wait,
    /// before it hands the first of them over (once per batch where it
    /// can: the taker may keep one reading per batch).
    fn handover_time(&mut self) -> u64 {
        clock::monotonic_ns()
    }

    /// How many of the frames just handed over carried the handover time
    /// rather than a kernel receive time (told once per batch).
    fn handed_over(&mut self, _frames: usize) {}

    /// Every frame of `batch` (a run of a receive batch, from the AF_XDP
    /// and TPACKET rings), in order: [`frame`](Self::frame) for each,
    /// unless the sink reads them itself (then to the end), keeping its
    /// state in locals from frame to frame.
    #[inline(always)]
    fn frames<B: Frames>(&mut self, batch: &mut B)
    where
        Self: Sized,
    {
        while let Some((frame, at)) = batch.next_frame() {
            self.frame(frame, at);
        }
    }
}

/// A receive batch's frames in order, read one at a time (see
/// [`FrameSink::frames`]): a backend's receive loop turned inside out, so
/// that the sink's loop holds its state across frames.
pub trait Frames {
    /// The next frame and its arrival time (as [`FrameSink::frame`]'s);
    /// `None` at the batch's end, or before a descriptor or slot the
    /// backend does not hand over (so its walk keeps no count of them in
    /// the loop): the backend steps over it and hands the rest to
    /// [`FrameSink::frames`] again.
    fn next_frame(&mut self) -> Option<(&[u8], u64)>;
}

impl<F: FnMut(&[u8], u64)> FrameSink for F {
    #[inline(always)]
    fn frame(&mut self, frame: &[u8], at: u64) {
        self(frame, at)
    }
}

/// Frames already built elsewhere, copied into a sending backend's buffers
/// in turn (the copying send of the ring backends). Each must fit a
/// buffer: the caller checks before sending.
#[derive(Debug)]
pub struct CopyFrames<'a> {
    frames: &'a [&'a [u8]],
    next: usize,
}

impl<'a> CopyFrames<'a> {
    pub fn new(frames: &'a [&'a [u8]]) -> Self {
        Self { frames, next: 0 }
    }
}

impl FrameSource for CopyFrames<'_> {
    fn build(&mut self, buf: &mut [u8], _slot: usize) -> usize {
        let f = self.frames[self.next];
        self.next += 1;
        buf[..f.len()].copy_from_slice(f);
        f.len()
    }

    /// Every frame is copied whole: nothing is kept.
    fn forget(&mut self, _slot: usize) {}
}
