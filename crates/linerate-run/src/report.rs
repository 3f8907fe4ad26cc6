//! The reporter contract: anything that takes a run's events as they
//! happen. The writers (text, `-J`, `--json-stream`, CSV, metrics) live in
//! `linerate-report`; this crate has no output dependencies.

use crate::event::Event;
use std::io;
use std::sync::{Arc, Mutex};

/// Something that takes a run's events as they happen.
pub trait Reporter: Send {
    fn report(&mut self, ev: &Event) -> io::Result<()>;
}

/// Several reporters fed the same events; one that fails does not stop the
/// others (the first error is returned).
#[derive(Default)]
pub struct Fanout(Vec<Box<dyn Reporter>>);

impl std::fmt::Debug for Fanout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Fanout({} reporters)", self.0.len())
    }
}

impl Fanout {
    pub fn new() -> Self {
        Fanout(Vec::new())
    }

    pub fn push(&mut self, r: Box<dyn Reporter>) {
        self.0.push(r);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Reporter for Fanout {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        let mut first = Ok(());
        for r in &mut self.0 {
            let res = r.report(ev);
            if first.is_ok() {
                first = res;
            }
        }
        first
    }
}

/// A reporter shared between threads (a server's tests, a run's workers).
pub type Shared = Arc<Mutex<dyn Reporter>>;

impl Reporter for Shared {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        self.lock()
            .map_err(|_| io::Error::other("reporter lock poisoned"))?
            .report(ev)
    }
}

/// A [`Shared`] reporter that can sit in a `Debug`/`Clone` options struct.
#[derive(Clone)]
pub struct SharedReporter(pub Shared);

impl std::fmt::Debug for SharedReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedReporter")
    }
}

impl SharedReporter {
    pub fn new(r: impl Reporter + 'static) -> Self {
        SharedReporter(Arc::new(Mutex::new(r)))
    }

    /// Reports `ev`; a failed write is the reporter's problem, not the run's.
    pub fn report(&self, ev: &Event) {
        if let Ok(mut r) = self.0.lock() {
            let _ = r.report(ev);
        }
    }
}

/// `1.23 MBytes` style, base 1024 as iperf3 prints transfers.
pub fn format_bytes(b: u64) -> String {
    let units = ["Bytes", "KBytes", "MBytes", "GBytes", "TBytes"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} Bytes")
    } else {
        format!("{v:.2} {}", units[u])
    }
}

/// `12.3 Mbit/s`, `1.45 Mpps`: base 1000.
pub fn format_rate(v: f64, unit: &str) -> String {
    let (d, p) = if v >= 1e9 {
        (1e9, "G")
    } else if v >= 1e6 {
        (1e6, "M")
    } else if v >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{:.3} {p}{unit}", v / d)
}
