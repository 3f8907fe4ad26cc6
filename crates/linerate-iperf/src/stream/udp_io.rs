//! UDP stream workers: the batched (sendmmsg, GSO) sender and the
//! receiver (recvmmsg, GRO) that counts loss, reorder and jitter.

use super::shared::*;
use linerate_backend::udp_batch::{BATCH_MAX, Batch, GRO_BUF_BYTES, GroBatch};
use linerate_backend::{clock, sockopt};
use linerate_iperf_proto::udp::{self, UdpReceiver};
use linerate_traffic::pacing::{Departures, wait_until};
use std::io::ErrorKind;
use std::net::UdpSocket;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Datagrams per GSO message at most: the kernel takes 128 segments per
/// send since Linux 6.14 (UDP_MAX_SEGMENTS; iperf3 3.21's `--gsro` sends
/// 128 of 18 bytes per call), 64 before, and 64 KiB on every version; a
/// kernel that refuses 128 gets [`GSO_SEGMENTS_OLD`].
const GSO_SEGMENTS_MAX: usize = 128;
/// UDP_MAX_SEGMENTS of the kernels before 6.14.
const GSO_SEGMENTS_OLD: usize = 64;
/// Messages per sendmmsg when each carries many GSO segments.
const GSO_MESSAGES: usize = 8;

/// Send buffers laid out for `segs` datagrams of `len` bytes per message.
struct TxBufs {
    segs: usize,
    msgs: Vec<Vec<u8>>,
}

impl TxBufs {
    fn new(template: &[u8], segs: usize, msgs: usize) -> Self {
        let one: Vec<u8> = template
            .iter()
            .copied()
            .cycle()
            .take(template.len() * segs)
            .collect();
        Self {
            segs,
            msgs: vec![one; msgs],
        }
    }

    fn capacity(&self) -> usize {
        self.segs * self.msgs.len()
    }
}

pub fn udp_send(
    s: UdpSocket,
    sh: Arc<StreamShared>,
    template: Vec<u8>,
    pacing: Pacing,
    c64: bool,
    gso: bool,
) {
    let len = template.len();
    let gso_segs = (65507 / len.max(1)).min(GSO_SEGMENTS_MAX);
    let use_gso = gso
        && gso_segs > 1
        && u16::try_from(len).is_ok_and(|l| sockopt::set_udp_segment(&s, l).is_ok());
    let mut tx = if use_gso {
        TxBufs::new(&template, gso_segs, GSO_MESSAGES)
    } else {
        TxBufs::new(&template, 1, BATCH_MAX)
    };
    let mut batch = Batch::new();
    let start = Instant::now();
    let mut seq: u64 = 1;
    let mut sent_bytes = 0u64;
    let burst = pacing.burst.max(1) as usize;
    let mut dep = Departures::default();
    let _ = s.set_write_timeout(Some(POLL));
    while !sh.stopped() {
        let cap = tx.capacity();
        let Some(n) = udp_how_many(&sh, &pacing, (start, sent_bytes), len, burst.min(cap), cap)
        else {
            continue;
        };
        let n = pacing.budget.take(n as u64) as usize;
        if n == 0 {
            // This side has sent its -n / -k amount.
            break;
        }
        stamp_headers(&mut tx, n, len, seq, c64);
        let full = n / tx.segs;
        let rest = n % tx.segs;
        // The messages' slices on the stack: nothing allocated per send.
        let mut slices: [&[u8]; BATCH_MAX] = [&[]; BATCH_MAX];
        for (r, m) in slices.iter_mut().zip(&tx.msgs[..full]) {
            *r = m;
        }
        let mut m = full;
        if rest > 0 {
            slices[full] = &tx.msgs[full][..rest * len];
            m += 1;
        }
        let refs = &slices[..m];
        match batch.send(&s, refs) {
            Ok(k) => {
                let dgrams: usize = refs[..k].iter().map(|r| r.len() / len).sum();
                pacing.budget.give_back((n - dgrams) as u64);
                if pacing.rate_bps > 0 {
                    dep.record(Instant::now(), dgrams as u64);
                }
                seq += dgrams as u64;
                sent_bytes += (dgrams * len) as u64;
                StreamShared::add(&sh.bytes, (dgrams * len) as u64);
                StreamShared::add(&sh.blocks, dgrams as u64);
            }
            Err(e)
                if idle_error(&e)
                    || e.raw_os_error() == Some(nix::errno::Errno::ENOBUFS as i32) =>
            {
                pacing.budget.give_back(n as u64);
                StreamShared::add(&sh.send_errors, 1);
                std::thread::yield_now();
            }
            // The peer's socket is gone (ICMP unreachable): normal at the end.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                pacing.budget.give_back(n as u64);
                std::thread::sleep(Duration::from_millis(1));
            }
            // A kernel that takes 64 segments a send, not 128.
            Err(e) if tx.segs > GSO_SEGMENTS_OLD && e.raw_os_error() == Some(22) => {
                pacing.budget.give_back(n as u64);
                tx = TxBufs::new(&template, GSO_SEGMENTS_OLD, GSO_MESSAGES);
            }
            // A device or path that cannot take GSO: fall back to one datagram per message.
            Err(e) if tx.segs > 1 && matches!(e.raw_os_error(), Some(5 | 22 | 95)) => {
                pacing.budget.give_back(n as u64);
                let _ = sockopt::set_udp_segment(&s, 0);
                tx = TxBufs::new(&template, 1, BATCH_MAX);
            }
            Err(e) => {
                if !sh.stopped() {
                    sh.fail(format!("unable to write to stream socket: {e}"));
                }
                break;
            }
        }
    }
    if pacing.rate_bps > 0 {
        sh.publish(dep);
    }
    sh.finished.store(true, Ordering::Release);
}

