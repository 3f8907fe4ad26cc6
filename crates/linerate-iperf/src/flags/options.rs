//! The [`ServerOptions`] and [`ClientOptions`] the flags make, with the
//! credentials they name read (iperf3's errors 22, 23 and 35).

use super::{CLIENT_CONTROL_TIMEOUT, CONTROL_TIMEOUT_MS, FlagError, Flags, RCV_TIMEOUT_MS};
use crate::credentials::{self, CredentialError};
use crate::{ClientAuth, ClientOptions, Limits, ServerAuth, ServerOptions};
use linerate_iperf_proto::auth::Padding;
use std::time::Duration;

impl Flags {
    fn padding(&self) -> Padding {
        if self.use_pkcs1_padding {
            Padding::Pkcs1
        } else {
            Padding::Oaep
        }
    }

    fn rcv_timeout(&self) -> Duration {
        Duration::from_millis(self.rcv_timeout_ms.unwrap_or(RCV_TIMEOUT_MS))
    }

    /// The server's limits (0 for a duration or a rate: no limit, as
    /// iperf3).
    pub fn limits(&self) -> Limits {
        Limits {
            max_tests: self.max_tests.max(1),
            max_duration_s: self.server_max_duration_s.filter(|&d| d > 0),
            max_streams: self.server_max_streams,
            max_rate_bps: self.server_bitrate_limit.map(|(r, _)| r).filter(|&r| r > 0),
            rate_window: Duration::from_secs(self.server_bitrate_limit.map_or(5, |(_, w)| w)),
            max_pending_per_source: self.max_pending_per_source.max(1),
            max_tests_per_source: self.max_tests_per_source.unwrap_or(self.max_tests).max(1),
            grace: Duration::from_secs(self.server_grace_s),
        }
    }

    /// The server's options; `events` makes its reporters (after the flags
    /// are checked, before the credentials are read).
    pub fn server_options<E>(
        &self,
        events: impl FnOnce() -> Result<Option<linerate_run::SharedReporter>, E>,
    ) -> Result<ServerOptions, E>
    where
        E: From<FlagError> + From<CredentialError>,
    {
        Ok(ServerOptions {
            port: self.port,
            bind: self.bind.as_ref().map(|(ip, _)| *ip),
            bind_dev: self.bind_device(),
            family: self.family(),
            one_off: self.one_off,
            idle_timeout: self.idle_timeout_s.map(Duration::from_secs),
            interval: self.interval()?,
            output: self.output(),
            rcv_timeout: self.rcv_timeout(),
            control_timeout: Duration::from_millis(self.control_timeout_ms.max(1)),
            limits: self.limits(),
            udp_gso: !self.no_gso,
            affinity: self.stream_cpus()?,
            events: events()?,
            auth: self.server_auth::<E>()?,
            mptcp: self.mptcp,
            debug: self.debug.unwrap_or(0),
            file: self.file.clone(),
        })
    }

    /// The server's key and users file, checked before serving (iperf3's
    /// errors 23 and 35).
    pub fn server_auth<E>(&self) -> Result<Option<ServerAuth>, E>
    where
        E: From<FlagError> + From<CredentialError>,
    {
        let (key, users) = match (&self.rsa_private_key_path, &self.authorized_users_path) {
            (None, None) if self.time_skew_threshold_s.is_some() => {
                return Err(FlagError::ServerAuth.into());
            }
            (None, None) => return Ok(None),
            (Some(k), Some(u)) => (k, u),
            _ => return Err(FlagError::ServerAuth.into()),
        };
        let skew_s = self.time_skew_threshold_s.unwrap_or(10);
        Ok(Some(credentials::server_auth(
            key,
            users,
            skew_s,
            self.padding(),
        )?))
    }

    /// The client's credentials (iperf3's error 22 when the user or the key
    /// is missing).
    pub fn client_auth<E>(&self) -> Result<Option<ClientAuth>, E>
    where
        E: From<FlagError> + From<CredentialError>,
    {
        match (&self.username, &self.rsa_public_key_path) {
            (None, None) => Ok(None),
            (Some(u), Some(k)) => Ok(Some(credentials::client_auth(u, k, self.padding())?)),
            _ => Err(FlagError::ClientAuth.into()),
        }
    }

    /// UDP GSO for a client of `host`: on (linerate's default) unless
    /// `--no-gso`, or unless the datagrams leave by a veth that would hand a
    /// GSO batch to its peer whole (then off, and said through `warn`: its
    /// datagrams would be counted and never cross as datagrams; `--gsro`
    /// keeps it on).
    pub fn udp_gso(&self, host: &str, warn: &mut dyn FnMut(String)) -> bool {
        if self.no_gso {
            return false;
        }
        if !self.udp || self.gsro || self.reverse {
            return true;
        }
        match crate::net::veth_passing_gso_whole(host, self.port) {
            Some(iface) => {
                warn(format!(
                    "UDP GSO off: {iface} is a veth that hands a GSO batch to its peer whole, so the datagrams would be counted but never cross as datagrams (--gsro keeps it on; `ethtool -K {iface} tx-udp-segmentation off` makes the kernel split them)"
                ));
                false
            }
            None => true,
        }
    }

