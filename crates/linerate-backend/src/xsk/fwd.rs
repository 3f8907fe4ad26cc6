//! Forwarding in place through AF_XDP: receive, rewrite and send back
//! over one UMEM per queue.

use super::*;

/// One AF_XDP socket that receives and sends on one queue over one UMEM:
/// a received frame is rewritten in place and posted on the TX ring as it
/// lies (no copy); its buffer returns to the fill ring when the kernel
/// completes the send, or at once when the frame is dropped.
#[derive(Debug)]
struct FwdSocket {
    fd: OwnedFd,
    umem: Umem,
    rx: Ring,
    tx: Ring,
    fq: Ring,
    cq: Ring,
    zero_copy: bool,
    /// Buffers of frames not forwarded in a call, for the fill ring: kept
    /// between calls (zeroing a 256-entry array per call cost more than
    /// forwarding a frame).
    dropped: Vec<u64>,
}

/// Puts buffers back on the fill ring (there is always room: the fill
/// ring holds every buffer of the UMEM).
fn refill(fq: &Ring, addrs: impl Iterator<Item = u64>) {
    let prod = fq.producer().load(Ordering::Relaxed);
    let mut k = 0u32;
    for a in addrs {
        let idx = (prod.wrapping_add(k) & (fq.size - 1)) as usize;
        // SAFETY: idx is inside the fill ring.
        unsafe { fq.desc.cast::<u64>().add(idx).write(a) };
        k += 1;
    }
    if k > 0 {
        fq.producer().store(prod.wrapping_add(k), Ordering::Release);
    }
}

impl FwdSocket {
    fn open(ifindex: i32, queue: u32, frames: usize, _multi_buffer: bool) -> io::Result<Self> {
        let n = frames as u32;
        let rings = [
            (libc::XDP_UMEM_FILL_RING, n),
            (libc::XDP_UMEM_COMPLETION_RING, n),
            (libc::XDP_RX_RING, n),
            (libc::XDP_TX_RING, n),
        ];
        let (fd, umem, off) = xsk_socket(frames, &rings)?;
        let raw = fd.as_raw_fd();
        let desc = std::mem::size_of::<libc::xdp_desc>();
        let rx = Ring::map(raw, &off.rx, n, desc, libc::XDP_PGOFF_RX_RING as u64)?;
        let tx = Ring::map(raw, &off.tx, n, desc, libc::XDP_PGOFF_TX_RING as u64)?;
        let fq = Ring::map(raw, &off.fr, n, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
        let cq = Ring::map(raw, &off.cr, n, 8, libc::XDP_UMEM_PGOFF_COMPLETION_RING)?;
        post_every_buffer(&fq, n);
        let zero_copy = bind_any(raw, ifindex, queue, false)?;
        Ok(Self {
            fd,
            umem,
            rx,
            tx,
            fq,
            cq,
            zero_copy,
            dropped: Vec::with_capacity(256),
        })
    }

    fn pending(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Sent frames' buffers go back to the fill ring.
    fn reclaim(&mut self) -> u64 {
        let prod = self.cq.producer().load(Ordering::Acquire);
        let cons = self.cq.consumer().load(Ordering::Relaxed);
        let done = prod.wrapping_sub(cons);
        if done == 0 {
            return 0;
        }
        // Straight from the completion ring to the fill ring, in runs
        // that wrap neither (one, or two or three at a wrap), each copied
        // whole.
        let fprod = self.fq.producer().load(Ordering::Relaxed);
        let (cq, fq) = (&self.cq, &self.fq);
        let (from, to) = (cq.desc.cast::<u64>(), fq.desc.cast::<u64>());
        let mut k = 0u32;
        while k < done {
            let ci = cons.wrapping_add(k) & (cq.size - 1);
            let fi = fprod.wrapping_add(k) & (fq.size - 1);
            let run = (done - k).min(cq.size - ci).min(fq.size - fi);
            // SAFETY: `run` entries from `ci` lie inside the completion
            // ring, between its consumer and producer (the kernel's
            // completions, ours to read); `run` from `fi` inside the fill
            // ring past its producer (ours to write: it holds every buffer
            // of the UMEM, so there is room). Two mappings: no overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    from.add(ci as usize),
                    to.add(fi as usize),
                    run as usize,
                )
            };
            k += run;
        }
        fq.producer()
            .store(fprod.wrapping_add(done), Ordering::Release);
        self.cq.consumer().store(prod, Ordering::Release);
        u64::from(done)
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
    }

