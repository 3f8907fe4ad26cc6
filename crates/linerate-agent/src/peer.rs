//! Ports on another agent: a campaign across hosts. A port whose location
//! is `https://HOST:PORT/IFACE` is interface IFACE of the agent at
//! `https://HOST:PORT`, which must be one of this agent's `--peer`s (an
//! allow-list: a client cannot make the agent call anywhere else), whose
//! certificate is pinned (`--peer-cert`) and which takes this agent's
//! peer token. The peer counts a flow's frames for it:
//!
//! - `POST /linerate/port {"iface"}`: the port's MAC (the model's `auto`
//!   destination) and link;
//! - `POST /linerate/rx/start {"iface", "ids": {"base", "span"},
//!   "seconds", "clocks_shared"}`: a sink on the port, answered once it
//!   is ready, with its `id`;
//! - `POST /linerate/rx/counts {"id"}`: what the flow's ids counted so far;
//! - `POST /linerate/rx/stop {"id"}`: stops it; its exact counts.
//!
//! The receiving side of these routes is [`Receivers`]; the calling side
//! is [`Peers::call`].

use crate::json::{Invalid, Obj, invalid};
use crate::lock::lock;
use linerate_packet::{BackendKind, RxFilter, SinkConfig};
use linerate_run::{Interval, Scope};
use linerate_traffic::ProbeIds;
use linerate_traffic::accounting::LatencyHist3;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The agents this one may use ports of, and how it talks to them.
#[derive(Debug)]
pub struct Peers {
    /// `https://HOST:PORT`, as given.
    pub urls: Vec<String>,
    tls: Arc<ClientConfig>,
    token: String,
    /// Sender and peer read the same clock (namespaces of one host, PTP):
    /// the peer reports latency.
    pub clock_shared: bool,
}

/// Trusts exactly the certificates of a file (pinned), whatever names
/// they carry.
#[derive(Debug)]
struct Pinned(Vec<CertificateDer<'static>>, Arc<CryptoProvider>);

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.0.iter().any(|c| c.as_ref() == end_entity.as_ref()) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(
                "the peer's certificate is not one of --peer-cert".into(),
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(m, c, d, &self.1.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        m: &[u8],
        c: &CertificateDer<'_>,
        d: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(m, c, d, &self.1.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.1.signature_verification_algorithms.supported_schemes()
    }
}

/// Most bytes of a peer's answer.
const ANSWER_MAX: usize = 1 << 20;

/// `https://IP:PORT` as an address (no names: nothing to resolve).
pub fn peer_addr(url: &str) -> Option<SocketAddr> {
    url.strip_prefix("https://")?.parse().ok()
}

/// A TLS client that trusts exactly the certificates `pinned` (an
/// agent's, as `--write-cert` wrote them), whatever names they carry.
pub fn pinned_client(pinned: Vec<CertificateDer<'static>>) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls_rustcrypto::provider());
    let tls = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned(pinned, provider)))
        .with_no_client_auth();
    Ok(Arc::new(tls))
}

impl Peers {
    /// Peers at `urls` (each `https://IP:PORT`), their certificates pinned
    /// from `certs` (PEM), called with `token`.
    pub fn new(
        urls: Vec<String>,
        certs: &Path,
        token: String,
        clock_shared: bool,
    ) -> Result<Self, String> {
        for u in &urls {
            if peer_addr(u).is_none() {
                return Err(format!("--peer {u}: not https://IP:PORT"));
            }
        }
        let pinned = CertificateDer::pem_file_iter(certs)
            .map_err(|e| format!("--peer-cert {}: {e}", certs.display()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("--peer-cert {}: {e}", certs.display()))?;
        if pinned.is_empty() {
            return Err(format!(
                "--peer-cert {}: no CERTIFICATE in it",
                certs.display()
            ));
        }
        Ok(Self {
            urls,
            tls: pinned_client(pinned)?,
            token,
            clock_shared,
        })
    }

    /// Splits a location `https://IP:PORT/IFACE` of an allowed peer.
    pub fn split<'a>(&self, location: &'a str) -> Option<(&'a str, &'a str)> {
        let rest = location.strip_prefix("https://")?;
        let slash = rest.find('/')?;
        let (base, iface) = location.split_at("https://".len() + slash);
        let iface = &iface[1..];
        self.urls.iter().any(|u| u == base).then_some((base, iface))
    }

