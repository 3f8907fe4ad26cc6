//! `rr server` and `rr client` flags as given, made into the server's and
//! the client's configurations (with the checks the flags need before
//! anything is bound), and the `start.config` each run reports.

use crate::TcpServerConfig;
use crate::{ClientConfig, Load, Prefix, RrError, ServerConfig, Steering, TcpClient};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

/// `rr server`'s flags.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerFlags {
    pub bind: IpAddr,
    pub port: u16,
    /// `--cores` (None: every online CPU).
    pub cores: Option<Vec<usize>>,
    /// `--steering` as written.
    pub steering: String,
    pub time_s: Option<f64>,
    pub batch: u16,
    pub max_response: Option<usize>,
    pub allow: Vec<String>,
    pub no_reuseport: bool,
    pub no_pin: bool,
    pub busy_poll_us: u32,
    pub spin: bool,
    /// `--coalesce` (UDP): microseconds a worker sleeps after a receive
    /// that drained its socket (0: none).
    pub coalesce_us: u32,
    /// `--client-sockets` (UDP, spinning): connected sockets per worker,
    /// one per client (None: [`crate::clients::CLIENT_SOCKETS`] with
    /// `--spin`, else none).
    pub client_sockets: Option<usize>,
    pub no_gso: bool,
    /// `--af-xdp IFACE` (UDP): answer over AF_XDP on that interface
    /// ([`crate::xdp`]).
    pub af_xdp: Option<String>,
    pub max_conns: usize,
    pub max_per_source: usize,
    pub idle_timeout_s: f64,
    pub max_message: usize,
    /// `-i`, checked by the caller.
    pub interval: Option<Duration>,
    /// Intervals kept for the end document ([`crate::INTERVALS_KEPT`] when
    /// a document is wanted, else none: a server may run for days).
    pub intervals_kept: usize,
}

/// `rr client`'s flags.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientFlags {
    pub host: String,
    pub port: u16,
    pub bind: Option<IpAddr>,
    pub cores: Option<Vec<usize>>,
    pub threads: usize,
    pub flows: usize,
    pub outstanding: usize,
    /// `--pps` (any packet-rate spelling) as written.
    pub pps: Option<String>,
    /// `--rate` (which must say its unit) as written.
    pub rate: Option<String>,
    pub request_size: usize,
    pub response_size: Option<usize>,
    pub time_s: f64,
    pub timeout_ms: f64,
    pub busy_poll: bool,
    pub tcp: bool,
    pub connect_per_transaction: bool,
    pub close_reset: bool,
    pub connect_timeout_ms: f64,
    /// `-i`, checked by the caller.
    pub interval: Option<Duration>,
}

fn config(s: String) -> RrError {
    RrError::Config(s)
}

/// `what` in seconds: 0 is none.
fn seconds(what: &str, s: f64) -> Result<Option<Duration>, RrError> {
    if !s.is_finite() || s < 0.0 {
        return Err(config(format!(
            "{what} must be a number of seconds >= 0, not {s}"
        )));
    }
    Ok((s > 0.0).then(|| Duration::from_secs_f64(s)))
}

fn online_cpus() -> Vec<usize> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// The longest `--coalesce`: a nap longer than a millisecond would be
/// a timer, not coalescing (and a socket's buffer fills in it at speed).
pub const COALESCE_MAX_US: u32 = 1_000;

/// `--coalesce` against the rest of the UDP server's recipe.
fn check_coalesce(us: u32, batch: u16, spin: bool) -> Result<(), RrError> {
    if us == 0 {
        return Ok(());
    }
    if us > COALESCE_MAX_US {
        return Err(config(format!(
            "--coalesce is at most {COALESCE_MAX_US} microseconds"
        )));
    }
    if spin {
        return Err(config(
            "--coalesce sleeps between receives and --spin never sleeps: choose one".into(),
        ));
    }
    if batch <= 1 {
        return Err(config(
            "--coalesce gathers requests into batches: it needs --batch above 1".into(),
        ));
    }
    Ok(())
}

fn check_busy_poll(us: u32) -> Result<(), RrError> {
    if us > 100_000 {
        return Err(config("--busy-poll is at most 100000 microseconds".into()));
    }
    Ok(())
}

