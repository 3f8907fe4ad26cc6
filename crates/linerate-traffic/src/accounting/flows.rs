//! Per-flow counts: the table a flow id finds its counts in, the
//! sequence, loss and RFC 3550 jitter of one flow.

use super::*;

/// Per-flow counts found by flow id in a table (no hashing, no search),
/// read in flow id order.
#[derive(Debug, Clone)]
pub struct FlowTable {
    /// `slot[id]`: the flow's index in `flows` (with [`NOT_COUNTED`]
    /// while it has an entry but no probe counted), [`NO_ENTRY`] when not
    /// seen.
    pub(crate) slot: Box<[u32; 1 << 16]>,
    pub(crate) flows: Vec<(u16, FlowCounts)>,
}

impl Default for FlowTable {
    fn default() -> Self {
        Self {
            slot: vec![NO_ENTRY; 1 << 16]
                .into_boxed_slice()
                .try_into()
                .expect("65536 entries"),
            flows: Vec::new(),
        }
    }
}

/// A slot's flag: the flow has an entry (made by its end marker) but no
/// probe frame counted yet, so its jitter and latency records are not
/// started.
pub(crate) const NOT_COUNTED: u32 = 1 << 31;

/// Where a flow id's slot is: the id with its bytes swapped, as the probe
/// holds it big-endian, so that the probe's two bytes index the table as
/// loaded (the compiler folds the two swaps away on the fast path).
#[inline(always)]
pub(crate) fn slot_of(id: u16) -> usize {
    usize::from(id.swap_bytes())
}

/// A slot's value for a flow not seen. It and every NOT_COUNTED value
/// index past the end of the (at most 65,536) flows.
pub(crate) const NO_ENTRY: u32 = u32::MAX;

impl FlowTable {
    /// The flow's counts, if one of its probe frames was counted.
    #[inline(always)]
    pub(crate) fn find(&mut self, id: u16) -> Option<&mut FlowCounts> {
        // NO_ENTRY and NOT_COUNTED entries index past the end.
        let s = self.slot[slot_of(id)] as usize;
        self.flows.get_mut(s).map(|(_, f)| f)
    }

    /// The index of the flow's entry, if one of its probe frames was
    /// counted (an index never changes once made).
    #[inline(always)]
    pub(crate) fn find_index(&self, id: u16) -> Option<usize> {
        let s = self.slot[slot_of(id)] as usize;
        (s < self.flows.len()).then_some(s)
    }

    /// The counts of the flow at `index` (from [`find_index`](Self::find_index)).
    #[inline(always)]
    pub(crate) fn at(&mut self, index: usize) -> Option<&mut FlowCounts> {
        self.flows.get_mut(index).map(|(_, f)| f)
    }

    /// The index of the flow's entry, counted or not.
    pub(crate) fn index(&self, id: u16) -> Option<usize> {
        let s = self.slot[slot_of(id)];
        (s != NO_ENTRY).then_some((s & !NOT_COUNTED) as usize)
    }

    /// The flow's entry, made when first asked for (not counted yet: see
    /// [`insert`](Self::insert)).
    pub fn entry(&mut self, id: u16) -> &mut FlowCounts {
        let Some(i) = self.index(id) else {
            self.slot[slot_of(id)] = self.flows.len() as u32 | NOT_COUNTED;
            self.flows.push((id, FlowCounts::default()));
            return &mut self.flows.last_mut().expect("just pushed").1;
        };
        &mut self.flows[i].1
    }

    /// Puts (or replaces) a flow's counts, counted from now on.
    pub fn insert(&mut self, id: u16, f: FlowCounts) -> &mut FlowCounts {
        let i = match self.index(id) {
            Some(i) => {
                self.flows[i].1 = f;
                i
            }
            None => {
                self.flows.push((id, f));
                self.flows.len() - 1
            }
        };
        self.slot[slot_of(id)] = i as u32;
        &mut self.flows[i].1
    }

    pub fn get(&self, id: &u16) -> Option<&FlowCounts> {
        self.index(*id).map(|i| &self.flows[i].1)
    }

