//! VXLAN encapsulation (RFC 7348) of a flow's frames: outer Ethernet (an
//! optional 802.1Q tag), IPv4 or IPv6, UDP, the VXLAN header, then the
//! inner frame, which is an ordinary [`Template`]'s (it carries the probe)
//! and is built and patched as one.
//!
//! The inner frame is sized as a whole Ethernet frame, FCS included (the
//! OTG model's lengths: a 256-byte frame behind IPv6 outer headers has an
//! inner IPv4 total length of 164); VXLAN carries no inner FCS, so those
//! last 4 bytes of the outer UDP payload are zeros.
//!
//! The outer headers are fixed per flow; the VNI steps per frame. The outer
//! UDP checksum is updated per frame from the VNI and the inner frame's
//! MACs and (inner IPv4) addresses alone: the inner frame's checksummed
//! parts sum to known values whatever its probe holds (an IPv4 header
//! with its checksum sums to zero; a UDP or TCP segment with its checksum,
//! to minus its pseudo-header's sum), so a frame's sequence and send time
//! never change the outer checksum.

pub use crate::encap::Vxlan;
use crate::flows::FlowFields;
use crate::template::{FCS, Framing, Template, TemplateError, WireFlow, emit_l2, emit_l3, emit_l4};
use linerate_wire::checksum;
use linerate_wire::vxlan::{HEADER_LEN, VNI_MAX};
use linerate_wire::{VxlanHeader, VxlanRepr};

impl Vxlan {
    /// Bytes before the inner frame: outer Ethernet (and tag), IP, UDP,
    /// VXLAN.
    pub fn prefix_len(&self) -> usize {
        14 + if self.vlan.is_some() { 4 } else { 0 }
            + if self.outer.src_ip.is_ipv6() { 40 } else { 20 }
            + 8
            + HEADER_LEN
    }

    /// The VNI of value `digit` (below the range's count).
    #[inline]
    pub fn vni_of(&self, digit: u64) -> u32 {
        (self
            .vni
            .first
            .wrapping_add(u128::from(digit).wrapping_mul(self.vni.step))
            & u128::from(VNI_MAX)) as u32
    }

    /// The framing of the outer headers alone.
    fn outer_framing(&self) -> Framing {
        Framing {
            vlan: self.vlan,
            dscp: self.dscp,
            ttl: self.ttl,
            ..Framing::default()
        }
    }
}

/// A frame size's encapsulation: its outer headers as bytes, where the VNI
/// and the outer UDP checksum go, and the checksum's per-flow base.
#[derive(Debug, Clone)]
pub struct Encap {
    prefix: Vec<u8>,
    /// The VXLAN header's VNI word (VNI and last reserved byte).
    vni_at: usize,
    /// The outer UDP checksum.
    csum_at: usize,
    reserved1: u8,
    /// The inner frame is IPv4 (its addresses enter the outer sum).
    inner_v4: bool,
    /// `checksum::update_base` of the outer UDP checksum.
    base: u32,
    /// The inner frame's length (without its FCS) and the frame's.
    inner_len: usize,
    len: usize,
}

/// A `frame_bytes`-byte frame's inner template and encapsulation for
/// `flow` (the inner headers) under `framing` (whose `vxlan` is set).
pub fn templates(
    frame_bytes: usize,
    flow: &FlowFields,
    framing: &Framing,
) -> Result<(Template, Encap), TemplateError> {
    let vx = framing.vxlan.as_ref().ok_or(TemplateError::Family)?;
    let prefix = vx.prefix_len();
    let inner_framing = Framing {
        mtu: None,
        vxlan: None,
        ..framing.clone()
    };
    // The inner frame, its FCS included, fills the outer UDP payload past
    // the VXLAN header.
    let inner = Template::new(
        frame_bytes.saturating_sub(prefix + FCS).max(1),
        flow,
        &inner_framing,
    )
    .map_err(|e| match e {
        // The outer frame's size, with the encapsulation in the minimum.
        TemplateError::TooSmall { min, .. } => TemplateError::TooSmall {
            size: frame_bytes,
            min: min + prefix + FCS,
            what: "VXLAN's outer headers, the inner headers and linerate's 18-byte probe",
        },
        e => e,
    })?;
    let encap = Encap::new(frame_bytes, vx, &inner, flow, framing.mtu)?;
    Ok((inner, encap))
}

