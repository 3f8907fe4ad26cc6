//! AF_XDP transmit: a UMEM of packet buffers shared with the kernel, the
//! TX and completion rings (the fill ring exists because bind requires it),
//! need_wakeup, one socket per queue, copy or zero-copy as the driver allows.
//! Receiving through AF_XDP (fill/RX rings plus the XSKMAP redirect program)
//! builds on the same pieces.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const FRAME_SIZE: usize = 2048;

/// Binds an AF_XDP socket to a queue. A queue a just-closed socket used
/// may stay busy for a moment while the kernel tears it down: retry then.
fn bind_xsk(fd: i32, ifindex: i32, queue: u32, flags: u16) -> io::Result<()> {
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex as u32,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        // SAFETY: valid sockaddr_xdp of the size given.
        let rc = unsafe {
            libc::bind(
                fd,
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EBUSY) || Instant::now() >= deadline {
            return Err(e);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One mmapped ring: producer, consumer, flags and `size` descriptors.
#[derive(Debug)]
struct Ring {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut u8,
    size: u32,
}

impl Ring {
    /// Maps ring `pgoff` of `fd`, laid out as `off` says.
    fn map(
        fd: i32,
        off: &libc::xdp_ring_offset,
        size: u32,
        desc_len: usize,
        pgoff: u64,
    ) -> io::Result<Self> {
        let map_len = off.desc as usize + size as usize * desc_len;
        // SAFETY: mapping a ring the kernel created for this socket.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = map.cast::<u8>();
        // SAFETY: the offsets come from XDP_MMAP_OFFSETS and lie inside the mapping.
        unsafe {
            Ok(Self {
                map: base,
                map_len,
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(off.flags as usize).cast(),
                desc: base.add(off.desc as usize),
                size,
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping; the kernel updates it concurrently.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    fn needs_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { (*self.flags).load(Ordering::Acquire) & libc::XDP_RING_NEED_WAKEUP != 0 }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping what `map` mapped, once.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

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

/// setsockopt(SOL_XDP) name of the copy-mode per-syscall TX budget (Linux 6.17+).
const XDP_MAX_TX_SKB_BUDGET: i32 = 9;
/// The kernel's copy-mode TX batch when the budget cannot be set.
const XSK_DEFAULT_TX_BUDGET: u32 = 32;

/// A SOL_XDP option read into a plain-old-data struct (`xdp_statistics`,
/// `xdp_mmap_offsets`: all-zero is a valid value of either).
fn getsockopt_xdp<T: Copy>(fd: i32, name: i32) -> io::Result<T> {
    // SAFETY: T is one of the kernel's plain-old-data option structs.
    let mut v: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `v` is a writable buffer of `len` bytes.
    let rc =
        unsafe { libc::getsockopt(fd, libc::SOL_XDP, name, (&mut v as *mut T).cast(), &mut len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// The socket's XDP_STATISTICS counters.
fn xdp_statistics(fd: i32) -> io::Result<libc::xdp_statistics> {
    getsockopt_xdp(fd, libc::XDP_STATISTICS)
}

fn sockopt<T>(fd: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a valid value of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Packet buffers shared with the kernel; unmapped on drop (after the
/// socket that registered them, which is declared before it).
#[derive(Debug)]
struct Umem {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: unmapping the region mapped in `xsk_socket`, once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// An AF_XDP socket with a registered UMEM of `frames` buffers, its rings
/// sized as asked, and the rings' mmap offsets.
fn xsk_socket(
    frames: usize,
    rings: &[(i32, u32)],
) -> io::Result<(OwnedFd, Umem, libc::xdp_mmap_offsets)> {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = fd.as_raw_fd();
    let len = frames * FRAME_SIZE;
    // SAFETY: anonymous private mapping for packet buffers.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let umem = Umem {
        ptr: ptr.cast(),
        len,
    };
    let reg = libc::xdp_umem_reg {
        addr: umem.ptr as u64,
        len: len as u64,
        chunk_size: FRAME_SIZE as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    sockopt(raw, libc::XDP_UMEM_REG, &reg)?;
    for &(ring, size) in rings {
        sockopt(raw, ring, &size)?;
    }
    let off: libc::xdp_mmap_offsets = getsockopt_xdp(raw, libc::XDP_MMAP_OFFSETS)?;
    Ok((fd, umem, off))
}

/// Binds zero-copy if the driver can, copy mode otherwise (veth: copy only).
fn bind_any(raw: i32, ifindex: i32, queue: u32) -> io::Result<bool> {
    if bind_xsk(
        raw,
        ifindex,
        queue,
        libc::XDP_ZEROCOPY | libc::XDP_USE_NEED_WAKEUP,
    )
    .is_ok()
    {
        return Ok(true);
    }
    bind_xsk(
        raw,
        ifindex,
        queue,
        libc::XDP_COPY | libc::XDP_USE_NEED_WAKEUP,
    )
    .map(|()| false)
}

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

    /// Copies frames into free buffers and posts them on the TX ring.
    /// Returns how many were posted (0 when everything is in flight).
    pub fn send(&mut self, frames: &[&[u8]]) -> io::Result<usize> {
        self.reclaim();
        let prod = self.tx.producer().load(Ordering::Relaxed);
        let room = (self.frames - self.outstanding).min(
            self.tx.size as usize
                - prod.wrapping_sub(self.tx.consumer().load(Ordering::Acquire)) as usize,
        );
        let n = frames.len().min(room);
        for (k, f) in frames[..n].iter().enumerate() {
            if f.len() > FRAME_SIZE {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "frame larger than an AF_XDP buffer (2048 bytes)",
                ));
            }
            let addr = (self.next_frame % self.frames) * FRAME_SIZE;
            let idx = (prod.wrapping_add(k as u32) & (self.tx.size - 1)) as usize;
            // SAFETY: `addr + len` lies inside the UMEM (frames are FRAME_SIZE
            // apart, len checked above); the buffer is not in flight
            // (outstanding < frames); `idx` is inside the TX ring.
            unsafe {
                std::ptr::copy_nonoverlapping(f.as_ptr(), self.umem.ptr.add(addr), f.len());
                let d = self.tx.desc.cast::<libc::xdp_desc>().add(idx);
                d.write(libc::xdp_desc {
                    addr: addr as u64,
                    len: f.len() as u32,
                    options: 0,
                });
            }
            self.next_frame += 1;
        }
        if n > 0 {
            self.outstanding += n;
            self.tx
                .producer()
                .store(prod.wrapping_add(n as u32), Ordering::Release);
        }
        self.kick();
        Ok(n)
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

/// Puts every one of the UMEM's `n` buffers on a new socket's fill ring.
fn post_every_buffer(fq: &Ring, n: u32) {
    for i in 0..n {
        // SAFETY: index i < n lies inside the fill ring (of n entries).
        unsafe {
            fq.desc
                .cast::<u64>()
                .add(i as usize)
                .write(u64::from(i) * FRAME_SIZE as u64)
        };
    }
    fq.producer().store(n, Ordering::Release);
}

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
}

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
        let zero_copy = bind_any(raw, ifindex, queue)?;
        Ok(Self {
            fd,
            umem,
            rx,
            fq,
            _cq: cq,
            zero_copy,
        })
    }

    fn pending(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Hands up to `max` received frames to `f` and gives their buffers back.
    fn drain(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = (prod.wrapping_sub(cons) as usize).min(max);
        let fprod = self.fq.producer().load(Ordering::Relaxed);
        for k in 0..n {
            let idx = (cons.wrapping_add(k as u32) & (self.rx.size - 1)) as usize;
            // SAFETY: idx is inside the RX ring; the descriptor's buffer lies
            // inside the UMEM (the kernel only hands back our chunks).
            let d = unsafe { self.rx.desc.cast::<libc::xdp_desc>().add(idx).read() };
            let (addr, len) = (d.addr as usize, d.len as usize);
            if addr + len <= self.umem.len {
                // SAFETY: bounds checked just above.
                f(unsafe { std::slice::from_raw_parts(self.umem.ptr.add(addr), len) });
            }
            let fidx = (fprod.wrapping_add(k as u32) & (self.fq.size - 1)) as usize;
            // SAFETY: fidx is inside the fill ring; the chunk start goes back.
            unsafe {
                self.fq
                    .desc
                    .cast::<u64>()
                    .add(fidx)
                    .write((d.addr / FRAME_SIZE as u64) * FRAME_SIZE as u64)
            };
        }
        if n > 0 {
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
        n
    }
}

/// An AF_XDP socket bound to one queue, one of a [`Queues`] set.
trait QueueSocket: Sized {
    fn open(ifindex: i32, queue: u32, frames: usize) -> io::Result<Self>;
    fn fd(&self) -> i32;
    fn zero_copy(&self) -> bool;
    fn pending(&self) -> bool;
}

/// Implements [`QueueSocket`] for a socket type with `fd` and `zero_copy`
/// fields and inherent `open` and `pending`.
macro_rules! queue_socket {
    ($t:ty) => {
        impl QueueSocket for $t {
            fn open(ifindex: i32, queue: u32, frames: usize) -> io::Result<Self> {
                <$t>::open(ifindex, queue, frames)
            }
            fn fd(&self) -> i32 {
                self.fd.as_raw_fd()
            }
            fn zero_copy(&self) -> bool {
                self.zero_copy
            }
            fn pending(&self) -> bool {
                <$t>::pending(self)
            }
        }
    };
}

queue_socket!(RxSocket);

/// One socket per RX queue of an interface (the ethtool channel count; 1
/// where the driver does not say), one XSKMAP, and the redirect program
/// attached to the interface (in this thread's namespace) while any part
/// of the set lives.
#[derive(Debug)]
struct Queues<S> {
    socks: Vec<S>,
    attached: std::sync::Arc<(crate::xdp::XdpLink, crate::xdp::XskMap)>,
    zero_copy: bool,
    /// Where the next round starts, so no queue is always served last.
    next: usize,
}

impl<S: QueueSocket> Queues<S> {
    fn open(iface: &str, frames: usize, program: &str) -> io::Result<Self> {
        let ifindex = crate::iface::index(iface)?;
        let frames = frames.next_power_of_two().max(64);
        let queues = crate::ethtool::channels(iface)
            .map(|c| c.rx + c.combined)
            .unwrap_or(0)
            .clamp(1, 256);
        let socks = (0..queues)
            .map(|q| {
                S::open(ifindex, q, frames)
                    .map_err(|e| io::Error::new(e.kind(), format!("queue {q}: {e}")))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let map = crate::xdp::XskMap::new(queues)?;
        for (q, s) in socks.iter().enumerate() {
            map.set(q as u32, s.fd())?;
        }
        let link = crate::xdp::attach(
            &crate::xdp::redirect_to_xsk_program(map.fd()),
            ifindex,
            program,
        )?;
        Ok(Self {
            zero_copy: socks.iter().all(S::zero_copy),
            socks,
            attached: std::sync::Arc::new((link, map)),
            next: 0,
        })
    }

    /// Splits the sockets between `parts` sets (queue q goes to part
    /// q mod parts), one per thread; the program stays attached until the
    /// last part is dropped. Fails when there are fewer queues than parts.
    /// `workers` names them in the error ("receive workers").
    fn split(self, parts: usize, workers: &str) -> io::Result<Vec<Self>> {
        if parts == 0 || parts > self.socks.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{parts} {workers} need as many RX queues ({} here)",
                    self.socks.len()
                ),
            ));
        }
        let mut out: Vec<Self> = (0..parts)
            .map(|_| Queues {
                socks: Vec::new(),
                attached: self.attached.clone(),
                zero_copy: self.zero_copy,
                next: 0,
            })
            .collect();
        for (q, s) in self.socks.into_iter().enumerate() {
            out[q % parts].socks.push(s);
        }
        Ok(out)
    }

    fn any_pending(&self) -> bool {
        self.socks.iter().any(S::pending)
    }

    /// Waits up to `timeout` (to the millisecond) for any socket to have frames.
    fn wait(&self, timeout: Duration) {
        // One pollfd per socket, on the stack (open() takes at most 256 queues).
        let mut pfds = [libc::pollfd {
            fd: -1,
            events: libc::POLLIN,
            revents: 0,
        }; 256];
        for (p, s) in pfds.iter_mut().zip(&self.socks) {
            p.fd = s.fd();
        }
        let n = self.socks.len().min(pfds.len());
        // SAFETY: `pfds[..n]` is a valid array of that many pollfds.
        unsafe {
            libc::poll(
                pfds.as_mut_ptr(),
                n as libc::nfds_t,
                timeout.as_millis().min(1000) as i32,
            )
        };
    }

    /// The sockets' indices for one round, starting one further each round.
    fn round(&mut self) -> impl Iterator<Item = usize> + use<S> {
        let (k, start) = (self.socks.len(), self.next);
        self.next = (self.next + 1) % k.max(1);
        (0..k).map(move |i| (start + i) % k)
    }

    /// XDP_STATISTICS over every queue: (rx_dropped, rx_ring_full,
    /// rx_fill_ring_empty_descs).
    fn stats(&self) -> io::Result<(u64, u64, u64)> {
        let mut sum = (0, 0, 0);
        for s in &self.socks {
            let st = xdp_statistics(s.fd())?;
            sum.0 += st.rx_dropped;
            sum.1 += st.rx_ring_full;
            sum.2 += st.rx_fill_ring_empty_descs;
        }
        Ok(sum)
    }
}

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
    /// `frames` buffers each, and attaches the redirect program.
    pub fn open(iface: &str, frames: usize) -> io::Result<Self> {
        let q = Queues::open(iface, frames, "lr_xsk_redir")?;
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

    /// Largest frame a UMEM buffer holds (bytes without FCS).
    pub fn max_frame(&self) -> usize {
        FRAME_SIZE
    }

    /// Hands received frames (up to `max`, from every queue) to `f`, then
    /// gives the buffers back to the kernel. Waits up to `timeout` for the
    /// first.
    pub fn recv(
        &mut self,
        max: usize,
        timeout: std::time::Duration,
        f: &mut dyn FnMut(&[u8]),
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
}

impl FwdSocket {
    fn open(ifindex: i32, queue: u32, frames: usize) -> io::Result<Self> {
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
        let zero_copy = bind_any(raw, ifindex, queue)?;
        Ok(Self {
            fd,
            umem,
            rx,
            tx,
            fq,
            cq,
            zero_copy,
        })
    }

    fn pending(&self) -> bool {
        self.rx.producer().load(Ordering::Acquire) != self.rx.consumer().load(Ordering::Relaxed)
    }

    /// Puts buffers back on the fill ring (there is always room: the fill
    /// ring holds every buffer of the UMEM).
    fn refill(&mut self, addrs: impl Iterator<Item = u64>) {
        let prod = self.fq.producer().load(Ordering::Relaxed);
        let mut k = 0u32;
        for a in addrs {
            let idx = (prod.wrapping_add(k) & (self.fq.size - 1)) as usize;
            // SAFETY: idx is inside the fill ring.
            unsafe { self.fq.desc.cast::<u64>().add(idx).write(a) };
            k += 1;
        }
        if k > 0 {
            self.fq
                .producer()
                .store(prod.wrapping_add(k), Ordering::Release);
        }
    }

    /// Sent frames' buffers go back to the fill ring.
    fn reclaim(&mut self) -> u64 {
        let prod = self.cq.producer().load(Ordering::Acquire);
        let cons = self.cq.consumer().load(Ordering::Relaxed);
        let done = prod.wrapping_sub(cons);
        if done == 0 {
            return 0;
        }
        let mut left = done;
        let mut c = cons;
        while left > 0 {
            let take = left.min(256);
            let mut buf = [0u64; 256];
            for (k, slot) in buf.iter_mut().enumerate().take(take as usize) {
                let idx = (c.wrapping_add(k as u32) & (self.cq.size - 1)) as usize;
                // SAFETY: idx is inside the completion ring.
                *slot = unsafe { self.cq.desc.cast::<u64>().add(idx).read() };
            }
            c = c.wrapping_add(take);
            left -= take;
            self.refill(buf[..take as usize].iter().copied());
        }
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
    fn forward(&mut self, max: usize, f: &mut dyn FnMut(&mut [u8]) -> bool) -> (u64, u64, u64) {
        self.reclaim();
        let prod = self.rx.producer().load(Ordering::Acquire);
        let cons = self.rx.consumer().load(Ordering::Relaxed);
        let n = (prod.wrapping_sub(cons) as usize).min(max).min(256);
        let tprod = self.tx.producer().load(Ordering::Relaxed);
        let room = self.tx.size as usize
            - tprod.wrapping_sub(self.tx.consumer().load(Ordering::Acquire)) as usize;
        let (mut posted, mut dropped) = (0u32, [0u64; 256]);
        let mut ndropped = 0usize;
        for k in 0..n {
            let idx = (cons.wrapping_add(k as u32) & (self.rx.size - 1)) as usize;
            // SAFETY: idx is inside the RX ring.
            let d = unsafe { self.rx.desc.cast::<libc::xdp_desc>().add(idx).read() };
            let (addr, len) = (d.addr as usize, d.len as usize);
            let keep = addr + len <= self.umem.len
                // SAFETY: bounds checked just above; the buffer is ours until
                // it goes back on the fill ring or the TX ring.
                && f(unsafe { std::slice::from_raw_parts_mut(self.umem.ptr.add(addr), len) })
                && (posted as usize) < room;
            if keep {
                let t = (tprod.wrapping_add(posted) & (self.tx.size - 1)) as usize;
                // SAFETY: t is inside the TX ring.
                unsafe {
                    self.tx
                        .desc
                        .cast::<libc::xdp_desc>()
                        .add(t)
                        .write(libc::xdp_desc {
                            addr: d.addr,
                            len: d.len,
                            options: 0,
                        })
                };
                posted += 1;
            } else {
                dropped[ndropped] = (d.addr / FRAME_SIZE as u64) * FRAME_SIZE as u64;
                ndropped += 1;
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
        self.refill(dropped[..ndropped].iter().copied());
        self.kick();
        (n as u64, u64::from(posted), ndropped as u64)
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
    /// buffers each and attaches the redirect program.
    pub fn open(iface: &str, frames: usize) -> io::Result<Self> {
        let q = Queues::open(iface, frames, "lr_xsk_fwd")?;
        Ok(Self {
            zero_copy: q.zero_copy,
            q,
        })
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
    pub fn forward(
        &mut self,
        timeout: Duration,
        f: &mut dyn FnMut(&mut [u8]) -> bool,
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
