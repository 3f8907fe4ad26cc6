//! The loaded-server simulation: a FIFO of held frames with a flush time,
//! and random memory reads and writes per frame (testpmd's noisy VNF).

use super::Noisy;
use linerate_backend::port::{Tx, send_refused};

/// Per-frame memory work: random reads, writes and read-modify-writes in
/// an area touched once at set-up.
pub(super) struct MemLoad {
    area: Vec<u64>,
    rng: u64,
    pub(super) sum: u64,
    reads: u32,
    writes: u32,
    read_writes: u32,
}

impl MemLoad {
    pub(super) fn new(n: &Noisy) -> Self {
        let words = (n.mem_bytes / 8).max(1);
        Self {
            area: (0..words as u64).collect(),
            rng: 0x9E37_79B9_7F4A_7C15,
            sum: 0,
            reads: n.reads,
            writes: n.writes,
            read_writes: n.read_writes,
        }
    }

    fn next(&mut self) -> usize {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) % self.area.len() as u64) as usize
    }

    pub(super) fn per_frame(&mut self) {
        for _ in 0..self.reads {
            let i = self.next();
            self.sum = self.sum.wrapping_add(self.area[i]);
        }
        for _ in 0..self.writes {
            let i = self.next();
            self.area[i] = self.sum;
        }
        for _ in 0..self.read_writes {
            let i = self.next();
            self.area[i] = self.area[i].wrapping_add(1);
        }
    }
}

/// Frames waiting to be sent: copies in preallocated slots, oldest first.
pub(super) struct Fifo {
    slots: Vec<Vec<u8>>,
    lens: Vec<usize>,
    /// When each slot's frame arrived (monotonic ns).
    at: Vec<u64>,
    head: usize,
    pub(super) len: usize,
}

impl Fifo {
    pub(super) fn new(cap: usize, frame: usize) -> Self {
        Self {
            slots: vec![vec![0u8; frame]; cap],
            lens: vec![0; cap],
            at: vec![0; cap],
            head: 0,
            len: 0,
        }
    }

    pub(super) fn full(&self) -> bool {
        self.len == self.slots.len()
    }

    pub(super) fn oldest(&self) -> Option<u64> {
        (self.len > 0).then(|| self.at[self.head])
    }

    /// Copies a frame in (the caller makes room first); returns its slot.
    pub(super) fn push(&mut self, frame: &[u8], now: u64) -> &mut [u8] {
        let i = (self.head + self.len) % self.slots.len();
        self.slots[i][..frame.len()].copy_from_slice(frame);
        self.lens[i] = frame.len();
        self.at[i] = now;
        self.len += 1;
        &mut self.slots[i][..frame.len()]
    }

    /// Sends up to `n` of the oldest frames; returns (sent, dropped).
    pub(super) fn send(&mut self, tx: &mut Tx, n: usize) -> (u64, u64) {
        let mut sent = 0u64;
        let mut dropped = 0u64;
        let mut left = n.min(self.len);
        let cap = self.slots.len();
        while left > 0 {
            // a contiguous run from head, at most one backend batch
            let run = left.min(cap - self.head).min(tx.batch()).min(BATCH);
            let frames: [&[u8]; BATCH] = std::array::from_fn(|k| {
                if k < run {
                    &self.slots[self.head + k][..self.lens[self.head + k]]
                } else {
                    &[]
                }
            });
            let (s, d) = send_all(tx, &frames[..run]);
            sent += s;
            dropped += d;
            self.head = (self.head + run) % cap;
            self.len -= run;
            left -= run;
        }
        (sent, dropped)
    }
}

/// Largest run handed to the backend in one call.
pub(super) const BATCH: usize = 256;
/// Times a full sending backend is retried before the frames are dropped.
const SEND_RETRIES: usize = 200;

/// Hands `frames` to the backend, retrying while it is full for a while;
/// returns (sent, dropped).
fn send_all(tx: &mut Tx, frames: &[&[u8]]) -> (u64, u64) {
    let mut done = 0;
    let mut tries = 0;
    while done < frames.len() && tries < SEND_RETRIES {
        match tx.send(&frames[done..]) {
            Ok(0) => {
                tries += 1;
                std::thread::yield_now();
            }
            Ok(n) => done += n,
            Err(e) if send_refused(&e) => {
                tries += 1;
                std::thread::yield_now();
            }
            // a frame the backend refuses: count it and go on
            Err(_) => {
                done += 1;
                return (done as u64 - 1, (frames.len() - done + 1) as u64);
            }
        }
    }
    (done as u64, (frames.len() - done) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_load_touches_the_area() {
        let mut m = MemLoad::new(&Noisy {
            mem_bytes: 4096,
            reads: 4,
            writes: 2,
            read_writes: 1,
            ..Noisy::default()
        });
        for _ in 0..100 {
            m.per_frame();
        }
        assert_eq!(m.area.len(), 512);
        assert_ne!(m.sum, 0);
    }
}
