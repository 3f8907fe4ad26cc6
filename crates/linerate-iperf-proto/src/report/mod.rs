//! What a test prints: iperf3's human layout, its `-J` document (same keys,
//! types and units), and `--json-stream` events. Pure: figures in, text out.
//! linerate's own extra figures go under the top-level key `linerate`.

use crate::units;
use crate::{Params, PeerResults, Protocol, StreamResult, TestMode};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::net::SocketAddr;

mod json;
mod text;

pub use json::http_date;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// How output is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OutputMode {
    /// `-J`: one JSON document at the end.
    pub json: bool,
    /// `--json-stream`: one JSON event per line.
    pub json_stream: bool,
    /// `--json-stream-full-output`: with `--json-stream`, the whole `-J`
    /// document follows the events (iperf3 3.21).
    pub json_stream_full: bool,
    /// `-f`: fixed unit letter.
    pub format: Option<char>,
    /// `-V`: iperf3's verbose lines (cookie, MSS, "Starting Test", "Test
    /// Complete", "CPU Utilization", the congestion algorithms).
    pub verbose: bool,
}

impl OutputMode {
    /// Human text (neither -J nor --json-stream).
    pub fn human(&self) -> bool {
        !self.json && !self.json_stream
    }
}

/// A connected data stream.
#[derive(Debug, Clone)]
pub struct StreamDesc {
    pub id: u32,
    /// The socket's fd number: iperf3's `[  5]` and the JSON `socket`.
    pub socket: i32,
    /// Whether this host sends on it.
    pub sender: bool,
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// What is known when the test starts.
#[derive(Debug, Clone)]
pub struct StartInfo {
    pub role: Role,
    pub params: Params,
    pub cookie: String,
    pub system_info: String,
    pub timestamp_secs: u64,
    /// Client: the host as typed and the port; server: the client's address.
    pub peer_host: String,
    pub peer_port: u16,
    pub tcp_mss_default: u32,
    pub sndbuf_actual: u64,
    pub rcvbuf_actual: u64,
    pub interval_s: f64,
    /// This side sends UDP with GSO / asks for GRO on its UDP receivers
    /// (iperf3 3.21's `test_start.gso` / `gro`).
    pub gso: bool,
    pub gro: bool,
    pub streams: Vec<StreamDesc>,
    /// Facts about this host for the run-model start event (read by the
    /// I/O layer: this crate reads nothing).
    pub host: linerate_run::Host,
}

/// TCP_INFO figures of a sending stream in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpSample {
    pub retransmits: u64,
    /// Reorderings the sender's TCP saw in the interval (tcpi_reord_seen).
    pub reorder: u64,
    pub snd_cwnd: u64,
    pub snd_wnd: u64,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub pmtu: u32,
}

/// A UDP receiver's figures in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UdpRxSample {
    pub jitter_ms: f64,
    pub lost: u64,
    pub packets: u64,
}

/// One stream over one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalSample {
    pub id: u32,
    pub socket: i32,
    pub sender: bool,
    pub start: f64,
    pub end: f64,
    pub bytes: u64,
    pub omitted: bool,
    pub tcp: Option<TcpSample>,
    /// UDP sender: datagrams sent in the interval.
    pub udp_tx_packets: Option<u64>,
    pub udp_rx: Option<UdpRxSample>,
}

/// End-of-test TCP figures of a sending stream.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpFinal {
    pub retransmits: u64,
    /// Reorderings seen over the test (tcpi_reord_seen).
    pub reorder: u64,
    pub max_snd_cwnd: u64,
    pub max_snd_wnd: u64,
    pub max_rtt: u32,
    pub min_rtt: u32,
    pub mean_rtt: u32,
}

/// One stream's own figures at the end (after the omit period).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamFinal {
    pub id: u32,
    pub socket: i32,
    pub sender: bool,
    pub bytes: u64,
    pub seconds: f64,
    /// Sender: datagrams sent (cumulative); receiver: highest sequence seen.
    pub packets: u64,
    pub omitted_packets: u64,
    /// Receiver: lost, cumulative (iperf3's count).
    pub errors: u64,
    pub omitted_errors: u64,
    pub out_of_order: u64,
    pub jitter_s: f64,
    pub tcp: Option<TcpFinal>,
    /// linerate's exact UDP counts (receiver): duplicates, late, lost.
    pub exact: Option<(u64, u64, u64)>,
    /// Send calls refused by the kernel (EAGAIN/ENOBUFS), sender.
    pub send_errors: u64,
    pub congestion: Option<String>,
    /// Paced senders: measured gaps between send calls.
    pub departures: Option<DepartureStats>,
}

