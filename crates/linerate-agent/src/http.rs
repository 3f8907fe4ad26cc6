//! HTTP/1.1 as far as the API needs it: one request per connection, its
//! head at most 16 KiB, its body by Content-Length at most 1 MiB (no
//! chunked bodies), the whole of it within a deadline; the response
//! closes the connection.

use std::io::{self, Read, Write};
use std::time::Instant;

pub const HEAD_MAX: usize = 16 * 1024;
pub const BODY_MAX: usize = 1024 * 1024;
const HEADERS_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path, without its query.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Why a request could not be read: the status to answer (none when the
/// connection is gone).
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{1}")]
    Status(u16, String),
    #[error("the connection ended: {0}")]
    Gone(io::Error),
}

fn bad(status: u16, what: impl Into<String>) -> HttpError {
    HttpError::Status(status, what.into())
}

/// The head of a request: request line and headers (the bytes before the
/// blank line).
/// A request line's method and path, and the headers.
pub type Head = (String, String, Vec<(String, String)>);

pub fn parse_head(head: &[u8]) -> Result<Head, HttpError> {
    let text = std::str::from_utf8(head).map_err(|_| bad(400, "the request head is not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad(400, "the request line is not METHOD TARGET VERSION"));
    };
    if !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(bad(505, format!("{version}: HTTP/1.1 only")));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(bad(400, "the method is not a token"));
    }
    if !target.starts_with('/') {
        return Err(bad(400, "the target is not a path"));
    }
    let path = target.split('?').next().unwrap_or(target).to_string();
    let mut headers = Vec::new();
    for l in lines.filter(|l| !l.is_empty()) {
        let Some((k, v)) = l.split_once(':') else {
            return Err(bad(400, "a header line has no ':'"));
        };
        if k.is_empty()
            || k.bytes()
                .any(|b| b.is_ascii_whitespace() || b.is_ascii_control())
        {
            return Err(bad(400, "a header name is not a token"));
        }
        if headers.len() == HEADERS_MAX {
            return Err(bad(431, format!("more than {HEADERS_MAX} headers")));
        }
        headers.push((k.to_string(), v.trim().to_string()));
    }
    Ok((method.to_string(), path, headers))
}

