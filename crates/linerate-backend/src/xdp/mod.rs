//! XDP programs loaded with raw bpf(2) calls and attached with a BPF link:
//! no clang, no libbpf, no bpffs, and it works inside a network namespace.
//! The attachment lives as long as the returned [`XdpLink`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

mod filter;
pub use filter::{RxFilter, udp_filter_program};

const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_UPDATE_ELEM: i64 = 2;
const BPF_PROG_LOAD: i64 = 5;
/// BPF_PROG_LOAD flag: the XDP program takes multi-buffer frames.
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const BPF_PROG_TEST_RUN: i64 = 10;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_LINK_CREATE: i64 = 28;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;

/// One eBPF instruction.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Insn {
    pub code: u8,
    /// dst_reg (low 4 bits) | src_reg (high 4 bits).
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

/// XDP verdicts.
pub const XDP_DROP: i32 = 1;
pub const XDP_PASS: i32 = 2;

/// `r0 = verdict; exit`.
pub fn verdict_program(verdict: i32) -> [Insn; 2] {
    [
        // BPF_ALU64 | BPF_MOV | BPF_K: r0 = imm
        Insn {
            code: 0xb7,
            regs: 0,
            off: 0,
            imm: verdict,
        },
        // BPF_JMP | BPF_EXIT
        Insn {
            code: 0x95,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ]
}

/// `r0 = bpf_redirect_map(xskmap, ctx->rx_queue_index, XDP_PASS)`: frames go
/// to the AF_XDP socket of their RX queue, or on to the stack if none.
pub fn redirect_to_xsk_program(xskmap_fd: i32) -> [Insn; 6] {
    [
        // r2 = *(u32 *)(r1 + 16): xdp_md.rx_queue_index
        Insn {
            code: 0x61,
            regs: 0x12,
            off: 16,
            imm: 0,
        },
        // r1 = map (ld_imm64 with BPF_PSEUDO_MAP_FD), two slots
        Insn {
            code: 0x18,
            regs: 0x11,
            off: 0,
            imm: xskmap_fd,
        },
        Insn {
            code: 0,
            regs: 0,
            off: 0,
            imm: 0,
        },
        // r3 = XDP_PASS (the action when the map has no socket for the queue)
        Insn {
            code: 0xb7,
            regs: 0x03,
            off: 0,
            imm: XDP_PASS,
        },
        // call bpf_redirect_map
        Insn {
            code: 0x85,
            regs: 0,
            off: 0,
            imm: 51,
        },
        Insn {
            code: 0x95,
            regs: 0,
            off: 0,
            imm: 0,
        },
    ]
}

/// Bytes of XDP metadata [`stamp_then`] puts in front of a frame: its
/// receive time (u64, CLOCK_MONOTONIC ns, native byte order) then
/// [`RX_STAMP_MAGIC`] (u64).
pub const RX_STAMP_LEN: usize = 16;

/// The word after a receive time in a frame's metadata that says the
/// time is one [`stamp_then`] wrote ("LRSTAMP1"): bytes a chunk held
/// before are never taken for a stamp (the receiver clears it as it
/// reads it).
pub const RX_STAMP_MAGIC: u64 = u64::from_le_bytes(*b"LRSTAMP1");

/// bpf_ktime_get_ns and bpf_xdp_adjust_meta.
const BPF_FUNC_KTIME_GET_NS: i32 = 5;
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;

/// `then` (which finds the context in r1) after the frame's receive time
/// (bpf_ktime_get_ns: CLOCK_MONOTONIC, linerate's clock) is written with
/// [`RX_STAMP_MAGIC`] in [`RX_STAMP_LEN`] bytes of XDP metadata in front
/// of it (bpf_xdp_adjust_meta). AF_XDP copies the metadata into the UMEM
/// chunk in front of the frame (copy mode) or leaves it there
/// (zero-copy). A driver without metadata refuses the adjustment: `then`
/// runs all the same, the frame unstamped.
pub fn stamp_then(then: &[Insn]) -> Vec<Insn> {
    use asm::*;
    let len = RX_STAMP_LEN as i32;
    let magic = ld_imm64(R5, RX_STAMP_MAGIC);
    let mut code = vec![
        mov(R6, R1),
        // The time first: a helper call clobbers r1-r5, r6-r7 survive.
        call(BPF_FUNC_KTIME_GET_NS),
        mov(R7, R0),
        mov(R1, R6),
        mov_imm(R2, -len),
        call(BPF_FUNC_XDP_ADJUST_META),
        // Refused (no metadata here): on unstamped.
        jne_imm(R0, 0, 9),
        // The adjustment moved the pointers: read again, and bounded for
        // the verifier (data_meta + 16 <= data).
        ldx_w(R2, R6, 8), // data_meta
        ldx_w(R3, R6, 0), // data
        mov(R4, R2),
        add_imm(R4, len),
        jgt(R4, R3, 4),
        stx_dw(R2, R7, 0),
        magic[0],
        magic[1],
        stx_dw(R2, R5, 8),
        // (both jumps land here)
        mov(R1, R6),
    ];
    code.extend_from_slice(then);
    code
}

/// Instruction builders for the small programs below.
mod asm {
    use super::Insn;
    pub const R0: u8 = 0;
    pub const R1: u8 = 1;
    pub const R2: u8 = 2;
    pub const R3: u8 = 3;
    pub const R4: u8 = 4;
    pub const R5: u8 = 5;
    pub const R6: u8 = 6;
    pub const R7: u8 = 7;
    const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: dst | (src << 4),
            off,
            imm,
        }
    }
    /// `dst = *(u32 *)(src + off)`
    pub const fn ldx_w(dst: u8, src: u8, off: i16) -> Insn {
        insn(0x61, dst, src, off, 0)
    }
    /// `dst = *(u16 *)(src + off)`
    pub const fn ldx_h(dst: u8, src: u8, off: i16) -> Insn {
        insn(0x69, dst, src, off, 0)
    }
    /// `dst = *(u8 *)(src + off)`
    pub const fn ldx_b(dst: u8, src: u8, off: i16) -> Insn {
        insn(0x71, dst, src, off, 0)
    }
    /// `dst = src` (64-bit)
    pub const fn mov(dst: u8, src: u8) -> Insn {
        insn(0xbf, dst, src, 0, 0)
    }
    /// `dst = imm` (64-bit)
    pub const fn mov_imm(dst: u8, imm: i32) -> Insn {
        insn(0xb7, dst, 0, 0, imm)
    }
    /// `dst += imm` (64-bit)
    pub const fn add_imm(dst: u8, imm: i32) -> Insn {
        insn(0x07, dst, 0, 0, imm)
    }
    /// `dst = htobe16(dst)`: network-order 16-bit field to a number.
    pub const fn be16(dst: u8) -> Insn {
        insn(0xdc, dst, 0, 0, 16)
    }
    /// `dst = htobe32(dst)`: network-order 32-bit field to a number.
    pub const fn be32(dst: u8) -> Insn {
        insn(0xdc, dst, 0, 0, 32)
    }
    /// `if dst > src goto +off`
    pub const fn jgt(dst: u8, src: u8, off: i16) -> Insn {
        insn(0x2d, dst, src, off, 0)
    }
    /// `if dst > imm goto +off`
    pub const fn jgt_imm(dst: u8, imm: i32, off: i16) -> Insn {
        insn(0x25, dst, 0, off, imm)
    }
    /// `if dst != imm goto +off`
    pub const fn jne_imm(dst: u8, imm: i32, off: i16) -> Insn {
        insn(0x55, dst, 0, off, imm)
    }
    /// `if dst == imm goto +off`
    pub const fn jeq_imm(dst: u8, imm: i32, off: i16) -> Insn {
        insn(0x15, dst, 0, off, imm)
    }
    /// `if dst < imm goto +off` (unsigned)
    pub const fn jlt_imm(dst: u8, imm: i32, off: i16) -> Insn {
        insn(0xa5, dst, 0, off, imm)
    }
    /// `dst &= imm` (64-bit)
    pub const fn and_imm(dst: u8, imm: i32) -> Insn {
        insn(0x57, dst, 0, 0, imm)
    }
    /// `dst <<= imm` (64-bit)
    pub const fn lsh_imm(dst: u8, imm: i32) -> Insn {
        insn(0x67, dst, 0, 0, imm)
    }
    /// `dst += src` (64-bit)
    pub const fn add(dst: u8, src: u8) -> Insn {
        insn(0x0f, dst, src, 0, 0)
    }
    /// `goto +off`
    pub const fn ja(off: i16) -> Insn {
        insn(0x05, 0, 0, off, 0)
    }
    pub const fn exit() -> Insn {
        insn(0x95, 0, 0, 0, 0)
    }
    /// `call helper`
    pub const fn call(helper: i32) -> Insn {
        insn(0x85, 0, 0, 0, helper)
    }
    /// `*(u64 *)(dst + off) = src`
    pub const fn stx_dw(dst: u8, src: u8, off: i16) -> Insn {
        insn(0x7b, dst, src, off, 0)
    }
    /// `dst = imm` (a 64-bit immediate: two instruction slots)
    pub const fn ld_imm64(dst: u8, imm: u64) -> [Insn; 2] {
        [
            insn(0x18, dst, 0, 0, imm as u32 as i32),
            insn(0, 0, 0, 0, (imm >> 32) as u32 as i32),
        ]
    }
}

