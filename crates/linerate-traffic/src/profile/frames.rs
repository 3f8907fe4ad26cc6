//! One stream's frames: a template per frame size (built once, checksums
//! included), then per frame the fields' next values written over it with
//! the probe (the stream's id, its sequence, the send time) and the
//! checksums updated (`Template::write`). Every field draws from its own
//! seeded generator, so a stream's frames depend only on its definition
//! and seed (and the send times the caller gives).

use super::field::FieldGen;
use super::rng::SplitMix;
use super::{Field, Stream};
use crate::FlowFields;
use crate::template::{Framing, Template, TemplateError};
use linerate_wire::{END_MARKER, MacAddr};
use std::collections::HashMap;
use std::net::IpAddr;

/// Most distinct frame sizes a stream may take (64..=9216 is 9153).
const SIZES_MAX: usize = 9153;

/// A frame size of a stream that cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("stream '{stream}', frame size {size}: {source}")]
pub struct FrameError {
    pub stream: String,
    pub size: u16,
    pub source: TemplateError,
}

/// The per-frame generators of a stream's header fields.
#[derive(Debug, Clone)]
struct Gens {
    src_mac: FieldGen,
    dst_mac: FieldGen,
    src_ip: FieldGen,
    dst_ip: FieldGen,
    src_port: FieldGen,
    dst_port: FieldGen,
    /// Only when the VLAN id moves (a fixed one is in the template).
    vlan: Option<(FieldGen, u8)>,
}

/// A stream's frames, one after the other.
#[derive(Debug, Clone)]
pub struct StreamFrames {
    id: u16,
    ipv6: bool,
    templates: HashMap<u16, Template>,
    sizes: FieldGen,
    gens: Gens,
    /// The next frame's size (drawn ahead: the pacer needs it first).
    next_size: u16,
    /// Frames written (the last one's sequence).
    seq: u64,
    /// The first frame's fields (for the end marker).
    first: FlowFields,
    largest: u16,
}

/// The seed of a stream's part `k` (each field, the sizes, the gaps).
pub(super) fn part_seed(seed: u64, k: u64) -> u64 {
    SplitMix::part(seed, k).next_u64()
}

fn mac(v: u128) -> MacAddr {
    MacAddr::from_u64(v as u64)
}

fn ip(v: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(v.into())
    } else {
        IpAddr::V4((v as u32).into())
    }
}

impl StreamFrames {
    /// The frames of `s`; `src_mac`: the interface's MAC, for a stream
    /// that does not give one; `mtu`: the interface's, to refuse frames
    /// that cannot leave it.
    pub fn new(s: &Stream, src_mac: [u8; 6], mtu: Option<usize>) -> Result<Self, FrameError> {
        let h = &s.headers;
        let src_mac_field = h
            .src_mac
            .clone()
            .unwrap_or(Field::Fixed(u128::from(MacAddr(src_mac).to_u64())));
        let seed = |k| part_seed(s.seed, k);
        let vlan = h.vlan.as_ref().and_then(|(f, pcp)| match f {
            Field::Fixed(_) => None,
            _ => Some((f.values_from(seed(7)), *pcp)),
        });
        let gens = Gens {
            src_mac: src_mac_field.values_from(seed(1)),
            dst_mac: h.dst_mac.values_from(seed(2)),
            src_ip: h.src_ip.values_from(seed(3)),
            dst_ip: h.dst_ip.values_from(seed(4)),
            src_port: h.src_port.values_from(seed(5)),
            dst_port: h.dst_port.values_from(seed(6)),
            vlan,
        };
        // The first frame's fields (drawn again when it is written).
        let first = Self::fields(&mut gens.clone(), h.ipv6);
        let framing = Framing {
            vlan: h.vlan.as_ref().map(|(f, pcp)| (f.bounds().0 as u16, *pcp)),
            dscp: h.dscp,
            ttl: h.ttl,
            mtu,
            tcp_flags: h.tcp_flags,
            vxlan: None,
            payload: None,
            stack: None,
        };
        let sizes = s.size.values(SIZES_MAX).unwrap_or_default();
        let mut templates = HashMap::new();
        for &size in &sizes {
            let size = size as u16;
            let t = Template::new(usize::from(size), &first, &framing).map_err(|source| {
                FrameError {
                    stream: s.name.clone(),
                    size,
                    source,
                }
            })?;
            templates.insert(size, t);
        }
        let mut size_gen = s.size.values_from(seed(0));
        let next_size = size_gen.next_value() as u16;
        Ok(Self {
            id: s.id,
            ipv6: h.ipv6,
            templates,
            sizes: size_gen,
            gens,
            next_size,
            seq: 0,
            first,
            largest: s.size.bounds().1 as u16,
        })
    }

    fn fields(g: &mut Gens, v6: bool) -> FlowFields {
        FlowFields {
            src_mac: mac(g.src_mac.next_value()),
            dst_mac: mac(g.dst_mac.next_value()),
            src_ip: ip(g.src_ip.next_value(), v6),
            dst_ip: ip(g.dst_ip.next_value(), v6),
            src_port: g.src_port.next_value() as u16,
            dst_port: g.dst_port.next_value() as u16,
        }
    }

    /// The probe flow id the stream's frames carry.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The size (FCS included) of the frame [`write`](Self::write) writes next.
    pub fn next_size(&self) -> u16 {
        self.next_size
    }

    /// The largest frame the stream sends (FCS included).
    pub fn largest(&self) -> u16 {
        self.largest
    }

    /// Frames written so far.
    pub fn written(&self) -> u64 {
        self.seq
    }

    /// Writes the next frame into `out` (at least its size less the FCS)
    /// with send time `tx_ns`; returns its length (FCS excluded).
    pub fn write(&mut self, out: &mut [u8], tx_ns: u64) -> usize {
        let t = &self.templates[&self.next_size];
        let f = Self::fields(&mut self.gens, self.ipv6);
        self.seq += 1;
        t.write(out, &f, self.id, self.seq, tx_ns);
        if let Some((g, pcp)) = &mut self.gens.vlan {
            let tci = (u16::from(*pcp) << 13) | (g.next_value() as u16 & 0x0fff);
            out[14..16].copy_from_slice(&tci.to_be_bytes());
        }
        self.next_size = self.sizes.next_value() as u16;
        t.len()
    }

    /// The stream's end marker (`sent`: its count of frames sent) into
    /// `out`; returns its length.
    pub fn end_marker(&self, out: &mut [u8], sent: u64, tx_ns: u64) -> usize {
        let t = self
            .templates
            .values()
            .min_by_key(|t| t.len())
            .expect("a stream has a size");
        t.write(out, &self.first, self.id, END_MARKER | sent, tx_ns);
        t.len()
    }
}
