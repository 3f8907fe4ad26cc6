//! AF_PACKET TPACKET_V3 transmit ring: frames are written into a ring
//! shared with the kernel (mmap) and sent with one syscall per batch,
//! bypassing the qdisc, without a copy through sendmsg.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

const TPACKET_V3: i32 = 2;
/// Bytes of `struct tpacket3_hdr`, aligned: where frame data starts in a slot.
const HDR_LEN: usize = 48;
const STATUS_OFF: usize = 20;
const LEN_OFF: usize = 16;
const SNAPLEN_OFF: usize = 12;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;

#[repr(C)]
struct Req3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// An AF_PACKET socket (see [`crate::raw::packet_socket`]) speaking TPACKET_V3.
fn v3_socket(receive_all: bool) -> io::Result<OwnedFd> {
    let fd = crate::raw::packet_socket(receive_all)?;
    crate::sockopt::setsockopt_raw(
        fd.as_raw_fd(),
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        &TPACKET_V3.to_ne_bytes(),
    )?;
    Ok(fd)
}

/// A transmit ring bound to one interface.
#[derive(Debug)]
pub struct TxRing {
    fd: OwnedFd,
    map: *mut u8,
    map_len: usize,
    frame_size: usize,
    frame_nr: usize,
    next: usize,
    /// Frames the kernel refused (TP_STATUS_WRONG_FORMAT).
    pub wrong_format: u64,
}

// SAFETY: the mapping is owned by this value and only touched through &mut self.
unsafe impl Send for TxRing {}

/// Maps the ring the kernel allocated for socket `raw` (`flags` beyond
/// MAP_SHARED, e.g. MAP_LOCKED).
fn map_ring(raw: i32, len: usize, flags: i32) -> io::Result<*mut libc::c_void> {
    // SAFETY: mapping the socket's own ring, `len` bytes as it was asked for.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | flags,
            raw,
            0,
        )
    };
    if map == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(map)
}

