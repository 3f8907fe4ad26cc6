//! The model's `arp` flows: a packet of `ethernet` then `arp`, each ARP
//! field (hardware and protocol type and length, operation, sender and
//! target hardware and protocol addresses) a `value`, `values`,
//! `increment` or `decrement` stepped on its own per frame as the model
//! says (frame n carries value n mod count of each field), as the
//! Ethernet addresses are.
//!
//! Sending: the frames of one period of the fields' patterns (and of the
//! flow's sizes) are laid out at plan time and sent in turn by the
//! blast's replay of an in-memory trace (`linerate_packet::Replay`), at
//! the flow's rate and count. A frame is 14 bytes of Ethernet header, 28
//! of ARP and zeros to the flow's size (at least 64 with the FCS).
//!
//! Counting: no probe fits in an ARP frame, so a flow's receivers are of
//! their own: on each receive port an AF_PACKET socket (the backend's
//! `RawSocket`, a kernel filter passing ARP only) opened before the first
//! frame, counting the frames whose Ethernet and ARP headers (their
//! first 42 bytes) are those of one of the flow's frames, until every
//! sent frame is counted or the drain ends. Flows whose frames differ in
//! any header byte are told apart exactly, however many share a port; a
//! frame whose headers two running flows both send is counted by each,
//! and a flow's count never exceeds what it sent. No latency is measured
//! (no send time rides in the frame).

use crate::plan::PlanFlow;
use linerate_packet::{BlastReport, SinkReport};
use linerate_run::Interval;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// An ARP frame's Ethernet and ARP headers.
pub const HEADER_LEN: usize = 42;

/// Whether a planned flow is an ARP flow (sent as a replay: no other
/// flow of the agent is).
pub fn is_arp_flow(flow: &PlanFlow) -> bool {
    flow.blast.replay.is_some()
}

/// The kernel's ancillary loads (`SKF_AD_OFF` + `SKF_AD_VLAN_TAG`, +
/// `SKF_AD_VLAN_TAG_PRESENT`): the 802.1Q tag the kernel took off a
/// frame it received, and whether it took one.
const AD_VLAN_TCI: u32 = 0xffff_f000 + 44;
const AD_VLAN_PRESENT: u32 = 0xffff_f000 + 48;

/// The kernel filter of a counting socket: ARP frames (their ether type
/// read once the kernel took any VLAN tag off, as it does to every frame
/// it receives) with the flow's 802.1Q tag (`vlan`: its id and priority;
/// DEI not compared), or with none.
fn filter(vlan: Option<(u16, u8)>) -> Vec<(u16, u8, u8, u32)> {
    const ACCEPT: (u16, u8, u8, u32) = (0x06, 0, 0, 0x0004_0000);
    const DROP: (u16, u8, u8, u32) = (0x06, 0, 0, 0);
    match vlan {
        None => vec![
            (0x28, 0, 0, 12),              // ldh [12]: the ether type
            (0x15, 0, 3, 0x0806),          // ARP, else drop
            (0x20, 0, 0, AD_VLAN_PRESENT), // ld vlan_avail
            (0x15, 0, 1, 0),               // untagged: accept, else drop
            ACCEPT,
            DROP,
        ],
        Some((id, prio)) => vec![
            (0x28, 0, 0, 12),
            (0x15, 0, 6, 0x0806),
            (0x20, 0, 0, AD_VLAN_PRESENT),
            (0x15, 0, 4, 1),           // tagged, else drop
            (0x20, 0, 0, AD_VLAN_TCI), // ld vlan_tci
            (0x54, 0, 0, 0xefff),      // and: priority and id
            (0x15, 0, 1, u32::from(u16::from(prio) << 13 | id)),
            ACCEPT,
            DROP,
        ],
    }
}

/// Frame `f`'s Ethernet and ARP headers as a counting socket reads them:
/// without the 802.1Q tag (`tagged`), which the kernel takes off.
fn header_of(f: &[u8], tagged: bool) -> Option<[u8; HEADER_LEN]> {
    if !tagged {
        return f.get(..HEADER_LEN)?.try_into().ok();
    }
    let mut h = [0u8; HEADER_LEN];
    h[..12].copy_from_slice(f.get(..12)?);
    h[12..].copy_from_slice(f.get(16..HEADER_LEN + 4)?);
    Some(h)
}
const POLL: Duration = Duration::from_millis(20);
const BATCH: usize = 16;
const FRAME_MAX: usize = 9216;
/// How often the running counts are published.
const PUBLISH: Duration = Duration::from_millis(100);