/// How evenly a paced sender sent: gaps between its send calls, measured
/// by the sender itself (each call hands `units_per_call` datagrams or
/// blocks to the kernel).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct DepartureStats {
    pub calls: u64,
    pub units_per_call: f64,
    pub target_gap_us: f64,
    pub mean_gap_us: f64,
    pub stddev_gap_us: f64,
    pub min_gap_us: f64,
    pub max_gap_us: f64,
    /// p50, p99 and p99.9 of the gaps.
    pub gap_percentiles_us: [f64; 3],
}

/// CPU use of one side, percent of wall time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cpu {
    pub total: f64,
    pub user: f64,
    pub system: f64,
}

/// Builds results to send to the peer from this side's figures.
pub fn peer_results(finals: &[StreamFinal], cpu: Cpu, is_tcp: bool) -> PeerResults {
    let sends = finals.iter().any(|f| f.sender);
    PeerResults {
        cpu_util_total: cpu.total,
        cpu_util_user: cpu.user,
        cpu_util_system: cpu.system,
        sender_has_retransmits: match (sends, is_tcp) {
            (false, _) => -1,
            (true, true) => 1,
            (true, false) => 0,
        },
        congestion_used: finals.iter().find_map(|f| f.congestion.clone()),
        streams: finals
            .iter()
            .map(|f| StreamResult {
                id: f.id,
                bytes: f.bytes,
                retransmits: match (&f.tcp, f.sender) {
                    (Some(t), true) => t.retransmits as i64,
                    _ => -1,
                },
                jitter_s: f.jitter_s,
                errors: f.errors,
                omitted_errors: f.omitted_errors,
                packets: f.packets,
                omitted_packets: f.omitted_packets,
                start_time: 0.0,
                end_time: f.seconds,
            })
            .collect(),
        server_output_text: None,
        server_output_json: None,
    }
}

/// The report of one test.
#[derive(Debug)]
pub struct Report {
    info: StartInfo,
    mode: OutputMode,
    start: Value,
    intervals: Vec<Value>,
    /// Everything printed in human form (for `--get-server-output`).
    text: String,
    header_printed: bool,
    /// The last interval printed ended with iperf3's separator line.
    separator_last: bool,
    error: Option<String>,
    /// `-F`: the file's name and size (set by the I/O layer at the end).
    diskfile: Option<(String, u64)>,
    /// The same test as run-model events, for the shared reporters (CSV):
    /// taken with [`Report::poll_run_event`].
    run_events: std::collections::VecDeque<linerate_run::Event>,
}

/// A stream's row, named by its socket number as iperf3's report names
/// it (`[  5]`), so a live view, CSV and the report agree: who counted it
/// follows from its direction.
fn stream_row(
    id: i32,
    sender: bool,
    bytes: u64,
    packets: Option<u64>,
    lost: Option<u64>,
    retr: Option<u64>,
) -> linerate_run::Row {
    use linerate_run::{CountedBy, Counts, Row, Scope};
    let (role, by) = if sender {
        ("sender", CountedBy::Sender)
    } else {
        ("receiver", CountedBy::Receiver)
    };
    Row::new(Scope::Stream, id.to_string(), role, by).with_counts(Counts {
        bytes: Some(bytes),
        packets,
        lost,
        retransmits: retr,
        ..Counts::default()
    })
}

fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn addr_host(a: &SocketAddr) -> String {
    match a {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.ip().to_string(),
        },
        SocketAddr::V4(v4) => v4.ip().to_string(),
    }
}

/// iperf3's `test_start` object: the test as the parameters set it (also
/// the run model's start configuration of the client and server).
pub fn test_start(p: &Params, interval_s: f64, gso: bool, gro: bool) -> Value {
    json!({
        "protocol": if p.protocol == Protocol::Tcp { "TCP" } else { "UDP" },
        "num_streams": p.parallel, "blksize": p.len, "omit": p.omit_s, "duration": p.time_s,
        "bytes": p.num_bytes, "blocks": p.block_count,
        "reverse": u8::from(p.mode == TestMode::Reverse), "tos": p.tos,
        "target_bitrate": p.bandwidth_bps, "bidir": u8::from(p.mode == TestMode::Bidir),
        "fqrate": p.fq_rate_bps, "interval": interval_s,
        "gso": u8::from(gso), "gro": u8::from(gro),
    })
}