impl Encap {
    fn new(
        frame_bytes: usize,
        vx: &Vxlan,
        inner: &Template,
        flow: &FlowFields,
        mtu: Option<usize>,
    ) -> Result<Self, TemplateError> {
        let o = &vx.outer;
        if o.src_ip.is_ipv6() != o.dst_ip.is_ipv6()
            || flow.src_ip.is_ipv6() != flow.dst_ip.is_ipv6()
        {
            return Err(TemplateError::Family);
        }
        let outer = vx.outer_framing();
        let l3 = 14 + if vx.vlan.is_some() { 4 } else { 0 };
        let l4 = l3 + if o.src_ip.is_ipv6() { 40 } else { 20 };
        let at = l4 + 8;
        let p = vx.prefix_len();
        let len = frame_bytes - FCS;
        if let Some(mtu) = mtu
            && len - l3 > mtu
        {
            return Err(TemplateError::OverMtu {
                size: frame_bytes,
                mtu,
                ip: len - l3,
            });
        }
        let mut b = vec![0u8; len];
        emit_l2(&mut b, o, &outer, o.src_ip.is_ipv6());
        emit_l3(&mut b[l3..], o, &outer, len - l4)?;
        VxlanRepr {
            flags: vx.flags,
            reserved0: vx.reserved0,
            vni: vx.vni_of(0),
            reserved1: vx.reserved1,
        }
        .emit(&mut VxlanHeader::new_unchecked(&mut b[at..]));
        inner.write(&mut b[p..], flow, 0, 0, 0);
        // (the 4 bytes after the inner frame stay zero)
        emit_l4(&mut b[l4..], o, &outer, len - l4);
        let csum_at = l4 + 6;
        let c = u16::from_be_bytes([b[csum_at], b[csum_at + 1]]);
        let mut e = Encap {
            prefix: b[..p].to_vec(),
            vni_at: at + 4,
            csum_at,
            reserved1: vx.reserved1,
            inner_v4: !flow.src_ip.is_ipv6(),
            base: 0,
            inner_len: inner.len(),
            len,
        };
        e.base = checksum::update_base(c, e.sum(&WireFlow::new(flow), vx.vni_of(0)));
        Ok(e)
    }

    /// Bytes handed to the NIC (the frame without its FCS).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the inner frame starts.
    pub fn prefix_len(&self) -> usize {
        self.prefix.len()
    }

