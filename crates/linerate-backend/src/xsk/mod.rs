//! AF_XDP core: a UMEM of packet buffers shared with the kernel, the
//! TX and completion rings (the fill ring exists because bind requires it),
//! need_wakeup, one socket per queue, copy or zero-copy as the driver allows.
//! Receiving through AF_XDP (fill/RX rings plus the XSKMAP redirect program)
//! builds on the same pieces.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A UMEM chunk (a power of two: a chunk's start is an address masked).
const FRAME_SIZE: usize = 2048;
const _: () = assert!(FRAME_SIZE.is_power_of_two());

/// The queue is held by another socket (EBUSY).
pub(crate) fn busy(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EBUSY) || e.kind() == io::ErrorKind::ResourceBusy
}

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

    #[inline(always)]
    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping; the kernel updates it concurrently.
        unsafe { &*self.producer }
    }

    #[inline(always)]
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }

    #[inline(always)]
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
    // Below 4 GiB: a descriptor's offset is its address's low half
    // (`rx::in_umem`).
    let len = frames
        .checked_mul(FRAME_SIZE)
        .filter(|&l| l <= u32::MAX as usize)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a UMEM of {frames} frames of {FRAME_SIZE} bytes is 4 GiB or more"),
            )
        })?;
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

/// Binds zero-copy if the driver can, copy mode otherwise (veth: copy
/// only). `sg`: frames may span several UMEM chunks (AF_XDP multi-buffer,
/// `XDP_USE_SG`, Linux 6.6+); a kernel or driver without it is a clear
/// error, never a socket that drops the long frames.
fn bind_any(raw: i32, ifindex: i32, queue: u32, sg: bool) -> io::Result<bool> {
    let sg_flag = if sg { libc::XDP_USE_SG } else { 0 };
    match bind_xsk(
        raw,
        ifindex,
        queue,
        libc::XDP_ZEROCOPY | libc::XDP_USE_NEED_WAKEUP | sg_flag,
    ) {
        Ok(()) => return Ok(true),
        // Another socket holds the queue (after the wait for a closing
        // one): copy mode would meet it too.
        Err(e) if busy(&e) => return Err(e),
        Err(_) => {}
    }
    bind_xsk(
        raw,
        ifindex,
        queue,
        libc::XDP_COPY | libc::XDP_USE_NEED_WAKEUP | sg_flag,
    )
    .map(|()| false)
    .map_err(|e| {
        if sg {
            io::Error::new(
                e.kind(),
                format!(
                    "AF_XDP multi-buffer (frames over {FRAME_SIZE} bytes in several \
                     buffers, XDP_USE_SG: Linux 6.6 or later and the driver's support): {e}"
                ),
            )
        } else {
            e
        }
    })
}

/// The UMEM chunks a frame buffer takes to hold `max_frame` bytes: 1, or
/// a power of two up to [`MAX_CHUNKS`] (multi-buffer).
fn chunks_for(max_frame: usize) -> io::Result<usize> {
    let chunks = max_frame.div_ceil(FRAME_SIZE).max(1).next_power_of_two();
    if chunks > MAX_CHUNKS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "AF_XDP frames hold at most {} bytes here, not {max_frame}",
                MAX_CHUNKS * FRAME_SIZE
            ),
        ));
    }
    Ok(chunks)
}

/// Most UMEM chunks one frame may span (the kernel takes up to 18
/// descriptors a packet: MAX_SKB_FRAGS + 1).
const MAX_CHUNKS: usize = 16;

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

/// An AF_XDP socket bound to one queue, one of a [`Queues`] set.
trait QueueSocket: Sized {
    /// `multi_buffer`: frames may span several chunks (a receiver's
    /// choice; the others ignore it).
    fn open(ifindex: i32, queue: u32, frames: usize, multi_buffer: bool) -> io::Result<Self>;
    fn fd(&self) -> i32;
    fn zero_copy(&self) -> bool;
    fn pending(&self) -> bool;
}

/// Implements [`QueueSocket`] for a socket type with `fd` and `zero_copy`
/// fields and inherent `open` and `pending`.
macro_rules! queue_socket {
    ($t:ty) => {
        impl QueueSocket for $t {
            fn open(
                ifindex: i32,
                queue: u32,
                frames: usize,
                multi_buffer: bool,
            ) -> io::Result<Self> {
                <$t>::open(ifindex, queue, frames, multi_buffer)
            }
            fn fd(&self) -> i32 {
                self.fd.as_raw_fd()
            }
            fn zero_copy(&self) -> bool {
                self.zero_copy
            }
            #[inline(always)]
            fn pending(&self) -> bool {
                <$t>::pending(self)
            }
        }
    };
}