impl Report {
    pub fn new(info: StartInfo, mode: OutputMode) -> Self {
        let p = &info.params;
        let connected: Vec<Value> = info
            .streams
            .iter()
            .map(|s| {
                json!({"socket": s.socket, "local_host": addr_host(&s.local), "local_port": s.local.port(),
                       "remote_host": addr_host(&s.remote), "remote_port": s.remote.port()})
            })
            .collect();
        let mut start = Map::new();
        start.insert("connected".into(), json!(connected));
        start.insert(
            "version".into(),
            json!(format!(
                "iperf 3.21 (linerate {})",
                env!("CARGO_PKG_VERSION")
            )),
        );
        start.insert("system_info".into(), json!(info.system_info));
        // Keys in iperf3 3.21's order (serde_json keeps insertion order):
        // a TCP server writes its buffer sizes here, the others after
        // fq_rate; a UDP server writes target_bitrate here (and again
        // below, which a map keeps once, here).
        let buffers = [
            ("sock_bufsize", json!(p.window)),
            ("sndbuf_actual", json!(info.sndbuf_actual)),
            ("rcvbuf_actual", json!(info.rcvbuf_actual)),
        ];
        let buffers_early = info.role == Role::Server && p.protocol == Protocol::Tcp;
        if buffers_early {
            start.extend(buffers.clone().map(|(k, v)| (k.to_string(), v)));
        }
        if info.role == Role::Server && p.protocol == Protocol::Udp {
            start.insert("target_bitrate".into(), json!(p.bandwidth_bps));
        }
        start.insert(
            "timestamp".into(),
            json!({"time": http_date(info.timestamp_secs), "timesecs": info.timestamp_secs,
                   "timemillisecs": info.timestamp_secs * 1000}),
        );
        match info.role {
            Role::Client => start.insert(
                "connecting_to".into(),
                json!({"host": info.peer_host, "port": info.peer_port}),
            ),
            Role::Server => start.insert(
                "accepted_connection".into(),
                json!({"host": info.peer_host, "port": info.peer_port}),
            ),
        };
        start.insert("cookie".into(), json!(info.cookie));
        if p.protocol == Protocol::Tcp {
            if p.mss > 0 {
                start.insert("tcp_mss".into(), json!(p.mss));
            } else {
                start.insert("tcp_mss_default".into(), json!(info.tcp_mss_default));
            }
        }
        start.insert("target_bitrate".into(), json!(p.bandwidth_bps));
        start.insert("fq_rate".into(), json!(p.fq_rate_bps));
        if !buffers_early {
            start.extend(buffers.map(|(k, v)| (k.to_string(), v)));
        }
        start.insert(
            "test_start".into(),
            test_start(p, info.interval_s, info.gso, info.gro),
        );
        Self {
            info,
            mode,
            start: Value::Object(start),
            intervals: Vec::new(),
            text: String::new(),
            header_printed: false,
            separator_last: false,
            error: None,
            diskfile: None,
            run_events: std::collections::VecDeque::new(),
        }
    }

    /// The next run-model event of this test (start, intervals, error, end),
    /// in order; the I/O layer hands them to the shared reporters.
    pub fn poll_run_event(&mut self) -> Option<linerate_run::Event> {
        self.run_events.pop_front()
    }

    fn human(&self) -> bool {
        !self.mode.json && !self.mode.json_stream
    }