/// `--pps` (any packet-rate spelling) or `--rate` (which must say its unit).
pub fn parse_tps(s: &str, unit_required: bool) -> Result<f64, RrError> {
    let t = s.trim();
    let bare = t
        .strip_suffix("tps")
        .or_else(|| t.strip_suffix("pps"))
        .or_else(|| t.strip_suffix("/s"));
    if unit_required && bare.is_none() {
        return Err(config(format!(
            "--rate {s} is ambiguous: write --pps {s} (requests per second) or --rate {s}tps"
        )));
    }
    let v = linerate_calc::parse_pps(bare.unwrap_or(t))
        .map_err(|e| config(format!("'{s}' is not a rate (100k, 1M, 250000): {e}")))?;
    if v == 0 {
        return Err(config("--rate must be above zero".into()));
    }
    Ok(v as f64)
}

impl ServerFlags {
    /// The workers' CPUs.
    pub fn cores(&self) -> Vec<usize> {
        self.cores.clone().unwrap_or_else(online_cpus)
    }

    fn allow(&self) -> Result<Vec<Prefix>, RrError> {
        self.allow.iter().map(|p| Prefix::parse(p)).collect()
    }

    /// The UDP server's configuration, checked.
    pub fn udp_config(&self) -> Result<ServerConfig, RrError> {
        let steering = match self.steering.as_str() {
            "cpu" => Steering::Cpu,
            "hash" => Steering::Hash,
            other => {
                return Err(config(format!("--steering is cpu or hash, not '{other}'")));
            }
        };
        let cores = self.cores();
        let cfg = ServerConfig {
            bind: SocketAddr::new(self.bind, self.port),
            workers: cores.len(),
            cores,
            steering,
            duration: seconds("--time", self.time_s.unwrap_or(0.0))?,
            interval: self.interval,
            batch: usize::from(self.batch),
            max_response: self.max_response.unwrap_or(0),
            allow: self.allow()?,
            reuseport: !self.no_reuseport,
            pin: !self.no_pin,
            busy_poll_us: self.busy_poll_us,
            gso: !self.no_gso,
            spin: self.spin || self.af_xdp.is_some(),
            coalesce: std::time::Duration::from_micros(u64::from(self.coalesce_us)),
            intervals_kept: self.intervals_kept,
            client_sockets: match self.af_xdp {
                Some(_) => 0,
                None => self.client_sockets()?,
            },
            af_xdp: self.af_xdp.clone(),
        };
        self.check_af_xdp()?;
        check_busy_poll(self.busy_poll_us)?;
        check_coalesce(self.coalesce_us, self.batch, self.spin)?;
        if self.no_reuseport && self.steering != "cpu" {
            return Err(config(
                "--no-reuseport shares one socket: there is nothing to steer (leave out --steering)"
                    .into(),
            ));
        }
        Ok(cfg)
    }

    /// `--af-xdp`: its workers spin on the socket's rings and the
    /// interface's queues decide which worker a request reaches, so the
    /// socket recipe's switches do not apply.
    fn check_af_xdp(&self) -> Result<(), RrError> {
        let Some(iface) = &self.af_xdp else {
            return Ok(());
        };
        if iface.is_empty() {
            return Err(config("--af-xdp needs an interface's name".into()));
        }
        let given = [
            (self.busy_poll_us > 0, "--busy-poll"),
            (self.coalesce_us > 0, "--coalesce"),
            (self.client_sockets.is_some(), "--client-sockets"),
            (self.no_reuseport, "--no-reuseport"),
            (self.no_gso, "--no-gso"),
            (self.steering != "cpu", "--steering"),
        ];
        match given.iter().find(|g| g.0) {
            Some((_, flag)) => Err(config(format!(
                "{flag} is for the socket server: --af-xdp answers from the interface's queues \
                 (its workers spin on their rings; the NIC's queues steer the requests)"
            ))),
            None => Ok(()),
        }
    }

    /// How many connected sockets each UDP worker may open for clients.
    fn client_sockets(&self) -> Result<usize, RrError> {
        match (self.client_sockets, self.spin, self.no_reuseport) {
            (Some(n), ..) if n > crate::clients::CLIENT_SOCKETS_MAX => Err(config(format!(
                "--client-sockets is at most {}, not {n}",
                crate::clients::CLIENT_SOCKETS_MAX
            ))),
            (Some(0), ..) => Ok(0),
            (None, true, false) => Ok(crate::clients::CLIENT_SOCKETS),
            (None, ..) => Ok(0),
            (Some(n), true, false) => Ok(n),
            (Some(_), false, _) => Err(config(
                "--client-sockets is for spinning workers (--spin): a sleeping worker waits on one socket"
                    .into(),
            )),
            (Some(_), true, true) => Err(config(
                "--client-sockets shares the port by SO_REUSEPORT: not with --no-reuseport".into(),
            )),
        }
    }

