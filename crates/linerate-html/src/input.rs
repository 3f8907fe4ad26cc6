//! Results read into typed documents: each mode's `-J` (its typed subset:
//! the figures a report shows, every field optional where the mode may
//! leave it out), a `--repeat` document, an RFC 2544 campaign, or a
//! `--json-stream` file (run-model events; iperf3's events).
//!
//! A damaged file is read as far as it goes: a JSON lines file cut in the
//! middle keeps its rows up to the cut and says where it was cut; an
//! unknown kind of document is refused with what it looked like.

use crate::rfc2544::Rfc2544Doc;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// A run-model row (`scope`, `id`, `role`, counts, gauges, rates).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RunRow {
    pub scope: String,
    pub id: Value,
    pub role: String,
    pub counted_by: String,
    pub bytes: Option<u64>,
    pub packets: Option<u64>,
    pub lost: Option<u64>,
    pub reordered: Option<u64>,
    pub duplicates: Option<u64>,
    pub errors: Option<u64>,
    pub retransmits: Option<u64>,
    pub latency_p50_ns: Option<f64>,
    pub latency_p99_ns: Option<f64>,
    pub latency_max_ns: Option<f64>,
    pub jitter_ms: Option<f64>,
    pub bits_per_second: Option<f64>,
    pub packets_per_second: Option<f64>,
}

impl RunRow {
    /// The row's id as text (`"3"`, `"sum"`).
    pub fn id_text(&self) -> String {
        match &self.id {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            v => v.to_string(),
        }
    }
}

/// A run-model interval.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RunInterval {
    pub start: f64,
    pub end: f64,
    pub omitted: bool,
    pub rows: Vec<RunRow>,
    pub sums: Vec<RunRow>,
}

/// The host a run was on (`start.host`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: String,
    pub cpus: u64,
    pub linerate: String,
    pub timestamp: f64,
    /// The command line that ran it (absent in results before it was kept).
    pub command: Vec<String>,
}

/// A run-model `start` event.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamStart {
    pub mode: String,
    pub config: Value,
    pub doctor: Option<Value>,
    pub host: Option<HostFacts>,
}

/// A run-model `end` event: totals and the mode's `-J` document.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StreamEnd {
    pub duration_s: f64,
    pub rows: Vec<RunRow>,
    pub sums: Vec<RunRow>,
    pub result: Value,
}

/// Latency percentiles in ns (the sink's `latency_ns`).
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct Percentiles {
    pub min: Option<f64>,
    pub mean: Option<f64>,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    #[serde(alias = "p99.9")]
    pub p999: Option<f64>,
    #[serde(rename = "p99.99")]
    pub p9999: Option<f64>,
    pub max: Option<f64>,
}

impl Percentiles {
    /// (name, value) of those present, in order.
    pub fn present(&self) -> Vec<(&'static str, f64)> {
        [
            ("min", self.min),
            ("mean", self.mean),
            ("p50", self.p50),
            ("p90", self.p90),
            ("p99", self.p99),
            ("p99.9", self.p999),
            ("p99.99", self.p9999),
            ("max", self.max),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
    }
}

/// One flow as the sink counted it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SinkFlow {
    pub flow: Value,
    pub packets: u64,
    pub bytes: u64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub jitter_ns: Option<f64>,
    pub latency_ns: Option<Percentiles>,
}

/// `sink -J` (and blast's `receiver`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SinkDoc {
    pub backend: String,
    pub iface: Option<String>,
    pub counted_by: String,
    pub packets: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub pps: f64,
    pub bps_l1: f64,
    pub bps_l2: f64,
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    pub not_received: Option<u64>,
    pub latency_ns: Option<Percentiles>,
    pub latency_clock: String,
    pub intervals: Vec<RunInterval>,
    pub flows: Vec<SinkFlow>,
    pub error: Option<String>,
}

/// `blast -J`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct BlastDoc {
    pub backend: String,
    pub counted_by: String,
    pub packets: u64,
    pub bytes: u64,
    pub duration_s: f64,
    pub pps: f64,
    pub bps_l1: f64,
    pub bps_l2: f64,
    pub send_calls: u64,
    pub send_errors: u64,
    pub flows: u64,
    pub workers: Value,
    pub intervals: Vec<RunInterval>,
    pub receiver: Option<Box<SinkDoc>>,
}

