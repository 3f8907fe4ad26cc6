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
}

// SAFETY: the mappings are owned by this value and used only through &mut self.
unsafe impl Send for XskTx {}

impl XskTx {
    /// Opens an AF_XDP socket on `iface` queue `queue` with `frames` buffers.
    pub fn open(iface: &str, queue: u32, frames: usize) -> io::Result<Self> {
        let ifindex = crate::iface::index(iface)?;
        let frames = frames.next_power_of_two().max(64);
        let n = frames as u32;
        let rings = [
            (libc::XDP_UMEM_FILL_RING, 64),
            (libc::XDP_UMEM_COMPLETION_RING, n),
            (libc::XDP_TX_RING, n),
        ];
        let (fd, umem, off) = xsk_socket(frames, &rings)?;
        let raw = fd.as_raw_fd();
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let tx = Ring::map(raw, &off.tx, n, desc, libc::XDP_PGOFF_TX_RING as u64)?;
        let cq = Ring::map(raw, &off.cr, n, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let fq = Ring::map(raw, &off.fr, 64, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let zero_copy = bind_any(raw, ifindex, queue)?;

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
        })
    }

    /// Most frames in flight.
    pub fn capacity(&self) -> usize {
        self.frames
    }

    /// Largest frame a UMEM buffer holds (bytes without FCS).
    pub fn max_frame(&self) -> usize {
        FRAME_SIZE
    }

    fn reclaim(&mut self) {
        let prod = self.cq.producer().load(Ordering::Acquire);
        let cons = self.cq.consumer().load(Ordering::Relaxed);
        let done = prod.wrapping_sub(cons);
        if done > 0 {
            self.cq
                .consumer()
                .store(cons.wrapping_add(done), Ordering::Release);
            self.outstanding -= done as usize;
            self.completed += u64::from(done);
        }
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
        self.reclaim();
        let prod = self.tx.producer().load(Ordering::Relaxed);
        let room = (self.frames - self.outstanding).min(
            self.tx.size as usize
                - prod.wrapping_sub(self.tx.consumer().load(Ordering::Acquire)) as usize,
        );
        let n = n.min(room);
        let mut bytes = 0u64;
        // Both sizes are powers of two; everything the loop needs in locals.
        let (mask, ring_mask) = (self.frames - 1, self.tx.size - 1);
        let (umem, descs) = (self.umem.ptr, self.tx.desc.cast::<libc::xdp_desc>());
        let first = self.next_frame;
        for k in 0..n {
            let slot = first.wrapping_add(k) & mask;
            let addr = slot * FRAME_SIZE;
            // SAFETY: the buffer `addr..addr + FRAME_SIZE` lies inside the
            // UMEM and is not in flight (outstanding < frames), so nothing
            // else reads or writes it while the slice lives.
            let buf = unsafe { std::slice::from_raw_parts_mut(umem.add(addr), FRAME_SIZE) };
            // A length past the buffer makes an invalid descriptor, which
            // the kernel refuses and counts (tx_invalid_descs).
            let len = fill.build(buf, slot);
            bytes += len as u64;
            let idx = (prod.wrapping_add(k as u32) & ring_mask) as usize;
            // SAFETY: `idx` is inside the TX ring, a slot the kernel does not own (room above).
            unsafe {
                descs.add(idx).write(libc::xdp_desc {
                    addr: addr as u64,
                    len: len as u32,
                    options: 0,
                });
            }
        }
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
