//! The events a run emits, and the figures they carry.

use serde::Serialize;
use serde_json::Value;

/// Which mode a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// `linerate agent`: one run per start of traffic.
    Agent,
    Client,
    Server,
    Blast,
    Sink,
    Fwd,
    RrClient,
    RrServer,
    Rfc2544,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Agent => "agent",
            Mode::Client => "client",
            Mode::Server => "server",
            Mode::Blast => "blast",
            Mode::Sink => "sink",
            Mode::Fwd => "fwd",
            Mode::RrClient => "rr_client",
            Mode::RrServer => "rr_server",
            Mode::Rfc2544 => "rfc2544",
        }
    }
}

/// Who counted a figure: the side that sent it (what the kernel accepted),
/// the side that received it, the kernel itself, or a forwarder (both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CountedBy {
    Sender,
    Receiver,
    Kernel,
    Forwarder,
    /// An rr client: transactions it completed (request sent, answer matched).
    Client,
    /// An rr server: requests it received and answered.
    Server,
}

impl CountedBy {
    pub fn name(self) -> &'static str {
        match self {
            CountedBy::Sender => "sender",
            CountedBy::Receiver => "receiver",
            CountedBy::Kernel => "kernel",
            CountedBy::Forwarder => "forwarder",
            CountedBy::Client => "client",
            CountedBy::Server => "server",
        }
    }
}

/// What a row is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Stream,
    Flow,
    Worker,
    /// The sum of the rows of one role.
    Sum,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Stream => "stream",
            Scope::Flow => "flow",
            Scope::Worker => "worker",
            Scope::Sum => "sum",
        }
    }
}

/// Counters: they add up across rows and across intervals. `None` is "not
/// counted by this mode", never zero.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reordered: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
}

macro_rules! each_count {
    ($m:ident) => {
        $m!(bytes);
        $m!(packets);
        $m!(lost);
        $m!(reordered);
        $m!(duplicates);
        $m!(errors);
        $m!(retransmits);
    };
}

impl Counts {
    /// What was counted since `earlier` (a counter that went backwards
    /// counts 0, never wraps).
    pub fn since(&self, earlier: &Counts) -> Counts {
        let mut d = *self;
        macro_rules! sub {
            ($f:ident) => {
                d.$f = self.$f.map(|v| v.saturating_sub(earlier.$f.unwrap_or(0)));
            };
        }
        each_count!(sub);
        d
    }

    /// Adds `o` in; a figure either side counts is counted in the sum.
    pub fn add(&mut self, o: &Counts) {
        macro_rules! add {
            ($f:ident) => {
                self.$f = match (self.$f, o.$f) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                };
            };
        }
        each_count!(add);
    }
}

/// Figures that describe a moment or a span and do not add up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Gauges {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p99_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_max_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
}

/// One stream, flow or worker's figures (or their sum) over a span.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub scope: Scope,
    pub id: String,
    /// The direction or part it counts ("sender", "receiver", "rx", "tx", …).
    pub role: String,
    pub counted_by: CountedBy,
    pub counts: Counts,
    pub gauges: Gauges,
    /// The row's typed identity where it has one (a sink's probe flow id),
    /// for a program to match on: `id` is its name for people.
    pub key: Option<u64>,
}

impl Row {
    pub fn new(scope: Scope, id: impl Into<String>, role: &str, counted_by: CountedBy) -> Self {
        Row {
            scope,
            id: id.into(),
            role: role.to_string(),
            counted_by,
            counts: Counts::default(),
            gauges: Gauges::default(),
            key: None,
        }
    }

    pub fn with_key(mut self, key: u64) -> Self {
        self.key = Some(key);
        self
    }

    pub fn with_counts(mut self, counts: Counts) -> Self {
        self.counts = counts;
        self
    }

    /// The row as JSON, with rates over `seconds`.
    pub fn json(&self, seconds: f64) -> Value {
        serde_json::to_value(self.doc(seconds)).unwrap_or_default()
    }

    /// The row as its document has it, with rates over `seconds`.
    pub fn doc(&self, seconds: f64) -> RowDoc<'_> {
        let (bits_per_second, packets_per_second) = self.rates(seconds);
        RowDoc {
            scope: self.scope,
            id: &self.id,
            role: &self.role,
            counted_by: self.counted_by,
            counts: &self.counts,
            gauges: &self.gauges,
            bits_per_second,
            packets_per_second,
        }
    }

    /// Bits and packets per second over `seconds` (none for an empty span).
    pub fn rates(&self, seconds: f64) -> (Option<f64>, Option<f64>) {
        if seconds <= 0.0 {
            return (None, None);
        }
        (
            self.counts.bytes.map(|b| b as f64 * 8.0 / seconds),
            self.counts.packets.map(|p| p as f64 / seconds),
        )
    }
}