/// Sends ARP flow `flow` (its replay) and counts its frames on its
/// receive ports: `on_tx` gets the sender's intervals, `on_rx(k, frames,
/// bytes)` receive port k's counts so far (the last call's are final,
/// at most what was sent).
pub fn send_and_count(
    flow: &PlanFlow,
    stop: &AtomicBool,
    on_tx: &mut dyn FnMut(&Interval),
    on_rx: &(dyn Fn(usize, u64, u64) + Sync),
) -> Result<(BlastReport, Vec<Result<SinkReport, String>>), String> {
    let vlan = flow.blast.framing.vlan;
    let keys: HashSet<[u8; HEADER_LEN]> = flow
        .blast
        .replay
        .as_ref()
        .map(|r| {
            r.trace
                .frames
                .iter()
                .filter_map(|f| header_of(f, vlan.is_some()))
                .collect()
        })
        .unwrap_or_default();
    // A received frame's bytes: the tag the kernel took off, and the FCS.
    let beyond = if vlan.is_some() { 8 } else { 4 };
    // Every counting socket open before the first frame.
    let mut socks = Vec::new();
    for s in &flow.sinks {
        let iface = &s.iface;
        socks.push(open(iface, vlan).map_err(|e| format!("counting on {iface}: {e}"))?);
    }
    let counted: Vec<std::sync::Mutex<(u64, u64)>> = socks
        .iter()
        .map(|_| std::sync::Mutex::new((0, 0)))
        .collect();
    let sent_frames = std::sync::atomic::AtomicU64::new(u64::MAX);
    let sent = std::thread::scope(|sc| {
        let mut threads = Vec::new();
        for (k, sock) in socks.into_iter().enumerate() {
            let (keys, counted, sent_frames) = (&keys, &counted[k], &sent_frames);
            let (drain, at) = (flow.drain, flow.sink_rx[k]);
            threads.push(sc.spawn(move || {
                let socket = Counting {
                    keys,
                    beyond,
                    drain,
                };
                socket.count(sock, counted, sent_frames, &|p, b| on_rx(at, p, b))
            }));
        }
        let r = linerate_packet::blast(&flow.blast, stop, on_tx);
        // Counting goes on until every sent frame is in, or the drain ends.
        let n = r.as_ref().map_or(0, |s| s.packets);
        sent_frames.store(n, Ordering::Relaxed);
        let errs: Vec<String> = threads
            .into_iter()
            .filter_map(|t| t.join().ok().flatten())
            .collect();
        (r, errs)
    });
    let (sent, errs) = sent;
    let sent = sent.map_err(|e| format!("sending on {}: {e}", flow.blast.iface))?;
    for (k, c) in counted.iter().enumerate() {
        let (p, b) = *c.lock().unwrap_or_else(|p| p.into_inner());
        on_rx(flow.sink_rx[k], p.min(sent.packets), b.min(sent.bytes));
    }
    if let Some(e) = errs.into_iter().next() {
        return Err(e);
    }
    Ok((sent, Vec::new()))
}

fn open(iface: &str, vlan: Option<(u16, u8)>) -> std::io::Result<linerate_backend::raw::RawSocket> {
    let sock = linerate_backend::raw::RawSocket::open(iface)?;
    sock.attach_filter(&filter(vlan))?;
    // Frames queued before the filter took: not the flow's (none sent).
    let _ = sock.set_rcvbuf(4 << 20);
    sock.set_read_timeout(POLL)?;
    Ok(sock)
}

/// What one receive port's counting looks for: the flow's frames'
/// headers (`header_of`), the bytes a frame had beyond those read (its
/// FCS, a tag the kernel took off), how long to wait after the last.
struct Counting<'a> {
    keys: &'a HashSet<[u8; HEADER_LEN]>,
    beyond: u64,
    drain: Duration,
}

impl Counting<'_> {
    /// One receive port's counting: until the sender is done and every sent
    /// frame counted, or `drain` after it is done. Returns a receive error.
    fn count(
        &self,
        mut sock: linerate_backend::raw::RawSocket,
        counted: &std::sync::Mutex<(u64, u64)>,
        sent: &std::sync::atomic::AtomicU64,
        publish: &dyn Fn(u64, u64),
    ) -> Option<String> {
        let (keys, drain) = (self.keys, self.drain);
        let mut bufs = vec![vec![0u8; FRAME_MAX]; BATCH];
        let mut lens = [0usize; BATCH];
        let mut stamps = [0u64; BATCH];
        let (mut p, mut b) = (0u64, 0u64);
        let mut done_at: Option<Instant> = None;
        let mut published = Instant::now();
        loop {
            let total = sent.load(Ordering::Relaxed);
            if total != u64::MAX {
                let at = *done_at.get_or_insert_with(Instant::now);
                if p >= total || at.elapsed() >= drain {
                    break;
                }
            }
            let n = match sock.recv_stamped(&mut bufs, &mut lens, &mut stamps) {
                Ok(n) => n,
                Err(e) if linerate_backend::port::recv_idle(&e) => 0,
                Err(e) => return Some(format!("receiving: {e}")),
            };
            for i in 0..n {
                let f = &bufs[i][..lens[i]];
                if lens[i] >= HEADER_LEN
                    && let Ok(h) = <[u8; HEADER_LEN]>::try_from(&f[..HEADER_LEN])
                    && keys.contains(&h)
                {
                    p += 1;
                    b += lens[i] as u64 + self.beyond;
                }
            }
            *counted.lock().unwrap_or_else(|e| e.into_inner()) = (p, b);
            if published.elapsed() >= PUBLISH {
                publish(p, b);
                published = Instant::now();
            }
        }
        *counted.lock().unwrap_or_else(|e| e.into_inner()) = (p, b);
        None
    }
}

#[cfg(test)]
#[path = "arp_flow_tests.rs"]
mod tests;
