//! The tests' specs as pScheduler sends them (pscheduler-test-throughput
//! schemas 1-7, pscheduler-test-rtt 1-4), typed, and can-run: each field
//! checked against its kind, then what linerate cannot honour, deciding
//! as pscheduler-tool-iperf3's can-run does on the fields both take.

use crate::error::{Error, bad};
use crate::time::iso_seconds;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Highest throughput spec schema understood (pscheduler-test-throughput).
pub const THROUGHPUT_SCHEMA: u64 = 7;
/// Highest rtt spec schema understood (pscheduler-test-rtt).
pub const RTT_SCHEMA: u64 = 4;
/// Test seconds when the spec has no duration (the iperf3 tool's DEFAULT_DURATION).
pub const DEFAULT_DURATION_S: u64 = 10;
/// Link RTT assumed when the spec has none (DEFAULT_LINK_RTT).
pub const DEFAULT_LINK_RTT_S: f64 = 0.2;
/// Seconds the client waits after the start for the server to be up
/// (pscheduler-tool-iperf3's DEFAULT_WAIT_SLEEP).
pub const WAIT_SLEEP_S: f64 = 3.0;
/// Seconds a server is given to wind down (DEFAULT_SERVER_SHUTDOWN).
pub const SERVER_SHUTDOWN_S: f64 = 2.0;

/// The tests linerate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestType {
    Throughput,
    Rtt,
}

/// A test as pScheduler hands it to a tool: `{"type": …, "spec": {…}}`.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Test {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub spec: Option<Map<String, Value>>,
}

impl Test {
    /// The test's type, or the reason linerate cannot run it.
    pub fn test_type(&self) -> Result<TestType, String> {
        match self.kind.as_deref() {
            None => Err("Missing test type".into()),
            Some("throughput") => Ok(TestType::Throughput),
            Some("rtt") => Ok(TestType::Rtt),
            Some("latency") => Err(
                "linerate measures round trips (the rtt test, through linerate rr), \
                 not the one-way delays of the latency test"
                    .into(),
            ),
            Some(t) => Err(format!(
                "Unsupported test type '{t}' (linerate runs throughput and rtt)"
            )),
        }
    }

    /// The spec, which pScheduler always sends.
    pub fn spec(&self) -> Result<&Map<String, Value>, Error> {
        self.spec.as_ref().ok_or(Error::Missing("spec"))
    }

    pub fn throughput(&self) -> Result<ThroughputSpec, Error> {
        parse(self.spec()?)
    }

    pub fn rtt(&self) -> Result<RttSpec, Error> {
        parse(self.spec()?)
    }
}

fn parse<T: serde::de::DeserializeOwned>(spec: &Map<String, Value>) -> Result<T, Error> {
    serde_json::from_value(Value::Object(spec.clone())).map_err(|e| bad("spec", e.to_string()))
}

/// What a spec field must hold (pScheduler's jsonval types).
#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Bool,
    /// ISO 8601 duration.
    Duration,
    /// Integer >= 1.
    Cardinal,
    /// Any integer (the schema's `Integer`: the CPU affinities).
    Integer,
    IpVersion,
    Tos,
    Port,
}

/// The throughput spec fields linerate honours.
const THROUGHPUT_FIELDS: &[(&str, Kind)] = &[
    ("schema", Kind::Cardinal),
    ("source", Kind::Text),
    ("source-node", Kind::Text),
    ("dest", Kind::Text),
    ("dest-node", Kind::Text),
    ("duration", Kind::Duration),
    ("interval", Kind::Duration),
    ("link-rtt", Kind::Duration),
    ("parallel", Kind::Cardinal),
    ("udp", Kind::Bool),
    ("bandwidth", Kind::Cardinal),
    ("burst-size", Kind::Cardinal),
    ("fq-rate", Kind::Cardinal),
    ("window-size", Kind::Cardinal),
    ("mss", Kind::Cardinal),
    ("buffer-length", Kind::Cardinal),
    ("ip-tos", Kind::Tos),
    ("ip-version", Kind::IpVersion),
    ("local-address", Kind::Text),
    ("omit", Kind::Duration),
    ("no-delay", Kind::Bool),
    ("congestion", Kind::Text),
    ("zero-copy", Kind::Bool),
    ("flow-label", Kind::Cardinal),
    ("client-cpu-affinity", Kind::Integer),
    ("server-cpu-affinity", Kind::Integer),
    ("single-ended", Kind::Bool),
    ("single-ended-port", Kind::Port),
    ("reverse", Kind::Bool),
    ("loopback", Kind::Bool),
];

