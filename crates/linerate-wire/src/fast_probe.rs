//! The fast path of [`probe_of`](crate::probe_of): a probe frame's
//! usual layouts (Ethernet with one VLAN tag or none, IPv4 without options
//! or IPv6 without extension headers, UDP) checked a word at a time, and
//! the header a flow's frames share ([`SameHeader`]) compared in one or
//! two words. Where it finds a probe, [`parse_frame`](crate::parse_frame)
//! finds the same one; where it finds none, the careful parser decides.

use crate::Probe;

/// The smallest frame a probe fits in: Ethernet, IPv4, UDP, probe.
const PROBE_FRAME_MIN: usize = 14 + 20 + 8 + crate::PROBE_LEN;
/// The longest frame on the fast path: an untagged IPv4 packet of the
/// longest total length (longer frames, jumbo GRO aggregates, go through
/// the careful path).
const FAST_FRAME_MAX: usize = 14 + 0xffff;

/// The probe of a frame on the fast path of [`probe_of`] (Ethernet with
/// one VLAN tag or none, IPv4 without options or IPv6 without extension
/// headers, UDP; untagged IPv4 only where its lengths fill the frame, as a
/// probe frame's do), `None` for every other frame. Where it finds a probe,
/// [`parse_frame`] finds the same one; where it finds none, the frame may
/// still hold one ([`probe_of`] asks the full parser then). Header fields
/// are checked a word at a time.
#[inline(always)]
pub fn fast_probe(b: &[u8]) -> Option<Probe> {
    fast_probe_upto(b, FastLen::ALL)
}

/// The frame lengths [`fast_probe_upto`] takes: from the smallest frame a
/// probe fits in up to a bound (at most the longest an IPv4 length field
/// can say), kept as the span above the smallest so that a length is
/// checked against both ends in one compare. (A `u16`: the compiler then
/// knows a length that passes is at least the smallest probe frame, and
/// checks none of the fixed offsets read after.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastLen(u16);

const _: () = assert!(FAST_FRAME_MAX - PROBE_FRAME_MIN <= u16::MAX as usize);

impl FastLen {
    /// Every length the fast path can take.
    pub const ALL: FastLen = FastLen((FAST_FRAME_MAX - PROBE_FRAME_MIN) as u16);

    /// Frames up to `max` bytes (past the fast path's longest: that;
    /// below the smallest probe frame: that one length).
    pub const fn upto(max: usize) -> Self {
        let max = if max < FAST_FRAME_MAX {
            max
        } else {
            FAST_FRAME_MAX
        };
        FastLen(max.saturating_sub(PROBE_FRAME_MIN) as u16)
    }

    /// Whether a frame of `len` bytes is inside the bounds.
    #[inline(always)]
    pub const fn holds(self, len: usize) -> bool {
        len.wrapping_sub(PROBE_FRAME_MIN) <= self.0 as usize
    }
}

/// [`fast_probe`] for frames whose length `within` holds; `None` for the
/// others (whose probe, if any, [`parse_frame`] still finds): a receiver
/// that treats long frames apart (GRO aggregates) bounds the fast path in
/// the compare it makes anyway.
#[inline(always)]
pub fn fast_probe_upto(b: &[u8], within: FastLen) -> Option<Probe> {
    match untagged_ipv4(b, within) {
        Layout::Ipv4(p) => p,
        Layout::Other => {
            let l4 = slow_layouts(b)?;
            read_probe(b.get(l4 + 8..l4 + 8 + crate::PROBE_LEN)?)
        }
    }
}

/// [`fast_probe_upto`] for untagged IPv4 frames only (what a sender of
/// probes sends most): `None` for every other frame, whose probe, if any,
/// [`fast_probe_upto`] or [`parse_frame`] finds. A receiver that takes
/// this layout first reads its probe straight through, with no path
/// shared with the other layouts'.
#[inline(always)]
pub fn fast_probe_ipv4(b: &[u8], within: FastLen) -> Option<Probe> {
    match untagged_ipv4(b, within) {
        Layout::Ipv4(p) => p,
        Layout::Other => None,
    }
}

/// The header of the last untagged IPv4 probe frame a receiver took, as
/// far as [`fast_probe_ipv4`] reads it: the frame's length, EtherType,
/// version and header length (and the TOS byte beside them, which the
/// fast path does not read: a frame with another, one marked ECN CE,
/// goes the fast path's way, no less exact), IP total length, fragment bits, protocol,
/// UDP length, probe magic and version, and flow id (the fields that vary
/// from frame to frame, the IP identification, TTL, checksums, left
/// out). A frame whose header matches it is one `fast_probe_ipv4` takes,
/// with the same answer, in a few word compares rather than a check per
/// field (so a receiver counting a run of one flow's frames of one size
/// checks each against the run's first). Made by
/// [`fast_probe_ipv4_header`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SameHeader {
    /// The frame's length less the smallest probe frame's (a `u16`, so
    /// that a frame of the length is known to hold every fixed offset).
    excess: u16,
    /// Bytes 12..16: EtherType, version and header length, TOS.
    w12: u32,
    /// Bytes 16..24 under `m16`.
    w16: u64,
    /// Bytes 38..46 under `m38`.
    w38: u64,
    /// The masks as values (a compare against memory, not a 64-bit
    /// constant made again for every frame): [`SameHeader::M16`],
    /// [`SameHeader::M38`], and `M38` without the flow id.
    m16: u64,
    m38: u64,
    m38_other: u64,
}

