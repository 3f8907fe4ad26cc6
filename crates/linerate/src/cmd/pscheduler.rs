//! `linerate pscheduler <method>`: linerate as a perfSONAR pScheduler tool
//! plugin, with no Python. pScheduler runs a tool as six executables
//! (enumerate, can-run, duration, participant-data, run, merged-results),
//! JSON on standard input, JSON on standard output; `pscheduler/` at the
//! repository root holds the one-line wrappers.
//!
//! The shapes are those of perfsonar/pscheduler: the methods' input and
//! output as pscheduler-tool-iperf3 (throughput) and pscheduler-tool-ping /
//! pscheduler-tool-twping (rtt) read and write them, what pScheduler sends
//! as pscheduler-server's runner and database build it, the specs and
//! results as pscheduler-test-throughput (spec schemas 1-7) and
//! pscheduler-test-rtt (1-4) define them.
//!
//! - throughput: participant 1 runs `linerate -s -1 -J`, participant 0
//!   linerate's iperf3 client (`-c … -J`) against it; each result is its
//!   side's -J document mapped as the iperf3 tool maps iperf3's, and
//!   merged-results takes the sender's (the server's with `reverse`).
//! - rtt: participant 0 runs `linerate rr client -J` against a
//!   `linerate rr server` already listening at dest. The latency test
//!   (one-way delays) is not offered: rr measures round trips.
//!
//! Input that is not what pScheduler sends ends the method with a message
//! and exit code 2; a test that could not run is a result with
//! `"succeeded": false` and the reason.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::fmt;
use std::io::Read;
use std::net::{IpAddr, ToSocketAddrs};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// perfSONAR pScheduler's tool methods (JSON on standard input and output).
#[derive(Debug, clap::Args)]
pub struct PschedulerArgs {
    #[command(subcommand)]
    pub method: Method,
}

/// The six methods of a pScheduler tool.
#[derive(Debug, Clone, Copy, clap::Subcommand)]
pub enum Method {
    /// The tool's description: name, version, the tests it runs.
    Enumerate,
    /// Whether linerate can run a test spec, and if not why.
    CanRun,
    /// How long a run of a test spec takes, as ISO 8601.
    Duration,
    /// This participant's data for a run (the server's port).
    ParticipantData,
    /// Run this participant's part of the test.
    Run,
    /// One result from the participants' results.
    MergedResults,
}

/// The tool's name in pScheduler (its plugin directory's name).
const TOOL: &str = "linerate";
/// Highest throughput spec schema understood (pscheduler-test-throughput).
const THROUGHPUT_SCHEMA: u64 = 7;
/// Highest rtt spec schema understood (pscheduler-test-rtt).
const RTT_SCHEMA: u64 = 4;
/// Seconds the client waits after the start for the server to be up
/// (pscheduler-tool-iperf3's DEFAULT_WAIT_SLEEP).
const WAIT_SLEEP_S: f64 = 3.0;
/// Seconds a server is given to wind down (DEFAULT_SERVER_SHUTDOWN).
const SERVER_SHUTDOWN_S: f64 = 2.0;
/// Test seconds when the spec has no duration (DEFAULT_DURATION).
const DEFAULT_DURATION_S: f64 = 10.0;
/// Link RTT assumed when the spec has none (DEFAULT_LINK_RTT).
const DEFAULT_LINK_RTT_S: f64 = 0.2;
/// rtt defaults, as pscheduler-tool-ping's: 5 requests 1 s apart, 2 s timeout.
const RTT_COUNT: u64 = 5;
const RTT_INTERVAL_S: f64 = 1.0;
const RTT_TIMEOUT_S: f64 = 2.0;
/// Seconds an rtt run is given beyond its requests and timeout.
const RTT_SLACK_S: f64 = 2.0;
/// How far ahead of its start a run may be handed over.
const MAX_EARLY: Duration = Duration::from_secs(600);
/// The configuration file (`server_port = N`, `rr_port = N`), unless
/// LINERATE_PSCHEDULER_CONFIG names another.
const CONFIG_FILE: &str = "/etc/pscheduler/tool/linerate.conf";

/// Why a method could not read its input.
#[derive(Debug)]
pub enum PsError {
    /// Standard input could not be read.
    Stdin(std::io::Error),
    /// Standard input is not JSON.
    NotJson(serde_json::Error),
    /// A key pScheduler always sends is absent.
    Missing(&'static str),
    /// A value is not what pScheduler sends.
    Bad { what: String, why: String },
    /// The configuration file is unreadable or wrong.
    Config { path: String, why: String },
}

impl fmt::Display for PsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PsError::Stdin(e) => write!(f, "cannot read the JSON input: {e}"),
            PsError::NotJson(e) => write!(f, "the input is not JSON: {e}"),
            PsError::Missing(k) => write!(f, "the input has no '{k}'"),
            PsError::Bad { what, why } => write!(f, "{what}: {why}"),
            PsError::Config { path, why } => write!(f, "{path}: {why}"),
        }
    }
}

impl std::error::Error for PsError {}

fn bad(what: impl Into<String>, why: impl Into<String>) -> PsError {
    PsError::Bad {
        what: what.into(),
        why: why.into(),
    }
}

/// Runs one method: reads its JSON, prints its JSON. Bad input is an error
/// (exit 2 with the message).
pub fn run(a: &PschedulerArgs) -> anyhow::Result<u8> {
    let input = match a.method {
        Method::Enumerate => Value::Null,
        _ => read_input()?,
    };
    let out = match a.method {
        Method::Enumerate => enumerate(),
        Method::CanRun => can_run(&input),
        Method::Duration => duration(&input)?,
        Method::ParticipantData => participant_data(&input)?,
        Method::Run => run_method(&input)?,
        Method::MergedResults => merged_results(&input)?,
    };
    crate::say!("{}", serde_json::to_string_pretty(&out)?);
    Ok(0)
}

fn read_input() -> Result<Value, PsError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(PsError::Stdin)?;
    let v: Value = serde_json::from_str(&text).map_err(PsError::NotJson)?;
    if !v.is_object() {
        return Err(bad("the input", "is not a JSON object"));
    }
    Ok(v)
}