/// Drops UDP datagrams (IPv4 without options, or IPv6 without extension
/// headers; no VLAN tag) whose payload is longer than `keep_payload` bytes,
/// and passes every other frame. A receiver built on it counts test traffic
/// at the cheapest point while the stack still gets ARP/ND, TCP (e.g.
/// iperf3's control connection) and short UDP handshakes (iperf3's 4-byte
/// UDP connect message).
pub fn udp_payload_drop_program(keep_payload: u16) -> Vec<Insn> {
    use asm::*;
    #[derive(Clone, Copy, PartialEq)]
    enum L {
        Ipv6,
        Pass,
        Drop,
    }
    // UDP length field = 8 + payload.
    let limit = 8 + i32::from(keep_payload);
    // Ethertypes as a little-endian u16 load of network-order bytes sees them.
    let ipv4 = i32::from(u16::from_le_bytes(0x0800u16.to_be_bytes()));
    let ipv6 = i32::from(u16::from_le_bytes(0x86ddu16.to_be_bytes()));
    // (instruction, jump target to resolve, label placed on it)
    let code: Vec<(Insn, Option<L>, Option<L>)> = vec![
        (ldx_w(R2, R1, 0), None, None), // data
        (ldx_w(R3, R1, 4), None, None), // data_end
        (mov(R4, R2), None, None),
        (add_imm(R4, 14 + 20 + 8), None, None),
        (jgt(R4, R3, 0), Some(L::Pass), None), // too short for IPv4 + UDP
        (ldx_h(R5, R2, 12), None, None),       // ethertype
        (jne_imm(R5, ipv4, 0), Some(L::Ipv6), None),
        (ldx_b(R5, R2, 14), None, None),
        (jne_imm(R5, 0x45, 0), Some(L::Pass), None), // IPv4 options
        (ldx_b(R5, R2, 14 + 9), None, None),         // protocol
        (jne_imm(R5, 17, 0), Some(L::Pass), None),
        (ldx_h(R5, R2, 14 + 20 + 4), None, None), // UDP length
        (be16(R5), None, None),
        (jgt_imm(R5, limit, 0), Some(L::Drop), None),
        (ja(0), Some(L::Pass), None),
        (jne_imm(R5, ipv6, 0), Some(L::Pass), Some(L::Ipv6)),
        (mov(R4, R2), None, None),
        (add_imm(R4, 14 + 40 + 8), None, None),
        (jgt(R4, R3, 0), Some(L::Pass), None),
        (ldx_b(R5, R2, 14 + 6), None, None), // next header
        (jne_imm(R5, 17, 0), Some(L::Pass), None),
        (ldx_h(R5, R2, 14 + 40 + 4), None, None), // UDP length
        (be16(R5), None, None),
        (jgt_imm(R5, limit, 0), Some(L::Drop), None),
        (mov_imm(R0, XDP_PASS), None, Some(L::Pass)),
        (exit(), None, None),
        (mov_imm(R0, XDP_DROP), None, Some(L::Drop)),
        (exit(), None, None),
    ];
    let at = |l: L| {
        code.iter()
            .position(|(_, _, here)| *here == Some(l))
            .expect("label placed")
    };
    code.iter()
        .enumerate()
        .map(|(pc, (insn, target, _))| {
            let mut insn = *insn;
            if let Some(t) = target {
                insn.off = (at(*t) as isize - pc as isize - 1) as i16;
            }
            insn
        })
        .collect()
}

