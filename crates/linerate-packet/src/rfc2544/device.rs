//! Trials on real ports: blast on one, sink on the other (both ways at
//! once with `reverse`), a drain wait after the last frame; a trial's
//! counts from the two reports.

use super::*;

/// Trials on real ports: sink on `rx_iface` (in a thread), blast on
/// `tx_iface`, a drain wait after the last frame for what the device
/// still holds; with `reverse`, the same from `rx_iface` to `tx_iface` at
/// the same time.
#[derive(Debug, Clone)]
pub struct DeviceRunner {
    pub tx_iface: String,
    pub rx_iface: String,
    pub flows: FlowSpec,
    /// Bidirectional: the flows sent from `rx_iface` back through the
    /// device to `tx_iface`.
    pub reverse: Option<FlowSpec>,
    pub backend: linerate_backend::port::BackendKind,
    /// The loopback ports `backend` loopback opens (the caller's
    /// registry; empty for kernel interfaces).
    pub wires: linerate_backend::port::Wires,
    pub drain: Duration,
    /// Sender and receiver on one host: latency is measured.
    pub clocks_shared: bool,
    pub stop: std::sync::Arc<AtomicBool>,
    /// Traffic at the trial's rate before each trial, not counted (RFC
    /// 2544's learning / warm-up), followed by the drain wait.
    pub warmup: Duration,
}

/// How long a trial's sender may take: a throughput trial its time and a
/// tenth (its count is due at the trial time; a sender held back stops
/// there and is judged at what it offered), a back-to-back burst its
/// length twice and a second (it is judged whole or not at all).
fn send_limit(spec: &TrialSpec) -> Duration {
    match spec.frames {
        None => spec.duration + (spec.duration / 10).min(Duration::from_secs(1)),
        Some(_) => spec.duration * 2 + Duration::from_secs(1),
    }
}

/// The receiving port's sink for a trial: probe frames only, bounded by
/// the trial's time, the drain and slack.
pub(crate) fn trial_sink(
    iface: &str,
    (backend, wires): (
        linerate_backend::port::BackendKind,
        &linerate_backend::port::Wires,
    ),
    clocks_shared: bool,
    spec: &TrialSpec,
    drain: Duration,
) -> SinkConfig {
    SinkConfig {
        iface: iface.to_string(),
        duration: spec.duration + drain + Duration::from_secs(30),
        backend,
        wires: wires.clone(),
        clocks_shared,
        until_packets: None,
        capture: None,
        cores: Vec::new(),
        interval: None,
        take: linerate_backend::port::RxFilter::Probes,
    }
}

pub(crate) fn rx_packets(iface: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/statistics/rx_packets"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// One direction through the device: sent on `tx`, counted on `rx`.
struct Leg<'a> {
    tx: &'a str,
    rx: &'a str,
    flows: &'a FlowSpec,
}

