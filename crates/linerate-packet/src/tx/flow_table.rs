//! The flows of a run of one size and one worker, walked from a table
//! made once (see [`FlowTable`]): per frame no cursor step and no
//! checksum fold, only the flow's sequence and the residue of its
//! transport checksum's sum, each moved by one.

use linerate_traffic::{Template, WireCursor, template::WireFlow};

/// Most flows a table is made for (every flow's fields, 56 bytes, and
/// its 16 bytes of state: 4.5 MiB at most); more walk the cursor.
pub(super) const MAX_FLOWS: u64 = 1 << 16;

/// One flow's state: its sequence (the last frame's) and its transport
/// checksum's sum for that sequence less the send time's words, reduced
/// modulo 0xffff (the sum rises by one with the sequence: 2^16 and 2^32
/// are both 1 modulo 0xffff).
#[derive(Debug, Clone, Copy)]
pub(super) struct FlowState {
    pub(super) seq: u64,
    pub(super) residue: u16,
    pub(super) id: u16,
}

impl FlowState {
    /// The next frame's sequence and checksum residue with the send time's
    /// residue `stamp_residue` (below 0xffff) added.
    #[inline(always)]
    pub(super) fn step(&mut self, stamp_residue: u16) -> (u64, u16) {
        self.seq += 1;
        // (past u64::MAX the sequence wraps: frames enough for that are
        // not sent)
        self.residue = if self.residue == 0xfffe {
            0
        } else {
            self.residue + 1
        };
        let x = u32::from(self.residue) + u32::from(stamp_residue);
        let x = if x >= 0xffff { x - 0xffff } else { x };
        (self.seq, x as u16)
    }
}

/// Every flow of a periodic walk with distinct probe ids, in the walk's
/// order: their wire fields (read when a buffer held another flow) and
/// their state (read and written every frame), and the next flow's index.
pub(super) struct FlowTable {
    pub(super) wire: Vec<WireFlow>,
    pub(super) state: Vec<FlowState>,
    pub(super) next: usize,
}

impl FlowTable {
    /// The table for `cursor`'s walk (at its first flow) with template `t`,
    /// or `None` when the flows are more than [`MAX_FLOWS`], share a probe
    /// id (their sequences are then one), or the walk does not come back
    /// to its first flow after `count` steps.
    pub(super) fn new(cursor: &WireCursor, count: u64, t: &Template) -> Option<Self> {
        if count <= 1 || count > MAX_FLOWS || cursor.index() != 0 {
            return None;
        }
        let mut c = cursor.clone();
        let n = count as usize;
        let (mut wire, mut state) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut seen = vec![false; 1 << 16];
        for _ in 0..n {
            let id = c.flow_id();
            if std::mem::replace(&mut seen[usize::from(id)], true) {
                return None;
            }
            wire.push(*c.wire());
            state.push(FlowState {
                seq: 0,
                residue: t.seq_sum_base(c.wire(), id, &linerate_traffic::Stamp::new(0)),
                id,
            });
            c.advance();
        }
        (c.index() == 0 && c.wire() == cursor.wire()).then_some(FlowTable {
            wire,
            state,
            next: 0,
        })
    }

    /// Frames sent per probe flow id, in the ids' order.
    pub(super) fn per_flow(&self) -> Vec<(u16, u64)> {
        let mut v: Vec<(u16, u64)> = (self.state.iter())
            .filter(|s| s.seq > 0)
            .map(|s| (s.id, s.seq))
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::super::filler::{Counters, Filler, Job};
    use super::super::send::{BlastConfig, Fill, Rate};
    use linerate_backend::{Buffers, FrameSource};
    use linerate_traffic::template::{Framing, Template};
    use linerate_traffic::{FlowSpec, SizeSequence};
    use std::collections::HashMap;
    use std::time::Duration;

    fn cfg(src_ip: &str, src_ports: &str, tcp: bool) -> BlastConfig {
        BlastConfig {
            iface: "lo".into(),
            flows: FlowSpec::parse(
                "02:00:00:00:00:01",
                "02:00:00:00:00:02",
                src_ip,
                if src_ip.contains(':') {
                    "2001:db8::2"
                } else {
                    "198.18.0.2"
                },
                src_ports,
                "9",
            )
            .unwrap(),
            sizes: SizeSequence::list(&[100]),
            framing: Framing {
                ttl: 64,
                tcp_flags: tcp.then_some(0x10),
                ..Framing::default()
            },
            count: None,
            duration: Duration::from_secs(1),
            rate: Rate::Pps(1),
            burst: 1,
            catch_up: linerate_traffic::pacing::CatchUp::Burst,
            burst_tolerance: 0,
            backend: linerate_packet_kind(),
            wires: Default::default(),
            cores: Vec::new(),
            replay: None,
            macs_given: true,
            gso: crate::Gso::Off,
            interval: None,
            end_markers: false,
        }
    }

    fn linerate_packet_kind() -> crate::BackendKind {
        crate::BackendKind::Loopback
    }

    /// A batch's buffers: `n` slots taken in turn from `next`.
    struct Slots<'a> {
        bufs: &'a mut [Vec<u8>],
        next: &'a mut usize,
        left: usize,
        lens: Vec<usize>,
    }

