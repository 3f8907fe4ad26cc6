//! Latency counted in a few instructions per value: the histograms
//! (HdrHistogram's buckets, counts only), a store of one per flow up to a
//! bound and the rest's, and an interval's percentiles from two snapshots.

use super::*;

/// Latencies counted in a few instructions per value: HdrHistogram's
/// bucket layout (2^SUB sub-buckets per power of two, 1 ns units), counts
/// only. Every bucket from 1 ns to [`LATENCY_MAX_NS`] is allocated at once,
/// zeroed by the kernel page by page as it is first written (264 KiB of
/// address space at 3 digits, a few pages resident for latencies within a
/// power of two or two): made once (a flow's with its first frame),
/// counting into it never allocates, copies or clears memory. Read through [`to_hdr`](Self::to_hdr), an
/// `hdrhistogram::Histogram` with the same buckets (so every statistic is
/// HdrHistogram's own, unchanged). `SUB` is 11 for 3 significant digits
/// ([`LatencyHist3`]), 8 for 2.
#[derive(Debug)]
pub struct LatencyHist<const SUB: u32> {
    pub(crate) counts: Box<[u64]>,
}

impl<const SUB: u32> Clone for LatencyHist<SUB> {
    /// A copy that, like the original, has memory only where it counted.
    fn clone(&self) -> Self {
        let mut c = Self::new();
        c.add(self);
        c
    }
}

/// 3 significant digits (the sink's, per flow and in all).
pub type LatencyHist3 = LatencyHist<11>;

impl<const SUB: u32> Default for LatencyHist<SUB> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const SUB: u32> LatencyHist<SUB> {
    /// Values below this fall in bucket 0 at unit resolution.
    pub(crate) const MASK: u64 = (1 << SUB) - 1;

    /// HdrHistogram's significant digits for this layout: 2 * 10^sigfig
    /// values at unit resolution, rounded up to a power of two, is 2^SUB.
    pub const SIGFIG: u8 = match SUB {
        8 => 2,
        11 => 3,
        _ => panic!("LatencyHist: 8 (2 digits) or 11 (3 digits) sub-bucket bits"),
    };

    /// Buckets held: up to [`LATENCY_MAX_NS`]'s.
    pub(crate) const LEN: usize = Self::index(LATENCY_MAX_NS) + 1;

    pub fn new() -> Self {
        // (zeroed allocation: calloc, fresh pages from the kernel)
        Self {
            counts: vec![0u64; Self::LEN].into_boxed_slice(),
        }
    }

    /// The bucket index of `v` (0 shares bucket 0 with 1).
    #[inline(always)]
    pub(crate) const fn index(v: u64) -> usize {
        let bucket = 63 - (v | Self::MASK).leading_zeros() - (SUB - 1);
        ((bucket as usize) << (SUB - 1)) + (v >> bucket) as usize
    }

    /// Counts `v`, ns (0 is counted as 1, and a value above
    /// [`LATENCY_MAX_NS`] as that).
    #[inline(always)]
    pub fn record(&mut self, v: u64) {
        match self.counts.get_mut(Self::index(v)) {
            Some(c) => *c += 1,
            None => self.record_above_max(),
        }
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn record_above_max(&mut self) {
        self.counts[Self::LEN - 1] += 1;
    }

    /// The lowest value of bucket index `idx`.
    pub(crate) fn value_of(idx: usize) -> u64 {
        if idx < 1 << SUB {
            idx as u64
        } else {
            let bucket = (idx >> (SUB - 1)) - 1;
            ((idx - (bucket << (SUB - 1))) as u64) << bucket
        }
    }

    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|&c| c == 0)
    }

    /// Values counted (a sum over the buckets: read at report time).
    pub fn len(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another's counts (of the same precision), writing only the
    /// buckets it counted in (the others' pages stay unmapped).
    pub fn add(&mut self, other: &Self) {
        add_counts(&mut self.counts, &other.counts);
    }

    /// The same counts as an `hdrhistogram::Histogram` (1 ns ..=
    /// [`LATENCY_MAX_NS`], this precision): every value lands in the
    /// bucket it was counted in.
    pub fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, LATENCY_MAX_NS, Self::SIGFIG)
            .expect("constant bounds are valid");
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                let _ = h.record_n(Self::value_of(i).clamp(1, LATENCY_MAX_NS), c);
            }
        }
        h
    }
}

