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
pub mod error;
pub mod input;
pub mod plan;
pub mod result;
pub mod rtt;
pub mod spec;
pub mod throughput;
pub mod time;

use auth::TaskAuth;
pub use error::Error;
use error::bad;
use input::participant_number;
pub use input::{ParticipantData, RunInput, Schedule};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use spec::{Test, TestType};

/// The tool's name in pScheduler (its plugin directory's name).
pub const TOOL: &str = "linerate";
/// participant-data's schema: 2 and later say the participant takes part
/// in authentication (the iperf3 tool's hint), 3 adds nothing linerate uses.
const PARTICIPANT_DATA_SCHEMA: u64 = 3;

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