/// enumerate: the tool as pScheduler lists it. The preference is below
/// iperf3's (10) and ping's (0): installing linerate changes no test
/// that does not ask for it (`--tool linerate`).
fn enumerate() -> Value {
    json!({
        "schema": 1,
        "name": TOOL,
        "description": "Measure throughput (iperf3-compatible) and round-trip time (rr) with linerate",
        "version": env!("CARGO_PKG_VERSION"),
        "tests": ["throughput", "rtt"],
        "preference": -10,
        "maintainer": { "name": "linerate maintainers" }
    })
}

// ---------------------------------------------------------------- specs

/// The tests linerate runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TestType {
    Throughput,
    Rtt,
}

/// The test's type, or the reason linerate cannot run it.
fn test_type(test: &Value) -> Result<TestType, String> {
    match test.get("type").and_then(Value::as_str) {
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

/// The spec of a test (`{"type": …, "spec": {…}}`).
fn spec_of(test: &Value) -> Result<&Map<String, Value>, PsError> {
    test.get("spec")
        .ok_or(PsError::Missing("spec"))?
        .as_object()
        .ok_or_else(|| bad("spec", "is not a JSON object"))
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
    /// Integer >= 0.
    CardinalZero,
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
    ("client-cpu-affinity", Kind::CardinalZero),
    ("server-cpu-affinity", Kind::CardinalZero),
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
    let ok = match kind {
        Kind::Text => v.as_str().is_some_and(|s| !s.is_empty()),
        Kind::Bool => v.is_boolean(),
        Kind::Duration => v.as_str().and_then(iso_seconds).is_some(),
        Kind::Cardinal => v.as_u64().is_some_and(|n| n >= 1),
        Kind::CardinalZero => v.is_u64(),
        Kind::IpVersion => v.as_u64().is_some_and(|n| n == 4 || n == 6),
        Kind::Tos => int_in(0, 255),
        Kind::Port => int_in(1, 65535),
    };
    let want = match kind {
        Kind::Text => "a string",
        Kind::Bool => "true or false",
        Kind::Duration => "an ISO 8601 duration (PT10S)",
        Kind::Cardinal => "a whole number above 0",
        Kind::CardinalZero => "a whole number (0 or more)",
        Kind::IpVersion => "4 or 6",
        Kind::Tos => "a number from 0 to 255",
        Kind::Port => "a port (1-65535)",
    };
    (!ok).then(|| format!("{field} must be {want}, not {v}"))
}

/// The spec's schema against the highest understood (pScheduler's
/// json_check_schema wording), then each field: unknown ones and ones of
/// the wrong kind (a schema that is not a number among them).
fn field_problems(spec: &Map<String, Value>, fields: &[(&str, Kind)], max: u64) -> Vec<String> {
    let mut out = Vec::new();
    // Its kind is checked with the other fields'.
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

/// Seconds of an ISO 8601 duration field (checked by can-run).
fn spec_seconds(field: &str, v: Option<&str>, default: f64) -> Result<f64, PsError> {
    match v {
        None => Ok(default),
        Some(s) => {
            iso_seconds(s).ok_or_else(|| bad(field, format!("'{s}' is not an ISO 8601 duration")))
        }
    }
}

/// A throughput spec (pscheduler-test-throughput, schemas 1-7).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct ThroughputSpec {
    source: Option<String>,
    dest: String,
    duration: Option<String>,
    interval: Option<String>,
    link_rtt: Option<String>,
    parallel: Option<u64>,
    #[serde(default)]
    udp: bool,
    bandwidth: Option<u64>,
    burst_size: Option<u64>,
    fq_rate: Option<u64>,
    window_size: Option<u64>,
    mss: Option<u64>,
    buffer_length: Option<u64>,
    ip_tos: Option<u64>,
    ip_version: Option<u8>,
    local_address: Option<String>,
    omit: Option<String>,
    #[serde(default)]
    no_delay: bool,
    congestion: Option<String>,
    #[serde(default)]
    zero_copy: bool,
    flow_label: Option<u64>,
    client_cpu_affinity: Option<u64>,
    server_cpu_affinity: Option<u64>,
    #[serde(default)]
    single_ended: bool,
    single_ended_port: Option<u16>,
    #[serde(default)]
    reverse: bool,
    #[serde(default)]
    loopback: bool,
}

impl ThroughputSpec {
    fn parse(spec: &Map<String, Value>) -> Result<ThroughputSpec, PsError> {
        serde_json::from_value(Value::Object(spec.clone())).map_err(|e| bad("spec", e.to_string()))
    }

    fn seconds(&self) -> Result<f64, PsError> {
        spec_seconds("duration", self.duration.as_deref(), DEFAULT_DURATION_S)
    }

    fn omit_s(&self) -> Result<f64, PsError> {
        spec_seconds("omit", self.omit.as_deref(), 0.0)
    }

    /// pscheduler-tool-iperf3's setup_time: a second per 50 ms of link
    /// RTT, at least one.
    fn setup_s(&self) -> Result<f64, PsError> {
        let rtt = spec_seconds("link-rtt", self.link_rtt.as_deref(), DEFAULT_LINK_RTT_S)?;
        Ok((rtt * 1000.0 / 50.0).max(1.0))
    }

    /// Seconds the client may take: the test, omitted seconds, set-up and
    /// a little slack.
    fn client_limit_s(&self) -> Result<f64, PsError> {
        Ok(self.seconds()? + self.omit_s()? + self.setup_s()? + SERVER_SHUTDOWN_S)
    }

    /// Seconds the server may take: the client's, plus its wait.
    fn server_limit_s(&self) -> Result<f64, PsError> {
        Ok(self.client_limit_s()? + WAIT_SLEEP_S)
    }

    /// What linerate cannot honour in a spec whose fields are well formed.
    fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (field, v) in [
            ("duration", self.seconds()),
            ("omit", self.omit_s()),
            ("link-rtt", self.setup_s()),
        ] {
            if let Err(e) = v {
                out.push(format!("{field}: {e}"));
            }
        }
        if self.seconds().is_ok_and(|s| s <= 0.0) {
            out.push("duration must be above zero".into());
        }
        if self.omit_s().is_ok_and(|s| s.fract() != 0.0) {
            out.push("omit must be whole seconds (linerate's -O, as iperf3's)".into());
        }
        if let Some(i) = &self.interval
            && iso_seconds(i).is_some_and(|s| !(0.1..=3600.0).contains(&s))
        {
            out.push(format!("interval {i} is outside 0.1 to 3600 seconds"));
        }
        if self.burst_size.is_some() && self.bandwidth.is_none() {
            out.push("burst-size needs a bandwidth (linerate's -b RATE/BURST)".into());
        }
        if self.single_ended && self.loopback {
            out.push("single-ended and loopback cannot be used together".into());
        }
        out
    }
}

/// An rtt spec (pscheduler-test-rtt, schemas 1-4).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
struct RttSpec {
    count: Option<u64>,
    dest: String,
    interval: Option<String>,
    ip_version: Option<u8>,
    source: Option<String>,
    length: Option<u64>,
    deadline: Option<String>,
    timeout: Option<String>,
    port: Option<u16>,
    protocol: Option<String>,
}

/// The protocol name an rtt spec may give to ask for linerate's rr.
const RR_PROTOCOL: &str = "linerate-rr";

/// How an rtt spec runs as `linerate rr client`.
#[derive(Debug, Clone, PartialEq)]
struct RttPlan {
    /// Requests per second (rr paces whole requests per second).
    pps: u64,
    /// Seconds to send.
    send_s: f64,
    timeout_s: f64,
    length: Option<u64>,
}

impl RttSpec {
    fn parse(spec: &Map<String, Value>) -> Result<RttSpec, PsError> {
        serde_json::from_value(Value::Object(spec.clone())).map_err(|e| bad("spec", e.to_string()))
    }

    /// The rr client's run, or why the spec cannot be one.
    fn plan(&self) -> Result<RttPlan, String> {
        let secs = |f: &str, v: &Option<String>, d: f64| {
            spec_seconds(f, v.as_deref(), d).map_err(|e| e.to_string())
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
        if let Some(d) = &self.deadline {
            send_s = send_s.min(secs("deadline", &Some(d.clone()), 0.0)?);
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

// -------------------------------------------------------------- can-run

/// can-run: `{"can-run": bool, "reasons": [...]}`; a spec linerate cannot
/// honour is a reason, never an error.
fn can_run(test: &Value) -> Value {
    let reasons = can_run_reasons(test);
    if reasons.is_empty() {
        json!({ "can-run": true })
    } else {
        json!({ "can-run": false, "reasons": reasons })
    }
}

fn can_run_reasons(test: &Value) -> Vec<String> {
    let kind = match test_type(test) {
        Ok(k) => k,
        Err(r) => return vec![r],
    };
    let Some(spec) = test.get("spec").and_then(Value::as_object) else {
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
        TestType::Throughput => match ThroughputSpec::parse(spec) {
            Ok(s) => out.extend(s.problems()),
            Err(e) => out.push(e.to_string()),
        },
        TestType::Rtt => match RttSpec::parse(spec) {
            Ok(s) => out.extend(s.plan().err()),
            Err(e) => out.push(e.to_string()),
        },
    }
    out
}

// ------------------------------------------------------------- duration

/// duration: how long a run takes. Throughput as pscheduler-tool-iperf3
/// counts it (set-up + omit + duration + the client's wait + the server's
/// wind-down, whole seconds); rtt: the requests, the last one's timeout
/// and RTT_SLACK_S.
fn duration(test: &Value) -> Result<Value, PsError> {
    let kind = test_type(test).map_err(|r| bad("type", r))?;
    let spec = spec_of(test)?;
    let iso = match kind {
        TestType::Throughput => {
            let s = ThroughputSpec::parse(spec)?;
            let total =
                s.setup_s()? + s.omit_s()? + s.seconds()? + WAIT_SLEEP_S + SERVER_SHUTDOWN_S;
            format!("PT{}S", total.ceil() as u64)
        }
        TestType::Rtt => {
            let p = RttSpec::parse(spec)?.plan().map_err(|w| bad("spec", w))?;
            iso_duration(p.send_s + p.timeout_s + RTT_SLACK_S)
        }
    };
    Ok(json!({ "duration": iso }))
}

// ----------------------------------------------------- participant-data

/// Ports from the configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Config {
    /// Where participant 1's iperf3-compatible server listens.
    server_port: u16,
    /// Where rtt's rr server listens when the spec gives no port.
    rr_port: u16,
}

/// The configuration: LINERATE_PSCHEDULER_CONFIG or CONFIG_FILE, lines of
/// `key = value` (`[section]` lines and `#`/`;` comments skipped); none is
/// the defaults.
fn config() -> Result<Config, PsError> {
    let path = std::env::var("LINERATE_PSCHEDULER_CONFIG").unwrap_or_else(|_| CONFIG_FILE.into());
    let mut c = Config {
        server_port: 5201,
        rr_port: super::rr::DEFAULT_PORT,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(c),
        Err(e) => {
            return Err(PsError::Config {
                path,
                why: e.to_string(),
            });
        }
    };
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with(['#', ';', '[']) {
            continue;
        }
        let wrong = |why: String| PsError::Config {
            path: path.clone(),
            why,
        };
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| wrong(format!("'{line}' is not key = value")))?;
        let port = || {
            v.trim()
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| wrong(format!("{} is not a port", v.trim())))
        };
        match k.trim() {
            "server_port" => c.server_port = port()?,
            "rr_port" => c.rr_port = port()?,
            other => return Err(wrong(format!("unknown key '{other}'"))),
        }
    }
    Ok(c)
}

/// participant-data: input `{"participant": N, "test": {...}}`; the
/// throughput server (participant 1) says its port.
fn participant_data(input: &Value) -> Result<Value, PsError> {
    let p = input
        .get("participant")
        .ok_or(PsError::Missing("participant"))?
        .as_u64()
        .ok_or_else(|| bad("participant", "is not a participant number"))?;
    let test = input.get("test").ok_or(PsError::Missing("test"))?;
    let kind = test_type(test).map_err(|r| bad("test", r))?;
    let mut out = json!({ "schema": 1, "linerate-version": env!("CARGO_PKG_VERSION") });
    match (kind, p) {
        (_, 0) => {}
        (TestType::Throughput, 1) => out["server_port"] = json!(config()?.server_port),
        (_, p) => {
            return Err(bad(
                "participant",
                format!("{p} is not a participant of this test"),
            ));
        }
    }
    Ok(out)
}

// ------------------------------------------------------------------ run

/// What run is given (pscheduler-server's runner builds it).
#[derive(Debug)]
struct RunInput<'a> {
    participant: u64,
    data: &'a [Value],
    start: &'a str,
    spec: &'a Map<String, Value>,
    kind: TestType,
}