/// A row in a document: who and what it counts, its counts and gauges,
/// and its rates over the span.
#[derive(Debug, Serialize)]
pub struct RowDoc<'a> {
    pub scope: Scope,
    pub id: &'a str,
    pub role: &'a str,
    pub counted_by: CountedBy,
    #[serde(flatten)]
    pub counts: &'a Counts,
    #[serde(flatten)]
    pub gauges: &'a Gauges,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits_per_second: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_per_second: Option<f64>,
}

/// The sum rows of `rows`: one per role, in the order roles first appear.
/// Gauges do not add up: a sum keeps them only when its role has one row.
pub fn sums(rows: &[Row]) -> Vec<Row> {
    let mut out: Vec<(Row, usize)> = Vec::new();
    for r in rows.iter().filter(|r| r.scope != Scope::Sum) {
        match out.iter_mut().find(|(s, _)| s.role == r.role) {
            Some((s, n)) => {
                s.counts.add(&r.counts);
                s.gauges = Gauges::default();
                *n += 1;
            }
            None => {
                let mut s = Row::new(Scope::Sum, "sum", &r.role, r.counted_by);
                s.counts = r.counts;
                s.gauges = r.gauges;
                out.push((s, 1));
            }
        }
    }
    out.into_iter().map(|(s, _)| s).collect()
}

/// A run's start: what it was asked to do, on what host.
#[derive(Debug, Clone)]
pub struct Start {
    pub mode: Mode,
    /// The run's settings as the mode states them.
    pub config: Value,
    /// How long the run is planned to last, seconds (none: until stopped,
    /// or until a count is reached).
    pub planned_s: Option<f64>,
    /// The doctor's summary for the interface and CPUs in use, where the
    /// mode has one.
    pub doctor: Option<Value>,
    pub host: Host,
}

/// Facts about the host a run is on.
#[derive(Debug, Clone, Serialize)]
pub struct Host {
    pub hostname: String,
    pub kernel: String,
    pub cpus: usize,
    pub linerate: &'static str,
    /// Seconds since the Unix epoch when the run started.
    pub timestamp: f64,
    /// The command line that ran it (this process's arguments, as given:
    /// linerate takes no secret on its command line).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
}

impl Host {
    /// This host, now.
    pub fn here() -> Self {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        Host {
            hostname: read("/proc/sys/kernel/hostname"),
            kernel: read("/proc/sys/kernel/osrelease"),
            cpus: std::thread::available_parallelism().map_or(1, usize::from),
            linerate: env!("CARGO_PKG_VERSION"),
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            command: std::env::args_os()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
        }
    }
}

/// One reporting interval: seconds since the run started, rows for what it
/// counts (streams, flows or workers) and a sum per role.
#[derive(Debug, Clone)]
pub struct Interval {
    pub start_s: f64,
    pub end_s: f64,
    pub rows: Vec<Row>,
    pub sums: Vec<Row>,
    /// Inside the omitted warm-up (iperf3's `-O`): not in the totals.
    pub omitted: bool,
}

impl Interval {
    /// The interval from `start_s` to `end_s` with these rows and their sums.
    pub fn new(start_s: f64, end_s: f64, rows: Vec<Row>) -> Self {
        Interval {
            start_s,
            end_s,
            sums: sums(&rows),
            rows,
            omitted: false,
        }
    }

    pub fn seconds(&self) -> f64 {
        (self.end_s - self.start_s).max(0.0)
    }

    pub fn json(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

/// An interval in a document: its span, and its rows and sums with their
/// rates over it.
#[derive(Debug, Serialize)]
struct IntervalDoc<'a> {
    start: f64,
    end: f64,
    seconds: f64,
    omitted: bool,
    rows: Vec<RowDoc<'a>>,
    sums: Vec<RowDoc<'a>>,
}

impl Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        let s = self.seconds();
        IntervalDoc {
            start: self.start_s,
            end: self.end_s,
            seconds: s,
            omitted: self.omitted,
            rows: self.rows.iter().map(|r| r.doc(s)).collect(),
            sums: self.sums.iter().map(|r| r.doc(s)).collect(),
        }
        .serialize(ser)
    }
}

/// A run's end: the totals, and the mode's typed outcome (its `-J`
/// document and human summary are the outcome's to write).
#[derive(Debug, Clone)]
pub struct End {
    pub duration_s: f64,
    pub rows: Vec<Row>,
    pub sums: Vec<Row>,
    /// What the run measured, as the mode types it.
    pub outcome: crate::outcome::SharedOutcome,
    /// The process exit code this result calls for (0 ok, 1 the run
    /// failed part-way but measured something).
    pub exit_code: u8,
}