/// For tests of loss accounting: drops linerate probe frames (IPv4
/// without options, untagged, UDP) whose sequence number is above
/// `after_seq` (sequence numbers below 2^32; end markers pass), passes
/// every other frame. The tail of every flow is lost, as a device that
/// stops forwarding would lose it.
pub fn probe_tail_drop_program(after_seq: u32) -> Vec<Insn> {
    use asm::*;
    const PROBE: i16 = 14 + 20 + 8;
    const PASS: i16 = 18;
    const DROP: i16 = 20;
    let ipv4 = i32::from(u16::from_le_bytes(0x0800u16.to_be_bytes()));
    let limit = i32::try_from(after_seq).unwrap_or(i32::MAX);
    // (instruction, absolute jump target)
    let code: [(Insn, Option<i16>); 22] = [
        (ldx_w(R2, R1, 0), None), // data
        (ldx_w(R3, R1, 4), None), // data_end
        (mov(R4, R2), None),
        (add_imm(R4, i32::from(PROBE) + 18), None),
        (jgt(R4, R3, 0), Some(PASS)), // too short for a probe
        (ldx_h(R5, R2, 12), None),
        (jne_imm(R5, ipv4, 0), Some(PASS)),
        (ldx_b(R5, R2, 14), None),
        (jne_imm(R5, 0x45, 0), Some(PASS)), // IPv4 options
        (ldx_b(R5, R2, 14 + 9), None),
        (jne_imm(R5, 17, 0), Some(PASS)),
        (ldx_b(R5, R2, PROBE), None),
        (jne_imm(R5, 0xA9, 0), Some(PASS)), // not a probe
        (ldx_w(R5, R2, PROBE + 4), None),   // sequence, high word
        (jne_imm(R5, 0, 0), Some(PASS)),    // an end marker (or past 2^32)
        (ldx_w(R5, R2, PROBE + 8), None),   // sequence, low word
        (be32(R5), None),
        (jgt_imm(R5, limit, 0), Some(DROP)),
        (mov_imm(R0, XDP_PASS), None), // PASS
        (exit(), None),
        (mov_imm(R0, XDP_DROP), None), // DROP
        (exit(), None),
    ];
    code.iter()
        .enumerate()
        .map(|(pc, (insn, target))| {
            let mut insn = *insn;
            if let Some(t) = target {
                insn.off = *t - pc as i16 - 1;
            }
            insn
        })
        .collect()
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    _rest: [u64; 12],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
    _rest: [u64; 8],
}

