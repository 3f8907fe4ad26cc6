//! The rtt test through linerate's rr client, in this process, against a
//! `linerate rr server` at dest; the result shaped as pscheduler-tool-ping's
//! (pscheduler-test-rtt's result): counts, loss, and min, mean, max and
//! stddev of the round trips, from the rr client's typed report.

use crate::error::{Error, bad};
use crate::input::RunInput;
use crate::plan::resolve;
use crate::spec::{RttPlan, RttSpec};
use crate::time::iso_duration;
use linerate_rr::RrError;
use linerate_rr::client::{ClientConfig, ClientReport, Load};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Seconds an rtt run is given beyond its requests and timeout.
pub const RTT_SLACK_S: f64 = 2.0;
/// The most round trips listed (an rtt test's `count` is rarely above a
/// few hundred; rr keeps the first this many answers).
const KEEP_MAX: usize = 100_000;
/// rr's request size when the spec has no length (`linerate rr client`'s).
const REQUEST_BYTES: usize = 64;

/// An rtt result (pscheduler-test-rtt), as the ping tools write it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RttResult {
    #[serde(default)]
    pub schema: u64,
    /// Absent: not succeeded.
    #[serde(default)]
    pub succeeded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diags: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sent: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub received: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stddev: Option<String>,
    /// Each answer as it arrived, as the ping tools list replies.
    #[serde(default)]
    pub roundtrips: Vec<Roundtrip>,
    /// Answers that arrived after one to a later request (as the ping
    /// tool counts them from its list).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorders: Option<u64>,
}

/// One reply (pscheduler-test-rtt's `roundtrip`): the request's number
/// (from 1), the reply's UDP payload length, who answered, the round trip.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Roundtrip {
    pub seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt: Option<String>,
}

/// The ping tools' list from rr's kept answers: each answer in time and
/// each duplicate (late and unknown ones are not replies to a waiting
/// request), and how many arrived after a later request's.
fn roundtrips(r: &ClientReport) -> (Vec<Roundtrip>, u64) {
    use linerate_rr::client::RoundtripKind;
    let ip = r.config.server.ip().to_string();
    let length = r.config.response_size as u64;
    let mut list = Vec::new();
    let (mut reorders, mut highest) = (0, None);
    for a in &r.roundtrips {
        let rtt = match a.answer {
            RoundtripKind::Answered => a.rtt_ns,
            RoundtripKind::Duplicate => None,
            RoundtripKind::Late | RoundtripKind::Unknown => continue,
        };
        if a.answer == RoundtripKind::Answered {
            if highest.is_some_and(|h| a.seq < h) {
                reorders += 1;
            }
            highest = highest.max(Some(a.seq));
        }
        list.push(Roundtrip {
            seq: a.seq + 1,
            length: Some(length),
            ip: Some(ip.clone()),
            rtt: rtt.map(|ns| iso_duration(ns as f64 / 1e9)),
        });
    }
    (list, reorders)
}

impl RttResult {
    fn failed(error: impl Into<String>, diags: impl Into<String>) -> Self {
        RttResult {
            schema: 1,
            error: Some(error.into()),
            diags: Some(diags.into()),
            ..Default::default()
        }
    }
}

/// The result of an rr client's report: counts, loss (lost/sent) and the
/// round trips' statistics (rr keeps them in a histogram of 3 significant
/// digits).
pub fn from_report(r: &ClientReport) -> Result<RttResult, String> {
    let c = &r.total;
    if c.sent == 0 {
        return Err("linerate rr sent no request".into());
    }
    let iso = |ns: f64| Some(iso_duration(ns / 1e9));
    let l = r.latency.as_ref();
    let (list, reorders) = roundtrips(r);
    Ok(RttResult {
        schema: 1,
        succeeded: true,
        error: None,
        diags: None,
        sent: Some(c.sent),
        received: Some(c.completed),
        lost: Some(c.lost),
        duplicates: Some(c.duplicate),
        loss: Some(c.lost as f64 / c.sent as f64),
        min: l.and_then(|l| iso(l.min as f64)),
        mean: l.and_then(|l| iso(l.mean)),
        max: l.and_then(|l| iso(l.max as f64)),
        stddev: l.and_then(|l| iso(l.stddev)),
        roundtrips: list,
        reorders: Some(reorders),
    })
}

