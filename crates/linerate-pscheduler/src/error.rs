//! Why a method could not read its input.

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

pub fn bad(what: impl Into<String>, why: impl Into<String>) -> Error {
    Error::Bad {
        what: what.into(),
        why: why.into(),
    }
}