/// fwd's counts.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct FwdCounts {
    pub rx: u64,
    pub tx: u64,
    pub tx_dropped: u64,
}

/// `fwd -J`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct FwdDoc {
    pub mode: String,
    pub rx_iface: String,
    pub tx_iface: String,
    pub rx_backend: String,
    pub tx_backend: String,
    pub counted_by: String,
    pub counts: FwdCounts,
    pub duration_s: f64,
    pub rx_pps: f64,
    pub tx_pps: f64,
    pub intervals: Vec<RunInterval>,
    pub error: Option<String>,
}

/// One rr client interval.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RrInterval {
    pub start: f64,
    pub end: f64,
    pub completed: u64,
    pub transactions_per_s: f64,
    pub lost: u64,
    pub latency_us: Option<Percentiles>,
}

/// `rr client -J`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RrClientDoc {
    pub server: String,
    pub mode: String,
    pub transport: String,
    pub flows: u64,
    pub duration_s: f64,
    pub counted_by: String,
    pub counts: Value,
    pub transactions_per_s: f64,
    pub latency_us: Option<Percentiles>,
    pub intervals: Vec<RrInterval>,
    pub warnings: Vec<String>,
}

/// iperf3's sum or stream figures.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IperfSum {
    pub socket: Option<i64>,
    pub start: f64,
    pub end: f64,
    pub seconds: f64,
    pub bytes: u64,
    pub bits_per_second: f64,
    pub retransmits: Option<u64>,
    pub jitter_ms: Option<f64>,
    pub lost_packets: Option<u64>,
    pub packets: Option<u64>,
    pub lost_percent: Option<f64>,
    pub sender: Option<bool>,
    pub rtt: Option<f64>,
}

/// One iperf3 interval.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IperfInterval {
    pub streams: Vec<IperfSum>,
    pub sum: IperfSum,
    pub sum_bidir_reverse: Option<IperfSum>,
}

/// One stream of iperf3's `end`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IperfEndStream {
    pub sender: Option<IperfSum>,
    pub receiver: Option<IperfSum>,
    pub udp: Option<IperfSum>,
}

/// iperf3's `end`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IperfEnd {
    pub streams: Vec<IperfEndStream>,
    pub sum_sent: Option<IperfSum>,
    pub sum_received: Option<IperfSum>,
    pub sum: Option<IperfSum>,
}

/// iperf3's `start.test_start`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IperfTestStart {
    pub protocol: String,
    pub num_streams: u64,
    pub duration: f64,
    pub reverse: i64,
    pub bidir: i64,
    pub blksize: u64,
}

/// iperf3's `start`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IperfStart {
    pub version: String,
    pub system_info: String,
    pub connected: Vec<Value>,
    pub connecting_to: Option<Value>,
    pub test_start: IperfTestStart,
}

/// An iperf3-compatible `-J` document (client or server).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct IperfDoc {
    pub start: IperfStart,
    pub intervals: Vec<IperfInterval>,
    pub end: IperfEnd,
    pub error: Option<String>,
}

/// The statistics of a repetition.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct RepeatStats {
    pub n: u64,
    pub mean: f64,
    pub stdev: f64,
    pub low: f64,
    pub high: f64,
    pub half_width_ratio: f64,
}

/// `--repeat`'s `repeat` object.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct RepeatSummary {
    pub figure: String,
    pub values: Vec<f64>,
    pub warmup_values: Vec<f64>,
    pub statistics: Option<RepeatStats>,
    pub confidence: f64,
    pub stop: Value,
}

/// A mode's result document, typed by its kind.
#[derive(Debug, Clone)]
pub enum Doc {
    Iperf(Box<IperfDoc>),
    Blast(Box<BlastDoc>),
    Sink(Box<SinkDoc>),
    Fwd(Box<FwdDoc>),
    RrClient(Box<RrClientDoc>),
    Rfc2544(Box<Rfc2544Doc>),
    /// Each run's document (a failed run: its error) and the summary.
    Repeat {
        runs: Vec<Result<Doc, String>>,
        summary: RepeatSummary,
    },
    /// A result of a mode this reader has no typed form of (rr server,
    /// agent): its top-level numbers are shown as they are.
    Other {
        role: String,
        doc: Value,
    },
}

