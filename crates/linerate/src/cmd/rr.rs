//! `linerate rr server` and `linerate rr client`: UDP request/response
//! transactions.

use super::out::{Ended, Measured, OutputArgs, drive};
use super::stop_flag;
use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use linerate_rr::{
    ClientConfig, Interval, Load, RrClientOutcome, RrError, RrServerOutcome, RrTcpServerOutcome,
    ServerConfig, ServerInterval, Steering, client_row, run_client, server_row,
};
use linerate_run::{Counts, Mode};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use linerate_rr::DEFAULT_PORT;

#[derive(Debug, Subcommand)]
pub enum RrCommand {
    /// Answer rr requests: one SO_REUSEPORT socket per worker, steered by CPU.
    Server(ServerArgs),
    /// Send requests and count transactions/s and latency percentiles.
    Client(ClientArgs),
}

#[derive(Debug, Args)]
pub struct RrArgs {
    #[command(subcommand)]
    pub command: RrCommand,
}

#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(short = 'B', long, default_value = "0.0.0.0")]
    bind: IpAddr,
    /// UDP port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// One worker pinned to each listed CPU (0,1), socket i for CPU i's
    /// requests (default: every online CPU).
    #[arg(long, value_name = "CPUS", value_parser = super::cpu_list)]
    cores: Option<super::CpuList>,
    /// cpu: a classic BPF program hands each request to the socket of the
    /// CPU it was processed on; hash: the kernel's 4-tuple hash.
    #[arg(long, default_value = "cpu")]
    steering: String,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(short = 't', long, visible_alias = "duration")]
    time: Option<f64>,
    /// Datagrams per receive call.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    batch: u16,
    /// Largest response a request from an --allow'ed source may ask for,
    /// bytes (up to 65507). Without it (and for every other source) a
    /// response is at most as large as its request: no amplification.
    #[arg(long, requires = "allow")]
    max_response: Option<usize>,
    /// Sources that may ask for responses larger than their requests
    /// (198.18.0.0/15,2001:db8::/32); needs --max-response.
    #[arg(long, value_delimiter = ',', requires = "max_response")]
    allow: Vec<String>,
    /// The recipe switch by switch: every worker on one shared socket (no
    /// SO_REUSEPORT, so no steering), as a naive multi-threaded server.
    #[arg(long)]
    no_reuseport: bool,
    /// Leave the workers unpinned (--cores still names their sockets' CPUs).
    #[arg(long)]
    no_pin: bool,
    /// SO_BUSY_POLL on every socket: receive calls spin on the device queue
    /// for up to US microseconds before sleeping (costs CPU for latency).
    #[arg(long, value_name = "US", default_value_t = 0)]
    busy_poll: u32,
    /// Workers spin on non-blocking sockets instead of sleeping in the
    /// kernel between requests, yielding their CPU between empty polls to
    /// any thread ready to run there (the NAPI thread bringing the next
    /// request): the lowest latency, a core kept busy per worker (as
    /// sockperf's --nonblocked; with the client's --busy-poll for
    /// ping-pong latency).
    #[arg(long)]
    spin: bool,
    /// Send every answer as its own datagram message. By default answers
    /// of one length to one client in a batch leave as one UDP GSO message
    /// (one trip down the stack; the kernel or a NIC with USO cuts it).
    #[arg(long)]
    no_gso: bool,
    /// Serve rr over TCP (each message preceded by its length) instead of
    /// UDP: a listener per worker on the port, connections spread over them.
    /// (The UDP recipe's --steering, --batch, --no-reuseport and --no-gso
    /// do not apply.)
    #[arg(long, conflicts_with_all = ["steering", "batch", "no_reuseport", "no_gso"])]
    tcp: bool,
    /// TCP: most connections open at once; more are closed on accept.
    #[arg(long, default_value_t = 10_000, requires = "tcp")]
    max_conns: usize,
    /// TCP: most connections open at once from one source address.
    #[arg(long, default_value_t = 1_000, requires = "tcp")]
    max_per_source: usize,
    /// TCP: seconds after which a connection that moved no byte is closed.
    #[arg(long, default_value_t = 60.0, requires = "tcp")]
    idle_timeout: f64,
    /// TCP: largest request message accepted, bytes (a longer frame
    /// closes its connection).
    #[arg(long, default_value_t = 65_536, requires = "tcp")]
    max_message: usize,
    #[command(flatten)]
    out: OutputArgs,
}

