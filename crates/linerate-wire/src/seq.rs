//! Sequence-number accounting for a receiver: highest sequence seen, exact
//! duplicates and late (reordered) arrivals within a 4096-packet window, and
//! the gaps never filled. No allocation: the window is a fixed bitmap.

/// How many recent sequence numbers are remembered.
pub const WINDOW: u64 = 4096;
const WORDS: usize = (WINDOW / 64) as usize;

/// Per-stream (or per-flow) sequence state. Sequences start at 1.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    /// Highest sequence number seen.
    pub highest: u64,
    /// Packets received, duplicates included.
    pub received: u64,
    /// A sequence number seen again within the window.
    pub duplicates: u64,
    /// First arrivals below the highest (reordered), within the window or
    /// older than it.
    pub late: u64,
    /// Bit i: sequence `highest - i` was seen.
    seen: [u64; WORDS],
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self {
            highest: 0,
            received: 0,
            duplicates: 0,
            late: 0,
            seen: [0; WORDS],
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
}

impl SeqTracker {
    pub fn on_seq(&mut self, seq: u64) -> Arrival {
        self.received += 1;
        if seq > self.highest {
            let gap = seq - self.highest - 1;
            self.shift(seq - self.highest);
            self.highest = seq;
            self.seen[0] |= 1;
            return Arrival::Next { gap };
        }
        let back = self.highest - seq;
        if back < WINDOW {
            let (w, b) = ((back / 64) as usize, back % 64);
            if self.seen[w] & (1 << b) != 0 {
                self.duplicates += 1;
                return Arrival::Duplicate;
            }
            self.seen[w] |= 1 << b;
        }
        self.late += 1;
        Arrival::Late
    }

    /// Sequence numbers up to the highest that never arrived.
    pub fn lost(&self) -> u64 {
        self.highest.saturating_sub(self.received - self.duplicates)
    }

    /// Takes in another tracker's arrivals of the same flow, counted apart
    /// (on another receive queue): the totals add up and the window of
    /// recent sequence numbers is the union, so loss stays exact when the
    /// two saw different packets. Duplicates across the two, and reordering
    /// between them, are not seen.
    pub fn absorb(&mut self, other: &SeqTracker) {
        let mut o = other.clone();
        if o.highest > self.highest {
            self.shift(o.highest - self.highest);
            self.highest = o.highest;
        } else {
            o.shift(self.highest - o.highest);
        }
        for (a, b) in self.seen.iter_mut().zip(o.seen) {
            *a |= b;
        }
        self.received += other.received;
        self.duplicates += other.duplicates;
        self.late += other.late;
    }

    fn shift(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; WORDS];
            return;
        }
        let (ws, bs) = ((by / 64) as usize, (by % 64) as u32);
        for i in (0..WORDS).rev() {
            let hi = i.checked_sub(ws).map_or(0, |s| self.seen[s]);
            let lo = i.checked_sub(ws + 1).map_or(0, |s| self.seen[s]);
            self.seen[i] = if bs == 0 {
                hi
            } else {
                (hi << bs) | (lo >> (64 - bs))
            };
        }
    }
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
            (t.highest, t.received, t.late, t.duplicates, t.lost()),
            (8, 7, 1, 1, 2)
        );
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
            (a.highest, a.received, a.lost(), a.duplicates),
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
}
