//! Flows with ranges: every address and port field is a range with a step,
//! and flow i is the i-th combination (an odometer, fastest field first:
//! source port, destination port, source IP, destination IP, source MAC,
//! destination MAC), so a run over `count()` flows reaches every value of
//! every range.
//!
//! Or, with [`FlowSpec::lockstep`] (the OTG model's patterns), every field
//! steps on its own at each flow: flow i takes value `i mod count` of each
//! range, so the flows repeat after the least common multiple of the
//! counts. A field's values are taken modulo its width, so a step of
//! `2^width - s` walks downward by `s` (the model's `decrement`). A field
//! with a [`Random`] (the model's `random`, [`FlowSpec::random`]) takes
//! value `d` of its seeded sequence instead of `first + d * step`.

use crate::random::Random;
use crate::wire_flow::WireFlow;
use linerate_wire::MacAddr;
use std::net::IpAddr;
use thiserror::Error;

/// A field that cannot become a range of flows.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FlowError {
    #[error("'{0}' is not a {1} or a {1} range (FIRST-LAST)")]
    Syntax(String, &'static str),
    #[error("impossible range '{0}': the last value is below the first")]
    Backwards(String),
    #[error("range '{0}' mixes IPv4 and IPv6")]
    MixedFamily(String),
    #[error("source and destination addresses must both be IPv4 or both IPv6")]
    FamilyMismatch,
    #[error("step {step} does not fit range '{range}'")]
    Step { range: String, step: u64 },
    #[error("{0} flows: more than linerate can cycle through (2^48)")]
    TooMany(u128),
}

/// `first, first+step, …` for `count` values of a field held as an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    pub first: u128,
    pub count: u64,
    pub step: u128,
}

impl Range {
    pub fn single(v: u128) -> Self {
        Self {
            first: v,
            count: 1,
            step: 1,
        }
    }

    fn from_bounds(first: u128, last: u128, step: u64, text: &str) -> Result<Self, FlowError> {
        if last < first {
            return Err(FlowError::Backwards(text.to_string()));
        }
        if step == 0 || u128::from(step) > (last - first).max(1) && last != first {
            return Err(FlowError::Step {
                range: text.to_string(),
                step,
            });
        }
        let count = (last - first) / u128::from(step) + 1;
        let count = u64::try_from(count).map_err(|_| FlowError::TooMany(count))?;
        Ok(Self {
            first,
            count,
            step: u128::from(step),
        })
    }
}

fn split(text: &str) -> (&str, Option<&str>) {
    match text.split_once('-') {
        // MACs written with dashes have five of them; only a "-" between two MACs is a range.
        Some((a, b)) if !text.contains(':') || a.contains(':') => (a.trim(), Some(b.trim())),
        _ => (text.trim(), None),
    }
}

/// Parses `P` or `P-Q` (ports).
pub fn port_range(text: &str, step: u64) -> Result<Range, FlowError> {
    let (a, b) = split(text);
    let p = |s: &str| {
        s.parse::<u16>()
            .map_err(|_| FlowError::Syntax(text.to_string(), "port"))
    };
    let first = u128::from(p(a)?);
    let last = b.map(p).transpose()?.map_or(first, u128::from);
    Range::from_bounds(first, last, step, text)
}

/// Parses `IP` or `IP-IP`; returns the range and whether it is IPv6.
pub fn ip_range(text: &str, step: u64) -> Result<(Range, bool), FlowError> {
    let (a, b) = match text.split_once('-') {
        Some((a, b)) => (a.trim(), Some(b.trim())),
        None => (text.trim(), None),
    };
    let p = |s: &str| {
        s.parse::<IpAddr>()
            .map_err(|_| FlowError::Syntax(text.to_string(), "IP address"))
    };
    let first = p(a)?;
    let last = b.map(p).transpose()?.unwrap_or(first);
    if first.is_ipv4() != last.is_ipv4() {
        return Err(FlowError::MixedFamily(text.to_string()));
    }
    let n = |ip: IpAddr| match ip {
        IpAddr::V4(v) => u128::from(u32::from(v)),
        IpAddr::V6(v) => u128::from(v),
    };
    Ok((
        Range::from_bounds(n(first), n(last), step, text)?,
        first.is_ipv6(),
    ))
}

