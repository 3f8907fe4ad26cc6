//! What `run` is given (pscheduler-server's runner builds it) and what
//! participant-data hands over, typed.

use crate::auth::TaskAuth;
use crate::error::{Error, bad};
use crate::spec::Test;
use crate::time;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{Duration, SystemTime};

/// How far ahead of its start a run may be handed over.
const MAX_EARLY: Duration = Duration::from_secs(600);

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

pub fn participant_number(v: Option<&Value>) -> Result<u64, Error> {
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

    pub fn start(&self) -> Result<&str, Error> {
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