fn run_input(input: &Value) -> Result<RunInput<'_>, PsError> {
    let test = input.get("test").ok_or(PsError::Missing("test"))?;
    Ok(RunInput {
        participant: input
            .get("participant")
            .ok_or(PsError::Missing("participant"))?
            .as_u64()
            .ok_or_else(|| bad("participant", "is not a participant number"))?,
        data: input
            .get("participant-data")
            .ok_or(PsError::Missing("participant-data"))?
            .as_array()
            .ok_or_else(|| bad("participant-data", "is not a list"))?,
        start: input
            .pointer("/schedule/start")
            .ok_or(PsError::Missing("schedule.start"))?
            .as_str()
            .ok_or_else(|| bad("schedule.start", "is not a string"))?,
        spec: spec_of(test)?,
        kind: test_type(test).map_err(|r| bad("test", r))?,
    })
}

/// run: this participant's part; the result on standard output.
fn run_method(input: &Value) -> Result<Value, PsError> {
    let r = run_input(input)?;
    match r.kind {
        TestType::Throughput => run_throughput(&r, &ThroughputSpec::parse(r.spec)?),
        TestType::Rtt => run_rtt(&r, &RttSpec::parse(r.spec)?),
    }
}

/// Sleeps until the run's start (pScheduler hands a run over shortly
/// before it); a start already past is now.
fn sleep_until(start: &str) -> Result<(), PsError> {
    let at = parse_time(start).ok_or_else(|| {
        bad(
            "schedule.start",
            format!("'{start}' is not an ISO 8601 date and time"),
        )
    })?;
    if let Ok(wait) = at.duration_since(SystemTime::now()) {
        if wait > MAX_EARLY {
            return Err(bad(
                "schedule.start",
                format!("{start} is more than {} s ahead", MAX_EARLY.as_secs()),
            ));
        }
        std::thread::sleep(wait);
    }
    Ok(())
}

