//! `linerate agent`'s gRPC server end to end on loopback: TLS with the
//! agent's certificate (ALPN h2), the token in the metadata, gRPC's
//! framing and statuses, the models' messages; a client made of hyper's
//! HTTP/2 client, so the bytes on the wire are the test's own.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use linerate_agent::grpc::messages::{Data, Empty, Holding};
use linerate_agent::grpc::{schema, table_action, table_api, table_config};
use linerate_agent::{Agent, Identity, Options};
use prost::Message;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const TOKEN: &str = "grpc-test-token-0123456789abcdef";

/// An agent's gRPC server on a free loopback port, stopped on drop.
struct Server {
    addr: SocketAddr,
    cert: CertificateDer<'static>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    fn start() -> Self {
        let tls = linerate_agent::tls::server(&Identity::SelfSigned {
            names: vec!["localhost".into()],
        })
        .unwrap();
        let cert = CertificateDer::from_pem_slice(tls.cert_pem.as_bytes()).unwrap();
        let agent = Arc::new(Agent::new(Options::loopback(&["wire0", "wire1"])));
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
struct Answer {
    status: u32,
    message: String,
    body: Vec<u8>,
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
struct Client {
    rt: tokio::runtime::Runtime,
    send: Sender,
}

impl Client {
    fn connect(server: &Server) -> Self {
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
    fn call(&mut self, token: Option<&str>, method: &str, request: Vec<u8>) -> Option<Answer> {
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
fn call(server: &Server, token: Option<&str>, method: &str, request: Vec<u8>) -> Answer {
    Client::connect(server)
        .call(token, method, request)
        .expect("an answer")
}

fn error(a: &Answer) -> Value {
    serde_json::from_str(&a.message).unwrap()
}

#[test]
fn the_version_is_answered_with_the_token() {
    let s = Server::start();
    let a = call(&s, Some(TOKEN), "GetVersion", Empty {}.encode_to_vec());
    assert_eq!((a.status, a.message.as_str()), (0, ""));
    let v = Holding::decode(&a.body[..]).unwrap();
    assert_eq!(
        schema::decode(&table_api::M_VERSION, v.bytes(), "").unwrap(),
        json!({"api_spec_version": "1.62.0", "sdk_version": "",
            "app_version": format!("linerate {}", env!("CARGO_PKG_VERSION"))})
    );
}

#[test]
fn a_call_without_the_token_is_refused_before_its_body() {
    let s = Server::start();
    for (token, why) in [
        (
            None,
            "no bearer token: send the metadata authorization: Bearer <token>",
        ),
        (
            Some("grpc-test-token-0123456789abcdeX"),
            "the bearer token is not this agent's",
        ),
        (Some(""), "the bearer token is not this agent's"),
    ] {
        // A body that is not a message: never read.
        let a = call(&s, token, "SetConfig", vec![0xff; 7]);
        assert_eq!(a.status, 16, "UNAUTHENTICATED: {a:?}");
        assert_eq!(
            error(&a),
            json!({"code": 16, "kind": "validation", "errors": [why]})
        );
    }
    // A source that keeps failing is answered later each time (as over
    // HTTPS): the 4th failure after 50 ms, the 5th after 100 ms.
    for wait_ms in [50, 100] {
        let t = std::time::Instant::now();
        let a = call(
            &s,
            Some("grpc-test-token-wrong-0123456789"),
            "GetVersion",
            Vec::new(),
        );
        assert_eq!(a.status, 16);
        assert!(
            t.elapsed() >= Duration::from_millis(wait_ms),
            "{:?} < {wait_ms} ms",
            t.elapsed()
        );
    }
    // The token still opens it at once.
    let a = call(&s, Some(TOKEN), "GetVersion", Vec::new());
    assert_eq!(a.status, 0);
}

#[test]
fn a_refused_config_answers_every_error_with_its_path() {
    let s = Server::start();
    let doc = json!({
        "ports": [{"name": "tx", "location": "eth0"}, {"name": "rx", "location": "eth1"}],
    });
    let config = schema::encode(&table_config::M_CONFIG, &doc, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "SetConfig",
        Holding::of(config).encode_to_vec(),
    );
    assert_eq!(a.status, 3, "INVALID_ARGUMENT: {a:?}");
    assert_eq!(
        error(&a),
        json!({"code": 3, "kind": "validation", "errors": [
            "ports[0].location: 'eth0' is not an interface this agent may use (its allow-list: wire0, wire1)",
            "ports[1].location: 'eth1' is not an interface this agent may use (its allow-list: wire0, wire1)"
        ]})
    );
    // Bytes that are no Config: refused with where.
    let a = call(
        &s,
        Some(TOKEN),
        "SetConfig",
        Holding::of(vec![0x0a, 0x05, 0x12]).encode_to_vec(),
    );
    assert_eq!(a.status, 3);
    assert_eq!(
        error(&a)["errors"],
        json!(["(document): not protobuf wire data: a cut value"])
    );
    // A method of the models the agent does not serve.
    let a = call(
        &s,
        Some(TOKEN),
        "streamSetControlAction",
        Holding::of(Vec::new()).encode_to_vec(),
    );
    assert_eq!(a.status, 12, "UNIMPLEMENTED: {a:?}");
    // The control action and the config update: served, their refusals
    // INVALID_ARGUMENT with the path.
    let bgp = json!({"choice": "protocol", "protocol": {"choice": "bgp"}});
    let msg = schema::encode(&table_action::M_CONTROL_ACTION, &bgp, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "SetControlAction",
        Holding::of(msg).encode_to_vec(),
    );
    assert_eq!(a.status, 3, "INVALID_ARGUMENT: {a:?}");
    assert_eq!(
        error(&a)["errors"],
        json!([
            "protocol.choice: 'bgp': not supported by linerate agent (it takes ipv4 and ipv6: ping from the devices' addresses)"
        ])
    );
    let up = json!({"choice": "flows", "flows": {"property_names": ["rate"]}});
    let msg = schema::encode(&table_action::M_CONFIG_UPDATE, &up, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "UpdateConfig",
        Holding::of(msg).encode_to_vec(),
    );
    assert_eq!(a.status, 3, "INVALID_ARGUMENT: {a:?}");
    assert_eq!(
        error(&a)["errors"],
        json!(["no configuration: POST /config first"])
    );
    // And a good one taken, then read back.
    let doc = json!({"ports": [{"name": "tx", "location": "wire0"}]});
    let config = schema::encode(&table_config::M_CONFIG, &doc, "").unwrap();
    let a = call(
        &s,
        Some(TOKEN),
        "SetConfig",
        Holding::of(config.clone()).encode_to_vec(),
    );
    assert_eq!(a.status, 0, "{a:?}");
    assert_eq!(
        a.body,
        Holding::of(Vec::new()).encode_to_vec(),
        "no warnings"
    );
    let a = call(&s, Some(TOKEN), "GetConfig", Empty {}.encode_to_vec());
    assert_eq!(Holding::decode(&a.body[..]).unwrap().bytes(), config);
    // The stream form: the Config itself in one Data piece.
    let a = call(&s, Some(TOKEN), "streamGetConfig", Empty {}.encode_to_vec());
    assert_eq!(a.status, 0, "{a:?}");
    let d = Data::decode(&a.body[..]).unwrap();
    assert_eq!((d.chunk_size, d.datum), (4 << 20, config));
}

/// Connections stay open between calls (snappi keeps its channel), and a
/// source holds at most 8: a 9th takes the slot of the one idle longest,
/// which is closed; the others serve on.
#[test]
fn a_sources_ninth_connection_takes_the_slot_of_the_idlest() {
    let s = Server::start();
    let mut clients: Vec<Client> = (0..8).map(|_| Client::connect(&s)).collect();
    for c in &mut clients {
        let a = c.call(Some(TOKEN), "GetVersion", Vec::new()).unwrap();
        assert_eq!(a.status, 0);
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first used again: now the second has been idle longest.
    let a = clients[0]
        .call(Some(TOKEN), "GetVersion", Vec::new())
        .unwrap();
    assert_eq!(a.status, 0);
    let mut ninth = Client::connect(&s);
    let a = ninth.call(Some(TOKEN), "GetVersion", Vec::new()).unwrap();
    assert_eq!(a.status, 0, "the 9th served");
    // The server closes the evicted one within its 250 ms check.
    std::thread::sleep(Duration::from_millis(600));
    assert!(
        clients[1]
            .call(Some(TOKEN), "GetVersion", Vec::new())
            .is_none(),
        "the idlest connection was closed"
    );
    for (i, c) in clients.iter_mut().enumerate().filter(|(i, _)| *i != 1) {
        let a = c.call(Some(TOKEN), "GetVersion", Vec::new());
        assert_eq!(a.map(|a| a.status), Some(0), "connection {i} serves on");
    }
}
