//! `--metrics ADDR:PORT`: a reporter that keeps every mode's figures as
//! Prometheus/OpenMetrics series, and the HTTP endpoint that serves them.
//!
//! Series are fed by the run's events, like every other reporter: the
//! counters add each interval's counts (so they equal the run's totals at
//! its end, whatever the scrape interval), the gauges hold the last
//! interval's rates and latency figures. Labels: `mode`, `scope` (stream,
//! flow, worker, sum), `id`, `role` and `counted_by`; at most
//! [`MAX_LABEL_SETS`] label sets are kept (a sink counting a million flows
//! keeps its sums and the first flows; `linerate_metrics_dropped_label_sets_total`
//! says how many were left out).

use linerate_run::{Event, Reporter, Row};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::HashSet;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Label sets kept per process, at most.
pub const MAX_LABEL_SETS: usize = 2048;

/// Who a series is about.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RowLabels {
    mode: String,
    scope: String,
    id: String,
    role: String,
    counted_by: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndLabels {
    mode: String,
    outcome: String,
}

type Counters = Family<RowLabels, Counter>;
type Gauges = Family<RowLabels, Gauge<f64, AtomicU64>>;

/// Every series, and the registry that encodes them.
struct Series {
    registry: Registry,
    bytes: Counters,
    packets: Counters,
    lost: Counters,
    reordered: Counters,
    duplicates: Counters,
    errors: Counters,
    retransmits: Counters,
    bits_per_second: Gauges,
    packets_per_second: Gauges,
    latency_p50: Gauges,
    latency_p99: Gauges,
    latency_max: Gauges,
    jitter: Gauges,
    runs_started: Family<ModeLabels, Counter>,
    runs_ended: Family<EndLabels, Counter>,
    intervals: Family<ModeLabels, Counter>,
    dropped: Counter,
    known: HashSet<RowLabels>,
}

impl Series {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("linerate");
        let mut counter = |name: &str, help: &str| {
            let f = Counters::default();
            registry.register(name, help, f.clone());
            f
        };
        let bytes = counter(
            "bytes",
            "Bytes counted (payload or frame bytes as the mode counts them; see counted_by)",
        );
        let packets = counter("packets", "Packets, datagrams or transactions counted");
        let lost = counter("lost_packets", "Packets counted as lost by the receiver");
        let reordered = counter("reordered_packets", "Packets that arrived out of order");
        let duplicates = counter("duplicate_packets", "Packets that arrived more than once");
        let errors = counter(
            "errors",
            "Send or receive errors (refused sends, bad frames)",
        );
        let retransmits = counter("retransmits", "TCP retransmissions (sender)");
        let mut gauge = |name: &str, help: &str| {
            let f = Gauges::default();
            registry.register(name, help, f.clone());
            f
        };
        let bits_per_second = gauge(
            "throughput_bytes_per_second",
            "Rate over the last interval, bytes per second (x8 for bit/s)",
        );
        let packets_per_second = gauge(
            "packets_per_second",
            "Rate over the last interval, packets per second",
        );
        let latency_p50 = gauge(
            "latency_p50_seconds",
            "Median latency over the last interval",
        );
        let latency_p99 = gauge(
            "latency_p99_seconds",
            "99th percentile latency over the last interval",
        );
        let latency_max = gauge(
            "latency_max_seconds",
            "Largest latency over the last interval",
        );
        let jitter = gauge(
            "jitter_seconds",
            "Interarrival jitter (RFC 3550) at the end of the last interval",
        );
        let runs_started = Family::<ModeLabels, Counter>::default();
        registry.register("runs_started", "Runs (tests) started", runs_started.clone());
        let runs_ended = Family::<EndLabels, Counter>::default();
        registry.register(
            "runs_ended",
            "Runs (tests) ended, by outcome",
            runs_ended.clone(),
        );
        let intervals = Family::<ModeLabels, Counter>::default();
        registry.register("intervals", "Intervals reported", intervals.clone());
        let dropped = Counter::default();
        registry.register(
            "metrics_dropped_label_sets",
            "Rows left out because the label-set limit was reached",
            dropped.clone(),
        );
        Series {
            registry,
            bytes,
            packets,
            lost,
            reordered,
            duplicates,
            errors,
            retransmits,
            bits_per_second,
            packets_per_second,
            latency_p50,
            latency_p99,
            latency_max,
            jitter,
            runs_started,
            runs_ended,
            intervals,
            dropped,
            known: HashSet::new(),
        }
    }

    fn labels(mode: &str, r: &Row) -> RowLabels {
        RowLabels {
            mode: mode.to_string(),
            scope: r.scope.name().to_string(),
            id: r.id.clone(),
            role: r.role.clone(),
            counted_by: r.counted_by.name().to_string(),
        }
    }

    /// Adds a row's counts (a span of the run) and sets its gauges from
    /// the span of `seconds`.
    fn add(&mut self, mode: &str, r: &Row, seconds: f64, gauges: bool) {
        let l = Self::labels(mode, r);
        if !self.known.contains(&l) {
            if self.known.len() >= MAX_LABEL_SETS {
                self.dropped.inc();
                return;
            }
            self.known.insert(l.clone());
        }
        let c = &r.counts;
        for (family, v) in [
            (&self.bytes, c.bytes),
            (&self.packets, c.packets),
            (&self.lost, c.lost),
            (&self.reordered, c.reordered),
            (&self.duplicates, c.duplicates),
            (&self.errors, c.errors),
            (&self.retransmits, c.retransmits),
        ] {
            if let Some(v) = v {
                family.get_or_create(&l).inc_by(v);
            }
        }
        if !gauges {
            return;
        }
        let (bps, pps) = r.rates(seconds);
        let bps = bps.map(|b| b / 8.0);
        let g = &r.gauges;
        let ns = |v: Option<u64>| v.map(|n| n as f64 / 1e9);
        for (family, v) in [
            (&self.bits_per_second, bps),
            (&self.packets_per_second, pps),
            (&self.latency_p50, ns(g.latency_p50_ns)),
            (&self.latency_p99, ns(g.latency_p99_ns)),
            (&self.latency_max, ns(g.latency_max_ns)),
            (&self.jitter, g.jitter_ms.map(|ms| ms / 1e3)),
        ] {
            if let Some(v) = v {
                family.get_or_create(&l).set(v);
            }
        }
    }
}

