//! Sequence-number accounting for a receiver: highest sequence seen, exact
//! duplicates and late (reordered) arrivals within a 4096-packet window, and
//! the gaps never filled. No allocation: the window is a fixed ring bitmap
//! (sequence s at bit s mod 4096). An in-order arrival only moves the
//! highest up: the run of in-order arrivals since the bitmap was last
//! brought up to date is known to be seen, and its bits are set a word at
//! a time when anything else arrives (a jump ahead, which also clears the
//! skipped sequences' bits, a late arrival, a duplicate) or when trackers
//! merge. So the per-arrival cost does not depend on the window.

/// How many recent sequence numbers are remembered.
pub const WINDOW: u64 = 4096;

/// The largest jump ahead one arrival may make at any time (16.7 M
/// sequence numbers: over a second of total loss at 14.88 M frames/s);
/// past it, a jump may be as large as 64 times what the flow received.
/// Beyond that an arrival is an anomaly (forged or corrupt), not losses.
pub const JUMP_MIN: u64 = 1 << 24;
const WORDS: usize = (WINDOW / 64) as usize;

/// Per-stream (or per-flow) sequence state. Sequences start at 1.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    /// Highest sequence number seen.
    pub highest: u64,
    /// Packets received, duplicates included, but for the in-order run
    /// (marked, highest] (see [`received`](Self::received)): an in-order
    /// arrival counts by moving the highest only.
    counted: u64,
    /// A sequence number seen again within the window.
    pub duplicates: u64,
    /// First arrivals below the highest (reordered), within the window or
    /// older than it.
    pub late: u64,
    /// Arrivals whose sequence jumped further ahead than the flow could
    /// have lost ([`jump_max`](Self::jump_max)): forged or corrupt, left
    /// out of the sequence (neither received nor a gap).
    pub anomalies: u64,
    /// Sequence 0 arrived (a sender counting from 0): it is received, and
    /// expected, not late.
    zero: bool,
    /// The last anomaly's sequence: the next arrival continuing it (one
    /// above) shows a real stream, not a forgery (a receiver started long
    /// after its sender), and the count starts again from it.
    suspect: u64,
    /// Sequences at or below this are not expected (a new start).
    base: u64,
    /// Losses and distinct arrivals counted before the new start.
    carried_lost: u64,
    carried_unique: u64,
    /// Bit `s % WINDOW`: sequence s, for s in (highest - WINDOW, marked],
    /// was seen.
    seen: [u64; WORDS],
    /// Every sequence in (marked, highest] arrived (in order): their bits
    /// are set when the bitmap is next needed ([`settle`](Self::settle)).
    marked: u64,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self {
            highest: 0,
            counted: 0,
            duplicates: 0,
            late: 0,
            anomalies: 0,
            zero: false,
            suspect: 0,
            base: 0,
            carried_lost: 0,
            carried_unique: 0,
            seen: [0; WORDS],
            marked: 0,
        }
    }
}

/// What one arrival was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// In order, after `gap` missing sequence numbers.
    Next {
        gap: u64,
    },
    /// Below the highest, first time seen.
    Late,
    Duplicate,
    /// A jump ahead beyond what the flow could have lost: not counted.
    Anomaly,
}

impl SeqTracker {
    #[inline(always)]
    pub fn on_seq(&mut self, seq: u64) -> Arrival {
        if self.next_in_order(seq) {
            return Arrival::Next { gap: 0 };
        }
        self.on_other_seq(seq)
    }

    /// The common case alone: `seq` is the next sequence number, nothing
    /// missed; then it is taken as [`on_seq`](Self::on_seq) takes it (its
    /// bit is set, and it is counted, with the rest of the run, by
    /// `settle`). False, with nothing done, for any other: give it to
    /// `on_seq`.
    #[inline(always)]
    pub fn next_in_order(&mut self, seq: u64) -> bool {
        let next = seq == self.highest.wrapping_add(1);
        if next {
            self.highest = seq;
        }
        next
    }

    /// Every sequence number from the highest + 1 up to `highest` arrived,
    /// in order: the same as [`next_in_order`](Self::next_in_order) taking
    /// each (a receiver that followed a run of them itself).
    #[inline(always)]
    pub fn in_order_to(&mut self, highest: u64) {
        debug_assert!(highest >= self.highest);
        self.highest = highest;
    }

