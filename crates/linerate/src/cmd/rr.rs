//! `linerate rr server` and `linerate rr client`: UDP request/response
//! transactions. Their flags and wiring; `linerate_rr::flags` checks the
//! flags and makes the configurations, `linerate_rr::mode` runs them.

use super::out::{Ended, OutputArgs, drive};
use super::stop_flag;
use crate::output::Console;
use anyhow::Result;
use clap::{Args, Subcommand};
use linerate_rr::{ClientFlags, ServerFlags, mode};
use linerate_run::Mode;
use std::net::IpAddr;

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
    /// Workers spin on non-blocking sockets instead of sleeping, yielding their CPU between
    /// empty polls to a thread ready there (the NAPI thread): the lowest latency, a core busy
    /// per worker (as sockperf's --nonblocked; with the client's --busy-poll for ping-pong).
    #[arg(long)]
    spin: bool,
    /// After a receive that drained its socket, sleep US microseconds (<= 1000): bigger
    /// batches, fewer wake-ups, less CPU a request, up to US more latency (not with --spin).
    #[arg(long, value_name = "US", default_value_t = 0, conflicts_with = "tcp")]
    coalesce: u32,
    /// With --spin: a socket connected to each of up to N clients a worker (default 16, 0: none,
    /// at most 1024), found by the kernel without the route lookups of the group's socket.
    #[arg(long, value_name = "N", conflicts_with = "tcp")]
    client_sockets: Option<usize>,
    /// Answer over AF_XDP on IFACE: UDP to --port taken from its queues (all else left to the
    /// kernel), answered in place by a spinning worker per queue, bypassing the kernel's UDP path.
    #[arg(long, value_name = "IFACE", conflicts_with = "tcp")]
    af_xdp: Option<String>,
    /// Send every answer as its own datagram message. By default answers
    /// of one length to one client in a batch leave as one UDP GSO message
    /// (one trip down the stack; the kernel or a NIC with USO cuts it).
    #[arg(long)]
    no_gso: bool,
    /// Serve rr over TCP (each message preceded by its length): a listener per worker on the
    /// port. (The UDP recipe's --steering, --batch, --no-reuseport and --no-gso do not apply.)
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

impl ServerArgs {
    /// The flags as given, for `linerate_rr::flags` to judge.
    fn flags(&self) -> Result<ServerFlags> {
        Ok(ServerFlags {
            bind: self.bind,
            port: self.port,
            cores: self.cores.clone().map(|c| c.0),
            steering: self.steering.clone(),
            time_s: self.time,
            batch: self.batch,
            max_response: self.max_response,
            allow: self.allow.clone(),
            no_reuseport: self.no_reuseport,
            no_pin: self.no_pin,
            busy_poll_us: self.busy_poll,
            spin: self.spin,
            coalesce_us: self.coalesce,
            client_sockets: self.client_sockets,
            no_gso: self.no_gso,
            af_xdp: self.af_xdp.clone(),
            max_conns: self.max_conns,
            max_per_source: self.max_per_source,
            idle_timeout_s: self.idle_timeout,
            max_message: self.max_message,
            interval: self.out.interval()?,
            // intervals kept only for an output with the end document: a server may run for days
            intervals_kept: usize::from(self.out.document_wanted()) * linerate_rr::INTERVALS_KEPT,
        })
    }
}

impl ClientArgs {
    /// The flags as given, for `linerate_rr::flags` to judge.
    fn flags(&self) -> Result<ClientFlags> {
        Ok(ClientFlags {
            host: self.host.clone(),
            port: self.port,
            bind: self.bind,
            cores: self.cores.clone().map(|c| c.0),
            threads: self.threads,
            flows: self.flows,
            outstanding: self.outstanding,
            pps: self.pps.clone(),
            rate: self.rate.clone(),
            request_size: self.request_size,
            response_size: self.response_size,
            time_s: self.time,
            timeout_ms: self.timeout_ms,
            busy_poll: self.busy_poll,
            tcp: self.tcp,
            connect_per_transaction: self.connect_per_transaction,
            close_reset: self.close_reset,
            connect_timeout_ms: self.connect_timeout_ms,
            interval: self.out.interval()?,
        })
    }
}

/// The server, bound, then run until stopped or its time is up.
fn server(a: &ServerArgs, c: &Console) -> Result<u8> {
    let flags = a.flags()?;
    let cores = flags.cores();
    let server = mode::Bound::bind(&flags, a.tcp)?;
    let stop = stop_flag()?;
    let line = server.listening_line(a.out.human(), &cores);
    if a.out.human() {
        crate::say!(c, "{line}");
    } else {
        eprintln!("{line}");
    }
    let doc =
        linerate_doctor::test_summary_at((!a.bind.is_unspecified()).then_some(a.bind), &cores);
    let ended = drive(
        (&a.out, c),
        false,
        Mode::RrServer,
        (server.start(&flags), a.time),
        Some(doc.clone()),
        |run| Ok(server.serve(stop.flag(), run, doc)),
    )?;
    Ok(ended.exit_code)
}

fn client(a: &ClientArgs, hold: bool, c: &Console) -> Result<Ended> {
    let flags = a.flags()?;
    let (cfg, tcp) = flags.config()?;
    let stop = stop_flag()?;
    if a.out.human() {
        crate::say!(c, "{}", cfg.banner(tcp.as_ref()));
    }
    let ended = drive(
        (&a.out, c),
        hold,
        Mode::RrClient,
        (flags.start(&cfg, tcp.as_ref()), Some(a.time)),
        None,
        |run| {
            Ok(mode::run_client(
                &cfg,
                tcp.as_ref(),
                stop.flag(),
                run,
                a.timeout_ms,
            )?)
        },
    )?;
    if let Some(e) = &ended.error {
        // No answer at all: the run could not do what was asked.
        eprint!("{}", linerate_run::advice::error_lines(e));
        return Ok(Ended {
            exit_code: 2,
            ..ended
        });
    }
    Ok(ended)
}