/// The series, shared by the reporter (writing) and the endpoint (reading).
#[derive(Clone)]
pub struct Metrics {
    series: Arc<Mutex<Series>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    pub fn new() -> Self {
        Metrics {
            series: Arc::new(Mutex::new(Series::new())),
        }
    }

    /// The exposition, OpenMetrics text.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if let Ok(s) = self.series.lock() {
            let _ = prometheus_client::encoding::text::encode(&mut out, &s.registry);
        }
        out
    }

    /// The exposition in Prometheus's text format 0.0.4 (for scrapers and
    /// tools that do not ask for OpenMetrics, such as `promtool check
    /// metrics`): a counter's HELP and TYPE name its `_total` samples, no
    /// `# EOF`.
    pub fn encode_prometheus_text(&self) -> String {
        let om = self.encode();
        let counters: HashSet<&str> = om
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.strip_suffix(" counter"))
            .collect();
        let mut out = String::with_capacity(om.len());
        for l in om.lines() {
            if l == "# EOF" || l.starts_with("# UNIT ") {
                continue;
            }
            let meta = ["# HELP ", "# TYPE "]
                .into_iter()
                .find_map(|p| l.strip_prefix(p).map(|rest| (p, rest)));
            match meta {
                Some((p, rest)) => {
                    let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                    if counters.contains(name) {
                        out.push_str(&format!("{p}{name}_total {tail}\n"));
                    } else {
                        out.push_str(l);
                        out.push('\n');
                    }
                }
                None => {
                    out.push_str(l);
                    out.push('\n');
                }
            }
        }
        out
    }

    /// A reporter that feeds these series.
    pub fn reporter(&self) -> MetricsReporter {
        MetricsReporter {
            series: self.series.clone(),
            mode: String::from("unknown"),
            errored: false,
        }
    }

    /// Serves the series on `addr` (`GET /metrics`; anything else 404) on a
    /// thread of its own until the handle is dropped. One thread serves
    /// every connection, none blocking: a scraper that connects and sends
    /// nothing costs a slot until its deadline, not a thread, and when the
    /// slots are full the oldest connection is shed for the newest, so a
    /// real scrape is answered while hundreds of idle ones sit there.
    pub fn serve(&self, addr: &str) -> io::Result<Endpoint> {
        let listener = std::net::TcpListener::bind(addr)
            .map_err(|e| io::Error::new(e.kind(), format!("--metrics {addr}: {e}")))?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let (me, st) = (self.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut conns: std::collections::VecDeque<Conn> = std::collections::VecDeque::new();
            while !st.load(Ordering::Relaxed) {
                let mut progressed = false;
                // A bounded number of newcomers per turn: a flood of them
                // does not keep the loop from the connections it holds.
                for _ in 0..ACCEPTS_PER_TURN {
                    let Ok((c, _)) = listener.accept() else {
                        break;
                    };
                    if c.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if conns.len() >= MAX_CONNECTIONS {
                        conns.pop_front();
                    }
                    conns.push_back(Conn::new(c));
                    progressed = true;
                }
                let now = std::time::Instant::now();
                conns.retain_mut(|c| match c.step(&me, now) {
                    Step::Idle => true,
                    Step::Progress => {
                        progressed = true;
                        true
                    }
                    Step::Done => false,
                });
                if !progressed {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        });
        Ok(Endpoint {
            addr: local,
            stop,
            thread: Some(thread),
        })
    }

    /// The response to a complete request head.
    fn respond(&self, head: &[u8]) -> Vec<u8> {
        let text = String::from_utf8_lossy(head);
        let mut lines = text.split("\r\n");
        let mut first = lines.next().unwrap_or("").split(' ');
        let (method, target) = (first.next().unwrap_or(""), first.next().unwrap_or(""));
        let path = target.split('?').next().unwrap_or("");
        // OpenMetrics to those that ask for it (Prometheus does),
        // Prometheus's text format 0.0.4 to everyone else.
        let openmetrics = lines.any(|l| {
            l.split_once(':').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("accept")
                    && v.contains("application/openmetrics-text")
            })
        });
        if method == "GET" && path == "/metrics" {
            if openmetrics {
                response(
                    200,
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    &self.encode(),
                )
            } else {
                response(
                    200,
                    "text/plain; version=0.0.4; charset=utf-8",
                    &self.encode_prometheus_text(),
                )
            }
        } else {
            response(404, "text/plain", "linerate: GET /metrics\n")
        }
    }
}

