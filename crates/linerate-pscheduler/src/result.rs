//! The throughput result (pscheduler-test-throughput's result schema) from
//! a test's iperf3 document, read typed (the keys pscheduler-tool-iperf3's
//! iperf3_parser renames, nothing else), and merged-results.
//!
//! Numbers stay `serde_json::Number`s: a figure iperf3 writes as an
//! integer (`"start": 0`) is an integer in the result, as the iperf3 tool
//! passes it on.

use crate::error::Error;
use serde::{Deserialize, Serialize};
use serde_json::Number;

/// One object of an iperf3 document: an interval's stream or sum, an
/// end's sum or stream side, with the keys the result takes.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct DocFigures {
    socket: Option<Number>,
    start: Option<Number>,
    end: Option<Number>,
    bytes: Option<Number>,
    bits_per_second: Option<Number>,
    omitted: Option<bool>,
    jitter_ms: Option<Number>,
    packets: Option<Number>,
    lost_packets: Option<Number>,
    retransmits: Option<Number>,
    snd_cwnd: Option<Number>,
    rtt: Option<Number>,
    mean_rtt: Option<Number>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct DocInterval {
    #[serde(default)]
    streams: Vec<DocFigures>,
    #[serde(default)]
    sum: DocFigures,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct DocEndStream {
    udp: Option<DocFigures>,
    sender: Option<DocFigures>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct DocEnd {
    #[serde(default)]
    streams: Vec<DocEndStream>,
    sum_sent: Option<DocFigures>,
    sum: Option<DocFigures>,
    sum_received: Option<DocFigures>,
}

/// What the result takes of an iperf3 `-J` document.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Iperf3Doc {
    intervals: Option<Vec<DocInterval>>,
    end: Option<DocEnd>,
    error: Option<String>,
}

/// Figures as the throughput result names them (iperf3_parser.rename_json).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Figures {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bytes: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throughput_bits: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omitted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_window_size: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receiver_throughput_bits: Option<Number>,
}