/// Why a result could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: empty")]
    Empty { path: String },
    #[error("{path}: not a linerate or iperf3 result ({why})")]
    Unknown { path: String, why: String },
}

/// One result file, read.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// Its name as given.
    pub path: String,
    /// Its text (the plots read it again through `linerate-plot`).
    pub text: String,
    /// A `--json-stream` file's start event.
    pub start: Option<StreamStart>,
    /// The host the run was on: a stream's `start.host`, or a native
    /// mode's `-J` document's `host`.
    pub host: Option<HostFacts>,
    /// A `--json-stream` file's intervals (run-model ones).
    pub intervals: Vec<RunInterval>,
    /// A `--json-stream` file's totals.
    pub end: Option<StreamEnd>,
    /// The mode's document (a stream's `end.result`), where there is one.
    pub doc: Option<Doc>,
    /// The run's error (`error` event, or the document's `error`).
    pub error: Option<String>,
    /// What the reader had to say (a cut file, lines skipped).
    pub notes: Vec<String>,
}

impl Doc {
    /// Types a `-J` document by its keys.
    pub fn read(v: &Value) -> Result<Doc, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| "a JSON value that is not an object".to_string())?;
        let typed = |r: Result<Doc, serde_json::Error>| r.map_err(|e| e.to_string());
        let role = obj.get("role").and_then(Value::as_str).unwrap_or("");
        if let (Some(Value::Array(runs)), Some(rep)) = (obj.get("runs"), obj.get("repeat")) {
            let summary: RepeatSummary =
                serde_json::from_value(rep.clone()).map_err(|e| e.to_string())?;
            let runs = runs
                .iter()
                .map(|r| match r.get("error").and_then(Value::as_str) {
                    Some(e) if r.as_object().is_some_and(|o| o.len() == 1) => Err(e.to_string()),
                    _ => Doc::read(r),
                })
                .collect();
            return Ok(Doc::Repeat { runs, summary });
        }
        if ["throughput", "latency", "frame_loss", "back_to_back"]
            .iter()
            .any(|k| obj.get(*k).is_some_and(Value::is_array))
        {
            return typed(serde_json::from_value(v.clone()).map(|d| Doc::Rfc2544(Box::new(d))));
        }
        if obj
            .get("start")
            .is_some_and(|s| s.get("connected").is_some())
            || obj.get("end").is_some_and(|e| e.get("sum_sent").is_some())
        {
            return typed(serde_json::from_value(v.clone()).map(|d| Doc::Iperf(Box::new(d))));
        }
        match role {
            "blast" => typed(serde_json::from_value(v.clone()).map(|d| Doc::Blast(Box::new(d)))),
            "sink" => typed(serde_json::from_value(v.clone()).map(|d| Doc::Sink(Box::new(d)))),
            "fwd" => typed(serde_json::from_value(v.clone()).map(|d| Doc::Fwd(Box::new(d)))),
            _ if obj.contains_key("transactions_per_s") => {
                typed(serde_json::from_value(v.clone()).map(|d| Doc::RrClient(Box::new(d))))
            }
            _ if obj.contains_key("counted_by") || obj.contains_key("intervals") => {
                Ok(Doc::Other {
                    role: if role.is_empty() {
                        "result".into()
                    } else {
                        role.into()
                    },
                    doc: v.clone(),
                })
            }
            _ => {
                let keys: Vec<&str> = obj.keys().take(6).map(String::as_str).collect();
                Err(format!("a document with keys {keys:?}"))
            }
        }
    }

    /// The mode's name as a report says it.
    pub fn mode(&self) -> &str {
        match self {
            Doc::Iperf(_) => "iperf3",
            Doc::Blast(_) => "blast",
            Doc::Sink(_) => "sink",
            Doc::Fwd(_) => "fwd",
            Doc::RrClient(_) => "rr client",
            Doc::Rfc2544(_) => "rfc2544",
            Doc::Repeat { .. } => "repetition",
            Doc::Other { role, .. } => role,
        }
    }
}

