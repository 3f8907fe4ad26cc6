//! `linerate rr server` and `linerate rr client`: UDP request/response
//! transactions.

use super::stop_flag;
use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use linerate_rr::{
    ClientConfig, Interval, Load, RrError, ServerConfig, ServerInterval, Steering, run_client,
};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// The rr port when none is given.
pub const DEFAULT_PORT: u16 = 5300;

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
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// cpu: a classic BPF program hands each request to the socket of the
    /// CPU it was processed on; hash: the kernel's 4-tuple hash.
    #[arg(long, default_value = "cpu")]
    steering: String,
    /// Stop after this many seconds (default: until interrupted).
    #[arg(short = 't', long)]
    time: Option<f64>,
    /// Seconds between interval lines (0: none).
    #[arg(short, long, default_value_t = 1.0)]
    interval: f64,
    /// Datagrams per receive call.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..=1024))]
    batch: u16,
    /// Largest response a request may ask for, bytes (up to 65507): a
    /// bound on what a small request can make this server send.
    #[arg(long, default_value_t = 16384)]
    max_response: usize,
    /// Print JSON at the end.
    #[arg(short = 'J', long)]
    json: bool,
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
    #[arg(long, value_delimiter = ',')]
    cores: Option<Vec<usize>>,
    /// Unpinned workers when --cores is not given.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Flows (connected UDP sockets, so distinct source ports) per worker.
    #[arg(long, default_value_t = 1)]
    flows: usize,
    /// Closed loop: requests in flight per flow.
    #[arg(long, default_value_t = 1, conflicts_with = "rate")]
    outstanding: usize,
    /// Open loop: transactions per second in all (100k, 1M), sent whatever
    /// comes back; latency counts from each request's scheduled time.
    #[arg(long)]
    rate: Option<String>,
    /// Request payload bytes (32..=65507; the 32-byte rr header included).
    #[arg(short = 'l', long, default_value_t = 64)]
    request_size: usize,
    /// Response payload bytes to ask for (default: the request size).
    #[arg(long)]
    response_size: Option<usize>,
    /// Seconds to send.
    #[arg(short = 't', long, default_value_t = 10.0)]
    time: f64,
    /// Milliseconds after which an unanswered request is lost.
    #[arg(long, default_value_t = 1000.0)]
    timeout_ms: f64,
    /// Seconds between interval lines (0: none).
    #[arg(short, long, default_value_t = 1.0)]
    interval: f64,
    /// Print JSON.
    #[arg(short = 'J', long)]
    json: bool,
}

pub fn run(a: &RrArgs) -> Result<u8> {
    match &a.command {
        RrCommand::Server(s) => server(s),
        RrCommand::Client(c) => client(c),
    }
}

fn seconds(what: &str, s: f64) -> Result<Option<Duration>> {
    if !s.is_finite() || s < 0.0 {
        bail!("{what} must be a number of seconds >= 0, not {s}");
    }
    Ok((s > 0.0).then(|| Duration::from_secs_f64(s)))
}

fn online_cpus() -> Vec<usize> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

fn server(a: &ServerArgs) -> Result<u8> {
    let steering = match a.steering.as_str() {
        "cpu" => Steering::Cpu,
        "hash" => Steering::Hash,
        other => bail!("--steering is cpu or hash, not '{other}'"),
    };
    let cores = a.cores.clone().unwrap_or_else(online_cpus);
    let cfg = ServerConfig {
        bind: SocketAddr::new(a.bind, a.port),
        workers: cores.len(),
        cores: cores.clone(),
        steering,
        duration: seconds("--time", a.time.unwrap_or(0.0))?,
        interval: seconds("--interval", a.interval)?,
        batch: usize::from(a.batch),
        max_response: a.max_response,
    };
    let server = linerate_rr::Server::bind(&cfg)?;
    let stop = stop_flag()?;
    if !a.json {
        println!(
            "rr server listening on {} (UDP), {} workers on CPUs {:?}",
            server.local_addr(),
            cores.len(),
            cores
        );
    }
    let json = a.json;
    let r = server.run(&stop, |iv: &ServerInterval| {
        if !json {
            println!(
                "[{:6.2}-{:6.2} s] {:>10.0} requests/s  malformed {:>6}  per worker {:?}  (server count)",
                iv.start.as_secs_f64(),
                iv.end.as_secs_f64(),
                iv.total.requests as f64 / (iv.end - iv.start).as_secs_f64().max(1e-9),
                iv.total.malformed,
                iv.per_worker
            );
        }
    });
    if a.json {
        let mut v = r.json();
        v["doctor"] = linerate_perf::net::doctor_summary(
            (!a.bind.is_unspecified()).then_some(a.bind),
            &cores,
        );
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let t = &r.total;
        println!(
            "total: {} requests in {:.2} s = {:.0}/s, {} answered, {} malformed, {} over --max-response, {} reply errors (server count)",
            t.requests,
            r.elapsed.as_secs_f64(),
            t.requests as f64 / r.elapsed.as_secs_f64().max(1e-9),
            t.answered,
            t.malformed,
            t.too_large,
            t.reply_errors
        );
        if let Some(n) = &r.steering_note {
            println!("note: {n}");
        }
    }
    Ok(0)
}

