//! Which requests of one flow are still unanswered, by sequence number:
//! a ring indexed by `seq & mask`, so each response is matched in O(1)
//! and each request is exactly one of answered, lost (unanswered within
//! the timeout) or still in flight. A response is `Completed` once; a
//! second one is a `Duplicate`, one for a request already declared lost
//! is `Late`, and one that matches nothing in the window is `Unknown`.
//!
//! The ring doubles (rarely, and never past [`MAX_SLOTS`]) when a new
//! request would land on a slot whose request is still in flight, so no
//! request is ever forgotten to make room.

/// Most slots a flow's ring grows to.
pub const MAX_SLOTS: usize = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    InFlight,
    Answered,
    Lost,
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    seq: u64,
    sent_ns: u64,
    state: State,
}

const FREE: Slot = Slot {
    seq: 0,
    sent_ns: 0,
    state: State::Free,
};

/// What a response turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// The first answer to an in-flight request, after this many ns.
    Completed(u64),
    /// Another answer to a request already answered.
    Duplicate,
    /// An answer to a request already counted lost.
    Late,
    /// A sequence number this flow never sent, or one too old to tell.
    Unknown,
}

/// One flow's requests.
#[derive(Debug)]
pub struct Outstanding {
    slots: Vec<Slot>,
    /// Next sequence number to send.
    next: u64,
    /// Every request below this is answered or lost.
    oldest: u64,
    in_flight: usize,
}

impl Outstanding {
    /// Room for about `expected` requests in flight before growing.
    pub fn new(expected: usize) -> Self {
        let n = expected.clamp(16, MAX_SLOTS).next_power_of_two();
        Self {
            slots: vec![FREE; n],
            next: 0,
            oldest: 0,
            in_flight: 0,
        }
    }

    fn mask(&self) -> u64 {
        self.slots.len() as u64 - 1
    }

    /// Requests sent and neither answered nor lost.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// The sequence number the next [`Outstanding::send`] will record.
    pub fn next_seq(&self) -> u64 {
        self.next
    }

    /// Records a request sent at `sent_ns`; returns its sequence number,
    /// or `None` when the ring is full at its largest size.
    pub fn send(&mut self, sent_ns: u64) -> Option<u64> {
        if self.slots[(self.next & self.mask()) as usize].state == State::InFlight {
            self.grow()?;
        }
        let seq = self.next;
        let m = self.mask();
        self.slots[(seq & m) as usize] = Slot {
            seq,
            sent_ns,
            state: State::InFlight,
        };
        self.next += 1;
        self.in_flight += 1;
        Some(seq)
    }

    fn grow(&mut self) -> Option<()> {
        let n = self.slots.len() * 2;
        if n > MAX_SLOTS {
            return None;
        }
        let mut slots = vec![FREE; n];
        let m = n as u64 - 1;
        // Old slots hold sequence numbers that differ modulo the old size,
        // so they differ modulo the new one too: no two land on one slot.
        for s in self.slots.iter().filter(|s| s.state != State::Free) {
            slots[(s.seq & m) as usize] = *s;
        }
        self.slots = slots;
        Some(())
    }

    /// Matches a response with sequence `seq` received at `now_ns`.
    pub fn answer(&mut self, seq: u64, now_ns: u64) -> Answer {
        if seq >= self.next {
            return Answer::Unknown;
        }
        let m = self.mask();
        let slot = &mut self.slots[(seq & m) as usize];
        if slot.seq != seq {
            return Answer::Unknown;
        }
        match slot.state {
            State::InFlight => {
                slot.state = State::Answered;
                self.in_flight -= 1;
                Answer::Completed(now_ns.saturating_sub(slot.sent_ns))
            }
            State::Answered => Answer::Duplicate,
            State::Lost => Answer::Late,
            State::Free => Answer::Unknown,
        }
    }

    /// Declares lost every in-flight request sent before `sent_before_ns`,
    /// oldest first; returns how many.
    pub fn expire(&mut self, sent_before_ns: u64) -> u64 {
        let m = self.mask();
        let mut lost = 0;
        while self.oldest < self.next {
            let slot = &mut self.slots[(self.oldest & m) as usize];
            if slot.seq == self.oldest && slot.state == State::InFlight {
                if slot.sent_ns >= sent_before_ns {
                    break;
                }
                slot.state = State::Lost;
                self.in_flight -= 1;
                lost += 1;
            }
            self.oldest += 1;
        }
        lost
    }

    /// Declares every request still in flight lost (the end of a test).
    pub fn expire_all(&mut self) -> u64 {
        self.expire(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_request_is_answered_lost_or_in_flight_exactly_once() {
        let mut o = Outstanding::new(4);
        let seqs: Vec<u64> = (0..5).map(|i| o.send(100 + i).unwrap()).collect();
        assert_eq!(seqs, vec![0, 1, 2, 3, 4]);
        assert_eq!(o.answer(1, 150), Answer::Completed(49));
        assert_eq!(o.answer(1, 160), Answer::Duplicate);
        assert_eq!(o.answer(9, 160), Answer::Unknown);
        assert_eq!(o.in_flight(), 4);
        // requests sent before 103 (0 and 2) are lost; 1 was answered
        assert_eq!(o.expire(103), 2);
        assert_eq!(o.answer(0, 170), Answer::Late);
        assert_eq!(o.answer(3, 170), Answer::Completed(67));
        assert_eq!(o.in_flight(), 1);
        assert_eq!(o.expire_all(), 1);
        assert_eq!(o.in_flight(), 0);
    }

    #[test]
    fn a_long_unanswered_request_makes_the_ring_grow_instead_of_being_forgotten() {
        let mut o = Outstanding::new(16);
        let stuck = o.send(0).unwrap();
        for i in 1..1000u64 {
            let s = o.send(i).unwrap();
            assert_eq!(o.answer(s, i + 5), Answer::Completed(5));
        }
        assert!(o.slots.len() >= 1000 / 2);
        assert_eq!(o.answer(stuck, 2000), Answer::Completed(2000));
        // an answer far older than the ring can remember is Unknown, not a
        // false duplicate
        assert_eq!(o.in_flight(), 0);
    }

    #[test]
    fn growing_keeps_every_in_flight_request() {
        let mut o = Outstanding::new(16);
        for i in 0..100u64 {
            o.send(i).unwrap();
        }
        assert_eq!(o.in_flight(), 100);
        for s in (0..100u64).rev() {
            assert_eq!(o.answer(s, 1000), Answer::Completed(1000 - s));
        }
        assert_eq!(o.expire_all(), 0);
    }
}
