//! What the doctor says: findings with severity, evidence, reason and fix,
//! and the checks it could not make (never a silent "all good").

use serde::Serialize;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Worth knowing; does not limit results.
    Info,
    /// May limit results in some tests.
    Warning,
    /// Will limit results: fix before trusting a number.
    Limit,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Stable identifier, e.g. `nic.rss_table`.
    pub id: &'static str,
    pub severity: Severity,
    pub title: String,
    /// What was read, where.
    pub evidence: Vec<String>,
    pub why: String,
    /// The command that fixes it, if there is one.
    pub fix: Option<String>,
}

/// A check that could not be made, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unchecked {
    pub check: &'static str,
    pub reason: String,
}

/// A check's outcome: findings (possibly none: "checked, fine") or a reason
/// it could not run.
pub type Outcome = Result<Vec<Finding>, Unchecked>;

pub fn unchecked(check: &'static str, reason: impl std::fmt::Display) -> Unchecked {
    Unchecked {
        check,
        reason: reason.to_string(),
    }
}