/// An XSKMAP: RX queue index -> AF_XDP socket.
#[derive(Debug)]
pub struct XskMap {
    fd: OwnedFd,
}

impl XskMap {
    pub fn new(queues: u32) -> io::Result<Self> {
        let mut attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: queues.max(1),
            ..MapCreateAttr::default()
        };
        let fd = bpf(BPF_MAP_CREATE, &mut attr)
            .map_err(|e| io::Error::new(e.kind(), format!("BPF_MAP_CREATE (XSKMAP): {e}")))?;
        Ok(Self { fd })
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Sends queue `queue`'s frames to the AF_XDP socket `xsk_fd`.
    pub fn set(&self, queue: u32, xsk_fd: i32) -> io::Result<()> {
        let key = queue;
        let value = xsk_fd as u32;
        let mut attr = MapElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: (&key as *const u32) as u64,
            value: (&value as *const u32) as u64,
            ..MapElemAttr::default()
        };
        // SAFETY: valid bpf_attr for BPF_MAP_UPDATE_ELEM; key/value live across the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_UPDATE_ELEM,
                &mut attr as *mut MapElemAttr,
                std::mem::size_of::<MapElemAttr>(),
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
    _rest: [u64; 12],
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    _rest: [u64; 12],
}

fn bpf<T>(cmd: i64, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid, zero-padded bpf_attr layout of the size passed.
    let rc = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr as *mut T, std::mem::size_of::<T>()) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new file descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
}