    /// POSTs `body` to `path` of the peer at `base`; its answer, or why
    /// there is none, all within `within`.
    pub fn call<T: DeserializeOwned>(
        &self,
        base: &str,
        path: &str,
        body: &impl Serialize,
        within: Duration,
    ) -> Result<T, String> {
        let fail = |what: String| format!("peer {base}: {path}: {what}");
        let addr = peer_addr(base).ok_or_else(|| fail("not https://IP:PORT".into()))?;
        let deadline = Instant::now() + within;
        let sock = TcpStream::connect_timeout(&addr, within.min(Duration::from_secs(5)))
            .map_err(|e| fail(e.to_string()))?;
        sock.set_read_timeout(Some(Duration::from_millis(500)))
            .map_err(|e| fail(e.to_string()))?;
        sock.set_write_timeout(Some(Duration::from_millis(500)))
            .map_err(|e| fail(e.to_string()))?;
        let conn = ClientConnection::new(self.tls.clone(), ServerName::IpAddress(addr.ip().into()))
            .map_err(|e| fail(e.to_string()))?;
        let mut s = StreamOwned::new(conn, sock);
        let body = serde_json::to_string(body).map_err(|e| fail(e.to_string()))?;
        let req = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.token,
            body.len()
        );
        s.write_all(req.as_bytes())
            .and_then(|()| s.flush())
            .map_err(|e| fail(e.to_string()))?;
        let mut out = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            if Instant::now() >= deadline {
                return Err(fail(format!(
                    "no whole answer within {} s",
                    within.as_secs()
                )));
            }
            match s.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    out.extend_from_slice(&chunk[..n]);
                    if out.len() > ANSWER_MAX {
                        return Err(fail("an answer above 1 MiB".into()));
                    }
                }
                Err(e) if linerate_backend::port::recv_idle(&e) => {}
                // A peer that closes without close_notify after a whole
                // answer: what came is read below.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => return Err(fail(e.to_string())),
            }
        }
        let text = String::from_utf8_lossy(&out);
        let (head, body) = text
            .split_once("\r\n\r\n")
            .ok_or_else(|| fail("no HTTP answer".into()))?;
        let status: u16 = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if status != 200 {
            let why = serde_json::from_str::<Refusal>(body)
                .ok()
                .and_then(|r| r.errors.into_iter().next())
                .unwrap_or_default();
            return Err(fail(format!("{status}: {why}")));
        }
        serde_json::from_str(body).map_err(|e| fail(format!("{status}, not the answer: {e}")))
    }
}

/// A receiver's counts of its flow's ids, as the routes give them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RxCounts {
    pub frames: u64,
    pub bytes: u64,
    pub pps: f64,
    pub bps: f64,
    pub done: bool,
    /// min, max, mean one-way latency, ns.
    pub latency: Option<(f64, f64, f64)>,
    pub error: Option<String>,
}

/// `/linerate/port`'s question and answer.
#[derive(Debug, Clone, Serialize)]
pub struct PortAsk<'a> {
    pub iface: &'a str,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PortFacts {
    pub mac: String,
    pub up: bool,
}

/// `/linerate/rx/start`'s question: a sink on `iface` counting the ids
/// `base..base + span` for at most `seconds`.
#[derive(Debug, Clone, Serialize)]
pub struct RxStart<'a> {
    pub iface: &'a str,
    pub ids: RxIds,
    pub seconds: f64,
    pub clocks_shared: bool,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct RxIds {
    pub base: u16,
    pub span: u32,
}

/// A receiver, as `/linerate/rx/start` answers it and the other routes
/// name it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct RxId {
    pub id: u64,
}

/// The models' `Error`, as a peer refuses.
#[derive(Debug, Deserialize)]
struct Refusal {
    #[serde(default)]
    errors: Vec<String>,
}

#[derive(Debug)]
struct Receiver {
    stop: AtomicBool,
    counts: Mutex<RxCounts>,
}

/// The receivers this agent runs for its peers: at most
/// [`RECEIVERS_MAX`] at once, each bounded by the seconds it was asked
/// for.
#[derive(Debug, Default)]
pub struct Receivers {
    next: AtomicU64,
    live: Mutex<BTreeMap<u64, Arc<Receiver>>>,
}

pub const RECEIVERS_MAX: usize = 64;

