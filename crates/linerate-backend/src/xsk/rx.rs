//! Receiving through AF_XDP on every RX queue of an interface.

use super::*;
use crate::Frames;
use crate::xdp::{RX_STAMP_LEN, RX_STAMP_MAGIC};

/// One AF_XDP receive socket: the fill ring keeps every free buffer
/// posted, frames arrive on its RX ring.
#[derive(Debug)]
struct RxSocket {
    fd: OwnedFd,
    umem: Umem,
    rx: Ring,
    fq: Ring,
    _cq: Ring,
    zero_copy: bool,
    /// Bound with XDP_USE_SG: a frame longer than a chunk comes as several
    /// descriptors, all but the last marked XDP_PKT_CONTD.
    sg: bool,
    /// The pieces of a multi-buffer frame so far (empty between frames).
    partial: Vec<u8>,
    /// The frame being put together is longer than [`MAX_SG_FRAME`].
    too_long: bool,
    /// The receive time of the frame being put together (its first
    /// piece's stamp, if it had one).
    partial_at: Option<u64>,
    /// The last batch's frames all carried the kernel's receive time.
    stamped: bool,
}

/// Longest multi-buffer frame put together (longer: dropped, counted as
/// not handed over).
const MAX_SG_FRAME: usize = MAX_CHUNKS * FRAME_SIZE;

