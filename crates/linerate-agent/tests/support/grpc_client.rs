//! A gRPC client of the tests' own (hyper's HTTP/2 client over rustls,
//! the frames and trailers read by hand) and an agent's gRPC server on a
//! free loopback port: `tests/grpc.rs`, `tests/control_action.rs`.
// Each test binary uses a part of it.
#![allow(dead_code)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use linerate_agent::{Agent, Identity, Options};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub const TOKEN: &str = "grpc-test-token-0123456789abcdef";

/// An agent's gRPC server on a free loopback port, stopped on drop.
pub struct Server {
    addr: SocketAddr,
    cert: CertificateDer<'static>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    /// An agent on the loopback ports wire0 and wire1.
    pub fn start() -> Self {
        Self::serving(Arc::new(Agent::new(Options::loopback(&["wire0", "wire1"]))))
    }

    /// `agent`'s gRPC server.
    pub fn serving(agent: Arc<Agent>) -> Self {
        let tls = linerate_agent::tls::server(&Identity::SelfSigned {
            names: vec!["localhost".into()],
        })
        .unwrap();
        let cert = CertificateDer::from_pem_slice(tls.cert_pem.as_bytes()).unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, config) = (stop.clone(), tls.config.clone());
        let thread = std::thread::spawn(move || {
            linerate_agent::grpc::serve(listener, config, agent, Arc::new(TOKEN.into()), s)
        });
        Self {
            addr,
            cert,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let r = t.join().expect("the server thread");
            if !std::thread::panicking() {
                r.expect("the server's end");
            }
        }
    }
}

/// A call's end: its gRPC status and message, and the answer's message.
#[derive(Debug)]
pub struct Answer {
    pub status: u32,
    pub message: String,
    pub body: Vec<u8>,
}

/// `grpc-message` is percent-encoded.
fn unpercent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

type Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// A client connection, kept open across calls on its own runtime.
pub struct Client {
    rt: tokio::runtime::Runtime,
    send: Sender,
}

impl Client {
    pub fn connect(server: &Server) -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let send = rt.block_on(async {
            let pinned = linerate_agent::peer::pinned_client(vec![server.cert.clone()]).unwrap();
            let mut config = (*pinned).clone();
            config.alpn_protocols = vec![b"h2".to_vec()];
            let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect("localhost".try_into().unwrap(), tcp)
                .await
                .unwrap();
            assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
            let (send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            send
        });
        Self { rt, send }
    }

    /// One unary call of `method` with `request` (its envelope's bytes);
    /// `None` when the connection is gone.
    pub fn call(&mut self, token: Option<&str>, method: &str, request: Vec<u8>) -> Option<Answer> {
        let send = &mut self.send;
        self.rt.block_on(async {
            let mut framed = vec![0u8];
            framed.extend((request.len() as u32).to_be_bytes());
            framed.extend(request);
            let mut req = hyper::Request::post(format!("https://localhost/otg.Openapi/{method}"))
                .header("content-type", "application/grpc")
                .header("te", "trailers");
            if let Some(t) = token {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            send.ready().await.ok()?;
            let resp = send
                .send_request(req.body(Full::new(Bytes::from(framed))).unwrap())
                .await
                .ok()?;
            assert_eq!(resp.status(), 200, "gRPC answers in HTTP 200");
            let head = resp.headers().clone();
            let all = resp.into_body().collect().await.ok()?;
            let trailers = all.trailers().cloned().unwrap_or_default();
            Some(answer(&head, &trailers, &all.to_bytes()))
        })
    }
}

/// A call's status, message and answer from its headers, body and
/// trailers.
fn answer(head: &hyper::HeaderMap, trailers: &hyper::HeaderMap, bytes: &Bytes) -> Answer {
    let field = |k: &str| {
        trailers
            .get(k)
            .or(head.get(k))
            .map(|v| v.to_str().unwrap().to_string())
    };
    let status = field("grpc-status").expect("grpc-status").parse().unwrap();
    let message = unpercent(&field("grpc-message").unwrap_or_default());
    let body = if bytes.is_empty() {
        Vec::new()
    } else {
        assert_eq!(bytes[0], 0, "not compressed");
        let n = u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
        assert_eq!(bytes.len(), 5 + n, "one message");
        bytes[5..].to_vec()
    };
    Answer {
        status,
        message,
        body,
    }
}

/// One call on a connection of its own.
pub fn call(server: &Server, token: Option<&str>, method: &str, request: Vec<u8>) -> Answer {
    Client::connect(server)
        .call(token, method, request)
        .expect("an answer")
}

pub fn error(a: &Answer) -> Value {
    serde_json::from_str(&a.message).unwrap()
}
