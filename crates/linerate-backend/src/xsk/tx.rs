//! Sending through AF_XDP: the TX and completion rings over a UMEM.

use super::*;

/// An AF_XDP socket used for sending, bound to one queue of an interface.
#[derive(Debug)]
pub struct XskTx {
    fd: OwnedFd,
    umem: Umem,
    frames: usize,
    tx: Ring,
    cq: Ring,
    _fq: Ring,
    /// Frames handed to the TX ring and not yet completed.
    outstanding: usize,
    next_frame: usize,
    /// Frames the kernel reported sent (completion ring).
    pub completed: u64,
    pub zero_copy: bool,
    /// Descriptors the kernel sends per wake-up in copy mode: 32 unless
    /// XDP_MAX_TX_SKB_BUDGET (Linux 6.17+) raised it.
    pub tx_budget: u32,
    /// UMEM chunks per frame buffer: 1, or a power of two when frames are
    /// longer than a chunk (each then goes as several descriptors, all but
    /// the last marked XDP_PKT_CONTD: AF_XDP multi-buffer).
    chunks: usize,
    /// Multi-buffer: the descriptors each buffer's frame took (the
    /// completion ring gives one entry per descriptor; a frame is done at
    /// its last).
    descs_of: Vec<u8>,
}

// SAFETY: the mappings are owned by this value and used only through &mut self.
unsafe impl Send for XskTx {}