impl RxSocket {
    fn open(ifindex: i32, queue: u32, frames: usize, multi_buffer: bool) -> io::Result<Self> {
        let n = frames as u32;
        let rings = [
            (libc::XDP_UMEM_FILL_RING, n),
            (libc::XDP_UMEM_COMPLETION_RING, 64),
            (libc::XDP_RX_RING, n),
        ];
        let (fd, umem, off) = xsk_socket(frames, &rings)?;
        let raw = fd.as_raw_fd();
        let rx = Ring::map(
            raw,
            &off.rx,
            n,
            std::mem::size_of::<libc::xdp_desc>(),
            libc::XDP_PGOFF_RX_RING as u64,
        )?;
        let fq = Ring::map(raw, &off.fr, n, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let cq = Ring::map(raw, &off.cr, 64, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        post_every_buffer(&fq, n);
        // Multi-buffer where the link's frames need it (an MTU over a
        // chunk) and the kernel and driver take it, single-buffer
        // otherwise (a walk with no piece to put together; a longer frame,
        // a veth's GSO aggregate, is the kernel's drop: rx_dropped).
        let (zero_copy, sg) = match multi_buffer.then(|| bind_any(raw, ifindex, queue, true)) {
            Some(Ok(z)) => (z, true),
            // Held by another socket: no other mode would do.
            Some(Err(e)) if super::busy(&e) => return Err(e),
            _ => (bind_any(raw, ifindex, queue, false)?, false),
        };
        Ok(Self {
            fd,
            umem,
            rx,
            fq,
            _cq: cq,
            zero_copy,
            sg,
            partial: Vec::new(),
            too_long: false,
            partial_at: None,
            stamped: false,
        })
    }

    #[inline(always)]
    fn pending(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Hands up to `max` received frames to `f` and gives their buffers
    /// back. Returns the frames handed over (a descriptor outside the UMEM
    /// is taken off the ring but not handed over).
    #[inline]
    fn drain<F: crate::FrameSink>(&mut self, max: usize, f: &mut F) -> usize {
        if self.sg {
            self.drain_as::<true, F>(max, f)
        } else {
            self.drain_as::<false, F>(max, f)
        }
    }

    /// [`drain`](Self::drain) for a socket bound with multi-buffer (`SG`)
    /// or without (every frame one descriptor: a walk with nothing to put
    /// together).
    #[inline(always)]
    fn drain_as<const SG: bool, F: crate::FrameSink>(&mut self, max: usize, f: &mut F) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = (prod.wrapping_sub(cons) as usize).min(max);
        let fprod = self.fq.producer().load(Ordering::Relaxed);
        let (rx_desc, rx_size) = (self.rx.desc.cast::<libc::xdp_desc>(), self.rx.size);
        let (fq_desc, fq_size) = (self.fq.desc.cast::<u64>(), self.fq.size);
        // Frames the program did not stamp (see `Descs::time`) take the
        // batch's handover time.
        let at = if n > 0 { f.handover_time() } else { 0 };
        let (mut skipped, mut unstamped) = (0, 0);
        // A multi-buffer frame begun in the last batch goes on.
        let mut in_partial = !self.partial.is_empty();
        // The batch in runs that wrap neither ring (one run, or two or
        // three at a wrap), each handed to `f` as frames in turn.
        let mut done = 0u32;
        while (done as usize) < n {
            let ri = cons.wrapping_add(done) & (rx_size - 1);
            let fi = fprod.wrapping_add(done) & (fq_size - 1);
            let run = (n - done as usize)
                .min((rx_size - ri) as usize)
                .min((fq_size - fi) as usize);
            // SAFETY: `run` descriptors from `ri` lie inside the RX ring,
            // between its consumer and producer: ours until the consumer
            // moves past them; `run` fill slots from `fi` lie inside the
            // fill ring, past its producer: ours until it moves.
            unsafe {
                give_back(rx_desc.add(ri as usize), fq_desc.add(fi as usize), run);
            }
            // SAFETY: as above.
            let mut descs = unsafe {
                Descs::<SG> {
                    desc: rx_desc.add(ri as usize),
                    end: rx_desc.add(ri as usize + run),
                    umem: std::ptr::NonNull::new(self.umem.ptr).expect("a mapped UMEM"),
                    umem_len: self.umem.len,
                    at,
                    skipped: 0,
                    unstamped: 0,
                    partial: &mut self.partial,
                    too_long: &mut self.too_long,
                    partial_at: &mut self.partial_at,
                    in_partial: false,
                }
            };
            // A multi-buffer frame begun before goes on.
            if SG && in_partial && descs.gather(None) {
                let t = descs.time(*descs.partial_at);
                f.frame(&descs.partial[..], t);
            }
            f.frames(&mut descs);
            // (Every descriptor read, so every stamp's magic cleared and
            // every descriptor counted, whatever `f` read.)
            while descs.next_frame().is_some() {}
            // Without multi-buffer the walk stops at a descriptor outside
            // the UMEM (no counter of its own): not handed over (its
            // chunk given back with the run's), and the run goes on
            // after it.
            while !SG && descs.desc != descs.end {
                descs.skip_one();
                f.frames(&mut descs);
                while descs.next_frame().is_some() {}
            }
            skipped += descs.skipped;
            unstamped += descs.unstamped;
            in_partial = descs.in_partial;
            done += run as u32;
        }
        if !in_partial {
            // (a frame handed over whole)
            self.partial.clear();
        }
        if n > 0 {
            f.handed_over(unstamped);
            self.stamped = unstamped == 0;
            self.rx
                .consumer()
                .store(cons.wrapping_add(n as u32), Ordering::Release);
            self.fq
                .producer()
                .store(fprod.wrapping_add(n as u32), Ordering::Release);
        }
        if self.fq.needs_wakeup() {
            // SAFETY: a zero-length recvfrom wakes the kernel to refill.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    std::ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
        }
        n - skipped
    }
}

/// Every chunk of a run of `n` RX descriptors from `desc` put in the fill
/// slots from `fill`, before the run is read (the kernel sees them only
/// when the fill ring's producer moves, after the whole run is read):
/// one tight loop, not a store and a pointer step in the walk that reads
/// each frame. Each chunk goes back at its address as the descriptor
/// gives it (the frame's, inside the chunk), as a UMEM of aligned chunks
/// takes it (the kernel masks every fill address down to its chunk's
/// start: `xp_aligned_extract_addr`), no mask here; one outside the UMEM
/// too (the walk skips it).
///
/// # Safety
/// `n` descriptors from `desc` are RX descriptors the caller holds, and
/// `n` slots from `fill` fill slots it holds.
#[inline(always)]
unsafe fn give_back(desc: *const libc::xdp_desc, fill: *mut u64, n: usize) {
    let mut i = 0;
    // (x86-64: sixteen a turn, two addresses into one SSE2 register for
    // each 16-byte store: three instructions for two and the turn's three
    // for sixteen, where the compiler's own loop took 12 for four.)
    #[cfg(target_arch = "x86_64")]
    while i + 16 <= n {
        use std::arch::x86_64::{_mm_loadh_pd, _mm_loadl_pd, _mm_setzero_pd, _mm_storeu_pd};
        for k in (0..16).step_by(2) {
            // SAFETY: descriptors i + k and i + k + 1 and their fill slots
            // are below n, the caller's; `addr` is a descriptor's first
            // 8 bytes (an unaligned 8-byte load and 16-byte store).
            unsafe {
                let a = desc.add(i + k).cast::<f64>();
                let b = desc.add(i + k + 1).cast::<f64>();
                let two = _mm_loadh_pd(_mm_loadl_pd(_mm_setzero_pd(), a), b);
                _mm_storeu_pd(fill.add(i + k).cast::<f64>(), two);
            }
        }
        i += 16;
    }
    while i < n {
        // SAFETY: the caller's (see above).
        unsafe { *fill.add(i) = (*desc.add(i)).addr };
        i += 1;
    }
}

/// One run of a receive batch (descriptors that wrap neither ring) read
/// as frames, their chunks already back in the fill ring ([`give_back`]):
/// the pieces of a multi-buffer frame are put together and handed over
/// whole at its last.
struct Descs<'a, const SG: bool> {
    /// The next RX descriptor, and the run's end.
    desc: *const libc::xdp_desc,
    end: *const libc::xdp_desc,
    umem: std::ptr::NonNull<u8>,
    umem_len: usize,
    /// The arrival time of frames without a receive time in their
    /// metadata: the batch's handover time.
    at: u64,
    /// Descriptors read but not handed over as frames (outside the UMEM,
    /// pieces of a multi-buffer frame but its last, a frame too long).
    skipped: usize,
    /// Frames handed over with `at` (no stamp).
    unstamped: usize,
    /// The socket's multi-buffer frame so far, and whether it is longer
    /// than [`MAX_SG_FRAME`].
    partial: &'a mut Vec<u8>,
    too_long: &'a mut bool,
    /// The multi-buffer frame's receive time (its first piece's stamp).
    partial_at: &'a mut Option<u64>,
    /// The run ended in a multi-buffer frame: the next run's (or
    /// batch's) first descriptors are its pieces (else `partial` holds
    /// nothing of use: a frame handed over, or none).
    in_partial: bool,
}

impl<const SG: bool> crate::Frames for Descs<'_, SG> {
    #[inline(always)]
    fn next_frame(&mut self) -> Option<(&[u8], u64)> {
        if !SG {
            return self.next_whole();
        }
        loop {
            let (piece, options, stamp) = self.next_piece()?;
            if options & libc::XDP_PKT_CONTD == 0 {
                return Some((piece, self.time(stamp)));
            }
            // A multi-buffer frame's first piece (whose stamp is the
            // frame's): the rest follow.
            *self.partial_at = stamp;
            if self.gather(Some((piece, options))) {
                let t = self.time(*self.partial_at);
                return Some((&self.partial[..], t));
            }
        }
    }
}