impl From<&DocFigures> for Figures {
    fn from(d: &DocFigures) -> Self {
        Figures {
            stream_id: d.socket.clone(),
            start: d.start.clone(),
            end: d.end.clone(),
            throughput_bytes: d.bytes.clone(),
            throughput_bits: d.bits_per_second.clone(),
            omitted: d.omitted,
            jitter: d.jitter_ms.clone(),
            sent: d.packets.clone(),
            lost: d.lost_packets.clone(),
            retransmits: d.retransmits.clone(),
            tcp_window_size: d.snd_cwnd.clone(),
            // rename_json maps both; an end stream has only mean_rtt.
            rtt: d.rtt.clone().or_else(|| d.mean_rtt.clone()),
            receiver_throughput_bits: None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalResult {
    pub streams: Vec<Figures>,
    pub summary: Figures,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub streams: Vec<Figures>,
    pub summary: Figures,
}

/// A participant's throughput result, and the merged one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThroughputResult {
    /// Absent: not succeeded.
    #[serde(default)]
    pub succeeded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diags: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intervals: Option<Vec<IntervalResult>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
}

impl ThroughputResult {
    pub fn failed(error: impl Into<String>, diags: impl Into<String>) -> Self {
        ThroughputResult {
            succeeded: false,
            error: Some(error.into()),
            diags: Some(diags.into()),
            ..Default::default()
        }
    }

    fn summary_figures(&self) -> Option<&Figures> {
        self.summary.as_ref().map(|s| &s.summary)
    }
}

/// The result of a document (iperf3_parser.parse_output): intervals
/// renamed; the summary from sum_sent (else sum) with the receiver's
/// bits/s, and for UDP the receiver's jitter and loss (the sender's sum
/// carries none, where the iperf3 tool leaves them out); the streams' end
/// figures.
pub fn from_document(doc: &Iperf3Doc) -> Result<ThroughputResult, String> {
    if let Some(e) = &doc.error {
        return Err(format!("linerate failed: {e}"));
    }
    let intervals = doc
        .intervals
        .as_ref()
        .ok_or("linerate's output has no 'intervals'")?;
    let end = doc.end.as_ref().ok_or("linerate's output has no 'end'")?;
    let intervals = intervals
        .iter()
        .map(|iv| IntervalResult {
            streams: iv.streams.iter().map(Figures::from).collect(),
            summary: Figures::from(&iv.sum),
        })
        .collect();
    let sum = end
        .sum_sent
        .as_ref()
        .or(end.sum.as_ref())
        .ok_or("linerate's output has neither 'sum_sent' nor 'sum'")?;
    let mut summary = Figures::from(sum);
    if let Some(rcv) = &end.sum_received {
        summary.receiver_throughput_bits = rcv.bits_per_second.clone();
        if summary.sent.is_some() {
            summary.jitter = rcv.jitter_ms.clone().or(summary.jitter);
            summary.lost = rcv.lost_packets.clone().or(summary.lost);
        }
    }
    let streams = end
        .streams
        .iter()
        .filter_map(|s| s.udp.as_ref().or(s.sender.as_ref()).map(Figures::from))
        .collect();
    Ok(ThroughputResult {
        succeeded: true,
        error: None,
        diags: None,
        intervals: Some(intervals),
        summary: Some(Summary { streams, summary }),
    })
}

/// merged-results of a throughput test, as pscheduler-tool-iperf3's: the
/// source's result, with `reverse` the destination's (the sender: its
/// intervals and TCP figures) with the source's receiver figures. A run
/// is a measurement only when the side it is taken from succeeded and,
/// reversed, the side that gave the receiver's figures too: anything
/// else is `succeeded: false` with the reason, never a figure of a side
/// that did not measure. diags: each participant's.
pub fn merge(
    reverse: bool,
    alone: bool,
    results: &[Option<ThroughputResult>],
) -> Result<ThroughputResult, Error> {
    if !(results.len() == 2 || (results.len() == 1 && alone)) {
        return Err(crate::error::bad(
            "results",
            format!(
                "expected 2 results in merged-results, got {}",
                results.len()
            ),
        ));
    }
    let source = results[0].as_ref();
    let dest = if alone { None } else { results[1].as_ref() };
    let gave = |r: Option<&ThroughputResult>, who: &str| -> Result<ThroughputResult, String> {
        match r {
            None => Err(format!("{who} gave no result")),
            Some(r) if !r.succeeded => Err(format!(
                "{who} failed: {}",
                r.error.as_deref().unwrap_or("no error given")
            )),
            Some(r) => Ok(r.clone()),
        }
    };
    let merged = if reverse && !alone {
        gave(dest, "participant 1 (the sender)").and_then(|mut d| {
            let s = gave(source, "participant 0 (the receiver)")?;
            if let (Some(from), Some(to)) = (s.summary_figures(), d.summary.as_mut()) {
                let to = &mut to.summary;
                to.receiver_throughput_bits = from.receiver_throughput_bits.clone();
                to.jitter = from.jitter.clone().or(to.jitter.take());
                to.lost = from.lost.clone().or(to.lost.take());
            }
            Ok(d)
        })
    } else {
        gave(source, "participant 0 (the sender)")
    };
    let mut out = merged.unwrap_or_else(|e| ThroughputResult::failed(e, ""));
    let mut diags = String::new();
    for (i, r) in [source, dest].into_iter().enumerate() {
        if let Some(d) = r.and_then(|r| r.diags.as_deref()).filter(|d| !d.is_empty()) {
            diags += &format!("Participant {i}:\n{d}\n");
        }
    }
    out.diags = Some(diags);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(bits: f64, rcv: f64) -> ThroughputResult {
        serde_json::from_value(json!({
            "succeeded": true,
            "diags": "ran",
            "intervals": [],
            "summary": { "streams": [], "summary": {
                "throughput-bits": bits, "receiver-throughput-bits": rcv
            } }
        }))
        .unwrap()
    }

    #[test]
    fn a_failed_side_is_never_a_measurement() {
        // Issue 40: [participant 0 failed, participant 1 ok], TCP.
        let failed = ThroughputResult::failed("linerate returned an error: refused", "c");
        let server = ok(0.0, 9e8);
        for reverse in [false, true] {
            let m = merge(
                reverse,
                false,
                &[Some(failed.clone()), Some(server.clone())],
            )
            .unwrap();
            assert!(!m.succeeded, "reverse {reverse}: {m:?}");
            assert_eq!(m.summary, None);
            let e = m.error.unwrap();
            assert!(e.starts_with("participant 0 ("), "{e}");
            assert!(
                e.ends_with("failed: linerate returned an error: refused"),
                "{e}"
            );
            assert_eq!(
                m.diags.as_deref(),
                Some("Participant 0:\nc\nParticipant 1:\nran\n")
            );
        }
        // Reversed and the sender failed or gave nothing.
        for dest in [Some(failed.clone()), None] {
            let m = merge(true, false, &[Some(ok(1.0, 2.0)), dest]).unwrap();
            assert!(!m.succeeded);
            assert!(m.error.unwrap().starts_with("participant 1 (the sender)"));
        }
        // Both measured: reversed, the sender's with the receiver's rate.
        let m = merge(true, false, &[Some(ok(1.0, 2.0)), Some(ok(3.0, 4.0))]).unwrap();
        assert!(m.succeeded);
        let s = m.summary.unwrap().summary;
        assert_eq!(s.throughput_bits, Number::from_f64(3.0));
        assert_eq!(s.receiver_throughput_bits, Number::from_f64(2.0));
        let m = merge(false, false, &[Some(ok(1.0, 2.0)), Some(ok(3.0, 4.0))]).unwrap();
        assert_eq!(
            m.summary.unwrap().summary.throughput_bits,
            Number::from_f64(1.0)
        );
        assert!(merge(false, false, &[Some(ok(1.0, 2.0))]).is_err());
        assert!(merge(false, true, &[Some(ok(1.0, 2.0))]).unwrap().succeeded);
    }

    #[test]
    fn a_document_read_as_the_iperf3_tool_reads_it() {
        let doc: Iperf3Doc = serde_json::from_value(json!({
            "start": { "system_info": "Linux" },
            "intervals": [{
                "streams": [{ "socket": 5, "start": 0, "end": 1.0, "bytes": 10,
                    "bits_per_second": 80.0, "packets": 2, "omitted": false, "other": 1 }],
                "sum": { "start": 0, "end": 1.0, "bytes": 10, "bits_per_second": 80.0,
                    "packets": 2, "omitted": false }
            }],
            "end": {
                "streams": [{ "udp": { "socket": 5, "bytes": 10, "jitter_ms": 0.5,
                    "lost_packets": 1, "packets": 2 } }],
                "sum_sent": { "bytes": 10, "bits_per_second": 80.0, "packets": 2 },
                "sum_received": { "bytes": 9, "bits_per_second": 72.0,
                    "jitter_ms": 0.5, "lost_packets": 1, "packets": 2 }
            }
        }))
        .unwrap();
        let r = serde_json::to_value(from_document(&doc).unwrap()).unwrap();
        assert_eq!(
            r,
            json!({
                "succeeded": true,
                "intervals": [{
                    "streams": [{ "stream-id": 5, "start": 0, "end": 1.0,
                        "throughput-bytes": 10, "throughput-bits": 80.0,
                        "omitted": false, "sent": 2 }],
                    "summary": { "start": 0, "end": 1.0, "throughput-bytes": 10,
                        "throughput-bits": 80.0, "omitted": false, "sent": 2 }
                }],
                "summary": {
                    "streams": [{ "stream-id": 5, "throughput-bytes": 10,
                        "jitter": 0.5, "sent": 2, "lost": 1 }],
                    "summary": { "throughput-bytes": 10, "throughput-bits": 80.0,
                        "sent": 2, "jitter": 0.5, "lost": 1,
                        "receiver-throughput-bits": 72.0 }
                }
            })
        );
        let failed: Iperf3Doc = serde_json::from_value(json!({ "error": "refused" })).unwrap();
        assert_eq!(
            from_document(&failed),
            Err("linerate failed: refused".into())
        );
    }
}