    /// The client's options for a test against `host` (no reporters, no
    /// early finish: the run sets those); `warn` says what the flags turn
    /// off.
    pub fn client_options<E>(
        &self,
        host: &str,
        warn: &mut dyn FnMut(String),
    ) -> Result<ClientOptions, E>
    where
        E: From<FlagError> + From<CredentialError>,
    {
        let (params, bandwidth_given) = self.params()?;
        Ok(ClientOptions {
            host: host.to_string(),
            port: self.port,
            params,
            time: self.fractional_time(),
            bandwidth_given,
            bind: self.bind.as_ref().map(|(ip, _)| *ip),
            bind_dev: self.bind_device(),
            cport: self.cport,
            family: self.family(),
            interval: self.interval()?,
            output: self.output(),
            connect_timeout: Duration::from_millis(self.connect_timeout_ms.max(1)),
            control_timeout: if self.control_timeout_ms == CONTROL_TIMEOUT_MS {
                CLIENT_CONTROL_TIMEOUT
            } else {
                Duration::from_millis(self.control_timeout_ms.max(1))
            },
            udp_gso: self.udp_gso(host, warn),
            affinity: self.stream_cpus()?,
            zerocopy: self.zerocopy,
            events: None,
            cntl_ka: self.cntl_ka,
            rcv_timeout: self.rcv_timeout(),
            snd_timeout: (self.snd_timeout_ms).map(|ms| Duration::from_millis(u64::from(ms))),
            auth: self.client_auth::<E>()?,
            debug: self.debug.unwrap_or(0),
            file: self.file.clone(),
            finish_early: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What both kinds of error become, for the tests.
    #[derive(Debug, PartialEq)]
    enum E {
        Flag(FlagError),
        Cred(String),
    }
    impl From<FlagError> for E {
        fn from(e: FlagError) -> E {
            E::Flag(e)
        }
    }
    impl From<CredentialError> for E {
        fn from(e: CredentialError) -> E {
            E::Cred(e.to_string())
        }
    }

    fn server() -> Flags {
        Flags {
            server: true,
            ..Flags::default()
        }
    }

    #[test]
    fn server_flags_make_its_options_and_limits() {
        let f = Flags {
            port: 5999,
            max_tests: 4,
            server_bitrate_limit: Some((50_000_000, 2)),
            server_max_duration_s: Some(0),
            rcv_timeout_ms: Some(500),
            ..server()
        };
        let o = f.server_options(|| Ok::<_, E>(None)).unwrap();
        assert_eq!(o.port, 5999);
        assert_eq!(o.rcv_timeout, Duration::from_millis(500));
        assert_eq!(o.limits.max_tests, 4);
        assert_eq!(o.limits.max_tests_per_source, 4);
        assert_eq!(o.limits.max_rate_bps, Some(50_000_000));
        assert_eq!(o.limits.rate_window, Duration::from_secs(2));
        assert_eq!(o.limits.max_duration_s, None);
        assert_eq!(o.limits.grace, Duration::from_secs(40));
        assert!(o.auth.is_none());
        // The flags are checked before the reporters are made.
        let bad = Flags {
            interval_s: 90.0,
            ..server()
        };
        let made = std::cell::Cell::new(false);
        let r = bad.server_options(|| {
            made.set(true);
            Ok::<_, E>(None)
        });
        assert_eq!(r.unwrap_err(), E::Flag(FlagError::Interval));
        assert!(!made.get());
    }

    #[test]
    fn credentials_need_both_of_their_files() {
        let f = Flags {
            rsa_private_key_path: Some("k.pem".into()),
            ..server()
        };
        assert_eq!(
            f.server_auth::<E>().unwrap_err(),
            E::Flag(FlagError::ServerAuth)
        );
        let f = Flags {
            time_skew_threshold_s: Some(5),
            ..server()
        };
        assert_eq!(
            f.server_auth::<E>().unwrap_err(),
            E::Flag(FlagError::ServerAuth)
        );
        let f = Flags {
            username: Some("u".into()),
            ..Flags::default()
        };
        assert_eq!(
            f.client_auth::<E>().unwrap_err(),
            E::Flag(FlagError::ClientAuth)
        );
        let f = Flags {
            rsa_private_key_path: Some("/nonexistent/k.pem".into()),
            authorized_users_path: Some("/nonexistent/users".into()),
            ..server()
        };
        assert!(
            matches!(f.server_auth::<E>(), Err(E::Cred(m)) if m.contains("/nonexistent/users"))
        );
    }

    #[test]
    fn client_flags_make_its_options() {
        let f = Flags {
            client: Some("198.18.0.1".into()),
            time_s: Some(1.5),
            control_timeout_ms: CONTROL_TIMEOUT_MS,
            no_gso: true,
            ..Flags::default()
        };
        let mut warned = Vec::new();
        let o: ClientOptions = f
            .client_options::<E>("198.18.0.1", &mut |w| warned.push(w))
            .unwrap();
        assert_eq!(o.control_timeout, CLIENT_CONTROL_TIMEOUT);
        assert_eq!(o.time, Some(Duration::from_millis(1500)));
        assert_eq!(o.params.time_s, 2);
        assert!(!o.udp_gso);
        assert_eq!(o.rcv_timeout, Duration::from_secs(120));
        assert!(warned.is_empty());
        let f = Flags {
            control_timeout_ms: 2000,
            ..f
        };
        let o = f.client_options::<E>("h", &mut |_| {}).unwrap();
        assert_eq!(o.control_timeout, Duration::from_secs(2));
    }
}