/// One socket per RX queue of an interface (the ethtool channel count; 1
/// where the driver does not say), one XSKMAP, and the redirect program
/// attached to the interface (in this thread's namespace) while any part
/// of the set lives (with `stamp` at open, one that writes each frame's
/// receive time in its metadata: `xdp::stamp_then`).
#[derive(Debug)]
struct Queues<S> {
    socks: Vec<S>,
    attached: std::sync::Arc<(crate::xdp::XdpLink, crate::xdp::XskMap)>,
    zero_copy: bool,
    /// Where the next round starts, so no queue is always served last.
    next: usize,
    /// One pollfd per socket, made at the first wait (not per wait).
    pfds: Vec<libc::pollfd>,
}

impl<S: QueueSocket> Queues<S> {
    fn open(
        iface: &str,
        frames: usize,
        program: &str,
        filter: crate::xdp::RxFilter,
        stamp: bool,
        multi_buffer: bool,
    ) -> io::Result<Self> {
        let ifindex = crate::iface::index(iface)?;
        let frames = frames.next_power_of_two().max(64);
        let queues = crate::ethtool::channels(iface)
            .map(|c| c.rx + c.combined)
            .unwrap_or(0)
            .clamp(1, 256);
        let socks = (0..queues)
            .map(|q| {
                S::open(ifindex, q, frames, multi_buffer)
                    .map_err(|e| io::Error::new(e.kind(), format!("queue {q}: {e}")))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let map = crate::xdp::XskMap::new(queues)?;
        for (q, s) in socks.iter().enumerate() {
            map.set(q as u32, s.fd())?;
        }
        let link = crate::xdp::attach(&filter.program(map.fd(), stamp), ifindex, program)?;
        Ok(Self {
            zero_copy: socks.iter().all(S::zero_copy),
            socks,
            attached: std::sync::Arc::new((link, map)),
            next: 0,
            pfds: Vec::new(),
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
                pfds: Vec::new(),
            })
            .collect();
        for (q, s) in self.socks.into_iter().enumerate() {
            out[q % parts].socks.push(s);
        }
        Ok(out)
    }

    #[inline(always)]
    fn any_pending(&self) -> bool {
        self.socks.iter().any(S::pending)
    }

    /// Waits up to `timeout` (to the millisecond) for any socket to have
    /// frames. (Inlined: a caller's constant timeout is its constant ms.)
    #[inline(always)]
    fn wait(&mut self, timeout: Duration) {
        if self.pfds.len() != self.socks.len() {
            self.make_pfds();
        }
        // (No u128 arithmetic: this runs once per wake-up.)
        let ms = (timeout.as_secs().min(1) * 1000 + u64::from(timeout.subsec_millis())).min(1000);
        crate::raw::poll(&mut self.pfds, ms as i32);
    }

    /// One pollfd per socket, for [`wait`](Self::wait).
    #[cold]
    #[inline(never)]
    fn make_pfds(&mut self) {
        self.pfds = self
            .socks
            .iter()
            .map(|s| libc::pollfd {
                fd: s.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
    }

    /// The sockets' indices for one round, starting one further each round.
    fn round(&mut self) -> impl Iterator<Item = usize> + use<S> {
        let (k, start) = (self.socks.len(), self.next);
        // (No division: this runs once per receive call.)
        self.next = if start + 1 >= k { 0 } else { start + 1 };
        (0..k).map(move |i| {
            if start + i >= k {
                start + i - k
            } else {
                start + i
            }
        })
    }

    /// The socket a round starts at (one further each round, as
    /// [`round`](Self::round)'s), for a caller that walks the sockets
    /// itself: the next one after `i` is [`after`](Self::after)`(i)`.
    #[inline(always)]
    fn round_start(&mut self) -> usize {
        let start = self.next;
        self.next = self.after(start);
        start
    }

    /// The socket after `i`, back to the first after the last.
    #[inline(always)]
    fn after(&self, i: usize) -> usize {
        if i + 1 >= self.socks.len() { 0 } else { i + 1 }
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

mod fwd;
mod nap;
mod rx;
mod tx;

pub use fwd::XskFwd;
pub use rx::XskRx;
pub use tx::XskTx;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_takes_as_many_chunks_as_it_needs_in_a_power_of_two() {
        assert_eq!(chunks_for(0).unwrap(), 1);
        assert_eq!(chunks_for(2048).unwrap(), 1);
        assert_eq!(chunks_for(2049).unwrap(), 2);
        assert_eq!(chunks_for(4096).unwrap(), 2);
        assert_eq!(chunks_for(4097).unwrap(), 4);
        assert_eq!(chunks_for(9014).unwrap(), 8);
        assert_eq!(chunks_for(32768).unwrap(), 16);
        let e = chunks_for(32769).unwrap_err();
        assert!(e.to_string().contains("at most 32768 bytes"), "{e}");
    }
}
