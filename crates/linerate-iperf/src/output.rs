//! Where the server's and client's text goes: a shared sink written
//! through as the client prints, `--timestamps`' prefix, and the version
//! lines (`-v`, `-V`).

use std::io::Write;
use std::sync::{Arc, Mutex};

/// Writes through to the shared sink as the client prints.
pub struct LockedWriter(pub Arc<Mutex<dyn Write + Send>>);

impl std::fmt::Debug for LockedWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockedWriter")
    }
}

impl Write for LockedWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let mut o = self
            .0
            .lock()
            .map_err(|_| std::io::Error::other("output lock poisoned"))?;
        o.write_all(b)?;
        o.flush()?;
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The output sink a client or server writes to: `inner`, each line
/// stamped with the local time when `--timestamps` gave a format.
pub fn shared(
    inner: Box<dyn Write + Send>,
    timestamps: Option<&str>,
) -> std::sync::Arc<std::sync::Mutex<dyn Write + Send>> {
    use std::sync::{Arc, Mutex};
    match timestamps {
        Some(format) => Arc::new(Mutex::new(Stamped::new(inner, format.to_string()))),
        None => Arc::new(Mutex::new(inner)),
    }
}

/// `--timestamps`: the local time (strftime format) before every line.
pub struct Stamped {
    inner: Box<dyn Write + Send>,
    format: String,
    at_line_start: bool,
}

impl Stamped {
    pub fn new(inner: Box<dyn Write + Send>, format: String) -> Self {
        Self {
            inner,
            format,
            at_line_start: true,
        }
    }
}

impl std::fmt::Debug for Stamped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stamped")
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl Write for Stamped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        for line in buf.split_inclusive(|&b| b == b'\n') {
            if self.at_line_start {
                let stamp = linerate_backend::clock::strftime_local(&self.format);
                self.inner.write_all(stamp.as_bytes())?;
            }
            self.inner.write_all(line)?;
            self.at_line_start = line.ends_with(b"\n");
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `-v`: iperf3's three lines, its version line first (tools such as
/// pScheduler read the version from it: linerate speaks iperf3 3.21's
/// protocol, OAEP credentials included), then linerate's own.
pub fn version_text() -> String {
    format!(
        "{line}\n{sys}\nOptional features available: CPU affinity setting, \
         IPv6 flow label, TCP congestion algorithm setting, sendfile / zerocopy, socket pacing, \
         authentication, bind to device, support IPv4 don't fragment, POSIX threads, \
         GSO/GRO support\nlinerate {v}: an iperf3-compatible server and client",
        line = linerate_iperf_proto::report::doc::version(),
        v = env!("CARGO_PKG_VERSION"),
        sys = crate::net::system_info(),
    )
}

/// `-V`'s first lines, as iperf3 3.21 prints them: the version and the
/// system, and `now` (seconds since the epoch) as a client's `Time:`.
pub fn verbose_banner(now: Option<u64>) -> String {
    let mut s = format!(
        "{}\n{}\n",
        linerate_iperf_proto::report::doc::version(),
        crate::net::system_info()
    );
    if let Some(now) = now {
        s.push_str(&format!(
            "Time: {}\n",
            linerate_iperf_proto::report::http_date(now)
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_line_comes_first() {
        let v = version_text();
        let first = v.lines().next().unwrap();
        assert_eq!(
            first,
            format!("iperf 3.21 (linerate {})", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(v.lines().count(), 4);
        let b = verbose_banner(Some(0));
        assert!(b.starts_with(first), "{b}");
        assert!(b.ends_with("Time: Thu, 01 Jan 1970 00:00:00 GMT\n"), "{b}");
        assert_eq!(verbose_banner(None).lines().count(), 2);
    }

    #[test]
    fn locked_writer_writes_through() {
        let sink: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
        let mut w = LockedWriter(sink.clone());
        w.write_all(b"a\nb").unwrap();
        assert_eq!(sink.lock().unwrap().as_slice(), b"a\nb");
    }
}