#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Server host or address.
    host: String,
    /// Server UDP port.
    #[arg(short, long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// Local address to send from.
    #[arg(short = 'B', long)]
    bind: Option<IpAddr>,
    /// One worker pinned to each listed CPU (0,1).
    #[arg(long, value_name = "CPUS", value_parser = super::cpu_list)]
    cores: Option<super::CpuList>,
    /// Unpinned workers when --cores is not given.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Flows (connected UDP sockets, so distinct source ports) per worker.
    #[arg(long, default_value_t = 1)]
    flows: usize,
    /// Closed loop: requests in flight per flow.
    #[arg(long, default_value_t = 1, conflicts_with_all = ["rate", "pps"])]
    outstanding: usize,
    /// Open loop: transactions (requests) per second in all (100k, 1M),
    /// sent whatever comes back; latency counts from each request's
    /// scheduled time.
    #[arg(
        long,
        visible_alias = "tps",
        value_name = "RATE",
        conflicts_with = "rate"
    )]
    pps: Option<String>,
    /// Open loop rate with its unit (100ktps, 100kpps); a bare 100k is
    /// refused: write --pps.
    #[arg(long)]
    rate: Option<String>,
    /// Request payload bytes (32..=65507; the 32-byte rr header included).
    #[arg(short = 'l', long, default_value_t = 64)]
    request_size: usize,
    /// Response payload bytes to ask for (default: the request size).
    #[arg(long)]
    response_size: Option<usize>,
    /// Seconds to send.
    #[arg(short = 't', long, visible_alias = "duration", default_value_t = 10.0)]
    time: f64,
    /// Milliseconds after which an unanswered request is lost.
    #[arg(long, default_value_t = 1000.0)]
    timeout_ms: f64,
    /// Spin on the sockets for answers instead of sleeping: no wake-up per
    /// transaction (lower latency), one core kept busy per worker.
    #[arg(long)]
    busy_poll: bool,
    /// rr over TCP: each flow one persistent connection, requests
    /// pipelined on it (the server needs --tcp).
    #[arg(long)]
    tcp: bool,
    /// TCP: each transaction connects, sends, reads the response and
    /// closes (TCP_CRR); --flows transactions at once per worker.
    #[arg(long, requires = "tcp")]
    connect_per_transaction: bool,
    /// TCP with --connect-per-transaction: close each connection with a
    /// reset (SO_LINGER 0) instead of a FIN: no FIN exchange and no
    /// TIME_WAIT on the client (as neper's tcp_crr by default).
    #[arg(long, requires = "connect_per_transaction")]
    close_reset: bool,
    /// TCP: milliseconds a connection may take to be made.
    #[arg(long, default_value_t = 1000.0, requires = "tcp")]
    connect_timeout_ms: f64,
    #[command(flatten)]
    repeat: super::out::RepeatArgs,
    #[command(flatten)]
    out: OutputArgs,
}

pub fn run(a: &RrArgs, console: &Console) -> Result<u8> {
    match &a.command {
        RrCommand::Server(s) => server(s, console),
        RrCommand::Client(c) if c.repeat.asked() => {
            c.repeat.run((&c.out).into(), console, &mut |hold| {
                client(c, hold, console)
            })
        }
        RrCommand::Client(c) => Ok(client(c, false, console)?.exit_code),
    }
}

fn seconds(what: &str, s: f64) -> Result<Option<Duration>> {
    if !s.is_finite() || s < 0.0 {
        bail!("{what} must be a number of seconds >= 0, not {s}");
    }
    Ok((s > 0.0).then(|| Duration::from_secs_f64(s)))
}