/// The words of a [`SameHeader`] that hold the flow id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowWord(u64);

/// What [`SameHeader::probe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameAs {
    /// The header's own flow: the probe's sequence number and stamp.
    Flow { seq: u64, tx_ns: u64 },
    /// The same header but for the flow id: the whole probe, and what
    /// makes the header this flow's ([`SameHeader::set_flow`]).
    OtherFlow(Probe, FlowWord),
    /// Another header: ask [`fast_probe_ipv4`].
    No,
}

impl SameHeader {
    /// Bytes 16..24 compared: total length, flags and fragment offset (DF
    /// left out), protocol.
    const M16: u64 = u64::from_le_bytes([0xff, 0xff, 0, 0, 0x3f, 0xff, 0, 0xff]);
    /// Bytes 38..46 compared: UDP length, probe magic, version, flow id.
    const M38: u64 = u64::from_le_bytes([0xff, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    /// The flow id's bits in bytes 38..46.
    const FLOW: u64 = 0xffff << 48;

    /// Matches no frame (its words are no frame's under the masks).
    pub const NONE: SameHeader = SameHeader {
        excess: 0,
        w12: 0,
        w16: u64::MAX,
        w38: u64::MAX,
        m16: Self::M16,
        m38: Self::M38,
        m38_other: Self::M38 & !Self::FLOW,
    };

    /// The length of the frames with this header.
    pub fn frame_len(&self) -> usize {
        PROBE_FRAME_MIN + usize::from(self.excess)
    }

    /// The probe of `b` if its header is this one but for (at most) the
    /// flow id: then [`fast_probe_ipv4`] takes `b` and finds that probe.
    #[inline(always)]
    pub fn probe(&self, b: &[u8]) -> SameAs {
        let Some(b) = self.same_but_flow(b) else {
            return SameAs::No;
        };
        let seq = le64(b, 46).swap_bytes();
        let tx_ns = le64(b, 52).swap_bytes() & ((1 << 48) - 1);
        let w38 = le64(b, 38);
        if (w38 ^ self.w38) & self.m38 == 0 {
            return SameAs::Flow { seq, tx_ns };
        }
        if (w38 ^ self.w38) & self.m38_other != 0 {
            return SameAs::No;
        }
        let p = Probe {
            flow_id: le16(b, 44).swap_bytes(),
            seq,
            tx_ns,
        };
        SameAs::OtherFlow(p, FlowWord(w38 & self.m38))
    }

    /// [`probe`](Self::probe)'s [`SameAs::Flow`] of a frame that must
    /// carry the sequence number whose bytes on the wire are `next_wire`
    /// (the number byte-swapped): its stamp if its header is this one,
    /// flow id included, and its sequence number is that one (the
    /// frame's word compared where it lies, not swapped, and nothing of
    /// it kept but the stamp).
    #[inline(always)]
    pub fn flow_next(&self, b: &[u8], next_wire: u64) -> Option<u64> {
        let b = self.same_but_flow(b)?;
        if (le64(b, 38) ^ self.w38) & self.m38 != 0 || le64(b, 46) != next_wire {
            return None;
        }
        Some(le64(b, 52).swap_bytes() & ((1 << 48) - 1))
    }

    /// `b`'s bytes up to its probe's end, if its header up to the UDP
    /// header is this one's.
    #[inline(always)]
    fn same_but_flow<'b>(&self, b: &'b [u8]) -> Option<&'b [u8; PROBE_FRAME_MIN]> {
        // The same length (at least the smallest probe frame's).
        if b.len() != self.frame_len() {
            return None;
        }
        let b = b.first_chunk::<PROBE_FRAME_MIN>()?;
        // Bytes 12..16: EtherType and version/IHL as the fast path's
        // (the kept frame's, which it took), and TOS.
        if le32(b, 12) != self.w12 || le64(b, 16) & self.m16 != self.w16 {
            return None;
        }
        Some(b)
    }

    /// Makes this the header of the flow of a frame it found to be
    /// [`SameAs::OtherFlow`].
    #[inline(always)]
    pub fn set_flow(&mut self, w: FlowWord) {
        self.w38 = w.0;
    }
}

