//! linerate as a perfSONAR pScheduler tool, without Python. pScheduler
//! runs a tool as six executables (enumerate, can-run, duration,
//! participant-data, run, merged-results), JSON on standard input, JSON
//! on standard output; `linerate pscheduler <method>` is each of them and
//! calls [`answer`]. `pscheduler/` at the repository root holds the
//! one-line wrappers.
//!
//! The shapes are those of perfsonar/pscheduler: the methods' input and
//! output as pscheduler-tool-iperf3 (throughput) and the ping tools (rtt)
//! read and write them, the specs and results as pscheduler-test-throughput
//! (spec schemas 1-7) and pscheduler-test-rtt (1-4) define them, each a
//! typed struct here (serde derives).
//!
//! - throughput: participant 1 runs a one-test iperf3-compatible server,
//!   participant 0 linerate's iperf3 client against it, both in this
//!   process through `linerate-iperf` and the run contract; each result
//!   from its test's typed outcome; authenticated per task as the iperf3
//!   tool does ([`auth`]).
//! - rtt: participant 0 runs linerate's rr client against a `linerate rr
//!   server` at dest.
//!
//! Input that is not what pScheduler sends is an [`Error`] (the binary
//! exits 2 with it); a test that could not run is a result with
//! `"succeeded": false` and the reason.

pub mod auth;
pub mod config;
pub mod plan;
pub mod result;
pub mod rtt;
pub mod spec;
pub mod throughput;
pub mod time;

use auth::TaskAuth;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use spec::{Test, TestType};
use std::time::{Duration, SystemTime};

/// The tool's name in pScheduler (its plugin directory's name).
pub const TOOL: &str = "linerate";
/// How far ahead of its start a run may be handed over.
const MAX_EARLY: Duration = Duration::from_secs(600);
/// participant-data's schema: 2 and later say the participant takes part
/// in authentication (the iperf3 tool's hint), 3 adds nothing linerate uses.
const PARTICIPANT_DATA_SCHEMA: u64 = 3;

/// Why a method could not read its input.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the input is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("the input has no '{0}'")]
    Missing(&'static str),
    #[error("{what}: {why}")]
    Bad { what: String, why: String },
    #[error("authentication: {0}")]
    Auth(String),
}

pub(crate) fn bad(what: impl Into<String>, why: impl Into<String>) -> Error {
    Error::Bad {
        what: what.into(),
        why: why.into(),
    }
}

/// The six methods of a pScheduler tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Enumerate,
    CanRun,
    Duration,
    ParticipantData,
    Run,
    MergedResults,
}

/// A method's answer: its JSON (pretty), and the warnings to say on
/// standard error (which pScheduler logs).
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub json: String,
    pub warnings: Vec<String>,
}

/// Runs one method on its input (the text pScheduler sent).
pub fn answer(method: Method, input: &str) -> Result<Answer, Error> {
    let mut warnings = Vec::new();
    let json = match method {
        Method::Enumerate => pretty(&enumerate()),
        Method::CanRun => pretty(&spec::can_run(&read::<Test>(input)?)),
        Method::Duration => pretty(&duration(&read::<Test>(input)?)?),
        Method::ParticipantData => pretty(&participant_data(&read(input)?, &mut warnings)?),
        Method::Run => run(&read(input)?, &mut warnings)?,
        Method::MergedResults => merged_results(&read(input)?)?,
    };
    Ok(Answer { json, warnings })
}

fn pretty<T: Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("\"{e}\""))
}

/// The input as `T`: JSON, an object, of the type's shape.
fn read<T: serde::de::DeserializeOwned>(input: &str) -> Result<T, Error> {
    let v: Value = serde_json::from_str(input).map_err(Error::NotJson)?;
    if !v.is_object() {
        return Err(bad("the input", "is not a JSON object"));
    }
    serde_json::from_value(v).map_err(|e| bad("the input", e.to_string()))
}

/// enumerate's answer.
#[derive(Debug, Serialize)]
pub struct Enumeration {
    pub schema: u64,
    pub name: &'static str,
    pub description: &'static str,
    pub version: &'static str,
    pub tests: [&'static str; 2],
    pub preference: i64,
    pub maintainer: Maintainer,
}

#[derive(Debug, Serialize)]
pub struct Maintainer {
    pub name: &'static str,
}

/// The tool as pScheduler lists it. The preference is below iperf3's
/// (10) and ping's (0): installing linerate changes no test that does not
/// ask for it (`--tool linerate`).
pub fn enumerate() -> Enumeration {
    Enumeration {
        schema: 1,
        name: TOOL,
        description: "Measure throughput (iperf3-compatible) and round-trip time (rr) with linerate",
        version: env!("CARGO_PKG_VERSION"),
        tests: ["throughput", "rtt"],
        preference: -10,
        maintainer: Maintainer {
            name: "linerate maintainers",
        },
    }
}

#[derive(Debug, Serialize)]
struct DurationOut {
    duration: String,
}

/// duration: how long a run takes (throughput as the iperf3 tool counts
/// it; rtt: the requests, the last one's timeout and 2 s).
fn duration(test: &Test) -> Result<DurationOut, Error> {
    let duration = match test.test_type().map_err(|r| bad("type", r))? {
        TestType::Throughput => {
            test.spec()?;
            format!("PT{}S", test.throughput()?.run_seconds()?)
        }
        TestType::Rtt => {
            let p = test.rtt()?.plan().map_err(|w| bad("spec", w))?;
            time::iso_duration(p.send_s + p.timeout_s + rtt::RTT_SLACK_S)
        }
    };
    Ok(DurationOut { duration })
}

/// A participant's data, as participant-data writes it and run reads it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ParticipantData {
    pub schema: Option<u64>,
    #[serde(rename = "linerate-version", skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Participant 1 of a throughput test: where its server listens (read
    /// as any JSON value, so one that is not a port says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_port: Option<Value>,
    /// Participant 1 of a throughput test: the task's credentials.
    #[serde(rename = "_auth", skip_serializing_if = "Option::is_none")]
    pub auth: Option<TaskAuth>,
}