/// What one turn of the serving loop did with a connection.
enum Step {
    Idle,
    Progress,
    Done,
}

/// One HTTP/1.x exchange, non-blocking: the request head within
/// CONN_DEADLINE, then the whole response within CONN_DEADLINE, then
/// close.
struct Conn {
    stream: std::net::TcpStream,
    head: Vec<u8>,
    /// The response and how much of it went out.
    out: Option<(Vec<u8>, usize)>,
    until: std::time::Instant,
}

impl Conn {
    fn new(stream: std::net::TcpStream) -> Self {
        Conn {
            stream,
            head: Vec::new(),
            out: None,
            until: std::time::Instant::now() + CONN_DEADLINE,
        }
    }

    fn step(&mut self, m: &Metrics, now: std::time::Instant) -> Step {
        use std::io::{Read, Write};
        if now >= self.until {
            return Step::Done;
        }
        let mut progressed = false;
        if self.out.is_none() {
            let mut buf = [0u8; 2048];
            loop {
                match self.stream.read(&mut buf) {
                    Ok(0) => return Step::Done,
                    Ok(n) => {
                        progressed = true;
                        self.head.extend_from_slice(&buf[..n]);
                        if self.head.len() > MAX_HEAD {
                            let r =
                                response(431, "text/plain", "linerate: request head too large\n");
                            self.out = Some((r, 0));
                            break;
                        }
                        if self.head.windows(4).any(|w| w == b"\r\n\r\n") {
                            self.out = Some((m.respond(&self.head), 0));
                            break;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Step::Done,
                }
            }
            if self.out.is_none() {
                return if progressed {
                    Step::Progress
                } else {
                    Step::Idle
                };
            }
            self.until = now + CONN_DEADLINE;
        }
        let Some((data, sent)) = self.out.as_mut() else {
            return Step::Idle;
        };
        while *sent < data.len() {
            match self.stream.write(&data[*sent..]) {
                Ok(0) => return Step::Done,
                Ok(n) => {
                    *sent += n;
                    progressed = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return if progressed {
                        Step::Progress
                    } else {
                        Step::Idle
                    };
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Step::Done,
            }
        }
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        Step::Done
    }
}

/// Connections accepted per turn of the serving loop, at most.
const ACCEPTS_PER_TURN: usize = 64;
/// Connections held at once, at most (the oldest is shed for a new one).
const MAX_CONNECTIONS: usize = 256;
/// Time a connection has for its request head, and again for the response.
const CONN_DEADLINE: Duration = Duration::from_secs(2);
/// The longest request head taken.
const MAX_HEAD: usize = 16 * 1024;

fn response(status: u16, content_type: &str, body: &str) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Request Header Fields Too Large",
    };
    let mut r = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body.as_bytes());
    r
}