/// A child linerate's run.
#[derive(Debug)]
struct ChildRun {
    /// The command line, for diags.
    cmdline: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    /// Stopped (SIGKILL to its PID) at its deadline.
    killed: bool,
    limit_s: f64,
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    })
}

/// Runs this linerate binary with `args`, at most `limit_s` seconds: then
/// it is killed (by its PID; nothing else is).
fn run_child(args: &[String], limit_s: f64) -> Result<ChildRun, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find linerate itself: {e}"))?;
    let cmdline = std::iter::once(exe.display().to_string())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new(&exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmdline}: {e}"))?;
    let (out, err) = (drain(child.stdout.take()), drain(child.stderr.take()));
    let deadline = Instant::now() + Duration::from_secs_f64(limit_s);
    let (code, killed) = loop {
        match child.try_wait() {
            Ok(Some(status)) => break (status.code(), false),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                break (child.wait().ok().and_then(|s| s.code()), true);
            }
        }
    };
    Ok(ChildRun {
        cmdline,
        code,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        killed,
        limit_s,
    })
}

/// The JSON document a child printed (from its first `{`, as the iperf3
/// tool reads iperf3's).
fn child_doc(run: &ChildRun) -> Option<Value> {
    // '\u{7b}' is '{', where the document starts (written so, brace
    // counters see balanced braces).
    let at = run.stdout.find('\u{7b}')?;
    serde_json::from_str(&run.stdout[at..]).ok()
}

/// A run that did not succeed.
fn failed(error: impl Into<String>, diags: impl Into<String>) -> Value {
    json!({ "succeeded": false, "error": error.into(), "diags": diags.into() })
}

/// Why a child's run is no result: stopped, or exited non-zero (the
/// document's error, else what it printed).
fn child_error(run: &ChildRun, doc: Option<&Value>) -> Option<String> {
    if run.killed {
        return Some(format!(
            "linerate did not finish within {:.0} s and was stopped",
            run.limit_s
        ));
    }
    if run.code == Some(0) {
        return None;
    }
    let said = doc
        .and_then(|d| d.get("error"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}\n\n{}", run.stdout.trim(), run.stderr.trim()));
    Some(format!("linerate returned an error: {said}"))
}

// ------------------------------------------------------ throughput: run

/// An address of `host` of the family asked (4 or 6), else any.
fn resolve(host: &str, version: Option<u8>) -> Vec<IpAddr> {
    let all: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => (host, 0)
            .to_socket_addrs()
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default(),
    };
    all.into_iter()
        .filter(|ip| match version {
            Some(4) => ip.is_ipv4(),
            Some(6) => ip.is_ipv6(),
            _ => true,
        })
        .collect()
}

/// Addresses of `a` and `b` of one family, IPv6 first (pScheduler's
/// ip_normalize_version).
fn common_family(a: &str, b: &str, version: Option<u8>) -> Option<(IpAddr, IpAddr)> {
    let (xs, ys) = (resolve(a, version), resolve(b, version));
    let pick = |v6: bool| {
        let x = xs.iter().find(|ip| ip.is_ipv6() == v6)?;
        let y = ys.iter().find(|ip| ip.is_ipv6() == v6)?;
        Some((*x, *y))
    };
    pick(true).or_else(|| pick(false))
}

/// The client's address flags and destination: bound to local-address or
/// source in the destination's family (as the iperf3 tool binds).
fn client_endpoints(s: &ThroughputSpec) -> Result<(Vec<String>, String), String> {
    let local = s.local_address.as_deref().or(s.source.as_deref());
    let mut flags = Vec::new();
    if let Some(v) = s.ip_version {
        flags.push(format!("-{v}"));
    }
    let dest = match local {
        Some(l) if !s.loopback || s.local_address.is_some() => {
            let (src, dst) = common_family(l, &s.dest, s.ip_version)
                .ok_or_else(|| format!("{l} and {} have no addresses of one IP version", s.dest))?;
            flags.extend(["-B".into(), src.to_string()]);
            dst.to_string()
        }
        _ => match s.ip_version {
            Some(v) => resolve(&s.dest, Some(v))
                .first()
                .ok_or_else(|| format!("{} has no IPv{v} address", s.dest))?
                .to_string(),
            None => s.dest.clone(),
        },
    };
    Ok((flags, dest))
}

