//! A blast run: what it sends ([`Sending`]: flows or a trace, or a
//! profile's streams), the settings its `Start` states, a sink on a second
//! port of this host counting it ([`Sending::blast_and_count`]), and its
//! measure for the run model ([`blast_measured`]).

use crate::{
    BackendKind, BlastConfig, BlastError, BlastOutcome, BlastReport, ProfileConfig, SinkConfig,
    SinkReport,
};
use linerate_run::{Interval, Measured};
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What blast sends: flows (or a trace), or a profile's streams.
#[derive(Debug)]
pub enum Sending {
    Flows(Box<BlastConfig>),
    Profile(ProfileConfig),
}

/// The flags a blast's `Start` states beside what it sends.
#[derive(Debug, Clone, Copy)]
pub struct Stated<'a> {
    pub iface: &'a str,
    pub count: Option<u64>,
    pub duration_s: f64,
    pub burst: u32,
    pub backend: BackendKind,
    pub dst_ip: Option<&'a str>,
    pub pcap: Option<&'a Path>,
}

/// Why a blast counted on a second port could not run.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    #[error("{0}")]
    Flag(String),
    #[error(transparent)]
    Blast(#[from] BlastError),
    /// The receiver could not start or count.
    #[error("{0}")]
    Sink(String),
}

impl Sending {
    /// Sends it all, each interval to `on_interval`.
    pub fn send(
        &self,
        stop: &AtomicBool,
        on_interval: &mut dyn FnMut(&Interval),
    ) -> Result<BlastReport, BlastError> {
        match self {
            Sending::Flows(cfg) => crate::blast(cfg, stop, on_interval),
            Sending::Profile(cfg) => crate::blast_profile(cfg, stop, on_interval),
        }
    }

    /// The CPUs its workers are pinned to.
    pub fn cores(&self) -> Vec<usize> {
        match self {
            Sending::Flows(cfg) => cfg.cores.clone(),
            Sending::Profile(cfg) => cfg.core.into_iter().collect(),
        }
    }

    fn duration(&self) -> Duration {
        match self {
            Sending::Flows(cfg) => cfg.duration,
            Sending::Profile(cfg) => cfg.duration,
        }
    }

    /// A profile's streams (name, probe flow id); none for flows.
    pub fn streams(&self) -> Vec<(String, u16)> {
        match self {
            Sending::Profile(cfg) => crate::setup::stream_names(&cfg.profile),
            Sending::Flows(_) => Vec::new(),
        }
    }

    /// The run's settings, as `Start` reports them.
    pub fn config(&self, s: &Stated) -> Value {
        let sending = match self {
            Sending::Flows(cfg) => SendingSettings::Flows {
                dst_ip: s.dst_ip,
                pcap: s.pcap,
                flows: cfg.flows.count(),
                rate: cfg.rate,
            },
            Sending::Profile(cfg) => SendingSettings::Profile {
                profile: &cfg.profile.file,
                streams: cfg.stream_settings(),
            },
        };
        serde_json::to_value(BlastSettings {
            iface: s.iface,
            count: s.count,
            duration_s: s.duration_s,
            burst: s.burst,
            backend: s.backend,
            cores: self.cores(),
            sending,
        })
        .unwrap_or_default()
    }

    /// blast with a receiver on `rx`, another interface of this host than
    /// `iface`: the sink is counting before the first frame leaves, and
    /// stops `drain_s` after the last.
    pub fn blast_and_count(
        &self,
        (iface, rx, rx_backend): (&str, &str, BackendKind),
        drain_s: f64,
        stop: &AtomicBool,
        on_interval: &mut (dyn FnMut(&Interval) + Send),
    ) -> Result<(BlastReport, SinkReport), CountError> {
        if rx == iface {
            return Err(CountError::Flag(
                "--rx-iface must be another interface than --iface (the sink of the same port is `linerate sink`)".into(),
            ));
        }
        if !(0.0..=60.0).contains(&drain_s) {
            return Err(CountError::Flag(
                "--drain must be between 0 and 60 seconds".into(),
            ));
        }
        let drain = Duration::from_secs_f64(drain_s);
        let scfg = SinkConfig {
            iface: rx.to_string(),
            // Bounded in any case: the sender's time, the drain, and slack.
            duration: self.duration() + drain + Duration::from_secs(30),
            backend: rx_backend,
            wires: Default::default(),
            clocks_shared: true,
            until_packets: None,
            capture: None,
            cores: Vec::new(),
            interval: None,
            take: crate::RxFilter::Probes,
        };
        let (sent, mut got) = crate::pair::while_counting(
            std::slice::from_ref(&scfg),
            drain,
            || self.send(stop, on_interval),
            Result::is_ok,
        )
        .map_err(CountError::Sink)?;
        let b = sent?;
        let s = got.remove(0).map_err(CountError::Sink)?;
        Ok((b, s))
    }
}

/// blast's settings as its `Start` states them.
#[derive(Debug, serde::Serialize)]
struct BlastSettings<'a> {
    iface: &'a str,
    count: Option<u64>,
    duration_s: f64,
    burst: u32,
    backend: BackendKind,
    cores: Vec<usize>,
    #[serde(flatten)]
    sending: SendingSettings<'a>,
}

/// What blast sends: flows (or a trace), or a profile's streams.
#[derive(Debug, serde::Serialize)]
#[serde(untagged)]
enum SendingSettings<'a> {
    Flows {
        dst_ip: Option<&'a str>,
        pcap: Option<&'a Path>,
        flows: u64,
        /// As every rate in a document: `"max"`, `{"pps": N}`,
        /// `{"bps_l1": N}` or `{"bps_l2": N}`.
        rate: crate::Rate,
    },
    Profile {
        profile: &'a Path,
        streams: Vec<crate::StreamSettings>,
    },
}

/// A blast's measure: the sender's rows (and the receiver's per flow, with
/// its error if it stopped counting), its outcome.
pub fn blast_measured(
    r: BlastReport,
    rx: Option<(String, SinkReport)>,
    doctor: Value,
    streams: Vec<(String, u16)>,
) -> Measured {
    let mut rows = r.worker_rows.clone();
    let mut error = None;
    if let Some((iface, s)) = &rx {
        rows.extend(crate::flow_rows(&s.counts));
        error = s
            .error
            .as_ref()
            .map(|e| format!("receiving on {iface}: {e} (the counts are what arrived before it)"));
    }
    Measured {
        duration_s: r.duration_s,
        rows,
        error,
        outcome: Arc::new(BlastOutcome {
            report: r,
            doctor,
            receiver: rx,
            streams,
        }),
    }
}