/// Parses `MAC` or `MAC-MAC`.
pub fn mac_range(text: &str, step: u64) -> Result<Range, FlowError> {
    let (a, b) = split(text);
    let p = |s: &str| {
        MacAddr::parse(s).ok_or_else(|| FlowError::Syntax(text.to_string(), "MAC address"))
    };
    let first = u128::from(p(a)?.to_u64());
    let last = b
        .map(p)
        .transpose()?
        .map_or(first, |m| u128::from(m.to_u64()));
    Range::from_bounds(first, last, step, text)
}

/// Parses `RANGE` or `RANGE@STEP` (every STEP-th value) with `f`.
fn stepped<T>(text: &str, f: impl Fn(&str, u64) -> Result<T, FlowError>) -> Result<T, FlowError> {
    match text.split_once('@') {
        Some((range, step)) => {
            let step = step
                .trim()
                .parse::<u64>()
                .map_err(|_| FlowError::Syntax(text.to_string(), "step (RANGE@STEP)"))?;
            f(range, step)
        }
        None => f(text, 1),
    }
}

/// The header fields of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowFields {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
}

/// Every field's range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    pub src_mac: Range,
    pub dst_mac: Range,
    pub src_ip: Range,
    pub dst_ip: Range,
    pub ipv6: bool,
    pub src_port: Range,
    pub dst_port: Range,
    /// Which probe flow ids the flows take (default: the flow index mod
    /// 65536).
    pub ids: ProbeIds,
    /// Every field steps at every flow (the OTG model) instead of the
    /// odometer's carry.
    pub lockstep: bool,
    /// Fields whose values are drawn by a seeded generator, in the order
    /// source port, destination port, source IP, destination IP, source
    /// MAC, destination MAC: digit `d` of such a field (below its
    /// range's `count`) is value `d` of the sequence; its range's
    /// `first` and `step` are not used.
    pub random: [Option<Random>; 6],
}

/// The probe flow ids a spec's flows carry: flow `i` takes `base + (i &
/// mask)` (wrapping), so several senders onto one receiver can each keep
/// a block of ids of their own (`linerate agent`'s flows). `mask` is a
/// power of two less one, so the id costs a mask and an add per frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeIds {
    pub base: u16,
    pub mask: u16,
}

impl Default for ProbeIds {
    fn default() -> Self {
        Self {
            base: 0,
            mask: u16::MAX,
        }
    }
}

impl ProbeIds {
    /// A block of `span` ids from `base` (`span` a power of two, 1..=65536).
    pub fn block(base: u16, span: u32) -> Option<Self> {
        (span.is_power_of_two() && span <= 1 << 16).then(|| Self {
            base,
            mask: (span - 1) as u16,
        })
    }

    /// The id of flow index `i`.
    #[inline(always)]
    pub fn of(&self, i: u64) -> u16 {
        (i as u16 & self.mask).wrapping_add(self.base)
    }

    /// How many ids the block holds.
    pub fn span(&self) -> u32 {
        u32::from(self.mask) + 1
    }

    /// Whether `id` is one of the block's.
    pub fn contains(&self, id: u16) -> bool {
        id.wrapping_sub(self.base) <= self.mask
    }
}

/// Most flows a spec may describe.
const FLOWS_MAX: u128 = 1 << 48;

impl FlowSpec {
    /// Builds a spec from the command line's strings.
    pub fn parse(
        src_mac: &str,
        dst_mac: &str,
        src_ip: &str,
        dst_ip: &str,
        src_port: &str,
        dst_port: &str,
    ) -> Result<Self, FlowError> {
        let (s_ip, s6) = stepped(src_ip, ip_range)?;
        let (d_ip, d6) = stepped(dst_ip, ip_range)?;
        if s6 != d6 {
            return Err(FlowError::FamilyMismatch);
        }
        let spec = Self {
            src_mac: stepped(src_mac, mac_range)?,
            dst_mac: stepped(dst_mac, mac_range)?,
            src_ip: s_ip,
            dst_ip: d_ip,
            ipv6: s6,
            src_port: stepped(src_port, port_range)?,
            dst_port: stepped(dst_port, port_range)?,
            ids: ProbeIds::default(),
            lockstep: false,
            random: [None; 6],
        };
        let n = spec.count_u128();
        if n > FLOWS_MAX {
            return Err(FlowError::TooMany(n));
        }
        Ok(spec)
    }