impl End {
    pub fn json(&self) -> Value {
        serde_json::to_value(self.doc()).unwrap_or_default()
    }

    fn doc(&self) -> EndDoc<'_> {
        let s = self.duration_s;
        EndDoc {
            duration_s: s,
            rows: self.rows.iter().map(|r| r.doc(s)).collect(),
            sums: self.sums.iter().map(|r| r.doc(s)).collect(),
            result: self.outcome.document(),
        }
    }
}

/// A run's end in a document: the totals with their rates, and the mode's
/// own document.
#[derive(Debug, Serialize)]
struct EndDoc<'a> {
    duration_s: f64,
    rows: Vec<RowDoc<'a>>,
    sums: Vec<RowDoc<'a>>,
    result: Value,
}

/// A run's start in a document.
#[derive(Debug, Serialize)]
struct StartDoc<'a> {
    mode: Mode,
    config: &'a Value,
    doctor: &'a Option<Value>,
    host: &'a Host,
}

/// An event's data, as `{"event": NAME, "data": …}` carries it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum EventData<'a> {
    Start(StartDoc<'a>),
    Interval(&'a Interval),
    Error(&'a str),
    End(EndDoc<'a>),
}

#[derive(Debug, Serialize)]
struct EventDoc<'a> {
    event: &'static str,
    data: EventData<'a>,
}

/// Everything a run says, in order: one `Start`, any `Interval`s, at most
/// one `Error`, and always one `End` that keeps what was measured.
#[derive(Debug, Clone)]
pub enum Event {
    Start(Box<Start>),
    Interval(Interval),
    /// Something went wrong; what was measured up to then follows in `End`.
    Error(String),
    End(Box<End>),
}

impl Event {
    pub fn name(&self) -> &'static str {
        match self {
            Event::Start(_) => "start",
            Event::Interval(_) => "interval",
            Event::Error(_) => "error",
            Event::End(_) => "end",
        }
    }

    /// `{"event": NAME, "data": …}`, iperf3's JSON-stream shape.
    pub fn json(&self) -> Value {
        let data = match self {
            Event::Start(s) => EventData::Start(StartDoc {
                mode: s.mode,
                config: &s.config,
                doctor: &s.doctor,
                host: &s.host,
            }),
            Event::Interval(i) => EventData::Interval(i),
            Event::Error(e) => EventData::Error(e),
            Event::End(e) => EventData::End(e.doc()),
        };
        serde_json::to_value(EventDoc {
            event: self.name(),
            data,
        })
        .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn row(role: &str, bytes: u64, packets: Option<u64>) -> Row {
        Row::new(Scope::Flow, "1", role, CountedBy::Receiver).with_counts(Counts {
            bytes: Some(bytes),
            packets,
            ..Counts::default()
        })
    }

    #[test]
    fn sums_are_per_role_and_keep_what_is_not_counted_absent() {
        let rows = [
            row("rx", 100, Some(1)),
            row("tx", 7, None),
            row("rx", 50, Some(2)),
        ];
        let s = sums(&rows);
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].role.as_str(), s[0].counts.bytes), ("rx", Some(150)));
        assert_eq!(s[0].counts.packets, Some(3));
        assert_eq!((s[1].role.as_str(), s[1].counts.packets), ("tx", None));
        // a lone row's gauges carry over; several rows' do not
        let mut one = row("rx", 1, None);
        one.gauges.latency_p50_ns = Some(7);
        assert_eq!(sums(&[one.clone()])[0].gauges.latency_p50_ns, Some(7));
        assert_eq!(sums(&[one.clone(), one])[0].gauges.latency_p50_ns, None);
    }

    #[test]
    fn since_subtracts_and_never_wraps() {
        let a = row("rx", 100, Some(10)).counts;
        let b = row("rx", 40, Some(12)).counts;
        let d = a.since(&b);
        assert_eq!((d.bytes, d.packets, d.lost), (Some(60), Some(0), None));
    }

    #[test]
    fn row_json_has_rates_and_only_counted_figures() {
        let v = row("rx", 1000, Some(10)).json(2.0);
        assert_eq!(v["bits_per_second"], 4000.0);
        assert_eq!(v["packets_per_second"], 5.0);
        assert_eq!(v["counted_by"], "receiver");
        assert!(v.get("lost").is_none());
        assert!(
            row("rx", 1, None)
                .json(0.0)
                .get("bits_per_second")
                .is_none()
        );
    }

    #[test]
    fn events_have_iperf3s_stream_shape() {
        let e = Event::Error("boom".into());
        assert_eq!(e.json(), json!({"event": "error", "data": "boom"}));
    }
}