impl<'a, const SG: bool> Descs<'a, SG> {
    /// Without multi-buffer: the next descriptor as a whole frame; `None`
    /// at the run's end and at a descriptor
    /// outside the UMEM (left unread: `desc` stays on it, for the drain's
    /// [`skip_one`](Self::skip_one)), so that the walk keeps no count.
    #[inline(always)]
    fn next_whole(&mut self) -> Option<(&'a [u8], u64)> {
        if self.desc == self.end {
            return None;
        }
        // SAFETY: `desc` is before `end`: an RX descriptor of the run (see
        // `drain`).
        let d = unsafe { *self.desc };
        let (addr, len) = in_umem(d.addr, d.len, self.umem_len)?;
        // SAFETY: as above.
        self.desc = unsafe { self.desc.add(1) };
        // SAFETY: as `next_piece`'s: inside the UMEM, checked above.
        let frame = unsafe { std::slice::from_raw_parts(self.umem.add(addr).as_ptr(), len) };
        // SAFETY: as the frame's: the bytes before it in its chunk.
        let at = unsafe { stamp(self.umem.add(addr).as_ptr(), addr) };
        Some((frame, self.time(at)))
    }

    /// Steps over the descriptor `next_whole` stopped at (outside the
    /// UMEM; its chunk given back with the run's), counted as skipped.
    #[cold]
    fn skip_one(&mut self) {
        // SAFETY: `desc` is before `end` (the caller's test).
        self.desc = unsafe { self.desc.add(1) };
        self.skipped += 1;
    }