    /// What the outer checksum covers that changes from frame to frame:
    /// the VNI word, the inner MACs, and minus the inner IPv4 addresses
    /// (the inner IPv6 header's addresses and its segment's pseudo-header
    /// cancel out).
    #[inline]
    fn sum(&self, w: &WireFlow, vni: u32) -> u32 {
        let word = (vni & VNI_MAX) << 8 | u32::from(self.reserved1);
        let macs = w
            .macs
            .chunks_exact(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
            .sum::<u32>();
        let addrs = if self.inner_v4 {
            u32::from(!checksum::fold(w.addr_sum))
        } else {
            0
        };
        (word >> 16) + (word & 0xffff) + macs + addrs
    }

    /// Lays the outer headers and the zeros after the inner frame into
    /// `out` (at least [`len`](Self::len) bytes): the inner template goes
    /// at [`prefix_len`](Self::prefix_len).
    #[inline]
    pub fn lay(&self, out: &mut [u8]) {
        out[..self.prefix.len()].copy_from_slice(&self.prefix);
        out[self.prefix.len() + self.inner_len..self.len].fill(0);
    }

    /// Writes the VNI and the outer UDP checksum over a laid frame whose
    /// inner frame carries flow `w` (its checksums right).
    #[inline]
    pub fn put(&self, out: &mut [u8], w: &WireFlow, vni: u32) {
        let word = (vni & VNI_MAX) << 8 | u32::from(self.reserved1);
        out[self.vni_at..self.vni_at + 4].copy_from_slice(&word.to_be_bytes());
        let c = checksum::udp_nonzero(checksum::update_from(self.base, self.sum(w, vni)));
        out[self.csum_at..self.csum_at + 2].copy_from_slice(&c.to_be_bytes());
    }

    /// Writes one whole frame into `out`: the inner frame as
    /// [`Template::write`] makes it, encapsulated with `vni`.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        &self,
        out: &mut [u8],
        inner: &Template,
        flow: &FlowFields,
        flow_id: u16,
        seq: u64,
        tx_ns: u64,
        vni: u32,
    ) {
        self.lay(out);
        inner.write(&mut out[self.prefix.len()..], flow, flow_id, seq, tx_ns);
        self.put(out, &WireFlow::new(flow), vni);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FlowSpec;
    use crate::flows::Range;
    use crate::template::Stamp;
    use linerate_wire::{Ipv4Packet, L3, L4, MacAddr, TcpFlags, TcpPacket, UdpPacket, parse_frame};
    use proptest::prelude::*;
    use std::net::IpAddr;

    fn outer(v6: bool) -> Vxlan {
        let (s, d): (IpAddr, IpAddr) = if v6 {
            (
                "2001:db8:1::1".parse().unwrap(),
                "2001:db8:1::2".parse().unwrap(),
            )
        } else {
            ("198.18.1.1".parse().unwrap(), "198.18.1.2".parse().unwrap())
        };
        Vxlan {
            outer: FlowFields {
                src_mac: MacAddr([0, 0, 1, 1, 1, 1]),
                dst_mac: MacAddr([0, 0, 1, 1, 1, 2]),
                src_ip: s,
                dst_ip: d,
                src_port: 4789,
                dst_port: 4789,
            },
            vlan: None,
            dscp: 0,
            ttl: 64,
            flags: 0x08,
            reserved0: 0,
            reserved1: 0,
            vni: Range {
                first: 1000,
                count: 5,
                step: 1,
            },
        }
    }

    fn inner_spec(v6: bool) -> FlowSpec {
        let mut s = if v6 {
            FlowSpec::parse(
                "00:00:01:01:01:03-00:00:01:01:01:06",
                "00:00:01:01:01:04",
                "2001:db8:1::3-2001:db8:1::9",
                "2001:db8:1::5",
                "80-90",
                "80",
            )
        } else {
            FlowSpec::parse(
                "00:00:01:01:01:03-00:00:01:01:01:06",
                "00:00:01:01:01:04",
                "198.18.1.3-198.18.1.9",
                "198.18.1.4",
                "80-90",
                "80",
            )
        }
        .unwrap();
        s.lockstep = true;
        s
    }

    /// The suite's frame, byte for byte where it checks: IPv6 outer, IPv4
    /// inner, TCP, 256 bytes, VNIs 1000…1004.
    #[test]
    fn the_conformance_suites_frame() {
        let mut vx = outer(true);
        vx.outer.src_ip = "2001:db8:1::1".parse().unwrap();
        let framing = Framing {
            tcp_flags: Some(0),
            vxlan: Some(vx),
            ..Framing::default()
        };
        let flow = FlowFields {
            src_mac: MacAddr([0, 0, 1, 1, 1, 3]),
            dst_mac: MacAddr([0, 0, 1, 1, 1, 4]),
            src_ip: "198.18.1.3".parse().unwrap(),
            dst_ip: "198.18.1.4".parse().unwrap(),
            src_port: 80,
            dst_port: 80,
        };
        let (t, e) = templates(256, &flow, &framing).unwrap();
        assert_eq!((e.len(), e.prefix_len()), (252, 70));
        for n in 0..7u64 {
            let mut b = vec![0u8; 252];
            e.write(&mut b, &t, &flow, 0, n + 1, 0, vx.vni_of(n % 5));
            let be16 = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
            assert_eq!(&b[0..12], &[0, 0, 1, 1, 1, 2, 0, 0, 1, 1, 1, 1]);
            assert_eq!(be16(12), 0x86dd);
            assert_eq!(be16(18), 256 - 14 - 40 - 4);
            assert_eq!(b[20], 17);
            assert_eq!((be16(54), be16(56), be16(58)), (4789, 4789, 198));
            assert_eq!(&b[62..66], &[0x08, 0, 0, 0]);
            let vni = 1000 + (n % 5) as u32;
            assert_eq!(
                &b[66..70],
                &[(vni >> 16) as u8, (vni >> 8) as u8, vni as u8, 0]
            );
            assert_eq!(&b[70..82], &[0, 0, 1, 1, 1, 4, 0, 0, 1, 1, 1, 3]);
            assert_eq!(be16(82), 0x0800);
            assert_eq!(be16(86), 256 - 92);
            assert_eq!(b[93], 6);
            assert_eq!(&b[96..104], &[198, 18, 1, 3, 198, 18, 1, 4]);
            assert_eq!((be16(104), be16(106)), (80, 80));
            assert_eq!(&b[248..], &[0, 0, 0, 0]);
            let p = parse_frame(&b).unwrap();
            assert_eq!(p.vxlan.unwrap().vni, vni);
            assert_eq!(p.probe.unwrap().seq, n + 1);
            assert_eq!(linerate_wire::probe_of(&b), p.probe);
            let L3::Ipv6(ip) = p.l3 else { panic!() };
            assert!(
                UdpPacket::new_checked(&b[54..])
                    .unwrap()
                    .verify_checksum(ip.src.into(), ip.dst.into())
            );
        }
        // Too small for both header sets and the probe: the outer size said.
        assert!(matches!(
            templates(140, &flow, &framing),
            Err(TemplateError::TooSmall {
                size: 140,
                min: 150,
                ..
            })
        ));
    }

    #[test]
    fn the_smallest_frames() {
        let framing = Framing {
            vxlan: Some(outer(false)),
            ..Framing::default()
        };
        let f = inner_spec(false).flow(0);
        let (t, e) = templates(118, &f, &framing).unwrap();
        assert_eq!((e.len(), e.prefix_len(), t.len()), (114, 50, 60));
        assert!(matches!(
            templates(117, &f, &framing),
            Err(TemplateError::TooSmall {
                size: 117,
                min: 118,
                ..
            })
        ));
        let mtu = Framing {
            mtu: Some(1500),
            ..framing
        };
        assert!(templates(1518, &f, &mtu).is_ok());
        assert!(matches!(
            templates(1519, &f, &mtu),
            Err(TemplateError::OverMtu { ip: 1501, .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Frames built in place (laid, flow put, sequence put, VNI and
        /// outer checksum put) are the frames `write` makes, parse back to
        /// their VNI, inner flow and probe, and every checksum (outer UDP,
        /// inner IPv4 and transport) holds.
        #[test]
        fn encapsulated_frames_are_valid(v6_out in any::<bool>(), v6_in in any::<bool>(), tcp in any::<bool>(),
                                         vlan in any::<bool>(), i in any::<u64>(), j in any::<u64>(),
                                         seq in any::<u64>(), ts in any::<u64>(), size in 0usize..1400,
                                         vni_first in 0u32..=VNI_MAX, vni_n in 0u64..10) {
            let mut vx = outer(v6_out);
            vx.vlan = vlan.then_some((7, 3));
            vx.vni.first = u128::from(vni_first);
            let s = inner_spec(v6_in);
            let framing = Framing {
                tcp_flags: tcp.then_some(TcpFlags::ACK),
                vlan: (!vlan).then_some((9, 1)),
                vxlan: Some(vx),
                ..Framing::default()
            };
            let size = 200 + size;
            let (t, e) = templates(size, &s.flow(0), &framing).unwrap();
            let f = s.flow(i);
            let vni = vx.vni_of(vni_n);
            let mut want = vec![0u8; 2048];
            e.write(&mut want, &t, &f, i as u16, seq, ts, vni);
            let frame = &want[..e.len()];
            // In place, over a slot that held another flow's frame.
            let mut slot = vec![0xa5u8; 2048];
            for (k, sq, vn) in [(j, seq ^ 1, vx.vni_of(vni_n + 1)), (i, seq, vni)] {
                let w = WireFlow::new(&s.flow(k));
                e.lay(&mut slot);
                let inner = &mut slot[e.prefix_len()..];
                t.lay(inner);
                t.put_flow(inner, &w, k as u16);
                t.put_seq(inner, &w, k as u16, sq, &Stamp::new(ts));
                e.put(&mut slot, &w, vn);
            }
            prop_assert_eq!(&slot[..e.len()], frame);
            let p = parse_frame(frame).unwrap();
            prop_assert_eq!(p.vxlan.unwrap().vni, vni);
            prop_assert_eq!(p.vlans[0].map(|v| v.vid), vlan.then_some(7));
            let (src, dst): (IpAddr, IpAddr) = match p.l3 {
                L3::Ipv4(r) => (r.src.into(), r.dst.into()),
                L3::Ipv6(r) => (r.src.into(), r.dst.into()),
                L3::Other(_) => { prop_assert!(false); unreachable!() }
            };
            let L4::Udp(u) = p.l4 else { prop_assert!(false); unreachable!() };
            prop_assert_eq!((u.src_port, u.dst_port), (4789, 4789));
            let l4 = frame.len() - u.payload_len - 8;
            prop_assert!(UdpPacket::new_checked(&frame[l4..]).unwrap().verify_checksum(src, dst));
            let probe = p.probe.unwrap();
            prop_assert_eq!((probe.flow_id, probe.seq, probe.tx_ns), (i as u16, seq, ts & ((1 << 48) - 1)));
            prop_assert_eq!(linerate_wire::probe_of(frame), Some(probe));
            // The inner frame: its own parse, checksums.
            let inner = &frame[e.prefix_len()..e.len() - 4];
            let q = parse_frame(inner).unwrap();
            prop_assert_eq!(q.eth.src, f.src_mac);
            prop_assert_eq!(q.vlans[0].map(|v| v.vid), (!vlan).then_some(9));
            let at = if vlan { 14 } else { 18 };
            if let L3::Ipv4(_) = q.l3 {
                prop_assert!(Ipv4Packet::new_checked(&inner[at..]).unwrap().verify_checksum());
            }
            let l4 = at + if v6_in { 40 } else { 20 };
            if tcp {
                prop_assert!(TcpPacket::new_checked(&inner[l4..]).unwrap().verify_checksum(f.src_ip, f.dst_ip));
            } else {
                prop_assert!(UdpPacket::new_checked(&inner[l4..]).unwrap().verify_checksum(f.src_ip, f.dst_ip));
            }
        }
    }
}