    /// A jump ahead, a late arrival or a duplicate (out of line, and laid
    /// out away from the in-order path).
    #[cold]
    #[inline(never)]
    fn on_other_seq(&mut self, seq: u64) -> Arrival {
        self.settle();
        if seq > self.highest && seq - self.highest - 1 > self.jump_max() {
            if self.suspect != 0 && seq == self.suspect.wrapping_add(1) {
                return self.start_again(seq);
            }
            self.suspect = seq;
            self.anomalies += 1;
            return Arrival::Anomaly;
        }
        self.counted += 1;
        let (w, bit) = slot(seq);
        if seq == 0 && !self.zero && self.highest < WINDOW {
            // A sender that counts from 0: its first sequence number.
            self.zero = true;
            self.seen[w] |= bit;
            if self.highest == 0 {
                return Arrival::Next { gap: 0 };
            }
            self.late += 1;
            return Arrival::Late;
        }
        if seq > self.highest {
            let gap = seq - self.highest - 1;
            if gap > 0 {
                self.fill(self.highest + 1, gap, false);
            }
            self.highest = seq;
            self.marked = seq;
            // The slot held seq - WINDOW (set or not): now it is seq's.
            self.seen[w] |= bit;
            return Arrival::Next { gap };
        }
        if self.highest - seq < WINDOW {
            if self.seen[w] & bit != 0 {
                self.duplicates += 1;
                return Arrival::Duplicate;
            }
            self.seen[w] |= bit;
        }
        self.late += 1;
        Arrival::Late
    }

    /// Packets received, duplicates included: those counted, and the
    /// in-order run not settled yet (each of its sequence numbers arrived
    /// once).
    pub fn received(&self) -> u64 {
        self.counted + (self.highest - self.marked)
    }

    /// Sequence numbers up to the highest that never arrived (from 0 when
    /// sequence 0 arrived, else from 1; after a new start, from it).
    pub fn lost(&self) -> u64 {
        let unique = self.received() - self.duplicates - self.carried_unique;
        let expected = (self.highest + u64::from(self.zero)).saturating_sub(self.base);
        self.carried_lost
            .saturating_add(expected.saturating_sub(unique))
    }

    /// The stream goes on from the last anomaly (`seq` is one above it):
    /// what was counted stands, and the count starts again at the anomaly,
    /// which was a real arrival after all.
    #[cold]
    fn start_again(&mut self, seq: u64) -> Arrival {
        let first = self.suspect;
        self.carried_lost = self.lost();
        self.anomalies -= 1;
        self.counted += 1;
        self.carried_unique = self.received() - self.duplicates - 1;
        self.zero = false;
        self.base = first - 1;
        self.suspect = 0;
        self.seen = [0; WORDS];
        self.highest = first;
        self.marked = first;
        let (w, bit) = slot(first);
        self.seen[w] |= bit;
        self.on_other_seq(seq)
    }

    /// The largest gap one arrival may open: [`JUMP_MIN`], or 64 times
    /// what the flow received when that is more.
    pub fn jump_max(&self) -> u64 {
        JUMP_MIN.max(self.received().saturating_mul(64))
    }

    /// Whether a sender's count for the flow (its end marker) is one the
    /// flow could have: within [`jump_max`](Self::jump_max) of the highest
    /// sequence seen.
    pub fn plausible_sent(&self, sent: u64) -> bool {
        sent <= self.highest.saturating_add(self.jump_max())
    }

    /// Takes in another tracker's arrivals of the same flow, counted apart
    /// (on another receive queue): the totals add up and the window of
    /// recent sequence numbers is the union, so loss stays exact when the
    /// two saw different packets. Duplicates across the two, and reordering
    /// between them, are not seen.
    pub fn absorb(&mut self, other: &SeqTracker) {
        let mut o = other.clone();
        o.settle();
        self.settle();
        // The lower tracker's slots past its highest hold sequences a
        // window older: cleared before the union.
        if o.highest > self.highest {
            self.advance(o.highest);
        } else {
            o.advance(self.highest);
        }
        for (a, b) in self.seen.iter_mut().zip(o.seen) {
            *a |= b;
        }
        // (Both settled: their runs are in their counts.)
        self.counted += o.counted;
        self.duplicates += other.duplicates;
        self.late += other.late;
        self.anomalies += other.anomalies;
        self.zero |= other.zero;
        // (A new start on either side: the later one holds for both.)
        self.base = self.base.max(other.base);
        self.carried_lost += other.carried_lost;
        self.carried_unique += other.carried_unique;
    }

    /// Moves the highest up to `to` with nothing seen in between (the
    /// bitmap settled).
    fn advance(&mut self, to: u64) {
        if to > self.highest {
            self.fill(self.highest + 1, to - self.highest, false);
            self.highest = to;
            self.marked = to;
        }
    }

    /// Sets the bits of the in-order run (marked, highest] and counts it.
    fn settle(&mut self) {
        if self.highest > self.marked {
            self.fill(self.marked + 1, self.highest - self.marked, true);
            self.counted += self.highest - self.marked;
        }
        self.marked = self.highest;
    }