/// Asks the kernel for a TX or RX ring (`PACKET_TX_RING`/`PACKET_RX_RING`).
fn set_ring(raw: i32, which: i32, req: &Req3) -> io::Result<()> {
    // SAFETY: `req` is a valid tpacket_req3 of the size given.
    let rc = unsafe {
        libc::setsockopt(
            raw,
            libc::SOL_PACKET,
            which,
            (req as *const Req3).cast(),
            std::mem::size_of::<Req3>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl TxRing {
    /// Opens a ring of `frame_nr` slots for frames of up to `max_frame` bytes.
    pub fn open(iface: &str, max_frame: usize, frame_nr: usize) -> io::Result<Self> {
        let ifindex = crate::iface::index(iface)?;
        let frame_size = (HDR_LEN + max_frame).next_power_of_two().max(2048);
        let block_size = (frame_size * 32).max(1 << 16);
        let per_block = block_size / frame_size;
        let block_nr = frame_nr.div_ceil(per_block).max(1);
        let frame_nr = block_nr * per_block;
        let fd = v3_socket(false)?;
        let raw = fd.as_raw_fd();
        let _ = crate::sockopt::setsockopt_raw(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &1i32.to_ne_bytes(),
        );
        let req = Req3 {
            block_size: block_size as u32,
            block_nr: block_nr as u32,
            frame_size: frame_size as u32,
            frame_nr: frame_nr as u32,
            retire_blk_tov: 0,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        set_ring(raw, libc::PACKET_TX_RING, &req)?;
        crate::raw::bind_to(raw, ifindex)?;
        let map_len = block_size * block_nr;
        let map = map_ring(raw, map_len, 0)?;
        Ok(Self {
            fd,
            map: map.cast(),
            map_len,
            frame_size,
            frame_nr,
            next: 0,
            wrong_format: 0,
        })
    }

    pub fn capacity(&self) -> usize {
        self.frame_nr
    }

    /// Largest frame a slot holds (bytes without FCS).
    pub fn max_frame(&self) -> usize {
        self.frame_size - HDR_LEN
    }

    /// Builds up to `n` frames in place, in free slots of the ring, and
    /// asks the kernel to send them: `fill.build(buffer, slot)` writes a frame
    /// into the slot's data area and returns its length; `slot` (below
    /// [`slots`](Self::slots)) names it, and its bytes stay as the last
    /// frame built there left them. Returns the frames queued and their
    /// bytes (0 frames when the ring is full: try again).
    #[inline]
    pub fn send_with<F: crate::FrameSource>(
        &mut self,
        n: usize,
        fill: &mut F,
    ) -> io::Result<(usize, u64)> {
        let mut bufs = RingBufs {
            map: self.map,
            room: self.frame_size - HDR_LEN,
            size: self.frame_size,
            slots: self.frame_nr,
            slot: self.next,
            left: n,
            queued: 0,
            wrong_format: 0,
            status: std::ptr::null(),
            base: std::ptr::null_mut(),
        };
        let bytes = fill.build_each(&mut bufs);
        self.next = bufs.slot;
        self.wrong_format += bufs.wrong_format;
        if bufs.queued > 0 {
            self.kick()?;
        }
        Ok((bufs.queued, bytes))
    }

    /// Slots in the ring.
    pub fn slots(&self) -> usize {
        self.frame_nr
    }

    fn kick(&self) -> io::Result<()> {
        // SAFETY: a zero-length send on a TX-ring socket sends the queued slots.
        let rc =
            unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            if !crate::port::error::send_refused(&e) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Waits until the kernel has sent every queued frame.
    pub fn flush(&mut self) -> io::Result<()> {
        // SAFETY: as in `send`, blocking: returns when the ring is drained.
        let rc = unsafe { libc::send(self.fd.as_raw_fd(), std::ptr::null(), 0, 0) };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// A TX ring's free slots for one batch (see [`TxRing::send_with`]):
/// each frame's length and then its status written as it is built.
struct RingBufs {
    map: *mut u8,
    room: usize,
    size: usize,
    slots: usize,
    /// The next slot to hand out.
    slot: usize,
    /// Frames still wanted.
    left: usize,
    queued: usize,
    wrong_format: u64,
    /// The status word and the slot of the buffer handed out last.
    status: *const AtomicU32,
    base: *mut u8,
}

impl crate::Buffers for RingBufs {
    #[inline(always)]
    fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
        if self.left == 0 {
            return None;
        }
        // SAFETY: `slot` < slots: its header lies inside the mapping.
        let base = unsafe { self.map.add(self.slot * self.size) };
        // SAFETY: the status word is 4-byte aligned (slots are
        // power-of-two sized) and the kernel updates it concurrently,
        // hence the atomic view.
        let status = unsafe { &*(base.add(STATUS_OFF) as *const AtomicU32) };
        let st = status.load(Ordering::Acquire);
        if st != TP_STATUS_AVAILABLE {
            if st != TP_STATUS_WRONG_FORMAT {
                return None;
            }
            self.wrong_format += 1;
        }
        self.status = status;
        self.base = base;
        // SAFETY: the slot is ours (AVAILABLE or rejected) and its data
        // area `HDR_LEN..frame_size` lies inside the mapping; the kernel
        // does not touch it until the status says SEND_REQUEST.
        let buf = unsafe { std::slice::from_raw_parts_mut(base.add(HDR_LEN), self.room) };
        Some((buf, self.slot))
    }

    #[inline(always)]
    fn built(&mut self, len: usize) {
        // SAFETY: `base` is the slot handed out last (ours, inside the
        // mapping). A length past the area is the kernel's to refuse (it
        // checks tp_len). tp_next_offset must be 0 for V3 TX: the ring
        // starts zeroed and only the status word is the kernel's to write.
        unsafe {
            (self.base.add(LEN_OFF) as *mut u32).write(len as u32);
            (self.base.add(SNAPLEN_OFF) as *mut u32).write(len as u32);
            (*self.status).store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        }
        self.slot = if self.slot + 1 == self.slots {
            0
        } else {
            self.slot + 1
        };
        self.left -= 1;
        self.queued += 1;
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping the region mapped in `open`, once.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

/// AF_PACKET TPACKET_V3 receive ring: the kernel fills blocks of frames in
/// memory shared with us; a block is handed back once read.
#[derive(Debug)]
pub struct RxRing {
    fd: OwnedFd,
    map: *mut u8,
    map_len: usize,
    block_size: usize,
    block_nr: usize,
    current: usize,
    /// The kernel leaves out the frames this host sends
    /// (PACKET_IGNORE_OUTGOING, Linux 4.20): no frame needs its packet
    /// type looked at.
    outgoing_filtered: bool,
}

// SAFETY: the mapping is owned by this value and only touched through &mut self.
unsafe impl Send for RxRing {}

/// linux/if_packet.h: the socket is not given the frames this host sends.
const PACKET_IGNORE_OUTGOING: i32 = 23;

/// The RX ring's frame size: the most of one frame it keeps.
const RX_FRAME_SIZE: usize = 2048;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_KERNEL: u32 = 0;
const BLOCK_STATUS_OFF: usize = 8;
const BLOCK_NUM_PKTS_OFF: usize = 12;
const BLOCK_FIRST_OFF: usize = 16;
/// tp_sec and tp_nsec (u32) in tpacket3_hdr.
const SEC_OFF: usize = 4;
const NSEC_OFF: usize = 8;
/// tp_mac (u16) in tpacket3_hdr.
const MAC_OFF: usize = 24;
/// sll_pkttype inside the sockaddr_ll that follows the aligned header.
const PKTTYPE_OFF: usize = HDR_LEN + 10;

/// Hands every frame of the block at `base` (`block_size` bytes, ours
/// until handed back) to `f` with its kernel receive time on
/// CLOCK_MONOTONIC (`offset`: CLOCK_REALTIME - CLOCK_MONOTONIC); frames
/// this host sent are skipped (looked for only with `OUTGOING`: the
/// kernel may have left them out already). Returns the frames handed over.
///
/// # Safety
/// `base` points to a retired block of `block_size` readable bytes.
#[inline(always)]
unsafe fn walk_block<const OUTGOING: bool, F: crate::FrameSink>(
    base: *mut u8,
    block_size: usize,
    offset: i64,
    f: &mut F,
) -> u32 {
    // SAFETY: the caller's block; every offset from the kernel is checked
    // against it before it is read through.
    let (num, off) = unsafe {
        (
            (base.add(BLOCK_NUM_PKTS_OFF) as *const u32).read(),
            (base.add(BLOCK_FIRST_OFF) as *const u32).read() as usize,
        )
    };
    let mut frames = BlockFrames::<OUTGOING> {
        p: base.wrapping_add(off),
        // The last address a frame's header (up to its packet type) fits
        // at, and the block's end.
        header_last: base as usize + block_size - (PKTTYPE_OFF + 1),
        end: base as usize + block_size,
        offset,
        left: num,
        cut: 0,
        skipped: 0,
    };
    f.frames(&mut frames);
    // (Walked to the end, whatever `f` read: the count is the block's.)
    while crate::Frames::next_frame(&mut frames).is_some() {}
    // The walk stops at a frame not whole in the block (no counter in
    // its loop): skipped, and the rest handed over after it.
    while frames.left > 0 {
        frames.skip_one();
        f.frames(&mut frames);
        while crate::Frames::next_frame(&mut frames).is_some() {}
    }
    num - frames.cut - frames.skipped
}

/// A retired block's frames (see [`walk_block`]), read in turn.
struct BlockFrames<const OUTGOING: bool> {
    /// The next frame's header (its offset from the kernel: the address
    /// is compared with the block's bounds before anything is read
    /// through it).
    p: *mut u8,
    header_last: usize,
    end: usize,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC.
    offset: i64,
    /// The frames left.
    left: u32,
    /// Frames left when the walk was cut short (a header outside the
    /// block), and frames skipped (counted apart, as they are rare): the
    /// block's frames less these were handed over.
    cut: u32,
    skipped: u32,
}

impl<const OUTGOING: bool> BlockFrames<OUTGOING> {
    /// Steps over the frame the walk is on, counted as skipped.
    #[cold]
    fn skip_one(&mut self) {
        // SAFETY: `next_frame` stopped on this header: inside the block.
        let next = unsafe { (self.p as *const u32).read() } as usize;
        self.p = self.p.wrapping_add(next);
        self.left -= 1;
        self.skipped += 1;
    }
}

impl<const OUTGOING: bool> crate::Frames for BlockFrames<OUTGOING> {
    /// The next frame whole in the block; `None` at the block's end, and
    /// on a frame that is not (left for `walk_block` to skip).
    #[inline(always)]
    fn next_frame(&mut self) -> Option<(&[u8], u64)> {
        // SAFETY: (for the whole body) the block `walk_block`'s caller
        // gave; every address from the kernel's offsets is checked
        // against it before it is read through.
        unsafe {
            while self.left > 0 {
                let p = self.p;
                if p as usize > self.header_last {
                    (self.cut, self.left) = (self.left, 0);
                    return None;
                }
                let snaplen = (p.add(SNAPLEN_OFF) as *const u32).read() as usize;
                let mac = (p.add(MAC_OFF) as *const u16).read() as usize;
                // (The frame's start, kept: its end is checked from it.)
                let data = p.add(mac);
                if data as usize + snaplen > self.end {
                    return None;
                }
                // Every frame's header gives the next one's offset (the
                // last one's is 0, and `num` ends the walk there).
                let next = (p as *const u32).read() as usize;
                if OUTGOING && p.add(PKTTYPE_OFF).read() == libc::PACKET_OUTGOING {
                    self.skip_one();
                    continue;
                }
                self.left -= 1;
                self.p = p.wrapping_add(next);
                let sec = (p.add(SEC_OFF) as *const u32).read();
                let nsec = (p.add(NSEC_OFF) as *const u32).read();
                // (A stamp before the monotonic clock's start cannot be:
                // it would wrap to a time far ahead, counted as skew.)
                let at = (i64::from(sec) * 1_000_000_000 + i64::from(nsec))
                    .wrapping_sub(self.offset) as u64;
                return Some((std::slice::from_raw_parts(data, snaplen), at));
            }
            None
        }
    }
}

impl RxRing {
    /// Largest frame a slot keeps whole (bytes without FCS).
    pub fn max_frame(&self) -> usize {
        RX_FRAME_SIZE - HDR_LEN
    }

    /// Shares the interface's frames with the other sockets of fanout
    /// group `group`, by flow (PACKET_FANOUT_HASH).
    pub fn join_fanout(&mut self, group: u16) -> io::Result<()> {
        self.join(group)
    }

    /// Joins the group, which leaves out this host's frames where the
    /// kernel can (the socket's own filter does not hold in a group);
    /// where it cannot, this ring looks at every frame's type from then on.
    fn join(&mut self, group: u16) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        if self.outgoing_filtered {
            let flag = crate::raw::PACKET_FANOUT_FLAG_IGNORE_OUTGOING;
            if crate::raw::join_fanout_with(fd, group, flag).is_ok() {
                return Ok(());
            }
            self.outgoing_filtered = false;
        }
        crate::raw::join_fanout(fd, group)
    }

    /// Joins fanout group `group` that other sockets already serve, without
    /// counting a frame twice: until it is in the group this ring also got
    /// every frame on its own (the members got them too), so it stops
    /// taking frames (a drop-all filter), hands back every block it holds
    /// unread, joins, and takes its share from then on.
    pub fn join_fanout_late(&mut self, group: u16) -> io::Result<()> {
        let fd = self.fd.as_raw_fd();
        crate::raw::drop_all(fd, true)?;
        // The kernel fills no block now: hand back the ready ones, unread,
        // and retire the one it was filling (it waits at most 1 ms).
        for _ in 0..2 * self.block_nr {
            if self.recv(2, &mut |_: &[u8], _| {})? == 0 {
                break;
            }
        }
        self.join(group)?;
        crate::raw::drop_all(fd, false)
    }

    /// Frames a block holds at most (the kernel hands over a block at a time).
    pub fn frames_per_block(&self) -> usize {
        self.block_size / RX_FRAME_SIZE
    }

    /// Opens a ring of `block_nr` blocks of `block_size` bytes on `iface`,
    /// each retired by the kernel when full or `timeout_ms` after its
    /// first frame.
    pub fn open(
        iface: &str,
        block_size: usize,
        block_nr: usize,
        timeout_ms: u32,
    ) -> io::Result<Self> {
        let ifindex = crate::iface::index(iface)?;
        // No protocol until the bind names the interface: a socket opened
        // for every protocol takes every interface's frames until then
        // (a capture of one port held another's frames).
        let fd = v3_socket(false)?;
        let raw = fd.as_raw_fd();
        // (Older kernels refuse it: every frame's type is looked at then.)
        let outgoing_filtered = crate::sockopt::setsockopt_raw(
            raw,
            libc::SOL_PACKET,
            PACKET_IGNORE_OUTGOING,
            &1i32.to_ne_bytes(),
        )
        .is_ok();
        let frame_size = RX_FRAME_SIZE as u32;
        let req = Req3 {
            block_size: block_size as u32,
            block_nr: block_nr as u32,
            frame_size,
            frame_nr: (block_size / frame_size as usize * block_nr) as u32,
            retire_blk_tov: timeout_ms,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        set_ring(raw, libc::PACKET_RX_RING, &req)?;
        let map_len = block_size * block_nr;
        // MAP_LOCKED needs RLIMIT_MEMLOCK room; the ring works without it.
        let map =
            map_ring(raw, map_len, libc::MAP_LOCKED).or_else(|_| map_ring(raw, map_len, 0))?;
        if let Err(e) = crate::raw::bind_to(raw, ifindex) {
            // SAFETY: unmapping what was just mapped.
            unsafe { libc::munmap(map, map_len) };
            return Err(e);
        }
        Ok(Self {
            fd,
            map: map.cast(),
            map_len,
            block_size,
            block_nr,
            current: 0,
            outgoing_filtered,
        })
    }

    fn block_status(&self, block: usize) -> &AtomicU32 {
        // SAFETY: block < block_nr; the status word is aligned and shared with the kernel.
        unsafe { &*(self.map.add(block * self.block_size + BLOCK_STATUS_OFF) as *const AtomicU32) }
    }

    /// Hands every frame of the next ready block to `f` (frames this host
    /// sent are skipped) with the time the kernel received it on
    /// CLOCK_MONOTONIC (the ring stamps CLOCK_REALTIME; converted here, so a
    /// block that waited to be retired does not delay its frames' times),
    /// then returns the block to the kernel. Waits up to `timeout_ms` for a
    /// block. Returns the frames handed over.
    #[inline]
    pub fn recv<F: crate::FrameSink>(&mut self, timeout_ms: i32, f: &mut F) -> io::Result<usize> {
        let b = self.current;
        if self.block_status(b).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN | libc::POLLERR,
                revents: 0,
            };
            crate::raw::poll(std::slice::from_mut(&mut pfd), timeout_ms);
            if self.block_status(b).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                return Ok(0);
            }
        }
        // Wall-clock stamps (u32 seconds: good until 2106) to monotonic.
        let offset = i64::try_from(crate::clock::realtime_offset_ns()).unwrap_or(i64::MAX);
        // SAFETY: the block is ours (TP_STATUS_USER) until we hand it back.
        let handed = unsafe {
            let base = self.map.add(b * self.block_size);
            if self.outgoing_filtered {
                walk_block::<false, F>(base, self.block_size, offset, f)
            } else {
                walk_block::<true, F>(base, self.block_size, offset, f)
            }
        };
        self.block_status(b)
            .store(TP_STATUS_KERNEL, Ordering::Release);
        self.current = (b + 1) % self.block_nr;
        Ok(handed as usize)
    }

    /// Frames the kernel dropped because the ring was full, since the last call.
    pub fn drops(&self) -> io::Result<u32> {
        Ok(crate::raw::packet_statistics(self.fd.as_raw_fd())?[1])
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: unmapping the region mapped in `open`, once.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;

    /// The datagram counters a ring saw: the 8-byte sequence at the start
    /// of UDP payloads to `port` on loopback, and how many times each.
    fn take(ring: &mut RxRing, port: u16, seen: &mut BTreeMap<u64, u32>) {
        // Every block that is ready (the first wait lets the kernel retire
        // the block it is filling).
        // What recv says it handed over is what it handed over (on lo
        // every frame is also seen outgoing: those are skipped).
        let mut wait = 20;
        loop {
            let mut calls = 0;
            let n = ring
                .recv(std::mem::replace(&mut wait, 0), &mut |f: &[u8], _| {
                    calls += 1;
                    // lo frames: 14 Ethernet + 20 IPv4 + 8 UDP, then our counter.
                    if f.len() >= 50 && f[12..14] == [8, 0] && f[36..38] == port.to_be_bytes() {
                        let seq = u64::from_be_bytes(f[42..50].try_into().unwrap());
                        *seen.entry(seq).or_default() += 1;
                    }
                })
                .unwrap();
            assert_eq!(n, calls);
            if n == 0 {
                break;
            }
        }
    }

    /// A block laid out as the kernel lays it out: frames handed over in
    /// order with their stamps on the monotonic clock; this host's own
    /// frames skipped where the ring looks at packet types; a frame
    /// reaching past the block and a header past its end skipped, never
    /// read through.
    #[test]
    fn a_block_walk_hands_over_what_the_kernel_put_there() {
        const BLOCK: usize = 4096;
        let mut block = vec![0u8; BLOCK];
        let put32 =
            |b: &mut [u8], at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        // (offset, snaplen, packet type, first data byte)
        let frames: [(usize, u32, u8, u8); 5] = [
            (64, 60, libc::PACKET_HOST, 1),
            (256, 60, libc::PACKET_OUTGOING, 2),
            (512, 4000, libc::PACKET_HOST, 3),
            (1024, 1514, libc::PACKET_BROADCAST, 4),
            (BLOCK - PKTTYPE_OFF, 60, libc::PACKET_HOST, 5),
        ];
        put32(&mut block, BLOCK_NUM_PKTS_OFF, frames.len() as u32);
        put32(&mut block, BLOCK_FIRST_OFF, frames[0].0 as u32);
        let mac = HDR_LEN as u16 + 32;
        for (k, &(off, snaplen, pkttype, first)) in frames.iter().enumerate() {
            if off + PKTTYPE_OFF >= BLOCK {
                continue; // (only its offset exists)
            }
            let next = frames.get(k + 1).map_or(0, |n| n.0 - off);
            put32(&mut block, off, next as u32);
            put32(&mut block, off + SEC_OFF, 10 + k as u32);
            put32(&mut block, off + NSEC_OFF, 500);
            put32(&mut block, off + SNAPLEN_OFF, snaplen);
            block[off + MAC_OFF..off + MAC_OFF + 2].copy_from_slice(&mac.to_ne_bytes());
            block[off + PKTTYPE_OFF] = pkttype;
            block[off + usize::from(mac)] = first;
        }
        for outgoing in [true, false] {
            let mut got = Vec::new();
            let mut take = |f: &[u8], at: u64| got.push((f[0], f.len(), at));
            // SAFETY: a block of BLOCK bytes.
            let n = unsafe {
                if outgoing {
                    walk_block::<true, _>(block.as_mut_ptr(), BLOCK, 3_000_000_000, &mut take)
                } else {
                    walk_block::<false, _>(block.as_mut_ptr(), BLOCK, 3_000_000_000, &mut take)
                }
            };
            let at = |k: u64| (10 + k) * 1_000_000_000 + 500 - 3_000_000_000;
            let mut want = vec![(1, 60, at(0))];
            if !outgoing {
                want.push((2, 60, at(1)));
            }
            want.push((4, 1514, at(3)));
            assert_eq!(got, want, "looking at packet types: {outgoing}");
            assert_eq!(n as usize, want.len());
        }
    }

    /// The socket a ring opens takes no frame before its bind names the
    /// interface (it was opened for every protocol, and held frames of
    /// every interface from then to the bind).
    #[test]
    fn a_ring_socket_takes_nothing_before_its_bind() {
        if crate::skip_unless_root("opening AF_PACKET sockets") {
            return;
        }
        let fd = v3_socket(false).unwrap();
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..50 {
            tx.send_to(b"before the bind", rx.local_addr().unwrap())
                .unwrap();
        }
        let [packets, _, _] = crate::raw::packet_statistics(fd.as_raw_fd()).unwrap();
        assert_eq!(packets, 0, "frames reached a socket bound to nothing");
        // The same socket opened for every protocol takes them.
        let all = crate::raw::packet_socket(true).unwrap();
        for _ in 0..50 {
            tx.send_to(b"before the bind", rx.local_addr().unwrap())
                .unwrap();
        }
        let [packets, _, _] = crate::raw::packet_statistics(all.as_raw_fd()).unwrap();
        assert!(
            packets >= 50,
            "the test's traffic reached a socket: {packets}"
        );
    }

    /// The block timeout a ring is opened with is the kernel's: a frame
    /// waits in its block until then (the sink's rings gather for 4 ms, a
    /// forwarder's for 1), and is handed over after.
    #[test]
    fn a_ring_holds_its_frames_until_its_block_timeout() {
        if crate::skip_unless_root("opening AF_PACKET rings") {
            return;
        }
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = rx.local_addr().unwrap().port();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for timeout_ms in [1000u32, 1] {
            let opened = std::time::Instant::now();
            // (One block of 16 MiB: the other tests' traffic on lo would
            // fill a small one, and a full block is retired at once.)
            let mut ring = RxRing::open("lo", 1 << 24, 1, timeout_ms).unwrap();
            tx.send_to(&7u64.to_be_bytes(), ("127.0.0.1", port))
                .unwrap();
            let got = std::cell::Cell::new(0);
            let mut ours = |f: &[u8], _| {
                if f.len() >= 50 && f[12..14] == [8, 0] && f[36..38] == port.to_be_bytes() {
                    got.set(got.get() + 1);
                }
            };
            if timeout_ms == 1000 {
                // The kernel's timer runs from the ring's set-up: the
                // first block is retired a second after (not before),
                // unless it fills first.
                std::thread::sleep(std::time::Duration::from_millis(200));
                ring.recv(0, &mut ours).unwrap();
                if opened.elapsed().as_millis() < 900 {
                    assert_eq!(
                        got.get(),
                        0,
                        "a frame handed over before its block's timeout"
                    );
                }
            }
            // (Bounded: 3 s.)
            while got.get() == 0 && opened.elapsed().as_secs() < 3 {
                ring.recv(100, &mut ours).unwrap();
            }
            assert_eq!(got.get(), 1, "the frame after {timeout_ms} ms");
        }
    }

    #[test]
    fn a_ring_that_joins_a_fanout_group_late_counts_no_frame_twice() {
        if crate::skip_unless_root("opening AF_PACKET rings") {
            return;
        }
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = rx.local_addr().unwrap().port();
        let group = 0x7e00 | (std::process::id() & 0xff) as u16;
        let mut a = RxRing::open("lo", 1 << 20, 16, 1).unwrap();
        a.join_fanout(group).unwrap();
        let stop = AtomicBool::new(false);
        let (mut seen_a, mut seen_b) = (BTreeMap::new(), BTreeMap::new());
        std::thread::scope(|s| {
            // Traffic already flowing when the second ring opens and joins
            // (bounded: at most 3 s, stopped once the rings are read).
            s.spawn(|| {
                let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                let t0 = std::time::Instant::now();
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) && t0.elapsed().as_secs() < 3 {
                    // About 20k datagrams a second: the rings keep up.
                    for _ in 0..20 {
                        seq += 1;
                        let _ = tx.send_to(&seq.to_be_bytes(), ("127.0.0.1", port));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            });
            for _ in 0..20 {
                take(&mut a, port, &mut seen_a);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            let mut b = RxRing::open("lo", 1 << 20, 16, 1).unwrap();
            // Frames keep arriving between the bind and the join: a plain
            // join would count every one of them twice.
            std::thread::sleep(std::time::Duration::from_millis(50));
            b.join_fanout_late(group).unwrap();
            for _ in 0..40 {
                take(&mut a, port, &mut seen_a);
                take(&mut b, port, &mut seen_b);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            stop.store(true, Ordering::Relaxed);
        });
        // (About 6,000 on an idle host; far fewer beside a loaded CI run.)
        assert!(seen_a.len() > 100, "traffic reached the first ring");
        let twice: Vec<u64> = seen_a
            .keys()
            .filter(|k| seen_b.contains_key(k))
            .copied()
            .collect();
        assert!(
            twice.is_empty(),
            "{} frames counted by both rings",
            twice.len()
        );
        assert!(seen_a.values().chain(seen_b.values()).all(|n| *n == 1));
    }
}