/// The client's command line for the spec, against `port`.
fn client_args(s: &ThroughputSpec, port: u16) -> Result<Vec<String>, String> {
    let (flags, dest) = client_endpoints(s)?;
    let secs = s.seconds().map_err(|e| e.to_string())?;
    let mut a: Vec<String> = vec!["-c".into(), dest, "-p".into(), port.to_string()];
    a.extend(["-t".into(), secs.to_string(), "-J".into()]);
    a.extend(flags);
    let mut opt = |flag: &str, v: Option<String>| {
        if let Some(v) = v {
            a.extend([flag.to_string(), v]);
        }
    };
    let interval = s.interval.as_deref().and_then(iso_seconds);
    opt("-i", interval.map(|i| i.to_string()));
    opt("-P", s.parallel.map(|p| p.to_string()));
    opt("-w", s.window_size.map(|w| w.to_string()));
    opt("-M", s.mss.map(|m| m.to_string()));
    let omit = s.omit_s().map_err(|e| e.to_string())? as u64;
    opt("-O", (omit > 0).then(|| omit.to_string()));
    let rate = match (s.bandwidth, s.burst_size) {
        (Some(b), Some(n)) => Some(format!("{b}/{n}")),
        (b, _) => b.map(|b| b.to_string()),
    };
    opt("-b", rate);
    opt("--fq-rate", s.fq_rate.map(|r| r.to_string()));
    opt("-l", s.buffer_length.map(|l| l.to_string()));
    opt("-S", s.ip_tos.map(|t| t.to_string()));
    opt("-C", s.congestion.clone());
    opt("-L", s.flow_label.map(|l| l.to_string()));
    opt("-A", s.client_cpu_affinity.map(|c| c.to_string()));
    for (on, flag) in [
        (s.udp, "-u"),
        (s.zero_copy, "-Z"),
        (s.no_delay, "-N"),
        (s.reverse, "-R"),
    ] {
        if on {
            a.push(flag.into());
        }
    }
    Ok(a)
}

/// The server's command line: one test (`-1`), on `port`, bound to dest
/// when the family is known (as the iperf3 tool binds); it exits by
/// itself if no client came by the end of the client's wait and set-up.
fn server_args(s: &ThroughputSpec, port: u16) -> Result<Vec<String>, String> {
    let idle = (WAIT_SLEEP_S + s.setup_s().map_err(|e| e.to_string())?).ceil() as u64;
    let mut a: Vec<String> = vec!["-s".into(), "-1".into(), "-J".into()];
    a.extend(["-p".into(), port.to_string()]);
    a.extend(["--idle-timeout".into(), idle.to_string()]);
    let bind = match (s.ip_version, s.source.as_deref()) {
        (Some(v), _) => Some(
            *resolve(&s.dest, Some(v))
                .first()
                .ok_or_else(|| format!("{} has no IPv{v} address", s.dest))?,
        ),
        (None, Some(src)) if !s.loopback => common_family(src, &s.dest, None).map(|(_, d)| d),
        _ => None,
    };
    if let Some(ip) = bind {
        a.extend(["-B".into(), ip.to_string()]);
    }
    if let Some(v) = s.ip_version {
        a.push(format!("-{v}"));
    }
    if let Some(c) = s.server_cpu_affinity {
        a.extend(["-A".into(), c.to_string()]);
    }
    Ok(a)
}

/// The server's port: participant 1's data, or single-ended's port, or
/// for loopback the configured one.
fn server_port(r: &RunInput<'_>, s: &ThroughputSpec) -> Result<u16, PsError> {
    if s.single_ended {
        return Ok(s.single_ended_port.unwrap_or(5201));
    }
    if s.loopback {
        return Ok(config()?.server_port);
    }
    let p = r
        .data
        .get(1)
        .and_then(|d| d.get("server_port"))
        .ok_or(PsError::Missing("participant-data[1].server_port"))?;
    p.as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            bad(
                "participant-data[1].server_port",
                format!("{p} is not a port"),
            )
        })
}

/// The throughput run of this participant.
fn run_throughput(r: &RunInput<'_>, s: &ThroughputSpec) -> Result<Value, PsError> {
    let alone = s.single_ended || s.loopback;
    let expected = if alone { 1 } else { 2 };
    if r.data.len() != expected {
        return Err(bad(
            "participant-data",
            format!(
                "this throughput test has {expected} participant(s), the input {}",
                r.data.len()
            ),
        ));
    }
    let port = server_port(r, s)?;
    match r.participant {
        0 if s.loopback => run_loopback(r.start, s, port),
        0 => {
            sleep_until(r.start)?;
            std::thread::sleep(Duration::from_secs_f64(WAIT_SLEEP_S));
            Ok(run_client(s, port))
        }
        1 if !alone => {
            sleep_until(r.start)?;
            Ok(run_server(s, port))
        }
        p => Err(bad(
            "participant",
            format!("{p} is not a participant of this test"),
        )),
    }
}

fn run_client(s: &ThroughputSpec, port: u16) -> Value {
    let run = s
        .client_limit_s()
        .map_err(|e| e.to_string())
        .and_then(|limit| run_child(&client_args(s, port)?, limit));
    match run {
        Ok(run) => throughput_outcome(&run, "linerate printed no JSON document"),
        Err(e) => failed(e, ""),
    }
}

fn run_server(s: &ThroughputSpec, port: u16) -> Value {
    let run = s
        .server_limit_s()
        .map_err(|e| e.to_string())
        .and_then(|limit| run_child(&server_args(s, port)?, limit));
    match run {
        // A one-test server that saw no client exits quietly.
        Ok(run) => throughput_outcome(
            &run,
            "no client came to the server before its --idle-timeout (is participant 0 running?)",
        ),
        Err(e) => failed(e, ""),
    }
}