/// The running endpoint; dropping it stops the thread.
pub struct Endpoint {
    pub addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Endpoint({})", self.addr)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Feeds a run's events into the series.
pub struct MetricsReporter {
    series: Arc<Mutex<Series>>,
    mode: String,
    errored: bool,
}

impl std::fmt::Debug for MetricsReporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MetricsReporter({})", self.mode)
    }
}

impl Reporter for MetricsReporter {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        let mut s = self
            .series
            .lock()
            .map_err(|_| io::Error::other("metrics lock poisoned"))?;
        match ev {
            Event::Start(st) => {
                self.mode = st.mode.name().to_string();
                self.errored = false;
                s.runs_started
                    .get_or_create(&ModeLabels {
                        mode: self.mode.clone(),
                    })
                    .inc();
            }
            Event::Interval(i) => {
                // Omitted (warm-up) intervals are not in the totals.
                if !i.omitted {
                    for r in i.rows.iter().chain(&i.sums) {
                        s.add(&self.mode, r, i.seconds(), true);
                    }
                }
                s.intervals
                    .get_or_create(&ModeLabels {
                        mode: self.mode.clone(),
                    })
                    .inc();
            }
            Event::Error(_) => self.errored = true,
            Event::End(_) => {
                let outcome = if self.errored { "error" } else { "ok" };
                s.runs_ended
                    .get_or_create(&EndLabels {
                        mode: self.mode.clone(),
                        outcome: outcome.into(),
                    })
                    .inc();
            }
        }
        Ok(())
    }
}

/// A command's metrics endpoint: started on the first run that asks for
/// it, then shared by the command's later runs (one series, one port).
/// Owned by the command's arguments, not the process.
#[derive(Debug, Clone, Default)]
pub struct Shared(Arc<std::sync::OnceLock<(Metrics, Endpoint)>>);

impl Shared {
    /// A reporter feeding the endpoint at `addr`, started now if it is not
    /// yet.
    pub fn reporter(&self, addr: &str) -> io::Result<MetricsReporter> {
        if let Some((m, _)) = self.0.get() {
            return Ok(m.reporter());
        }
        let m = Metrics::new();
        let ep = m.serve(addr)?;
        let (m, _) = self.0.get_or_init(|| (m, ep));
        Ok(m.reporter())
    }
}