    /// Hands up to `max` received frames to `f` to rewrite in place; those
    /// it keeps (true) are posted for sending where the TX ring has room,
    /// the rest are dropped. Returns (received, posted, dropped).
    #[inline]
    fn forward<F: FnMut(&mut [u8]) -> bool + ?Sized>(
        &mut self,
        max: usize,
        f: &mut F,
    ) -> (u64, u64, u64) {
        self.forward_sized(max, false, &mut |frame: &mut [u8], len: usize| {
            f(frame).then_some(len as u32)
        })
    }

    /// [`forward`](Self::forward) where `f` may change a frame's length:
    /// it gets the frame's buffer (to the end of its UMEM chunk with
    /// `whole_chunk`, else the frame alone) and the frame's length, and
    /// returns the length to send (at most the buffer's; None: drop the
    /// frame). `whole_chunk` is a constant at each call: the frame-only
    /// path costs no chunk arithmetic.
    #[inline(always)]
    fn forward_sized<F: FnMut(&mut [u8], usize) -> Option<u32> + ?Sized>(
        &mut self,
        max: usize,
        whole_chunk: bool,
        f: &mut F,
    ) -> (u64, u64, u64) {
        self.reclaim();
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = (prod.wrapping_sub(cons) as usize).min(max).min(256);
        let tprod = self.tx.producer().load(Ordering::Relaxed);
        let room = self.tx.size as usize
            - tprod.wrapping_sub(self.tx.consumer().load(Ordering::Acquire)) as usize;
        let mut posted = 0u32;
        let mut dropped = std::mem::take(&mut self.dropped);
        dropped.clear();
        // The rings and the UMEM in locals: the frame writes below cannot
        // make the compiler read them again every frame.
        let (rx_desc, rx_mask) = (self.rx.desc.cast::<libc::xdp_desc>(), self.rx.size - 1);
        let (tx_desc, tx_mask) = (self.tx.desc.cast::<libc::xdp_desc>(), self.tx.size - 1);
        let (umem, umem_len) = (self.umem.ptr, self.umem.len);
        let room = room.min(u32::MAX as usize) as u32;
        for k in 0..n as u32 {
            let idx = (cons.wrapping_add(k) & rx_mask) as usize;
            // SAFETY: idx is inside the RX ring.
            let d = unsafe { rx_desc.add(idx).read() };
            let out = super::rx::in_umem(d.addr, d.len, umem_len).and_then(|(addr, len)| {
                let space = if whole_chunk {
                    ((addr | (FRAME_SIZE - 1)) + 1).min(umem_len) - addr
                } else {
                    len
                };
                // SAFETY: inside the UMEM (`in_umem`, and the rest of its
                // chunk, within the UMEM's length); the buffer is ours
                // until it goes back on the fill ring or the TX ring.
                let out = f(
                    unsafe { std::slice::from_raw_parts_mut(umem.add(addr), space) },
                    len,
                )?;
                Some(if whole_chunk {
                    out.min(space as u32)
                } else {
                    out
                })
            });
            if let Some(out) = out
                && posted < room
            {
                let t = (tprod.wrapping_add(posted) & tx_mask) as usize;
                // SAFETY: t is inside the TX ring.
                unsafe {
                    tx_desc.add(t).write(libc::xdp_desc {
                        addr: d.addr,
                        len: out,
                        options: 0,
                    })
                };
                posted += 1;
            } else {
                dropped.push((d.addr / FRAME_SIZE as u64) * FRAME_SIZE as u64);
            }
        }
        if n > 0 {
            self.rx
                .consumer()
                .store(cons.wrapping_add(n as u32), Ordering::Release);
        }
        if posted > 0 {
            self.tx
                .producer()
                .store(tprod.wrapping_add(posted), Ordering::Release);
        }
        refill(&self.fq, dropped.iter().copied());
        let ndropped = dropped.len() as u64;
        self.dropped = dropped;
        self.kick();
        (n as u64, u64::from(posted), ndropped)
    }