/// Adds `from` into `to` bucket by bucket, writing only the buckets
/// counted in (the others' zeroed pages stay unmapped).
pub(crate) fn add_counts(to: &mut [u64], from: &[u64]) {
    for (a, &b) in to.iter_mut().zip(from) {
        if b != 0 {
            *a += b;
        }
    }
}

/// Flows that get a latency histogram of their own, at most: 440 KiB of
/// address space each, of which only the pages of buckets counted in are
/// memory (8 KiB per power of two of ns the flow's latencies span, and one
/// page for clock skew), so at most 110 MiB per receive worker whatever
/// arrives.
pub const FLOW_HISTOGRAMS_MAX: usize = 256;

/// A receiver's latency histograms in one zeroed allocation (its pages
/// are memory only once counted in): slot 0 counts the flows without one
/// of their own, slots 1..=[`FLOW_HISTOGRAMS_MAX`] a flow each. Buckets as
/// [`LatencyHist3`]'s, but over every 64-bit value, so every transit time
/// falls inside its slot: a flow keeps its slot's offset and counting is
/// one add, with one bounds check, and no test of which histogram nor of
/// the sign. A transit time below 0 (the sender's stamp ahead of the
/// receive time: clock skew), read as unsigned, is at least 2^64 - 2^47,
/// all of which share the slot's last bucket ([`SKEW`](Self::SKEW)); the
/// buckets between 2^47 and that are never counted in.
#[derive(Debug)]
pub struct LatencyStore {
    pub(crate) counts: Box<[u64]>,
    /// Slots given to flows so far.
    pub(crate) used: usize,
}

impl LatencyStore {
    /// Buckets per slot: every 64-bit value's.
    pub(crate) const SLOT: usize = LatencyHist3::index(u64::MAX) + 1;
    /// The bucket (in each slot) of every negative transit time.
    pub(crate) const SKEW: usize = LatencyHist3::index(u64::MAX - (1 << 47) + 1);
    /// The first bucket past every non-negative transit time (below
    /// 2^47 ns).
    pub(crate) const TRANSIT_END: usize = LatencyHist3::index((1 << 47) - 1) + 1;

    pub(crate) fn new() -> Self {
        Self {
            counts: vec![0u64; (FLOW_HISTOGRAMS_MAX + 1) * Self::SLOT].into_boxed_slice(),
            used: 0,
        }
    }

    /// A new flow's slot offset, if one is left of the
    /// [`FLOW_HISTOGRAMS_MAX`] a receiver gives (else 0: the rest's).
    pub(crate) fn take_slot(&mut self) -> usize {
        if self.used >= FLOW_HISTOGRAMS_MAX {
            return 0;
        }
        self.used += 1;
        self.used * Self::SLOT
    }

    /// A slot for a flow that had its own histogram in another receiver
    /// (merging workers' counts): made room for if none is left, so no
    /// flow loses its histogram in the merge (at most
    /// [`FLOW_HISTOGRAMS_MAX`] per worker merged).
    pub(crate) fn take_slot_merging(&mut self) -> usize {
        if (self.used + 2) * Self::SLOT > self.counts.len() {
            // A larger zeroed allocation, the buckets counted in copied
            // over (only their pages become memory).
            let mut counts = vec![0u64; 2 * self.counts.len()].into_boxed_slice();
            add_counts(&mut counts, &self.counts);
            self.counts = counts;
        }
        self.used += 1;
        self.used * Self::SLOT
    }

    /// Counts transit time `t` (ns, from -2^47 to 2^47 - 1) in the slot
    /// at `at`: a negative one as clock skew.
    #[inline(always)]
    pub(crate) fn record(&mut self, at: usize, t: i64) {
        if let Some(c) = self.counts.get_mut(at + LatencyHist3::index(t as u64)) {
            *c += 1;
        }
    }

    /// The slot at `at` (a flow's `hist_at`), to count in with
    /// [`record_in16`](Self::record_in16).
    pub(crate) fn slot_mut(&mut self, at: usize) -> &mut [u64; Self::SLOT] {
        (&mut self.counts[at..at + Self::SLOT])
            .try_into()
            .expect("a slot is SLOT long")
    }

