//! Receiving through AF_XDP on every RX queue of an interface.

use super::*;
use crate::Frames;

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
}

/// Longest multi-buffer frame put together (longer: dropped, counted as
/// not handed over).
const MAX_SG_FRAME: usize = MAX_CHUNKS * FRAME_SIZE;

impl RxSocket {
    fn open(ifindex: i32, queue: u32, frames: usize) -> io::Result<Self> {
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
        // Multi-buffer where the kernel and driver take it (frames over a
        // chunk: a jumbo MTU), single-buffer otherwise.
        let (zero_copy, sg) = match bind_any(raw, ifindex, queue, true) {
            Ok(z) => (z, true),
            // Held by another socket: no other mode would do.
            Err(e) if super::busy(&e) => return Err(e),
            Err(_) => (bind_any(raw, ifindex, queue, false)?, false),
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
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = (prod.wrapping_sub(cons) as usize).min(max);
        let fprod = self.fq.producer().load(Ordering::Relaxed);
        let (rx_desc, rx_size) = (self.rx.desc.cast::<libc::xdp_desc>(), self.rx.size);
        let (fq_desc, fq_size) = (self.fq.desc.cast::<u64>(), self.fq.size);
        // AF_XDP frames carry no receive time: the batch's handover time.
        let at = if n > 0 { f.handover_time() } else { 0 };
        let mut skipped = 0;
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
            let mut descs = unsafe {
                Descs {
                    desc: rx_desc.add(ri as usize),
                    end: rx_desc.add(ri as usize + run),
                    fill: fq_desc.add(fi as usize),
                    umem: std::ptr::NonNull::new(self.umem.ptr).expect("a mapped UMEM"),
                    umem_len: self.umem.len,
                    at,
                    skipped: 0,
                    partial: &mut self.partial,
                    too_long: &mut self.too_long,
                    in_partial: false,
                }
            };
            // A multi-buffer frame begun before goes on.
            if in_partial && descs.gather(None) {
                f.frame(&descs.partial[..], at);
            }
            f.frames(&mut descs);
            // (Every descriptor read, so every chunk given back, whatever
            // `f` read.)
            while descs.next_frame().is_some() {}
            skipped += descs.skipped;
            in_partial = descs.in_partial;
            done += run as u32;
        }
        if !in_partial {
            // (a frame handed over whole)
            self.partial.clear();
        }
        if n > 0 {
            f.handed_over(n - skipped);
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

/// One run of a receive batch (descriptors that wrap neither ring) read
/// as frames: each descriptor's chunk goes back to the fill ring as it is
/// read, the pieces of a multi-buffer frame are put together and handed
/// over whole at its last.
struct Descs<'a> {
    /// The next RX descriptor, and the run's end.
    desc: *const libc::xdp_desc,
    end: *const libc::xdp_desc,
    /// The fill slot the next descriptor's chunk goes to.
    fill: *mut u64,
    umem: std::ptr::NonNull<u8>,
    umem_len: usize,
    /// The frames' arrival time.
    at: u64,
    /// Descriptors read but not handed over as frames (outside the UMEM,
    /// pieces of a multi-buffer frame but its last, a frame too long).
    skipped: usize,
    /// The socket's multi-buffer frame so far, and whether it is longer
    /// than [`MAX_SG_FRAME`].
    partial: &'a mut Vec<u8>,
    too_long: &'a mut bool,
    /// The run ended in a multi-buffer frame: the next run's (or
    /// batch's) first descriptors are its pieces (else `partial` holds
    /// nothing of use: a frame handed over, or none).
    in_partial: bool,
}

impl crate::Frames for Descs<'_> {
    #[inline(always)]
    fn next_frame(&mut self) -> Option<(&[u8], u64)> {
        loop {
            let (piece, options) = self.next_piece()?;
            if options & libc::XDP_PKT_CONTD == 0 {
                return Some((piece, self.at));
            }
            // A multi-buffer frame's first piece: the rest follow.
            if self.gather(Some((piece, options))) {
                return Some((&self.partial[..], self.at));
            }
        }
    }
}

impl<'a> Descs<'a> {
    /// The next descriptor's bytes and options, its chunk given back
    /// (one outside the UMEM is skipped); `None` at the run's end.
    #[inline(always)]
    fn next_piece(&mut self) -> Option<(&'a [u8], u32)> {
        while self.desc != self.end {
            // SAFETY: `desc` is before `end`: an RX descriptor of the run
            // (see `drain`), and `fill` the fill slot beside it.
            let d = unsafe {
                let d = *self.desc;
                // The chunk goes back to the kernel.
                *self.fill = d.addr & !(FRAME_SIZE as u64 - 1);
                self.desc = self.desc.add(1);
                self.fill = self.fill.add(1);
                d
            };
            let (addr, len) = (d.addr as usize, d.len as usize);
            if addr + len > self.umem_len {
                self.skipped += 1;
                continue;
            }
            // SAFETY: inside the UMEM (checked just above; the kernel only
            // hands back our chunks), which the socket holds as long as
            // the run's borrow of it; the chunk is ours until the fill
            // ring's producer moves, after the whole run is read.
            let piece = unsafe { std::slice::from_raw_parts(self.umem.add(addr).as_ptr(), len) };
            return Some((piece, d.options));
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
        let Some(mut next) = first.or_else(|| self.next_piece()) else {
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
            let Some(piece) = self.next_piece() else {
                self.in_partial = true;
                return false;
            };
            next = piece;
        }
    }
}

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
        let q = Queues::open(iface, frames, "lr_xsk_redir", filter)?;
        Ok(Self {
            zero_copy: q.zero_copy,
            q,
        })
    }

    /// Splits the queues' sockets between `parts` receivers, for one
    /// receive thread each. Fails when there are fewer queues than parts.
    pub fn split(self, parts: usize) -> io::Result<Vec<XskRx>> {
        Ok(self
            .q
            .split(parts, "receive workers")?
            .into_iter()
            .map(|q| XskRx {
                zero_copy: q.zero_copy,
                q,
            })
            .collect())
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
    /// first. Returns the frames handed over.
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
        Ok(got)
    }

    /// XDP_STATISTICS over every queue: (rx_dropped, rx_ring_full,
    /// rx_fill_ring_empty_descs).
    pub fn stats(&self) -> io::Result<(u64, u64, u64)> {
        self.q.stats()
    }
}