/// A loaded XDP program attached to an interface through a BPF link.
#[derive(Debug)]
pub struct XdpLink {
    _prog: OwnedFd,
    link: OwnedFd,
}

impl XdpLink {
    pub fn fd(&self) -> i32 {
        self.link.as_raw_fd()
    }
}

/// Loads `insns` as an XDP program and attaches it to `ifindex` (of the
/// calling thread's network namespace). Dropping the link detaches it.
pub fn attach(insns: &[Insn], ifindex: i32, name: &str) -> io::Result<XdpLink> {
    let prog = load(insns, name)?;
    let mut link = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex as u32,
        attach_type: BPF_XDP,
        ..LinkCreateAttr::default()
    };
    let link = bpf(BPF_LINK_CREATE, &mut link)
        .map_err(|e| io::Error::new(e.kind(), format!("BPF_LINK_CREATE (XDP): {e}")))?;
    Ok(XdpLink { _prog: prog, link })
}

/// Loads `insns` as an XDP program (through the verifier) without attaching it.
pub fn load(insns: &[Insn], name: &str) -> io::Result<OwnedFd> {
    let license = b"GPL\0";
    let mut log = vec![0u8; 4096];
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        expected_attach_type: BPF_XDP,
        ..ProgLoadAttr::default()
    };
    for (d, s) in attr.prog_name.iter_mut().zip(name.bytes().take(15)) {
        *d = s;
    }
    // Frames in several buffers (a jumbo MTU: veth refuses a program that
    // cannot take them): the programs read headers in the first buffer
    // only, so they can. A kernel without the flag (before 5.18) refuses
    // it: loaded without then.
    attr.prog_flags = BPF_F_XDP_HAS_FRAGS;
    if let Ok(fd) = bpf(BPF_PROG_LOAD, &mut attr) {
        return Ok(fd);
    }
    attr.prog_flags = 0;
    log.fill(0);
    bpf(BPF_PROG_LOAD, &mut attr).map_err(|e| {
        let text = String::from_utf8_lossy(&log);
        io::Error::new(
            e.kind(),
            format!("BPF_PROG_LOAD: {e}: {}", text.trim_end_matches('\0').trim()),
        )
    })
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
    ctx_size_in: u32,
    ctx_size_out: u32,
    ctx_in: u64,
    ctx_out: u64,
    flags: u32,
    cpu: u32,
    batch_size: u32,
    _rest: [u32; 9],
}

/// Runs a loaded XDP program once on `frame` (BPF_PROG_TEST_RUN) and
/// returns its verdict: programs can be checked without any traffic.
pub fn test_run(prog: &OwnedFd, frame: &[u8]) -> io::Result<u32> {
    test_run_meta(prog, frame).map(|(verdict, _)| verdict)
}