#[derive(Debug, Deserialize)]
struct ParticipantDataInput {
    participant: Option<Value>,
    test: Option<Test>,
}

/// participant-data: `{"participant": N, "test": {...}}`; participant 1 of
/// a throughput test says its server's port and makes the task's
/// credentials (as the iperf3 tool's).
fn participant_data(
    input: &ParticipantDataInput,
    warnings: &mut Vec<String>,
) -> Result<ParticipantData, Error> {
    let p = participant_number(input.participant.as_ref())?;
    let test = input.test.as_ref().ok_or(Error::Missing("test"))?;
    let kind = test.test_type().map_err(|r| bad("test", r))?;
    let mut out = ParticipantData {
        schema: Some(PARTICIPANT_DATA_SCHEMA),
        version: Some(env!("CARGO_PKG_VERSION").into()),
        ..Default::default()
    };
    match (kind, p) {
        (_, 0) => {}
        (TestType::Throughput, 1) => {
            let (c, w) = config::read(&config::path());
            warnings.extend(w);
            out.server_port = Some(c.server_port.into());
            out.auth = Some(TaskAuth::make()?);
        }
        (_, p) => {
            return Err(bad(
                "participant",
                format!("{p} is not a participant of this test"),
            ));
        }
    }
    Ok(out)
}

fn participant_number(v: Option<&Value>) -> Result<u64, Error> {
    v.ok_or(Error::Missing("participant"))?
        .as_u64()
        .ok_or_else(|| bad("participant", "is not a participant number"))
}

#[derive(Debug, Deserialize)]
pub struct Schedule {
    pub start: Option<String>,
}

/// What run is given (pscheduler-server's runner builds it).
#[derive(Debug, Deserialize)]
pub struct RunInput {
    pub participant: Option<Value>,
    #[serde(rename = "participant-data")]
    pub participant_data: Option<Vec<ParticipantData>>,
    pub schedule: Option<Schedule>,
    pub test: Option<Test>,
}

impl RunInput {
    pub fn participant(&self) -> Result<u64, Error> {
        participant_number(self.participant.as_ref())
    }

    pub fn data(&self) -> Result<&[ParticipantData], Error> {
        self.participant_data
            .as_deref()
            .ok_or(Error::Missing("participant-data"))
    }

    fn start(&self) -> Result<&str, Error> {
        self.schedule
            .as_ref()
            .and_then(|s| s.start.as_deref())
            .ok_or(Error::Missing("schedule.start"))
    }

    /// Sleeps until the run's start (pScheduler hands a run over shortly
    /// before it); a start already past is now.
    pub fn sleep_until_start(&self) -> Result<(), Error> {
        let start = self.start()?;
        let at = time::parse_time(start).ok_or_else(|| {
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
}

/// run: this participant's part; its result.
fn run(input: &RunInput, warnings: &mut Vec<String>) -> Result<String, Error> {
    let test = input.test.as_ref().ok_or(Error::Missing("test"))?;
    input.participant()?;
    input.data()?;
    input.start()?;
    let kind = test.test_type().map_err(|r| bad("test", r))?;
    let (conf, w) = config::read(&config::path());
    warnings.extend(w);
    Ok(match kind {
        TestType::Throughput => pretty(&throughput::run(
            input,
            &test.throughput()?,
            conf.server_port,
        )?),
        TestType::Rtt => pretty(&rtt::run(input, &test.rtt()?, conf.rr_port)?),
    })
}

#[derive(Debug, Deserialize)]
struct MergeInput {
    test: Option<Test>,
    results: Option<Vec<Value>>,
}

/// merged-results: `{"test": {...}, "results": [...]}` (a result is null
/// when its participant gave none).
fn merged_results(input: &MergeInput) -> Result<String, Error> {
    let test = input.test.as_ref().ok_or(Error::Missing("test"))?;
    let results = input.results.as_ref().ok_or(Error::Missing("results"))?;
    let kind = test.test_type().map_err(|r| bad("test", r))?;
    Ok(match kind {
        TestType::Throughput => {
            let s = test.throughput()?;
            let typed = typed_results(results)?;
            pretty(&result::merge(
                s.reverse,
                s.single_ended || s.loopback,
                &typed,
            )?)
        }
        TestType::Rtt => pretty(&rtt::merge(&typed_results(results)?)?),
    })
}

/// Each participant's result, typed; null is none.
fn typed_results<T: serde::de::DeserializeOwned>(
    results: &[Value],
) -> Result<Vec<Option<T>>, Error> {
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            serde_json::from_value::<Option<T>>(r.clone())
                .map_err(|e| bad(format!("results[{i}]"), e.to_string()))
        })
        .collect()
}