    /// Human text so far (what `--get-server-output` returns).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The lines announcing the streams (human), or the start event.
    pub fn start_text(&mut self) -> String {
        let mode = match self.info.role {
            Role::Client => linerate_run::Mode::Client,
            Role::Server => linerate_run::Mode::Server,
        };
        self.run_events
            .push_back(linerate_run::Event::Start(Box::new(linerate_run::Start {
                mode,
                config: self.start["test_start"].clone(),
                planned_s: (self.info.params.time_s > 0)
                    .then(|| f64::from(self.info.params.time_s)),
                doctor: None,
                host: self.info.host.clone(),
            })));
        if self.mode.json_stream {
            return format!("{}\n", json!({"event": "start", "data": self.start}));
        }
        let mut out = self.verbose_start();
        for s in &self.info.streams {
            let _ = writeln!(
                out,
                "[{:3}] local {} port {} connected to {} port {}",
                s.socket,
                addr_host(&s.local),
                s.local.port(),
                addr_host(&s.remote),
                s.remote.port()
            );
        }
        if self.mode.verbose {
            out.push_str(&self.starting_test());
        }
        self.text.push_str(&out);
        if self.human() { out } else { String::new() }
    }

    /// `-V`, before the streams: (a server's time,) the cookie, the MSS
    /// (TCP) and the target rate, as iperf3 3.21 prints them.
    fn verbose_start(&self) -> String {
        let mut out = String::new();
        if !self.mode.verbose {
            return out;
        }
        let p = &self.info.params;
        if self.info.role == Role::Server {
            let _ = writeln!(out, "Time: {}", http_date(self.info.timestamp_secs));
        }
        let _ = writeln!(out, "      Cookie: {}", self.info.cookie);
        if p.protocol == Protocol::Tcp {
            if p.mss > 0 {
                let _ = writeln!(out, "      TCP MSS: {}", p.mss);
            } else {
                let _ = writeln!(
                    out,
                    "      TCP MSS: {} (default)",
                    self.info.tcp_mss_default
                );
            }
        }
        if p.bandwidth_bps > 0 {
            let _ = writeln!(out, "      Target Bitrate: {}", p.bandwidth_bps);
        }
        out
    }

    /// `-V`: iperf3's "Starting Test" line.
    fn starting_test(&self) -> String {
        let p = &self.info.params;
        let proto = match p.protocol {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        };
        let end = if p.num_bytes > 0 {
            format!("{} bytes to send", p.num_bytes)
        } else if p.block_count > 0 {
            format!("{} blocks to send", p.block_count)
        } else {
            format!("{} second test", p.time_s)
        };
        format!(
            "Starting Test: protocol: {proto}, {} streams, {} byte blocks, omitting {} seconds, {end}, tos {}\n",
            p.parallel, p.len, p.omit_s, p.tos
        )
    }

    /// Whether a stream carries data client → server.
    fn forward_dir(&self, s_sender: bool) -> bool {
        match self.info.role {
            Role::Client => s_sender,
            Role::Server => !s_sender,
        }
    }

    /// iperf3's role column with --bidir: `[TX-C]`, `[RX-S]`, …
    pub(super) fn role_tag(&self, sender: bool) -> String {
        let side = match self.info.role {
            Role::Client => 'C',
            Role::Server => 'S',
        };
        format!("[{}-{side}", if sender { "TX" } else { "RX" })
    }