/// Where the head ends (after its blank line), if it is in `buf`.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Whether an error of a read means "no bytes yet, try again".
fn again(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// When a request's head, and then the whole of it, must have arrived.
#[derive(Debug, Clone, Copy)]
pub struct Deadlines {
    pub head: Instant,
    pub body: Instant,
}

impl Deadlines {
    /// One deadline for both.
    pub fn both(at: Instant) -> Self {
        Deadlines { head: at, body: at }
    }
}

/// Reads one request from `r` (whose reads time out on their own, so the
/// deadlines are looked at between them). `check` sees the head before the
/// body is read (authentication): its error is answered at once.
pub fn read_request<R: Read>(
    r: &mut R,
    deadlines: Deadlines,
    check: impl FnOnce(&str, &str, &[(String, String)]) -> Result<(), HttpError>,
) -> Result<Request, HttpError> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(e) = head_end(&buf) {
            break e;
        }
        if buf.len() > HEAD_MAX {
            return Err(bad(
                431,
                format!("the request head is above {HEAD_MAX} bytes"),
            ));
        }
        if Instant::now() >= deadlines.head {
            return Err(bad(408, "the request did not arrive in time"));
        }
        match r.read(&mut chunk) {
            Ok(0) => return Err(HttpError::Gone(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if again(&e) => {}
            Err(e) => return Err(HttpError::Gone(e)),
        }
    };
    if end > HEAD_MAX {
        return Err(bad(
            431,
            format!("the request head is above {HEAD_MAX} bytes"),
        ));
    }
    let (method, path, headers) = parse_head(&buf[..end - 4])?;
    check(&method, &path, &headers)?;
    let find = |name: &str| {
        headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect::<Vec<_>>()
    };
    if !find("transfer-encoding").is_empty() {
        return Err(bad(
            411,
            "chunked bodies are not taken: send Content-Length",
        ));
    }
    let len = match find("content-length").as_slice() {
        [] => 0,
        [v] => v
            .parse::<usize>()
            .map_err(|_| bad(400, "Content-Length is not a number"))?,
        _ => return Err(bad(400, "Content-Length given twice")),
    };
    if len > BODY_MAX {
        return Err(bad(
            413,
            format!("a body of {len} bytes: at most {BODY_MAX}"),
        ));
    }
    let mut body = buf[end..].to_vec();
    if body.len() > len {
        return Err(bad(
            400,
            "bytes beyond Content-Length (one request per connection)",
        ));
    }
    while body.len() < len {
        if Instant::now() >= deadlines.body {
            return Err(bad(408, "the request body did not arrive in time"));
        }
        let want = (len - body.len()).min(chunk.len());
        match r.read(&mut chunk[..want]) {
            Ok(0) => return Err(HttpError::Gone(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if again(&e) => {}
            Err(e) => return Err(HttpError::Gone(e)),
        }
    }
    Ok(Request {
        method,
        path,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        505 => "HTTP Version Not Supported",
        _ => "Internal Server Error",
    }
}

/// Writes a JSON response that closes the connection.
pub fn write_response<W: Write>(
    w: &mut W,
    status: u16,
    body: &serde_json::Value,
) -> io::Result<()> {
    let body = serde_json::to_vec(body).unwrap_or_default();
    write_bytes(w, status, "application/json", &body)
}

/// Writes a response of `content_type` that closes the connection.
pub fn write_bytes<W: Write>(
    w: &mut W,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(status),
        body.len()
    );
    if status == 401 {
        out.push_str("WWW-Authenticate: Bearer\r\n");
    }
    out.push_str("\r\n");
    let mut all = out.into_bytes();
    all.extend_from_slice(body);
    w.write_all(&all)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn read(bytes: &[u8]) -> Result<Request, HttpError> {
        read_request(
            &mut std::io::Cursor::new(bytes.to_vec()),
            Deadlines::both(Instant::now() + Duration::from_secs(1)),
            |_, _, _| Ok(()),
        )
    }

    fn status(r: Result<Request, HttpError>) -> u16 {
        match r {
            Err(HttpError::Status(s, _)) => s,
            Err(HttpError::Gone(_)) => 0,
            Ok(_) => 200,
        }
    }

    #[test]
    fn a_request_is_read_whole() {
        let r =
            read(b"POST /config?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.body.as_slice()),
            ("POST", "/config", &b"{}"[..])
        );
        assert_eq!(r.header("host"), Some("a"));
        // snappi's update, append and delete are PATCH requests.
        let r = read(b"PATCH /config/append HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}").unwrap();
        assert_eq!(
            (r.method.as_str(), r.path.as_str(), r.body.as_slice()),
            ("PATCH", "/config/append", &b"{}"[..])
        );
    }

    #[test]
    fn bad_requests_get_their_status() {
        assert_eq!(status(read(b"GET / HTTP/2\r\n\r\n")), 505);
        assert_eq!(status(read(b"get / HTTP/1.1\r\n\r\n")), 400);
        assert_eq!(status(read(b"GET x HTTP/1.1\r\n\r\n")), 400);
        assert_eq!(
            status(read(
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
            )),
            411
        );
        assert_eq!(
            status(read(b"POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n")),
            413
        );
        assert_eq!(
            status(read(
                b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"
            )),
            400
        );
        assert_eq!(
            status(read(b"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\n{}")),
            0,
            "cut short"
        );
        let mut big = b"GET / HTTP/1.1\r\n".to_vec();
        big.extend(std::iter::repeat_n(b'a', HEAD_MAX + 10));
        assert_eq!(status(read(&big)), 431);
        let many: String = (0..70).map(|i| format!("H{i}: v\r\n")).collect();
        assert_eq!(
            status(read(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes())),
            431
        );
    }

    #[test]
    fn a_slow_request_meets_its_deadline() {
        struct Slow;
        impl Read for Slow {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                std::thread::sleep(Duration::from_millis(5));
                Err(io::ErrorKind::WouldBlock.into())
            }
        }
        let r = read_request(
            &mut Slow,
            Deadlines::both(Instant::now() + Duration::from_millis(30)),
            |_, _, _| Ok(()),
        );
        assert_eq!(status(r), 408);
    }
}
