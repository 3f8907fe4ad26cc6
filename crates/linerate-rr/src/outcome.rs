//! rr's typed outcomes: the server's (UDP and TCP) and the client's
//! reports, their `-J` documents and summaries written from the typed
//! figures, and the figure a repetition measures.

use crate::doc::{ClientDoc, ServerDoc, TcpServerDoc};
use crate::{ClientReport, Load, ServerReport, TcpServerReport};
use linerate_run::{Figure, Outcome};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// A server's or client's document with the doctor's summary after it
/// (a client that had no answer has none).
#[derive(Debug, Serialize)]
struct WithDoctor<'a, D> {
    #[serde(flatten)]
    report: D,
    #[serde(skip_serializing_if = "Option::is_none")]
    doctor: Option<&'a Value>,
}

fn with_doctor<D: Serialize>(report: D, doctor: Option<&Value>) -> Value {
    serde_json::to_value(WithDoctor { report, doctor }).unwrap_or_default()
}

/// An rr server run.
#[derive(Debug)]
pub struct RrServerOutcome {
    pub report: ServerReport,
    pub doctor: Value,
}

impl Outcome for RrServerOutcome {
    fn document(&self) -> Value {
        with_doctor(ServerDoc::of(&self.report), Some(&self.doctor))
    }

    fn text(&self) -> String {
        let r = &self.report;
        let t = &r.total;
        server_text(
            (t.requests, r.elapsed),
            &format!(
                "{} answered, {} malformed, {} over --max-response, {} reply errors",
                t.answered, t.malformed, t.too_large, t.reply_errors
            ),
            r.steering_note.iter().map(|n| format!("note: {n}")),
            &r.warnings,
        )
    }

    fn figure(&self) -> Option<Figure> {
        requests_figure(self.requests_per_s())
    }
}

impl RrServerOutcome {
    fn requests_per_s(&self) -> f64 {
        per_second(self.report.total.requests, self.report.elapsed)
    }
}

/// Requests received per second over a run (the server's count), either
/// transport.
fn per_second(requests: u64, elapsed: std::time::Duration) -> f64 {
    requests as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// An rr server's summary, either transport: its totals line (requests
/// and their rate, then `counts`), `lines`, its warnings.
fn server_text(
    (requests, elapsed): (u64, Duration),
    counts: &str,
    lines: impl Iterator<Item = String>,
    warnings: &[String],
) -> String {
    let mut text = format!(
        "total: {requests} requests in {:.2} s = {:.0}/s, {counts} (server count)\n",
        elapsed.as_secs_f64(),
        per_second(requests, elapsed),
    );
    for l in lines.chain(warnings.iter().map(|w| format!("warning: {w}"))) {
        text += &l;
        text.push('\n');
    }
    text
}

/// The figure a repetition of an rr server measures.
fn requests_figure(per_s: f64) -> Option<Figure> {
    Some(Figure {
        name: "requests_per_s",
        unit: "requests/s",
        value: per_s,
    })
}

/// An rr client run.
#[derive(Debug)]
pub struct RrClientOutcome {
    pub report: ClientReport,
    /// The doctor's summary (none when no answer came).
    pub doctor: Option<Value>,
    pub load: Load,
    pub timeout_ms: f64,
}

impl Outcome for RrClientOutcome {
    fn document(&self) -> Value {
        with_doctor(ClientDoc::of(&self.report), self.doctor.as_ref())
    }

    fn text(&self) -> String {
        match self.doctor {
            Some(_) => client_text(&self.report, self.load, self.timeout_ms),
            None => String::new(),
        }
    }

    /// Transactions completed per second (client's count).
    fn figure(&self) -> Option<Figure> {
        Some(Figure {
            name: "transactions_per_s",
            unit: "transactions/s",
            value: self.report.tps(),
        })
    }
}

/// The rr client's summary lines.
fn client_text(r: &ClientReport, load: Load, timeout_ms: f64) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let t = &r.total;
    let _ = writeln!(
        s,
        "total: {} transactions in {:.2} s = {:.0}/s (client count of matched responses)",
        t.completed,
        r.elapsed.as_secs_f64(),
        r.tps()
    );
    let _ = writeln!(
        s,
        "requests: {} sent, {} answered, {} lost (timeout {} ms); {} late, {} duplicate, {} unknown, {} malformed answers; {} ICMP errors",
        t.sent,
        t.completed,
        t.lost,
        timeout_ms,
        t.late,
        t.duplicate,
        t.unknown,
        t.malformed,
        t.refused
    );
    let us = |ns: u64| ns as f64 / 1e3;
    if let Some(tcp) = &r.tcp {
        let _ = writeln!(
            s,
            "connections: {} attempted, {} connect errors (refused, failed or over {} ms), {} reset or closed by the server, {} made again",
            t.connects,
            t.connect_errors,
            tcp.connect_timeout.as_secs_f64() * 1e3,
            t.resets,
            t.reconnects
        );
    }
    if let Some(l) = &r.latency {
        let _ = writeln!(
            s,
            "latency (us, {}): min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}",
            match load {
                Load::Closed { .. } => "send to receipt",
                Load::Open { .. } => "scheduled send to receipt",
            },
            us(l.min),
            us(l.p50),
            us(l.p90),
            us(l.p99),
            us(l.p999),
            us(l.p9999),
            us(l.max)
        );
    }
    if let Some(l) = &r.send_lag {
        let _ = writeln!(
            s,
            "send lag (us, how late requests left against the schedule): p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
            us(l.p50),
            us(l.p99),
            us(l.p999),
            us(l.max)
        );
    }
    if r.interrupted {
        let _ = writeln!(s, "interrupted: figures cover the time until the signal");
    }
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}

/// An rr server run over TCP.
#[derive(Debug)]
pub struct RrTcpServerOutcome {
    pub report: TcpServerReport,
    pub doctor: Value,
}

impl Outcome for RrTcpServerOutcome {
    fn document(&self) -> Value {
        with_doctor(TcpServerDoc::of(&self.report), Some(&self.doctor))
    }

    fn text(&self) -> String {
        let r = &self.report;
        let t = &r.total;
        let connections = format!(
            "connections: {} accepted, {} closed, {} reset, {} idle, {} refused over --max-conns, {} over --max-per-source, {} accept errors",
            t.accepted,
            t.closed,
            t.resets,
            t.idle_closed,
            t.refused_total,
            t.refused_source,
            t.accept_errors
        );
        server_text(
            (t.requests, r.elapsed),
            &format!(
                "{} answered, {} malformed, {} oversized, {} over --max-response",
                t.answered, t.malformed, t.oversized, t.too_large
            ),
            std::iter::once(connections),
            &r.warnings,
        )
    }

    fn figure(&self) -> Option<Figure> {
        requests_figure(self.requests_per_s())
    }
}

impl RrTcpServerOutcome {
    fn requests_per_s(&self) -> f64 {
        per_second(self.report.total.requests, self.report.elapsed)
    }
}

#[cfg(test)]
#[path = "outcome_tests.rs"]
mod tests;
