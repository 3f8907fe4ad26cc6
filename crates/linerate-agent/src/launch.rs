//! What `linerate agent`'s command line sets up before it serves: the
//! sending backend and the numeric bounds checked, the token files read,
//! the peers pinned, the `--time` stop; then HTTPS and gRPC served
//! together until the stop.

use crate::{Agent, Peers, TOKEN_MIN, Tls};
use linerate_packet::BackendKind;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Why the agent cannot start, or stopped serving.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A flag refused, in words naming it.
    #[error("{0}")]
    Flag(String),
    /// A file or a socket failed: what, and why.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the gRPC server panicked")]
    GrpcPanicked,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

/// The sending backend: UDP sockets cannot carry the model's MACs, tags
/// or TCP flags.
pub fn tx_backend(k: BackendKind) -> Result<BackendKind, LaunchError> {
    match k {
        BackendKind::Udp | BackendKind::Socket | BackendKind::Auto => {
            Err(LaunchError::Flag(format!(
                "--backend {k}: the agent sends crafted frames: af_packet, socket:raw or af_xdp"
            )))
        }
        k => Ok(k),
    }
}

/// The numeric flags' bounds and the interface names, before anything is
/// opened: `--drain` and `--max-run` (seconds), `--time`, `--allow-iface`.
pub fn check_bounds(
    drain: f64,
    max_run: u64,
    time: Option<f64>,
    allow_iface: &[String],
) -> Result<(), LaunchError> {
    let refuse = |m: &str| Err(LaunchError::Flag(m.to_string()));
    if !(0.0..=60.0).contains(&drain) {
        return refuse("--drain must be between 0 and 60 seconds");
    }
    if !(1..=86_400).contains(&max_run) {
        return refuse("--max-run must be between 1 and 86400 seconds");
    }
    if time.is_some_and(|t| !(0.1..=31_536_000.0).contains(&t)) {
        return refuse("--time must be between 0.1 s and a year");
    }
    for i in allow_iface {
        if i.is_empty() || i.len() > 15 || i.contains(['/', ' ']) || i == "." || i == ".." {
            return refuse(&format!("--allow-iface '{i}' is not an interface name"));
        }
    }
    Ok(())
}

/// The bearer token: `--token-file`'s, or a random one (`true`: made
/// here, to be shown).
pub fn token(file: Option<&Path>) -> Result<(String, bool), LaunchError> {
    match file {
        None => Ok((crate::random_token(), true)),
        Some(path) => read_token(path).map(|t| (t, false)),
    }
}

/// A token file's first line, at least [`TOKEN_MIN`] printable characters.
pub fn read_token(path: &Path) -> Result<String, LaunchError> {
    let text =
        std::fs::read_to_string(path).map_err(io(format!("--token-file {}", path.display())))?;
    let t = text.lines().next().unwrap_or("").trim().to_string();
    if t.len() < TOKEN_MIN || !t.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(LaunchError::Flag(format!(
            "--token-file {}: its first line must be a token of at least {TOKEN_MIN} printable characters, no spaces",
            path.display()
        )));
    }
    Ok(t)
}

/// The peers a configuration may use (`--peer`, pinned by `--peer-cert`,
/// called with `--peer-token-file`'s token or `token`).
pub fn peers(
    urls: &[String],
    cert: Option<&Path>,
    token_file: Option<&Path>,
    token: &str,
    clock_shared: bool,
) -> Result<Option<Arc<Peers>>, LaunchError> {
    Ok(match cert {
        None if urls.is_empty() => None,
        None => return Err(LaunchError::Flag("--peer needs --peer-cert".into())),
        Some(cert) => {
            if urls.is_empty() {
                return Err(LaunchError::Flag("--peer-cert without --peer".into()));
            }
            let peer_token = match token_file {
                Some(p) => read_token(p)?,
                None => token.to_string(),
            };
            Some(Arc::new(
                Peers::new(urls.to_vec(), cert, peer_token, clock_shared)
                    .map_err(LaunchError::Flag)?,
            ))
        }
    })
}