/// The intervals a server keeps for its end document: none when no
/// document is wanted (a server may run for days), else the last
/// [`linerate_rr::INTERVALS_KEPT`].
fn intervals_kept(out: &OutputArgs) -> usize {
    if out.document_wanted() {
        linerate_rr::INTERVALS_KEPT
    } else {
        0
    }
}

fn online_cpus() -> Vec<usize> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

fn server(a: &ServerArgs, c: &Console) -> Result<u8> {
    if a.tcp {
        return tcp_server(a, c);
    }
    let steering = match a.steering.as_str() {
        "cpu" => Steering::Cpu,
        "hash" => Steering::Hash,
        other => bail!("--steering is cpu or hash, not '{other}'"),
    };
    let cores = a.cores.clone().map_or_else(online_cpus, |c| c.0);
    let cfg = ServerConfig {
        bind: SocketAddr::new(a.bind, a.port),
        workers: cores.len(),
        cores: cores.clone(),
        steering,
        duration: seconds("--time", a.time.unwrap_or(0.0))?,
        interval: a.out.interval()?,
        batch: usize::from(a.batch),
        max_response: a.max_response.unwrap_or(0),
        allow: a
            .allow
            .iter()
            .map(|p| linerate_rr::Prefix::parse(p))
            .collect::<Result<_, _>>()?,
        reuseport: !a.no_reuseport,
        pin: !a.no_pin,
        busy_poll_us: a.busy_poll,
        gso: !a.no_gso,
        spin: a.spin,
        intervals_kept: intervals_kept(&a.out),
    };
    if a.busy_poll > 100_000 {
        bail!("--busy-poll is at most 100000 microseconds");
    }
    if a.no_reuseport && a.steering != "cpu" {
        bail!("--no-reuseport shares one socket: there is nothing to steer (leave out --steering)");
    }
    let server = linerate_rr::Server::bind(&cfg)?;
    let stop = stop_flag()?;
    if a.out.human() {
        crate::say!(
            c,
            "rr server listening on {} (UDP), {} workers on CPUs {:?}",
            server.local_addr(),
            cores.len(),
            cores
        );
    } else {
        // Standard output carries the document; say it is ready here (as
        // sink and fwd do), for whoever waits to send.
        eprintln!("linerate: rr server listening on {}", server.local_addr());
    }
    let doc =
        linerate_doctor::test_summary_at((!a.bind.is_unspecified()).then_some(a.bind), &cores);
    let config = serde_json::json!({
        "listen": server.local_addr().to_string(),
        "cores": cores,
        "steering": a.steering,
        "time_s": a.time,
        "batch": a.batch,
        "max_response": a.max_response,
        "reuseport": !a.no_reuseport,
        "pin": !a.no_pin,
        "busy_poll_us": a.busy_poll,
        "gso": !a.no_gso,
        "spin": a.spin,
    });
    let ended = drive(
        (&a.out, c),
        false,
        Mode::RrServer,
        (config, a.time),
        Some(doc.clone()),
        |run| {
            let r = server.run(stop.flag(), |iv: &ServerInterval| {
                run.interval(&linerate_rr::server_interval(iv));
            });
            let rows = (r.workers.iter().enumerate())
                .map(|(w, (_, c))| server_row(w, Some(c.requests), Some(c)))
                .collect();
            Ok(Measured {
                duration_s: r.elapsed.as_secs_f64(),
                rows,
                error: None,
                outcome: Arc::new(RrServerOutcome {
                    report: r,
                    doctor: doc,
                }),
            })
        },
    )?;
    Ok(ended.exit_code)
}

/// `--pps` (any packet-rate spelling) or `--rate` (which must say its unit).
fn parse_tps(s: &str, unit_required: bool) -> Result<f64> {
    let t = s.trim();
    let bare = t
        .strip_suffix("tps")
        .or_else(|| t.strip_suffix("pps"))
        .or_else(|| t.strip_suffix("/s"));
    if unit_required && bare.is_none() {
        bail!("--rate {s} is ambiguous: write --pps {s} (requests per second) or --rate {s}tps");
    }
    let t = bare.unwrap_or(t);
    let v = linerate_calc::parse_pps(t)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("'{s}' is not a rate (100k, 1M, 250000)"))?;
    if v == 0 {
        bail!("--rate must be above zero");
    }
    Ok(v as f64)
}

