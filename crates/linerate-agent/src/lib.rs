//! `linerate agent`: a daemon serving the Open Traffic Generator API's
//! subset the snappi SDK drives (`/config`, `/control/state`,
//! `/monitor/metrics`, `/monitor/states`, `/capabilities/version`) over
//! HTTPS with a bearer token, running each flow as a blast on its
//! transmit port and sinks on its receive ports (`linerate-packet`), and
//! answering for the configuration's emulated devices on their ports.
//!
//! - `json`: reading a document field by field, paths in every error.
//! - `model`: the models' subset, defaults filled in, the rest refused.
//! - `devices`: the model's emulated devices and the flows between them.
//! - `protocols`: a port's responder without I/O (ARP, neighbour
//!   discovery, echo for the devices' addresses; their gateways resolved);
//!   `neighbors`: the responders' threads and the neighbour tables.
//! - `layer1`: the ports' link settings applied (MTU, promiscuous),
//!   checked (speed) and put back.
//! - `arp_flow`: the model's `arp` flows (frames laid out ahead, sent as
//!   a replay, counted on the receive ports by their headers).
//! - `tags`: the model's `metric_tags`, counted per value of the
//!   tagged bits by the receivers' probe ids.
//! - `plan`: a configuration made runnable (allow-list, probe ids,
//!   blast and sink configurations), all refusals before anything is sent.
//! - `capture`: the ports' captures (files handed back as one pcap or
//!   pcapng); `port_capture`: a capturing port's own receive path (an
//!   AF_PACKET socket from the capture's start to its stop); `capture_filter`: the model's capture
//!   filters, the frames a capture keeps.
//! - `campaign`: running flows and their counts; `lock`: a lock a
//!   panicked holder does not poison.
//! - `metrics`: the models' metrics answers, typed.
//! - `run`: each start of traffic as a run of the run contract (start,
//!   intervals, a typed end) to the binary's reporters.
//! - `api`: the routes, without I/O.
//! - `peer`: ports on other agents (a campaign across hosts): the
//!   receivers run for a peer and the calls to one.
//! - `http`, `tls`, `server`: bounded HTTP/1.1 over rustls; `guard`: the
//!   connection slots (per source, slow ones give way) and failed
//!   authentication slowed per source.
//! - `grpc`: the models' gRPC service beside it (same TLS, token and
//!   routes).

pub mod api;
pub mod arp_flow;
pub mod campaign;
pub mod capture;
pub mod capture_filter;
pub mod devices;
pub mod grpc;
pub mod guard;
pub mod http;
pub mod json;
pub mod kinds;
pub mod launch;
pub mod layer1;
pub mod lock;
pub mod metrics;
pub mod model;
pub mod neighbors;
pub mod peer;
pub mod plan;
pub mod port_capture;
pub mod protocols;
pub mod rates;
pub mod run;
pub mod server;
pub mod stacked;
pub mod tags;
pub mod tls;

pub use api::{API_SPEC_VERSION, Agent, Reply};
pub use peer::Peers;
pub use plan::Options;
pub use run::{AgentOutcome, Reporting};
pub use server::{TOKEN_MIN, serve};
pub use tls::{Identity, Tls, TlsError};

/// A random bearer token: 32 bytes from the OS, hex.
pub fn random_token() -> String {
    let mut b = [0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}
