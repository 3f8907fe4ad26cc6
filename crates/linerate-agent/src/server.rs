//! The HTTPS server: one thread accepting, one thread per connection (at
//! most [`CONNECTIONS_MAX`] at once, [`crate::guard::PER_SOURCE_MAX`] from one
//! address; a new connection takes the slot of the one that has waited
//! longest for its request head), each connection's handshake and
//! request head within [`HEAD_WITHIN`] of its accept and its whole
//! request within [`REQUEST_WITHIN`], every request with the bearer token
//! or refused before its body is read (a source that keeps failing waits
//! longer for each answer, and is logged).

use crate::api::{Agent, Reply};
use crate::guard::{Failures, Held, Slots};
use crate::http::{self, HttpError};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::Write;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub use crate::guard::CONNECTIONS_MAX;
/// A connection's TLS handshake and request head, from its accept (an
/// honest client sends its request at once).
pub const HEAD_WITHIN: Duration = Duration::from_secs(2);
/// A connection's whole request (a body of up to 1 MiB), from its accept.
pub const REQUEST_WITHIN: Duration = Duration::from_secs(10);
/// One read or write on the socket.
const IO_WAIT: Duration = Duration::from_millis(250);
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
    let slots = Arc::new(Slots::default());
    let failures = Arc::new(Failures::default());
    let mut accept_errors = ErrorLog::default();
    while !stop.load(Ordering::Relaxed) {
        let (sock, from) = match listener.accept() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // Out of descriptors or the like: said once a second, the
            // loop goes on after a pause.
            Err(e) => {
                accept_errors.note(&e, Instant::now());
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let src = from.ip();
        let Ok(held) = slots.admit(src, sock.try_clone().ok(), Instant::now()) else {
            drop(sock);
            continue;
        };
        let conn = Conn {
            // Its place in arrival order: control requests take effect in
            // the order their connections were accepted.
            arrived: agent.arrival(),
            tls: tls.clone(),
            agent: agent.clone(),
            token: token.clone(),
            failures: failures.clone(),
            slots: slots.clone(),
            src,
        };
        let (slots2, held2) = (slots.clone(), held.clone());
        let spawned = std::thread::Builder::new()
            .name("agent-conn".into())
            .spawn(move || {
                conn.serve(sock, &held2);
                slots2.release(&held2);
            });
        if spawned.is_err() {
            slots.release(&held);
        }
    }
    Ok(())
}

/// Accept errors, logged once a second at most with their count.
#[derive(Debug, Default)]
pub(crate) struct ErrorLog(linerate_run::Throttle);

impl ErrorLog {
    pub(crate) fn note(&mut self, e: &std::io::Error, now: Instant) {
        if let Some(n) = self.0.note(now) {
            eprintln!(
                "linerate agent: accepting a connection failed {n} time{} ({e}); going on",
                if n == 1 { "" } else { "s" }
            );
        }
    }
}

/// What a connection's thread needs.
struct Conn {
    tls: Arc<ServerConfig>,
    agent: Arc<Agent>,
    token: Arc<String>,
    failures: Arc<Failures>,
    slots: Arc<Slots>,
    src: IpAddr,
    arrived: u64,
}

/// A connection's socket that marks its slot's progress on every byte
/// read.
struct Tracked<'a> {
    sock: TcpStream,
    held: &'a Held,
}

impl std::io::Read for Tracked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.sock.read(buf)?;
        if n > 0 {
            self.held.progressed(Instant::now());
        }
        Ok(n)
    }
}

impl Write for Tracked<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.sock.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.sock.flush()
    }
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

impl Conn {
    fn serve(&self, sock: TcpStream, held: &Held) {
        let held_ref = held;
        let accepted = Instant::now();
        if sock.set_read_timeout(Some(IO_WAIT)).is_err()
            || sock.set_write_timeout(Some(IO_WAIT)).is_err()
            || sock.set_nodelay(true).is_err()
        {
            return;
        }
        let Ok(conn) = ServerConnection::new(self.tls.clone()) else {
            return;
        };
        let mut s = StreamOwned::new(conn, Tracked { sock, held });
        let auth = |_: &str, _: &str, headers: &[(String, String)]| {
            held_ref.head_done();
            let refused = self.refused(headers);
            if let Some(why) = &refused {
                let v = self.failures.failed(self.src, why, Instant::now());
                if let Some(line) = v.log {
                    eprintln!("{line}");
                }
                std::thread::sleep(v.delay);
            } else {
                self.failures.succeeded(self.src);
                self.slots.authenticated(held_ref);
            }
            refused.map_or(Ok(()), |why| Err(HttpError::Status(401, why)))
        };
        let deadlines = http::Deadlines {
            head: accepted + HEAD_WITHIN,
            body: accepted + REQUEST_WITHIN,
        };
        let reply = match http::read_request(&mut s, deadlines, auth) {
            Ok(req) => self
                .agent
                .handle_arrived(self.arrived, &req.method, &req.path, &req.body),
            Err(HttpError::Status(code, what)) => Reply::error(code, what),
            Err(HttpError::Gone(_)) => return,
        };
        if held_ref.evicted() {
            return;
        }
        // Writing, too, ends by a deadline: each write waits IO_WAIT at most
        // and a response is at most some hundred kilobytes.
        let written = match &reply.bytes {
            Some(b) => http::write_bytes(&mut s, reply.status, "application/octet-stream", b),
            None => http::write_response(&mut s, reply.status, &reply.body),
        };
        if written.is_ok() {
            s.conn.send_close_notify();
            let _ = s.conn.write_tls(&mut s.sock);
            let _ = s.sock.sock.flush();
        }
    }

    /// Why a request's head is refused (its token), if it is.
    fn refused(&self, headers: &[(String, String)]) -> Option<String> {
        let given = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .map(|(_, v)| v.as_str());
        match given.and_then(|v| v.strip_prefix("Bearer ")) {
            Some(t) if token_matches(t.trim(), &self.token) => None,
            Some(_) => Some("the bearer token is not this agent's".into()),
            None => Some("no bearer token: send Authorization: Bearer <token>".into()),
        }
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
