//! iperf3's `-J` document as typed structs: serde derives write it, key
//! for key and in iperf3 3.21's order (compared with real iperf3 by the
//! interop tests, and with the document of fixed figures by
//! `tests/document_keys.rs`). linerate's own figures go under `linerate`.

mod end;
mod interval;
mod start;

pub use end::{
    CpuDoc, Diskfile, EndDoc, EndInput, StreamEnd, SumDoc, TcpReceiverEnd, TcpSenderEnd,
    TcpSenderInfo, UdpStreamEnd, UdpSum,
};
pub use interval::{IntervalDoc, IntervalSet, Sum, TcpInfo, UdpRx};
pub use start::{Buffers, Connected, HostPort, StartDoc, TestStart, Timestamp, version};

use crate::report::figures::StreamFinal;
use serde::Serialize;
use serde_json::Value;

/// A test's result: the whole `-J` document, with the human end report
/// and the rate a repetition measures beside it (not in the document).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IperfOutcome {
    pub start: StartDoc,
    pub intervals: Vec<IntervalSet>,
    pub end: EndDoc,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_data: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_text: Option<String>,
    /// The server's own document, as it sent it (`--get-server-output`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_output_json: Option<Value>,
    pub linerate: LinerateDoc,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The human end report.
    #[serde(skip)]
    pub text: String,
    /// The receivers' rate, bit/s (both directions with `--bidir`).
    #[serde(skip)]
    pub received_bps: f64,
}

impl linerate_run::Outcome for IperfOutcome {
    fn document(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    fn text(&self) -> String {
        self.text.clone()
    }

    fn figure(&self) -> Option<linerate_run::Figure> {
        Some(linerate_run::Figure {
            name: "receiver bits_per_second",
            unit: "receiver bit/s",
            value: self.received_bps,
        })
    }
}

/// The document as it stands before the end (a server's
/// `--get-server-output` in JSON).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Partial<'a> {
    pub start: &'a StartDoc,
    pub intervals: &'a [IntervalSet],
}

/// What iperf3 prints with `-J` when the test failed before it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorDocument {
    pub start: ErrorStart,
    pub intervals: [(); 0],
    pub end: Empty,
    pub error: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorStart {
    pub connected: [(); 0],
    pub version: String,
    pub system_info: String,
}

/// `{}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Empty {}

impl ErrorDocument {
    pub fn new(system_info: String, error: String) -> Self {
        Self {
            start: ErrorStart {
                connected: [],
                version: version(),
                system_info,
            },
            intervals: [],
            end: Empty {},
            error,
        }
    }
}

/// A `--json-stream` line: `{"event": …, "data": …}`.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct StreamEvent<'a, T: Serialize> {
    pub event: &'static str,
    pub data: &'a T,
}

impl<'a, T: Serialize> StreamEvent<'a, T> {
    pub fn new(event: &'static str, data: &'a T) -> Self {
        Self { event, data }
    }

    /// The event as one line.
    pub fn line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default() + "\n"
    }
}

/// linerate's own section of the document.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinerateDoc {
    pub version: &'static str,
    pub figures: &'static str,
    pub streams: Vec<LinerateStream>,
    /// The doctor's summary of this host for the test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doctor: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<Mptcp>,
}

/// What the I/O layer adds to linerate's section at the end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extra {
    pub doctor: Option<Value>,
    pub mptcp: Option<Mptcp>,
}

/// `-m`: how many of the data connections are multipath.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mptcp {
    pub streams: usize,
    pub multipath: usize,
    pub fell_back_to_tcp: usize,
}

impl Mptcp {
    pub fn new(multipath: usize, streams: usize) -> Self {
        Self {
            streams,
            multipath,
            fell_back_to_tcp: streams - multipath,
        }
    }
}

/// Per stream: send errors, exact UDP counts and the pacing measured,
/// where there are.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinerateStream {
    pub id: u32,
    pub sender: bool,
    pub send_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub udp_exact: Option<UdpExact>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pacing: Option<Pacing>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UdpExact {
    pub duplicates: u64,
    pub late: u64,
    pub lost: u64,
}

/// How evenly a paced sender sent (gaps between its send calls).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pacing {
    pub measured_by: &'static str,
    pub calls: u64,
    pub units_per_call: f64,
    pub target_gap_us: f64,
    pub mean_gap_us: f64,
    pub stddev_gap_us: f64,
    pub min_gap_us: f64,
    pub max_gap_us: f64,
    pub p50_gap_us: f64,
    pub p99_gap_us: f64,
    pub p999_gap_us: f64,
}

impl LinerateDoc {
    pub fn new(finals: &[StreamFinal], extra: Extra) -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION"),
            figures: "sender figures are what the kernel accepted; receiver figures are what arrived",
            streams: finals
                .iter()
                .map(|f| LinerateStream {
                    id: f.id,
                    sender: f.sender,
                    send_errors: f.send_errors,
                    udp_exact: f.exact.map(|(duplicates, late, lost)| UdpExact {
                        duplicates,
                        late,
                        lost,
                    }),
                    pacing: f.departures.map(|d| Pacing {
                        measured_by: "sender, gaps between send calls",
                        calls: d.calls,
                        units_per_call: d.units_per_call,
                        target_gap_us: d.target_gap_us,
                        mean_gap_us: d.mean_gap_us,
                        stddev_gap_us: d.stddev_gap_us,
                        min_gap_us: d.min_gap_us,
                        max_gap_us: d.max_gap_us,
                        p50_gap_us: d.gap_percentiles_us[0],
                        p99_gap_us: d.gap_percentiles_us[1],
                        p999_gap_us: d.gap_percentiles_us[2],
                    }),
                })
                .collect(),
            doctor: extra.doctor,
            mptcp: extra.mptcp,
        }
    }
}