/// How many datagrams a UDP sender hands the kernel now (`burst` at the
/// least, `cap` at most); `None` when it napped towards its next
/// departure and looks at its flags first (the stop flag every POLL).
fn udp_how_many(
    sh: &StreamShared,
    pacing: &Pacing,
    (start, sent_bytes): (Instant, u64),
    len: usize,
    burst: usize,
    cap: usize,
) -> Option<usize> {
    if pacing.rate_bps == 0 {
        return Some(cap);
    }
    let allowed = (pacing.rate_bps as f64 * start.elapsed().as_secs_f64() / 8.0) as u64;
    if allowed >= sent_bytes + len as u64 {
        return Some((((allowed - sent_bytes) / len as u64) as usize).clamp(burst, cap));
    }
    if let Some(t) = due(start, sent_bytes, pacing) {
        // Not past the scheduled end.
        let now = Instant::now();
        let by = now + sh.nap(t.saturating_duration_since(now));
        wait_until(by, Duration::from_micros(100));
        if by < t {
            return None;
        }
    }
    Some(burst)
}

/// Writes the headers of the next `n` datagrams (sequence numbers from
/// `seq`, one send time) into the send buffers.
fn stamp_headers(tx: &mut TxBufs, n: usize, len: usize, seq: u64, c64: bool) {
    let (sec, nsec) = clock::monotonic();
    for d in 0..n {
        let (m, k) = (d / tx.segs, d % tx.segs);
        udp::write_header(
            &mut tx.msgs[m][k * len..],
            sec as u32,
            nsec / 1000,
            seq + d as u64,
            c64,
        );
    }
}

pub fn udp_recv(s: UdpSocket, sh: Arc<StreamShared>, len: usize, c64: bool, skip: bool) {
    let _ = s.set_read_timeout(Some(POLL));
    let (mut batch, mut store) = udp_rx_buffers(&s, len, c64, skip);
    let mut lens = [0usize; BATCH_MAX];
    let mut segs = [0usize; BATCH_MAX];
    let mut rx = UdpReceiver::default();
    let mut draining = false;
    let mut near_end = false;
    while !sh.stopped() {
        if !draining && sh.drain_until_ns.load(Ordering::Relaxed) != 0 {
            draining = true;
        }
        near_end = near_end || sh.near_expected_end();
        match udp_rx_wait(&s, &sh, draining, near_end) {
            Waited::Data => {}
            Waited::Woken => continue,
            Waited::Nothing => break,
        }
        if sh.drained(false) {
            break;
        }
        match batch.recv(&s, &mut store, &mut lens, &mut segs) {
            Ok(n) => {
                let got = UdpBatch {
                    store: &store,
                    lens: &lens[..n],
                    segs: &segs[..n],
                };
                count_udp_batch(&sh, &mut rx, &got, c64, skip);
            }
            Err(e) if idle_error(&e) => {
                if sh.drained(draining) {
                    break;
                }
            }
            // A reverse-mode peer that went away shows as refused; keep listening until stopped.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                if draining {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(e) => {
                if !sh.stopped() {
                    sh.fail(format!("unable to read from stream socket: {e}"));
                }
                break;
            }
        }
    }
    sh.finished.store(true, Ordering::Release);
}

