//! Turns the workers' counters into interval samples and end-of-test
//! figures, with iperf3's omit semantics: figures of the first `-O` seconds
//! are reported as omitted and left out of the totals, and interval times
//! restart from zero when the omit period ends.

use crate::stream::{StreamShared, UdpRxCounters, tcp_info};
use linerate_iperf_proto::report::{
    DepartureStats, IntervalSample, StreamFinal, TcpFinal, TcpSample, UdpRxSample,
};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, Default)]
struct Snap {
    bytes: u64,
    blocks: u64,
    rx: UdpRxCounters,
    retrans: u64,
}

fn snap(sh: &StreamShared) -> Snap {
    let rx = sh.udp_rx.lock().map(|g| *g).unwrap_or_default();
    let retrans = if sh.sender {
        tcp_info(sh).map_or(0, |i| u64::from(i.total_retrans))
    } else {
        0
    };
    Snap {
        bytes: sh.bytes.load(Ordering::Relaxed),
        blocks: sh.blocks.load(Ordering::Relaxed),
        rx,
        retrans,
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct RttStats {
    max_cwnd: u64,
    max_wnd: u64,
    max_rtt: u32,
    min_rtt: u32,
    sum_rtt: u64,
    n: u64,
    /// tcpi_reord_seen at the first and the latest look.
    reord_first: Option<u32>,
    reord_last: u32,
}

/// The longest a control loop sleeps between looks at its streams.
pub const CONTROL_WAKE: Duration = Duration::from_millis(20);

/// How long a control loop may wait for its control socket before the
/// meter's next interval is due (at most [`CONTROL_WAKE`], at least 1 ms),
/// so intervals end on time rather than up to a wake-up late.
pub fn until_due(m: Option<&Meter>) -> Duration {
    m.and_then(Meter::next_due)
        .map_or(CONTROL_WAKE, |t| {
            t.saturating_duration_since(Instant::now())
        })
        .clamp(Duration::from_millis(1), CONTROL_WAKE)
}

/// Samples a test's streams.
#[derive(Debug)]
pub struct Meter {
    streams: Vec<Arc<StreamShared>>,
    udp: bool,
    interval: Duration,
    omit: Duration,
    /// TEST_START; intervals restart at the end of omit.
    start: Instant,
    epoch: Instant,
    omitting: bool,
    last_t: Instant,
    last: Vec<Snap>,
    base: Vec<Snap>,
    rtt: Vec<RttStats>,
    /// Per-stream target rate and bits per datagram/block, for pacing figures.
    rate_bps: u64,
    unit_bits: f64,
    /// This side's -n / -k budget, restarted when omit ends.
    budget: Option<Arc<crate::stream::Budget>>,
    /// The scheduled end of a test that ends by time: the interval that
    /// ends there is left to [`Meter::finish`], which ends it where the
    /// test really ended (a tick at the end followed by a finish a moment
    /// later gave a sub-millisecond last interval at absurd rates).
    end: Option<Instant>,
}

/// An interval ending this close to the scheduled end is the last one.
const LAST_TAIL: Duration = Duration::from_millis(50);

impl Meter {
    pub fn new(
        streams: Vec<Arc<StreamShared>>,
        udp: bool,
        interval: Duration,
        omit: Duration,
        start: Instant,
    ) -> Self {
        let n = streams.len();
        Self {
            streams,
            udp,
            interval,
            omit,
            start,
            epoch: start,
            omitting: !omit.is_zero(),
            last_t: start,
            last: vec![Snap::default(); n],
            base: vec![Snap::default(); n],
            rtt: vec![RttStats::default(); n],
            rate_bps: 0,
            unit_bits: 0.0,
            budget: None,
            end: None,
        }
    }

    /// This side's senders' budget, restarted when omit ends.
    pub fn with_budget(mut self, b: Arc<crate::stream::Budget>) -> Self {
        self.budget = Some(b);
        self
    }

    /// The test's data ends at `end` (a client's `-t` with a fraction,
    /// which the parameters carry rounded up).
    pub fn ending_at(mut self, end: Instant) -> Self {
        self.end = Some(end);
        self
    }

    /// The meter of a test with parameters `p`: UDP or TCP figures, omit,
    /// and the per-stream target rate for pacing figures.
    pub fn for_test(
        streams: Vec<Arc<StreamShared>>,
        p: &linerate_iperf_proto::Params,
        interval: Duration,
        start: Instant,
    ) -> Self {
        let mut m = Self::new(
            streams,
            p.protocol == linerate_iperf_proto::Protocol::Udp,
            interval,
            Duration::from_secs(u64::from(p.omit_s)),
            start,
        )
        .with_pacing(p.bandwidth_bps, p.len);
        if p.time_s > 0 {
            m.end = Some(start + Duration::from_secs(u64::from(p.time_s) + u64::from(p.omit_s)));
        }
        m
    }

    /// True if an interval ending at `t` is the test's last (left to
    /// [`Meter::finish`]).
    fn is_last(&self, t: Instant) -> bool {
        self.end
            .is_some_and(|e| t + LAST_TAIL.min(self.interval / 2) >= e)
    }

    /// The per-stream target rate and block size, for pacing figures.
    pub fn with_pacing(mut self, rate_bps: u64, block_bytes: u32) -> Self {
        self.rate_bps = rate_bps;
        self.unit_bits = f64::from(block_bytes) * 8.0;
        self
    }

    pub fn streams(&self) -> &[Arc<StreamShared>] {
        &self.streams
    }

    /// Bytes moved since the end of omit, summed over the sending streams
    /// and over the receiving ones.
    pub fn totals(&self) -> (u64, u64) {
        self.streams
            .iter()
            .zip(&self.base)
            .fold((0, 0), |(sent, recv), (s, base)| {
                let b = s.bytes.load(Ordering::Relaxed).saturating_sub(base.bytes);
                if s.sender {
                    (sent + b, recv)
                } else {
                    (sent, recv + b)
                }
            })
    }

    pub fn omitting(&self) -> bool {
        self.omitting
    }

    /// When the next interval (or the end of omit) is due, if ever.
    pub fn next_due(&self) -> Option<Instant> {
        if self.omitting {
            Some(self.start + self.omit)
        } else if self.interval.is_zero() || self.is_last(self.last_t + self.interval) {
            None
        } else {
            Some(self.last_t + self.interval)
        }
    }

    /// Emits an interval if one ended by `now`.
    pub fn tick(&mut self, now: Instant) -> Option<Vec<IntervalSample>> {
        if self.interval.is_zero() && !self.omitting {
            return None;
        }
        let omit_end = self.start + self.omit;
        if self.omitting && now >= omit_end {
            let samples = self.sample(omit_end.max(self.last_t), true);
            self.omitting = false;
            self.epoch = omit_end;
            self.last_t = omit_end;
            self.base = self.last.clone();
            if let Some(b) = &self.budget {
                b.restart();
            }
            for s in &self.streams {
                s.omit_over.store(true, Ordering::Relaxed);
            }
            self.rtt = vec![RttStats::default(); self.streams.len()];
            return samples;
        }
        if !self.interval.is_zero()
            && now >= self.last_t + self.interval
            && !self.is_last(self.last_t + self.interval)
        {
            let t = self.last_t + self.interval;
            let omitted = self.omitting;
            return self.sample(t, omitted);
        }
        None
    }

    fn sample(&mut self, t: Instant, omitted: bool) -> Option<Vec<IntervalSample>> {
        let start = self
            .last_t
            .saturating_duration_since(self.epoch)
            .as_secs_f64();
        let end = t.saturating_duration_since(self.epoch).as_secs_f64();
        let mut out = Vec::with_capacity(self.streams.len());
        for (i, sh) in self.streams.iter().enumerate() {
            let now = snap(sh);
            let prev = self.last[i];
            let mut s = IntervalSample {
                id: sh.id,
                socket: sh.socket,
                sender: sh.sender,
                start,
                end,
                bytes: now.bytes - prev.bytes,
                omitted,
                ..Default::default()
            };
            if self.udp {
                if sh.sender {
                    s.udp_tx_packets = Some(now.blocks - prev.blocks);
                } else {
                    s.udp_rx = Some(UdpRxSample {
                        jitter_ms: linerate_iperf_proto::udp::jitter_ms(now.rx.jitter_s),
                        lost: now.rx.cnt_error.saturating_sub(prev.rx.cnt_error),
                        packets: now.rx.packet_count.saturating_sub(prev.rx.packet_count),
                    });
                }
            } else if sh.sender
                && let Some(info) = tcp_info(sh)
            {
                let r = &mut self.rtt[i];
                r.max_cwnd = r.max_cwnd.max(info.snd_cwnd_bytes);
                r.max_wnd = r.max_wnd.max(u64::from(info.snd_wnd));
                r.max_rtt = r.max_rtt.max(info.rtt_us);
                r.min_rtt = if r.n == 0 {
                    info.rtt_us
                } else {
                    r.min_rtt.min(info.rtt_us)
                };
                r.sum_rtt += u64::from(info.rtt_us);
                r.n += 1;
                let before = r
                    .reord_last
                    .max(*r.reord_first.get_or_insert(info.reord_seen));
                r.reord_last = info.reord_seen;
                s.tcp = Some(TcpSample {
                    retransmits: now.retrans.saturating_sub(prev.retrans),
                    reorder: u64::from(info.reord_seen.saturating_sub(before)),
                    snd_cwnd: info.snd_cwnd_bytes,
                    snd_wnd: u64::from(info.snd_wnd),
                    rtt_us: info.rtt_us,
                    rttvar_us: info.rttvar_us,
                    pmtu: info.pmtu,
                });
            }
            self.last[i] = now;
            out.push(s);
        }
        self.last_t = t;
        Some(out)
    }

    /// The last, partial interval (dropped if under 10% of an interval and
    /// empty, as iperf3 does) and every stream's end figures.
    pub fn finish(&mut self, now: Instant) -> (Option<Vec<IntervalSample>>, Vec<StreamFinal>) {
        let short = now.saturating_duration_since(self.last_t) < self.interval / 10;
        let moved = self
            .streams
            .iter()
            .zip(&self.last)
            .any(|(s, l)| s.bytes.load(Ordering::Relaxed) > l.bytes);
        let omitted = self.omitting;
        let last = if (short && !moved) || self.interval.is_zero() {
            // Still take the counters, for the totals.
            self.last = self.streams.iter().map(|s| snap(s)).collect();
            None
        } else {
            self.sample(now, omitted)
        };
        let seconds = now.saturating_duration_since(self.epoch).as_secs_f64();
        let finals = self
            .streams
            .iter()
            .enumerate()
            .map(|(i, sh)| {
                let now_s = self.last[i];
                let base = if omitted { now_s } else { self.base[i] };
                let r = self.rtt[i];
                StreamFinal {
                    id: sh.id,
                    socket: sh.socket,
                    sender: sh.sender,
                    bytes: now_s.bytes - base.bytes,
                    seconds,
                    packets: if sh.sender {
                        now_s.blocks
                    } else {
                        now_s.rx.packet_count
                    },
                    omitted_packets: if sh.sender {
                        base.blocks
                    } else {
                        base.rx.packet_count
                    },
                    errors: now_s.rx.cnt_error,
                    omitted_errors: base.rx.cnt_error,
                    out_of_order: now_s.rx.out_of_order - base.rx.out_of_order,
                    jitter_s: now_s.rx.jitter_s,
                    tcp: (!self.udp && sh.sender).then(|| TcpFinal {
                        retransmits: now_s.retrans.saturating_sub(base.retrans),
                        reorder: u64::from(r.reord_last.saturating_sub(r.reord_first.unwrap_or(0))),
                        max_snd_cwnd: r.max_cwnd,
                        max_snd_wnd: r.max_wnd,
                        max_rtt: r.max_rtt,
                        min_rtt: r.min_rtt,
                        mean_rtt: r.sum_rtt.checked_div(r.n).unwrap_or(0) as u32,
                    }),
                    exact: (self.udp && !sh.sender).then_some((
                        now_s.rx.duplicates,
                        now_s.rx.late,
                        now_s.rx.lost_exact,
                    )),
                    send_errors: sh.send_errors.load(Ordering::Relaxed),
                    departures: sh
                        .departures
                        .lock()
                        .ok()
                        .and_then(|d| *d)
                        .filter(|d| d.calls > 2)
                        .map(|d| {
                            let units = d.units as f64 / d.calls as f64;
                            DepartureStats {
                                calls: d.calls,
                                units_per_call: units,
                                target_gap_us: self.unit_bits * units / self.rate_bps.max(1) as f64
                                    * 1e6,
                                mean_gap_us: d.mean_gap_ns / 1e3,
                                stddev_gap_us: d.stddev_gap_ns() / 1e3,
                                min_gap_us: d.min_gap_ns as f64 / 1e3,
                                max_gap_us: d.max_gap_ns as f64 / 1e3,
                                gap_percentiles_us: d.percentiles_us(),
                            }
                        }),
                    congestion: sh
                        .tcp
                        .as_ref()
                        .and_then(|t| linerate_backend::sockopt::congestion(t).ok()),
                }
            })
            .collect();
        (last, finals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::StreamShared;

    fn meter(interval_ms: u64, omit_ms: u64, started_ms_ago: u64) -> Meter {
        let s = Arc::new(StreamShared::new(1, true, 5, None));
        let start = Instant::now() - Duration::from_millis(started_ms_ago);
        Meter::new(
            vec![s],
            true,
            Duration::from_millis(interval_ms),
            Duration::from_millis(omit_ms),
            start,
        )
    }

    #[test]
    fn control_loops_wake_when_the_next_interval_is_due() {
        // 995 ms into a 1 s interval: wake in about 5 ms, not a full 20.
        let m = meter(1000, 0, 995);
        let w = until_due(Some(&m));
        assert!(
            w <= Duration::from_millis(6) && w >= Duration::from_millis(1),
            "{w:?}"
        );
        // Far from the next interval: the usual 20 ms look.
        assert_eq!(until_due(Some(&meter(1000, 0, 100))), CONTROL_WAKE);
        // Overdue: at once (1 ms floor), and tick emits it.
        let mut late = meter(1000, 0, 1500);
        assert_eq!(until_due(Some(&late)), Duration::from_millis(1));
        assert!(late.tick(Instant::now()).is_some());
        assert_eq!(
            late.next_due().unwrap(),
            late.start + Duration::from_millis(2000),
            "the next interval follows the nominal one, not the late emission"
        );
        // While omitting, the end of omit is what is due.
        let o = meter(1000, 2000, 1990);
        assert_eq!(o.next_due().unwrap(), o.start + Duration::from_millis(2000));
        assert!(until_due(Some(&o)) <= Duration::from_millis(11));
        // No intervals (-i 0) and no meter: the plain wake-up.
        assert_eq!(meter(0, 0, 10).next_due(), None);
        assert_eq!(until_due(None), CONTROL_WAKE);
    }
}