/// The rtt spec fields linerate honours.
const RTT_FIELDS: &[(&str, Kind)] = &[
    ("schema", Kind::Cardinal),
    ("count", Kind::Cardinal),
    ("dest", Kind::Text),
    ("hostnames", Kind::Bool),
    ("interval", Kind::Duration),
    ("ip-version", Kind::IpVersion),
    ("source", Kind::Text),
    ("source-node", Kind::Text),
    ("length", Kind::Cardinal),
    ("deadline", Kind::Duration),
    ("timeout", Kind::Duration),
    ("port", Kind::Port),
    ("protocol", Kind::Text),
];

/// Why a field's value is not of its kind, if it is not.
fn kind_problem(field: &str, kind: Kind, v: &Value) -> Option<String> {
    let int_in = |lo: i64, hi: i64| v.as_i64().is_some_and(|n| (lo..=hi).contains(&n));
    let (ok, want) = match kind {
        Kind::Text => (v.as_str().is_some_and(|s| !s.is_empty()), "a string"),
        Kind::Bool => (v.is_boolean(), "true or false"),
        Kind::Duration => (
            v.as_str().and_then(iso_seconds).is_some(),
            "an ISO 8601 duration (PT10S)",
        ),
        Kind::Cardinal => (v.as_u64().is_some_and(|n| n >= 1), "a whole number above 0"),
        Kind::Integer => (v.is_i64() || v.is_u64(), "a whole number"),
        Kind::IpVersion => (v.as_u64().is_some_and(|n| n == 4 || n == 6), "4 or 6"),
        Kind::Tos => (int_in(0, 255), "a number from 0 to 255"),
        Kind::Port => (int_in(1, 65535), "a port (1-65535)"),
    };
    (!ok).then(|| format!("{field} must be {want}, not {v}"))
}

/// The spec's schema against the highest understood (pScheduler's
/// json_check_schema wording), then each field: unknown ones and ones of
/// the wrong kind.
fn field_problems(spec: &Map<String, Value>, fields: &[(&str, Kind)], max: u64) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(n) = spec.get("schema").and_then(Value::as_u64)
        && n > max
    {
        out.push(format!(
            "Schema version {n} is not supported (highest is {max})"
        ));
    }
    for (k, v) in spec {
        match fields.iter().find(|(f, _)| f == k) {
            None => out.push(format!("linerate does not support the {k} option")),
            Some((_, kind)) => out.extend(kind_problem(k, *kind, v)),
        }
    }
    out
}

/// A throughput spec (pscheduler-test-throughput, schemas 1-7).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct ThroughputSpec {
    pub source: Option<String>,
    pub dest: String,
    pub duration: Option<String>,
    pub interval: Option<String>,
    pub link_rtt: Option<String>,
    pub parallel: Option<u32>,
    #[serde(default)]
    pub udp: bool,
    pub bandwidth: Option<u64>,
    pub burst_size: Option<u32>,
    pub fq_rate: Option<u64>,
    pub window_size: Option<u32>,
    pub mss: Option<u32>,
    pub buffer_length: Option<u32>,
    pub ip_tos: Option<u32>,
    pub ip_version: Option<u8>,
    pub local_address: Option<String>,
    pub omit: Option<String>,
    #[serde(default)]
    pub no_delay: bool,
    pub congestion: Option<String>,
    #[serde(default)]
    pub zero_copy: bool,
    pub flow_label: Option<u32>,
    pub client_cpu_affinity: Option<i64>,
    pub server_cpu_affinity: Option<i64>,
    #[serde(default)]
    pub single_ended: bool,
    pub single_ended_port: Option<u16>,
    #[serde(default)]
    pub reverse: bool,
    #[serde(default)]
    pub loopback: bool,
}