    /// A frame's arrival time: its receive time from its metadata
    /// (`stamp`), else the batch's handover time, counted.
    #[inline(always)]
    fn time(&mut self, stamp: Option<u64>) -> u64 {
        match stamp {
            Some(t) => t,
            None => {
                // (A branch, not a select: the stamped way is the run's.)
                std::hint::cold_path();
                self.unstamped += 1;
                self.at
            }
        }
    }

    /// The next descriptor's bytes, options and receive time (see
    /// [`stamp`]; one outside the UMEM is skipped); `None` at the run's
    /// end.
    #[inline(always)]
    fn next_piece(&mut self) -> Option<(&'a [u8], u32, Option<u64>)> {
        while self.desc != self.end {
            // SAFETY: `desc` is before `end`: an RX descriptor of the run
            // (see `drain`).
            let d = unsafe {
                let d = *self.desc;
                self.desc = self.desc.add(1);
                d
            };
            let Some((addr, len)) = in_umem(d.addr, d.len, self.umem_len) else {
                self.skipped += 1;
                continue;
            };
            // SAFETY: inside the UMEM (checked just above; the kernel only
            // hands back our chunks), which the socket holds as long as
            // the run's borrow of it; the chunk is ours until the fill
            // ring's producer moves, after the whole run is read.
            let piece = unsafe { std::slice::from_raw_parts(self.umem.add(addr).as_ptr(), len) };
            // SAFETY: as the piece's: the bytes before it in its chunk.
            let at = unsafe { stamp(self.umem.add(addr).as_ptr(), addr) };
            return Some((piece, d.options, at));
        }
        None
    }

    /// The pieces of a multi-buffer frame put together in `partial`, from
    /// its first (`first`; `None`: the frame goes on from the last run)
    /// to its last: whether it is whole there, to be handed over (not
    /// when too long, nor when the run ends first: then `in_partial`).
    #[inline(always)]
    fn gather(&mut self, first: Option<(&[u8], u32)>) -> bool {
        let begins = first.is_some();
        let piece = || self.next_piece().map(|(p, o, _)| (p, o));
        let Some(mut next) = first.or_else(piece) else {
            self.in_partial = true;
            return false;
        };
        let mut first = begins;
        loop {
            // (The fields apart, not `self`: the walk stays in registers.)
            let (more, whole) = piece_of_frame(self.partial, self.too_long, first, next);
            first = false;
            self.skipped += usize::from(!whole);
            if !more {
                return whole;
            }
            let Some((piece, options, _)) = self.next_piece() else {
                self.in_partial = true;
                return false;
            };
            next = (piece, options);
        }
    }
}

/// The receive time the XDP program wrote in front of the frame at
/// `data` (UMEM offset `addr`): the [`RX_STAMP_LEN`] bytes before it, a
/// time then [`RX_STAMP_MAGIC`]; `None` where there is none (no stamp,
/// or less headroom than that in its chunk). The magic is cleared as it is
/// read: the chunk goes back to the fill ring, and what it holds there
/// must never pass for the next frame's stamp (a program or driver that
/// writes no metadata leaves those bytes as they were). The magic's last
/// four bytes are the ones compared and cleared: one compare with a
/// 32-bit immediate, where the whole word would take its 64-bit constant
/// into a register every frame. What guards against a stale stamp is the
/// clearing, not the width; bytes that no program wrote there pass for a
/// stamp by chance once in 2^32 instead of once in 2^64.
///
/// # Safety
/// `data` is a frame's start in a UMEM chunk of [`FRAME_SIZE`] bytes at
/// offset `addr` from the UMEM's start, and the chunk is the caller's
/// (read, not yet back on the fill ring).
#[inline(always)]
unsafe fn stamp(data: *mut u8, addr: usize) -> Option<u64> {
    if addr & (FRAME_SIZE - 1) < RX_STAMP_LEN {
        return None;
    }
    // SAFETY: RX_STAMP_LEN bytes before `data` lie in its chunk (its
    // offset in the chunk is at least that), the caller's.
    unsafe {
        let magic = data.sub(4).cast::<u32>();
        if magic.read_unaligned() != MAGIC_TAIL {
            return None;
        }
        magic.write_unaligned(0);
        Some(data.sub(RX_STAMP_LEN).cast::<u64>().read_unaligned())
    }
}

