//! What a run measured, typed: every mode's result is an [`Outcome`] that
//! owns its figures, writes its own `-J` document and human summary, and
//! names the one figure a repetition measures. Reporters and `--repeat`
//! take outcomes; nothing reads a result back out of its JSON.

use serde_json::Value;
use std::sync::Arc;

/// The figure a repetition (`--repeat`, `--ci-target`) measures over runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    /// What it is, as the repetition's report names it ("receiver pps").
    pub name: &'static str,
    /// Its unit for people ("frames/s", "receiver bit/s").
    pub unit: &'static str,
    pub value: f64,
}

/// A mode's result.
pub trait Outcome: std::fmt::Debug + Send + Sync {
    /// The mode's final JSON document (`-J`), written from the typed figures.
    fn document(&self) -> Value;
    /// The mode's human summary (the layout its users know), printed after
    /// the interval lines.
    fn text(&self) -> String;
    /// The one figure a repetition measures; `None` where the mode has
    /// none or this run did not measure it.
    fn figure(&self) -> Option<Figure> {
        None
    }
}

/// A shared, typed outcome: what `End` carries and a repetition keeps.
pub type SharedOutcome = Arc<dyn Outcome>;

/// A run that failed before it measured anything worth keeping (its
/// document: `{"error": …}`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Failed {
    pub error: String,
}

impl Outcome for Failed {
    fn document(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    fn text(&self) -> String {
        String::new()
    }
}

/// An outcome given as a finished document and summary, with its figure:
/// for tests and for documents that arrive whole from elsewhere.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub document: Value,
    pub text: String,
    pub figure: Option<Figure>,
}

impl Outcome for Written {
    fn document(&self) -> Value {
        self.document.clone()
    }

    fn text(&self) -> String {
        self.text.clone()
    }

    fn figure(&self) -> Option<Figure> {
        self.figure
    }
}