/// A UDP receiver's batch and buffers. With UDP GRO the kernel hands over
/// up to 64 KiB of one flow's datagrams per buffer; without it, one
/// datagram per buffer. With `skip` (--skip-rx-copy) only each datagram's
/// header is copied.
fn udp_rx_buffers(s: &UdpSocket, len: usize, c64: bool, skip: bool) -> (GroBatch, Vec<Vec<u8>>) {
    let gro = !skip && GroBatch::enable(s).is_ok();
    let (count, size) = if gro {
        (16, GRO_BUF_BYTES)
    } else if skip {
        (BATCH_MAX, udp::header_len(c64))
    } else {
        (BATCH_MAX, len.max(1))
    };
    let store = (0..count).map(|_| vec![0u8; size]).collect();
    let batch = if skip {
        GroBatch::truncating()
    } else {
        GroBatch::new()
    };
    (batch, store)
}

/// Whether a UDP receiver reads now (`Data`), looks at its flags again
/// (`Woken`) or has drained (`Nothing`). From the scheduled end on, the
/// wait for data ends soon to look at the flags (a read of POLL kept the
/// end of the test waiting for it), and a draining receiver ends after
/// DRAIN_IDLE without data, both timed by poll(2) to the millisecond (a
/// read's timeout goes by the kernel's tick); before the end, reads block
/// as long as POLL (a wait on a wake as well cost the overloaded host its
/// control loop's time).
fn udp_rx_wait(s: &UdpSocket, sh: &StreamShared, draining: bool, near_end: bool) -> Waited {
    if draining {
        wait_data(s, sh.stop_wake.as_deref(), DRAIN_IDLE)
    } else if near_end && wait_data(s, None, END_LOOK) != Waited::Data {
        Waited::Woken
    } else {
        Waited::Data
    }
}

/// One received batch: the buffers, each one's length and GRO segment
/// size.
struct UdpBatch<'a> {
    store: &'a [Vec<u8>],
    lens: &'a [usize],
    segs: &'a [usize],
}

/// Counts a received batch into the receiver's accounting and the
/// stream's shared counters.
fn count_udp_batch(
    sh: &StreamShared,
    rx: &mut UdpReceiver,
    got: &UdpBatch<'_>,
    c64: bool,
    skip: bool,
) {
    if sh.omit_over.swap(false, Ordering::Relaxed) {
        rx.reset_after_omit();
    }
    let (sec, nsec) = clock::monotonic();
    let arrival = sec as f64 + f64::from(nsec / 1000) / 1e6;
    let mut bytes = 0u64;
    let mut datagrams = 0u64;
    let mut take = |head: &[u8], whole: usize| {
        // A repeated hello (4 bytes) or other runt is not a datagram of
        // the test.
        if let Some((ts, tus, seq)) = udp::read_header(head, c64) {
            datagrams += 1;
            let sent = f64::from(ts) + f64::from(tus) / 1e6;
            rx.on_datagram(seq, whole, sent, arrival);
            bytes += whole as u64;
        }
    };
    for (i, &len) in got.lens.iter().enumerate() {
        let buf = &got.store[i];
        if skip {
            // Truncated: the buffer holds the header, `len` is the
            // datagram's whole length.
            take(&buf[..len.min(buf.len())], len);
            continue;
        }
        for d in buf[..len].chunks(got.segs[i].max(1)) {
            take(d, d.len());
        }
    }
    StreamShared::add(&sh.bytes, bytes);
    StreamShared::add(&sh.blocks, datagrams);
    sh.last_rx_ns
        .store(clock::monotonic_ns(), Ordering::Relaxed);
    if let Ok(mut c) = sh.udp_rx.lock() {
        *c = UdpRxCounters {
            packet_count: rx.packet_count,
            cnt_error: rx.cnt_error,
            out_of_order: rx.out_of_order,
            jitter_s: rx.jitter_s,
            duplicates: rx.duplicates,
            late: rx.late,
            lost_exact: rx.lost_exact(),
        };
    }
}