    /// The TCP server's configuration, checked.
    pub fn tcp_config(&self) -> Result<TcpServerConfig, RrError> {
        if self.af_xdp.is_some() {
            return Err(config(
                "--af-xdp answers UDP requests: the TCP server keeps to its sockets".into(),
            ));
        }
        let cores = self.cores();
        let cfg = TcpServerConfig {
            bind: SocketAddr::new(self.bind, self.port),
            workers: cores.len(),
            cores,
            pin: !self.no_pin,
            duration: seconds("--time", self.time_s.unwrap_or(0.0))?,
            interval: self.interval,
            max_response: self.max_response.unwrap_or(0),
            allow: self.allow()?,
            max_message: self.max_message,
            max_conns: self.max_conns,
            max_per_source: self.max_per_source,
            idle_timeout: seconds("--idle-timeout", self.idle_timeout_s)?
                .ok_or_else(|| config("--idle-timeout must be above zero".into()))?,
            spin: self.spin,
            busy_poll_us: self.busy_poll_us,
            intervals_kept: self.intervals_kept,
        };
        check_busy_poll(self.busy_poll_us)?;
        Ok(cfg)
    }

    /// The UDP server's `start.config`, listening on `listen`.
    pub fn udp_start(&self, listen: SocketAddr) -> serde_json::Value {
        let doc = UdpServerStart {
            listen: listen.to_string(),
            cores: self.cores(),
            steering: &self.steering,
            time_s: self.time_s,
            batch: self.batch,
            max_response: self.max_response,
            reuseport: !self.no_reuseport,
            pin: !self.no_pin,
            busy_poll_us: self.busy_poll_us,
            gso: !self.no_gso,
            spin: self.spin || self.af_xdp.is_some(),
            coalesce_us: self.coalesce_us,
            client_sockets: match self.af_xdp {
                Some(_) => 0,
                None => self.client_sockets().unwrap_or(0),
            },
            af_xdp: self.af_xdp.as_deref(),
        };
        serde_json::to_value(doc).unwrap_or_default()
    }

    /// The TCP server's `start.config`, listening on `listen`.
    pub fn tcp_start(&self, listen: SocketAddr) -> serde_json::Value {
        let doc = TcpServerStart {
            listen: listen.to_string(),
            transport: "tcp",
            cores: self.cores(),
            time_s: self.time_s,
            max_response: self.max_response,
            max_conns: self.max_conns,
            max_per_source: self.max_per_source,
            idle_timeout_s: self.idle_timeout_s,
            max_message: self.max_message,
            pin: !self.no_pin,
            busy_poll_us: self.busy_poll_us,
            spin: self.spin,
        };
        serde_json::to_value(doc).unwrap_or_default()
    }
}