impl XskTx {
    /// Opens an AF_XDP socket on `iface` queue `queue` with `frames`
    /// buffers of at least `max_frame` bytes each (over one 2048-byte
    /// chunk: multi-buffer, or an error saying the kernel cannot).
    pub fn open(iface: &str, queue: u32, frames: usize, max_frame: usize) -> io::Result<Self> {
        let ifindex = crate::iface::index(iface)?;
        let chunks = chunks_for(max_frame)?;
        let frames = frames.next_power_of_two().max(64);
        // One descriptor per chunk in the rings.
        let n = (frames * chunks) as u32;
        let rings = [
            (libc::XDP_UMEM_FILL_RING, 64),
            (libc::XDP_UMEM_COMPLETION_RING, n),
            (libc::XDP_TX_RING, n),
        ];
        let (fd, umem, off) = xsk_socket(frames * chunks, &rings)?;
        let raw = fd.as_raw_fd();
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let tx = Ring::map(raw, &off.tx, n, desc, libc::XDP_PGOFF_TX_RING as u64)?;
        let cq = Ring::map(raw, &off.cr, n, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let fq = Ring::map(raw, &off.fr, 64, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let zero_copy = bind_any(raw, ifindex, queue, chunks > 1)?;

        // In copy mode each wake-up sends at most the budget; one wake-up
        // per ring's worth halves the syscalls per packet where the kernel
        // lets us (older kernels refuse the option: keep their 32).
        let tx_budget = if !zero_copy && sockopt(raw, XDP_MAX_TX_SKB_BUDGET, &n).is_ok() {
            n
        } else {
            XSK_DEFAULT_TX_BUDGET
        };
        Ok(Self {
            fd,
            umem,
            frames,
            tx,
            cq,
            _fq: fq,
            outstanding: 0,
            next_frame: 0,
            completed: 0,
            zero_copy,
            tx_budget,
            chunks,
            descs_of: if chunks > 1 {
                vec![0; frames]
            } else {
                Vec::new()
            },
        })
    }

    /// Most frames in flight.
    pub fn capacity(&self) -> usize {
        self.frames
    }

    /// Largest frame a buffer holds (bytes without FCS): one chunk, or
    /// the chunks a multi-buffer frame may span.
    pub fn max_frame(&self) -> usize {
        FRAME_SIZE * self.chunks
    }

    /// Whether frames go as several descriptors (AF_XDP multi-buffer).
    pub fn multi_buffer(&self) -> bool {
        self.chunks > 1
    }

    fn reclaim(&mut self) {
        let prod = self.cq.producer().load(Ordering::Acquire);
        let cons = self.cq.consumer().load(Ordering::Relaxed);
        let done = prod.wrapping_sub(cons);
        if done == 0 {
            return;
        }
        let frames = if self.chunks == 1 {
            done as usize
        } else {
            // A frame is done when its last descriptor is (the kernel
            // completes a frame's descriptors together, in order).
            let slot_len = (FRAME_SIZE * self.chunks) as u64;
            let (cq, mask) = (self.cq.desc.cast::<u64>(), self.cq.size - 1);
            (0..done)
                .filter(|i| {
                    // SAFETY: entries between the consumer and the
                    // producer are the kernel's completions, ours to read.
                    let addr = unsafe { cq.add((cons.wrapping_add(*i) & mask) as usize).read() };
                    let slot = (addr / slot_len) as usize & (self.frames - 1);
                    let chunk = (addr % slot_len) as usize / FRAME_SIZE;
                    chunk + 1 == usize::from(self.descs_of[slot])
                })
                .count()
        };
        self.cq
            .consumer()
            .store(cons.wrapping_add(done), Ordering::Release);
        self.outstanding -= frames;
        self.completed += frames as u64;
    }

    fn kick(&self) {
        if self.tx.needs_wakeup() || !self.zero_copy {
            // SAFETY: a zero-length sendto wakes the kernel to process the TX ring.
            unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
        }
    }

    /// Builds up to `n` frames in place, in free UMEM buffers, and posts
    /// them on the TX ring: `fill.build(buffer, slot)` writes a frame into the
    /// buffer (2048 bytes) and returns its length; `slot` (below
    /// [`capacity`](Self::capacity)) names the buffer, whose bytes stay as
    /// the last frame built there left them. Returns the frames posted and
    /// their bytes (0 frames when everything is in flight).
    #[inline]
    pub fn send_with<F: crate::FrameSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        if self.chunks > 1 {
            return self.send_multi(n, fill);
        }
        self.reclaim();
        let prod = self.tx.producer().load(Ordering::Relaxed);
        let room = (self.frames - self.outstanding).min(
            self.tx.size as usize
                - prod.wrapping_sub(self.tx.consumer().load(Ordering::Acquire)) as usize,
        );
        let n = n.min(room);
        // Both sizes are powers of two; everything the loop needs in locals.
        let first = self.next_frame;
        let mut bufs = DescBufs {
            umem: self.umem.ptr,
            descs: self.tx.desc.cast::<libc::xdp_desc>(),
            mask: self.frames - 1,
            ring_mask: self.tx.size - 1,
            first,
            prod,
            k: 0,
            n,
            addr: 0,
        };
        let bytes = fill.build_each(&mut bufs);
        debug_assert_eq!(bufs.k, n, "every free buffer is handed out");
        self.next_frame = first.wrapping_add(n);
        if n > 0 {
            self.outstanding += n;
            self.tx
                .producer()
                .store(prod.wrapping_add(n as u32), Ordering::Release);
        }
        self.kick();
        Ok((n, bytes))
    }

    /// [`send_with`](Self::send_with) for frames over one chunk: each
    /// buffer spans `chunks` chunks (contiguous in the UMEM), and a frame
    /// goes as one descriptor per chunk it fills, all but the last marked
    /// XDP_PKT_CONTD.
    fn send_multi<F: crate::FrameSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        self.reclaim();
        let prod = self.tx.producer().load(Ordering::Relaxed);
        let ring_free = self.tx.size as usize
            - prod.wrapping_sub(self.tx.consumer().load(Ordering::Acquire)) as usize;
        let n = n
            .min(self.frames - self.outstanding)
            .min(ring_free / self.chunks);
        let slot_len = FRAME_SIZE * self.chunks;
        let (mask, ring_mask) = (self.frames - 1, self.tx.size - 1);
        let (umem, descs) = (self.umem.ptr, self.tx.desc.cast::<libc::xdp_desc>());
        let (mut bytes, mut posted) = (0u64, 0u32);
        let first = self.next_frame;
        for k in 0..n {
            let slot = first.wrapping_add(k) & mask;
            let addr = slot * slot_len;
            // SAFETY: the buffer `addr..addr + slot_len` lies inside the
            // UMEM (frames * chunks chunks) and is not in flight.
            let buf = unsafe { std::slice::from_raw_parts_mut(umem.add(addr), slot_len) };
            let len = fill.build(buf, slot);
            bytes += len as u64;
            // A length past the buffer goes as one descriptor, which the
            // kernel refuses and counts (tx_invalid_descs), as single-buffer.
            let pieces = if len > slot_len {
                1
            } else {
                len.div_ceil(FRAME_SIZE).max(1)
            };
            self.descs_of[slot] = pieces as u8;
            for i in 0..pieces {
                let last = i + 1 == pieces;
                let idx = (prod.wrapping_add(posted) & ring_mask) as usize;
                // SAFETY: inside the TX ring, a slot the kernel does not
                // own (at most `chunks` descriptors a frame, room above).
                unsafe {
                    descs.add(idx).write(libc::xdp_desc {
                        addr: (addr + i * FRAME_SIZE) as u64,
                        len: if last {
                            len - i * FRAME_SIZE
                        } else {
                            FRAME_SIZE
                        } as u32,
                        options: if last { 0 } else { libc::XDP_PKT_CONTD },
                    });
                }
                posted += 1;
            }
        }
        self.next_frame = first.wrapping_add(n);
        if n > 0 {
            self.outstanding += n;
            self.tx
                .producer()
                .store(prod.wrapping_add(posted), Ordering::Release);
        }
        self.kick();
        Ok((n, bytes))
    }

