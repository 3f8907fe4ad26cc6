//! How the agent runs what it is given, and where its runs are reported.

use crate::peer::Peers;
use linerate_packet::BackendKind;
use linerate_run::SharedReporter;
use std::sync::Arc;
use std::time::Duration;

/// How the agent runs what it is given.
#[derive(Debug, Clone)]
pub struct Options {
    /// The interfaces a port may be: nothing else is sent on or read.
    pub allow: Vec<String>,
    pub tx_backend: BackendKind,
    pub rx_backend: BackendKind,
    /// The loopback ports the backends open when they are `loopback`
    /// (the caller's registry; empty for kernel interfaces).
    pub wires: linerate_backend::port::Wires,
    /// After a flow's last frame, how long its receivers still count.
    pub drain: Duration,
    /// The longest a flow sends (continuous ones stop there).
    pub run_max: Duration,
    /// How often running counts are taken (the rates' interval).
    pub interval: Duration,
    /// Other agents whose ports a configuration may use.
    pub peers: Option<Arc<Peers>>,
    /// Where each start of traffic is reported as a run (`crate::run`).
    pub reporting: Option<Reporting>,
}

/// Where the agent's runs are reported, and how often.
#[derive(Debug, Clone)]
pub struct Reporting {
    pub events: SharedReporter,
    /// Between intervals (`None`: one interval, at the end).
    pub interval: Option<Duration>,
}

impl Options {
    /// An agent whose ports are in-memory loopback ports named `allow`
    /// (nothing touches an interface), made in a registry of its own
    /// (`wires`: none yet): 10 ms drain, 5 s longest run, no peers, no run
    /// reporting. For tests and examples.
    pub fn loopback(allow: &[&str]) -> Self {
        Options {
            allow: allow.iter().map(|s| s.to_string()).collect(),
            tx_backend: BackendKind::Loopback,
            rx_backend: BackendKind::Loopback,
            wires: Default::default(),
            drain: Duration::from_millis(10),
            run_max: Duration::from_secs(5),
            interval: Duration::from_millis(50),
            peers: None,
            reporting: None,
        }
    }
}