fn parse_tps(s: &str) -> Result<f64> {
    let t = s.trim();
    let t = t
        .strip_suffix("tps")
        .or_else(|| t.strip_suffix("/s"))
        .unwrap_or(t);
    let v = linerate_calc::parse_pps(t)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("--rate '{s}' is not a rate (100k, 1M, 250000)"))?;
    if v == 0 {
        bail!("--rate must be above zero");
    }
    Ok(v as f64)
}

fn client(a: &ClientArgs) -> Result<u8> {
    let server = (a.host.as_str(), a.port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{}'", a.host))?
        .next()
        .with_context(|| format!("'{}' has no address", a.host))?;
    let load = match &a.rate {
        Some(r) => Load::Open { tps: parse_tps(r)? },
        None => Load::Closed {
            outstanding: a.outstanding,
        },
    };
    let cfg = ClientConfig {
        server,
        bind: a.bind,
        cores: a.cores.clone().unwrap_or_default(),
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
        interval: seconds("--interval", a.interval)?,
    };
    let stop = stop_flag()?;
    let json = a.json;
    if !json {
        println!(
            "rr client to {server}: {} worker(s) x {} flow(s), {}, {} B requests, {} B responses",
            if cfg.cores.is_empty() {
                cfg.threads
            } else {
                cfg.cores.len()
            },
            cfg.flows,
            match load {
                Load::Closed { outstanding } =>
                    format!("closed loop, {outstanding} in flight per flow"),
                Load::Open { tps } => format!("open loop at {tps:.0} transactions/s"),
            },
            cfg.request_size,
            cfg.response_size
        );
    }
    let result = run_client(&cfg, &stop, |iv: &Interval| {
        if !json {
            let l = iv.latency.as_ref();
            let us =
                |ns: Option<u64>| ns.map_or("-".to_string(), |n| format!("{:.1}", n as f64 / 1e3));
            println!(
                "[{:6.2}-{:6.2} s] {:>10.0} trans/s  p50 {:>8} us  p99 {:>8} us  lost {:>6}",
                iv.start.as_secs_f64(),
                iv.end.as_secs_f64(),
                iv.tps(),
                us(l.map(|l| l.p50)),
                us(l.map(|l| l.p99)),
                iv.lost
            );
        }
    });
    let pinned = cfg.cores.clone();
    let r = match result {
        Ok(r) => r,
        Err(e) => {
            if let RrError::NoAnswer { report, .. } = &e
                && json
            {
                // What was measured is printed before the error.
                println!("{}", serde_json::to_string_pretty(report)?);
            }
            return Err(e.into());
        }
    };
    if json {
        let mut v = r.json();
        v["doctor"] = linerate_perf::net::doctor_summary(r.local_ip(), &pinned);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let t = &r.total;
        println!(
            "total: {} transactions in {:.2} s = {:.0}/s (client count of matched responses)",
            t.completed,
            r.elapsed.as_secs_f64(),
            r.tps()
        );
        println!(
            "requests: {} sent, {} answered, {} lost (timeout {} ms); {} late, {} duplicate, {} unknown, {} malformed answers; {} ICMP errors",
            t.sent,
            t.completed,
            t.lost,
            a.timeout_ms,
            t.late,
            t.duplicate,
            t.unknown,
            t.malformed,
            t.refused
        );
        if let Some(l) = &r.latency {
            let us = |ns: u64| ns as f64 / 1e3;
            println!(
                "latency (us, {}): min {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}",
                match load {
                    Load::Closed { .. } => "send to receipt",
                    Load::Open { .. } => "scheduled send to receipt",
                },
                us(l.min),
                us(l.p50),
                us(l.p90),
                us(l.p99),
                us(l.p999),
                us(l.p9999),
                us(l.max)
            );
        }
        if let Some(l) = &r.send_lag {
            let us = |ns: u64| ns as f64 / 1e3;
            println!(
                "send lag (us, how late requests left against the schedule): p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
                us(l.p50),
                us(l.p99),
                us(l.p999),
                us(l.max)
            );
        }
        if r.interrupted {
            println!("interrupted: figures cover the time until the signal");
        }
    }
    Ok(0)
}