/// Seconds of an optional ISO 8601 field (its kind checked by can-run).
fn seconds_of(field: &str, v: Option<&str>, default: f64) -> Result<f64, Error> {
    match v {
        None => Ok(default),
        Some(s) => {
            iso_seconds(s).ok_or_else(|| bad(field, format!("'{s}' is not an ISO 8601 duration")))
        }
    }
}

impl ThroughputSpec {
    /// The test's whole seconds, as the iperf3 tool takes them
    /// (`int(seconds)`; no duration: 10).
    pub fn time_s(&self) -> Result<u64, Error> {
        match self.duration.as_deref() {
            None => Ok(DEFAULT_DURATION_S),
            d => Ok(seconds_of("duration", d, 0.0)? as u64),
        }
    }

    /// Omitted seconds as given (the `duration` method counts them whole
    /// and fractional, as the iperf3 tool does).
    pub fn omit_s(&self) -> Result<f64, Error> {
        seconds_of("omit", self.omit.as_deref(), 0.0)
    }

    /// `-O`: the omitted seconds truncated (the iperf3 tool's `int()`).
    pub fn omit_whole_s(&self) -> Result<u32, Error> {
        Ok(self.omit_s()? as u32)
    }

    /// `-i`: the interval's whole seconds (the iperf3 tool's `int()`: 0,
    /// no interval reports, for anything under a second); None: iperf3's
    /// default.
    pub fn interval_whole_s(&self) -> Result<Option<u64>, Error> {
        match self.interval.as_deref() {
            None => Ok(None),
            i => Ok(Some(seconds_of("interval", i, 0.0)? as u64)),
        }
    }

    /// pscheduler-tool-iperf3's setup_time: a second per 50 ms of link
    /// RTT, at least one.
    pub fn setup_s(&self) -> Result<f64, Error> {
        let rtt = seconds_of("link-rtt", self.link_rtt.as_deref(), DEFAULT_LINK_RTT_S)?;
        Ok((rtt * 1000.0 / 50.0).max(1.0))
    }

    /// What linerate cannot honour in a spec whose fields are well formed:
    /// the iperf3 tool's refusal (bandwidth with fq-rate), and linerate's
    /// own for the field it adds (burst-size needs a rate).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (field, v) in [
            ("duration", self.time_s().map(drop)),
            ("omit", self.omit_s().map(drop)),
            ("interval", self.interval_whole_s().map(drop)),
            ("link-rtt", self.setup_s().map(drop)),
        ] {
            if let Err(e) = v {
                out.push(format!("{field}: {e}"));
            }
        }
        if self.bandwidth.is_some() && self.fq_rate.is_some() {
            // pscheduler-tool-iperf3's can-run, word for word.
            out.push("Cannot have bandwidth and fq-rate set simultaneously.".into());
        }
        if self.burst_size.is_some() && self.bandwidth.is_none() {
            out.push("burst-size needs a bandwidth (linerate's -b RATE/BURST)".into());
        }
        out
    }

    /// The `duration` method, as pscheduler-tool-iperf3's: set-up + omit +
    /// whole test seconds + the client's wait + the server's wind-down,
    /// the sum truncated to whole seconds (`'PT%dS'`).
    pub fn run_seconds(&self) -> Result<u64, Error> {
        let total = self.setup_s()?
            + self.omit_s()?
            + self.time_s()? as f64
            + WAIT_SLEEP_S
            + SERVER_SHUTDOWN_S;
        Ok(total as u64)
    }
}