    /// Records one interval; returns what to print now.
    pub fn interval(&mut self, samples: &[IntervalSample]) -> String {
        if let Some(first) = samples.first() {
            let rows: Vec<linerate_run::Row> = samples
                .iter()
                .map(|s| {
                    let packets = s.udp_tx_packets.or(s.udp_rx.map(|r| r.packets));
                    let mut r = stream_row(
                        s.socket,
                        s.sender,
                        s.bytes,
                        packets,
                        s.udp_rx.map(|u| u.lost),
                        s.tcp.map(|t| t.retransmits),
                    );
                    r.gauges.jitter_ms = s.udp_rx.map(|u| u.jitter_ms);
                    r
                })
                .collect();
            self.run_events
                .push_back(linerate_run::Event::Interval(linerate_run::Interval {
                    omitted: first.omitted,
                    ..linerate_run::Interval::new(first.start, first.end, rows)
                }));
        }
        let bidir = self.info.params.mode == TestMode::Bidir;
        let fwd: Vec<&IntervalSample> = samples
            .iter()
            .filter(|s| self.forward_dir(s.sender))
            .collect();
        let rev: Vec<&IntervalSample> = samples
            .iter()
            .filter(|s| !self.forward_dir(s.sender))
            .collect();
        let (sum, sum_rev) = if bidir {
            (Self::sum(&fwd), Self::sum(&rev))
        } else {
            (Self::sum(&samples.iter().collect::<Vec<_>>()), None)
        };
        let mut v = json!({
            "streams": samples.iter().map(|s| Self::interval_json(s, true)).collect::<Vec<_>>(),
            "sum": sum.as_ref().map(|s| Self::interval_json(s, false)).unwrap_or(json!({})),
        });
        if let Some(r) = &sum_rev {
            v["sum_bidir_reverse"] = Self::interval_json(r, false);
        }
        let mut out = String::new();
        if !self.header_printed {
            self.header_printed = true;
            out.push_str(&self.header(samples));
        }
        if bidir {
            // iperf3: this side's sending streams and their [SUM], then
            // the receiving ones, each tagged with its role.
            let first = samples.first().is_none_or(|s| s.sender);
            for sending in [first, !first] {
                let group: Vec<&IntervalSample> =
                    samples.iter().filter(|s| s.sender == sending).collect();
                for s in &group {
                    let tag = format!("{:3}]{}", s.socket, self.role_tag(s.sender));
                    out.push_str(&self.interval_line(&tag, s, true));
                }
                if group.len() > 1
                    && let Some(sum) = Self::sum(&group)
                {
                    let tag = format!("SUM]{}", self.role_tag(sending));
                    out.push_str(&self.interval_line(&tag, &sum, false));
                }
            }
        } else {
            for s in samples {
                out.push_str(&self.interval_line(&format!("{:3}", s.socket), s, true));
            }
            if samples.len() > 1 {
                for s in sum.iter() {
                    out.push_str(&self.interval_line("SUM", s, false));
                }
            }
        }
        self.separator_last = samples.len() > 1 || bidir;
        if self.separator_last {
            out.push_str("- - - - - - - - - - - - - - - - - - - - - - - - -\n");
        }
        self.text.push_str(&out);
        let printed = if self.mode.json_stream {
            format!("{}\n", json!({"event": "interval", "data": v}))
        } else if self.human() {
            out
        } else {
            String::new()
        };
        self.intervals.push(v);
        printed
    }

    /// `-F`: the file and its size, for iperf3's "Sent X / Y (P%) of FILE"
    /// lines and `end.streams[].diskfile`.
    pub fn set_diskfile(&mut self, name: &str, size: u64) {
        self.diskfile = Some((name.to_string(), size));
    }

    /// iperf3's percentage of the file a stream moved (100 for an empty file).
    fn diskfile_percent(moved: u64, size: u64) -> u64 {
        if size == 0 {
            100
        } else {
            (moved as f64 / size as f64 * 100.0) as u64
        }
    }

    /// Records a failure; the JSON document gets a top-level `error`.
    pub fn set_error(&mut self, msg: &str) {
        self.error = Some(msg.to_string());
    }

    /// The end of the test: builds `end` from this side's figures and the
    /// peer's results (if the exchange happened), and returns what to print.
    pub fn finish(
        &mut self,
        finals: &[StreamFinal],
        cpu: Cpu,
        peer: Option<&PeerResults>,
        extra: &[(&str, Value)],
    ) -> String {
        let (end, received_bps) = self.end_json(finals, cpu, peer);
        let linerate = linerate_json(finals);
        let doc = self.end_document(end, linerate, peer, extra);
        let human = self.end_text(finals, peer, cpu);
        self.text.push_str(&human);
        if let Some(e) = &self.error {
            self.run_events
                .push_back(linerate_run::Event::Error(e.clone()));
        }
        self.push_end(finals, &doc, &human, received_bps);
        self.render(&doc, human, peer)
    }

    /// The whole JSON document: start, intervals, end, what the peer
    /// sent back, linerate's own section (with `extra`), the error.
    fn end_document(
        &self,
        end: Value,
        linerate: Value,
        peer: Option<&PeerResults>,
        extra: &[(&str, Value)],
    ) -> Value {
        let mut doc = json!({"start": self.start, "intervals": self.intervals, "end": end});
        if let Some(t) = &self.info.params.title {
            doc["title"] = json!(t);
        }
        if let Some(t) = &self.info.params.extra_data {
            doc["extra_data"] = json!(t);
        }
        if let Some(p) = peer {
            if let Some(t) = &p.server_output_text {
                doc["server_output_text"] = json!(t);
            }
            if let Some(j) = &p.server_output_json {
                doc["server_output_json"] = j.clone();
            }
        }
        doc["linerate"] = linerate;
        for (k, v) in extra {
            doc["linerate"][*k] = v.clone();
        }
        if let Some(e) = &self.error {
            doc["error"] = json!(e);
        }
        doc
    }