fn client(a: &ClientArgs, hold: bool, c: &Console) -> Result<Ended> {
    let server = (a.host.as_str(), a.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{}'", a.host))?
        .next()
        .with_context(|| format!("'{}' has no address", a.host))?;
    let load = match (&a.pps, &a.rate) {
        (Some(r), _) => Load::Open {
            tps: parse_tps(r, false)?,
        },
        (None, Some(r)) => Load::Open {
            tps: parse_tps(r, true)?,
        },
        (None, None) => Load::Closed {
            outstanding: a.outstanding,
        },
    };
    let cfg = ClientConfig {
        server,
        bind: a.bind,
        cores: a.cores.clone().map(|c| c.0).unwrap_or_default(),
        threads: a.threads,
        flows: a.flows,
        load,
        request_size: a.request_size,
        response_size: a.response_size.unwrap_or(a.request_size),
        duration: seconds("--time", a.time)?.context("--time must be above zero")?,
        timeout: Duration::from_secs_f64(
            (a.timeout_ms.is_finite() && a.timeout_ms > 0.0)
                .then_some(a.timeout_ms / 1e3)
                .context("--timeout-ms must be above zero")?,
        ),
        interval: a.out.interval()?,
        busy_poll: a.busy_poll,
    };
    let tcp = tcp_client(a)?;
    let stop = stop_flag()?;
    if a.out.human() {
        crate::say!(c, "{}", cfg.banner(tcp.as_ref()));
    }
    let config = serde_json::json!({
        "server": server.to_string(),
        "cores": cfg.cores,
        "threads": cfg.threads,
        "flows": cfg.flows,
        "outstanding": a.outstanding,
        "rate_tps": match load {
            Load::Open { tps } => Some(tps),
            Load::Closed { .. } => None,
        },
        "request_size": cfg.request_size,
        "response_size": cfg.response_size,
        "time_s": a.time,
        "timeout_ms": a.timeout_ms,
        "tcp": a.tcp,
        "connect_per_transaction": a.connect_per_transaction,
        "close_reset": a.close_reset,
        "connect_timeout_ms": tcp.map(|t| t.connect_timeout.as_secs_f64() * 1e3),
    });
    let ended = drive(
        (&a.out, c),
        hold,
        Mode::RrClient,
        (config, Some(a.time)),
        None,
        |run| {
            let on_interval = |iv: &Interval| {
                let rows = vec![client_row(
                    "all",
                    iv.completed,
                    iv.lost,
                    iv.latency.as_ref(),
                )];
                run.interval(&linerate_run::Interval::new(
                    iv.start.as_secs_f64(),
                    iv.end.as_secs_f64(),
                    rows,
                ));
            };
            let result = match &tcp {
                Some(t) => linerate_rr::run_tcp_client(&cfg, t, stop.flag(), on_interval),
                None => run_client(&cfg, stop.flag(), on_interval),
            };
            client_measured(result, &cfg, a.timeout_ms)
        },
    )?;
    if let Some(e) = &ended.error {
        // No answer at all: the run could not do what was asked.
        eprintln!("linerate: error: {e}");
        return Ok(Ended {
            exit_code: 2,
            ..ended
        });
    }
    Ok(ended)
}

/// With `--tcp`, how the client uses its connections.
fn tcp_client(a: &ClientArgs) -> Result<Option<linerate_rr::TcpClient>> {
    if !a.tcp {
        return Ok(None);
    }
    let ms = a.connect_timeout_ms;
    anyhow::ensure!(
        ms.is_finite() && ms > 0.0,
        "--connect-timeout-ms must be above zero"
    );
    Ok(Some(linerate_rr::TcpClient {
        connect_per_transaction: a.connect_per_transaction,
        connect_timeout: Duration::from_secs_f64(ms / 1e3),
        close_reset: a.close_reset,
    }))
}

/// What an rr client run measured: its report, or with no answer at all
/// what was measured before the error.
fn client_measured(
    result: Result<linerate_rr::ClientReport, RrError>,
    cfg: &ClientConfig,
    timeout_ms: f64,
) -> Result<Measured> {
    let load = cfg.load;
    Ok(match result {
        Ok(r) => Measured {
            duration_s: r.elapsed.as_secs_f64(),
            rows: r.rows(),
            error: None,
            outcome: Arc::new(RrClientOutcome {
                doctor: Some(linerate_doctor::test_summary_at(r.local_ip(), &cfg.cores)),
                report: r,
                load,
                timeout_ms,
            }),
        },
        Err(e) => {
            let msg = e.to_string();
            let RrError::NoAnswer { report, .. } = e else {
                return Err(e.into());
            };
            Measured {
                duration_s: 0.0,
                rows: Vec::new(),
                error: Some(msg),
                outcome: Arc::new(RrClientOutcome {
                    report: *report,
                    doctor: None,
                    load,
                    timeout_ms,
                }),
            }
        }
    })
}

fn tcp_server(a: &ServerArgs, c: &Console) -> Result<u8> {
    let cores = a.cores.clone().map_or_else(online_cpus, |c| c.0);
    let cfg = linerate_rr::TcpServerConfig {
        bind: SocketAddr::new(a.bind, a.port),
        workers: cores.len(),
        cores: cores.clone(),
        pin: !a.no_pin,
        duration: seconds("--time", a.time.unwrap_or(0.0))?,
        interval: a.out.interval()?,
        max_response: a.max_response.unwrap_or(0),
        allow: (a.allow.iter())
            .map(|p| linerate_rr::Prefix::parse(p))
            .collect::<Result<_, _>>()?,
        max_message: a.max_message,
        max_conns: a.max_conns,
        max_per_source: a.max_per_source,
        idle_timeout: seconds("--idle-timeout", a.idle_timeout)?
            .context("--idle-timeout must be above zero")?,
        spin: a.spin,
        busy_poll_us: a.busy_poll,
        intervals_kept: intervals_kept(&a.out),
    };
    if a.busy_poll > 100_000 {
        bail!("--busy-poll is at most 100000 microseconds");
    }
    let server = linerate_rr::TcpServer::bind(&cfg)?;
    let stop = stop_flag()?;
    if a.out.human() {
        crate::say!(
            c,
            "rr server listening on {} (TCP), {} workers on CPUs {:?}",
            server.local_addr(),
            cores.len(),
            cores
        );
    } else {
        eprintln!(
            "linerate: rr server listening on {} (TCP)",
            server.local_addr()
        );
    }
    let doc =
        linerate_doctor::test_summary_at((!a.bind.is_unspecified()).then_some(a.bind), &cores);
    let config = serde_json::json!({
        "listen": server.local_addr().to_string(),
        "transport": "tcp",
        "cores": cores,
        "time_s": a.time,
        "max_response": a.max_response,
        "max_conns": a.max_conns,
        "max_per_source": a.max_per_source,
        "idle_timeout_s": a.idle_timeout,
        "max_message": a.max_message,
        "pin": !a.no_pin,
        "busy_poll_us": a.busy_poll,
        "spin": a.spin,
    });
    let ended = drive(
        (&a.out, c),
        false,
        Mode::RrServer,
        (config, a.time),
        Some(doc.clone()),
        |run| {
            let r = server.run(stop.flag(), |iv| {
                run.interval(&linerate_rr::server_interval(iv))
            });
            let rows = (r.workers.iter().enumerate())
                .map(|(w, (_, c))| {
                    server_row(w, Some(c.requests), None).with_counts(Counts {
                        packets: Some(c.requests),
                        bytes: Some(c.bytes_in),
                        errors: Some(c.malformed + c.oversized + c.too_large),
                        ..Counts::default()
                    })
                })
                .collect();
            Ok(Measured {
                duration_s: r.elapsed.as_secs_f64(),
                rows,
                error: None,
                outcome: Arc::new(RrTcpServerOutcome {
                    report: r,
                    doctor: doc,
                }),
            })
        },
    )?;
    Ok(ended.exit_code)
}