    pub fn get_mut(&mut self, id: &u16) -> Option<&mut FlowCounts> {
        self.index(*id).map(|i| &mut self.flows[i].1)
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// The flows in flow id order.
    pub fn iter(&self) -> std::vec::IntoIter<(&u16, &FlowCounts)> {
        let mut v: Vec<(&u16, &FlowCounts)> = self.flows.iter().map(|(id, f)| (id, f)).collect();
        v.sort_unstable_by_key(|(id, _)| **id);
        v.into_iter()
    }

    /// The flows' counts (in no particular order).
    pub fn values(&self) -> impl Iterator<Item = &FlowCounts> {
        self.flows.iter().map(|(_, f)| f)
    }
}

impl<'a> IntoIterator for &'a FlowTable {
    type Item = (&'a u16, &'a FlowCounts);
    type IntoIter = std::vec::IntoIter<(&'a u16, &'a FlowCounts)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl std::ops::Index<&u16> for FlowTable {
    type Output = FlowCounts;
    fn index(&self, id: &u16) -> &FlowCounts {
        self.get(id).expect("no such flow")
    }
}

/// One flow's counts.
#[derive(Debug, Clone, Default)]
pub struct FlowCounts {
    pub seq: SeqTracker,
    pub bytes: u64,
    /// Where this flow's latencies are counted in its receiver's
    /// [`LatencyStore`]: the offset of its own histogram (shared clocks;
    /// the first [`FLOW_HISTOGRAMS_MAX`] flows seen have one), or 0, the
    /// rest's (the others' latencies are counted in the aggregate only).
    /// Read through [`SinkCounts::latency_of`].
    pub(crate) hist_at: usize,
    /// RFC 3550 interarrival jitter times 16, in ns, kept as RFC 3550's
    /// A.8 keeps it: J16 += |D| - (J16 + 8) / 16 over arrivals, D the
    /// change in transit time (valid with unshared clocks too: their
    /// offset cancels). See [`jitter_ns`](Self::jitter_ns).
    pub(crate) jitter16: u64,
    /// The last arrival's transit time, its nearest reading modulo 2^48
    /// (the probe's width): only differences of it are used.
    pub(crate) last_transit: i64,
    /// The sender's count from the flow's end marker, if one arrived.
    pub sent_marker: Option<u64>,
}

pub(crate) const TS_MASK: u64 = (1 << 48) - 1;

/// A 48-bit difference (modulo 2^48) as a signed number.
#[inline(always)]
pub(crate) fn signed48(d: u64) -> i64 {
    ((d << 16) as i64) >> 16
}

/// A probe's transit time: receive time less its 48-bit stamp, modulo
/// 2^48, read as the nearest signed number (more than half the range, 39
/// hours, ahead of the receiver is a sender's clock behind). One-way
/// latency where clocks are shared; with unshared clocks only its changes
/// mean something.
#[inline(always)]
pub(crate) fn transit(rx_ns: u64, tx_ns: u64) -> i64 {
    signed48(rx_ns.wrapping_sub(tx_ns))
}

/// One arrival with transit time `transit` in a flow's RFC 3550 jitter
/// (times 16, [`FlowCounts::jitter16`]) after an arrival with transit
/// time `last` (which it becomes).
#[inline(always)]
pub(crate) fn jitter_step(jitter16: &mut u64, last: &mut i64, transit: i64) {
    let d = signed48(transit.wrapping_sub(*last) as u64).unsigned_abs();
    *last = transit;
    // J16 - (J16 + 8) / 16 >= 0 for every J16: no underflow.
    *jitter16 = *jitter16 - ((*jitter16 + 8) >> 4) + d;
}

/// [`jitter_step`] with the transit times held shifted up by 16 bits
/// (`t16`, `last16`: a transit time modulo 2^48 in the top 48 bits), as a
/// run of one flow's frames keeps them: their difference as an `i64` is
/// the 48-bit difference read as signed, times 2^16, so its size shifted
/// back down is `jitter_step`'s |D| (2^47 included), without the two
/// shifts that read each difference as signed.
#[inline(always)]
pub(crate) fn jitter_step16(jitter16: &mut u64, last16: &mut u64, t16: u64) {
    // (The last minus the new, whose size is the same: the last is not
    // needed after, so the difference is taken in its register, and no
    // copy of `t16` is made for it.)
    let d = (last16.wrapping_sub(t16) as i64).unsigned_abs() >> 16;
    *last16 = t16;
    *jitter16 = *jitter16 - ((*jitter16 + 8) >> 4) + d;
}

impl FlowCounts {
    /// RFC 3550 interarrival jitter, ns.
    pub fn jitter_ns(&self) -> f64 {
        self.jitter16 as f64 / 16.0
    }

    /// A flow's first probe: its counts start here (the transit time it
    /// came with is the base of the jitter estimate), its latencies in
    /// the histogram at `hist_at`.
    pub(crate) fn first(transit: i64, hist_at: usize) -> Self {
        Self {
            last_transit: transit,
            hist_at,
            ..Self::default()
        }
    }

    /// One arrival with transit time `transit` (`rx - tx`, read modulo
    /// 2^48 as [`transit`] does): the change from the last arrival feeds
    /// the jitter estimate.
    #[inline(always)]
    pub(crate) fn on_transit(&mut self, transit: i64) {
        jitter_step(&mut self.jitter16, &mut self.last_transit, transit);
    }

    /// Lost frames: with the sender's end marker, sent - distinct received
    /// (the tail included); without, the gaps below the highest sequence.
    pub fn lost(&self) -> u64 {
        match self.sent_marker {
            Some(sent) => sent.saturating_sub(self.seq.received() - self.seq.duplicates),
            None => self.seq.lost(),
        }
    }
}

/// A total that stays at u64::MAX rather than wrapping past it.
pub(crate) fn saturating_sum(it: impl Iterator<Item = u64>) -> u64 {
    it.fold(0, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shifted step keeps the same jitter and last transit time as
    /// [`jitter_step`] over transit times that jump across the 48-bit
    /// wrap, by exactly 2^47 either way, and below 0 (clock skew).
    #[test]
    fn the_shifted_jitter_step_is_the_step() {
        let edges = [
            0u64,
            1,
            7,
            1 << 47,
            (1 << 47) - 1,
            (1 << 47) + 1,
            TS_MASK,
            1 << 48,
        ];
        let mut raws: Vec<u64> = Vec::new();
        for e in edges {
            for d in [0u64, 1, 2, 999, 123_456_789] {
                raws.extend([e.wrapping_add(d), e.wrapping_sub(d), u64::MAX - e - d]);
            }
        }
        for &first in &raws {
            let (mut j, mut last) = (5 * 16, transit(first, 0));
            let (mut j16, mut last16) = (j, first << 16);
            for &raw in &raws {
                jitter_step(&mut j, &mut last, transit(raw, 0));
                jitter_step16(&mut j16, &mut last16, raw << 16);
                assert_eq!(
                    (j16, (last16 as i64) >> 16),
                    (j, last),
                    "{first} then {raw}"
                );
            }
        }
    }
}
