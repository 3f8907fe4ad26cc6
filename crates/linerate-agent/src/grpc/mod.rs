//! The OTG gRPC API (the models' `otg.proto` service `otg.Openapi`) beside
//! the HTTPS one: HTTP/2 (hyper) over the same rustls configuration (its
//! certificate, ALPN `h2`), tonic's framing and statuses, the same token
//! in the metadata `authorization: Bearer <token>`, checked before the
//! request's body is read. A tokio runtime of its own thread serves it;
//! every call runs the HTTP path's route on a blocking thread
//! (`service`), off the data path.
//!
//! - `messages`: the envelopes (prost derives).
//! - `schema`, `table_config` (`table_flow` its flows'), `table_api`,
//!   `table_action` (control actions, config updates):
//!   protobuf to and from the OTG JSON the routes take and answer.
//! - `service`: the methods without I/O.
//!
//! Bounds, as the HTTPS side's (`crate::guard`, its own slots): at most
//! [`CONNECTIONS_MAX`] connections, 8 from one address, a new one taking
//! the slot of the one with no call in progress that has waited longest
//! (for its first authenticated call, or since its last); a source's unauthenticated reconnects rate-limited
//! and its failed tokens answered later each time (and logged). Each TLS
//! handshake within [`HANDSHAKE_WITHIN`] of the accept, the first
//! authenticated call within [`FIRST_CALL_WITHIN`], a connection with no
//! call for [`IDLE_MAX`] closed, at most [`STREAMS_MAX`] calls at once on
//! one, a request at most [`MESSAGE_MAX`], each call answered within
//! [`CALL_WITHIN`] (`DEADLINE_EXCEEDED` otherwise).

pub mod messages;
pub mod schema;
pub mod service;
#[rustfmt::skip]
pub mod table_action;
#[rustfmt::skip]
pub mod table_api;
#[rustfmt::skip]
pub mod table_config;
#[rustfmt::skip]
pub mod table_flow;