/// loopback: participant 0 runs the server and the client; the client's
/// result, else the server's.
fn run_loopback(start: &str, s: &ThroughputSpec, port: u16) -> Result<Value, PsError> {
    sleep_until(start)?;
    let (client, server) = std::thread::scope(|scope| {
        let server = scope.spawn(|| run_server(s, port));
        std::thread::sleep(Duration::from_secs_f64(WAIT_SLEEP_S));
        let client = run_client(s, port);
        let server = server
            .join()
            .unwrap_or_else(|_| failed("the server's thread failed", ""));
        (client, server)
    });
    let ok = |v: &Value| v["succeeded"] == json!(true);
    let diags = |v: &Value| v["diags"].as_str().unwrap_or("No diagnostics.").to_string();
    let err = |v: &Value| v["error"].as_str().unwrap_or("No error.").to_string();
    let mut out = if ok(&client) {
        client.clone()
    } else if ok(&server) {
        server.clone()
    } else {
        json!({
            "succeeded": false,
            "error": format!("Client:\n\n{}\n\nServer:\n\n{}", err(&client), err(&server)),
        })
    };
    out["diags"] = json!(format!(
        "Client:\n\n{}\n\nServer:\n\n{}",
        diags(&client),
        diags(&server)
    ));
    Ok(out)
}

/// A throughput participant's result from its linerate's run: the -J
/// document mapped, and in diags the command line and the document
/// (system_info redacted, as the iperf3 tool does). `no_doc` says why a
/// run that ended well printed no document.
fn throughput_outcome(run: &ChildRun, no_doc: &str) -> Value {
    let mut doc = child_doc(run);
    if let Some(info) = doc
        .as_mut()
        .and_then(|d| d.pointer_mut("/start/system_info"))
    {
        *info = json!("REDACTED");
    }
    let shown = doc
        .as_ref()
        .and_then(|d| serde_json::to_string_pretty(d).ok())
        .unwrap_or_else(|| run.stdout.clone());
    let diags = format!("{}\n\n{}", run.cmdline, shown);
    if let Some(e) = child_error(run, doc.as_ref()) {
        return failed(e, diags);
    }
    let Some(doc) = doc else {
        return failed(no_doc, diags);
    };
    match throughput_result(&doc) {
        Ok(mut v) => {
            v["diags"] = json!(diags);
            v
        }
        Err(e) => failed(e, diags),
    }
}

/// An iperf3 -J object's keys as the throughput result names them
/// (pscheduler-tool-iperf3's iperf3_parser.rename_json); others dropped.
fn rename(obj: &Value) -> Value {
    const LOOKUP: &[(&str, &str)] = &[
        ("socket", "stream-id"),
        ("start", "start"),
        ("end", "end"),
        ("bytes", "throughput-bytes"),
        ("bits_per_second", "throughput-bits"),
        ("omitted", "omitted"),
        ("jitter_ms", "jitter"),
        ("packets", "sent"),
        ("lost_packets", "lost"),
        ("retransmits", "retransmits"),
        ("snd_cwnd", "tcp-window-size"),
        ("rtt", "rtt"),
        ("mean_rtt", "rtt"),
    ];
    let mut out = Map::new();
    if let Some(o) = obj.as_object() {
        for (k, v) in o {
            if let Some((_, name)) = LOOKUP.iter().find(|(from, _)| from == k) {
                out.insert((*name).to_string(), v.clone());
            }
        }
    }
    Value::Object(out)
}

/// The throughput result of a -J document (iperf3_parser.parse_output):
/// intervals renamed; the summary from sum_sent (else sum) with the
/// receiver's bits/s, and for UDP the receiver's jitter and loss (the
/// sender's sum carries none); the streams' end figures.
fn throughput_result(doc: &Value) -> Result<Value, String> {
    if let Some(e) = doc.get("error") {
        return Err(format!("linerate failed: {}", e.as_str().unwrap_or("?")));
    }
    let intervals = doc
        .get("intervals")
        .and_then(Value::as_array)
        .ok_or("linerate's output has no 'intervals'")?;
    let end = doc.get("end").ok_or("linerate's output has no 'end'")?;
    let intervals: Vec<Value> = intervals
        .iter()
        .map(|iv| {
            let streams = iv["streams"].as_array().map_or(&[][..], Vec::as_slice);
            json!({
                "streams": streams.iter().map(rename).collect::<Vec<_>>(),
                "summary": rename(&iv["sum"]),
            })
        })
        .collect();
    let sum = end
        .get("sum_sent")
        .or_else(|| end.get("sum"))
        .ok_or("linerate's output has neither 'sum_sent' nor 'sum'")?;
    let mut summary = rename(sum);
    if let Some(rcv) = end.get("sum_received") {
        let r = rename(rcv);
        summary["receiver-throughput-bits"] = r["throughput-bits"].clone();
        for k in ["jitter", "lost"] {
            if let Some(v) = r.get(k).filter(|_| summary.get("sent").is_some()) {
                summary[k] = v.clone();
            }
        }
    }
    let streams: Vec<Value> = (end["streams"]
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter())
    .filter_map(|s| s.get("udp").or_else(|| s.get("sender")).map(rename))
    .collect();
    Ok(json!({
        "succeeded": true,
        "intervals": intervals,
        "summary": { "streams": streams, "summary": summary },
    }))
}

// ------------------------------------------------------------- rtt: run

/// The rr client's command line for a plan.
fn rr_args(s: &RttSpec, p: &RttPlan, port: u16) -> Result<Vec<String>, String> {
    let dest = *resolve(&s.dest, s.ip_version)
        .first()
        .ok_or_else(|| match s.ip_version {
            Some(v) => format!("{} has no IPv{v} address", s.dest),
            None => format!("cannot resolve {}", s.dest),
        })?;
    let mut a: Vec<String> = ["rr", "client"].map(String::from).to_vec();
    a.extend([dest.to_string(), "-p".into(), port.to_string()]);
    a.extend(["--pps".into(), p.pps.to_string()]);
    a.extend(["-t".into(), p.send_s.to_string()]);
    a.extend(["--timeout-ms".into(), (p.timeout_s * 1e3).to_string()]);
    if let Some(l) = p.length {
        a.extend(["-l".into(), l.to_string()]);
    }
    if let Some(src) = &s.source {
        let v = Some(if dest.is_ipv6() { 6 } else { 4 });
        let ip = resolve(src, v)
            .first()
            .copied()
            .ok_or_else(|| format!("{src} has no address of {dest}'s IP version"))?;
        a.extend(["-B".into(), ip.to_string()]);
    }
    a.push("-J".into());
    Ok(a)
}