    fn order(&self) -> [&Range; 6] {
        [
            &self.src_port,
            &self.dst_port,
            &self.src_ip,
            &self.dst_ip,
            &self.src_mac,
            &self.dst_mac,
        ]
    }

    fn count_u128(&self) -> u128 {
        let counts = self.order().map(|r| u128::from(r.count.max(1)));
        if self.lockstep {
            counts.iter().fold(1, |l, &c| lcm(l, c))
        } else {
            counts.iter().product()
        }
    }

    /// The largest value each field (in [`order`](Self::order)) holds.
    fn masks(&self) -> [u128; 6] {
        let ip = if self.ipv6 {
            u128::MAX
        } else {
            u128::from(u32::MAX)
        };
        let mac = (1u128 << 48) - 1;
        [0xffff, 0xffff, ip, ip, mac, mac]
    }

    /// Number of distinct flows (every combination).
    pub fn count(&self) -> u64 {
        self.count_u128() as u64
    }

    /// The fields of flow `i` (taken modulo [`count`](Self::count)).
    pub fn flow(&self, i: u64) -> FlowFields {
        let mut rest = i % self.count().max(1);
        let mut digits = [0u64; 6];
        for (d, r) in digits.iter_mut().zip(self.order()) {
            *d = rest % r.count;
            if !self.lockstep {
                rest /= r.count;
            }
        }
        self.fields(&digits)
    }

    /// The fields for one digit per range (each below its range's count).
    fn fields(&self, digits: &[u64; 6]) -> FlowFields {
        let mut v = [0u128; 6];
        for (k, ((slot, r), &d)) in v.iter_mut().zip(self.order()).zip(digits).enumerate() {
            *slot = value(r.first, r.step, self.random[k], d) & self.masks()[k];
        }
        let ip = |n: u128| -> IpAddr {
            if self.ipv6 {
                IpAddr::V6(n.into())
            } else {
                IpAddr::V4((n as u32).into())
            }
        };
        FlowFields {
            src_port: v[0] as u16,
            dst_port: v[1] as u16,
            src_ip: ip(v[2]),
            dst_ip: ip(v[3]),
            src_mac: MacAddr::from_u64(v[4] as u64),
            dst_mac: MacAddr::from_u64(v[5] as u64),
        }
    }
}

/// Walks the flows in order without dividing per packet: an odometer that
/// steps the fastest field and carries into the next.
#[derive(Debug, Clone)]
pub struct FlowCursor<'a> {
    spec: &'a FlowSpec,
    digits: [u64; 6],
    index: u64,
    current: FlowFields,
}

impl<'a> FlowCursor<'a> {
    pub fn new(spec: &'a FlowSpec) -> Self {
        Self {
            spec,
            digits: [0; 6],
            index: 0,
            current: spec.flow(0),
        }
    }

    /// The flow index (0..count) and fields of the current flow.
    pub fn get(&self) -> (u64, &FlowFields) {
        (self.index, &self.current)
    }

    /// Moves to the next flow (wrapping after the last).
    pub fn advance(&mut self) {
        let count = self.spec.count();
        if count <= 1 {
            return;
        }
        self.index = if self.index + 1 == count {
            0
        } else {
            self.index + 1
        };
        for (d, r) in self.digits.iter_mut().zip(self.spec.order()) {
            *d += 1;
            if *d < r.count {
                if self.spec.lockstep {
                    continue;
                }
                break;
            }
            *d = 0;
        }
        self.current = self.spec.fields(&self.digits);
    }
}

/// Walks the flows in the same order as [`FlowCursor`], keeping the
/// current flow as it goes on the wire ([`WireFlow`]): a step changes the
/// fastest field by its step (a carry resets it and steps the next), and
/// rewrites only the fields that changed, with their checksum sums. No
/// multiplication or division per step.
#[derive(Debug, Clone)]
pub struct WireCursor {
    first: [u128; 6],
    step: [u128; 6],
    counts: [u64; 6],
    digits: [u64; 6],
    values: [u128; 6],
    ipv6: bool,
    index: u64,
    count: u64,
    ids: ProbeIds,
    /// Every field steps at every flow (no fast path, no carry).
    lockstep: bool,
    random: [Option<Random>; 6],
    masks: [u128; 6],
    /// The fastest field that moves (a range of more than one value).
    lo: usize,
    /// When that field is a port: steps it takes before it carries, and
    /// its step (the fast path).
    fast_left: u64,
    port_step: u16,
    wire: WireFlow,
}