impl Receivers {
    /// `/linerate/rx/start`: a sink on an allowed interface counting a
    /// block of ids, answered once ready.
    pub fn start(
        &self,
        o: &Obj,
        allow: &[String],
        (backend, wires): (BackendKind, &linerate_backend::port::Wires),
        run_max: Duration,
    ) -> Result<RxId, Invalid> {
        let iface = o
            .str("iface")?
            .ok_or_else(|| invalid("iface", "required"))?
            .to_string();
        if !allow.contains(&iface) {
            return Err(invalid(
                "iface",
                format!("'{iface}' is not an interface this agent may use"),
            ));
        }
        let ids = o.obj("ids")?.ok_or_else(|| invalid("ids", "required"))?;
        let base = ids.u64("base")?.unwrap_or(0);
        let span = ids.u64("span")?.unwrap_or(1);
        ids.done()?;
        let ids = u16::try_from(base)
            .ok()
            .and_then(|b| ProbeIds::block(b, u32::try_from(span).ok()?))
            .ok_or_else(|| {
                invalid(
                    "ids",
                    "a base below 65536 and a power-of-two span up to 65536",
                )
            })?;
        let seconds = o.f64("seconds")?.unwrap_or(0.0);
        let limit = run_max.as_secs_f64() + 120.0;
        if !(seconds > 0.0 && seconds <= limit) {
            return Err(invalid("seconds", format!("above 0 and at most {limit}")));
        }
        let clocks_shared = o.bool("clocks_shared")?.unwrap_or(false);
        o.done()?;
        {
            let mut live = lock(&self.live);
            live.retain(|_, r| !lock(&r.counts).done);
            if live.len() >= RECEIVERS_MAX {
                return Err(invalid(
                    "",
                    format!("{RECEIVERS_MAX} receivers run already"),
                ));
            }
        }
        let cfg = SinkConfig {
            iface: iface.clone(),
            duration: Duration::from_secs_f64(seconds),
            backend,
            wires: wires.clone(),
            clocks_shared,
            until_packets: None,
            capture: None,
            cores: Vec::new(),
            interval: Some(Duration::from_millis(200)),
            take: RxFilter::Probes,
        };
        let r = Arc::new(Receiver {
            stop: AtomicBool::new(false),
            counts: Mutex::new(RxCounts::default()),
        });
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let me = r.clone();
        std::thread::Builder::new()
            .name("agent-rx".into())
            .spawn(move || receive(&me, &cfg, ids, ready_tx))
            .map_err(|e| invalid("", format!("a receiver thread: {e}")))?;
        match ready_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(()) => {}
            Err(_) => {
                r.stop.store(true, Ordering::Relaxed);
                let why = lock(&r.counts)
                    .error
                    .clone()
                    .unwrap_or_else(|| "not ready in 10 s".into());
                return Err(invalid("iface", format!("receiving on {iface}: {why}")));
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.live).insert(id, r);
        Ok(RxId { id })
    }

    fn find(&self, o: &Obj) -> Result<(u64, Arc<Receiver>), Invalid> {
        let id = o.u64("id")?.ok_or_else(|| invalid("id", "required"))?;
        o.done()?;
        let r = lock(&self.live)
            .get(&id)
            .cloned()
            .ok_or_else(|| invalid("id", format!("no receiver {id}")))?;
        Ok((id, r))
    }

    pub fn counts(&self, o: &Obj) -> Result<RxCounts, Invalid> {
        let (_, r) = self.find(o)?;
        Ok(lock(&r.counts).clone())
    }

    /// Stops a receiver and answers its final counts (waiting 5 s at most
    /// for its end).
    pub fn stop(&self, o: &Obj) -> Result<RxCounts, Invalid> {
        let (id, r) = self.find(o)?;
        r.stop.store(true, Ordering::Relaxed);
        let end = Instant::now() + Duration::from_secs(5);
        while !lock(&r.counts).done && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(5));
        }
        let c = lock(&r.counts).clone();
        if c.done {
            lock(&self.live).remove(&id);
        }
        Ok(c)
    }

    pub fn stop_all(&self) {
        for r in lock(&self.live).values() {
            r.stop.store(true, Ordering::Relaxed);
        }
    }
}

fn receive(r: &Receiver, cfg: &SinkConfig, ids: ProbeIds, ready: std::sync::mpsc::Sender<()>) {
    let on_ready = &mut |_: &str| {
        let _ = ready.send(());
    };
    let on_interval = &mut |iv: &Interval| {
        let (mut p, mut b) = (0u64, 0u64);
        for row in iv.rows.iter().filter(|row| row.scope == Scope::Flow) {
            if row
                .key
                .and_then(|k| u16::try_from(k).ok())
                .is_some_and(|id| ids.contains(id))
            {
                p += row.counts.packets.unwrap_or(0);
                b += row.counts.bytes.unwrap_or(0);
            }
        }
        let secs = (iv.end_s - iv.start_s).max(1e-3);
        let mut c = lock(&r.counts);
        c.frames += p;
        c.bytes += b;
        c.pps = p as f64 / secs;
        c.bps = b as f64 * 8.0 / secs;
    };
    let got = linerate_packet::sink(cfg, &r.stop, on_ready, on_interval);
    let mut c = lock(&r.counts);
    match got {
        Ok(s) => {
            let (mut p, mut b) = (0u64, 0u64);
            let mut hist = LatencyHist3::new();
            for (id, f) in s.counts.flows.iter() {
                if ids.contains(*id) {
                    let n = f.seq.received();
                    p += n;
                    b += f.bytes + 4 * n;
                    if let Some(h) = s.counts.latency_of(f) {
                        hist.add(&h);
                    }
                }
            }
            c.frames = p;
            c.bytes = b;
            c.latency =
                linerate_traffic::accounting::latency_summary(&hist).map(|l| (l[0], l[5], l[1]));
            c.error = s.error;
        }
        Err(e) => c.error = Some(e.to_string()),
    }
    c.pps = 0.0;
    c.bps = 0.0;
    c.done = true;
}
