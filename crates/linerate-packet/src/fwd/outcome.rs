//! fwd's typed outcome: the forwarder's report, its `-J` document and
//! summary written from the typed figures.

use crate::{FwdCounts, FwdReport};
use linerate_run::{Figure, Interval, Outcome};
use serde::Serialize;
use serde_json::Value;

/// fwd's settings as its `Start` states them: the flags as given.
#[derive(Debug, Serialize)]
pub struct FwdStart<'a> {
    pub iface: &'a str,
    pub out_iface: Option<&'a str>,
    pub mode: &'a str,
    pub backend: crate::BackendKind,
    pub duration_s: f64,
    pub count: Option<u64>,
    pub cores: &'a [usize],
    pub fifo: usize,
    pub flush_us: u64,
}

impl FwdOutcome {
    /// A forwarder's run as the run model takes it: its rows, its error
    /// (the counts before it stand) and this outcome.
    pub fn measured(report: FwdReport, doctor: Value, fifo: bool) -> linerate_run::Measured {
        let error = (report.error.as_ref())
            .map(|e| format!("{e} (the counts are what was forwarded before it)"));
        linerate_run::Measured {
            duration_s: report.duration_s,
            rows: report.rows(),
            error,
            outcome: std::sync::Arc::new(FwdOutcome {
                report,
                doctor,
                fifo,
            }),
        }
    }
}

/// fwd's document (forwarder's count).
#[derive(Debug, Serialize)]
pub(super) struct FwdDoc<'a> {
    role: &'static str,
    mode: &'static str,
    rx_iface: &'a str,
    tx_iface: &'a str,
    rx_backend: &'static str,
    tx_backend: &'static str,
    backend_notes: &'a [String],
    counted_by: &'static str,
    counts: &'a FwdCounts,
    kernel_drops: u64,
    duration_s: f64,
    rx_pps: f64,
    tx_pps: f64,
    intervals: &'a [Interval],
    noisy: NoisyDoc,
    mem_sum: u64,
    workers: &'a [FwdCounts],
    error: &'a Option<String>,
}

/// The loaded-server simulation asked for.
#[derive(Debug, Serialize)]
struct NoisyDoc {
    fifo_frames: usize,
    flush_us: u64,
    mem_bytes: usize,
    reads_per_frame: u32,
    writes_per_frame: u32,
    read_writes_per_frame: u32,
}

impl<'a> FwdDoc<'a> {
    pub(super) fn of(r: &'a FwdReport) -> Self {
        let n = &r.noisy;
        FwdDoc {
            role: "fwd",
            mode: r.mode.name(),
            rx_iface: &r.rx_iface,
            tx_iface: &r.tx_iface,
            rx_backend: r.rx_backend,
            tx_backend: r.tx_backend,
            backend_notes: &r.notes,
            counted_by: "forwarder: frames its receiving socket took and its sending backend accepted",
            counts: &r.counts,
            kernel_drops: r.kernel_drops,
            duration_s: r.duration_s,
            rx_pps: r.counts.rx as f64 / r.duration_s.max(1e-9),
            tx_pps: r.counts.tx as f64 / r.duration_s.max(1e-9),
            intervals: &r.intervals,
            noisy: NoisyDoc {
                fifo_frames: n.fifo,
                flush_us: n.flush.as_micros() as u64,
                mem_bytes: n.mem_bytes,
                reads_per_frame: n.reads,
                writes_per_frame: n.writes,
                read_writes_per_frame: n.read_writes,
            },
            mem_sum: r.mem_sum,
            workers: &r.workers,
            error: &r.error,
        }
    }
}

/// fwd's `-J`: its document and the doctor's summary.
#[derive(Debug, Serialize)]
struct FwdOutcomeDoc<'a> {
    #[serde(flatten)]
    report: FwdDoc<'a>,
    doctor: &'a Value,
}

/// A fwd run: the forwarder's report.
#[derive(Debug)]
pub struct FwdOutcome {
    pub report: FwdReport,
    pub doctor: Value,
    /// A FIFO was asked for (its peak is shown).
    pub fifo: bool,
}

impl Outcome for FwdOutcome {
    fn document(&self) -> Value {
        serde_json::to_value(FwdOutcomeDoc {
            report: FwdDoc::of(&self.report),
            doctor: &self.doctor,
        })
        .unwrap_or_default()
    }

    fn text(&self) -> String {
        let r = &self.report;
        let c = &r.counts;
        let mut text = format!(
            "{}: {} frames received on {} ({}), {} sent on {} ({}), {} dropped (sender full), {} too long, {} not IP{} in {:.3} s (forwarder's count); kernel drops {}\n",
            r.mode.name(),
            c.rx,
            r.rx_iface,
            r.rx_backend,
            c.tx,
            r.tx_iface,
            r.tx_backend,
            c.tx_dropped,
            c.too_long,
            c.not_ip,
            if self.fifo {
                format!(", FIFO peak {}", c.fifo_peak)
            } else {
                String::new()
            },
            r.duration_s,
            r.kernel_drops
        );
        for n in &r.notes {
            text += &format!("backend: {n}\n");
        }
        text
    }

    /// Frames forwarded per second (sent on the out port).
    fn figure(&self) -> Option<Figure> {
        Some(Figure {
            name: "forwarded pps",
            unit: "frames/s",
            value: self.report.counts.tx as f64 / self.report.duration_s.max(1e-9),
        })
    }
}
