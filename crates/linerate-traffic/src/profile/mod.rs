//! Traffic profiles: several streams read from a TOML file, each with its
//! headers (Ethernet, 802.1Q, IPv4 or IPv6, UDP or TCP) whose fields are
//! fixed, ranged (increment or decrement), random (seeded) or listed, its
//! frame sizes (fixed, ranged, listed, IMIX), its rate (pps, bit/s on the
//! wire or of frames, a share of the line rate), its departure pattern
//! (evenly spaced, bursts, on-off, Poisson), a start delay and a duration
//! or frame count.
//!
//! `read` turns the file into a [`Profile`] (every error names the file,
//! the line and the field's path); `frames` builds each stream's frames
//! (the same seed gives the same frames, byte for byte); `schedule` gives
//! each stream's departure times and merges them in time order. No I/O
//! beyond reading the file: `linerate-packet`'s profile sender moves the
//! bytes.
//!
//! A stream's frames all carry one probe flow id, the stream's id: the
//! sink's per-flow accounting (loss, reordering, duplicates, latency,
//! jitter) of that id is the stream's, whatever its header fields do.

mod field;
mod frames;
mod node;
mod read;
mod rng;
mod schedule;

pub use field::{Field, FieldGen, Mode};
pub use frames::StreamFrames;
pub use rng::SplitMix;
pub use schedule::{Departure, Pacer, Schedule};

use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// Most streams a profile may hold.
pub const STREAMS_MAX: usize = 256;

/// A profile that cannot be used: where, and why.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ProfileError {
    #[error("{file}: {message}")]
    Read { file: String, message: String },
    /// A field with a wrong value, or a TOML syntax error (`field` empty).
    #[error("{file}:{line}: {}{message}", field_part(field))]
    Field {
        file: String,
        line: usize,
        field: String,
        message: String,
    },
}

fn field_part(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("field '{field}': ")
    }
}

impl ProfileError {
    /// The line a field error points at.
    pub fn line(&self) -> Option<usize> {
        match self {
            ProfileError::Field { line, .. } => Some(*line),
            ProfileError::Read { .. } => None,
        }
    }

    /// The field's path (`streams[1].ipv4.src`), if the error has one.
    pub fn field(&self) -> Option<&str> {
        match self {
            ProfileError::Field { field, .. } if !field.is_empty() => Some(field),
            _ => None,
        }
    }
}

/// A stream's rate as the file gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSpec {
    Pps(f64),
    /// Bits per second on the wire (preamble, SFD and gap: 20 B a frame).
    BpsL1(f64),
    /// Bits per second of frames (FCS included).
    BpsL2(f64),
    /// A share of the line rate (L1), in percent.
    LinePercent(f64),
}

/// A stream's rate once the line rate is known: frames per second, or
/// bits per second with the bytes each frame adds on the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    Pps(f64),
    /// bit/s, and the bytes counted per frame beyond its size (20 for L1).
    Bps {
        bps: f64,
        extra_bytes: u32,
    },
}

impl Rate {
    /// The gap (ns) a frame of `size` bytes takes at this rate.
    pub fn gap_ns(&self, size: u16) -> f64 {
        match *self {
            Rate::Pps(p) => 1e9 / p,
            Rate::Bps { bps, extra_bytes } => {
                (f64::from(size) + f64::from(extra_bytes)) * 8.0 * 1e9 / bps
            }
        }
    }

    /// The same rate times `k`.
    pub fn scaled(&self, k: f64) -> Rate {
        match *self {
            Rate::Pps(p) => Rate::Pps(p * k),
            Rate::Bps { bps, extra_bytes } => Rate::Bps {
                bps: bps * k,
                extra_bytes,
            },
        }
    }
}

/// How a stream's departures fall around its mean gap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pattern {
    /// Evenly spaced at the rate.
    Fixed,
    /// `frames` at once, the bursts spaced so that the mean rate holds.
    Burst { frames: u32 },
    /// Sent at the rate during `on`, nothing during `off` (the mean rate
    /// is the rate times on / (on + off)).
    OnOff { on: Duration, off: Duration },
    /// Exponential gaps of the rate's mean (a Poisson process).
    Poisson,
}