/// `--write-cert`: the certificate served, written to a new file.
pub fn write_cert(path: &PathBuf, pem: &str) -> Result<(), LaunchError> {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(pem.as_bytes()))
        .map_err(io(format!(
            "--write-cert {} (written new, never over a file)",
            path.display()
        )))
}

/// `--time`: a thread that sets `stop` once `after` has passed (or
/// returns at once when something else set it).
pub fn stop_after(after: Duration, stop: Arc<AtomicBool>) -> Result<(), LaunchError> {
    let until = Instant::now() + after;
    std::thread::Builder::new()
        .name("agent-time".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
                std::thread::sleep(left.min(Duration::from_millis(100)));
            }
        })
        .map_err(io("starting the --time thread"))?;
    Ok(())
}

/// `--grpc-listen`'s socket.
pub fn bind_grpc(addr: std::net::SocketAddr) -> Result<TcpListener, LaunchError> {
    TcpListener::bind(addr).map_err(io(format!("--grpc-listen {addr}")))
}

/// HTTPS on `listener` and, from a thread of its own, gRPC on `grpc`
/// (the same certificate, agent and token) until `stop`; the HTTPS
/// server's end ends the gRPC one.
pub fn serve_both(
    listener: TcpListener,
    grpc: Option<TcpListener>,
    tls: Tls,
    agent: Arc<Agent>,
    token: Arc<String>,
    stop: &linerate_run::Cancel,
) -> Result<(), LaunchError> {
    let grpc = grpc
        .map(|g| {
            let (tls, agent, token, stop) = (
                tls.config.clone(),
                agent.clone(),
                token.clone(),
                stop.shared(),
            );
            std::thread::Builder::new()
                .name("agent-grpc".into())
                .spawn(move || crate::grpc::serve(g, tls, agent, token, stop))
        })
        .transpose()
        .map_err(io("starting the gRPC server"))?;
    let served = crate::serve(listener, tls.config, agent, token, stop.flag());
    stop.cancel();
    if let Some(t) = grpc {
        t.join()
            .map_err(|_| LaunchError::GrpcPanicked)?
            .map_err(io("serving gRPC"))?;
    }
    served.map_err(io("serving"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_names_are_refused_in_words() {
        let ifaces = |n: &str| vec![n.to_string()];
        assert!(check_bounds(0.5, 3600, None, &ifaces("eth0")).is_ok());
        let said = |r: Result<(), LaunchError>| r.unwrap_err().to_string();
        assert_eq!(
            said(check_bounds(61.0, 3600, None, &ifaces("eth0"))),
            "--drain must be between 0 and 60 seconds"
        );
        assert_eq!(
            said(check_bounds(0.5, 0, None, &ifaces("eth0"))),
            "--max-run must be between 1 and 86400 seconds"
        );
        assert_eq!(
            said(check_bounds(0.5, 1, Some(0.01), &ifaces("eth0"))),
            "--time must be between 0.1 s and a year"
        );
        assert_eq!(
            said(check_bounds(0.5, 1, None, &ifaces("../x"))),
            "--allow-iface '../x' is not an interface name"
        );
    }

    #[test]
    fn only_crafting_backends_send_and_peers_need_their_certificate() {
        assert!(tx_backend(BackendKind::Udp).is_err());
        assert_eq!(
            tx_backend(BackendKind::AfPacket).unwrap(),
            BackendKind::AfPacket
        );
        let urls = vec!["https://198.18.0.1:8443".to_string()];
        let e = peers(&urls, None, None, "t", false).unwrap_err();
        assert_eq!(e.to_string(), "--peer needs --peer-cert");
        let e = peers(&[], Some(Path::new("c.pem")), None, "t", false).unwrap_err();
        assert_eq!(e.to_string(), "--peer-cert without --peer");
        assert!(peers(&[], None, None, "t", false).unwrap().is_none());
    }

    #[test]
    fn a_short_token_is_refused() {
        let dir = std::env::temp_dir().join(format!("lr-token-{}", std::process::id()));
        std::fs::write(&dir, "short\n").unwrap();
        let e = read_token(&dir).unwrap_err().to_string();
        std::fs::remove_file(&dir).unwrap();
        assert!(e.ends_with("printable characters, no spaces"), "{e}");
    }
}
