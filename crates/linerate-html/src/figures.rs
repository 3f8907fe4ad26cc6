//! A result's headline figures, each with where it came from: what a
//! report's summary shows and what `compare` compares.

use crate::input::{Doc, Loaded, Percentiles, RunRow};

/// The name of a headline figure (what `--fail-if` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FigureName {
    /// bit/s (the receiver's count where there is one).
    Throughput,
    /// frames (or packets) per second.
    Pps,
    /// Loss in percent of what was sent.
    Loss,
    /// µs.
    LatencyP50,
    /// µs.
    LatencyP99,
    /// rr transactions per second.
    Transactions,
    /// TCP retransmits (iperf3 senders).
    Retransmits,
    /// ms (iperf3 UDP).
    Jitter,
}

impl FigureName {
    pub const ALL: [FigureName; 8] = [
        FigureName::Throughput,
        FigureName::Pps,
        FigureName::Loss,
        FigureName::LatencyP50,
        FigureName::LatencyP99,
        FigureName::Transactions,
        FigureName::Retransmits,
        FigureName::Jitter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FigureName::Throughput => "throughput",
            FigureName::Pps => "pps",
            FigureName::Loss => "loss",
            FigureName::LatencyP50 => "latency_p50",
            FigureName::LatencyP99 => "latency_p99",
            FigureName::Transactions => "transactions",
            FigureName::Retransmits => "retransmits",
            FigureName::Jitter => "jitter",
        }
    }

    pub fn parse(s: &str) -> Option<FigureName> {
        FigureName::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The unit values are in.
    pub fn unit(self) -> &'static str {
        match self {
            FigureName::Throughput => "bit/s",
            FigureName::Pps => "frames/s",
            FigureName::Loss => "%",
            FigureName::LatencyP50 | FigureName::LatencyP99 => "µs",
            FigureName::Transactions => "transactions/s",
            FigureName::Retransmits => "",
            FigureName::Jitter => "ms",
        }
    }

    /// Whether a rise is good news.
    pub fn higher_is_better(self) -> bool {
        matches!(
            self,
            FigureName::Throughput | FigureName::Pps | FigureName::Transactions
        )
    }
}

/// One headline figure of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub name: FigureName,
    /// What distinguishes it from the same figure of the same run (an RFC
    /// 2544 frame size and loss allowed), or "".
    pub qualifier: String,
    pub value: f64,
    /// Who counted it and how (sender's claim, receiver's count, L1/L2).
    pub source: String,
}

impl Figure {
    fn new(name: FigureName, value: f64, source: impl Into<String>) -> Figure {
        Figure {
            name,
            qualifier: String::new(),
            value,
            source: source.into(),
        }
    }

    /// The figure's full label (`throughput 64 B, 0% loss`).
    pub fn label(&self) -> String {
        if self.qualifier.is_empty() {
            self.name.name().to_string()
        } else {
            format!("{} {}", self.name.name(), self.qualifier)
        }
    }
}

fn latency(out: &mut Vec<Figure>, p: Option<&Percentiles>, scale: f64, source: &str) {
    if let Some(p) = p {
        if let Some(v) = p.p50 {
            out.push(Figure::new(FigureName::LatencyP50, v * scale, source));
        }
        if let Some(v) = p.p99 {
            out.push(Figure::new(FigureName::LatencyP99, v * scale, source));
        }
    }
}

/// Lost over lost and received, in percent (none of either: none).
fn loss_pct(lost: u64, received: u64) -> Option<f64> {
    let all = lost + received;
    (all > 0).then(|| lost as f64 * 100.0 / all as f64)
}

/// The headline figures of one document (a single run).
pub fn of_doc(doc: &Doc) -> Vec<Figure> {
    let mut out = Vec::new();
    match doc {
        Doc::Iperf(d) => iperf(d, &mut out),
        Doc::Blast(b) => blast(b, &mut out),
        Doc::Sink(s) => {
            out.push(Figure::new(
                FigureName::Throughput,
                s.bps_l2,
                "receiver's count, L2",
            ));
            out.push(Figure::new(FigureName::Pps, s.pps, "receiver's count"));
            if let Some(l) = loss_pct(s.lost, s.packets) {
                out.push(Figure::new(FigureName::Loss, l, "receiver's sequence gaps"));
            }
            latency(&mut out, s.latency_ns.as_ref(), 1e-3, "receiver, one-way");
        }
        Doc::Fwd(f) => {
            out.push(Figure::new(
                FigureName::Pps,
                f.tx_pps,
                "forwarder's count (frames sent on)",
            ));
        }
        Doc::RrClient(r) => {
            out.push(Figure::new(
                FigureName::Transactions,
                r.transactions_per_s,
                "client's count (answers matched to requests)",
            ));
            let n = |k: &str| r.counts.get(k).and_then(serde_json::Value::as_u64);
            if let (Some(lost), Some(done)) = (n("lost"), n("completed"))
                && let Some(l) = loss_pct(lost, done)
            {
                out.push(Figure::new(FigureName::Loss, l, "client's count"));
            }
            latency(&mut out, r.latency_us.as_ref(), 1.0, "client, round trip");
        }
        Doc::Rfc2544(d) => {
            for t in &d.throughput {
                let mut f = Figure::new(
                    FigureName::Throughput,
                    t.rate_l1_bps,
                    "RFC 2544 search: highest rate passed, L1",
                );
                f.qualifier = format!(
                    "{} B, {}% loss",
                    crate::rfc2544::size_text(&t.frame_size),
                    crate::html::plain(t.loss_allowed * 100.0, 4)
                );
                out.push(f);
            }
            for l in &d.latency {
                if let Some(ns) = l.trial.latency_ns {
                    let mut f =
                        Figure::new(FigureName::LatencyP99, ns[3] / 1e3, "receiver, one-way");
                    f.qualifier = format!("{} B", crate::rfc2544::size_text(&l.frame_size));
                    out.push(f);
                }
            }
        }
        Doc::Repeat { .. } | Doc::Other { .. } => {}
    }
    out
}