#[cfg(test)]
mod tests {
    /// Scrapers that connect and send nothing sit there (hundreds, more
    /// than the slots): a real scrape is answered at once all the same,
    /// idle ones are closed at their deadline, and a head too large gets
    /// 431.
    #[test]
    fn idle_and_excess_connections_do_not_stall_a_scrape() {
        use std::io::{Read, Write};
        let m = Metrics::new();
        let ep = m.serve("127.0.0.1:0").unwrap();
        let scrape = || {
            let t0 = std::time::Instant::now();
            let mut c = std::net::TcpStream::connect(ep.addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            c.write_all(
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n",
            )
            .unwrap();
            let mut r = String::new();
            c.read_to_string(&mut r).unwrap();
            assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
            assert!(r.contains("application/openmetrics-text"), "{r}");
            assert!(r.trim_end().ends_with("# EOF"), "{r}");
            t0.elapsed()
        };
        let idle: Vec<std::net::TcpStream> = (0..40)
            .map(|_| std::net::TcpStream::connect(ep.addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        assert!(scrape() < Duration::from_millis(500), "40 idle connections");
        // More idle connections than slots: the oldest are shed.
        let more: Vec<std::net::TcpStream> = (0..MAX_CONNECTIONS + 50)
            .map(|_| std::net::TcpStream::connect(ep.addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        assert!(scrape() < Duration::from_millis(500), "a full table");
        // The idle connections are closed by the server at their deadline.
        std::thread::sleep(CONN_DEADLINE + Duration::from_millis(300));
        for mut i in idle.into_iter().chain(more) {
            i.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
            let mut b = Vec::new();
            assert_eq!(i.read_to_end(&mut b).unwrap_or(0), 0);
        }
        // A bad request head: too large, refused with 431.
        let mut c = std::net::TcpStream::connect(ep.addr).unwrap();
        let _ = c.write_all(&vec![b'a'; MAX_HEAD + 2048]);
        let mut r = String::new();
        let _ = c.read_to_string(&mut r);
        assert!(r.starts_with("HTTP/1.1 431"), "{r}");
    }

    use super::*;
    use linerate_run::{CountedBy, Counts, Host, Interval, Mode, Scope, Start};

    fn row(id: &str, bytes: u64) -> Row {
        Row::new(Scope::Flow, id, "rx", CountedBy::Receiver).with_counts(Counts {
            bytes: Some(bytes),
            packets: Some(bytes / 100),
            ..Counts::default()
        })
    }

    fn start() -> Event {
        Event::Start(Box::new(Start {
            mode: Mode::Sink,
            config: serde_json::json!({}),
            planned_s: None,
            doctor: None,
            host: Host::here(),
        }))
    }

    #[test]
    fn counters_add_intervals_and_gauges_hold_the_last() {
        let m = Metrics::new();
        let mut r = m.reporter();
        r.report(&start()).unwrap();
        r.report(&Event::Interval(Interval::new(
            0.0,
            1.0,
            vec![row("1", 1000)],
        )))
        .unwrap();
        r.report(&Event::Interval(Interval::new(
            1.0,
            2.0,
            vec![row("1", 500)],
        )))
        .unwrap();
        let text = m.encode();
        let want = r#"linerate_bytes_total{mode="sink",scope="flow",id="1",role="rx",counted_by="receiver"} 1500"#;
        assert!(text.contains(want), "{text}");
        let rate = r#"linerate_throughput_bytes_per_second{mode="sink",scope="flow",id="1",role="rx",counted_by="receiver"} 500.0"#;
        assert!(text.contains(rate), "{text}");
        let sum = r#"linerate_bytes_total{mode="sink",scope="sum",id="sum",role="rx",counted_by="receiver"} 1500"#;
        assert!(text.contains(sum), "{text}");
        assert!(
            text.contains(r#"linerate_intervals_total{mode="sink"} 2"#),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
        let plain = m.encode_prometheus_text();
        assert!(
            plain.contains("# TYPE linerate_bytes_total counter\n"),
            "{plain}"
        );
        assert!(
            plain.contains("# HELP linerate_bytes_total Bytes counted"),
            "{plain}"
        );
        assert!(
            plain.contains("# TYPE linerate_throughput_bytes_per_second gauge\n"),
            "{plain}"
        );
        assert!(!plain.contains("# EOF"));
    }

    #[test]
    fn label_sets_are_bounded() {
        let m = Metrics::new();
        let mut r = m.reporter();
        r.report(&start()).unwrap();
        let rows: Vec<Row> = (0..MAX_LABEL_SETS + 10)
            .map(|i| row(&i.to_string(), 100))
            .collect();
        r.report(&Event::Interval(Interval::new(0.0, 1.0, rows)))
            .unwrap();
        let text = m.encode();
        // The sum row comes after the flows: it is among the dropped.
        let dropped: u64 = text
            .lines()
            .find(|l| l.starts_with("linerate_metrics_dropped_label_sets_total"))
            .and_then(|l| l.split_whitespace().last())
            .and_then(|v| v.parse().ok())
            .unwrap();
        assert_eq!(dropped, 11, "{}", &text[..200]);
    }

    #[test]
    fn the_endpoint_serves_metrics_and_404s_the_rest() {
        use std::io::{Read, Write};
        let m = Metrics::new();
        let ep = m.serve("127.0.0.1:0").unwrap();
        let get = |path: &str| {
            let mut c = std::net::TcpStream::connect(ep.addr).unwrap();
            write!(c, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
            let mut s = String::new();
            c.read_to_string(&mut s).unwrap();
            s
        };
        let ok = get("/metrics");
        assert!(
            ok.starts_with("HTTP/1.0 200") || ok.starts_with("HTTP/1.1 200"),
            "{ok}"
        );
        assert!(
            ok.contains("text/plain; version=0.0.4") && !ok.contains("# EOF"),
            "{ok}"
        );
        let mut c = std::net::TcpStream::connect(ep.addr).unwrap();
        write!(
            c,
            "GET /metrics HTTP/1.0\r\nAccept: application/openmetrics-text; version=1.0.0\r\n\r\n"
        )
        .unwrap();
        let mut om = String::new();
        c.read_to_string(&mut om).unwrap();
        assert!(
            om.contains("application/openmetrics-text") && om.contains("# EOF"),
            "{om}"
        );
        assert!(get("/").contains(" 404 "));
    }
}
