//! What a run's `Start` says of its settings, derived: a profile's
//! streams as blast and rfc2544 send them.

use crate::ProfileConfig;
use linerate_traffic::profile::{Pattern, Rate};
use serde::Serialize;

/// A stream as the run's settings give it: its id, rate (resolved, the
/// profile's scale applied) and pattern.
#[derive(Debug, Clone, Serialize)]
pub struct StreamSettings {
    name: String,
    id: u16,
    rate: RateSettings,
    pattern: String,
    start_delay_s: f64,
    count: Option<u64>,
    duration_s: Option<f64>,
    seed: u64,
}

/// A stream's rate: frames or bits per second, and which bits it counts.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
enum RateSettings {
    Pps { pps: f64 },
    Bps { bps: f64, counts: &'static str },
}

impl ProfileConfig {
    /// Each stream as the run's settings give it.
    pub fn stream_settings(&self) -> Vec<StreamSettings> {
        let rate = |r: &Rate| match *r {
            Rate::Pps(p) => RateSettings::Pps {
                pps: p * self.scale,
            },
            Rate::Bps { bps, extra_bytes } => RateSettings::Bps {
                bps: bps * self.scale,
                counts: if extra_bytes == 20 {
                    "L1 (on the wire)"
                } else {
                    "L2 (frames)"
                },
            },
        };
        let pattern = |p: &Pattern| match *p {
            Pattern::Fixed => "fixed".to_string(),
            Pattern::Poisson => "poisson".to_string(),
            Pattern::Burst { frames } => format!("bursts of {frames}"),
            Pattern::OnOff { on, off } => format!("on {on:?}, off {off:?}"),
        };
        (self.profile.streams.iter().zip(&self.rates))
            .map(|(s, r)| StreamSettings {
                name: s.name.clone(),
                id: s.id,
                rate: rate(r),
                pattern: pattern(&s.pattern),
                start_delay_s: s.start_delay.as_secs_f64(),
                count: s.count,
                duration_s: s.duration.map(|d| d.as_secs_f64()),
                seed: s.seed,
            })
            .collect()
    }
}
