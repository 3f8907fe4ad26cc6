//! What a server is asked: its options ([`ServerOptions`]), the limits it
//! holds clients to ([`Limits`]: how long a test may live, how fast it may
//! go) and its credentials ([`ServerAuth`]).

use crate::net::Family;
use linerate_iperf_proto::report::OutputMode;
use linerate_iperf_proto::{IErr, Params};
use std::net::IpAddr;
use std::time::Duration;

/// Limits a server enforces on what clients ask for, and on what they
/// then do.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Tests served at once (iperf3: 1). Others get ACCESS_DENIED.
    pub max_tests: usize,
    /// Longest test (duration + omit), seconds; `-t 0` is refused too.
    pub max_duration_s: Option<u32>,
    /// Most streams per test (P, or 2P in bidir).
    pub max_streams: Option<u32>,
    /// Highest total rate (all streams), bit/s; unlimited tests are refused,
    /// and a test whose streams move more than this, averaged over
    /// `rate_window`, is ended (iperf3's `--server-bitrate-limit`).
    pub max_rate_bps: Option<u64>,
    /// The window the moved rate is averaged over.
    pub rate_window: Duration,
    /// Connections one source address may have waiting for their cookie.
    pub max_pending_per_source: usize,
    /// Tests one source address may run at once.
    pub max_tests_per_source: usize,
    /// How long past its asked time (+ omit) a test may run before the
    /// server ends it; tests that end by amount (`-n`/`-k`) run at most
    /// `max_duration_s` (or [`AMOUNT_TEST_MAX`]) plus this.
    pub grace: Duration,
}

/// The longest a test that ends by amount (`-n`/`-k`, no `-t`) may run on
/// a server without `--server-max-duration`: ten minutes (a client that
/// needs longer asks for it with `-t`, or the operator raises the limit).
pub const AMOUNT_TEST_MAX: Duration = Duration::from_secs(600);

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tests: 1,
            max_duration_s: None,
            max_streams: None,
            max_rate_bps: None,
            rate_window: Duration::from_secs(5),
            max_pending_per_source: 8,
            max_tests_per_source: 1,
            grace: Duration::from_secs(40),
        }
    }
}

impl Limits {
    /// How long a test asking for `p` may run, counted from its start.
    pub fn life(&self, p: &Params) -> Duration {
        let asked = if p.time_s > 0 {
            Duration::from_secs(u64::from(p.time_s) + u64::from(p.omit_s))
        } else {
            self.max_duration_s
                .map_or(AMOUNT_TEST_MAX, |s| Duration::from_secs(u64::from(s)))
        };
        asked + self.grace
    }

    /// How long a source whose test was cut for its rate waits for its
    /// next: twice the rate window, at least 10 s.
    pub fn rate_cooldown(&self) -> Duration {
        (self.rate_window * 2).max(Duration::from_secs(10))
    }
}

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub port: u16,
    pub bind: Option<IpAddr>,
    pub family: Family,
    /// `-1`: serve one test, then exit.
    pub one_off: bool,
    /// `--idle-timeout`: with no test and no connection for this long the
    /// server restarts its listener (with `-1`, exits).
    pub idle_timeout: Option<Duration>,
    pub interval: Duration,
    pub output: OutputMode,
    /// `--rcv-timeout`: no data this long while receiving ends the test.
    pub rcv_timeout: Duration,
    /// How long a new connection may take to send its cookie, and a client
    /// its parameters or results.
    pub control_timeout: Duration,
    pub limits: Limits,
    /// Send UDP with generic segmentation offload where the kernel has it.
    pub udp_gso: bool,
    /// CPUs for stream threads (a client's `-A n,m` asks for CPU m instead).
    pub affinity: Vec<usize>,
    /// The shared run-model reporters (`--csv`, `--live`, `--metrics`):
    /// each test is a run through `linerate_run::drive_engine` into them.
    pub events: Option<linerate_run::SharedReporter>,
    /// `--bind-dev`: every socket goes through this interface.
    pub bind_dev: Option<String>,
    /// RSA authentication: only the users in its file may run tests.
    pub auth: Option<ServerAuth>,
    /// `-m`: the listening socket takes Multipath TCP (and plain TCP).
    pub mptcp: bool,
    /// `-d`: control messages, authentication and streams on stderr.
    pub debug: u8,
    /// `-F`: TCP senders send this file; receivers write what arrives to it.
    pub file: Option<std::path::PathBuf>,
}

/// iperf3's RSA authentication on the server.
#[derive(Clone)]
pub struct ServerAuth {
    pub key: linerate_iperf_proto::auth::RsaPrivateKey,
    /// Read at every test: edits take effect without a restart.
    pub users_path: std::path::PathBuf,
    /// Seconds a token's time may be away from this host's clock.
    pub skew_s: i64,
    pub padding: linerate_iperf_proto::auth::Padding,
}

/// Shows the users file and settings, never the key.
impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerAuth")
            .field("users_path", &self.users_path)
            .field("skew_s", &self.skew_s)
            .field("padding", &self.padding)
            .finish_non_exhaustive()
    }
}

impl ServerAuth {
    /// Checks a test's token; the user and the token's time, or why it was
    /// refused.
    pub fn check(&self, token: Option<&str>) -> Result<(String, i64), String> {
        let users = std::fs::read_to_string(&self.users_path).map_err(|e| {
            format!(
                "{}: {}: {e}",
                IErr::SERVER_AUTH_USERS.message(),
                self.users_path.display()
            )
        })?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        linerate_iperf_proto::auth::check(&self.key, self.padding, token, &users, now, self.skew_s)
            .map(|c| (c.user, c.ts))
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(time_s: u32, omit_s: u32) -> Params {
        Params {
            time_s,
            omit_s,
            ..Params::default()
        }
    }

    #[test]
    fn a_timed_test_lives_its_time_omit_and_grace() {
        let l = Limits::default();
        assert_eq!(l.life(&params(10, 2)), Duration::from_secs(52));
    }

    #[test]
    fn an_amount_test_is_bounded_by_default() {
        let mut l = Limits::default();
        // -n/-k with no -t: ten minutes plus the grace, not an hour.
        assert_eq!(l.life(&params(0, 0)), Duration::from_secs(640));
        l.max_duration_s = Some(30);
        l.grace = Duration::from_secs(1);
        assert_eq!(l.life(&params(0, 0)), Duration::from_secs(31));
    }
}
