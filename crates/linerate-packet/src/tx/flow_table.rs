//! The flows of a run of one size and one worker, walked from a table
//! made once (see [`FlowTable`]): per frame no cursor step, no checksum
//! fold and no per-flow state written: the walk visits every flow once a
//! lap, so every frame of a lap carries the same sequence, and a flow's
//! transport checksum is its constant part added to the lap's.

use linerate_traffic::{Template, WireCursor, template::WireFlow};

/// Most flows a table is made for (every flow's fields, 56 bytes, and
/// its 4 bytes of checksum base and probe id: 3.8 MiB at most); more
/// walk the cursor.
pub(super) const MAX_FLOWS: u64 = 1 << 16;

/// Bytes of a flow's frame head in [`FlowTable::images`]: every field a
/// flow sets lies in the first 64 bytes of an IPv4 frame and the first
/// 96 of an IPv6 one (VLAN tag and TCP header included), a fixed size so
/// that the copy is a few wide moves; a 64-byte IPv4 frame (60 bytes) or
/// the shortest IPv6 one lies in it whole.
#[inline(always)]
pub(super) const fn image_len<const V6: bool>() -> usize {
    if V6 { 96 } else { 64 }
}

/// Lays flow `i`'s frame head from `images` ([`FlowTable::images`]) over
/// `buf`: a fixed-size copy.
#[inline(always)]
pub(super) fn put_image<const V6: bool>(buf: &mut [u8], images: &[u8], i: usize) {
    let n = image_len::<V6>();
    buf[..n].copy_from_slice(&images[i * n..][..n]);
}

/// What a frame needs of its flow every time: its probe id (for a buffer
/// that held another flow) and the [`complement`] of its transport
/// checksum's sum for sequence 0 and send time 0.
#[derive(Debug, Clone, Copy)]
pub(super) struct TableFlow {
    pub(super) base: u16,
    pub(super) id: u16,
}

/// `0xffff` less `m` (a sum's residue, below 0xffff): 1..=0xffff for
/// UDP, and 0 for 0xffff for TCP (0..=0xfffe), so that two added need
/// one reduction in [`table_csum`].
#[inline]
pub(super) fn complement(m: u16, tcp: bool) -> u32 {
    let v = 0xffff - u32::from(m);
    if tcp && v == 0xffff { 0 } else { v }
}

/// The [`complement`] of the sum's part every frame of a lap shares: the
/// sequence and the send time's residue (the sum rises by one with the
/// sequence: 2^16 and 2^32 are both 1 modulo 0xffff).
#[inline]
pub(super) fn lap_part(seq: u64, stamp_residue: u16, tcp: bool) -> u32 {
    let m = (seq % 0xffff + u64::from(stamp_residue)) % 0xffff;
    complement(m as u16, tcp)
}

/// The transport checksum as written for a flow's `base` and a lap's
/// `lap_part` (both [`complement`]s): the two added, less 0xffff where
/// above it (UDP: 1..=0xffff) or at it (TCP: 0..=0xfffe); what
/// `csum_of_folded` writes for the residue of the sum, 0 spelt 0xffff in
/// UDP and 0 in TCP.
/// The lap part of the next lap from this one's, `lap_part(seq + 1, r,
/// tcp)` from `lap_part(seq, r, tcp)` without the divisions: the sum's
/// residue rises by one, so its complement falls by one, from 1 back to
/// 0xffff (UDP; TCP's complement of a zero residue is 0, so from 0 to
/// 0xfffe).
#[inline(always)]
pub(super) fn next_lap_part<const TCP: bool>(part: u32) -> u32 {
    match (TCP, part) {
        (false, 1) => 0xffff,
        (true, 0) => 0xfffe,
        _ => part - 1,
    }
}

#[inline(always)]
pub(super) fn table_csum<const TCP: bool>(base: u16, lap_part: u32) -> u16 {
    let t = u32::from(base) + lap_part;
    let over = if TCP { t >= 0xffff } else { t > 0xffff };
    (if over { t - 0xffff } else { t }) as u16
}