/// The last four bytes of [`RX_STAMP_MAGIC`] as they lie in memory (the
/// word is little-endian: its high half).
const MAGIC_TAIL: u32 = (RX_STAMP_MAGIC >> 32) as u32;

/// A descriptor's bytes as (offset, length) in a UMEM of `umem_len`
/// bytes (below 4 GiB: `xsk_socket` refuses a larger one), if they lie
/// inside it. The address's low 32 bits are its offset: in aligned mode
/// (ours) the kernel hands back the chunk addresses we gave it plus the
/// frame's offset in its chunk, all below the UMEM's size, so the high
/// half is zero; were it not, the offset would still be inside the UMEM.
/// Offset and length are both below 2^32, so their sum cannot wrap (a
/// full 64-bit address plus a length could, and pass a bound it broke),
/// and the bound is one compare a frame. (In a `usize` of 64 bits: the
/// sum of two values below 2^32 would wrap a 32-bit one, which the
/// assertion below keeps out of every build.)
#[inline(always)]
pub(super) fn in_umem(addr: u64, len: u32, umem_len: usize) -> Option<(usize, usize)> {
    let (addr, len) = (addr as u32 as usize, len as usize);
    (addr + len <= umem_len).then_some((addr, len))
}

// `in_umem` adds two values below 2^32: the sum needs more than 32 bits.
const _: () = assert!(usize::BITS >= 64, "in_umem needs a 64-bit usize");

/// A piece of a multi-buffer frame (each piece is a descriptor; the frame
/// counts once) added to the frame so far in `partial` (emptied first for
/// a frame's `first` piece): whether more pieces follow, and
/// whether this was the last and the frame is whole in `partial`, to be
/// handed over (not when longer than [`MAX_SG_FRAME`]: `too_long`).
#[cold]
#[inline(never)]
fn piece_of_frame(
    partial: &mut Vec<u8>,
    too_long: &mut bool,
    first: bool,
    (piece, options): (&[u8], u32),
) -> (bool, bool) {
    if first {
        partial.clear();
    }
    if partial.len() + piece.len() <= MAX_SG_FRAME {
        partial.extend_from_slice(piece);
    } else {
        *too_long = true;
    }
    if options & libc::XDP_PKT_CONTD != 0 {
        return (true, false);
    }
    let whole = !*too_long;
    *too_long = false;
    if !whole {
        partial.clear();
    }
    (false, whole)
}

queue_socket!(RxSocket);

/// AF_XDP receiving on every RX queue of an interface: one socket per
/// queue behind one XSKMAP and the redirect program.
#[derive(Debug)]
pub struct XskRx {
    q: Queues<RxSocket>,
    pub zero_copy: bool,
    /// Coalesced wake-ups at a light load (see `nap.rs`).
    nap: super::nap::Nap,
}

// SAFETY: as for XskTx.
unsafe impl Send for XskRx {}

impl XskRx {
    /// Opens one AF_XDP socket for each of `iface`'s RX queues with
    /// `frames` buffers each, and attaches the program that redirects the
    /// frames `filter` takes (the rest go on to the kernel).
    pub fn open(iface: &str, frames: usize, filter: crate::xdp::RxFilter) -> io::Result<Self> {
        // A link whose frames span several chunks (jumbo MTU) gets as many
        // more chunks, so as many frames wait in the rings (at most 64 MiB).
        let per_frame = crate::iface::mtu(iface).map_or(1, |m| (m + 18).div_ceil(FRAME_SIZE));
        let frames = (frames * per_frame).min((64 << 20) / FRAME_SIZE);
        // (Multi-buffer only where a frame takes more than a chunk.)
        let q = Queues::open(iface, frames, "lr_xsk_redir", filter, true, per_frame > 1)?;
        Ok(Self {
            zero_copy: q.zero_copy,
            nap: super::nap::Nap::new(iface, frames.next_power_of_two().max(64)),
            q,
        })
    }