impl ClientFlags {
    /// The client's configuration (the host resolved), and with `--tcp`
    /// how it uses its connections.
    pub fn config(&self) -> Result<(ClientConfig, Option<TcpClient>), RrError> {
        let server = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| config(format!("cannot resolve '{}': {e}", self.host)))?
            .next()
            .ok_or_else(|| config(format!("'{}' has no address", self.host)))?;
        let load = match (&self.pps, &self.rate) {
            (Some(r), _) => Load::Open {
                tps: parse_tps(r, false)?,
            },
            (None, Some(r)) => Load::Open {
                tps: parse_tps(r, true)?,
            },
            (None, None) => Load::Closed {
                outstanding: self.outstanding,
            },
        };
        let ms = self.timeout_ms;
        let cfg = ClientConfig {
            server,
            bind: self.bind,
            cores: self.cores.clone().unwrap_or_default(),
            threads: self.threads,
            flows: self.flows,
            load,
            request_size: self.request_size,
            response_size: self.response_size.unwrap_or(self.request_size),
            duration: seconds("--time", self.time_s)?
                .ok_or_else(|| config("--time must be above zero".into()))?,
            timeout: Duration::from_secs_f64(
                (ms.is_finite() && ms > 0.0)
                    .then_some(ms / 1e3)
                    .ok_or_else(|| config("--timeout-ms must be above zero".into()))?,
            ),
            interval: self.interval,
            busy_poll: self.busy_poll,
        };
        Ok((cfg, self.tcp_client()?))
    }

    /// With `--tcp`, how the client uses its connections.
    fn tcp_client(&self) -> Result<Option<TcpClient>, RrError> {
        if !self.tcp {
            return Ok(None);
        }
        let ms = self.connect_timeout_ms;
        if !(ms.is_finite() && ms > 0.0) {
            return Err(config("--connect-timeout-ms must be above zero".into()));
        }
        Ok(Some(TcpClient {
            connect_per_transaction: self.connect_per_transaction,
            connect_timeout: Duration::from_secs_f64(ms / 1e3),
            close_reset: self.close_reset,
        }))
    }

    /// The client's `start.config`.
    pub fn start(&self, cfg: &ClientConfig, tcp: Option<&TcpClient>) -> serde_json::Value {
        let doc = ClientStart {
            server: cfg.server.to_string(),
            cores: &cfg.cores,
            threads: cfg.threads,
            flows: cfg.flows,
            outstanding: self.outstanding,
            rate_tps: match cfg.load {
                Load::Open { tps } => Some(tps),
                Load::Closed { .. } => None,
            },
            request_size: cfg.request_size,
            response_size: cfg.response_size,
            time_s: self.time_s,
            timeout_ms: self.timeout_ms,
            tcp: self.tcp,
            connect_per_transaction: self.connect_per_transaction,
            close_reset: self.close_reset,
            connect_timeout_ms: tcp.map(|t| t.connect_timeout.as_secs_f64() * 1e3),
        };
        serde_json::to_value(doc).unwrap_or_default()
    }
}

/// The UDP server's `start.config` (keys in this order).
#[derive(serde::Serialize)]
struct UdpServerStart<'a> {
    listen: String,
    cores: Vec<usize>,
    steering: &'a str,
    time_s: Option<f64>,
    batch: u16,
    max_response: Option<usize>,
    reuseport: bool,
    pin: bool,
    busy_poll_us: u32,
    gso: bool,
    spin: bool,
    coalesce_us: u32,
    client_sockets: usize,
    af_xdp: Option<&'a str>,
}

/// The TCP server's `start.config`.
#[derive(serde::Serialize)]
struct TcpServerStart {
    listen: String,
    transport: &'static str,
    cores: Vec<usize>,
    time_s: Option<f64>,
    max_response: Option<usize>,
    max_conns: usize,
    max_per_source: usize,
    idle_timeout_s: f64,
    max_message: usize,
    pin: bool,
    busy_poll_us: u32,
    spin: bool,
}