    /// [`record`](Self::record) in a slot taken with
    /// [`slot_mut`](Self::slot_mut), of the transit time shifted up by 16
    /// bits (`t16`: a run's, see `jitter_step16`): a transit time from
    /// 1,024 ns up by [`index16_from_1us`] (no test of whether it is
    /// below 1,024 ns: the index is then past the slot), the rest (below
    /// 1,024 ns, and below 0: clock skew) out of line by [`index16`].
    #[inline(always)]
    pub(crate) fn record_in16(slot: &mut [u64; Self::SLOT], t16: u64) {
        // (A fixed length, compared with a constant, not a length kept
        // live through a run; the 1,024 added folded into the address.)
        let i = index16_from_1us(t16);
        if i < Self::SLOT - 1024 {
            slot[i + 1024] += 1;
        } else {
            Self::record_below_1us(slot, t16);
        }
    }

    /// A transit time below 1,024 ns (below 0: clock skew), `t16` as
    /// [`record_in16`](Self::record_in16)'s.
    #[cold]
    #[inline(never)]
    fn record_below_1us(slot: &mut [u64; Self::SLOT], t16: u64) {
        match slot.get_mut(index16(t16)) {
            Some(c) => *c += 1,
            None => slot[Self::SKEW] += 1,
        }
    }

    /// Transit times below 0 counted, in every slot.
    pub(crate) fn skew(&self) -> u64 {
        (0..=self.used)
            .map(|s| self.counts[s * Self::SLOT + Self::SKEW])
            .sum()
    }

    pub(crate) fn slot(&self, at: usize) -> &[u64] {
        &self.counts[at..at + Self::SLOT]
    }

    /// Adds the counts of `from` (a slot of another store, or its rest)
    /// into the slot at `at`, writing only the buckets counted in.
    pub(crate) fn add_slot(&mut self, at: usize, from: &[u64]) {
        add_counts(&mut self.counts[at..at + Self::SLOT], from);
    }

    /// The slot's latencies at `at` added into `h` (values above an hour
    /// as an hour, as [`LatencyHist::record`] counts them; clock skew
    /// not).
    pub(crate) fn add_to(&self, at: usize, h: &mut LatencyHist3) {
        let last = LatencyHist3::LEN - 1;
        for (i, &c) in self.slot(at)[..Self::TRANSIT_END].iter().enumerate() {
            if c != 0 {
                h.counts[i.min(last)] += c;
            }
        }
    }
}

/// [`LatencyHist3::index`] of a transit time `t` from 0 to 2^47 - 1 given
/// as `t16 = t << 16`, by the `f64` it converts to (exactly: 47
/// significant bits at most): from 2^10 up, the exponent is the power of
/// two and the first 10 bits of the mantissa the sub-bucket (the bits
/// below, dropped, are those `index` shifts out), so the index is the
/// float's bits shifted down, less a constant; below 2^11 the value
/// itself, as in `index`. A negative `t` (`t16` from 2^63: as `i64`
/// below 0, a negative float) gives an index past every slot's end
/// (from 2^21 - 1048 * 2^10), none a [`LatencyStore`] slot holds. One
/// conversion and a shift in place of a bit scan and two shifts by it.
#[inline(always)]
pub(crate) fn index16(t16: u64) -> usize {
    if t16 < 1 << (11 + 16) {
        return (t16 >> 16) as usize;
    }
    // (f64 bits: sign, 11 of exponent biased by 1023, 52 of mantissa.
    // t in [2^k, 2^(k+1)), k >= 10: the exponent field is k + 16 + 1023,
    // index(t) = ((k - 9) << 10) + the top 10 mantissa bits.)
    let bits = (t16 as i64 as f64).to_bits();
    ((bits >> 42) as usize).wrapping_sub((1023 + 16 + 9) << 10)
}