/// The XDP context (`struct xdp_md`) a test run takes and gives back.
#[repr(C)]
#[derive(Default)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// As [`test_run`], with the frame's metadata: the verdict and the bytes
/// the program put in front of the frame (bpf_xdp_adjust_meta; empty
/// when none). The kernel's test run gives back the metadata and the
/// frame as one buffer, and where the frame starts in it in the context
/// (Linux 5.15 and later).
pub fn test_run_meta(prog: &OwnedFd, frame: &[u8]) -> io::Result<(u32, Vec<u8>)> {
    let mut out = vec![0u8; frame.len() + 256];
    let ctx_in = XdpMd {
        data_end: frame.len() as u32,
        ..XdpMd::default()
    };
    let mut ctx_out = XdpMd::default();
    let mut attr = TestRunAttr {
        prog_fd: prog.as_raw_fd() as u32,
        data_size_in: frame.len() as u32,
        data_size_out: out.len() as u32,
        data_in: frame.as_ptr() as u64,
        data_out: out.as_mut_ptr() as u64,
        repeat: 1,
        ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
        ctx_size_out: std::mem::size_of::<XdpMd>() as u32,
        ctx_in: (&ctx_in as *const XdpMd) as u64,
        ctx_out: (&mut ctx_out as *mut XdpMd) as u64,
        ..TestRunAttr::default()
    };
    test_run_call(&mut attr)?;
    let meta = (ctx_out.data as usize).min(out.len());
    out.truncate(meta);
    Ok((attr.retval, out))
}

