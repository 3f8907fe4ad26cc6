//! `linerate pscheduler <method>`: linerate as a perfSONAR pScheduler tool.
//! The flags and the call; the tool is `linerate-pscheduler`.

use crate::output::Console;
use linerate_pscheduler::Method as M;
use std::io::Read;

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
    /// This participant's data for a run (the server's port, the task's
    /// credentials).
    ParticipantData,
    /// Run this participant's part of the test.
    Run,
    /// One result from the participants' results.
    MergedResults,
}

/// Runs one method: reads its JSON, prints its JSON. Bad input is an error
/// (exit 2 with the message); warnings go to standard error.
pub fn run(a: &PschedulerArgs, c: &Console) -> anyhow::Result<u8> {
    let method = match a.method {
        Method::Enumerate => M::Enumerate,
        Method::CanRun => M::CanRun,
        Method::Duration => M::Duration,
        Method::ParticipantData => M::ParticipantData,
        Method::Run => M::Run,
        Method::MergedResults => M::MergedResults,
    };
    let mut input = String::new();
    if method != M::Enumerate {
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|e| anyhow::anyhow!("cannot read the JSON input: {e}"))?;
    }
    let answer = linerate_pscheduler::answer(method, &input)?;
    for w in &answer.warnings {
        eprintln!("linerate: warning: {w}");
    }
    crate::say!(c, "{}", answer.json);
    Ok(0)
}