    /// Waits (up to 2 s) until the kernel completed every posted frame.
    pub fn flush(&mut self) -> io::Result<()> {
        let t0 = Instant::now();
        while self.outstanding > 0 {
            self.kick();
            self.reclaim();
            if t0.elapsed() > Duration::from_secs(2) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{} AF_XDP frames never completed", self.outstanding),
                ));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// The socket's XDP_STATISTICS: (tx_invalid_descs, tx_ring_empty_descs).
    pub fn stats(&self) -> io::Result<(u64, u64)> {
        let st = xdp_statistics(self.fd.as_raw_fd())?;
        Ok((st.tx_invalid_descs, st.tx_ring_empty_descs))
    }
}

/// The free UMEM buffers of one batch (see [`XskTx::send_with`]): each
/// frame's descriptor written on the TX ring as it is built.
struct DescBufs {
    umem: *mut u8,
    descs: *mut libc::xdp_desc,
    mask: usize,
    ring_mask: u32,
    first: usize,
    prod: u32,
    /// Buffers handed out so far, of `n`.
    k: usize,
    n: usize,
    /// The UMEM address of the buffer handed out last.
    addr: usize,
}

impl crate::Buffers for DescBufs {
    #[inline(always)]
    fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
        if self.k == self.n {
            return None;
        }
        let slot = self.first.wrapping_add(self.k) & self.mask;
        self.addr = slot * FRAME_SIZE;
        // SAFETY: the buffer `addr..addr + FRAME_SIZE` lies inside the
        // UMEM and is not in flight (outstanding < frames), so nothing
        // else reads or writes it while the slice lives.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.umem.add(self.addr), FRAME_SIZE) };
        Some((buf, slot))
    }

    #[inline(always)]
    fn built(&mut self, len: usize) {
        let idx = (self.prod.wrapping_add(self.k as u32) & self.ring_mask) as usize;
        // SAFETY: `idx` is inside the TX ring, a slot the kernel does not
        // own (the batch fits the ring's room). A length past the buffer
        // makes an invalid descriptor, which the kernel refuses and counts
        // (tx_invalid_descs).
        unsafe {
            self.descs.add(idx).write(libc::xdp_desc {
                addr: self.addr as u64,
                len: len as u32,
                options: 0,
            });
        }
        self.k += 1;
    }
}