/// [`fast_probe_ipv4`], and where it finds a probe, the frame's
/// [`SameHeader`].
#[inline(always)]
pub fn fast_probe_ipv4_header(b: &[u8], within: FastLen) -> Option<(Probe, SameHeader)> {
    let p = fast_probe_ipv4(b, within)?;
    // (fast_probe_ipv4 found a probe: the frame holds every fixed offset.)
    let h = SameHeader {
        excess: (b.len() - PROBE_FRAME_MIN) as u16,
        w12: le32(b, 12),
        w16: le64(b, 16) & SameHeader::M16,
        w38: le64(b, 38) & SameHeader::M38,
        ..SameHeader::NONE
    };
    Some((p, h))
}

/// An untagged IPv4 frame's probe (or none), or another layout.
enum Layout {
    Ipv4(Option<Probe>),
    Other,
}

#[inline(always)]
fn untagged_ipv4(b: &[u8], within: FastLen) -> Layout {
    // Shorter than the smallest frame with a probe, or longer than the
    // bound (at most what an IPv4 packet's length field can say): the
    // careful path. (In one compare.)
    if !within.holds(b.len()) {
        return Layout::Ipv4(None);
    }
    // Bytes 12..15: EtherType, then (untagged IPv4) version/IHL.
    if le16(b, 12) == 0x0008 && b[14] == 0x45 {
        // Lengths that fill the frame exactly, as a probe frame's do: the
        // IP total is the frame after Ethernet, UDP's the total after IP
        // (both at least a probe's, as the frame is). A frame with bytes
        // past the IP packet (Ethernet padding, a trailer) or a UDP length
        // short of it is left to the careful path.
        // (The frame's lengths fit in 16 bits, checked above: compared as
        // loaded, big-endian.)
        let ip_len = ((b.len() - 14) as u16).swap_bytes();
        let udp_len = ((b.len() - 34) as u16).swap_bytes();
        // Bytes 16..24: total length (the frame's), identification (any),
        // flags/fragment offset (DF at most), TTL (any), protocol (UDP);
        // then UDP's length. (Each a compare against memory.)
        if le16(b, 16) != ip_len
            || le16(b, 20) & 0xff3f != 0
            || b[23] != 17
            || le16(b, 38) != udp_len
        {
            return Layout::Ipv4(None);
        }
        // The probe at a constant offset, inside the length checked above.
        Layout::Ipv4(read_probe(&b[42..PROBE_FRAME_MIN]))
    } else {
        Layout::Other
    }
}

/// The probe at the start of `p` (its length checked by the caller),
/// if it has linerate's magic and version.
#[inline(always)]
fn read_probe(p: &[u8]) -> Option<Probe> {
    if le16(p, 0) != u16::from_le_bytes([crate::PROBE_MAGIC, crate::PROBE_VERSION]) {
        return None;
    }
    Some(Probe {
        flow_id: le16(p, 2).swap_bytes(),
        seq: le64(p, 4).swap_bytes(),
        // Bytes 10..18 big-endian: the low 48 bits are the stamp.
        tx_ns: le64(p, 10).swap_bytes() & ((1 << 48) - 1),
    })
}

/// Little-endian words at `at` (the caller has checked the length).
#[inline(always)]
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
#[inline(always)]
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
#[inline(always)]
fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}

/// An IPv4 header without options at `l3` (version/IHL checked by the
/// caller; `total_le` holds its total length field as loaded, byte-swapped
/// in its low 16 bits): not a fragment, UDP, the total length within the
/// frame and covering UDP header and probe, the UDP length within it.
/// Where the UDP header starts.
#[inline(always)]
fn ipv4_udp(b: &[u8], l3: usize, total_le: u64) -> Option<usize> {
    // Bytes 6..10: flags/fragment offset, TTL, protocol.
    if le32(b, l3 + 6) & 0xff00_ff3f != 0x1100_0000 {
        return None;
    }
    let total = usize::from((total_le as u16).swap_bytes());
    if total < 20 + 8 + crate::PROBE_LEN || l3 + total > b.len() {
        return None;
    }
    let udp = usize::from(le16(b, l3 + 24).swap_bytes());
    if udp < 8 + crate::PROBE_LEN || udp > total - 20 {
        return None;
    }
    Some(l3 + 20)
}

/// The fast path's other layouts: VLAN-tagged IPv4, IPv6 with or without
/// a tag.
#[inline(never)]
fn slow_layouts(b: &[u8]) -> Option<usize> {
    let be16 = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    let (l3, ethertype) = match be16(12) {
        0x8100 => (18, be16(16)),
        t => (14, t),
    };
    match ethertype {
        0x0800 if b[l3] == 0x45 => ipv4_udp(b, l3, u64::from(le16(b, l3 + 2))),
        // Version 6, UDP next; the payload within the frame and covering
        // the UDP header and the probe.
        0x86dd if b[l3] >> 4 == 6 && b[l3 + 6] == 17 => {
            let payload = usize::from(be16(l3 + 4));
            if payload < 8 + crate::PROBE_LEN || l3 + 40 + payload > b.len() {
                return None;
            }
            let udp = usize::from(be16(l3 + 44));
            if udp < 8 + crate::PROBE_LEN || udp > payload {
                return None;
            }
            Some(l3 + 40)
        }
        _ => None,
    }
}