impl Loaded {
    /// Reads `path` (a `-J` document or a `--json-stream` file).
    pub fn read(path: &Path) -> Result<Loaded, ReadError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ReadError::Io {
            path: name.clone(),
            source,
        })?;
        Loaded::parse(&name, text)
    }

    /// Reads a result's text, named `path`.
    pub fn parse(path: &str, text: String) -> Result<Loaded, ReadError> {
        let mut l = Loaded {
            path: path.to_string(),
            text: String::new(),
            start: None,
            host: None,
            intervals: Vec::new(),
            end: None,
            doc: None,
            error: None,
            notes: Vec::new(),
        };
        if text.trim().is_empty() {
            return Err(ReadError::Empty { path: l.path });
        }
        let unknown = |why: String| ReadError::Unknown {
            path: path.to_string(),
            why,
        };
        match serde_json::from_str::<Value>(&text) {
            // A stream of one event is a stream.
            Ok(v) if v.get("event").is_none() => {
                let doc = Doc::read(&v).map_err(unknown)?;
                l.error = v.get("error").and_then(Value::as_str).map(str::to_string);
                l.host = v
                    .get("host")
                    .and_then(|h| serde_json::from_value(h.clone()).ok());
                l.doc = Some(doc);
            }
            _ => l.read_lines(&text).map_err(unknown)?,
        }
        l.text = text;
        Ok(l)
    }

    /// A `--json-stream` file: events up to the first line that is not
    /// one (the rest said to be cut).
    fn read_lines(&mut self, text: &str) -> Result<(), String> {
        let lines: Vec<(usize, &str)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .collect();
        for (events, (i, line)) in lines.iter().enumerate() {
            let ev = match serde_json::from_str::<Value>(line) {
                Ok(ev) if ev.get("event").is_some() => ev,
                _ if events == 0 => {
                    return Err(format!(
                        "line {} is neither a JSON document nor an event",
                        i + 1
                    ));
                }
                _ => {
                    self.notes.push(format!(
                        "the file is cut at line {} (not a whole event): what came before it is reported",
                        i + 1
                    ));
                    break;
                }
            };
            self.event(&ev);
        }
        if self.end.is_none() && self.doc.is_none() && self.notes.is_empty() {
            self.notes
                .push("no end event: the run's totals and result are missing".into());
        }
        Ok(())
    }

    fn event(&mut self, ev: &Value) {
        let data = ev.get("data").cloned().unwrap_or(Value::Null);
        match ev["event"].as_str().unwrap_or("") {
            "start" if data.get("mode").is_some() => {
                self.start = serde_json::from_value::<StreamStart>(data).ok();
                self.host = self.start.as_ref().and_then(|s| s.host.clone());
            }
            "interval" if data.get("rows").is_some() => match serde_json::from_value(data) {
                Ok(iv) => self.intervals.push(iv),
                Err(e) => self.notes.push(format!("an interval left out: {e}")),
            },
            "error" => {
                self.error = Some(match data {
                    Value::String(s) => s,
                    v => v.to_string(),
                });
            }
            "end" if data.get("result").is_some() => {
                let end: StreamEnd = serde_json::from_value(data).unwrap_or_default();
                match Doc::read(&end.result) {
                    Ok(d) => self.doc = Some(d),
                    Err(e) if !end.result.is_null() => {
                        self.notes.push(format!("the end's result not read: {e}"));
                    }
                    Err(_) => {}
                }
                self.end = Some(end);
            }
            // iperf3's own events: the document is its `end`.
            "end" => {
                if let Ok(d) = serde_json::from_value::<IperfEnd>(data) {
                    self.doc = Some(Doc::Iperf(Box::new(IperfDoc {
                        end: d,
                        ..IperfDoc::default()
                    })));
                }
            }
            _ => {}
        }
    }

    /// The mode: the stream's start, else the document's kind.
    pub fn mode(&self) -> String {
        match (&self.start, &self.doc) {
            (Some(s), _) if !s.mode.is_empty() => s.mode.clone(),
            (_, Some(d)) => d.mode().to_string(),
            _ => "unknown".into(),
        }
    }

    /// The run-model intervals: the stream's, else the document's.
    pub fn run_intervals(&self) -> &[RunInterval] {
        if !self.intervals.is_empty() {
            return &self.intervals;
        }
        match &self.doc {
            Some(Doc::Blast(b)) => &b.intervals,
            Some(Doc::Sink(s)) => &s.intervals,
            Some(Doc::Fwd(f)) => &f.intervals,
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name),
        )
        .unwrap()
    }

    #[test]
    fn each_mode_is_typed_by_its_keys() {
        let mode = |name: &str| Loaded::parse(name, fixture(name)).unwrap().mode();
        assert_eq!(mode("client.json"), "iperf3");
        assert_eq!(mode("blast.json"), "blast");
        assert_eq!(mode("blast.jsonl"), "blast");
        assert_eq!(mode("sink.json"), "sink");
        assert_eq!(mode("rr.json"), "rr client");
        assert_eq!(mode("rfc2544.json"), "rfc2544");
        assert_eq!(mode("blast-rep.json"), "repetition");
        let s = Loaded::parse("s", fixture("blast.jsonl")).unwrap();
        assert!(s.start.as_ref().unwrap().host.is_some());
        assert!(matches!(s.doc, Some(Doc::Blast(_))));
        assert!(!s.run_intervals().is_empty());
        assert!(s.notes.is_empty(), "{:?}", s.notes);
    }

    #[test]
    fn a_cut_stream_keeps_its_rows_up_to_the_cut_and_says_so() {
        let full = fixture("blast.jsonl");
        let lines: Vec<&str> = full.lines().collect();
        // Start and the intervals whole, the end cut in the middle.
        let end = lines.last().unwrap();
        let cut = format!(
            "{}\n{}",
            lines[..lines.len() - 1].join("\n"),
            &end[..end.len() / 2]
        );
        let l = Loaded::parse("cut", cut).unwrap();
        assert_eq!(l.intervals.len(), lines.len() - 2);
        assert!(l.end.is_none() && l.doc.is_none());
        assert_eq!(l.notes.len(), 1);
        assert!(
            l.notes[0].contains(&format!("cut at line {}", lines.len())),
            "{:?}",
            l.notes
        );
        // The report of what there is: its rows, and the note.
        let page = crate::report_page(&[l]);
        assert!(page.contains("cut at line"));
        assert!(page.contains("<table class=\"rows\""));
        // No end at all, no cut: said too; a lone start is a stream.
        let l = Loaded::parse("noend", lines[..2].join("\n")).unwrap();
        assert!(l.notes[0].contains("no end event"), "{:?}", l.notes);
        let l = Loaded::parse("start", lines[0].to_string()).unwrap();
        assert_eq!(l.mode(), "blast");
        assert!(l.notes[0].contains("no end event"), "{:?}", l.notes);
    }

    #[test]
    fn unknown_and_empty_results_are_refused_with_what_they_were() {
        for (text, want) in [
            ("{\"hello\": 1}", "keys [\"hello\"]"),
            ("[1, 2]", "not an object"),
            ("not json at all\n", "line 1"),
        ] {
            let e = Loaded::parse("x", text.into()).unwrap_err().to_string();
            assert!(
                e.contains(want) && e.starts_with("x: not a linerate"),
                "{e}"
            );
        }
        assert!(matches!(
            Loaded::parse("e", " \n".into()),
            Err(ReadError::Empty { .. })
        ));
        // A document of a known kind with a field of the wrong type: said.
        let e = Loaded::parse("b", "{\"role\": \"blast\", \"packets\": \"many\"}".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid type"), "{e}");
    }

    #[test]
    fn a_result_with_zero_packets_is_reported_as_such() {
        let doc = serde_json::json!({"role": "sink", "packets": 0, "bytes": 0, "duration_s": 1.0,
            "pps": 0.0, "bps_l1": 0.0, "bps_l2": 0.0, "lost": 0, "intervals": [], "flows": []});
        let l = Loaded::parse("zero", doc.to_string()).unwrap();
        let page = crate::report_page(&[l]);
        assert!(page.contains("zero packets"), "{page}");
        assert!(page.contains("<table class=\"summary\""));
    }
}