    /// Splits the queues' sockets between `parts` receivers, for one
    /// receive thread each. Fails when there are fewer queues than parts.
    pub fn split(self, parts: usize) -> io::Result<Vec<XskRx>> {
        let bound = self.nap.bound();
        Ok(self
            .q
            .split(parts, "receive workers")?
            .into_iter()
            .map(|q| XskRx {
                zero_copy: q.zero_copy,
                nap: super::nap::Nap::with_bound(bound),
                q,
            })
            .collect())
    }

    /// The longest nap before a drain at a light load (ns; 0: napping
    /// off, or turned off by a drop).
    pub fn nap_bound_ns(&self) -> u64 {
        self.nap.bound()
    }

    /// RX queues read (one socket each).
    pub fn queues(&self) -> usize {
        self.q.socks.len()
    }

    /// Largest frame received whole (bytes without FCS): a chunk, or with
    /// multi-buffer on every queue, the longest put together.
    pub fn max_frame(&self) -> usize {
        if self.q.socks.iter().all(|s| s.sg) {
            MAX_SG_FRAME
        } else {
            FRAME_SIZE
        }
    }

    /// Whether every queue takes multi-buffer frames.
    pub fn multi_buffer(&self) -> bool {
        self.q.socks.iter().all(|s| s.sg)
    }

    /// Hands received frames (up to `max`, from every queue) to `f`, then
    /// gives the buffers back to the kernel. Waits up to `timeout` for the
    /// first; at a light load, when frames carry their kernel receive
    /// time, naps a bounded moment more (within `timeout`) so the wake-up
    /// finds more (`nap.rs`). Returns the frames handed over.
    #[inline]
    pub fn recv<F: crate::FrameSink>(
        &mut self,
        max: usize,
        timeout: std::time::Duration,
        f: &mut F,
    ) -> io::Result<usize> {
        if !self.q.any_pending() {
            self.q.wait(timeout);
        }
        if self.nap.wanted() && self.q.any_pending() {
            self.nap.take(timeout);
        }
        // (Each socket once, from the round's first: no iterator to set
        // up for the one socket a queue of its own has.)
        let mut i = self.q.round_start();
        let mut got = 0;
        for _ in 0..self.q.socks.len() {
            got += self.q.socks[i].drain(max - got, f);
            if got == max {
                break;
            }
            i = self.q.after(i);
        }
        // (Frames left: the drain took its most descriptors; several to a
        // multi-buffer frame.)
        let more = self.q.any_pending();
        let stamped = self.q.socks.iter().all(|s| s.stamped);
        let q = &self.q;
        self.nap
            .after(more, stamped, || q.stats().map(|(d, full, _)| d + full));
        Ok(got)
    }