/// [`index16`] less 1,024 for a transit time `t` from 1,024 ns (2^10) to
/// 2^47 - 1 (`t16 = t << 16`), by the same `f64` without its test for
/// small values: below 1,024 ns (the exponent below 10 + 16) and below 0
/// (the sign bit) the subtraction wraps to an index past every slot
/// (below 1,024 ns at least 2^64 - 1049 * 2^10, below 0 at least
/// 2^21 - 1049 * 2^10).
#[inline(always)]
pub(crate) fn index16_from_1us(t16: u64) -> usize {
    let bits = (t16 as i64 as f64).to_bits();
    ((bits >> 42) as usize).wrapping_sub((1023 + 16 + 10) << 10)
}

/// Each flow's latency over the last interval (shared clocks): its
/// histogram now less its histogram at the last call, kept as the buckets
/// counted in. Read off the data path, once an interval, for at most
/// [`IntervalLatency::FLOWS_MAX`] flows (each read walks a flow's transit
/// buckets, 330 KiB): counting a frame costs nothing more.
#[derive(Debug, Default)]
pub struct IntervalLatency {
    pub(crate) last: BTreeMap<u16, Vec<(u32, u64)>>,
}

impl IntervalLatency {
    /// Flows (the lowest ids with a histogram of their own) read per
    /// interval; the others' rows show no interval latency.
    pub const FLOWS_MAX: usize = 8;

    /// (flow, p50, p99) in ns over what arrived since the last call, for
    /// the flows that had arrivals with a latency.
    pub fn take(&mut self, counts: &SinkCounts) -> Vec<(u16, u64, u64)> {
        let mut out = Vec::new();
        if !counts.clocks_shared {
            return out;
        }
        let mut ids: Vec<u16> = counts
            .flows
            .iter()
            .filter(|(_, f)| f.hist_at != 0)
            .map(|(id, _)| *id)
            .collect();
        ids.sort_unstable();
        for id in ids.into_iter().take(Self::FLOWS_MAX) {
            let at = counts.flows[&id].hist_at;
            let now: Vec<(u32, u64)> = counts.latency.slot(at)[..LatencyStore::TRANSIT_END]
                .iter()
                .enumerate()
                .filter(|(_, c)| **c != 0)
                .map(|(i, c)| (i as u32, *c))
                .collect();
            let before = self.last.get(&id).map_or(&[][..], Vec::as_slice);
            if let Some((p50, p99)) = delta_percentiles(&now, before) {
                out.push((id, p50, p99));
            }
            self.last.insert(id, now);
        }
        out
    }
}

/// p50 and p99 (HdrHistogram's, ns) of the counts in `now` less those in
/// `before` (both ascending by bucket), `None` if nothing was added.
pub(crate) fn delta_percentiles(now: &[(u32, u64)], before: &[(u32, u64)]) -> Option<(u64, u64)> {
    let mut h = Histogram::<u64>::new_with_bounds(1, LATENCY_MAX_NS, LatencyHist3::SIGFIG)
        .expect("constant bounds are valid");
    let mut b = before.iter().peekable();
    for &(i, c) in now {
        while b.next_if(|(j, _)| *j < i).is_some() {}
        let was = b.next_if(|(j, _)| *j == i).map_or(0, |(_, c)| *c);
        if c > was {
            let v = LatencyHist3::value_of(i as usize).clamp(1, LATENCY_MAX_NS);
            let _ = h.record_n(v, c - was);
        }
    }
    (!h.is_empty()).then(|| (h.value_at_quantile(0.5), h.value_at_quantile(0.99)))
}

/// min, mean, p50, p99, p99.9, max of a latency histogram, ns (none when
/// it is empty).
pub fn latency_summary(h: &LatencyHist3) -> Option<[f64; 6]> {
    let h = Some(h).filter(|h| !h.is_empty())?.to_hdr();
    Some([
        h.min() as f64,
        h.mean(),
        h.value_at_quantile(0.5) as f64,
        h.value_at_quantile(0.99) as f64,
        h.value_at_quantile(0.999) as f64,
        h.max() as f64,
    ])
}

/// (p50, p90, p99, p99.9, max) of `h`.
pub fn percentiles(h: &Histogram<u64>) -> [u64; 5] {
    [
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.9),
        h.value_at_quantile(0.99),
        h.value_at_quantile(0.999),
        h.max(),
    ]
}

/// Latency above this (an hour) is recorded as this.
pub const LATENCY_MAX_NS: u64 = 3_600_000_000_000;