/// The rtt run: participant 0 alone, against a linerate rr server at dest.
fn run_rtt(r: &RunInput<'_>, s: &RttSpec) -> Result<Value, PsError> {
    if r.participant != 0 {
        return Err(bad(
            "participant",
            format!("{} is not a participant of an rtt test", r.participant),
        ));
    }
    let plan = s.plan().map_err(|w| bad("spec", w))?;
    let port = match s.port {
        Some(p) => p,
        None => config()?.rr_port,
    };
    let args = match rr_args(s, &plan, port) {
        Ok(a) => a,
        Err(e) => return Ok(failed(e, "")),
    };
    sleep_until(r.start)?;
    let limit = plan.send_s + plan.timeout_s + RTT_SLACK_S;
    Ok(match run_child(&args, limit) {
        Ok(run) => rtt_outcome(&run),
        Err(e) => failed(e, ""),
    })
}

/// The rtt result of an rr client's run; diags: the command line and its
/// document (without the doctor's host summary).
fn rtt_outcome(run: &ChildRun) -> Value {
    let mut doc = child_doc(run);
    if let Some(o) = doc.as_mut().and_then(Value::as_object_mut) {
        o.remove("doctor");
    }
    let shown = doc
        .as_ref()
        .and_then(|d| serde_json::to_string_pretty(d).ok())
        .unwrap_or_else(|| run.stdout.clone());
    let diags = format!("{}\n\n{}", run.cmdline, shown);
    if run.killed || run.code != Some(0) {
        // rr says why (no answer at all: is a server listening?) on stderr.
        let why = run.stderr.trim().trim_start_matches("linerate: error: ");
        let e = child_error(run, None).filter(|_| why.is_empty() || run.killed);
        return failed(e.unwrap_or_else(|| format!("linerate rr: {why}")), diags);
    }
    match doc.as_ref().map(rtt_result) {
        Some(Ok(mut v)) => {
            v["diags"] = json!(diags);
            v
        }
        Some(Err(e)) => failed(e, diags),
        None => failed("linerate rr printed no JSON document", diags),
    }
}

/// The rtt result (pscheduler-test-rtt) of an rr client's -J document:
/// counts, loss, and min/mean/max of the round trips (rr keeps them in a
/// histogram of 3 significant digits: it has no per-request list, so
/// `roundtrips` is empty, and no standard deviation).
fn rtt_result(doc: &Value) -> Result<Value, String> {
    let count = |k: &str| {
        doc.pointer(&format!("/counts/{k}"))
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("linerate rr's output has no counts.{k}"))
    };
    let (sent, received, lost) = (count("sent")?, count("completed")?, count("lost")?);
    if sent == 0 {
        return Err("linerate rr sent no request".into());
    }
    let mut out = json!({
        "schema": 1,
        "succeeded": true,
        "sent": sent,
        "received": received,
        "lost": lost,
        "duplicates": count("duplicate")?,
        "loss": lost as f64 / sent as f64,
        "roundtrips": [],
    });
    for k in ["min", "mean", "max"] {
        if let Some(us) = doc
            .pointer(&format!("/latency_us/{k}"))
            .and_then(Value::as_f64)
        {
            out[k] = json!(iso_duration(us / 1e6));
        }
    }
    Ok(out)
}

// ------------------------------------------------------- merged-results

/// merged-results: input `{"test": {...}, "results": [...]}` (a result is
/// null when its participant gave none).
fn merged_results(input: &Value) -> Result<Value, PsError> {
    let test = input.get("test").ok_or(PsError::Missing("test"))?;
    let results = input
        .get("results")
        .ok_or(PsError::Missing("results"))?
        .as_array()
        .ok_or_else(|| bad("results", "is not a list"))?;
    match test_type(test).map_err(|r| bad("test", r))? {
        TestType::Throughput => merged_throughput(&ThroughputSpec::parse(spec_of(test)?)?, results),
        TestType::Rtt => merged_rtt(results),
    }
}

/// Throughput as pscheduler-tool-iperf3 merges: the source's result, the
/// destination's with `reverse` (the sender's intervals and TCP figures)
/// with the source's receiver figures; if that side has none, the other
/// side's. diags: each participant's.
fn merged_throughput(s: &ThroughputSpec, results: &[Value]) -> Result<Value, PsError> {
    let alone = s.single_ended || s.loopback;
    if !(results.len() == 2 || (results.len() == 1 && alone)) {
        return Err(bad(
            "results",
            format!(
                "expected 2 results in merged-results, got {}",
                results.len()
            ),
        ));
    }
    let ok = |v: &Value| v["succeeded"] == json!(true);
    let (source, dest) = (&results[0], results.get(1).filter(|_| !alone));
    let mut out = match dest {
        Some(d) if s.reverse && ok(d) => {
            let mut d = d.clone();
            if ok(source) {
                let (from, to) = (&source["summary"]["summary"], &mut d["summary"]["summary"]);
                for k in ["receiver-throughput-bits", "jitter", "lost"] {
                    if let Some(v) = from.get(k) {
                        to[k] = v.clone();
                    }
                }
            }
            d
        }
        Some(d) if !ok(source) && ok(d) => d.clone(),
        _ if source.is_object() => source.clone(),
        _ => json!({ "succeeded": false, "error": "participant 0 gave no result" }),
    };
    let mut diags = String::new();
    for (i, r) in [Some(source), dest].into_iter().flatten().enumerate() {
        if let Some(d) = r
            .get("diags")
            .and_then(Value::as_str)
            .filter(|d| !d.is_empty())
        {
            diags += &format!("Participant {i}:\n{d}\n");
        }
    }
    out["diags"] = json!(diags);
    Ok(out)
}

/// rtt: the one participant's result, with the fields of the rtt result.
fn merged_rtt(results: &[Value]) -> Result<Value, PsError> {
    let [r] = results else {
        return Err(bad(
            "results",
            format!("an rtt test has one result, got {}", results.len()),
        ));
    };
    let succeeded = r["succeeded"] == json!(true);
    let mut out = json!({ "schema": 1, "succeeded": succeeded });
    let fields = [
        "error",
        "diags",
        "sent",
        "received",
        "lost",
        "duplicates",
        "loss",
        "min",
        "mean",
        "max",
        "roundtrips",
    ];
    for k in fields {
        if let Some(v) = r.get(k) {
            out[k] = v.clone();
        }
    }
    if !r.is_object() {
        out["error"] = json!("participant 0 gave no result");
    }
    Ok(out)
}