/// The rr client's configuration for a plan, and its command line.
fn client_config(s: &RttSpec, p: &RttPlan, port: u16) -> Result<(ClientConfig, String), String> {
    let dest = *resolve(&s.dest, s.ip_version)
        .first()
        .ok_or_else(|| match s.ip_version {
            Some(v) => format!("{} has no IPv{v} address", s.dest),
            None => format!("cannot resolve {}", s.dest),
        })?;
    let bind = match &s.source {
        Some(src) => Some(
            resolve(src, Some(if dest.is_ipv6() { 6 } else { 4 }))
                .first()
                .copied()
                .ok_or_else(|| format!("{src} has no address of {dest}'s IP version"))?,
        ),
        None => None,
    };
    let size = p.length.map_or(REQUEST_BYTES, |l| l as usize);
    let mut line = format!(
        "linerate rr client {dest} -p {port} --pps {} -t {} --timeout-ms {}",
        p.pps,
        p.send_s,
        p.timeout_s * 1e3
    );
    if let Some(l) = p.length {
        line += &format!(" -l {l}");
    }
    if let Some(b) = bind {
        line += &format!(" -B {b}");
    }
    line += " -J";
    let cfg = ClientConfig {
        server: SocketAddr::new(dest, port),
        bind,
        cores: Vec::new(),
        threads: 1,
        flows: 1,
        load: Load::Open { tps: p.pps as f64 },
        request_size: size,
        response_size: size,
        duration: Duration::from_secs_f64(p.send_s),
        timeout: Duration::from_secs_f64(p.timeout_s),
        interval: None,
        busy_poll: false,
    };
    Ok((cfg, line))
}

/// The rtt run: participant 0 alone, against a linerate rr server at dest.
pub fn run(r: &RunInput, s: &RttSpec, configured_port: u16) -> Result<RttResult, Error> {
    let participant = r.participant()?;
    if participant != 0 {
        return Err(bad(
            "participant",
            format!("{participant} is not a participant of an rtt test"),
        ));
    }
    let plan = s.plan().map_err(|w| bad("spec", w))?;
    let port = s.port.unwrap_or(configured_port);
    let (cfg, line) = match client_config(s, &plan, port) {
        Ok(c) => c,
        Err(e) => return Ok(RttResult::failed(e, "")),
    };
    r.sleep_until_start()?;
    let limit = plan.send_s + plan.timeout_s + RTT_SLACK_S;
    let stop = AtomicBool::new(false);
    let (ran, late) = crate::throughput::bounded(limit, &stop, || {
        linerate_rr::client::run_client_keeping(&cfg, KEEP_MAX, &stop, |_| {})
    });
    Ok(result_of(&line, ran, late.then_some(limit)))
}

fn result_of(line: &str, ran: Result<ClientReport, RrError>, late: Option<f64>) -> RttResult {
    let report = match &ran {
        Ok(r) => Some(r),
        Err(RrError::NoAnswer { report, .. }) => Some(report.as_ref()),
        Err(_) => None,
    };
    let shown = report
        .and_then(|r| serde_json::to_string_pretty(&r.json()).ok())
        .unwrap_or_default();
    let diags = format!("{line}\n\n{shown}");
    if let Some(limit) = late {
        return RttResult::failed(
            format!("linerate rr did not finish within {limit:.0} s and was stopped"),
            diags,
        );
    }
    match ran {
        Err(e) => RttResult::failed(format!("linerate rr: {e}"), diags),
        Ok(r) => match from_report(&r) {
            Ok(mut out) => {
                out.diags = Some(diags);
                out
            }
            Err(e) => RttResult::failed(e, diags),
        },
    }
}

/// merged-results of rtt: the one participant's result (as the ping
/// tools'); none is a failure.
pub fn merge(results: &[Option<RttResult>]) -> Result<RttResult, Error> {
    let [r] = results else {
        return Err(bad(
            "results",
            format!("an rtt test has one result, got {}", results.len()),
        ));
    };
    Ok(match r {
        Some(r) => RttResult {
            schema: 1,
            ..r.clone()
        },
        None => RttResult {
            schema: 1,
            error: Some("participant 0 gave no result".into()),
            ..Default::default()
        },
    })
}