impl DeviceRunner {
    fn legs(&self) -> Vec<Leg<'_>> {
        let mut legs = vec![Leg {
            tx: &self.tx_iface,
            rx: &self.rx_iface,
            flows: &self.flows,
        }];
        if let Some(r) = &self.reverse {
            legs.push(Leg {
                tx: &self.rx_iface,
                rx: &self.tx_iface,
                flows: r,
            });
        }
        legs
    }

    fn blast_config(&self, leg: &Leg<'_>, spec: &TrialSpec, count: u64) -> BlastConfig {
        BlastConfig {
            iface: leg.tx.to_string(),
            flows: leg.flows.clone(),
            sizes: spec.frame_size.sequence(),
            framing: linerate_traffic::Framing::default(),
            count: Some(count),
            duration: send_limit(spec),
            rate: Rate::Pps(spec.rate_fps.round().max(1.0) as u64),
            burst: 1,
            catch_up: spec.pace.catch_up,
            burst_tolerance: spec.pace.tolerance(&spec.frame_size),
            backend: self.backend,
            wires: self.wires.clone(),
            cores: Vec::new(),
            replay: None,
            macs_given: true,
            gso: linerate_backend::port::Gso::Off,
            interval: None,
            end_markers: false,
        }
    }

    /// Sends on every leg at once; the first error.
    fn send_all(&self, cfgs: &[BlastConfig]) -> Vec<Result<crate::BlastReport, String>> {
        std::thread::scope(|sc| {
            let hs: Vec<_> = cfgs
                .iter()
                .map(|c| {
                    sc.spawn(move || {
                        blast(c, &self.stop, &mut |_| {})
                            .map_err(|e| format!("sending on {}: {e}", c.iface))
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a sending thread failed".into()))
                })
                .collect()
        })
    }
}

impl TrialRunner for DeviceRunner {
    fn interrupted(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn run(&mut self, spec: &TrialSpec) -> Result<TrialCounts, String> {
        if self.stop.load(Ordering::Relaxed) {
            return Err("interrupted".into());
        }
        let count = spec
            .frames
            .unwrap_or_else(|| (spec.rate_fps * spec.duration.as_secs_f64()).round() as u64)
            .max(1);
        let legs = self.legs();
        let sinks: Vec<SinkConfig> = legs
            .iter()
            .map(|l| {
                trial_sink(
                    l.rx,
                    (self.backend, &self.wires),
                    self.clocks_shared,
                    spec,
                    self.drain,
                )
            })
            .collect();
        let blasts: Vec<BlastConfig> = legs
            .iter()
            .map(|l| self.blast_config(l, spec, count))
            .collect();
        if !self.warmup.is_zero() {
            let n = (spec.rate_fps * self.warmup.as_secs_f64()).round().max(1.0) as u64;
            let warm: Vec<BlastConfig> = blasts
                .iter()
                .map(|b| BlastConfig {
                    count: Some(n),
                    ..b.clone()
                })
                .collect();
            for r in self.send_all(&warm) {
                r.map_err(|e| format!("warm-up: {e}"))?;
            }
            std::thread::sleep(self.drain);
        }
        let rx_before: Vec<Option<u64>> = legs.iter().map(|l| rx_packets(l.rx)).collect();
        let (sent, got) =
            crate::pair::while_counting(&sinks, self.drain, || self.send_all(&blasts), |_| true)?;
        let mut counts = Vec::new();
        for ((b, r), (leg, before)) in sent.into_iter().zip(got).zip(legs.iter().zip(&rx_before)) {
            let rx_iface_packets = before
                .zip(rx_packets(leg.rx))
                .map(|(a, b)| b.saturating_sub(a));
            counts.push(TrialCounts::of(&b?, &r?, rx_iface_packets));
        }
        let mut it = counts.into_iter();
        let mut fwd = it.next().ok_or("no direction")?;
        fwd.reverse = it.next().map(Box::new);
        Ok(fwd)
    }
}

impl TrialCounts {
    /// One direction's counts: what blast sent and the sink received.
    pub(crate) fn of(
        b: &crate::BlastReport,
        r: &SinkReport,
        rx_iface_packets: Option<u64>,
    ) -> Self {
        let lat = r.counts.latency_hdr().map(|h| {
            let p = linerate_traffic::accounting::percentiles(&h);
            [
                h.min() as f64,
                h.mean(),
                p[0] as f64,
                p[2] as f64,
                p[4] as f64,
            ]
        });
        // The time sending took, from the pacer's own record of its send
        // calls (gaps x calls): the worker's set-up before the first frame
        // is not time at the asked rate.
        let secs = b
            .pacing
            .iter()
            .map(|(d, _)| d.mean_gap_ns * d.calls as f64 / 1e9)
            .fold(0.0, f64::max);
        let secs = if secs > 0.0 { secs } else { b.duration_s };
        TrialCounts {
            sent: b.packets,
            received: r.counts.packets(),
            sent_bytes: b.bytes,
            // The sink counts bytes without FCS.
            received_bytes: r.counts.bytes() + 4 * r.counts.packets(),
            secs,
            rx_secs: r.duration_s,
            latency_ns: lat,
            rx_iface_packets,
            reverse: None,
            shape: b.shape,
        }
    }
}
