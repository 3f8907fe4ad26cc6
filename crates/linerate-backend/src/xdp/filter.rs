//! The receive filter an AF_XDP socket's program applies: which frames
//! it takes (all, UDP to some ports, linerate's probes) and which go on to
//! the kernel, written as labelled BPF and resolved to jumps.

use super::{Insn, XDP_PASS, asm, redirect_to_xsk_program, stamp_then};

/// Which received frames an AF_XDP receiver takes from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxFilter {
    /// Every frame of the queue (`--take-queue`): ARP, ping, SSH and all.
    All,
    /// UDP over IPv4 (options allowed) or IPv6 (UDP as the first header),
    /// untagged or with one 802.1Q tag, to a destination port in the range
    /// (`None`: any port); every other frame goes on to the kernel.
    Udp(Option<(u16, u16)>),
    /// Such UDP (any port) whose payload starts with linerate's probe
    /// (magic 0xA9, version 1): only linerate's own test traffic, so a UDP
    /// service on the interface (DNS, NTP …) still gets its datagrams. The
    /// default of sink and fwd.
    Probes,
}

impl RxFilter {
    /// What the flags ask: `--take-queue` every frame, `--udp-ports` UDP
    /// to those ports, by default only linerate's probe frames (a UDP
    /// service on the interface keeps its datagrams).
    pub fn from_flags(take_queue: bool, udp_ports: Option<(u16, u16)>) -> RxFilter {
        match (take_queue, udp_ports) {
            (true, _) => RxFilter::All,
            (false, Some(p)) => RxFilter::Udp(Some(p)),
            (false, None) => RxFilter::Probes,
        }
    }

    /// `--udp-ports`: one port or LO-HI.
    pub fn port_range(s: &str) -> Result<(u16, u16), String> {
        let bad = || format!("'{s}' is not a port or a range of ports (9, 1000-1999)");
        let (lo, hi) = s.split_once('-').unwrap_or((s, s));
        let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
        let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
        if lo > hi {
            return Err(bad());
        }
        Ok((lo, hi))
    }

    /// The XDP program that redirects the frames this filter takes to
    /// the AF_XDP socket of their queue and passes the rest; with
    /// `stamp`, each frame it redirects carries its receive time in its
    /// metadata ([`stamp_then`]: a receiver's latency from the kernel's
    /// time, not its own wake-up's).
    pub fn program(&self, xskmap_fd: i32, stamp: bool) -> Vec<Insn> {
        let redirect = redirect_to_xsk_program(xskmap_fd);
        let on_match = if stamp {
            stamp_then(&redirect)
        } else {
            redirect.to_vec()
        };
        match self {
            RxFilter::All => on_match,
            RxFilter::Udp(ports) => udp_filter_program(*ports, false, &on_match),
            RxFilter::Probes => udp_filter_program(None, true, &on_match),
        }
    }

    /// How the filter reads in a message ("UDP to ports 9-9").
    pub fn describe(&self) -> String {
        match self {
            RxFilter::All => "every frame of the queue".into(),
            RxFilter::Udp(None) => "UDP frames (everything else goes to the kernel)".into(),
            RxFilter::Udp(Some((lo, hi))) => {
                format!("UDP to ports {lo}-{hi} (everything else goes to the kernel)")
            }
            RxFilter::Probes => {
                "linerate's probe frames (every other frame, UDP too, goes to the kernel)".into()
            }
        }
    }
}

/// Runs `on_match` (which finds the context in r1) for the UDP frames
/// [`RxFilter::Udp`] describes (with `probes`, only those whose payload
/// starts with linerate's probe: [`RxFilter::Probes`]); returns XDP_PASS
/// for every other frame.
pub fn udp_filter_program(ports: Option<(u16, u16)>, probes: bool, on_match: &[Insn]) -> Vec<Insn> {
    let mut code = Vec::new();
    filter_link(&mut code);
    filter_ipv6(&mut code);
    filter_ipv4(&mut code);
    filter_udp(&mut code, ports, probes);
    resolve_labels(&code, on_match)
}

/// A place in the filter program jumps go to.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Label {
    NoVlan,
    V4,
    Udp,
    Pass,
    Match,
}

/// A filter instruction, the label it jumps to, the label it is at.
pub(super) type Line = (Insn, Option<Label>, Option<Label>);

