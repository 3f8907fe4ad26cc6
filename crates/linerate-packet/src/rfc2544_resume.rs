//! `rfc2544 --resume FILE`: a campaign picked up from a partial result
//! (an interrupted run's `-J` document, or its `--json-stream` lines). The
//! file's settings must be the command's; each throughput search it holds
//! is taken back as its trials (a finished search ends on them again
//! without a trial, an interrupted one goes on from the bounds they set,
//! the trial cut short run again).

use crate::rfc2544::{FrameSize, Trial};
use serde_json::Value;

/// Why a file cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("--resume: {0} (give the -J document or --json-stream output of an rfc2544 run)")]
    NotAResult(String),
    #[error(
        "--resume: the file's {field} is {file}, this command's is {command}: a search resumes only with the settings it ran with"
    )]
    Differs {
        field: &'static str,
        file: String,
        command: String,
    },
}

/// The settings a resumed run must share with the file's (the keys of
/// the document's `config`): what the device is, what is sent and how
/// the searches judge and move.
pub const SETTINGS: &[&str] = &[
    "tx_iface",
    "rx_iface",
    "dst_mac",
    "src_ip",
    "dst_ip",
    "profile",
    "sizes",
    "tests",
    "loss_ratio",
    "trial_time_s",
    "max_rate",
    "resolution",
    "offered_min",
    "max_trials",
    "backend",
    "bidir",
    "catch_up",
    "burst_tolerance",
    "spoiled_max",
    "drain_s",
    "warmup_s",
];

/// One search of the file: its frame size (as the document names it),
/// loss ratio and trials.
#[derive(Debug)]
struct Search {
    frame_size: Value,
    loss_allowed: f64,
    trials: Vec<Trial>,
}

/// A partial result, checked against the command's settings.
#[derive(Debug)]
pub struct Resumed {
    searches: Vec<Search>,
}

/// The rfc2544 document in `text`: the whole text (`-J`), or the result
/// of the last `end` line (`--json-stream`).
fn document(text: &str) -> Result<Value, ResumeError> {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        return Ok(v);
    }
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "end")
        .map(|e| e["data"]["result"].clone())
        .ok_or_else(|| {
            ResumeError::NotAResult("neither a JSON document nor JSON lines with an end".into())
        })
}

impl Resumed {
    /// Reads a partial result and checks its settings against `config`
    /// (the command's, as its document will have them).
    pub fn parse(text: &str, config: &Value) -> Result<Resumed, ResumeError> {
        let doc = document(text)?;
        let Some(file) = doc.get("config").filter(|c| c.is_object()) else {
            return Err(ResumeError::NotAResult("no rfc2544 config in it".into()));
        };
        for &field in SETTINGS {
            let (f, c) = (&file[field], &config[field]);
            if f != c {
                return Err(ResumeError::Differs {
                    field,
                    file: f.to_string(),
                    command: c.to_string(),
                });
            }
        }
        let searches = match doc.get("throughput") {
            None => Vec::new(),
            Some(Value::Array(a)) => a.iter().map(search).collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(ResumeError::NotAResult(
                    "its throughput is not a list".into(),
                ));
            }
        };
        Ok(Resumed { searches })
    }

    /// The trials the file holds of the search for `size` at
    /// `loss_allowed` (given that size), taken out; none when it has none.
    pub fn take(&mut self, size: &FrameSize, loss_allowed: f64) -> Vec<Trial> {
        let name = serde_json::to_value(size).unwrap_or_default();
        let Some(i) = (self.searches.iter())
            .position(|s| s.frame_size == name && s.loss_allowed == loss_allowed)
        else {
            return Vec::new();
        };
        let mut trials = self.searches.remove(i).trials;
        trials.iter_mut().for_each(|t| t.frame_size = size.clone());
        trials
    }

    /// How many trials the file holds over all its searches.
    pub fn trials(&self) -> usize {
        self.searches.iter().map(|s| s.trials.len()).sum()
    }
}

fn search(v: &Value) -> Result<Search, ResumeError> {
    let bad = |what: &str| ResumeError::NotAResult(format!("a throughput search {what}"));
    let trials = v.get("trials").ok_or_else(|| bad("has no trials"))?;
    Ok(Search {
        frame_size: v
            .get("frame_size")
            .cloned()
            .ok_or_else(|| bad("has no frame_size"))?,
        loss_allowed: (v.get("loss_allowed").and_then(Value::as_f64))
            .ok_or_else(|| bad("has no loss_allowed"))?,
        trials: serde_json::from_value(trials.clone())
            .map_err(|e| bad(&format!("has a trial that cannot be read: {e}")))?,
    })
}
