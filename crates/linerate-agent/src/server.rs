//! The HTTPS server: one thread accepting, one thread per connection (at
//! most [`CONNECTIONS_MAX`] at once; one more is closed at once), each
//! connection's handshake and request within [`REQUEST_WITHIN`], every
//! request with the bearer token or refused before its body is read.

use crate::api::{Agent, Reply};
use crate::http::{self, HttpError};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

pub const CONNECTIONS_MAX: usize = 32;
/// A connection's TLS handshake and whole request.
pub const REQUEST_WITHIN: Duration = Duration::from_secs(10);
/// One read or write on the socket.
const IO_WAIT: Duration = Duration::from_millis(500);
/// The shortest token taken.
pub const TOKEN_MIN: usize = 16;

/// Serves `agent` on `listener` until `stop`.
pub fn serve(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    agent: Arc<Agent>,
    token: Arc<String>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        let (sock, _) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // Out of descriptors or the like: the loop goes on.
            Err(_) => {
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::AcqRel) >= CONNECTIONS_MAX {
            open.fetch_sub(1, Ordering::AcqRel);
            drop(sock);
            continue;
        }
        let (tls, agent, token, held) = (tls.clone(), agent.clone(), token.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("agent-conn".into())
            .spawn(move || {
                connection(sock, tls, &agent, &token);
                held.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::AcqRel);
        }
    }
    Ok(())
}

/// Whether `got` is the token, in time that does not depend on where
/// they differ.
pub fn token_matches(got: &str, token: &str) -> bool {
    let (a, b) = (got.as_bytes(), token.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, &x) in b.iter().enumerate() {
        diff |= usize::from(x ^ a.get(i).copied().unwrap_or(0));
    }
    diff == 0
}

fn connection(sock: TcpStream, tls: Arc<ServerConfig>, agent: &Agent, token: &str) {
    let deadline = Instant::now() + REQUEST_WITHIN;
    if sock.set_read_timeout(Some(IO_WAIT)).is_err()
        || sock.set_write_timeout(Some(IO_WAIT)).is_err()
        || sock.set_nodelay(true).is_err()
    {
        return;
    }
    let Ok(conn) = ServerConnection::new(tls) else {
        return;
    };
    let mut s = StreamOwned::new(conn, sock);
    let auth = |_: &str, _: &str, headers: &[(String, String)]| {
        let given = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.as_str());
        match given.and_then(|v| v.strip_prefix("Bearer ")) {
            Some(t) if token_matches(t.trim(), token) => Ok(()),
            Some(_) => Err(HttpError::Status(
                401,
                "the bearer token is not this agent's".into(),
            )),
            None => Err(HttpError::Status(
                401,
                "no bearer token: send Authorization: Bearer <token>".into(),
            )),
        }
    };
    let reply = match http::read_request(&mut s, deadline, auth) {
        Ok(req) => agent.handle(&req.method, &req.path, &req.body),
        Err(HttpError::Status(code, what)) => Reply::error(code, what),
        Err(HttpError::Gone(_)) => return,
    };
    // Writing, too, ends by a deadline: each write waits IO_WAIT at most
    // and a response is at most some hundred kilobytes.
    let written = match &reply.bytes {
        Some(b) => http::write_bytes(&mut s, reply.status, "application/octet-stream", b),
        None => http::write_response(&mut s, reply.status, &reply.body),
    };
    if written.is_ok() {
        s.conn.send_close_notify();
        let _ = s.conn.write_tls(&mut s.sock);
        let _ = s.sock.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("abcdefabcdefabcdef", "abcdefabcdefabcdef"));
        assert!(!token_matches("abcdefabcdefabcdeX", "abcdefabcdefabcdef"));
        assert!(!token_matches("abcdefabcdefabcdef0", "abcdefabcdefabcdef"));
        assert!(!token_matches("", "abcdefabcdefabcdef"));
    }
}
