//! Why a rig could not be built or used: the error of every part of it.

use std::time::Duration;
use thiserror::Error;

/// Why a rig could not be built or used.
#[derive(Debug, Error)]
pub enum RigError {
    #[error("{cmd}: {stderr} ({status})")]
    Command {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("could not run {cmd}: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("rig configuration: {0}")]
    Config(String),
    #[error("network namespace {ns}: {source}")]
    Netns { ns: String, source: std::io::Error },
    #[error("unexpected output from {cmd}: {what}")]
    Parse { cmd: String, what: String },
    #[error("{cmd}: no answer within {after:?} (ended)")]
    Timeout { cmd: String, after: Duration },
    #[error("rig setup: {0}")]
    Setup(String),
}
