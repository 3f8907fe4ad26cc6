//! A sink's run judged: its blindness checks (the sender's end markers
//! counted but none of its frames; an af_packet sink behind another
//! receiver's XDP program that counted nothing), `--hist` written, and its
//! measure for the run model ([`sink_measured`]).

use super::SinkReport;
use crate::{HistWritten, SinkOutcome};
use linerate_run::Measured;
use serde_json::Value;
use std::sync::Arc;

/// A sink that counted no probe frame while the sender's end markers say
/// it sent some: it saw the markers, not the frames (another program
/// took them, or a filter): said, and the run fails.
pub fn blind(r: &SinkReport) -> Option<String> {
    let sent: u64 = r.counts.flows.values().filter_map(|f| f.sent_marker).sum();
    (sent > 0 && r.counts.flows.values().all(|f| f.seq.received() == 0)).then(|| {
        format!(
            "the sender's end markers say {sent} frames were sent and this sink counted none of them: something else takes them before it (another receiver's XDP program, a filter)"
        )
    })
}

/// Why an af_packet sink on `iface` may be blind: an XDP program is
/// attached there (another receiver's, whose AF_XDP socket takes the
/// frames before af_packet sees them).
pub fn xdp_holder(iface: &str, backend: &str) -> Option<String> {
    if backend != "af_packet" {
        return None;
    }
    let p = linerate_backend::rtnl::xdp_program(iface).ok().flatten()?;
    Some(format!(
        "an XDP program (id {}, {} mode) is attached to {iface}: an AF_XDP socket behind it (another receiver's) takes frames before af_packet sees them",
        p.id, p.mode
    ))
}

/// A sink that counted no frame at all while an XDP program held its
/// interface (`holder`): it was blind, not idle; the run fails.
pub fn held_elsewhere(r: &SinkReport, holder: Option<&str>) -> Option<String> {
    let h = holder?;
    (r.counts.flows.values().all(|f| f.seq.received() == 0)).then(|| {
        format!(
            "this sink counted nothing, and {h}: stop the other receiver, or receive with --backend af_xdp on a queue of its own"
        )
    })
}

/// `sink --hist`: the latency histogram log, written whole.
pub fn write_hist(r: &SinkReport, f: std::fs::File) -> Result<(), String> {
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
        - r.duration_s;
    let mut w = std::io::BufWriter::new(f);
    r.counts
        .write_histogram_log(&mut w, started, r.duration_s)
        .and_then(|()| std::io::Write::flush(&mut w))
        .and_then(|()| w.get_ref().sync_all())
        .map_err(|e| e.to_string())
}

/// A sink's measure: its rows per flow, the first reason the run fails
/// (the receiver's error, a capture or `--hist` not written, blindness),
/// its outcome. `holder`: what [`xdp_holder`] said when it started.
pub fn sink_measured(
    r: SinkReport,
    hist: Option<HistWritten>,
    holder: Option<&str>,
    doctor: Value,
    (iface, streams): (String, Vec<(String, u16)>),
) -> Measured {
    let hist_error = hist.as_ref().and_then(|(p, w)| {
        w.as_ref().err().map(|e| {
            format!(
                "--hist {}: {e} (the histograms were not saved)",
                p.display()
            )
        })
    });
    let rows = crate::flow_rows(&r.counts);
    // A capture that could not be written fails the run (the counts stand).
    let capture_error = r.capture.as_ref().and_then(|(_, frames, _, e)| {
        e.as_ref()
            .map(|e| format!("capture failed after {frames} frames: {e} (the counts are complete)"))
    });
    let error = r
        .error
        .as_ref()
        .map(|e| format!("{e} (the counts are what arrived before it)"))
        .or(capture_error)
        .or(hist_error)
        // An XDP program seen holding the interface at the start names the
        // cause (and the way out) where the end markers only say that
        // something took the frames: a holder that lets the markers
        // through (its receiver stopped at its count and detached before
        // they came) gives both.
        .or_else(|| held_elsewhere(&r, holder))
        .or_else(|| blind(&r));
    Measured {
        duration_s: r.duration_s,
        rows,
        error,
        outcome: Arc::new(SinkOutcome {
            report: r,
            doctor,
            iface,
            hist,
            streams,
        }),
    }
}

/// A sink given no time listens until stopped, a day at most.
pub const SINK_UNTIL_STOPPED_S: f64 = 86_400.0;

/// The sink's settings as its `Start` states them.
#[derive(Debug, serde::Serialize)]
pub struct SinkStart<'a> {
    pub iface: &'a str,
    pub duration_s: f64,
    pub count: Option<u64>,
    pub backend: crate::BackendKind,
    pub cores: &'a [usize],
    pub write: Option<&'a std::path::Path>,
}

/// The line a sink says on stderr once it counts (scripts start their
/// traffic on it): where, through which backend, and until when when no
/// time was given.
pub fn sink_ready_line(iface: &str, backend: &str, timed: bool, counted: bool) -> String {
    let until = match (timed, counted) {
        (true, _) => "",
        (false, true) => ", until --count or Ctrl-C",
        (false, false) => ", until Ctrl-C (-t sets a time)",
    };
    format!("linerate: sink receiving on {iface} ({backend}){until}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ready_line_says_until_when() {
        let line = super::sink_ready_line;
        assert_eq!(
            line("veth0", "af_packet", true, true),
            "linerate: sink receiving on veth0 (af_packet)"
        );
        assert_eq!(
            line("veth0", "af_xdp", false, true),
            "linerate: sink receiving on veth0 (af_xdp), until --count or Ctrl-C"
        );
        assert_eq!(
            line("veth0", "af_xdp", false, false),
            "linerate: sink receiving on veth0 (af_xdp), until Ctrl-C (-t sets a time)"
        );
    }
}
