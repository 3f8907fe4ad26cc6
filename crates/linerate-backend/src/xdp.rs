//! XDP programs loaded with raw bpf(2) calls and attached with a BPF link:
//! no clang, no libbpf, no bpffs, and it works inside a network namespace.
//! The attachment lives as long as the returned [`XdpLink`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: i64 = 0;
const BPF_MAP_UPDATE_ELEM: i64 = 2;
const BPF_PROG_LOAD: i64 = 5;
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
    let prog = bpf(BPF_PROG_LOAD, &mut attr).map_err(|e| {
        let text = String::from_utf8_lossy(&log);
        io::Error::new(
            e.kind(),
            format!("BPF_PROG_LOAD: {e}: {}", text.trim_end_matches('\0').trim()),
        )
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_program_attaches_to_loopback_and_detaches() {
        if !nix_root() {
            assert!(
                std::env::var("LINERATE_STRICT").as_deref() != Ok("1"),
                "LINERATE_STRICT=1: attaching XDP needs root"
            );
            eprintln!("SKIP: attaching XDP needs root");
            return;
        }
        let lo = crate::raw::ifindex("lo").unwrap();
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

    fn nix_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }
}