/// An rtt spec (pscheduler-test-rtt, schemas 1-4).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct RttSpec {
    pub count: Option<u64>,
    pub dest: String,
    pub interval: Option<String>,
    pub ip_version: Option<u8>,
    pub source: Option<String>,
    pub length: Option<u64>,
    pub deadline: Option<String>,
    pub timeout: Option<String>,
    pub port: Option<u16>,
    pub protocol: Option<String>,
}

/// The protocol name an rtt spec may give to ask for linerate's rr.
pub const RR_PROTOCOL: &str = "linerate-rr";
/// rtt defaults, as pscheduler-tool-ping's: 5 requests 1 s apart, 2 s timeout.
const RTT_COUNT: u64 = 5;
const RTT_INTERVAL_S: f64 = 1.0;
const RTT_TIMEOUT_S: f64 = 2.0;

/// How an rtt spec runs as an rr client.
#[derive(Debug, Clone, PartialEq)]
pub struct RttPlan {
    /// Requests per second (rr paces whole requests per second).
    pub pps: u64,
    /// Seconds to send.
    pub send_s: f64,
    pub timeout_s: f64,
    pub length: Option<u64>,
}

impl RttSpec {
    /// The rr client's run, or why the spec cannot be one.
    pub fn plan(&self) -> Result<RttPlan, String> {
        let secs = |f: &str, v: &Option<String>, d: f64| {
            seconds_of(f, v.as_deref(), d).map_err(|e| e.to_string())
        };
        let interval = secs("interval", &self.interval, RTT_INTERVAL_S)?;
        let pps = (1.0 / interval).round();
        if interval <= 0.0 || interval > 1.0 || (pps * interval - 1.0).abs() > 1e-9 {
            return Err(format!(
                "interval must be 1/N of a second (PT1S, PT0.5S, PT0.1S): linerate rr paces \
                 whole requests per second, and {} is not",
                self.interval.as_deref().unwrap_or("")
            ));
        }
        let count = self.count.unwrap_or(RTT_COUNT);
        let mut send_s = count as f64 * interval;
        if self.deadline.is_some() {
            send_s = send_s.min(secs("deadline", &self.deadline, 0.0)?);
        }
        if send_s <= 0.0 {
            return Err("deadline must be above zero".into());
        }
        if let Some(l) = self.length
            && !(32..=65507).contains(&l)
        {
            return Err(format!(
                "length must be 32 to 65507 bytes (an rr request carries a 32-byte header), not {l}"
            ));
        }
        if let Some(p) = &self.protocol
            && p != RR_PROTOCOL
        {
            return Err(format!(
                "linerate runs rtt with protocol {RR_PROTOCOL} (UDP to a linerate rr server), not {p}"
            ));
        }
        Ok(RttPlan {
            pps: pps as u64,
            send_s,
            timeout_s: secs("timeout", &self.timeout, RTT_TIMEOUT_S)?,
            length: self.length,
        })
    }
}

/// can-run's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanRun {
    #[serde(rename = "can-run")]
    pub can_run: bool,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub reasons: Vec<String>,
}

/// can-run: a spec linerate cannot honour is a reason, never an error.
pub fn can_run(test: &Test) -> CanRun {
    let reasons = can_run_reasons(test);
    CanRun {
        can_run: reasons.is_empty(),
        reasons,
    }
}

