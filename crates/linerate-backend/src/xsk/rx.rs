//! Receiving through AF_XDP on every RX queue of an interface.

use super::*;

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

    fn pending(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Hands up to `max` received frames to `f` and gives their buffers
    /// back. Returns the frames handed over (a descriptor outside the UMEM
    /// is taken off the ring but not handed over).
    #[inline]
    fn drain<F: crate::FrameSink + ?Sized>(&mut self, max: usize, f: &mut F) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = (prod.wrapping_sub(cons) as usize).min(max);
        let fprod = self.fq.producer().load(Ordering::Relaxed);
        // The rings' and UMEM's fields in locals: `f` runs between their
        // uses, and they were read again through `self` for every frame.
        let (rx_desc, rx_size) = (self.rx.desc.cast::<libc::xdp_desc>(), self.rx.size);
        let (fq_desc, fq_size) = (self.fq.desc.cast::<u64>(), self.fq.size);
        let (umem, umem_len) = (self.umem.ptr, self.umem.len);
        // AF_XDP frames carry no receive time: the batch's handover time.
        let at = if n > 0 { f.handover_time() } else { 0 };
        let mut skipped = 0;
        // The batch in runs that wrap neither ring (one run, or two or
        // three at a wrap): each run walks both rings by pointer.
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
            let (descs, fills) = unsafe {
                (
                    std::slice::from_raw_parts(rx_desc.add(ri as usize), run),
                    std::slice::from_raw_parts_mut(fq_desc.add(fi as usize), run),
                )
            };
            for (d, fill) in descs.iter().zip(fills) {
                let (addr, len) = (d.addr as usize, d.len as usize);
                if addr + len > umem_len {
                    skipped += 1;
                } else {
                    // SAFETY: inside the UMEM (checked just above; the
                    // kernel only hands back our chunks).
                    let piece = unsafe { std::slice::from_raw_parts(umem.add(addr), len) };
                    if d.options & libc::XDP_PKT_CONTD == 0 && self.partial.is_empty() {
                        f.frame(piece, at);
                    } else {
                        // A piece of a multi-buffer frame: handed over
                        // whole at its last piece (each piece is a
                        // descriptor; the frame counts once).
                        skipped += 1;
                        if self.partial.len() + len <= MAX_SG_FRAME {
                            self.partial.extend_from_slice(piece);
                        } else {
                            self.too_long = true;
                        }
                        if d.options & libc::XDP_PKT_CONTD == 0 {
                            if !self.too_long {
                                f.frame(&self.partial, at);
                                skipped -= 1;
                            }
                            self.partial.clear();
                            self.too_long = false;
                        }
                    }
                }
                // The chunk goes back to the kernel.
                *fill = d.addr & !(FRAME_SIZE as u64 - 1);
            }
            done += run as u32;
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
    pub fn recv<F: crate::FrameSink + ?Sized>(
        &mut self,
        max: usize,
        timeout: std::time::Duration,
        f: &mut F,
    ) -> io::Result<usize> {
        if !self.q.any_pending() {
            self.q.wait(timeout);
        }
        let mut got = 0;
        for i in self.q.round() {
            got += self.q.socks[i].drain(max - got, f);
            if got == max {
                break;
            }
        }
        Ok(got)
    }

    /// XDP_STATISTICS over every queue: (rx_dropped, rx_ring_full,
    /// rx_fill_ring_empty_descs).
    pub fn stats(&self) -> io::Result<(u64, u64, u64)> {
        self.q.stats()
    }
}