    impl Buffers for Slots<'_> {
        fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let slot = *self.next;
            *self.next = (slot + 1) % self.bufs.len();
            Some((&mut self.bufs[slot][..], slot))
        }
        fn built(&mut self, len: usize) {
            self.lens.push(len);
        }
    }

    /// Frames from the table (by `build_each`, and by `build` every
    /// third batch) and from the cursor (`build` on a filler without its
    /// table) are the same bytes, batch after batch with new send times,
    /// and each flow's count is the same.
    fn same_frames<const V6: bool, const TCP: bool>(cfg: &BlastConfig, slots: usize) {
        let flow0 = cfg.flows.flow(0);
        let templates: HashMap<u16, Template> =
            HashMap::from([(100, Template::new(100, &flow0, &cfg.framing).unwrap())]);
        let encaps = HashMap::new();
        let counters = Counters::default();
        let job = Job {
            cfg,
            templates: &templates,
            encaps: &encaps,
            worker: 0,
            workers: 1,
            count: None,
            interval_ns: None,
            counters: &counters,
        };
        let mut table = Filler::<false, V6, TCP, false>::new(&job, slots);
        assert!(table.has_table(), "{} flows", cfg.flows.count());
        let mut cursor = Filler::<false, V6, TCP, false>::new(&job, slots);
        cursor.drop_table();
        let (mut a, mut b) = (vec![vec![0u8; 256]; slots], vec![vec![0u8; 256]; slots]);
        let (mut next_a, mut next_b) = (0, 0);
        let mut stamp = 0x1234_5678_9abc_u64;
        for batch in 0..200 {
            stamp = stamp.wrapping_mul(6364136223846793005).wrapping_add(batch);
            Fill::set_stamp(&mut table, stamp);
            Fill::set_stamp(&mut cursor, stamp);
            let n = 1 + (batch as usize * 7) % 64;
            let first = next_a;
            if batch % 3 == 2 {
                for _ in 0..n {
                    let slot = next_a;
                    next_a = (slot + 1) % slots;
                    let len = table.build(&mut a[slot], slot);
                    assert_eq!(len, 96);
                }
            } else {
                let mut s = Slots {
                    bufs: &mut a,
                    next: &mut next_a,
                    left: n,
                    lens: Vec::new(),
                };
                assert_eq!(table.build_each(&mut s), 96 * n as u64);
                assert_eq!(s.lens, vec![96; n]);
            }
            for _ in 0..n {
                let slot = next_b;
                next_b = (slot + 1) % slots;
                cursor.build(&mut b[slot], slot);
            }
            for k in 0..n {
                let slot = (first + k) % slots;
                assert_eq!(a[slot][..96], b[slot][..96], "batch {batch}, slot {slot}");
            }
        }
        assert_eq!(Fill::per_flow(&table), Fill::per_flow(&cursor));
    }

    #[test]
    fn frames_from_the_table_are_the_cursors() {
        // 39 flows: an address carries; fewer slots than flows, and
        // twice as many (each keeps its flow).
        for slots in [16, 78] {
            same_frames::<false, false>(&cfg("198.18.0.1-198.18.0.3", "1000-1012", false), slots);
            same_frames::<false, true>(&cfg("198.18.0.1-198.18.0.3", "1000-1012", true), slots);
            same_frames::<true, false>(&cfg("2001:db8::1-2001:db8::3", "1000-1012", false), slots);
        }
        // 4,096 flows in step with 4,096 slots (the bench's case).
        same_frames::<false, false>(&cfg("198.18.0.1", "1000-5095", false), 4096);
    }

    #[test]
    fn no_table_past_its_most_flows_or_for_one_flow() {
        let c = cfg("198.18.0.1-198.18.0.2", "1-65535", false);
        let t = Template::new(100, &c.flows.flow(0), &c.framing).unwrap();
        let cursor = linerate_traffic::WireCursor::new(&c.flows);
        assert!(super::FlowTable::new(&cursor, c.flows.count(), &t).is_none());
        let one = cfg("198.18.0.1", "9", false);
        let cursor = linerate_traffic::WireCursor::new(&one.flows);
        assert!(super::FlowTable::new(&cursor, 1, &t).is_none());
    }
}