    /// XDP_STATISTICS over every queue: (rx_dropped, rx_ring_full,
    /// rx_fill_ring_empty_descs).
    pub fn stats(&self) -> io::Result<(u64, u64, u64)> {
        self.q.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two chunks as a UMEM holds them, a frame at `at` in the second.
    fn umem_with_frame(at: usize, meta: Option<(u64, u64)>) -> Vec<u64> {
        let mut words = vec![0u64; 2 * FRAME_SIZE / 8];
        if let Some((time, magic)) = meta {
            let w = (FRAME_SIZE + at - RX_STAMP_LEN) / 8;
            (words[w], words[w + 1]) = (time, magic);
        }
        words
    }

    fn read(words: &mut [u64], at: usize) -> Option<u64> {
        let addr = FRAME_SIZE + at;
        // SAFETY: `addr` lies inside the two chunks, which the test owns.
        unsafe { stamp(words.as_mut_ptr().cast::<u8>().add(addr), addr) }
    }

    /// Every descriptor's address lands in its own fill slot, whatever
    /// the run's length (the eight-a-turn loop, the rest one by one), and
    /// no slot past the run is written.
    #[test]
    fn a_runs_chunks_go_back_in_order() {
        for n in 0..40 {
            let descs: Vec<libc::xdp_desc> = (0..n as u64)
                .map(|i| libc::xdp_desc {
                    addr: 0x1000 * i + 256 + i,
                    len: 64 + i as u32,
                    options: i as u32,
                })
                .collect();
            let mut fill = vec![u64::MAX; n + 3];
            // SAFETY: n descriptors and at least n fill slots, the test's.
            unsafe { give_back(descs.as_ptr(), fill.as_mut_ptr(), n) };
            let want: Vec<u64> = descs.iter().map(|d| d.addr).collect();
            assert_eq!(fill[..n], want[..], "{n}");
            assert!(fill[n..].iter().all(|&f| f == u64::MAX), "{n}");
        }
    }

    /// A descriptor is inside the UMEM only if its whole span is, its
    /// end computed without wrapping: an address near 2^64 plus a length
    /// whose 64-bit sum wraps past zero is never a pointer before the
    /// UMEM (its offset is its low half, and that span is checked).
    #[test]
    fn a_descriptor_is_inside_the_umem_only_without_wrapping() {
        let umem = 2 * FRAME_SIZE;
        assert_eq!(in_umem(0, 64, umem), Some((0, 64)));
        assert_eq!(in_umem((umem - 64) as u64, 64, umem), Some((umem - 64, 64)));
        assert_eq!(in_umem((umem - 63) as u64, 64, umem), None);
        assert_eq!(in_umem(umem as u64, 0, umem), Some((umem, 0)));
        // 64-bit sums that wrap: outside.
        assert_eq!(in_umem(u64::MAX - 10, 64, umem), None);
        assert_eq!(in_umem(u64::MAX, 1, umem), None);
        assert_eq!(in_umem(u64::MAX - 0xffff_fffe, u32::MAX, umem), None);
        // A high half set (never in aligned mode): the low half's span,
        // inside the UMEM.
        assert_eq!(in_umem((1 << 48) | 256, 64, umem), Some((256, 64)));
        assert_eq!(
            in_umem(1 << 32, u32::MAX, u32::MAX as usize),
            Some((0, u32::MAX as usize))
        );
    }

    #[test]
    fn a_frames_stamp_is_read_once_and_only_with_its_magic() {
        // The kernel's copy mode: the frame 256 bytes into its chunk.
        let mut u = umem_with_frame(256, Some((123_456_789, RX_STAMP_MAGIC)));
        assert_eq!(read(&mut u, 256), Some(123_456_789));
        // The magic is cleared as it is read: the chunk back on the fill
        // ring, a frame without metadata in it later is not taken for
        // stamped (the time left behind is no stamp).
        assert_eq!(read(&mut u, 256), None);
        // Another word there (its last four bytes, the ones compared,
        // not the magic's): no stamp, and the word left as it was.
        for other in [RX_STAMP_MAGIC ^ (1 << 32), RX_STAMP_MAGIC ^ (1 << 63), 0] {
            let mut u = umem_with_frame(256, Some((123_456_789, other)));
            assert_eq!(read(&mut u, 256), None, "{other:#x}");
            assert_eq!(u[(FRAME_SIZE + 256 - 8) / 8], other, "left as it was");
        }
        // Less headroom than a stamp in the chunk: nothing read before
        // the chunk (the previous chunk's last bytes hold a magic here).
        let mut u = umem_with_frame(0, None);
        let last = FRAME_SIZE / 8 - 1;
        (u[last - 1], u[last]) = (5, RX_STAMP_MAGIC);
        assert_eq!(read(&mut u, 0), None);
        assert_eq!(read(&mut u, 8), None);
        assert_eq!(u[last], RX_STAMP_MAGIC, "the other chunk untouched");
        // Exactly a stamp's room: read.
        let mut u = umem_with_frame(16, Some((7, RX_STAMP_MAGIC)));
        assert_eq!(read(&mut u, 16), Some(7));
    }
}