// ---------------------------------------------------------------- times

/// Seconds of an ISO 8601 duration as pScheduler writes them
/// (`P[nW][nD][T[nH][nM][nS]]`, decimals allowed; no years or months).
fn iso_seconds(s: &str) -> Option<f64> {
    let rest = s.strip_prefix('P').filter(|r| !r.is_empty())?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total = units(date, &[('W', 604_800.0), ('D', 86_400.0)])?;
    if let Some(t) = time {
        total += units(t, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    }
    Some(total)
}

/// The sum of `n<unit>` parts of `s`, each unit at most once, in order.
fn units(s: &str, order: &[(char, f64)]) -> Option<f64> {
    let (mut total, mut rest, mut allowed) = (0.0, s, order);
    while !rest.is_empty() {
        let at = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..at].parse().ok().filter(|_| at > 0)?;
        let unit = rest[at..].chars().next()?;
        let i = allowed.iter().position(|(u, _)| *u == unit)?;
        total += n * allowed[i].1;
        allowed = &allowed[i + 1..];
        rest = &rest[at + unit.len_utf8()..];
    }
    Some(total)
}

/// An ISO 8601 duration of `secs` to the microsecond, as pScheduler's
/// timedelta_as_iso8601 (isodate) writes one: PT0.000173S, PT1M30S, P0D.
fn iso_duration(secs: f64) -> String {
    let us = (secs.max(0.0) * 1e6).round() as u64;
    let (days, rem) = (us / 86_400_000_000, us % 86_400_000_000);
    let mut out = String::from("P");
    if days > 0 {
        out += &format!("{days}D");
    }
    if rem > 0 {
        let (h, m) = (rem / 3_600_000_000, rem % 3_600_000_000 / 60_000_000);
        let (s, frac) = (rem % 60_000_000 / 1_000_000, rem % 1_000_000);
        out.push('T');
        if h > 0 {
            out += &format!("{h}H");
        }
        if m > 0 {
            out += &format!("{m}M");
        }
        if frac > 0 {
            out += format!("{s}.{frac:06}").trim_end_matches('0');
            out.push('S');
        } else if s > 0 {
            out += &format!("{s}S");
        }
    }
    if out == "P" { "P0D".into() } else { out }
}

/// A date and time as pScheduler writes one
/// (`2024-05-01T12:00:00.123456+00:00`; `Z`, `±HH:MM`, `±HHMM`; none is UTC).
fn parse_time(s: &str) -> Option<SystemTime> {
    let (date, time) = s.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, mo, day) = (d.next()??, d.next()??, d.next()??);
    let (clock, offset) = match time.strip_suffix('Z') {
        Some(c) => (c, 0),
        None => match time.rfind(['+', '-']) {
            Some(i) => (&time[..i], zone_offset(&time[i..])?),
            None => (time, 0),
        },
    };
    let mut c = clock.splitn(3, ':');
    let h: i64 = c.next()?.parse().ok()?;
    let mi: i64 = c.next()?.parse().ok()?;
    let sec: f64 = c.next().unwrap_or("0").parse().ok()?;
    let valid = (1..=12).contains(&mo) && (1..=31).contains(&day) && h < 24 && mi < 60;
    if !valid || !(0.0..61.0).contains(&sec) {
        return None;
    }
    let whole = days_from_civil(y, mo, day) * 86_400 + h * 3600 + mi * 60 - offset;
    let unix = whole as f64 + sec;
    (unix >= 0.0).then(|| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(unix))
}

/// Seconds east of UTC of `+HH:MM`, `-HHMM` or `+HH`.
fn zone_offset(z: &str) -> Option<i64> {
    let sign = if z.starts_with('-') { -1 } else { 1 };
    let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
    if !matches!(digits.len(), 2 | 4) || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = digits
        .get(2..)
        .filter(|m| !m.is_empty())
        .map_or(Some(0), |m| m.parse().ok())?;
    Some(sign * (h * 3600 + m * 60))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_durations_read_as_pscheduler_writes_them() {
        assert_eq!(iso_seconds("PT10S"), Some(10.0));
        assert_eq!(iso_seconds("PT0.200S"), Some(0.2));
        assert_eq!(iso_seconds("P0D"), Some(0.0));
        assert_eq!(iso_seconds("P1DT1H1M1.5S"), Some(90_061.5));
        assert_eq!(iso_seconds("P1W"), Some(604_800.0));
        for wrong in [
            "", "P", "PT", "10S", "PT1S1M", "P1M", "P1Y", "PT-1S", "PTS", "PT1X",
        ] {
            assert_eq!(iso_seconds(wrong), None, "{wrong}");
        }
    }

    #[test]
    fn iso_durations_written_as_isodate_writes_them() {
        assert_eq!(iso_duration(0.0), "P0D");
        assert_eq!(iso_duration(0.000_173_824), "PT0.000174S");
        assert_eq!(iso_duration(0.5), "PT0.5S");
        assert_eq!(iso_duration(9.0), "PT9S");
        assert_eq!(iso_duration(90.25), "PT1M30.25S");
        assert_eq!(iso_duration(3600.0), "PT1H");
        assert_eq!(iso_duration(86_401.0), "P1DT1S");
    }

    #[test]
    fn times_in_every_zone_form() {
        let at = |s: &str| {
            parse_time(s).map(|t| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64()
            })
        };
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(at("2024-03-01T12:00:00+00:00"), Some(1_709_294_400.0));
        assert_eq!(at("2024-03-01T08:00:00-04:00"), Some(1_709_294_400.0));
        assert_eq!(at("2024-03-01T13:30:00+0130"), Some(1_709_294_400.0));
        assert_eq!(at("2024-03-01T12:00:00.250000"), Some(1_709_294_400.25));
        for wrong in [
            "2024-03-01",
            "2024-13-01T00:00:00Z",
            "2024-03-01T25:00:00Z",
            "x",
        ] {
            assert_eq!(at(wrong), None, "{wrong}");
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