use crate::api::{Agent, Reply};
use crate::guard::{Failures, Held, Slots};
use crate::server::token_matches;
use hyper::body::Incoming;
use hyper::{HeaderMap, Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use messages::{Data, Empty, Holding};
use rustls::ServerConfig;
use service::{Answer, Rpc};
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tonic::Status;
use tonic::body::Body;
use tonic::server::{Grpc, ServerStreamingService, UnaryService};

pub use crate::guard::CONNECTIONS_MAX;
/// A connection's TLS handshake, from its accept.
pub const HANDSHAKE_WITHIN: Duration = crate::server::HEAD_WITHIN;
/// A connection's first authenticated call, from its accept.
pub const FIRST_CALL_WITHIN: Duration = crate::server::REQUEST_WITHIN;
/// A connection with no call in progress for this long is closed.
pub const IDLE_MAX: Duration = Duration::from_secs(300);
/// Calls at once on one connection.
pub const STREAMS_MAX: u32 = 16;
/// A request's message (snappi's configurations are far smaller).
pub const MESSAGE_MAX: usize = 4 * 1024 * 1024;
/// An answer's message (a capture is at most 16 MiB a port).
pub const ANSWER_MAX: usize = 64 * 1024 * 1024;
/// One call, its route included: a stop waits for the flows' drain and
/// at most 15 s more.
pub const CALL_WITHIN: Duration = Duration::from_secs(90);

/// Serves `agent` over gRPC on `listener` until `stop`; `tls` is the
/// HTTPS side's configuration (its certificate), given ALPN `h2` here.
pub fn serve(
    listener: std::net::TcpListener,
    tls: Arc<ServerConfig>,
    agent: Arc<Agent>,
    token: Arc<String>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let mut config = (*tls).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(CONNECTIONS_MAX)
        .thread_name("agent-grpc")
        .enable_all()
        .build()?;
    listener.set_nonblocking(true)?;
    let r = rt.block_on(accept_loop(listener, acceptor, agent, token, stop));
    rt.shutdown_timeout(Duration::from_secs(1));
    r
}

async fn accept_loop(
    listener: std::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    agent: Arc<Agent>,
    token: Arc<String>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let (slots, failures) = (Arc::new(Slots::default()), Arc::new(Failures::default()));
    let mut accept_errors = crate::server::ErrorLog::default();
    while !stop.load(Ordering::Relaxed) {
        let accepted = tokio::time::timeout(Duration::from_millis(100), listener.accept()).await;
        let (sock, from) = match accepted {
            Ok(Ok(c)) => c,
            // The stop flag's turn.
            Err(_) => continue,
            // Out of descriptors or the like: said once a second, the
            // loop goes on after a pause.
            Ok(Err(e)) => {
                accept_errors.note(&e, Instant::now());
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(held) = slots.admit(from.ip(), None, Instant::now()) else {
            continue;
        };
        let conn = Arc::new(Conn {
            agent: agent.clone(),
            token: token.clone(),
            src: from.ip(),
            failures: failures.clone(),
            slots: slots.clone(),
            held,
            accepted: Instant::now(),
            authenticated: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            last: std::sync::Mutex::new(Instant::now()),
        });
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            connection(sock, acceptor, conn.clone()).await;
            conn.slots.release(&conn.held);
        });
    }
    Ok(())
}

/// A connection's context: who it is from, its slot, its calls.
#[derive(Debug)]
struct Conn {
    agent: Arc<Agent>,
    token: Arc<String>,
    src: IpAddr,
    failures: Arc<Failures>,
    slots: Arc<Slots>,
    held: Arc<Held>,
    accepted: Instant,
    /// A call of it had the token.
    authenticated: AtomicBool,
    /// Calls in progress, and the end of the last.
    busy: AtomicUsize,
    last: std::sync::Mutex<Instant>,
}

impl Conn {
    /// Whether to close it: its slot taken, no authenticated call in time,
    /// or idle.
    fn done(&self) -> bool {
        let waited = !self.authenticated.load(Ordering::Relaxed)
            && self.accepted.elapsed() >= FIRST_CALL_WITHIN;
        let idle = self.busy.load(Ordering::Acquire) == 0
            && crate::campaign::lock(&self.last).elapsed() >= IDLE_MAX;
        self.held.evicted() || waited || idle
    }

    /// The token checked: a failure counted for the source (its answer
    /// later each time, logged); the first success frees the slot from
    /// eviction.
    async fn check(&self, headers: &HeaderMap) -> Result<(), Status> {
        self.held.progressed(Instant::now());
        match authorized(headers, &self.token) {
            Ok(()) => {
                self.failures.succeeded(self.src);
                self.held.head_done();
                if !self.authenticated.swap(true, Ordering::Relaxed) {
                    self.slots.authenticated(&self.held);
                }
                Ok(())
            }
            Err((s, why)) => {
                let v = self.failures.failed(self.src, why, Instant::now());
                if let Some(line) = v.log {
                    eprintln!("{line}");
                }
                tokio::time::sleep(v.delay).await;
                Err(s)
            }
        }
    }
}

/// One connection: the handshake, then its calls until the client ends
/// it, it idles, or it loses its slot.
async fn connection(
    sock: tokio::net::TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    conn: Arc<Conn>,
) {
    let _ = sock.set_nodelay(true);
    let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_WITHIN, acceptor.accept(sock)).await else {
        return;
    };
    let c = conn.clone();
    let svc = hyper::service::service_fn(move |req| {
        let c = c.clone();
        async move {
            c.busy.fetch_add(1, Ordering::AcqRel);
            let r = handle(req, &c).await;
            *crate::campaign::lock(&c.last) = Instant::now();
            if c.busy.fetch_sub(1, Ordering::AcqRel) == 1 {
                // No call in progress: the slot may go to a new
                // connection, the one idle longest first.
                c.held.progressed(Instant::now());
                c.held.waiting_again();
            }
            Ok::<_, std::convert::Infallible>(r)
        }
    });
    let mut h2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    h2.timer(TokioTimer::new())
        .max_concurrent_streams(STREAMS_MAX)
        .max_header_list_size(16 * 1024)
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(Duration::from_secs(10));
    let http = h2.serve_connection(TokioIo::new(tls), svc);
    tokio::pin!(http);
    let mut closing = false;
    loop {
        tokio::select! {
            _ = http.as_mut() => return,
            _ = tokio::time::sleep(Duration::from_millis(250)), if !closing => {
                if conn.held.evicted() {
                    return;
                }
                if conn.done() {
                    http.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// The token, from the metadata `authorization: Bearer <token>`, compared
/// in constant time; a refusal with its reason.
pub fn authorized(headers: &HeaderMap, token: &str) -> Result<(), (Status, &'static str)> {
    let given = headers.get("authorization").and_then(|v| v.to_str().ok());
    let why = match given.and_then(|v| v.strip_prefix("Bearer ")) {
        Some(t) if token_matches(t.trim(), token) => return Ok(()),
        Some(_) => "the bearer token is not this agent's",
        None => "no bearer token: send the metadata authorization: Bearer <token>",
    };
    Err((service::unauthenticated(why), why))
}

/// One call: the token first, then the method, then its body.
async fn handle(req: Request<Incoming>, conn: &Conn) -> Response<Body> {
    if let Err(s) = conn.check(req.headers()).await {
        return s.into_http();
    }
    let arrived = conn.agent.arrival();
    let rpc = match service::rpc(req.uri().path()) {
        Ok(r) => r,
        Err(s) => return s.into_http(),
    };
    let agent = conn.agent.clone();
    let job = move |wire: Vec<u8>| service::call(&agent, rpc, &wire, arrived);
    match rpc {
        Rpc::GetConfig | Rpc::GetVersion => {
            unary(req, move |_: Empty| job(Vec::new()).and_then(held)).await
        }
        Rpc::GetCapture => {
            unary(req, move |h: Holding| match job(h.bytes().to_vec())? {
                Answer::Capture(c) => Ok(c),
                _ => Err(internal()),
            })
            .await
        }
        Rpc::SetConfig
        | Rpc::UpdateConfig
        | Rpc::AppendConfig
        | Rpc::DeleteConfig
        | Rpc::SetControlState
        | Rpc::SetControlAction
        | Rpc::GetMetrics
        | Rpc::GetStates => {
            unary(req, move |h: Holding| {
                job(h.bytes().to_vec()).and_then(held)
            })
            .await
        }
        Rpc::StreamGetConfig => streamed(req, move |_: Empty| job(Vec::new())).await,
        Rpc::StreamGetMetrics | Rpc::StreamGetCapture | Rpc::StreamGetStates => {
            streamed(req, move |h: Holding| job(h.bytes().to_vec())).await
        }
    }
}

fn held(a: Answer) -> Result<Holding, Status> {
    match a {
        Answer::Held(h) => Ok(h),
        _ => Err(internal()),
    }
}

fn internal() -> Status {
    service::status(&Reply::error(500, "an answer of the wrong kind"))
}

/// `f` on a blocking thread (the routes lock and wait), within
/// [`CALL_WITHIN`].
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    match tokio::time::timeout(CALL_WITHIN, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(service::status(&Reply::error(
            500,
            format!("the call failed: {e}"),
        ))),
        Err(_) => {
            let mut s = service::status(&Reply::error(
                500,
                format!("no answer within {} s", CALL_WITHIN.as_secs()),
            ));
            s = Status::new(tonic::Code::DeadlineExceeded, s.message().to_string());
            Err(s)
        }
    }
}

type CallFuture<T> = Pin<Box<dyn Future<Output = Result<tonic::Response<T>, Status>> + Send>>;

/// A unary method: its request decoded, `f` run, its answer encoded.
#[derive(Debug, Clone)]
struct Unary<F>(F);

impl<Req, Resp, F> UnaryService<Req> for Unary<F>
where
    F: Fn(Req) -> Result<Resp, Status> + Clone + Send + 'static,
    Req: Send + 'static,
    Resp: Send + 'static,
{
    type Response = Resp;
    type Future = CallFuture<Resp>;

    fn call(&mut self, req: tonic::Request<Req>) -> Self::Future {
        let (f, m) = (self.0.clone(), req.into_inner());
        Box::pin(async move { blocking(move || f(m)).await.map(tonic::Response::new) })
    }
}

/// A stream form: the whole answer made, then sent as `Data` pieces.
#[derive(Debug, Clone)]
struct Streamed<F>(F);

type Pieces = tokio_stream::Iter<std::vec::IntoIter<Result<Data, Status>>>;

impl<Req, F> ServerStreamingService<Req> for Streamed<F>
where
    F: Fn(Req) -> Result<Answer, Status> + Clone + Send + 'static,
    Req: Send + 'static,
{
    type Response = Data;
    type ResponseStream = Pieces;
    type Future = CallFuture<Pieces>;

    fn call(&mut self, req: tonic::Request<Req>) -> Self::Future {
        let (f, m) = (self.0.clone(), req.into_inner());
        Box::pin(async move {
            let bytes = blocking(move || match f(m)? {
                Answer::Stream(b) => Ok(b),
                _ => Err(internal()),
            })
            .await?;
            let pieces: Vec<_> = messages::chunks(&bytes).into_iter().map(Ok).collect();
            Ok(tonic::Response::new(tokio_stream::iter(pieces)))
        })
    }
}

fn codec<Req, Resp>() -> Grpc<tonic_prost::ProstCodec<Resp, Req>>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
{
    Grpc::new(tonic_prost::ProstCodec::default())
        .max_decoding_message_size(MESSAGE_MAX)
        .max_encoding_message_size(ANSWER_MAX)
}

async fn unary<Req, Resp, F>(req: Request<Incoming>, f: F) -> Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
    F: Fn(Req) -> Result<Resp, Status> + Clone + Send + 'static,
{
    codec::<Req, Resp>().unary(Unary(f), req).await
}

async fn streamed<Req, F>(req: Request<Incoming>, f: F) -> Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    F: Fn(Req) -> Result<Answer, Status> + Clone + Send + 'static,
{
    codec::<Req, Data>()
        .server_streaming(Streamed(f), req)
        .await
}
