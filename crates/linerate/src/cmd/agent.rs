//! `linerate agent`: the Open Traffic Generator API (the subset snappi
//! drives) over HTTPS with a bearer token, ports limited to an allow-list
//! of interfaces (`linerate-agent`).

use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::Args;
use linerate_agent::{Agent, Identity, Options, launch};
use linerate_packet::BackendKind;
use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Address and port to serve HTTPS on (port 0: any free port, printed).
    #[arg(long, default_value = "127.0.0.1:8443")]
    listen: SocketAddr,
    /// Address and port to serve the OTG gRPC API on too (the same TLS
    /// certificate and token, in the metadata authorization: Bearer
    /// <token>); off unless given.
    #[arg(long)]
    grpc_listen: Option<SocketAddr>,
    /// An interface a configuration's port may be (its location); repeat
    /// or comma-separate. Nothing else is sent on or read. Required.
    #[arg(long = "allow-iface", value_delimiter = ',', required = true)]
    allow_iface: Vec<String>,
    /// File whose first line is the bearer token every request must carry
    /// (at least 16 characters); without it a random token is made and
    /// printed.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// PEM certificate (chain) to serve; without --cert/--key a self-signed
    /// one is made at start and its SHA-256 fingerprint printed.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Write the certificate served (PEM) to this file, new (a client's
    /// CA bundle for a self-signed one).
    #[arg(long)]
    write_cert: Option<PathBuf>,
    /// Names the self-signed certificate is for (DNS names or addresses).
    #[arg(long, value_delimiter = ',', default_value = "localhost,127.0.0.1,::1")]
    cert_names: Vec<String>,
    /// Backend that sends: one that sends crafted frames (af_packet,
    /// socket:raw, af_xdp, loopback, dpdk).
    #[arg(long, default_value = "af_packet", value_parser = super::BackendArg)]
    backend: BackendKind,
    /// Backend that receives.
    #[arg(long, default_value = "af_packet", value_parser = super::BackendArg)]
    rx_backend: BackendKind,
    /// Seconds a flow's receivers go on counting after its last frame.
    #[arg(long, default_value_t = 0.5)]
    drain: f64,
    /// The longest a flow sends, seconds (continuous flows stop there).
    #[arg(long, default_value_t = 3600)]
    max_run: u64,
    /// Stop serving after this many seconds, as SIGINT would (running
    /// flows stopped first, exit 0): for scripts and labs. Default: until
    /// SIGINT or SIGTERM.
    #[arg(short = 't', long, value_name = "S")]
    time: Option<f64>,
    /// Another agent (https://IP:PORT) whose ports a configuration may
    /// use as https://IP:PORT/IFACE (a flow's receive ports on other
    /// hosts); repeat or comma-separate. No other agent is ever called.
    #[arg(long = "peer", value_delimiter = ',', requires = "peer_cert")]
    peers: Vec<String>,
    /// PEM file of the peers' certificates, pinned: a peer must present
    /// one of them (their --write-cert).
    #[arg(long)]
    peer_cert: Option<PathBuf>,
    /// File with the token the peers take (default: this agent's own).
    #[arg(long)]
    peer_token_file: Option<PathBuf>,
    /// The peers read this host's clock (namespaces of one machine, or
    /// PTP): their receivers report one-way latency too.
    #[arg(long)]
    peer_clock_shared: bool,
    /// Each start of traffic is a run: its intervals (a tx and an rx row
    /// per flow) and its end (each flow's exact counts) in text, or as -J,
    /// --json-stream, --csv, --metrics ask.
    #[command(flatten)]
    out: super::out::OutputArgs,
}

pub fn run(a: &AgentArgs, c: &Console) -> Result<u8> {
    let tx_backend = launch::tx_backend(a.backend)?;
    let rx_backend = a.rx_backend;
    launch::check_bounds(a.drain, a.max_run, a.time, &a.allow_iface)?;
    let (token, made) = launch::token(a.token_file.as_deref())?;
    let peers = launch::peers(
        &a.peers,
        a.peer_cert.as_deref(),
        a.peer_token_file.as_deref(),
        &token,
        a.peer_clock_shared,
    )?;
    let identity = match (&a.cert, &a.key) {
        (Some(cert), Some(key)) => Identity::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        _ => Identity::SelfSigned {
            names: a.cert_names.clone(),
        },
    };
    let tls = linerate_agent::tls::server(&identity)?;
    if let Some(p) = &a.write_cert {
        launch::write_cert(p, &tls.cert_pem)?;
    }
    if a.out.live {
        bail!("--live: the agent serves one run after another; use --json-stream or --metrics");
    }
    let reporting = linerate_agent::Reporting {
        events: linerate_run::SharedReporter::new(a.out.reporters(false, c)?),
        interval: a.out.interval()?,
    };
    // A machine reads standard output: the agent's own lines go to stderr.
    let say = |line: String| {
        if a.out.human() {
            crate::say!(c, "{line}");
        } else {
            eprintln!("{line}");
        }
    };
    let listener =
        TcpListener::bind(a.listen).with_context(|| format!("listening on {}", a.listen))?;
    let addr = listener.local_addr()?;
    let grpc = a.grpc_listen.map(launch::bind_grpc).transpose()?;
    let stop = super::stop_flag()?;
    if let Some(t) = a.time {
        launch::stop_after(Duration::from_secs_f64(t), stop.shared())?;
    }
    let agent = Arc::new(Agent::new(Options {
        allow: a.allow_iface.clone(),
        tx_backend,
        rx_backend,
        wires: Default::default(),
        drain: Duration::from_secs_f64(a.drain),
        run_max: Duration::from_secs(a.max_run),
        interval: Duration::from_millis(200),
        peers: peers.clone(),
        reporting: Some(reporting),
    }));
    say(format!("linerate agent: listening on https://{addr}"));
    if let Some(g) = &grpc {
        say(format!(
            "linerate agent: gRPC on https://{}",
            g.local_addr()?
        ));
    }
    say(format!(
        "linerate agent: certificate sha256 {}",
        tls.fingerprint
    ));
    say(format!(
        "linerate agent: ports may be {}",
        a.allow_iface.join(", ")
    ));
    if !a.peers.is_empty() {
        say(format!(
            "linerate agent: and ports of its peers {} (https://IP:PORT/IFACE)",
            a.peers.join(", ")
        ));
    }
    if made {
        say(format!("linerate agent: token {token}"));
    }
    let _ = c.stdout().flush();
    launch::serve_both(listener, grpc, tls, agent, Arc::new(token), &stop)?;
    say("linerate agent: stopped".into());
    Ok(0)
}