/// The fields of a stream's headers.
#[derive(Debug, Clone, PartialEq)]
pub struct Headers {
    /// `None`: the interface's MAC.
    pub src_mac: Option<Field>,
    pub dst_mac: Field,
    /// 802.1Q: the VLAN id (a field) and priority.
    pub vlan: Option<(Field, u8)>,
    pub ipv6: bool,
    pub src_ip: Field,
    pub dst_ip: Field,
    pub dscp: u8,
    pub ttl: u8,
    pub src_port: Field,
    pub dst_port: Field,
    /// TCP segments with these flags instead of UDP datagrams.
    pub tcp_flags: Option<u8>,
}

/// One stream of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    pub name: String,
    /// The probe flow id its frames carry (default: its place in the file).
    pub id: u16,
    pub headers: Headers,
    /// Frame sizes on the wire, FCS included.
    pub size: Field,
    pub rate: RateSpec,
    pub pattern: Pattern,
    pub start_delay: Duration,
    pub count: Option<u64>,
    pub duration: Option<Duration>,
    /// The seed of its random fields and Poisson gaps.
    pub seed: u64,
    /// The line the stream starts at (for errors found later).
    pub line: usize,
}

/// A profile: its streams and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub file: PathBuf,
    pub seed: u64,
    /// The line rate (bit/s, L1) that `%` rates are of; `None`: the
    /// interface's speed.
    pub line_rate_bps: Option<f64>,
    pub streams: Vec<Stream>,
}

impl Profile {
    /// Reads and checks the profile in `file`.
    pub fn load(file: &Path) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(file).map_err(|e| ProfileError::Read {
            file: file.display().to_string(),
            message: e.to_string(),
        })?;
        Self::parse(&text, file)
    }

    /// Checks the profile `text` (`file` names it in errors).
    pub fn parse(text: &str, file: &Path) -> Result<Profile, ProfileError> {
        read::profile(text, file)
    }

    /// Each stream's rate, `%` rates taken of the profile's line rate, or
    /// else of `iface_bps` (the interface's speed, if it has one).
    pub fn rates(&self, iface_bps: Option<f64>) -> Result<Vec<Rate>, ProfileError> {
        self.streams
            .iter()
            .enumerate()
            .map(|(i, s)| match s.rate {
                RateSpec::Pps(p) => Ok(Rate::Pps(p)),
                RateSpec::BpsL1(b) => Ok(Rate::Bps {
                    bps: b,
                    extra_bytes: 20,
                }),
                RateSpec::BpsL2(b) => Ok(Rate::Bps {
                    bps: b,
                    extra_bytes: 0,
                }),
                RateSpec::LinePercent(p) => match self.line_rate_bps.or(iface_bps) {
                    Some(line) => Ok(Rate::Bps {
                        bps: line * p / 100.0,
                        extra_bytes: 20,
                    }),
                    None => Err(ProfileError::Field {
                        file: self.file.display().to_string(),
                        line: s.line,
                        field: format!("streams[{i}].rate"),
                        message: format!(
                            "{p}% of the line rate, but the interface reports no speed (a veth or a loopback port): give line_rate = \"10G\" at the top of the profile"
                        ),
                    }),
                },
            })
            .collect()
    }

    /// The frames per second the streams' rates add up to (an on-off
    /// stream's over its on and off time), and the mean frame size of
    /// those frames (bytes, FCS included): what RFC 2544's search scales.
    pub fn nominal(&self, rates: &[Rate]) -> (f64, f64) {
        let (mut fps, mut bytes) = (0.0, 0.0);
        for (s, r) in self.streams.iter().zip(rates) {
            let size = s.size.mean();
            let duty = match s.pattern {
                Pattern::OnOff { on, off } => on.as_secs_f64() / (on + off).as_secs_f64(),
                _ => 1.0,
            };
            let f = match *r {
                Rate::Pps(p) => p,
                Rate::Bps { bps, extra_bytes } => bps / ((size + f64::from(extra_bytes)) * 8.0),
            } * duty;
            fps += f;
            bytes += f * size;
        }
        (fps, bytes / fps.max(1e-9))
    }

    /// The profile as an RFC 2544 trial sends it: every stream for the
    /// trial's whole time (counts and durations left out; start delays
    /// kept).
    pub fn for_trials(&self) -> Profile {
        let mut p = self.clone();
        for s in &mut p.streams {
            s.count = None;
            s.duration = None;
        }
        p
    }

    /// The stream that carries probe flow id `id`.
    pub fn stream_of(&self, id: u16) -> Option<&Stream> {
        self.streams.iter().find(|s| s.id == id)
    }
}

#[cfg(test)]
mod tests;