/// The filter's Ethernet section: the context's data pointers (r2, r3),
/// an optional VLAN tag, the IP header's start in r6; IPv4 jumps to
/// `V4`, IPv6 falls through, anything else passes.
pub(super) fn filter_link(code: &mut Vec<Line>) {
    use asm::*;
    let be = |t: u16| i32::from(u16::from_le_bytes(t.to_be_bytes()));
    let (vlan, ipv4, ipv6) = (be(0x8100), be(0x0800), be(0x86dd));
    code.extend([
        (ldx_w(R2, R1, 0), None, None), // data
        (ldx_w(R3, R1, 4), None, None), // data_end
        (mov(R4, R2), None, None),
        (add_imm(R4, 14), None, None),
        (jgt(R4, R3, 0), Some(Label::Pass), None),
        (ldx_h(R5, R2, 12), None, None), // ethertype
        (mov(R6, R2), None, None),
        (add_imm(R6, 14), None, None), // r6: the IP header
        (jne_imm(R5, vlan, 0), Some(Label::NoVlan), None),
        (mov(R4, R2), None, None),
        (add_imm(R4, 18), None, None),
        (jgt(R4, R3, 0), Some(Label::Pass), None),
        (ldx_h(R5, R2, 16), None, None),
        (add_imm(R6, 4), None, None),
        (jeq_imm(R5, ipv4, 0), Some(Label::V4), Some(Label::NoVlan)),
        (jne_imm(R5, ipv6, 0), Some(Label::Pass), None),
    ]);
}

/// The filter's IPv6 section: UDP must be the first header; r6 moves to
/// it.
pub(super) fn filter_ipv6(code: &mut Vec<Line>) {
    use asm::*;
    code.extend([
        (mov(R4, R6), None, None),
        (add_imm(R4, 40), None, None),
        (jgt(R4, R3, 0), Some(Label::Pass), None),
        (ldx_b(R5, R6, 6), None, None),
        (jne_imm(R5, 17, 0), Some(Label::Pass), None),
        (add_imm(R6, 40), None, None),
        (ja(0), Some(Label::Udp), None),
    ]);
}

/// The filter's IPv4 section (at `V4`): protocol, then the header's own
/// length; r6 moves past it.
pub(super) fn filter_ipv4(code: &mut Vec<Line>) {
    use asm::*;
    code.extend([
        (mov(R4, R6), None, Some(Label::V4)),
        (add_imm(R4, 20), None, None),
        (jgt(R4, R3, 0), Some(Label::Pass), None),
        (ldx_b(R5, R6, 9), None, None),
        (jne_imm(R5, 17, 0), Some(Label::Pass), None),
        (ldx_b(R5, R6, 0), None, None),
        (and_imm(R5, 0x0f), None, None),
        (lsh_imm(R5, 2), None, None),
        (jlt_imm(R5, 20, 0), Some(Label::Pass), None),
        (add(R6, R5), None, None),
    ]);
}

/// The filter's UDP section (at `Udp`, the header at r6): the
/// destination port within `ports`, with `probes` a probe in the
/// payload; then the jump to `Match` and the `Pass` exit.
pub(super) fn filter_udp(code: &mut Vec<Line>, ports: Option<(u16, u16)>, probes: bool) {
    use asm::*;
    code.extend([
        (mov(R4, R6), None, Some(Label::Udp)),
        (add_imm(R4, 8), None, None),
        (jgt(R4, R3, 0), Some(Label::Pass), None),
    ]);
    if let Some((lo, hi)) = ports {
        code.extend([
            (ldx_h(R5, R6, 2), None, None),
            (be16(R5), None, None),
            (jlt_imm(R5, i32::from(lo), 0), Some(Label::Pass), None),
            (jgt_imm(R5, i32::from(hi), 0), Some(Label::Pass), None),
        ]);
    }
    if probes {
        // The probe's first two bytes after the UDP header: magic 0xA9,
        // version 1 (loaded as a little-endian u16: 0x01A9).
        code.extend([
            (mov(R4, R6), None, None),
            (add_imm(R4, 10), None, None),
            (jgt(R4, R3, 0), Some(Label::Pass), None),
            (ldx_h(R5, R6, 8), None, None),
            (jne_imm(R5, 0x01A9, 0), Some(Label::Pass), None),
        ]);
    }
    code.extend([
        (ja(0), Some(Label::Match), None),
        (mov_imm(R0, XDP_PASS), None, Some(Label::Pass)),
        (exit(), None, None),
    ]);
}

/// The program: `code` with its jumps' offsets set from their labels,
/// then `on_match` (at `Match`).
pub(super) fn resolve_labels(code: &[Line], on_match: &[Insn]) -> Vec<Insn> {
    let match_at = code.len();
    let at = |l: Label| {
        if l == Label::Match {
            return match_at;
        }
        code.iter()
            .position(|(_, _, here)| *here == Some(l))
            .expect("label placed")
    };
    let mut out: Vec<Insn> = code
        .iter()
        .enumerate()
        .map(|(pc, (insn, target, _))| {
            let mut insn = *insn;
            if let Some(t) = target {
                insn.off = (at(*t) as isize - pc as isize - 1) as i16;
            }
            insn
        })
        .collect();
    out.extend_from_slice(on_match);
    out
}