    /// The run model's end event: a row per stream, the document and the
    /// text as written, the received rate as the figure.
    fn push_end(&mut self, finals: &[StreamFinal], doc: &Value, human: &str, received_bps: f64) {
        let rows: Vec<linerate_run::Row> = finals
            .iter()
            .map(|f| {
                let udp = self.info.params.protocol == Protocol::Udp;
                stream_row(
                    f.socket,
                    f.sender,
                    f.bytes,
                    udp.then(|| f.packets.saturating_sub(f.omitted_packets)),
                    (udp && !f.sender).then(|| f.errors.saturating_sub(f.omitted_errors)),
                    f.tcp.map(|t| t.retransmits),
                )
            })
            .collect();
        self.run_events
            .push_back(linerate_run::Event::End(Box::new(linerate_run::End {
                duration_s: finals.iter().map(|f| f.seconds).fold(0.0, f64::max),
                sums: linerate_run::sums(&rows),
                rows,
                outcome: std::sync::Arc::new(linerate_run::Written {
                    document: doc.clone(),
                    text: human.to_string(),
                    figure: Some(linerate_run::Figure {
                        name: "receiver bits_per_second",
                        unit: "receiver bit/s",
                        value: received_bps,
                    }),
                }),
                exit_code: u8::from(self.error.is_some()),
            })));
    }

    /// The end as the output mode writes it: JSON stream events, the
    /// JSON document, or the text (with the server's, if it sent it).
    fn render(&self, doc: &Value, human: String, peer: Option<&PeerResults>) -> String {
        if self.mode.json_stream {
            let mut out = String::new();
            if let Some(e) = &self.error {
                let _ = writeln!(out, "{}", json!({"event": "error", "data": e}));
            }
            if let Some(j) = peer.and_then(|p| p.server_output_json.as_ref()) {
                let _ = writeln!(out, "{}", json!({"event": "server_output_json", "data": j}));
            }
            if let Some(t) = peer.and_then(|p| p.server_output_text.as_ref()) {
                let _ = writeln!(out, "{}", json!({"event": "server_output_text", "data": t}));
            }
            let _ = writeln!(out, "{}", json!({"event": "end", "data": doc["end"]}));
            if self.mode.json_stream_full {
                out.push_str(&(serde_json::to_string_pretty(doc).unwrap_or_default() + "\n"));
            }
            out
        } else if self.mode.json {
            serde_json::to_string_pretty(doc).unwrap_or_default() + "\n"
        } else {
            let mut out = human;
            if let Some(t) = peer.and_then(|p| p.server_output_text.as_ref()) {
                out.push_str("\nServer output:\n");
                out.push_str(t);
            }
            out
        }
    }

    /// The `-J` document as it stands (for `--get-server-output` in JSON).
    pub fn document(&self) -> Value {
        json!({"start": self.start, "intervals": self.intervals})
    }
}

/// linerate's own section of the document: per stream, send errors,
/// exact UDP counts and the pacing measured, where there are.
fn linerate_json(finals: &[StreamFinal]) -> Value {
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "figures": "sender figures are what the kernel accepted; receiver figures are what arrived",
        "streams": finals.iter().map(|f| {
            let mut m = json!({"id": f.id, "sender": f.sender, "send_errors": f.send_errors});
            if let Some((dup, late, lost)) = f.exact {
                m["udp_exact"] = json!({"duplicates": dup, "late": late, "lost": lost});
            }
            if let Some(d) = f.departures {
                m["pacing"] = json!({
                    "measured_by": "sender, gaps between send calls",
                    "calls": d.calls, "units_per_call": d.units_per_call,
                    "target_gap_us": d.target_gap_us, "mean_gap_us": d.mean_gap_us,
                    "stddev_gap_us": d.stddev_gap_us, "min_gap_us": d.min_gap_us, "max_gap_us": d.max_gap_us,
                    "p50_gap_us": d.gap_percentiles_us[0], "p99_gap_us": d.gap_percentiles_us[1],
                    "p999_gap_us": d.gap_percentiles_us[2],
                });
            }
            m
        }).collect::<Vec<_>>(),
    })
}