    /// Frames posted and not yet completed.
    fn in_flight(&self) -> u32 {
        self.tx
            .producer()
            .load(Ordering::Relaxed)
            .wrapping_sub(self.cq.producer().load(Ordering::Acquire))
    }
}

/// AF_XDP forwarding on every RX queue of an interface: one socket per
/// queue that receives and sends back on that queue over one UMEM (frames
/// rewritten in place, never copied), one XSKMAP and the redirect program.
#[derive(Debug)]
pub struct XskFwd {
    q: Queues<FwdSocket>,
    pub zero_copy: bool,
}

// SAFETY: as for XskTx.
unsafe impl Send for XskFwd {}

queue_socket!(FwdSocket);

impl XskFwd {
    /// Opens one forwarding socket per RX queue of `iface` with `frames`
    /// buffers each and attaches the program that redirects the frames
    /// `filter` takes (the rest go on to the kernel).
    pub fn open(iface: &str, frames: usize, filter: crate::xdp::RxFilter) -> io::Result<Self> {
        let q = Queues::open(iface, frames, "lr_xsk_fwd", filter, false, false)?;
        Ok(Self {
            zero_copy: q.zero_copy,
            q,
        })
    }

    /// How many queues (one socket each) this forwarder has.
    pub fn queues(&self) -> usize {
        self.q.socks.len()
    }

    /// Splits the queues' sockets between `parts` forwarders. Fails when
    /// there are fewer queues than parts.
    pub fn split(self, parts: usize) -> io::Result<Vec<XskFwd>> {
        Ok(self
            .q
            .split(parts, "forwarding workers")?
            .into_iter()
            .map(|q| XskFwd {
                zero_copy: q.zero_copy,
                q,
            })
            .collect())
    }

    /// Waits up to `timeout` for frames, then hands each received frame to
    /// `f` to rewrite in place and sends back those it keeps. Returns
    /// (received, sent, dropped): dropped by `f` or for want of TX room.
    #[inline]
    pub fn forward<F: FnMut(&mut [u8]) -> bool + ?Sized>(
        &mut self,
        timeout: Duration,
        f: &mut F,
    ) -> io::Result<(u64, u64, u64)> {
        if !self.q.any_pending() {
            // Sent frames must still complete while no frame arrives.
            for s in &mut self.q.socks {
                s.reclaim();
                s.kick();
            }
            self.q.wait(timeout);
        }
        let mut sum = (0, 0, 0);
        for i in self.q.round() {
            let (r, s, d) = self.q.socks[i].forward(256, f);
            sum = (sum.0 + r, sum.1 + s, sum.2 + d);
        }
        Ok(sum)
    }

    /// Without waiting, hands each frame received on every queue to `f`,
    /// which gets the frame's buffer to the end of its UMEM chunk and the
    /// frame's length and returns the length to send back (0: drop it).
    /// Returns (received, sent, dropped). With nothing received it only
    /// returns completed sends' buffers to the fill ring: no system call,
    /// for a caller that spins.
    #[inline]
    pub fn answer<F: FnMut(&mut [u8], usize) -> usize>(&mut self, f: &mut F) -> (u64, u64, u64) {
        if !self.q.any_pending() {
            for s in &mut self.q.socks {
                s.reclaim();
            }
            return (0, 0, 0);
        }
        let mut sum = (0, 0, 0);
        for i in self.q.round() {
            let (r, s, d) = self.q.socks[i].forward_sized(256, true, &mut |b: &mut [u8], l| {
                let n = f(b, l);
                (n > 0).then_some(n as u32)
            });
            sum = (sum.0 + r, sum.1 + s, sum.2 + d);
        }
        sum
    }

    /// Waits (up to 2 s) until every posted frame was sent.
    pub fn flush(&mut self) -> io::Result<()> {
        let t0 = Instant::now();
        loop {
            let left: u32 = self
                .q
                .socks
                .iter_mut()
                .map(|s| {
                    s.reclaim();
                    s.kick();
                    s.in_flight()
                })
                .sum();
            if left == 0 {
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(2) {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{left} AF_XDP frames never completed"),
                ));
            }
            std::thread::yield_now();
        }
    }

    /// XDP_STATISTICS over every queue: (rx_dropped, rx_ring_full,
    /// rx_fill_ring_empty_descs).
    pub fn stats(&self) -> io::Result<(u64, u64, u64)> {
        self.q.stats()
    }
}