/// Every flow of a periodic walk with distinct probe ids, in the walk's
/// order: their wire fields (read when a buffer held another flow) and
/// [`TableFlow`]s (read every frame), the next flow's index and the laps
/// done: the flows before `next` sent `lap + 1` frames, the others `lap`,
/// and the next frame's sequence is `lap + 1`.
pub(super) struct FlowTable {
    pub(super) wire: Vec<WireFlow>,
    pub(super) flows: Vec<TableFlow>,
    /// Each flow's frame head, [`image_len`] bytes a flow in the walk's
    /// order: the template laid with the flow's fields (its IPv4 header
    /// checksum and probe id), copied whole over a buffer that held
    /// another flow's frame; only the probe's sequence and send time and
    /// the transport checksum are written after it.
    pub(super) images: Vec<u8>,
    /// The images cover the whole frame (the template is no longer than
    /// [`image_len`]): a frame is its head copied whole and the probe,
    /// whatever the buffer held (no slot's `held` asked or kept: a test
    /// a frame costs about what the copy does, and from DPDK's pool the
    /// buffer held another flow's frame all but always).
    pub(super) covers: bool,
    pub(super) next: usize,
    pub(super) lap: u64,
    /// The batch's send time's residue, and [`lap_part`] for `lap + 1`
    /// with it.
    pub(super) stamp_residue: u16,
    pub(super) lap_part: u32,
    /// The template's transport (see [`complement`]).
    pub(super) tcp: bool,
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
        let (mut wire, mut flows) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut seen = vec![false; 1 << 16];
        let (_, v6, tcp) = t.layout();
        let img = if v6 {
            image_len::<true>()
        } else {
            image_len::<false>()
        };
        let mut images = vec![0u8; n * img];
        let mut frame = vec![0u8; t.len().max(img)];
        t.lay(&mut frame);
        for k in 0..n {
            let id = c.flow_id();
            if std::mem::replace(&mut seen[usize::from(id)], true) {
                return None;
            }
            wire.push(*c.wire());
            t.put_flow(&mut frame, c.wire(), id);
            images[k * img..(k + 1) * img].copy_from_slice(&frame[..img]);
            let sum = t.seq_sum_base(c.wire(), id, &linerate_traffic::Stamp::new(0));
            flows.push(TableFlow {
                base: complement(sum, tcp) as u16,
                id,
            });
            c.advance();
        }
        (c.index() == 0 && c.wire() == cursor.wire()).then_some(FlowTable {
            wire,
            flows,
            images,
            covers: t.len() <= img,
            next: 0,
            lap: 0,
            stamp_residue: 0,
            lap_part: lap_part(1, 0, tcp),
            tcp,
        })
    }

    /// The send time of the frames built from now on has residue `r`.
    pub(super) fn set_stamp(&mut self, r: u16) {
        self.stamp_residue = r;
        self.lap_part = lap_part(self.lap + 1, r, self.tcp);
    }

    /// The next flow's index, moved on past it.
    #[inline(always)]
    pub(super) fn take(&mut self) -> usize {
        let i = self.next;
        self.next = i + 1;
        if self.next == self.flows.len() {
            self.next = 0;
            self.lap_done();
        }
        i
    }

    /// `lap` laps done (the UDP path's batch, which needs no checksum,
    /// counts them in a local).
    #[inline]
    pub(super) fn set_lap(&mut self, lap: u64) {
        if lap != self.lap {
            self.lap = lap;
            self.lap_part = lap_part(lap + 1, self.stamp_residue, self.tcp);
        }
    }

    /// Every flow sent one more frame: the next lap's sequence.
    #[inline]
    pub(super) fn lap_done(&mut self) {
        self.lap += 1;
        self.lap_part = if self.tcp {
            next_lap_part::<true>(self.lap_part)
        } else {
            next_lap_part::<false>(self.lap_part)
        };
    }

    /// Frames sent per probe flow id, in the ids' order.
    pub(super) fn per_flow(&self) -> Vec<(u16, u64)> {
        let mut v: Vec<(u16, u64)> = (self.flows.iter().enumerate())
            .map(|(i, f)| (f.id, self.lap + u64::from(i < self.next)))
            .filter(|(_, s)| *s > 0)
            .collect();
        v.sort_unstable();
        v
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::filler::{Counters, Filler, Job};
    use super::super::send::{BlastConfig, Fill, Rate};
    use linerate_backend::{Buffers, FrameSource};
    use linerate_traffic::template::{Framing, Template};
    use linerate_traffic::vxlan::Encap;
    use linerate_traffic::{FlowSpec, SizeSequence};
    use std::collections::HashMap;
    use std::time::Duration;

    pub(in crate::tx) fn cfg(src_ip: &str, src_ports: &str, tcp: bool) -> BlastConfig {
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

    /// What a test's filler borrows: the one 100-byte template of `cfg`'s
    /// first flow, no encapsulations, fresh counters.
    pub(in crate::tx) struct Fixture {
        templates: HashMap<u16, Template>,
        encaps: HashMap<u16, Encap>,
        counters: Counters,
    }

    impl Fixture {
        pub(in crate::tx) fn new(cfg: &BlastConfig) -> Self {
            Self::sized(cfg, 100)
        }

        /// The one template of `size` bytes (`cfg`'s sizes must be it).
        pub(in crate::tx) fn sized(cfg: &BlastConfig, size: u16) -> Self {
            let t = Template::new(size.into(), &cfg.flows.flow(0), &cfg.framing).unwrap();
            Fixture {
                templates: HashMap::from([(size, t)]),
                encaps: HashMap::new(),
                counters: Counters::default(),
            }
        }

        /// One worker's job (of one) over `cfg`.
        pub(in crate::tx) fn job<'a>(&'a self, cfg: &'a BlastConfig) -> Job<'a> {
            Job {
                cfg,
                templates: &self.templates,
                encaps: &self.encaps,
                worker: 0,
                workers: 1,
                count: None,
                interval_ns: None,
                counters: &self.counters,
            }
        }
    }

    fn linerate_packet_kind() -> crate::BackendKind {
        crate::BackendKind::Loopback
    }

    /// A batch's buffers: `n` slots taken in turn from `next`.
    pub(in crate::tx) struct Slots<'a> {
        pub(in crate::tx) bufs: &'a mut [Vec<u8>],
        pub(in crate::tx) next: &'a mut usize,
        pub(in crate::tx) left: usize,
        pub(in crate::tx) lens: Vec<usize>,
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
        same_frames_sized::<V6, TCP>(cfg, slots, 100);
    }

    /// [`same_frames`] for frames of `size` bytes (`cfg`'s overridden).
    fn same_frames_sized<const V6: bool, const TCP: bool>(
        cfg: &BlastConfig,
        slots: usize,
        size: u16,
    ) {
        let mut cfg = cfg.clone();
        cfg.sizes = SizeSequence::list(&[size]);
        let cfg = &cfg;
        let len = usize::from(size) - 4;
        let fx = Fixture::sized(cfg, size);
        let job = fx.job(cfg);
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
                    assert_eq!(table.build(&mut a[slot], slot), len);
                }
            } else {
                let mut s = Slots {
                    bufs: &mut a,
                    next: &mut next_a,
                    left: n,
                    lens: Vec::new(),
                };
                assert_eq!(table.build_each(&mut s), (len * n) as u64);
                assert_eq!(s.lens, vec![len; n]);
            }
            for _ in 0..n {
                let slot = next_b;
                next_b = (slot + 1) % slots;
                cursor.build(&mut b[slot], slot);
            }
            for k in 0..n {
                let slot = (first + k) % slots;
                assert_eq!(a[slot][..len], b[slot][..len], "batch {batch}, slot {slot}");
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
        // Frames no longer than a flow's head (written whole, `held` not
        // kept), `build` and `build_each` in turn.
        let few = cfg("198.18.0.1-198.18.0.3", "1000-1012", false);
        same_frames_sized::<false, false>(&few, 16, 64);
        same_frames_sized::<true, false>(
            &cfg("2001:db8::1-2001:db8::3", "1000-1012", false),
            16,
            100,
        );
    }

    /// A batch's buffers taken from a free list, as DPDK hands out its
    /// mbufs: `order` is the slots in the order they are handed out.
    struct Handed<'a> {
        bufs: &'a mut [Vec<u8>],
        order: std::vec::IntoIter<usize>,
        taken: Vec<usize>,
        lens: Vec<usize>,
    }

    impl Buffers for Handed<'_> {
        fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
            let slot = self.order.next()?;
            self.taken.push(slot);
            Some((&mut self.bufs[slot][..], slot))
        }
        fn built(&mut self, len: usize) {
            self.lens.push(len);
        }
    }

    /// Frames from the table in buffers that come back in another order
    /// than they were sent in are the cursor's, byte for byte (flow
    /// fields, probe id and sequence, send time, checksums), every flow
    /// counted the same. Two orders: a DPDK pool's per-lcore cache (the
    /// buffers last freed come back first, last first; now and then a
    /// few trade places, as a second lcore's frees would make them), and
    /// buffers in turn, as a ring's slots come back, a burst cut short
    /// where the port still holds the next one. A field left as
    /// the buffer's last flow had it fails here.
    /// (Before each batch a few slots, now and then, get a received
    /// frame's bytes over theirs and are forgotten, as net_af_xdp's
    /// shared pool makes them; every buffer starts as such bytes.) Run
    /// for frames of `size` bytes (`cfg`'s size is overridden), IPv4 or
    /// IPv6 (`V6`, `cfg`'s addresses).
    fn same_frames_in_any_order<const V6: bool, const TCP: bool>(
        cfg: &BlastConfig,
        slots: usize,
        size: u16,
    ) {
        let mut cfg = cfg.clone();
        cfg.sizes = SizeSequence::list(&[size]);
        let cfg = &cfg;
        let fx = Fixture::sized(cfg, size);
        let job = fx.job(cfg);
        let len = usize::from(size) - 4;
        let mut want = vec![0u8; 256];
        for kept in [false, true] {
            let mut table = Filler::<false, V6, TCP, false>::new(&job, slots);
            assert!(table.has_table(), "{} flows", cfg.flows.count());
            // (each frame built whole in a zeroed buffer)
            let mut cursor = Filler::<false, V6, TCP, false>::new(&job, 1);
            cursor.drop_table();
            let received: Vec<u8> = (0..256u32).map(|b| (b * 37 + 11) as u8).collect();
            let mut bufs = vec![received.clone(); slots];
            // the free list, its top last; the kept turn's next slot
            let mut free: Vec<usize> = (0..slots).rev().collect();
            let (mut at, mut rng, mut stamp) = (0usize, 0x2545_f491_u64, 0x0fed_cba9_u64);
            for batch in 0..600u64 {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                stamp = stamp.wrapping_add(rng >> 40);
                Fill::set_stamp(&mut table, stamp);
                Fill::set_stamp(&mut cursor, stamp);
                if batch % 7 == 3 {
                    for k in 0..3 {
                        let slot = (rng >> (8 * k)) as usize % slots;
                        bufs[slot].copy_from_slice(&received);
                        table.forget(slot);
                    }
                }
                let n = 1 + (rng >> 33) as usize % 64;
                let order: Vec<usize> = if kept {
                    // (a burst cut short: the port holds the rest)
                    let n = if batch % 5 == 4 { n / 3 + 1 } else { n };
                    let o = (0..n).map(|k| (at + k) % slots).collect();
                    at = (at + n) % slots;
                    o
                } else {
                    if batch % 9 == 8 && free.len() > 8 {
                        let (i, j) = (free.len() - 1 - (rng >> 20) as usize % 8, free.len() - 1);
                        free.swap(i, j);
                    }
                    let from = free.len() - n.min(free.len());
                    free.split_off(from).into_iter().rev().collect()
                };
                let mut h = Handed {
                    bufs: &mut bufs,
                    order: order.into_iter(),
                    taken: Vec::new(),
                    lens: Vec::new(),
                };
                let bytes = table.build_each(&mut h);
                let (taken, lens) = (h.taken, h.lens);
                assert_eq!(bytes, (len * taken.len()) as u64);
                for (k, &slot) in taken.iter().enumerate() {
                    assert_eq!(lens[k], len);
                    want.fill(0);
                    cursor.forget(0);
                    cursor.build(&mut want, 0);
                    assert_eq!(
                        bufs[slot][..len],
                        want[..len],
                        "kept {kept}, batch {batch}, frame {k}, slot {slot}"
                    );
                }
                // sent and freed in order: the last freed is taken first
                if !kept {
                    free.extend(taken);
                }
            }
            assert_eq!(Fill::per_flow(&table), Fill::per_flow(&cursor));
        }
    }

    #[test]
    fn frames_from_the_table_are_exact_in_reused_buffers_in_any_order() {
        // 39 flows (an address carries) over 100 buffers, and the
        // bench's 4,096 flows over the 4,096 a DPDK queue keeps and over
        // a pool of 5,119: frames longer than a flow's frame head (100
        // bytes: the template laid under it), and as long as it or
        // shorter (64 bytes over IPv4, 100 over IPv6: the head the frame
        // whole, laid over another frame's or a received frame's bytes).
        let few = cfg("198.18.0.1-198.18.0.3", "1000-1012", false);
        let few_tcp = cfg("198.18.0.1-198.18.0.3", "1000-1012", true);
        let few6 = cfg("2001:db8::1-2001:db8::3", "1000-1012", false);
        for size in [64, 100] {
            same_frames_in_any_order::<false, false>(&few, 100, size);
            same_frames_in_any_order::<false, true>(&few_tcp, 100, size + 16);
            same_frames_in_any_order::<true, false>(&few6, 100, size + 36);
        }
        same_frames_in_any_order::<true, false>(&few6, 100, 200);
        let many = cfg("198.18.0.1", "1000-5095", false);
        same_frames_in_any_order::<false, false>(&many, 4096, 100);
        same_frames_in_any_order::<false, false>(&many, 5119, 64);
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

    /// A flow's base and a lap's part give the checksum `csum_of_folded`
    /// writes for their sum's residue: every residue against a few of
    /// the other's, both ways round, UDP and TCP.
    #[test]
    fn the_tables_checksum_is_the_residues() {
        use super::{complement, lap_part, next_lap_part, table_csum};
        use linerate_traffic::template::csum_of_folded;
        fn check<const TCP: bool>() {
            for b in [0u32, 1, 2, 0x7fff, 0x8000, 0xfffd, 0xfffe] {
                for l in 0..0xffffu32 {
                    for (x, y) in [(b, l), (l, b)] {
                        let want = csum_of_folded::<TCP>(((x + y) % 0xffff) as u16);
                        let base = complement(x as u16, TCP) as u16;
                        let got = table_csum::<TCP>(base, lap_part(u64::from(y), 0, TCP));
                        assert_eq!(got, want, "TCP {TCP}, {x} + {y}");
                    }
                }
            }
        }
        check::<false>();
        check::<true>();
        // the next lap's part by one step is the one computed whole
        for r in [0u16, 1, 0x8000, 0xfffe] {
            for seq in 0..0x2_0002u64 {
                let (u, t) = (lap_part(seq, r, false), lap_part(seq, r, true));
                assert_eq!(next_lap_part::<false>(u), lap_part(seq + 1, r, false));
                assert_eq!(next_lap_part::<true>(t), lap_part(seq + 1, r, true));
            }
        }
        // The sequence and the send time's residue add modulo 0xffff.
        for (seq, r) in [
            (0u64, 0u16),
            (0xffff, 0xfffe),
            (u64::MAX, 7),
            (1 << 40, 0x1234),
        ] {
            let want = 0xffff - ((u128::from(seq) + u128::from(r)) % 0xffff) as u32;
            assert_eq!(lap_part(seq, r, false), want, "{seq} {r}");
            assert_eq!(lap_part(seq, r, true), want % 0xffff, "{seq} {r}");
        }
    }

    /// A batch's payload buffers for the UDP path: `n` slots in turn,
    /// each payload's length and new endpoints (addresses, ports) kept.
    /// A payload's length and its new endpoints (addresses, ports).
    pub(in crate::tx) type Written = (usize, Option<([u8; 32], [u16; 2])>);

    pub(in crate::tx) struct PayloadSlots<'a> {
        pub(in crate::tx) bufs: &'a mut [Vec<u8>],
        pub(in crate::tx) next: &'a mut usize,
        pub(in crate::tx) left: usize,
        pub(in crate::tx) got: Vec<Written>,
    }

    impl linerate_backend::port::PayloadBufs for PayloadSlots<'_> {
        fn next_buf(&mut self) -> Option<(&mut [u8], usize)> {
            if self.left == 0 {
                return None;
            }
            self.left -= 1;
            let slot = *self.next;
            *self.next = (slot + 1) % self.bufs.len();
            Some((&mut self.bufs[slot][..], slot))
        }
        fn built(&mut self, len: usize, ends: Option<linerate_backend::port::Endpoints<'_>>) {
            self.got.push((len, ends.map(|e| (*e.addrs, e.ports))));
        }
    }

    /// The UDP path: payloads from the table (by `payload_each`, and by
    /// `payload` every third batch) and from the cursor (`payload` on a
    /// filler without its table) are the same bytes with the same new
    /// endpoints, and each flow's count is the same.
    fn same_payloads<const V6: bool>(cfg: &BlastConfig, slots: usize) {
        use linerate_backend::port::PayloadSource;
        let fx = Fixture::new(cfg);
        let job = fx.job(cfg);
        let mut table = Filler::<false, V6, false, false>::new(&job, slots);
        assert!(table.has_table(), "{} flows", cfg.flows.count());
        let mut cursor = Filler::<false, V6, false, false>::new(&job, slots);
        cursor.drop_table();
        let (mut a, mut b) = (vec![vec![0u8; 256]; slots], vec![vec![0u8; 256]; slots]);
        let (mut next_a, mut next_b) = (0, 0);
        let mut stamp = 0x0123_4567_u64;
        for batch in 0..200 {
            stamp = stamp.wrapping_mul(6364136223846793005).wrapping_add(batch);
            Fill::set_stamp(&mut table, stamp);
            Fill::set_stamp(&mut cursor, stamp);
            let n = 1 + (batch as usize * 7) % 64;
            let first = next_a;
            let mut got = Vec::new();
            if batch % 3 == 2 {
                for _ in 0..n {
                    let slot = next_a;
                    next_a = (slot + 1) % slots;
                    let (len, wire, ends) = table.payload(&mut a[slot], slot);
                    assert_eq!(wire, 96);
                    got.push((len, ends.map(|e| (*e.addrs, e.ports))));
                }
            } else {
                let mut s = PayloadSlots {
                    bufs: &mut a,
                    next: &mut next_a,
                    left: n,
                    got: Vec::new(),
                };
                assert_eq!(table.payload_each(&mut s), 96 * n as u64);
                got = s.got;
            }
            let mut want = Vec::new();
            for _ in 0..n {
                let slot = next_b;
                next_b = (slot + 1) % slots;
                let (len, _, ends) = cursor.payload(&mut b[slot], slot);
                want.push((len, ends.map(|e| (*e.addrs, e.ports))));
            }
            assert_eq!(got, want, "batch {batch}");
            // (a batch over more datagrams than slots writes some twice)
            for (k, &(len, _)) in want.iter().enumerate() {
                let slot = (first + k) % slots;
                assert_eq!(a[slot][..len], b[slot][..len], "batch {batch}, slot {slot}");
            }
        }
        assert_eq!(Fill::per_flow(&table), Fill::per_flow(&cursor));
    }

    #[test]
    fn payloads_from_the_table_are_the_cursors() {
        for slots in [16, 78] {
            same_payloads::<false>(&cfg("198.18.0.1-198.18.0.3", "1000-1012", false), slots);
            same_payloads::<true>(&cfg("2001:db8::1-2001:db8::3", "1000-1012", false), slots);
        }
        same_payloads::<false>(&cfg("198.18.0.1", "1000-5095", false), 4096);
    }
}
