//! What blast's workers send: [`Filler`] builds each worker's frames in
//! the backend's own buffers (flow fields, probe, size cycle, checksums
//! from the flows' sums), [`VxlanFiller`] the same inside VXLAN; a
//! worker's [`Job`] and its live [`Counters`].

use super::flow_table::{FlowTable, image_len, put_image, table_csum};
use super::send::{BlastConfig, Fill};
use linerate_backend::port::{Endpoints, PayloadBufs, PayloadSource, payload_each_by_one};
use linerate_backend::{Buffers, FrameSource};
use linerate_traffic::template::WireFlow;
use linerate_traffic::template::{csum_of_folded, folded_of_csum, next_csum};
use linerate_traffic::vxlan::{Encap, Vxlan};
use linerate_traffic::{Stamp, Template, WireCursor};
use linerate_wire::PROBE_LEN;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// A worker's live counters (single writer), for the per-second report.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) packets: std::sync::atomic::AtomicU64,
    pub(super) bytes: std::sync::atomic::AtomicU64,
    pub(super) calls: std::sync::atomic::AtomicU64,
    pub(super) errors: std::sync::atomic::AtomicU64,
    /// When the first send call began (monotonic ns; 0: none yet).
    pub(super) first_ns: std::sync::atomic::AtomicU64,
}

impl Counters {
    pub(super) fn publish(&self, packets: u64, bytes: u64, calls: u64, errors: u64, first_ns: u64) {
        self.first_ns.store(first_ns, Ordering::Relaxed);
        self.packets.store(packets, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
        self.calls.store(calls, Ordering::Relaxed);
        self.errors.store(errors, Ordering::Relaxed);
    }
}

pub(super) struct Job<'a> {
    pub(super) cfg: &'a BlastConfig,
    pub(super) templates: &'a HashMap<u16, Template>,
    /// Each size's VXLAN encapsulation (none without VXLAN).
    pub(super) encaps: &'a HashMap<u16, Encap>,
    pub(super) worker: usize,
    pub(super) workers: usize,
    pub(super) count: Option<u64>,
    pub(super) interval_ns: Option<f64>,
    pub(super) counters: &'a Counters,
}