fn can_run_reasons(test: &Test) -> Vec<String> {
    let kind = match test.test_type() {
        Ok(k) => k,
        Err(r) => return vec![r],
    };
    let Some(spec) = &test.spec else {
        return vec!["Missing test specification".into()];
    };
    let (fields, max) = match kind {
        TestType::Throughput => (THROUGHPUT_FIELDS, THROUGHPUT_SCHEMA),
        TestType::Rtt => (RTT_FIELDS, RTT_SCHEMA),
    };
    let mut out = field_problems(spec, fields, max);
    if !out.is_empty() {
        return out;
    }
    match kind {
        TestType::Throughput => match test.throughput() {
            Ok(s) => out.extend(s.problems()),
            Err(e) => out.push(e.to_string()),
        },
        TestType::Rtt => match test.rtt() {
            Ok(s) => out.extend(s.plan().err()),
            Err(e) => out.push(e.to_string()),
        },
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn throughput(spec: Value) -> Test {
        serde_json::from_value(json!({ "type": "throughput", "spec": spec })).unwrap()
    }

    fn reasons(spec: Value) -> Vec<String> {
        can_run(&throughput(spec)).reasons
    }

    #[test]
    fn can_run_decides_as_the_iperf3_tool() {
        // Refused by pscheduler-tool-iperf3's can-run, in its words.
        assert_eq!(
            reasons(json!({ "dest": "x", "bandwidth": 1000000, "fq-rate": 2000000 })),
            ["Cannot have bandwidth and fq-rate set simultaneously."]
        );
        // Taken by it (the schema's Integer, any Duration): a negative
        // affinity, a fractional omit, intervals under 0.1 s or over an
        // hour, a zero duration.
        for spec in [
            json!({ "dest": "x", "client-cpu-affinity": -1 }),
            json!({ "dest": "x", "server-cpu-affinity": -3 }),
            json!({ "dest": "x", "omit": "PT0.5S" }),
            json!({ "dest": "x", "interval": "PT0.05S" }),
            json!({ "dest": "x", "interval": "PT2H" }),
            json!({ "dest": "x", "duration": "PT0S" }),
            json!({ "dest": "x", "single-ended": true, "loopback": true }),
        ] {
            assert_eq!(reasons(spec.clone()), Vec::<String>::new(), "{spec}");
        }
        assert_eq!(
            reasons(json!({ "dest": "x", "client-cpu-affinity": 1.5 })),
            ["client-cpu-affinity must be a whole number, not 1.5"]
        );
    }

    #[test]
    fn whole_seconds_as_the_iperf3_tool_takes_them() {
        // (spec, -t, -O, -i, duration): int() of each, and the duration
        // method's sum truncated: 4 s set-up (PT0.2S link-rtt) + omit +
        // int(duration) + 3 + 2.
        let cases = [
            (json!({}), 10, 0, None, 19),
            (json!({ "duration": "PT2.9S" }), 2, 0, None, 11),
            (json!({ "duration": "PT0S" }), 0, 0, None, 9),
            (json!({ "omit": "PT1.5S" }), 10, 1, None, 20),
            (
                json!({ "omit": "PT0.7S", "duration": "PT1.5S" }),
                1,
                0,
                None,
                10,
            ),
            (json!({ "interval": "PT0.5S" }), 10, 0, Some(0), 19),
            (json!({ "interval": "PT2.5S" }), 10, 0, Some(2), 19),
            (json!({ "interval": "PT2H" }), 10, 0, Some(7200), 19),
            (
                json!({ "link-rtt": "PT0.05S", "duration": "PT30S" }),
                30,
                0,
                None,
                36,
            ),
            (json!({ "link-rtt": "PT0.125S" }), 10, 0, None, 17),
        ];
        for (mut spec, t, o, i, d) in cases {
            spec["dest"] = json!("x");
            let s = throughput(spec.clone()).throughput().unwrap();
            assert_eq!(s.time_s().unwrap(), t, "{spec}");
            assert_eq!(s.omit_whole_s().unwrap(), o, "{spec}");
            assert_eq!(s.interval_whole_s().unwrap(), i, "{spec}");
            assert_eq!(s.run_seconds().unwrap(), d, "{spec}");
        }
    }

    #[test]
    fn rtt_intervals_must_be_whole_requests_per_second() {
        let plan = |i: &str| {
            RttSpec {
                dest: "x".into(),
                interval: Some(i.into()),
                ..RttSpec::default()
            }
            .plan()
        };
        assert_eq!(plan("PT0.2S").map(|p| p.pps), Ok(5));
        assert_eq!(plan("PT1S").map(|p| (p.pps, p.send_s)), Ok((1, 5.0)));
        assert!(plan("PT2S").is_err());
        assert!(plan("PT0.3S").is_err());
    }
}