impl WireCursor {
    pub fn new(spec: &FlowSpec) -> Self {
        let o = spec.order();
        Self {
            first: o.map(|r| r.first),
            step: o.map(|r| r.step),
            counts: o.map(|r| r.count),
            digits: [0; 6],
            values: o.map(|r| r.first),
            ipv6: spec.ipv6,
            index: 0,
            count: spec.count(),
            ids: spec.ids,
            lockstep: spec.lockstep,
            random: spec.random,
            masks: spec.masks(),
            lo: 0,
            fast_left: 0,
            port_step: 0,
            wire: WireFlow::new(&spec.flow(0)),
        }
        .with_fast_path()
    }

    fn with_fast_path(mut self) -> Self {
        self.lo = self.counts.iter().position(|&c| c > 1).unwrap_or(0);
        if self.lo < 2 && !self.lockstep && self.random[self.lo].is_none() {
            // A port's step is below 65536 (its range fits a u16).
            self.port_step = self.step[self.lo] as u16;
            self.fast_left = self.counts[self.lo] - 1 - self.digits[self.lo];
        }
        self
    }

    /// The flow index (0..count).
    #[inline]
    pub fn index(&self) -> u64 {
        self.index
    }

    /// The current flow's probe flow id (by default the index mod
    /// 65536; see [`ProbeIds`]).
    #[inline]
    pub fn flow_id(&self) -> u16 {
        self.ids.of(self.index)
    }

    /// The current flow's wire fields.
    #[inline]
    pub fn wire(&self) -> &WireFlow {
        &self.wire
    }

    /// Moves to the next flow (wrapping after the last).
    #[inline]
    pub fn advance(&mut self) {
        if self.fast_left > 0 {
            // Most steps: the fastest field is a port that moves without
            // carrying, so the index does not wrap either.
            self.fast_left -= 1;
            self.index += 1;
            self.wire.step_port(self.lo, self.port_step);
            return;
        }
        if self.count > 1 {
            self.carry();
        }
    }

    /// A step that carries (or moves an address or MAC): from the fastest
    /// moving field up, and every field that changed is written again.
    #[cold]
    fn carry(&mut self) {
        if self.lockstep {
            self.step_all();
            return;
        }
        let lo = self.lo;
        // The fast path moves a port stepped by a range (not a random one).
        let fast = lo < 2 && self.random[lo].is_none();
        if fast {
            // The fast path stepped the port without the digits: it is at
            // its last value now.
            self.digits[lo] = self.counts[lo] - 1;
            self.values[lo] = self.first[lo] + u128::from(self.digits[lo]) * self.step[lo];
        }
        self.index = if self.index + 1 == self.count {
            0
        } else {
            self.index + 1
        };
        // The highest field that changed.
        let mut top = lo;
        loop {
            self.digits[top] += 1;
            if self.digits[top] < self.counts[top] {
                self.values[top] = match self.random[top] {
                    Some(_) => self.value(top),
                    None => self.values[top] + self.step[top],
                };
                break;
            }
            self.digits[top] = 0;
            self.values[top] = match self.random[top] {
                Some(_) => self.value(top),
                None => self.first[top],
            };
            if top == 5 {
                break;
            }
            top += 1;
        }
        self.write_wire(top);
        if fast {
            self.fast_left = self.counts[lo] - 1 - self.digits[lo];
        }
    }

    /// A lockstep step: every field that moves takes its next value
    /// (wrapping on its own count), and every field is written again.
    fn step_all(&mut self) {
        self.index = if self.index + 1 == self.count {
            0
        } else {
            self.index + 1
        };
        for k in 0..6 {
            if self.counts[k] <= 1 {
                continue;
            }
            self.digits[k] += 1;
            if self.digits[k] == self.counts[k] {
                self.digits[k] = 0;
            }
            self.values[k] = self.value(k);
        }
        self.write_wire(4);
    }

    /// Field `k`'s value at its current digit.
    #[inline(always)]
    fn value(&self, k: usize) -> u128 {
        value(self.first[k], self.step[k], self.random[k], self.digits[k]) & self.masks[k]
    }