    /// Sets (`seen`) or clears the slots of `n` sequences from `from` on,
    /// a word at a time.
    fn fill(&mut self, from: u64, n: u64, seen: bool) {
        if n >= WINDOW {
            self.seen = [if seen { u64::MAX } else { 0 }; WORDS];
            return;
        }
        let (mut pos, mut left) = (from % WINDOW, n);
        while left > 0 {
            let (w, b) = ((pos / 64) as usize, pos % 64);
            let take = (64 - b).min(left);
            let mask = if take == 64 {
                u64::MAX
            } else {
                ((1u64 << take) - 1) << b
            };
            if seen {
                self.seen[w] |= mask;
            } else {
                self.seen[w] &= !mask;
            }
            pos = (pos + take) % WINDOW;
            left -= take;
        }
    }
}

/// The word and bit of a sequence number's slot.
#[inline]
fn slot(seq: u64) -> (usize, u64) {
    let i = seq % WINDOW;
    ((i / 64) as usize, 1u64 << (i % 64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_late_duplicates() {
        let mut t = SeqTracker::default();
        let arrivals: std::vec::Vec<Arrival> =
            [1, 2, 4, 5, 3, 3, 8].iter().map(|&s| t.on_seq(s)).collect();
        assert_eq!(arrivals[2], Arrival::Next { gap: 1 });
        assert_eq!(arrivals[4], Arrival::Late);
        assert_eq!(arrivals[5], Arrival::Duplicate);
        assert_eq!(arrivals[6], Arrival::Next { gap: 2 });
        assert_eq!(
            (t.highest, t.received(), t.late, t.duplicates, t.lost()),
            (8, 7, 1, 1, 2)
        );
    }

    #[test]
    fn a_forged_jump_is_an_anomaly_not_losses() {
        let mut t = SeqTracker::default();
        for s in 1..=10 {
            t.on_seq(s);
        }
        assert_eq!(t.on_seq(1 << 62), Arrival::Anomaly);
        assert_eq!(t.on_seq(u64::MAX), Arrival::Anomaly);
        assert_eq!(
            (t.highest, t.received(), t.lost(), t.anomalies),
            (10, 10, 0, 2)
        );
        // A real gap within the bound is losses.
        assert_eq!(t.on_seq(11 + JUMP_MIN), Arrival::Next { gap: JUMP_MIN });
        assert_eq!(t.lost(), JUMP_MIN);
        assert!(t.plausible_sent(t.highest + JUMP_MIN));
        assert!(!t.plausible_sent(1 << 62));
        // The bound grows with what the flow received.
        let mut big = SeqTracker::default();
        for s in 1..=1_000_000 {
            big.on_seq(s);
        }
        assert_eq!(big.jump_max(), 64_000_000);
        assert_eq!(
            big.on_seq(1_000_001 + 50_000_000),
            Arrival::Next { gap: 50_000_000 }
        );
    }

    #[test]
    fn a_stream_that_goes_on_after_a_jump_starts_the_count_again() {
        // A receiver started long after its sender: the first arrival is
        // far ahead, and the next continues it.
        let mut t = SeqTracker::default();
        let first = 40_000_000;
        assert_eq!(t.on_seq(first), Arrival::Anomaly);
        assert_eq!(t.on_seq(first + 1), Arrival::Next { gap: 0 });
        for s in first + 2..first + 100 {
            t.on_seq(s);
        }
        t.on_seq(first + 101);
        assert_eq!(
            (t.received(), t.lost(), t.anomalies, t.late),
            (101, 1, 0, 0)
        );
        // Forgeries between real arrivals stay anomalies.
        assert_eq!(t.on_seq(1 << 62), Arrival::Anomaly);
        assert_eq!(t.on_seq(first + 102), Arrival::Next { gap: 0 });
        assert_eq!((t.received(), t.lost(), t.anomalies), (102, 1, 1));
    }

    #[test]
    fn a_sender_counting_from_zero_is_in_order() {
        let mut t = SeqTracker::default();
        for s in [0, 1, 2, 4] {
            assert!(matches!(t.on_seq(s), Arrival::Next { .. }), "{s}");
        }
        assert_eq!((t.received(), t.late, t.lost()), (4, 0, 1));
        assert_eq!(t.on_seq(0), Arrival::Duplicate);
        // Zero after one: it was reordered.
        let mut r = SeqTracker::default();
        r.on_seq(1);
        assert_eq!(r.on_seq(0), Arrival::Late);
        assert_eq!((r.received(), r.late, r.lost()), (2, 1, 0));
    }

    #[test]
    fn trackers_of_one_flow_merge() {
        // Odd and even sequence numbers counted apart; 7 has not arrived.
        let (mut a, mut b) = (SeqTracker::default(), SeqTracker::default());
        for s in [1, 3, 5, 9] {
            a.on_seq(s);
        }
        for s in [2, 4, 6, 8, 10] {
            b.on_seq(s);
        }
        assert_eq!(
            (a.lost(), b.lost()),
            (5, 5),
            "apart, each sees the other's as lost"
        );
        a.absorb(&b);
        assert_eq!(
            (a.highest, a.received(), a.lost(), a.duplicates),
            (10, 9, 1, 0)
        );
        // The union window still spots a duplicate of either side.
        assert_eq!(a.on_seq(4), Arrival::Duplicate);
        assert_eq!(a.on_seq(7), Arrival::Late);
        assert_eq!(a.lost(), 0);
    }

    #[test]
    fn window_slides_across_words() {
        let mut t = SeqTracker::default();
        t.on_seq(1);
        t.on_seq(70);
        assert_eq!(t.on_seq(1), Arrival::Duplicate);
        assert_eq!(t.on_seq(2), Arrival::Late);
        t.on_seq(5000);
        assert_eq!(
            t.on_seq(70),
            Arrival::Late,
            "beyond the window: counted late"
        );
        assert_eq!(t.on_seq(4999), Arrival::Late);
        assert_eq!(t.on_seq(4999), Arrival::Duplicate);
    }

    /// Two trackers of one flow, each given some of its arrivals (long
    /// in-order runs among them), merged: the totals add up, and the merged
    /// window knows every sequence either saw (a duplicate of each is seen
    /// as one), and none other.
    #[test]
    fn merged_trackers_know_what_either_saw() {
        use proptest::prelude::*;
        let steps = proptest::collection::vec((0u8..5, 0u64..300, any::<bool>()), 1..300);
        proptest!(ProptestConfig::with_cases(256), |(steps in steps)| {
            let (mut a, mut b) = (SeqTracker::default(), SeqTracker::default());
            let mut seen = std::collections::BTreeSet::new();
            let mut next = 1u64;
            for (kind, x, to_a) in steps {
                let t = if to_a { &mut a } else { &mut b };
                match kind {
                    // A run in order, a gap, a late one.
                    0 | 1 => for _ in 0..x % 150 {
                        t.on_seq(next);
                        seen.insert(next);
                        next += 1;
                    },
                    2 => next += x * 20,
                    _ => {
                        let s = next.saturating_sub(x * 10).max(1);
                        t.on_seq(s);
                        seen.insert(s);
                    }
                }
            }
            let received = a.received() + b.received();
            let dups = a.duplicates + b.duplicates;
            a.absorb(&b);
            prop_assert_eq!((a.received(), a.duplicates), (received, dups));
            let highest = seen.last().copied().unwrap_or(0);
            prop_assert_eq!(a.highest, highest);
            for s in highest.saturating_sub(WINDOW - 1).max(1)..=highest {
                let mut m = a.clone();
                let want = if seen.contains(&s) { Arrival::Duplicate } else { Arrival::Late };
                prop_assert_eq!(m.on_seq(s), want, "seq {} highest {}", s, highest);
            }
        });
    }

    /// The tracker against a model that remembers every sequence number:
    /// within the window the same arrival kinds, and the same counts.
    #[test]
    fn matches_a_model_with_unbounded_memory() {
        use proptest::prelude::*;
        let steps = proptest::collection::vec((0u8..4, 0u64..6000), 1..400);
        proptest!(ProptestConfig::with_cases(256), |(steps in steps)| {
            let mut t = SeqTracker::default();
            let mut seen = std::collections::BTreeSet::new();
            let mut highest = 0u64;
            let arrivals = steps.len() as u64;
            for (kind, x) in steps {
                // Next, a jump ahead, an old one, or one far back.
                let seq = match kind {
                    0 => highest + 1,
                    1 => highest + 1 + x,
                    2 => highest.saturating_sub(x % 70).max(1),
                    _ => highest.saturating_sub(x).max(1),
                };
                let want = if seq > highest {
                    Arrival::Next { gap: seq - highest - 1 }
                } else if highest - seq < WINDOW && seen.contains(&seq) {
                    Arrival::Duplicate
                } else {
                    Arrival::Late
                };
                prop_assert_eq!(t.on_seq(seq), want, "seq {} highest {}", seq, highest);
                seen.insert(seq);
                highest = highest.max(seq);
            }
            prop_assert_eq!(t.highest, highest);
            // Every arrival received once, settled or in the run.
            prop_assert_eq!(t.received(), arrivals);
            let distinct = t.received() - t.duplicates;
            prop_assert_eq!(t.lost(), highest - distinct.min(highest));
        });
    }
}