/// The client's `start.config`.
#[derive(serde::Serialize)]
struct ClientStart<'a> {
    server: String,
    cores: &'a [usize],
    threads: usize,
    flows: usize,
    outstanding: usize,
    rate_tps: Option<f64>,
    request_size: usize,
    response_size: usize,
    time_s: f64,
    timeout_ms: f64,
    tcp: bool,
    connect_per_transaction: bool,
    close_reset: bool,
    connect_timeout_ms: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> ServerFlags {
        ServerFlags {
            bind: "127.0.0.1".parse().unwrap(),
            port: 5300,
            cores: Some(vec![0]),
            steering: "cpu".into(),
            time_s: Some(2.5),
            batch: 64,
            max_response: None,
            allow: vec![],
            no_reuseport: false,
            no_pin: false,
            busy_poll_us: 0,
            spin: false,
            coalesce_us: 0,
            client_sockets: None,
            no_gso: false,
            af_xdp: None,
            max_conns: 10_000,
            max_per_source: 1_000,
            idle_timeout_s: 60.0,
            max_message: 65_536,
            interval: None,
            intervals_kept: 0,
        }
    }

    fn client() -> ClientFlags {
        ClientFlags {
            host: "127.0.0.1".into(),
            port: 5300,
            bind: None,
            cores: None,
            threads: 1,
            flows: 1,
            outstanding: 1,
            pps: None,
            rate: None,
            request_size: 64,
            response_size: None,
            time_s: 10.0,
            timeout_ms: 1000.0,
            busy_poll: false,
            tcp: false,
            connect_per_transaction: false,
            close_reset: false,
            connect_timeout_ms: 1000.0,
            interval: None,
        }
    }

    fn message(e: RrError) -> String {
        e.to_string()
    }

    #[test]
    fn rates_say_their_unit_where_asked() {
        assert_eq!(parse_tps("100k", false).unwrap(), 100_000.0);
        assert_eq!(parse_tps("1Mtps", true).unwrap(), 1_000_000.0);
        assert_eq!(parse_tps("250000pps", true).unwrap(), 250_000.0);
        assert_eq!(
            message(parse_tps("100k", true).unwrap_err()),
            "--rate 100k is ambiguous: write --pps 100k (requests per second) or --rate 100ktps"
        );
        assert_eq!(
            message(parse_tps("0", false).unwrap_err()),
            "'0' is not a rate (100k, 1M, 250000): '0' must be greater than zero"
        );
        assert!(
            message(parse_tps("x", false).unwrap_err())
                .starts_with("'x' is not a rate (100k, 1M, 250000): ")
        );
    }

    #[test]
    fn server_flags_make_checked_configurations() {
        let c = server().udp_config().unwrap();
        assert_eq!(
            (c.steering, c.workers, c.duration),
            (Steering::Cpu, 1, Some(Duration::from_millis(2500)))
        );
        let bad = |f: ServerFlags| message(f.udp_config().unwrap_err());
        assert_eq!(
            bad(ServerFlags {
                steering: "rss".into(),
                ..server()
            }),
            "--steering is cpu or hash, not 'rss'"
        );
        assert_eq!(
            bad(ServerFlags {
                busy_poll_us: 100_001,
                ..server()
            }),
            "--busy-poll is at most 100000 microseconds"
        );
        let nap = |us, batch, spin| ServerFlags {
            coalesce_us: us,
            batch,
            spin,
            ..server()
        };
        assert_eq!(
            nap(100, 64, false).udp_config().unwrap().coalesce,
            Duration::from_micros(100)
        );
        assert_eq!(server().udp_config().unwrap().coalesce, Duration::ZERO);
        assert_eq!(
            bad(nap(1_001, 64, false)),
            "--coalesce is at most 1000 microseconds"
        );
        assert!(bad(nap(100, 64, true)).contains("--spin never sleeps"));
        let sockets = |n, spin, no_reuseport| ServerFlags {
            client_sockets: n,
            spin,
            no_reuseport,
            ..server()
        };
        let got = |f: ServerFlags| f.udp_config().map(|c| c.client_sockets);
        assert_eq!(
            got(sockets(None, true, false)).unwrap(),
            crate::clients::CLIENT_SOCKETS
        );
        assert_eq!(got(sockets(None, false, false)).unwrap(), 0);
        assert_eq!(got(sockets(None, true, true)).unwrap(), 0);
        assert_eq!(got(sockets(Some(3), true, false)).unwrap(), 3);
        assert_eq!(got(sockets(Some(0), false, true)).unwrap(), 0);
        assert!(bad(sockets(Some(3), false, false)).contains("for spinning workers (--spin)"));
        assert!(bad(sockets(Some(3), true, true)).contains("not with --no-reuseport"));
        assert_eq!(got(sockets(Some(1024), true, false)).unwrap(), 1024);
        assert_eq!(
            bad(sockets(Some(1025), true, false)),
            "--client-sockets is at most 1024, not 1025"
        );
        assert!(bad(nap(100, 1, false)).contains("needs --batch above 1"));
        assert!(
            bad(ServerFlags {
                no_reuseport: true,
                steering: "hash".into(),
                ..server()
            })
            .starts_with("--no-reuseport shares one socket")
        );
        assert_eq!(
            bad(ServerFlags {
                time_s: Some(-1.0),
                ..server()
            }),
            "--time must be a number of seconds >= 0, not -1"
        );
        let t = server().tcp_config().unwrap();
        assert_eq!(t.idle_timeout, Duration::from_secs(60));
        assert_eq!(
            message(
                ServerFlags {
                    idle_timeout_s: 0.0,
                    ..server()
                }
                .tcp_config()
                .unwrap_err()
            ),
            "--idle-timeout must be above zero"
        );
    }

    #[test]
    fn af_xdp_spins_and_refuses_the_socket_recipes_switches() {
        let xdp = |f: ServerFlags| ServerFlags {
            af_xdp: Some("lr-vb".into()),
            ..f
        };
        let c = xdp(server()).udp_config().unwrap();
        assert_eq!(c.af_xdp.as_deref(), Some("lr-vb"));
        assert!(c.spin, "AF_XDP workers spin");
        assert_eq!(c.client_sockets, 0);
        let c = xdp(ServerFlags {
            spin: true,
            ..server()
        })
        .udp_config()
        .unwrap();
        assert_eq!(
            c.client_sockets, 0,
            "no sockets for clients: the rings answer"
        );
        let bad = |f: ServerFlags| message(xdp(f).udp_config().unwrap_err());
        for (f, flag) in [
            (
                ServerFlags {
                    busy_poll_us: 50,
                    ..server()
                },
                "--busy-poll",
            ),
            (
                ServerFlags {
                    coalesce_us: 100,
                    ..server()
                },
                "--coalesce",
            ),
            (
                ServerFlags {
                    client_sockets: Some(4),
                    ..server()
                },
                "--client-sockets",
            ),
            (
                ServerFlags {
                    no_reuseport: true,
                    ..server()
                },
                "--no-reuseport",
            ),
            (
                ServerFlags {
                    no_gso: true,
                    ..server()
                },
                "--no-gso",
            ),
            (
                ServerFlags {
                    steering: "hash".into(),
                    ..server()
                },
                "--steering",
            ),
        ] {
            let m = bad(f);
            assert!(
                m.starts_with(&format!("{flag} is for the socket server")),
                "{m}"
            );
        }
        let empty = ServerFlags {
            af_xdp: Some(String::new()),
            ..server()
        };
        assert_eq!(
            message(empty.udp_config().unwrap_err()),
            "--af-xdp needs an interface's name"
        );
        assert!(
            message(xdp(server()).tcp_config().unwrap_err()).starts_with("--af-xdp answers UDP")
        );
        let start = xdp(server()).udp_start("127.0.0.1:5300".parse().unwrap());
        assert_eq!(start["af_xdp"], "lr-vb");
        assert_eq!(start["spin"], true);
    }

    #[test]
    fn start_configs_keep_their_keys_in_order() {
        let at: SocketAddr = "127.0.0.1:5300".parse().unwrap();
        let keys =
            |v: serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(
            keys(server().udp_start(at)),
            [
                "listen",
                "cores",
                "steering",
                "time_s",
                "batch",
                "max_response",
                "reuseport",
                "pin",
                "busy_poll_us",
                "gso",
                "spin",
                "coalesce_us",
                "client_sockets",
                "af_xdp"
            ]
        );
        assert_eq!(
            keys(server().tcp_start(at)),
            [
                "listen",
                "transport",
                "cores",
                "time_s",
                "max_response",
                "max_conns",
                "max_per_source",
                "idle_timeout_s",
                "max_message",
                "pin",
                "busy_poll_us",
                "spin"
            ]
        );
        let f = ClientFlags {
            pps: Some("1k".into()),
            tcp: true,
            ..client()
        };
        let (cfg, tcp) = f.config().unwrap();
        assert_eq!(cfg.load, Load::Open { tps: 1000.0 });
        let v = f.start(&cfg, tcp.as_ref());
        assert_eq!(v["rate_tps"], 1000.0);
        assert_eq!(v["connect_timeout_ms"], 1000.0);
        assert_eq!(v["server"], "127.0.0.1:5300");
        assert_eq!(
            keys(v).last().map(String::as_str),
            Some("connect_timeout_ms")
        );
    }

    #[test]
    fn client_flags_are_checked() {
        let bad = |f: ClientFlags| message(f.config().unwrap_err());
        assert_eq!(
            bad(ClientFlags {
                time_s: 0.0,
                ..client()
            }),
            "--time must be above zero"
        );
        assert_eq!(
            bad(ClientFlags {
                timeout_ms: 0.0,
                ..client()
            }),
            "--timeout-ms must be above zero"
        );
        assert_eq!(
            bad(ClientFlags {
                tcp: true,
                connect_timeout_ms: f64::NAN,
                ..client()
            }),
            "--connect-timeout-ms must be above zero"
        );
        assert_eq!(
            bad(ClientFlags {
                rate: Some("5k".into()),
                ..client()
            }),
            "--rate 5k is ambiguous: write --pps 5k (requests per second) or --rate 5ktps"
        );
        let (cfg, tcp) = client().config().unwrap();
        assert_eq!(
            (cfg.load, cfg.response_size, tcp),
            (Load::Closed { outstanding: 1 }, 64, None)
        );
    }
}