    /// Writes the values into the wire fields: the ports always, the
    /// addresses when `top >= 2`, the MACs when `top >= 4` (the fields at
    /// and below the highest one that moved). Inlined: the odometer's
    /// step is on blast's per-frame path.
    #[inline(always)]
    fn write_wire(&mut self, top: usize) {
        let v = &self.values;
        if top >= 4 {
            self.wire.set_macs(
                MacAddr::from_u64(v[4] as u64).0,
                MacAddr::from_u64(v[5] as u64).0,
            );
        }
        if top >= 2 {
            let ip = |n: u128| -> IpAddr {
                if self.ipv6 {
                    IpAddr::V6(n.into())
                } else {
                    IpAddr::V4((n as u32).into())
                }
            };
            self.wire.set_addrs(ip(v[2]), ip(v[3]));
        }
        self.wire.set_ports(v[0] as u16, v[1] as u16);
    }
}

/// Digit `d` of a field: `first + d * step`, or value `d` of its seeded
/// sequence.
#[inline(always)]
fn value(first: u128, step: u128, random: Option<Random>, d: u64) -> u128 {
    match random {
        Some(r) => r.value(d),
        None => first.wrapping_add(u128::from(d).wrapping_mul(step)),
    }
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The least common multiple, saturating (a count beyond any bound).
fn lcm(a: u128, b: u128) -> u128 {
    (a / gcd(a, b).max(1)).saturating_mul(b)
}

impl WireFlow {
    /// A flow's fields on the wire.
    pub fn new(f: &FlowFields) -> Self {
        let mut w = WireFlow::default();
        w.set_macs(f.src_mac.0, f.dst_mac.0);
        w.set_addrs(f.src_ip, f.dst_ip);
        w.set_ports(f.src_port, f.dst_port);
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn spec(sip: &str, dip: &str, sp: &str, dp: &str) -> Result<FlowSpec, FlowError> {
        FlowSpec::parse("02:00:00:00:00:0a", "02:00:00:00:00:0b", sip, dip, sp, dp)
    }

    #[test]
    fn random_fields_take_their_seeded_sequence_and_wrap_after_count() {
        let mut s = spec("198.18.0.1", "198.19.0.1", "1", "6000-6002").unwrap();
        s.lockstep = true;
        s.src_port.count = 5;
        s.random[0] = Random::new(1024, 65535, 42);
        s.dst_ip.count = 3;
        s.random[3] = Random::new(0xc612_0000, 0xc612_ffff, 9);
        assert_eq!(s.count(), 15, "lcm(5, 3, 3)");
        let ports = [17045, 50435, 3922, 28564, 4082];
        let dsts = ["198.18.96.100", "198.18.234.98", "198.18.137.182"];
        let mut c = WireCursor::new(&s);
        let mut f = FlowCursor::new(&s);
        for n in 0..32u64 {
            let want = s.flow(n);
            assert_eq!(want.src_port, ports[(n % 5) as usize], "frame {n}");
            assert_eq!(
                want.dst_ip,
                dsts[(n % 3) as usize].parse::<IpAddr>().unwrap()
            );
            assert_eq!(want.dst_port, 6000 + (n % 3) as u16);
            assert_eq!(c.wire(), &WireFlow::new(&want), "frame {n}");
            assert_eq!(f.get(), (n % 15, &want));
            c.advance();
            f.advance();
        }
        // Another seed, another sequence.
        s.random[0] = Random::new(1024, 65535, 43);
        let other: Vec<u16> = (0..5).map(|n| s.flow(n).src_port).collect();
        assert_eq!(other, [23432, 24395, 46183, 49023, 3583]);
        // The odometer (not lockstep) carries through a random field too.
        s.lockstep = false;
        s.random[0] = Random::new(5000, 5009, 1);
        s.src_port.count = 4;
        let mut c = WireCursor::new(&s);
        for n in 0..40u64 {
            let want = s.flow(n);
            assert_eq!(want.src_port, [5005, 5009, 5000, 5005][(n % 4) as usize]);
            assert_eq!(c.wire(), &WireFlow::new(&want), "flow {n}");
            c.advance();
        }
    }

    #[test]
    fn probe_ids_take_their_block() {
        let mut s = spec("198.18.0.1", "198.18.1.1", "1000-1009", "9").unwrap();
        let mut c = WireCursor::new(&s);
        let ids: Vec<u16> = (0..12).map(|_| (c.flow_id(), c.advance()).0).collect();
        assert_eq!(
            ids,
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1],
            "default: the index"
        );
        s.ids = ProbeIds::block(65534, 4).unwrap();
        let mut c = WireCursor::new(&s);
        let ids: Vec<u16> = (0..6).map(|_| (c.flow_id(), c.advance()).0).collect();
        assert_eq!(ids, [65534, 65535, 0, 1, 65534, 65535], "a block wraps");
        assert!(s.ids.contains(1) && s.ids.contains(65534) && !s.ids.contains(2));
        assert_eq!(s.ids.span(), 4);
        assert_eq!(ProbeIds::block(0, 3), None);
        assert_eq!(ProbeIds::block(0, 1 << 16), Some(ProbeIds::default()));
    }

    /// Lockstep (the OTG model): every field steps at every flow, a
    /// falling range walks down by wrapping, the flows repeat after the
    /// counts' least common multiple; the wire cursor agrees.
    #[test]
    fn lockstep_steps_every_field_at_once() {
        for v6 in [false, true] {
            let (sip, dip) = if v6 {
                ("2001:db8::1-2001:db8::2", "2001:db8:1::1")
            } else {
                ("198.18.0.1-198.18.0.2", "198.19.0.1")
            };
            let mut s = spec(sip, dip, "5000-5018@2", "9").unwrap();
            s.lockstep = true;
            // A decrement: 6000, 5998, … (ten values).
            s.dst_port = Range {
                first: 6000,
                count: 10,
                step: 65536 - 2,
            };
            s.dst_ip.first = if v6 {
                u128::from(std::net::Ipv6Addr::from([0x2001, 0xdb8, 1, 0, 0, 0, 0, 5]))
            } else {
                u128::from(u32::from(std::net::Ipv4Addr::new(198, 19, 0, 5)))
            };
            s.dst_ip.count = 3;
            s.dst_ip.step = if v6 { u128::MAX } else { u128::from(u32::MAX) };
            assert_eq!(s.count(), 30, "lcm(10, 10, 2, 3)");
            let mut c = WireCursor::new(&s);
            let mut f = FlowCursor::new(&s);
            for n in 0..95u64 {
                let want = s.flow(n);
                assert_eq!(want.src_port, 5000 + (n % 10) as u16 * 2);
                assert_eq!(want.dst_port, 6000 - (n % 10) as u16 * 2);
                let d = 5 - (n % 3) as u8;
                let dst: IpAddr = if v6 {
                    std::net::Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, u16::from(d)).into()
                } else {
                    std::net::Ipv4Addr::new(198, 19, 0, d).into()
                };
                assert_eq!(want.dst_ip, dst, "flow {n}");
                assert_eq!(c.wire(), &WireFlow::new(&want), "flow {n}");
                assert_eq!(c.index(), n % 30);
                assert_eq!(f.get(), (n % 30, &want));
                c.advance();
                f.advance();
            }
        }
    }

    #[test]
    fn every_value_of_every_range_is_reached() {
        let s = spec("198.18.0.1-198.18.0.4", "198.18.1.1", "1000-1002", "9").unwrap();
        assert_eq!(s.count(), 12);
        let flows: Vec<FlowFields> = (0..s.count()).map(|i| s.flow(i)).collect();
        let srcs: HashSet<_> = flows.iter().map(|f| f.src_ip).collect();
        let ports: HashSet<_> = flows.iter().map(|f| f.src_port).collect();
        assert_eq!(srcs.len(), 4);
        assert_eq!(ports, [1000, 1001, 1002].into_iter().collect());
        assert_eq!(
            flows.iter().collect::<HashSet<_>>().len(),
            12,
            "every combination once"
        );
        assert_eq!(s.flow(12), s.flow(0), "cycles");
        assert_eq!(s.flow(1).src_port, 1001, "source port moves fastest");
        let mut c = FlowCursor::new(&s);
        for i in 0..30 {
            assert_eq!(c.get(), (i % 12, &s.flow(i)));
            c.advance();
        }
    }

    /// The wire cursor walks the same flows as `FlowSpec::flow`, fields,
    /// flow ids and sums, through every carry (all six fields ranges,
    /// stepped) and the wrap, in both families.
    #[test]
    fn wire_cursor_matches_the_flows_it_walks() {
        for (sip, dip, flows) in [
            ("198.18.0.1-198.18.0.5@2", "198.19.0.1-198.19.0.2", 144),
            (
                "2001:db8::1-2001:db8::3",
                "2001:db8:1::1-2001:db8:1::ff@127",
                216,
            ),
        ] {
            let s = FlowSpec::parse(
                "02:00:00:00:00:01-02:00:00:00:00:02",
                "02:00:00:00:00:0b-02:00:00:00:00:0c",
                sip,
                dip,
                "1000-1004@2",
                "65534-65535",
            )
            .unwrap();
            assert_eq!(s.count(), flows);
            let mut c = WireCursor::new(&s);
            for i in 0..3 * s.count() + 5 {
                let want = WireFlow::new(&s.flow(i));
                assert_eq!((c.index(), c.wire()), (i % s.count(), &want), "flow {i}");
                c.advance();
            }
        }
        // Only the destination port moves fastest; more than 65536 flows
        // (the flow id wraps).
        for (sp, dp, flows) in [("9", "1000-1099", 100), ("1-65535", "7-8", 131_070)] {
            let s = spec("198.18.0.1", "198.18.1.1", sp, dp).unwrap();
            assert_eq!(s.count(), flows);
            let mut c = WireCursor::new(&s);
            for i in 0..flows + 3 {
                let want = WireFlow::new(&s.flow(i));
                assert_eq!((c.index(), c.wire()), (i % s.count(), &want), "flow {i}");
                c.advance();
            }
        }
        // One flow: the cursor stands still.
        let s = spec("198.18.0.1", "198.18.1.1", "9", "9").unwrap();
        let mut c = WireCursor::new(&s);
        c.advance();
        assert_eq!((c.index(), c.wire()), (0, &WireFlow::new(&s.flow(0))));
    }

    #[test]
    fn ipv6_and_mac_ranges() {
        let s = FlowSpec::parse(
            "02:00:00:00:00:01-02:00:00:00:00:03",
            "02:00:00:00:00:0b",
            "2001:db8::1-2001:db8::2",
            "2001:db8::ff",
            "9",
            "9",
        )
        .unwrap();
        assert_eq!(s.count(), 6);
        let macs: HashSet<_> = (0..6).map(|i| s.flow(i).src_mac).collect();
        assert_eq!(macs.len(), 3);
        assert!(s.flow(0).src_ip.is_ipv6());
    }

    #[test]
    fn impossible_ranges_are_typed_errors() {
        assert_eq!(
            spec("198.18.0.9-198.18.0.1", "198.18.1.1", "9", "9"),
            Err(FlowError::Backwards("198.18.0.9-198.18.0.1".into()))
        );
        assert_eq!(
            spec("198.18.0.1", "198.18.1.1", "2000-1000", "9"),
            Err(FlowError::Backwards("2000-1000".into()))
        );
        assert!(matches!(
            spec("198.18.0.1-2001:db8::1", "198.18.1.1", "9", "9"),
            Err(FlowError::MixedFamily(_))
        ));
        assert_eq!(
            spec("198.18.0.1", "2001:db8::1", "9", "9"),
            Err(FlowError::FamilyMismatch)
        );
        assert!(matches!(
            spec("198.18.0.1", "198.18.1.1", "70000", "9"),
            Err(FlowError::Syntax(_, "port"))
        ));
        assert!(matches!(
            spec("nonsense", "198.18.1.1", "9", "9"),
            Err(FlowError::Syntax(_, "IP address"))
        ));
        assert!(matches!(
            spec(
                "2001:db8::-2001:db8::ffff:ffff:ffff:ffff",
                "2001:db8::1",
                "0-65535",
                "9"
            ),
            Err(FlowError::TooMany(_))
        ));
        assert!(matches!(port_range("1-10", 0), Err(FlowError::Step { .. })));
        assert!(matches!(
            spec("198.18.0.1", "198.18.1.1", "9", "1-10@x"),
            Err(FlowError::Syntax(_, _))
        ));
    }

    #[test]
    fn steps() {
        let s = spec(
            "198.18.0.0-198.18.0.255@64",
            "198.18.1.1",
            "1000-1010@5",
            "9",
        )
        .unwrap();
        assert_eq!(s.count(), 4 * 3);
        let ports: HashSet<u16> = (0..12).map(|i| s.flow(i).src_port).collect();
        assert_eq!(ports, [1000, 1005, 1010].into_iter().collect());
        let ips: HashSet<IpAddr> = (0..12).map(|i| s.flow(i).src_ip).collect();
        assert!(ips.contains(&"198.18.0.192".parse::<IpAddr>().unwrap()) && ips.len() == 4);
    }
}