fn test_run_call(attr: &mut TestRunAttr) -> io::Result<()> {
    // SAFETY: valid bpf_attr for BPF_PROG_TEST_RUN; the buffers it points
    // at outlive the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_TEST_RUN,
            attr as *mut TestRunAttr,
            std::mem::size_of::<TestRunAttr>(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skip_unless_root;

    #[test]
    fn drop_program_attaches_to_loopback_and_detaches() {
        if skip_unless_root("attaching XDP") {
            return;
        }
        let lo = crate::iface::index("lo").unwrap();
        // Attach XDP_PASS (not DROP: loopback carries this machine's traffic).
        let link = attach(&verdict_program(XDP_PASS), lo, "lr_pass").unwrap();
        assert!(link.fd() > 0);
        let info =
            std::fs::read_to_string("/proc/self/fdinfo/".to_string() + &link.fd().to_string())
                .unwrap();
        assert!(info.contains("link_type"), "{info}");
        drop(link);
        assert!(
            attach(&verdict_program(XDP_PASS), 999_999, "lr_pass").is_err(),
            "no such ifindex"
        );
    }

    /// Ethernet + IPv4 (or IPv6) + UDP with `payload` bytes, or TCP.
    fn frame(v6: bool, proto: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        let l4 = if proto == 17 { 8 } else { 20 };
        if v6 {
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&((l4 + payload) as u16).to_be_bytes());
            ip.extend_from_slice(&[proto, 64]);
            ip.extend_from_slice(&[0; 32]);
            f.extend_from_slice(&ip);
        } else {
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&((20 + l4 + payload) as u16).to_be_bytes());
            ip.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0]);
            ip.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
            f.extend_from_slice(&ip);
        }
        let mut l4h = vec![0u8; l4];
        if proto == 17 {
            l4h[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
        }
        f.extend_from_slice(&l4h);
        f.extend(std::iter::repeat_n(0x41, payload));
        f
    }

    #[test]
    fn udp_payload_drop_program_verdicts() {
        if skip_unless_root("loading XDP programs") {
            return;
        }
        let prog = load(&udp_payload_drop_program(4), "lr_udp_sink").unwrap();
        let run = |f: &[u8]| test_run(&prog, f).unwrap() as i32;
        for v6 in [false, true] {
            assert_eq!(run(&frame(v6, 17, 18)), XDP_DROP, "v6={v6} 18 B UDP");
            assert_eq!(run(&frame(v6, 17, 5)), XDP_DROP, "v6={v6} 5 B UDP");
            assert_eq!(run(&frame(v6, 17, 4)), XDP_PASS, "v6={v6} 4 B UDP");
            assert_eq!(run(&frame(v6, 17, 0)), XDP_PASS, "v6={v6} empty UDP");
            assert_eq!(run(&frame(v6, 6, 100)), XDP_PASS, "v6={v6} TCP");
            let mut short = frame(v6, 17, 18);
            short.truncate(if v6 { 60 } else { 40 });
            assert_eq!(run(&short), XDP_PASS, "v6={v6} truncated");
        }
        let mut options = frame(false, 17, 18);
        options[14] = 0x46;
        assert_eq!(run(&options), XDP_PASS, "IPv4 with options");
        let mut arp = frame(false, 17, 18);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(run(&arp), XDP_PASS, "ARP");
        // The limit is the program's parameter, not a constant.
        let prog18 = load(&udp_payload_drop_program(18), "lr_udp_sink").unwrap();
        assert_eq!(
            test_run(&prog18, &frame(false, 17, 18)).unwrap() as i32,
            XDP_PASS
        );
        assert_eq!(
            test_run(&prog18, &frame(true, 17, 19)).unwrap() as i32,
            XDP_DROP
        );
    }

    #[test]
    fn udp_filter_takes_only_udp_to_its_ports() {
        if skip_unless_root("loading XDP programs") {
            return;
        }
        // XDP_DROP stands for "taken" (the real program redirects).
        let taken = verdict_program(XDP_DROP);
        let any = load(&udp_filter_program(None, false, &taken), "lr_f_any").unwrap();
        let ports = load(
            &udp_filter_program(Some((9, 20)), false, &taken),
            "lr_f_ports",
        )
        .unwrap();
        let probes = load(&udp_filter_program(None, true, &taken), "lr_f_probes").unwrap();
        let run = |p: &OwnedFd, f: &[u8]| test_run(p, f).unwrap() as i32;
        let with_port = |mut f: Vec<u8>, v6: bool, port: u16| {
            let at = 14 + if v6 { 40 } else { 20 } + 2;
            f[at..at + 2].copy_from_slice(&port.to_be_bytes());
            f
        };
        for v6 in [false, true] {
            assert_eq!(run(&any, &frame(v6, 17, 18)), XDP_DROP, "v6={v6} UDP");
            assert_eq!(run(&any, &frame(v6, 6, 18)), XDP_PASS, "v6={v6} TCP");
            assert_eq!(run(&any, &frame(v6, 1, 18)), XDP_PASS, "v6={v6} ICMP");
            for (port, want) in [(8, XDP_PASS), (9, XDP_DROP), (20, XDP_DROP), (21, XDP_PASS)] {
                let f = with_port(frame(v6, 17, 18), v6, port);
                assert_eq!(run(&ports, &f), want, "v6={v6} port {port}");
            }
            let mut short = frame(v6, 17, 18);
            short.truncate(14 + if v6 { 40 } else { 20 } + 4);
            assert_eq!(run(&any, &short), XDP_PASS, "v6={v6} truncated UDP header");
            // Probes only: a UDP payload that starts with the probe's
            // magic and version; a DNS query or any other datagram passes.
            let at = 14 + if v6 { 40 } else { 20 } + 8;
            let mut probe = frame(v6, 17, 18);
            probe[at..at + 2].copy_from_slice(&[0xA9, 1]);
            assert_eq!(run(&probes, &probe), XDP_DROP, "v6={v6} probe");
            assert_eq!(
                run(&probes, &frame(v6, 17, 18)),
                XDP_PASS,
                "v6={v6} other UDP"
            );
            let mut other_version = probe.clone();
            other_version[at + 1] = 2;
            assert_eq!(run(&probes, &other_version), XDP_PASS, "v6={v6} version 2");
            let mut cut = probe.clone();
            cut.truncate(at + 1);
            assert_eq!(run(&probes, &cut), XDP_PASS, "v6={v6} truncated probe");
            assert_eq!(run(&probes, &frame(v6, 6, 18)), XDP_PASS, "v6={v6} TCP");
        }
        // IPv4 options move the UDP header: the port is read after them.
        let mut opt = frame(false, 17, 18);
        opt[14] = 0x46;
        opt.splice(34..34, [1, 1, 1, 1]);
        assert_eq!(run(&any, &opt), XDP_DROP, "IPv4 options");
        assert_eq!(run(&ports, &with_port(opt.clone(), false, 4)), XDP_PASS);
        let mut opt_port = opt.clone();
        opt_port[38 + 2..38 + 4].copy_from_slice(&9u16.to_be_bytes());
        assert_eq!(run(&ports, &opt_port), XDP_DROP, "port after the options");
        // One VLAN tag.
        let mut tagged = frame(false, 17, 18);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert_eq!(run(&any, &tagged), XDP_DROP, "VLAN-tagged UDP");
        let mut arp = frame(false, 17, 18);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(run(&any, &arp), XDP_PASS, "ARP");
        // The redirecting program is accepted by the verifier too.
        let map = XskMap::new(1).unwrap();
        for f in [
            RxFilter::All,
            RxFilter::Udp(None),
            RxFilter::Udp(Some((9, 9))),
            RxFilter::Probes,
        ] {
            for stamp in [false, true] {
                let p = load(&f.program(map.fd(), stamp), "lr_f_redirect").unwrap();
                // No socket in the map: everything passes.
                assert_eq!(run(&p, &frame(false, 17, 18)), XDP_PASS, "{f:?}");
            }
        }
    }

    #[test]
    fn stamping_program_puts_the_receive_time_in_front_of_taken_frames() {
        if skip_unless_root("loading XDP programs") {
            return;
        }
        // XDP_DROP stands for "redirected", as above.
        let taken = stamp_then(&verdict_program(XDP_DROP));
        let probes = load(&udp_filter_program(None, true, &taken), "lr_f_stamp").unwrap();
        let mut probe = frame(false, 17, 18);
        probe[14 + 20 + 8..14 + 20 + 10].copy_from_slice(&[0xA9, 1]);
        let before = crate::clock::monotonic_ns();
        let (verdict, meta) = test_run_meta(&probes, &probe).unwrap();
        let after = crate::clock::monotonic_ns();
        assert_eq!(verdict as i32, XDP_DROP);
        assert_eq!(meta.len(), RX_STAMP_LEN, "{meta:?}");
        let t = u64::from_ne_bytes(meta[..8].try_into().unwrap());
        let magic = u64::from_ne_bytes(meta[8..].try_into().unwrap());
        assert_eq!(magic, RX_STAMP_MAGIC);
        // The kernel's CLOCK_MONOTONIC, read while the program ran.
        assert!((before..=after).contains(&t), "{before} <= {t} <= {after}");
        // A frame the filter passes gets no metadata.
        let (verdict, meta) = test_run_meta(&probes, &frame(false, 17, 18)).unwrap();
        assert_eq!((verdict as i32, meta.len()), (XDP_PASS, 0));
        // The real program (no socket in the map: it passes) stamps too,
        // for every filter; without `stamp`, nothing.
        let map = XskMap::new(1).unwrap();
        for f in [RxFilter::All, RxFilter::Udp(None), RxFilter::Probes] {
            for stamp in [false, true] {
                let p = load(&f.program(map.fd(), stamp), "lr_f_redirect").unwrap();
                let (verdict, meta) = test_run_meta(&p, &probe).unwrap();
                assert_eq!(verdict as i32, XDP_PASS, "{f:?}");
                let want = if stamp { RX_STAMP_LEN } else { 0 };
                assert_eq!(meta.len(), want, "{f:?} stamp={stamp}");
            }
        }
    }
}
