//! fwd's typed outcome: the forwarder's report, its `-J` document and
//! summary written from the typed figures.

use crate::FwdReport;
use linerate_run::{Figure, Outcome};

/// A fwd run: the forwarder's report.
#[derive(Debug)]
pub struct FwdOutcome {
    pub report: FwdReport,
    pub doctor: serde_json::Value,
    /// A FIFO was asked for (its peak is shown).
    pub fifo: bool,
}

impl Outcome for FwdOutcome {
    fn document(&self) -> serde_json::Value {
        let mut v = self.report.json();
        v["doctor"] = self.doctor.clone();
        v
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