/// Builds the frames of one worker's flows in turn, in the backend's own
/// buffers: flow fields, probe (flow id, sequence, send time) and size
/// from the cycle. It remembers which template and flow each buffer
/// (slot) holds: a slot of another size gets the template laid anew, a
/// slot of another flow gets the flow's fields, and every frame gets its
/// sequence, time and transport checksum (updated from the flow's sums,
/// never summed over the bytes).
pub(super) struct Filler<'a, const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> {
    /// The size cycle's templates and their sizes (<< 48, as in `held`).
    cycle: Vec<(&'a Template, u64)>,
    pos: usize,
    /// `cycle[pos]`, at hand.
    cur: (&'a Template, u64),
    cursor: WireCursor,
    /// Probe flow ids (flow index mod 65536) and their last sequence (a
    /// u16 indexes it without a bounds check).
    seq: Box<[u64; 1 << 16]>,
    stride: usize,
    /// One size and one worker (the usual case): the next frame is the
    /// cursor's next flow, told by one test per frame.
    plain: bool,
    /// What each slot holds: size << 48 | flow index (`EMPTY`: nothing
    /// yet). Not kept by frames from a table whose heads cover the frame
    /// (they are written whole every time).
    held: Vec<u64>,
    /// The send time of the batch being built.
    stamp: Stamp,
    /// The UDP path moves on to the next frame when it starts one (the
    /// flow's endpoints it hands back stay borrowed until then).
    payload_started: bool,
    /// `ONE` (one flow, one size, one worker): every frame is the same
    /// but for its sequence, which moves by one (see [`One`]).
    one: One,
    /// One size and one worker, up to [`super::flow_table::MAX_FLOWS`]
    /// flows with distinct probe ids: the flows from a table, each with
    /// its checksum's base (the cursor and `seq` are then unused).
    table: Option<FlowTable>,
}

/// The one flow of a one-flow run, one size: its slot tag and probe flow
/// id, its sequence (kept here, not in `seq`, until the run ends) and its
/// transport checksum's sum modulo 0xffff, which moves by one with the
/// sequence (set again for each batch's stamp): no table, no cursor and
/// no checksum folding per frame.
pub(super) struct One {
    tag: u64,
    id: u16,
    /// The frame's length, and its UDP payload's.
    len: usize,
    payload_len: usize,
    seq: u64,
    /// The sum for `seq` (the last frame's), reduced modulo 0xffff.
    folded: u16,
    /// Slots that do not hold the flow's frame (`held` is not `tag`):
    /// none, and a batch builds without looking at `held`.
    unlaid: usize,
}

/// A slot nothing was built in.
pub(super) const EMPTY: u64 = u64::MAX;
/// The bits of a slot's tag that hold the frame size.
pub(super) const SIZE_TAG: u64 = 0xffff << 48;

impl<'a, const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool>
    Filler<'a, VLAN, V6, TCP, ONE>
{
    pub(super) fn new(job: &Job<'a>, slots: usize) -> Self {
        let cfg = job.cfg;
        let cycle = cfg
            .sizes
            .cycle()
            .iter()
            .map(|s| (&job.templates[s], u64::from(*s) << 48))
            .collect::<Vec<_>>();
        let mut cursor = WireCursor::new(&cfg.flows);
        for _ in 0..job.worker {
            cursor.advance();
        }
        let cycle_len = cycle.len();
        let plain = cycle_len == 1 && job.workers == 1;
        let table = (!ONE && plain)
            .then(|| FlowTable::new(&cursor, cfg.flows.count(), cycle[0].0))
            .flatten();
        debug_assert!(!ONE || one_flow(job));
        let one = One {
            tag: cycle[0].1 | cursor.index(),
            id: cursor.flow_id(),
            len: cycle[0].0.len(),
            payload_len: cycle[0].0.payload().len(),
            seq: 0,
            folded: 0,
            unlaid: slots,
        };
        Filler {
            cur: cycle[0],
            cycle,
            pos: 0,
            cursor,
            seq: vec![0u64; 1 << 16]
                .into_boxed_slice()
                .try_into()
                .expect("65536 entries"),
            stride: job.workers,
            plain,
            held: vec![EMPTY; slots],
            stamp: Stamp::new(0),
            payload_started: false,
            one,
            table,
        }
    }

    /// The send time of the frames built from now on (one per batch).
    #[inline]
    fn set_stamp(&mut self, tx_ns: u64) {
        self.stamp = Stamp::new(tx_ns);
        if let Some(tb) = &mut self.table {
            tb.set_stamp(self.stamp.residue());
        }
        if ONE {
            let o = &mut self.one;
            let base = self
                .cur
                .0
                .seq_sum_base(self.cursor.wire(), o.id, &self.stamp);
            o.folded = ((u64::from(base) + o.seq % 0xffff) % 0xffff) as u16;
        }
    }

    #[cfg(test)]
    pub(super) fn has_table(&self) -> bool {
        self.table.is_some()
    }

    /// The cursor's walk instead of the table (tests compare the two).
    #[cfg(test)]
    pub(super) fn drop_table(&mut self) {
        self.table = None;
    }

    /// Frames sent per probe flow id.
    fn per_flow(&self) -> Vec<(u16, u64)> {
        if let Some(t) = &self.table {
            return t.per_flow();
        }
        let one = ONE.then_some((self.one.id, self.one.seq));
        (self.seq.iter().enumerate())
            .map(|(i, s)| match one {
                Some((id, seq)) if usize::from(id) == i => (i as u16, seq),
                _ => (i as u16, *s),
            })
            .filter(|(_, s)| *s > 0)
            .collect()
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> FrameSource
    for Filler<'_, VLAN, V6, TCP, ONE>
{
    /// Builds the next frame in `buf`, which holds what was last built in
    /// `slot`; returns its length.
    #[inline(always)]
    fn build(&mut self, buf: &mut [u8], slot: usize) -> usize {
        if ONE {
            let o = &mut self.one;
            let t = self.cur.0;
            let held = &mut self.held[slot];
            if *held != o.tag {
                if *held & SIZE_TAG != o.tag & SIZE_TAG {
                    t.lay(buf);
                }
                t.put_flow_at::<VLAN, V6, TCP>(buf, self.cursor.wire(), o.id);
                *held = o.tag;
                o.unlaid -= 1;
            }
            o.seq += 1;
            // (past u64::MAX the sequence wraps: frames enough for that
            // are not sent)
            o.folded = if o.folded == 0xfffe { 0 } else { o.folded + 1 };
            t.put_seq_folded_at::<VLAN, V6, TCP>(buf, o.seq, o.folded, &self.stamp);
            return o.len;
        }
        if self.table.is_some() {
            return self.build_from_table(buf, slot);
        }
        let stamp = &self.stamp;
        let (t, size_tag) = self.cur;
        let w = self.cursor.wire();
        let tag = size_tag | self.cursor.index();
        let held = &mut self.held[slot];
        if *held != tag {
            if *held & SIZE_TAG != size_tag {
                t.lay(buf);
            }
            t.put_flow_at::<VLAN, V6, TCP>(buf, w, self.cursor.flow_id());
            *held = tag;
        }
        let id = self.cursor.flow_id();
        let seq = &mut self.seq[usize::from(id)];
        *seq += 1;
        t.put_seq_at::<VLAN, V6, TCP>(buf, w, id, *seq, stamp);
        self.next_frame();
        t.len()
    }

    /// A frame was received into `slot`: its next frame is laid whole.
    #[inline]
    fn forget(&mut self, slot: usize) {
        if let Some(h) = self.held.get_mut(slot) {
            if ONE && *h == self.one.tag {
                self.one.unlaid += 1;
            }
            *h = EMPTY;
        }
    }

    /// One flow, one size: the batch's frames with the sequence and the
    /// checksum as written in locals (registers), written back once at
    /// the batch's end; otherwise one [`build`](Self::build) at a time.
    #[inline(always)]
    fn build_each<B: Buffers>(&mut self, bufs: &mut B) -> u64 {
        if !ONE {
            if self.table.is_some() {
                return self.build_each_from_table(bufs);
            }
            return linerate_backend::build_each_by_one(self, bufs);
        }
        // Every slot laid with the flow (the usual case after the first
        // lap): nothing to look up per frame.
        if self.one.unlaid == 0 {
            self.one_batch::<B, false>(bufs)
        } else {
            self.one_batch::<B, true>(bufs)
        }
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool>
    Filler<'_, VLAN, V6, TCP, ONE>
{
    /// [`build_each`](FrameSource::build_each) for one flow: `LAY`, each
    /// slot's frame laid first where it does not hold the flow's; without
    /// it, every slot holds it (`One::unlaid` is 0).
    #[inline(always)]
    fn one_batch<B: Buffers, const LAY: bool>(&mut self, bufs: &mut B) -> u64 {
        let t = self.cur.0;
        let (tag, id, len) = (self.one.tag, self.one.id, self.one.len);
        // The checksum as written, moved by one compare a frame.
        let (mut seq, mut c) = (self.one.seq, csum_of_folded::<TCP>(self.one.folded));
        let stamp = self.stamp;
        let w = self.cursor.wire();
        let mut unlaid = self.one.unlaid;
        let mut frames = 0u64;
        while let Some((buf, slot)) = bufs.next_buf() {
            if LAY {
                let held = &mut self.held[slot];
                if *held != tag {
                    if *held & SIZE_TAG != tag & SIZE_TAG {
                        t.lay(buf);
                    }
                    t.put_flow_at::<VLAN, V6, TCP>(buf, w, id);
                    *held = tag;
                    unlaid -= 1;
                }
            }
            // (past u64::MAX the sequence wraps: frames enough for that
            // are not sent)
            seq += 1;
            c = next_csum::<TCP>(c);
            t.put_seq_csum_at::<VLAN, V6, TCP>(buf, seq, c, &stamp);
            bufs.built(len);
            frames += 1;
        }
        self.one.seq = seq;
        self.one.folded = folded_of_csum::<TCP>(c);
        self.one.unlaid = unlaid;
        frames * len as u64
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool>
    Filler<'_, VLAN, V6, TCP, ONE>
{
    /// Moves on to the next frame's size and flow.
    #[inline(always)]
    fn next_frame(&mut self) {
        if self.plain {
            // One flow: the cursor stands still (its first test says so).
            self.cursor.advance();
            return;
        }
        if self.cycle.len() > 1 {
            self.pos = if self.pos + 1 == self.cycle.len() {
                0
            } else {
                self.pos + 1
            };
            self.cur = self.cycle[self.pos];
        }
        // One flow: the cursor stands still (its first test says so).
        self.cursor.advance();
        for _ in 1..self.stride {
            self.cursor.advance();
        }
    }
}

/// Lays flow `i` of table `tb` (template `t`) over `buf`, which held
/// another flow's frame (`other_size`: of another size, or nothing): its
/// frame head copied from the table's images (the template laid first
/// where they do not cover the frame and `other_size`), or, in a buffer
/// shorter than a head, the template and the flow's fields.
#[inline(always)]
fn lay_flow<const VLAN: bool, const V6: bool, const TCP: bool>(
    buf: &mut [u8],
    t: &Template,
    tb: &FlowTable,
    other_size: bool,
    i: usize,
) {
    if buf.len() >= image_len::<V6>() {
        if other_size && !tb.covers {
            t.lay(buf);
        }
        put_image::<V6>(buf, &tb.images, i);
    } else {
        t.lay(buf);
        t.put_flow_at::<VLAN, V6, TCP>(buf, &tb.wire[i], tb.flows[i].id);
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool>
    Filler<'_, VLAN, V6, TCP, ONE>
{
    /// [`build`](FrameSource::build) for the table's next flow: its
    /// fields when `slot` held another, the lap's sequence, its checksum.
    #[inline(always)]
    fn build_from_table(&mut self, buf: &mut [u8], slot: usize) -> usize {
        let Some(tb) = &mut self.table else {
            unreachable!("called with a table")
        };
        let (t, size_tag) = self.cur;
        // (the lap's, before the flow taken ends it)
        let (seq, part) = (tb.lap + 1, tb.lap_part);
        let i = tb.take();
        let tag = size_tag | i as u64;
        let f = tb.flows[i];
        let held = &mut self.held[slot];
        // (`held` is not kept where the heads cover the frame)
        if tb.covers || *held != tag {
            lay_flow::<VLAN, V6, TCP>(buf, t, tb, *held & SIZE_TAG != size_tag, i);
            *held = tag;
        }
        let c = table_csum::<TCP>(f.base, part);
        t.put_seq_csum_at::<VLAN, V6, TCP>(buf, seq, c, &self.stamp);
        t.len()
    }

    /// [`build_each`](FrameSource::build_each) from the table, the next
    /// flow's index, the lap's sequence and checksum part, the send time
    /// and the template in locals; nothing written per frame but the
    /// frame (and `held` when the slot held another flow). Frame heads
    /// of `N` bytes ([`image_len`]).
    #[inline(always)]
    fn build_each_from_table<B: Buffers>(&mut self, bufs: &mut B) -> u64 {
        let covers = self.table.as_ref().is_some_and(|tb| tb.covers);
        match (V6, covers) {
            (false, true) => self.table_batch::<B, { image_len::<false>() }, true>(bufs),
            (false, false) => self.table_batch::<B, { image_len::<false>() }, false>(bufs),
            (true, true) => self.table_batch::<B, { image_len::<true>() }, true>(bufs),
            (true, false) => self.table_batch::<B, { image_len::<true>() }, false>(bufs),
        }
    }

    /// [`build_each_from_table`](Self::build_each_from_table) with heads
    /// of `N` bytes; `COVERS`: a head is the frame whole, copied into
    /// every buffer without asking what it held (a buffer from DPDK's
    /// pool held another flow's frame all but always; `held` is not
    /// kept: see [`FlowTable::covers`]).
    #[inline(always)]
    fn table_batch<B: Buffers, const N: usize, const COVERS: bool>(&mut self, bufs: &mut B) -> u64 {
        let Some(tb) = &mut self.table else {
            unreachable!("called with a table")
        };
        let (t, size_tag) = self.cur;
        let (stamp, len) = (self.stamp, t.len());
        let (heads, _) = tb.images.as_chunks::<N>();
        let (flows, wire) = (&tb.flows[..], &tb.wire[..]);
        let held = &mut self.held[..];
        let (i0, seq0) = (tb.next, tb.lap + 1);
        let (mut i, mut seq, mut part) = (i0, seq0, tb.lap_part);
        // A lap's flows from `i` on, then the next lap's from 0: the
        // index's wrap tested once a lap, not once a frame.
        'batch: loop {
            for (f, head) in flows[i..].iter().zip(&heads[i..]) {
                let Some((buf, slot)) = bufs.next_buf() else {
                    break 'batch;
                };
                if COVERS {
                    if let Some(b) = buf.first_chunk_mut::<N>() {
                        *b = *head;
                    } else {
                        t.lay(buf);
                        t.put_flow_at::<VLAN, V6, TCP>(buf, &wire[i], f.id);
                    }
                } else {
                    let tag = size_tag | i as u64;
                    let h = &mut held[slot];
                    if *h != tag {
                        if *h & SIZE_TAG != size_tag || buf.len() < N {
                            t.lay(buf);
                        }
                        match buf.first_chunk_mut::<N>() {
                            Some(b) => *b = *head,
                            None => t.put_flow_at::<VLAN, V6, TCP>(buf, &wire[i], f.id),
                        }
                        *h = tag;
                    }
                }
                let c = table_csum::<TCP>(f.base, part);
                t.put_seq_csum_at::<VLAN, V6, TCP>(buf, seq, c, &stamp);
                bufs.built(len);
                i += 1;
            }
            // A lap done: every flow's next frame is one on.
            i = 0;
            seq += 1;
            part = super::flow_table::next_lap_part::<TCP>(part);
        }
        // (the frames: whole laps and the index's move)
        let frames = (seq - seq0) * flows.len() as u64 + i as u64 - i0 as u64;
        tb.next = i;
        tb.lap = seq - 1;
        tb.lap_part = part;
        frames * len as u64
    }

    /// [`payload`](PayloadSource::payload) for the table's next flow.
    #[inline(always)]
    fn payload_from_table(
        &mut self,
        buf: &mut [u8],
        slot: usize,
    ) -> (usize, usize, Option<Endpoints<'_>>) {
        let Some(tb) = &mut self.table else {
            unreachable!("called with a table")
        };
        let (t, size_tag) = self.cur;
        let p = t.payload();
        let seq = tb.lap + 1;
        let i = tb.take();
        let tag = size_tag | i as u64;
        let held = &mut self.held[slot];
        let mut ends = None;
        if *held != tag {
            if *held & SIZE_TAG != size_tag {
                buf[..p.len()].copy_from_slice(p);
            }
            buf[2..4].copy_from_slice(&tb.flows[i].id.to_be_bytes());
            ends = Some(endpoints::<V6>(&tb.wire[i]));
            *held = tag;
        }
        let probe = &mut buf[..PROBE_LEN];
        probe[4..12].copy_from_slice(&seq.to_be_bytes());
        probe[12..16].copy_from_slice(&self.stamp.hi());
        probe[16..18].copy_from_slice(&self.stamp.lo());
        (p.len(), t.len(), ends)
    }

    /// [`payload_each`](PayloadSource::payload_each) for one flow, its
    /// sequence in a local; `LAY` as in [`one_batch`](Self::one_batch).
    #[inline(always)]
    fn one_payloads<B: PayloadBufs, const LAY: bool>(&mut self, bufs: &mut B) -> u64 {
        let (tag, id, plen, len) = (
            self.one.tag,
            self.one.id,
            self.one.payload_len,
            self.one.len,
        );
        let p = self.cur.0.payload();
        let (hi, lo) = (self.stamp.hi(), self.stamp.lo());
        let w = self.cursor.wire();
        let (mut seq, mut unlaid) = (self.one.seq, self.one.unlaid);
        let mut frames = 0u64;
        while let Some((buf, slot)) = bufs.next_buf() {
            let mut ends = None;
            if LAY {
                let held = &mut self.held[slot];
                if *held != tag {
                    if *held & SIZE_TAG != tag & SIZE_TAG {
                        buf[..plen].copy_from_slice(p);
                    }
                    buf[2..4].copy_from_slice(&id.to_be_bytes());
                    ends = Some(endpoints::<V6>(w));
                    *held = tag;
                    unlaid -= 1;
                }
            }
            seq += 1;
            let probe = &mut buf[..PROBE_LEN];
            probe[4..12].copy_from_slice(&seq.to_be_bytes());
            probe[12..16].copy_from_slice(&hi);
            probe[16..18].copy_from_slice(&lo);
            bufs.built(plen, ends);
            frames += 1;
        }
        self.one.seq = seq;
        self.one.unlaid = unlaid;
        frames * len as u64
    }

    /// [`payload_each`](PayloadSource::payload_each) from the table.
    #[inline(always)]
    fn payload_each_from_table<B: PayloadBufs>(&mut self, bufs: &mut B) -> u64 {
        let Some(tb) = &mut self.table else {
            unreachable!("called with a table")
        };
        let (t, size_tag) = self.cur;
        let (p, wire_len) = (t.payload(), t.len());
        let (flows, wire) = (&tb.flows[..], &tb.wire[..]);
        let (i0, seq0) = (tb.next, tb.lap + 1);
        let (mut i, mut seq) = (i0, seq0);
        // The probe's sequence and send time: the same for a lap.
        let mut tail = probe_tail(seq, &self.stamp);
        while let Some((buf, slot)) = bufs.next_buf() {
            let tag = size_tag | i as u64;
            let held = &mut self.held[slot];
            let mut ends = None;
            if *held != tag {
                if *held & SIZE_TAG != size_tag {
                    buf[..p.len()].copy_from_slice(p);
                }
                buf[2..4].copy_from_slice(&flows[i].id.to_be_bytes());
                ends = Some(endpoints::<V6>(&wire[i]));
                *held = tag;
            }
            buf[4..PROBE_LEN].copy_from_slice(&tail);
            bufs.built(p.len(), ends);
            i += 1;
            if i == flows.len() {
                i = 0;
                seq += 1;
                tail = probe_tail(seq, &self.stamp);
            }
        }
        // (the frames: whole laps and the index's move)
        let frames = (seq - seq0) * flows.len() as u64 + i as u64 - i0 as u64;
        tb.next = i;
        tb.set_lap(seq - 1);
        frames * wire_len as u64
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> PayloadSource
    for Filler<'_, VLAN, V6, TCP, ONE>
{
    /// The UDP path: the next frame's payload only (probe, then the
    /// template's pattern) in `buf`, which holds what was last written
    /// for `slot`; the flow's endpoints when the slot's flow changed.
    #[inline(always)]
    fn payload(&mut self, buf: &mut [u8], slot: usize) -> (usize, usize, Option<Endpoints<'_>>) {
        if ONE {
            let o = &mut self.one;
            // One flow: the cursor stands still.
            let held = &mut self.held[slot];
            let mut ends = None;
            if *held != o.tag {
                if *held & SIZE_TAG != o.tag & SIZE_TAG {
                    buf[..o.payload_len].copy_from_slice(self.cur.0.payload());
                }
                buf[2..4].copy_from_slice(&o.id.to_be_bytes());
                ends = Some(endpoints::<V6>(self.cursor.wire()));
                *held = o.tag;
                o.unlaid -= 1;
            }
            o.seq += 1;
            let probe = &mut buf[..PROBE_LEN];
            probe[4..12].copy_from_slice(&o.seq.to_be_bytes());
            probe[12..16].copy_from_slice(&self.stamp.hi());
            probe[16..18].copy_from_slice(&self.stamp.lo());
            return (o.payload_len, o.len, ends);
        }
        if self.table.is_some() {
            return self.payload_from_table(buf, slot);
        }
        if self.payload_started {
            self.next_frame();
        }
        self.payload_started = true;
        let stamp = &self.stamp;
        let (t, size_tag) = self.cur;
        let p = t.payload();
        let tag = size_tag | self.cursor.index();
        let id = self.cursor.flow_id();
        let held = &mut self.held[slot];
        let mut ends = None;
        if *held != tag {
            if *held & SIZE_TAG != size_tag {
                buf[..p.len()].copy_from_slice(p);
            }
            buf[2..4].copy_from_slice(&id.to_be_bytes());
            ends = Some(endpoints::<V6>(self.cursor.wire()));
            *held = tag;
        }
        let seq = &mut self.seq[usize::from(id)];
        *seq += 1;
        let probe = &mut buf[..PROBE_LEN];
        probe[4..12].copy_from_slice(&seq.to_be_bytes());
        probe[12..16].copy_from_slice(&stamp.hi());
        probe[16..18].copy_from_slice(&stamp.lo());
        (p.len(), t.len(), ends)
    }

    /// From the table: the next flow's index, the lap's sequence, the
    /// send time and the template in locals; otherwise one
    /// [`payload`](Self::payload) at a time.
    #[inline(always)]
    fn payload_each<B: PayloadBufs>(&mut self, bufs: &mut B) -> u64 {
        if ONE {
            return if self.one.unlaid == 0 {
                self.one_payloads::<B, false>(bufs)
            } else {
                self.one_payloads::<B, true>(bufs)
            };
        }
        if self.table.is_none() {
            return payload_each_by_one(self, bufs);
        }
        self.payload_each_from_table(bufs)
    }
}

/// A probe's bytes from its sequence on (sequence, send time).
#[inline(always)]
fn probe_tail(seq: u64, stamp: &Stamp) -> [u8; PROBE_LEN - 4] {
    let mut b = [0u8; PROBE_LEN - 4];
    b[..8].copy_from_slice(&seq.to_be_bytes());
    b[8..12].copy_from_slice(&stamp.hi());
    b[12..14].copy_from_slice(&stamp.lo());
    b
}

/// A flow's endpoints from its wire fields.
#[inline(always)]
pub(super) fn endpoints<const V6: bool>(w: &WireFlow) -> Endpoints<'_> {
    Endpoints {
        addrs: &w.addrs,
        ports: w.ports,
        v6: V6,
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool, const ONE: bool> Fill
    for Filler<'_, VLAN, V6, TCP, ONE>
{
    #[inline(always)]
    fn set_stamp(&mut self, tx_ns: u64) {
        Filler::set_stamp(self, tx_ns)
    }

    fn per_flow(&self) -> Vec<(u16, u64)> {
        Filler::per_flow(self)
    }
}

/// Builds VXLAN frames: the inner frame as [`Filler`] builds it (its flow,
/// probe and checksums), after outer headers laid once per slot and size,
/// then the frame's VNI and the outer UDP checksum. Frame n (of the run,
/// every worker counted) carries VNI value n mod the VNIs' count.
pub(super) struct VxlanFiller<'a, const VLAN: bool, const V6: bool, const TCP: bool> {
    inner: Filler<'a, VLAN, V6, TCP, false>,
    vx: Vxlan,
    /// The size cycle's encapsulations, in the cycle's order.
    encaps: Vec<&'a Encap>,
    /// The size tag of the outer headers each slot holds.
    laid: Vec<u64>,
    /// The VNI's digit (below its count) and the step per frame.
    vni_digit: u64,
    stride: u64,
}

impl<'a, const VLAN: bool, const V6: bool, const TCP: bool> VxlanFiller<'a, VLAN, V6, TCP> {
    pub(super) fn new(job: &Job<'a>, slots: usize) -> Self {
        let vx = job.cfg.framing.vxlan.expect("a VXLAN run");
        let count = vx.vni.count.max(1);
        let mut inner = Filler::new(job, slots);
        // The outer headers follow the inner filler's cursor.
        inner.table = None;
        VxlanFiller {
            inner,
            vx,
            encaps: job
                .cfg
                .sizes
                .cycle()
                .iter()
                .map(|s| &job.encaps[s])
                .collect(),
            laid: vec![EMPTY; slots],
            vni_digit: job.worker as u64 % count,
            stride: job.workers as u64 % count,
        }
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool> FrameSource
    for VxlanFiller<'_, VLAN, V6, TCP>
{
    #[inline(always)]
    fn build(&mut self, buf: &mut [u8], slot: usize) -> usize {
        let e = self.encaps[self.inner.pos];
        let size_tag = self.inner.cur.1;
        // (the inner builder moves its cursor on: its flow taken first)
        let w = *self.inner.cursor.wire();
        if self.laid[slot] != size_tag {
            e.lay(buf);
            self.laid[slot] = size_tag;
        }
        self.inner.build(&mut buf[e.prefix_len()..], slot);
        e.put(buf, &w, self.vx.vni_of(self.vni_digit));
        self.vni_digit += self.stride;
        if self.vni_digit >= self.vx.vni.count {
            self.vni_digit -= self.vx.vni.count;
        }
        e.len()
    }

    #[inline]
    fn forget(&mut self, slot: usize) {
        self.inner.forget(slot);
        if let Some(h) = self.laid.get_mut(slot) {
            *h = EMPTY;
        }
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool> PayloadSource
    for VxlanFiller<'_, VLAN, V6, TCP>
{
    fn payload(&mut self, _: &mut [u8], _: usize) -> (usize, usize, Option<Endpoints<'_>>) {
        unreachable!("VXLAN frames are crafted: `traffic` never gives them the UDP socket path")
    }
}

impl<const VLAN: bool, const V6: bool, const TCP: bool> Fill for VxlanFiller<'_, VLAN, V6, TCP> {
    fn set_stamp(&mut self, tx_ns: u64) {
        self.inner.set_stamp(tx_ns)
    }

    fn per_flow(&self) -> Vec<(u16, u64)> {
        self.inner.per_flow()
    }
}

/// Whether a worker sends one flow of one size, every frame the same but
/// for its sequence (one worker: workers never outnumber flows).
pub(super) fn one_flow(job: &Job) -> bool {
    job.cfg.sizes.cycle().len() == 1 && job.workers == 1 && job.cfg.flows.count() == 1
}

#[cfg(test)]
mod tests {
    use super::super::flow_table::tests::{Fixture, Slots, cfg};
    use super::super::send::Fill;
    use super::Filler;
    use linerate_backend::FrameSource;

    /// One flow: batches by `build_each` (which stops looking at the
    /// slots once all hold the flow's frame) and frames by `build` (which
    /// looks every time) are the same bytes, and a slot forgotten (a
    /// frame received into it, scribbled over here) is laid whole again.
    fn one_flow_frames<const TCP: bool>(slots: usize) {
        let cfg = cfg("198.18.0.1", "9", TCP);
        let fx = Fixture::new(&cfg);
        let job = fx.job(&cfg);
        let mut each = Filler::<false, false, TCP, true>::new(&job, slots);
        let mut by_one = Filler::<false, false, TCP, true>::new(&job, slots);
        let (mut a, mut b) = (vec![vec![0u8; 256]; slots], vec![vec![0u8; 256]; slots]);
        let (mut next_a, mut next_b) = (0, 0);
        let (mut stamp, mut fast) = (0x0bad_cafe_u64, 0);
        for batch in 0..300u64 {
            stamp = stamp.wrapping_mul(6364136223846793005).wrapping_add(batch);
            Fill::set_stamp(&mut each, stamp);
            Fill::set_stamp(&mut by_one, stamp);
            if batch % 7 == 6 {
                let slot = (batch as usize * 5) % slots;
                for (f, bufs) in [(&mut each, &mut a), (&mut by_one, &mut b)] {
                    f.forget(slot);
                    bufs[slot].fill(0xaa);
                }
            }
            fast += u64::from(each.one.unlaid == 0);
            let n = 1 + (batch as usize * 11) % 40;
            let first = next_a;
            let mut s = Slots {
                bufs: &mut a,
                next: &mut next_a,
                left: n,
                lens: Vec::new(),
            };
            assert_eq!(each.build_each(&mut s), 96 * n as u64);
            for _ in 0..n {
                let slot = next_b;
                next_b = (slot + 1) % slots;
                assert_eq!(by_one.build(&mut b[slot], slot), 96);
            }
            for k in 0..n {
                let slot = (first + k) % slots;
                assert_eq!(a[slot][..96], b[slot][..96], "batch {batch}, slot {slot}");
            }
        }
        assert!(fast > 100, "batches with every slot laid: {fast}");
        assert_eq!(Fill::per_flow(&each), Fill::per_flow(&by_one));
    }

    /// One flow, the UDP path: payloads by `payload_each` and by
    /// `payload` are the same bytes with the same new endpoints, a
    /// forgotten slot's written whole again.
    fn one_flow_payloads(slots: usize) {
        use super::super::flow_table::tests::PayloadSlots;
        use linerate_backend::port::PayloadSource;
        let cfg = cfg("198.18.0.1", "9", false);
        let fx = Fixture::new(&cfg);
        let job = fx.job(&cfg);
        let mut each = Filler::<false, false, false, true>::new(&job, slots);
        let mut by_one = Filler::<false, false, false, true>::new(&job, slots);
        let (mut a, mut b) = (vec![vec![0u8; 256]; slots], vec![vec![0u8; 256]; slots]);
        let (mut next_a, mut next_b) = (0, 0);
        let (mut stamp, mut fast) = (0x0bad_f00d_u64, 0);
        for batch in 0..300u64 {
            stamp = stamp.wrapping_mul(6364136223846793005).wrapping_add(batch);
            Fill::set_stamp(&mut each, stamp);
            Fill::set_stamp(&mut by_one, stamp);
            if batch % 7 == 6 {
                let slot = (batch as usize * 5) % slots;
                for (f, bufs) in [(&mut each, &mut a), (&mut by_one, &mut b)] {
                    f.forget(slot);
                    bufs[slot].fill(0xaa);
                }
            }
            fast += u64::from(each.one.unlaid == 0);
            let n = 1 + (batch as usize * 11) % 40;
            let first = next_a;
            let mut s = PayloadSlots {
                bufs: &mut a,
                next: &mut next_a,
                left: n,
                got: Vec::new(),
            };
            assert_eq!(each.payload_each(&mut s), 96 * n as u64);
            let got = s.got;
            let mut want = Vec::new();
            for _ in 0..n {
                let slot = next_b;
                next_b = (slot + 1) % slots;
                let (len, _, ends) = by_one.payload(&mut b[slot], slot);
                want.push((len, ends.map(|e| (*e.addrs, e.ports))));
            }
            assert_eq!(got, want, "batch {batch}");
            for k in 0..n {
                let slot = (first + k) % slots;
                assert_eq!(a[slot][..54], b[slot][..54], "batch {batch}, slot {slot}");
            }
        }
        assert!(fast > 100, "batches with every slot laid: {fast}");
        assert_eq!(Fill::per_flow(&each), Fill::per_flow(&by_one));
    }

    #[test]
    fn one_flow_batches_lay_forgotten_slots_again() {
        for slots in [1, 8, 64] {
            one_flow_payloads(slots);
        }
        for slots in [1, 8, 64] {
            one_flow_frames::<false>(slots);
            one_flow_frames::<true>(slots);
        }
    }
}