/// iperf3's: the receiver's throughput, retransmits, UDP loss and jitter.
fn iperf(d: &crate::input::IperfDoc, out: &mut Vec<Figure>) {
    let e = &d.end;
    if let Some(r) = &e.sum_received {
        out.push(Figure::new(
            FigureName::Throughput,
            r.bits_per_second,
            "receiver's count (iperf3 sum_received)",
        ));
    } else if let Some(s) = &e.sum {
        out.push(Figure::new(
            FigureName::Throughput,
            s.bits_per_second,
            "iperf3 sum (UDP: the sender's rate; loss from the receiver)",
        ));
    }
    if let Some(r) = e.sum_sent.as_ref().and_then(|s| s.retransmits) {
        out.push(Figure::new(
            FigureName::Retransmits,
            r as f64,
            "sender's TCP_INFO",
        ));
    }
    if let Some(s) = &e.sum {
        if let Some(l) = s.lost_percent {
            out.push(Figure::new(FigureName::Loss, l, "receiver's count (UDP)"));
        }
        if let Some(j) = s.jitter_ms {
            out.push(Figure::new(FigureName::Jitter, j, "receiver (RFC 3550)"));
        }
    }
}

/// blast's: the receiver's figures with --rx-iface, else the sender's claim.
fn blast(b: &crate::input::BlastDoc, out: &mut Vec<Figure>) {
    match &b.receiver {
        Some(r) => {
            out.push(Figure::new(
                FigureName::Throughput,
                r.bps_l2,
                "receiver's count, L2 (blast --rx-iface)",
            ));
            out.push(Figure::new(FigureName::Pps, r.pps, "receiver's count"));
            let lost = r.not_received.unwrap_or(r.lost);
            if let Some(l) = loss_pct(lost, r.packets) {
                out.push(Figure::new(
                    FigureName::Loss,
                    l,
                    "sent (sender's count) less received (receiver's)",
                ));
            }
            latency(out, r.latency_ns.as_ref(), 1e-3, "receiver, one-way");
        }
        None => {
            out.push(Figure::new(
                FigureName::Throughput,
                b.bps_l2,
                "sender's claim, L2 (frames the kernel accepted)",
            ));
            out.push(Figure::new(FigureName::Pps, b.pps, "sender's claim"));
        }
    }
}

/// Totals from a run's end rows (a stream of a mode without a typed
/// document): the receiver's rate where a receiver counted.
fn of_sums(sums: &[RunRow]) -> Vec<Figure> {
    let mut out = Vec::new();
    let pick = sums
        .iter()
        .find(|r| r.counted_by == "receiver")
        .or_else(|| sums.first());
    if let Some(r) = pick {
        let who = format!("{}'s count (run totals)", r.counted_by);
        if let Some(b) = r.bits_per_second {
            out.push(Figure::new(FigureName::Throughput, b, &who));
        }
        if let Some(p) = r.packets_per_second {
            out.push(Figure::new(FigureName::Pps, p, &who));
        }
    }
    out
}

/// Each run's headline figures: one run, or each run of a repetition
/// after its warm-up (a failed run left out).
pub fn runs(l: &Loaded) -> Vec<Vec<Figure>> {
    match &l.doc {
        Some(Doc::Repeat { runs, summary }) => runs
            .iter()
            .skip(summary.warmup_values.len())
            .filter_map(|r| r.as_ref().ok())
            .map(of_doc)
            .filter(|f| !f.is_empty())
            .collect(),
        Some(d) => {
            let f = of_doc(d);
            if f.is_empty() {
                l.end
                    .as_ref()
                    .map(|e| of_sums(&e.sums))
                    .into_iter()
                    .collect()
            } else {
                vec![f]
            }
        }
        None => l
            .end
            .as_ref()
            .map(|e| of_sums(&e.sums))
            .filter(|f| !f.is_empty())
            .into_iter()
            .collect(),
    }
}
