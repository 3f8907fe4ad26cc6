//! What a test prints: iperf3's human layout, its `-J` document (same keys,
//! types and units), and `--json-stream` events. Pure: figures in, text out.
//! linerate's own extra figures go under the top-level key `linerate`.

use crate::units;
use crate::{Params, PeerResults, Protocol, StreamResult, TestMode};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::net::SocketAddr;

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
    /// `-f`: fixed unit letter.
    pub format: Option<char>,
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
    pub streams: Vec<StreamDesc>,
}

/// TCP_INFO figures of a sending stream in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TcpSample {
    pub retransmits: u64,
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
    error: Option<String>,
    /// The same test as run-model events, for the shared reporters (CSV):
    /// taken with [`Report::poll_run_event`].
    run_events: std::collections::VecDeque<linerate_run::Event>,
}

/// A stream's row: who counted it follows from its direction.
fn stream_row(
    id: u32,
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
                "linerate {} (iperf 3.12 compatible)",
                env!("CARGO_PKG_VERSION")
            )),
        );
        start.insert("system_info".into(), json!(info.system_info));
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
        start.insert("sock_bufsize".into(), json!(p.window));
        start.insert("sndbuf_actual".into(), json!(info.sndbuf_actual));
        start.insert("rcvbuf_actual".into(), json!(info.rcvbuf_actual));
        start.insert(
            "test_start".into(),
            json!({
                "protocol": if p.protocol == Protocol::Tcp { "TCP" } else { "UDP" },
                "num_streams": p.parallel, "blksize": p.len, "omit": p.omit_s, "duration": p.time_s,
                "bytes": p.num_bytes, "blocks": p.block_count,
                "reverse": u8::from(p.mode == TestMode::Reverse), "tos": p.tos,
                "target_bitrate": p.bandwidth_bps, "bidir": u8::from(p.mode == TestMode::Bidir),
                "fqrate": p.fq_rate_bps, "interval": info.interval_s,
            }),
        );
        Self {
            info,
            mode,
            start: Value::Object(start),
            intervals: Vec::new(),
            text: String::new(),
            header_printed: false,
            error: None,
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
                doctor: None,
                host: linerate_run::Host::here(),
            })));
        if self.mode.json_stream {
            return format!("{}\n", json!({"event": "start", "data": self.start}));
        }
        let mut out = String::new();
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
        self.text.push_str(&out);
        if self.human() { out } else { String::new() }
    }

    fn rate(&self, bytes: u64, secs: f64, per_sec: bool) -> String {
        let v = if per_sec {
            if secs > 0.0 { bytes as f64 / secs } else { 0.0 }
        } else {
            bytes as f64
        };
        units::with_format(v, per_sec, self.mode.format)
    }

    fn interval_line(&self, tag: &str, s: &IntervalSample, with_cwnd: bool) -> String {
        let secs = s.end - s.start;
        let base = format!(
            "[{tag}] {:6.2}-{:<6.2} sec  {}  {}",
            s.start,
            s.end,
            self.rate(s.bytes, secs, false),
            self.rate(s.bytes, secs, true)
        );
        let omitted = if s.omitted { "  (omitted)" } else { "" };
        if let Some(rx) = &s.udp_rx {
            let pct = if rx.packets > 0 {
                100.0 * rx.lost as f64 / rx.packets as f64
            } else {
                0.0
            };
            format!(
                "{base}  {:5.3} ms  {}/{} ({:.2}%){omitted}\n",
                rx.jitter_ms, rx.lost, rx.packets, pct
            )
        } else if let Some(n) = s.udp_tx_packets {
            format!("{base}  {n}{omitted}\n")
        } else if let (Some(t), true) = (&s.tcp, with_cwnd) {
            format!(
                "{base}  {:3}   {}{omitted}\n",
                t.retransmits,
                units::bytes(t.snd_cwnd as f64)
            )
        } else {
            format!("{base}{omitted}\n")
        }
    }

    fn interval_json(s: &IntervalSample, with_socket: bool) -> Value {
        let secs = s.end - s.start;
        let mut m = Map::new();
        if with_socket {
            m.insert("socket".into(), json!(s.socket));
        }
        m.insert("start".into(), json!(round6(s.start)));
        m.insert("end".into(), json!(round6(s.end)));
        m.insert("seconds".into(), json!(round6(secs)));
        m.insert("bytes".into(), json!(s.bytes));
        m.insert(
            "bits_per_second".into(),
            json!(if secs > 0.0 {
                s.bytes as f64 * 8.0 / secs
            } else {
                0.0
            }),
        );
        if let Some(t) = &s.tcp {
            m.insert("retransmits".into(), json!(t.retransmits));
            if with_socket {
                m.insert("snd_cwnd".into(), json!(t.snd_cwnd));
                m.insert("snd_wnd".into(), json!(t.snd_wnd));
                m.insert("rtt".into(), json!(t.rtt_us));
                m.insert("rttvar".into(), json!(t.rttvar_us));
                m.insert("pmtu".into(), json!(t.pmtu));
            }
        }
        if let Some(n) = s.udp_tx_packets {
            m.insert("packets".into(), json!(n));
        }
        if let Some(rx) = &s.udp_rx {
            m.insert("jitter_ms".into(), json!(rx.jitter_ms));
            m.insert("lost_packets".into(), json!(rx.lost));
            m.insert("packets".into(), json!(rx.packets));
            let pct = if rx.packets > 0 {
                100.0 * rx.lost as f64 / rx.packets as f64
            } else {
                0.0
            };
            m.insert("lost_percent".into(), json!(pct));
        }
        m.insert("omitted".into(), json!(s.omitted));
        m.insert("sender".into(), json!(s.sender));
        Value::Object(m)
    }

    /// Sums streams of one direction (times from the first stream).
    fn sum(streams: &[&IntervalSample]) -> Option<IntervalSample> {
        let first = streams.first()?;
        let mut s = IntervalSample {
            id: 0,
            socket: 0,
            sender: first.sender,
            start: first.start,
            end: first.end,
            omitted: first.omitted,
            ..Default::default()
        };
        for x in streams {
            s.bytes += x.bytes;
            if let Some(t) = &x.tcp {
                s.tcp.get_or_insert_with(TcpSample::default).retransmits += t.retransmits;
            }
            if let Some(n) = x.udp_tx_packets {
                *s.udp_tx_packets.get_or_insert(0) += n;
            }
            if let Some(rx) = &x.udp_rx {
                let acc = s.udp_rx.get_or_insert_with(UdpRxSample::default);
                acc.lost += rx.lost;
                acc.packets += rx.packets;
                acc.jitter_ms += rx.jitter_ms / streams.len() as f64;
            }
        }
        Some(s)
    }

    /// Whether a stream carries data client → server.
    fn forward_dir(&self, s_sender: bool) -> bool {
        match self.info.role {
            Role::Client => s_sender,
            Role::Server => !s_sender,
        }
    }

    /// Records one interval; returns what to print now.
    pub fn interval(&mut self, samples: &[IntervalSample]) -> String {
        if let Some(first) = samples.first() {
            let rows: Vec<linerate_run::Row> = samples
                .iter()
                .map(|s| {
                    let packets = s.udp_tx_packets.or(s.udp_rx.map(|r| r.packets));
                    let mut r = stream_row(
                        s.id,
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
                    start_s: first.start,
                    end_s: first.end,
                    sums: linerate_run::sums(&rows),
                    rows,
                    omitted: first.omitted,
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
        for s in samples {
            out.push_str(&self.interval_line(&format!("{:3}", s.socket), s, true));
        }
        if samples.len() > 1 {
            for s in sum.iter().chain(sum_rev.iter()) {
                out.push_str(&self.interval_line("SUM", s, false));
            }
        }
        if samples.len() > 1 || bidir {
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

    fn header(&self, samples: &[IntervalSample]) -> String {
        let udp = self.info.params.protocol == Protocol::Udp;
        let any_rx = samples.iter().any(|s| !s.sender);
        let any_tx = samples.iter().any(|s| s.sender);
        match (udp, any_tx, any_rx) {
            (true, true, false) => "[ ID] Interval           Transfer     Bitrate         Total Datagrams\n".into(),
            (true, _, _) => "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n".into(),
            (false, true, _) if samples.iter().any(|s| s.tcp.is_some()) => {
                "[ ID] Interval           Transfer     Bitrate         Retr  Cwnd\n".into()
            }
            _ => "[ ID] Interval           Transfer     Bitrate\n".into(),
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
        extra: Option<(&str, Value)>,
    ) -> String {
        let end = self.end_json(finals, cpu, peer);
        let linerate = json!({
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
        });
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
        if let Some((k, v)) = extra {
            doc["linerate"][k] = v;
        }
        if let Some(e) = &self.error {
            doc["error"] = json!(e);
        }
        let human = self.end_text(finals, peer);
        self.text.push_str(&human);
        if let Some(e) = &self.error {
            self.run_events
                .push_back(linerate_run::Event::Error(e.clone()));
        }
        let rows: Vec<linerate_run::Row> = finals
            .iter()
            .map(|f| {
                let udp = self.info.params.protocol == Protocol::Udp;
                stream_row(
                    f.id,
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
                result: doc.clone(),
                text: human.clone(),
                exit_code: u8::from(self.error.is_some()),
            })));
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
            out
        } else if self.mode.json {
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
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

    fn end_json(&self, finals: &[StreamFinal], cpu: Cpu, peer: Option<&PeerResults>) -> Value {
        let p = &self.info.params;
        let udp = p.protocol == Protocol::Udp;
        let omitted = |x: u64, o: u64| x.saturating_sub(o);
        let mut streams = Vec::new();
        #[derive(Default, Clone, Copy)]
        struct Acc {
            sent: u64,
            recv: u64,
            sent_s: f64,
            recv_s: f64,
            retrans: Option<u64>,
            packets: u64,
            lost: u64,
            jitter: f64,
            n: usize,
            ooo: u64,
        }
        let mut fwd = Acc::default();
        let mut rev = Acc::default();
        for f in finals {
            let pr = peer.and_then(|r| r.stream(f.id));
            let (sent, sent_s, recv, recv_s) = if f.sender {
                (
                    f.bytes,
                    f.seconds,
                    pr.map_or(0, |r| r.bytes),
                    pr.map_or(0.0, |r| r.end_time - r.start_time),
                )
            } else {
                (
                    pr.map_or(0, |r| r.bytes),
                    pr.map_or(0.0, |r| r.end_time - r.start_time),
                    f.bytes,
                    f.seconds,
                )
            };
            let bps = |b: u64, s: f64| if s > 0.0 { b as f64 * 8.0 / s } else { 0.0 };
            let acc = if self.forward_dir(f.sender) {
                &mut fwd
            } else {
                &mut rev
            };
            acc.sent += sent;
            acc.recv += recv;
            acc.sent_s = acc.sent_s.max(sent_s);
            acc.recv_s = acc.recv_s.max(recv_s);
            acc.n += 1;
            if udp {
                // Sender's count of datagrams if known, receiver's loss/jitter.
                let (packets, o_packets, lost, jitter_s, ooo) = if f.sender {
                    let r = pr.cloned().unwrap_or_default();
                    (
                        f.packets,
                        f.omitted_packets,
                        omitted(r.errors, r.omitted_errors),
                        r.jitter_s,
                        0,
                    )
                } else {
                    let (pk, opk) = pr.map_or((f.packets, f.omitted_packets), |r| {
                        (r.packets, r.omitted_packets)
                    });
                    (
                        pk,
                        opk,
                        omitted(f.errors, f.omitted_errors),
                        f.jitter_s,
                        f.out_of_order,
                    )
                };
                let packets = omitted(packets, o_packets);
                acc.packets += packets;
                acc.lost += lost;
                acc.jitter += jitter_s * 1000.0;
                acc.ooo += ooo;
                let pct = if packets > 0 {
                    100.0 * lost as f64 / packets as f64
                } else {
                    0.0
                };
                streams.push(json!({"udp": {
                    "socket": f.socket, "start": 0, "end": round6(sent_s), "seconds": round6(sent_s),
                    "bytes": sent, "bits_per_second": bps(sent, sent_s), "jitter_ms": jitter_s * 1000.0,
                    "lost_packets": lost, "packets": packets, "lost_percent": pct,
                    "out_of_order": ooo, "sender": f.sender,
                }}));
            } else {
                let mut sender = json!({"socket": f.socket, "start": 0, "end": round6(sent_s),
                    "seconds": round6(sent_s), "bytes": sent, "bits_per_second": bps(sent, sent_s)});
                let retrans = if f.sender {
                    f.tcp.map(|t| t.retransmits)
                } else {
                    pr.and_then(|r| u64::try_from(r.retransmits).ok())
                };
                if let Some(r) = retrans {
                    sender["retransmits"] = json!(r);
                    *acc.retrans.get_or_insert(0) += r;
                }
                if let (true, Some(t)) = (f.sender, &f.tcp) {
                    sender["max_snd_cwnd"] = json!(t.max_snd_cwnd);
                    sender["max_snd_wnd"] = json!(t.max_snd_wnd);
                    sender["max_rtt"] = json!(t.max_rtt);
                    sender["min_rtt"] = json!(t.min_rtt);
                    sender["mean_rtt"] = json!(t.mean_rtt);
                }
                sender["sender"] = json!(f.sender);
                streams.push(json!({
                    "sender": sender,
                    "receiver": {"socket": f.socket, "start": 0, "end": round6(recv_s), "seconds": round6(f.seconds),
                                 "bytes": recv, "bits_per_second": bps(recv, recv_s), "sender": f.sender},
                }));
            }
        }
        let mut end = Map::new();
        end.insert("streams".into(), json!(streams));
        let this_sends_fwd = self.info.role == Role::Client;
        let sums = |a: &Acc, sends: bool| -> (Value, Value, Value) {
            let bps = |b: u64, s: f64| if s > 0.0 { b as f64 * 8.0 / s } else { 0.0 };
            let mut sent = json!({"start": 0, "end": round6(a.sent_s), "seconds": round6(a.sent_s),
                                  "bytes": a.sent, "bits_per_second": bps(a.sent, a.sent_s)});
            let mut recv = json!({"start": 0, "end": round6(a.recv_s), "seconds": round6(a.recv_s),
                                  "bytes": a.recv, "bits_per_second": bps(a.recv, a.recv_s)});
            let jitter = if a.n > 0 { a.jitter / a.n as f64 } else { 0.0 };
            let pct = if a.packets > 0 {
                100.0 * a.lost as f64 / a.packets as f64
            } else {
                0.0
            };
            let mut legacy = sent.clone();
            if udp {
                for (v, j, l, pc) in [
                    (&mut sent, 0.0, 0, 0.0),
                    (&mut recv, jitter, a.lost, pct),
                    (&mut legacy, jitter, a.lost, pct),
                ] {
                    v["jitter_ms"] = json!(j);
                    v["lost_packets"] = json!(l);
                    v["packets"] = json!(a.packets);
                    v["lost_percent"] = json!(pc);
                }
                sent["sender"] = json!(true);
                recv["sender"] = json!(false);
                legacy["sender"] = json!(sends);
            } else {
                if let Some(r) = a.retrans {
                    sent["retransmits"] = json!(r);
                }
                sent["sender"] = json!(sends);
                recv["sender"] = json!(sends);
            }
            (sent, recv, legacy)
        };
        if fwd.n > 0 || rev.n == 0 {
            let (s, r, l) = sums(&fwd, this_sends_fwd);
            if udp {
                end.insert("sum".into(), l);
            }
            end.insert("sum_sent".into(), s);
            end.insert("sum_received".into(), r);
        }
        if rev.n > 0 {
            let (s, r, l) = sums(&rev, !this_sends_fwd);
            let suffix = if p.mode == TestMode::Bidir {
                "_bidir_reverse"
            } else {
                ""
            };
            if udp {
                end.insert(format!("sum{suffix}"), l);
            }
            end.insert(format!("sum_sent{suffix}"), s);
            end.insert(format!("sum_received{suffix}"), r);
        }
        let remote = peer.map_or(Cpu::default(), |r| Cpu {
            total: r.cpu_util_total,
            user: r.cpu_util_user,
            system: r.cpu_util_system,
        });
        end.insert(
            "cpu_utilization_percent".into(),
            json!({"host_total": cpu.total, "host_user": cpu.user, "host_system": cpu.system,
                   "remote_total": remote.total, "remote_user": remote.user, "remote_system": remote.system}),
        );
        if !udp {
            let local = finals.iter().find_map(|f| f.congestion.clone());
            let remote = peer.and_then(|r| r.congestion_used.clone());
            let (snd, rcv) = if finals.iter().any(|f| f.sender) {
                (local, remote)
            } else {
                (remote, local)
            };
            if let Some(c) = snd {
                end.insert("sender_tcp_congestion".into(), json!(c));
            }
            if let Some(c) = rcv {
                end.insert("receiver_tcp_congestion".into(), json!(c));
            }
        }
        Value::Object(end)
    }

    fn end_text(&self, finals: &[StreamFinal], peer: Option<&PeerResults>) -> String {
        let udp = self.info.params.protocol == Protocol::Udp;
        let mut out = String::from("- - - - - - - - - - - - - - - - - - - - - - - - -\n");
        out.push_str(if udp {
            "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
        } else if finals.iter().any(|f| f.sender && f.tcp.is_some()) {
            "[ ID] Interval           Transfer     Bitrate         Retr\n"
        } else {
            "[ ID] Interval           Transfer     Bitrate\n"
        });
        let line = |tag: String, secs: f64, bytes: u64, tail: String| {
            format!(
                "[{tag}]   0.00-{:<6.2} sec  {}  {}{tail}\n",
                secs,
                self.rate(bytes, secs, false),
                self.rate(bytes, secs, true)
            )
        };
        for f in finals {
            let pr = peer.and_then(|r| r.stream(f.id));
            let tag = format!("{:3}", f.socket);
            let peer_bytes = pr.map(|r| r.bytes);
            let peer_secs = pr.map_or(f.seconds, |r| r.end_time - r.start_time);
            if udp {
                let (lost, packets, jitter) = if f.sender {
                    let r = pr.cloned().unwrap_or_default();
                    (
                        r.errors.saturating_sub(r.omitted_errors),
                        f.packets - f.omitted_packets,
                        r.jitter_s,
                    )
                } else {
                    let pk = pr.map_or(f.packets - f.omitted_packets, |r| {
                        r.packets.saturating_sub(r.omitted_packets)
                    });
                    (f.errors.saturating_sub(f.omitted_errors), pk, f.jitter_s)
                };
                let pct = if packets > 0 {
                    100.0 * lost as f64 / packets as f64
                } else {
                    0.0
                };
                let tail = |who: &str| {
                    format!(
                        "  {:5.3} ms  {lost}/{packets} ({pct:.2}%)  {who}",
                        jitter * 1000.0
                    )
                };
                let (sb, ss, rb, rs) = if f.sender {
                    (f.bytes, f.seconds, peer_bytes.unwrap_or(0), peer_secs)
                } else {
                    (peer_bytes.unwrap_or(0), peer_secs, f.bytes, f.seconds)
                };
                out.push_str(&line(
                    tag.clone(),
                    ss,
                    sb,
                    format!("  {:5.3} ms  0/{packets} (0%)  sender", 0.0),
                ));
                out.push_str(&line(tag, rs, rb, tail("receiver")));
            } else {
                let (sb, ss, rb, rs) = if f.sender {
                    (f.bytes, f.seconds, peer_bytes.unwrap_or(0), peer_secs)
                } else {
                    (peer_bytes.unwrap_or(0), peer_secs, f.bytes, f.seconds)
                };
                let retr = if f.sender {
                    f.tcp
                        .map(|t| format!("  {:3}", t.retransmits))
                        .unwrap_or_default()
                } else {
                    pr.and_then(|r| u64::try_from(r.retransmits).ok())
                        .map(|r| format!("  {r:3}"))
                        .unwrap_or_default()
                };
                out.push_str(&line(
                    tag.clone(),
                    ss,
                    sb,
                    format!("{retr}             sender"),
                ));
                if peer.is_some() || !f.sender {
                    out.push_str(&line(tag, rs, rb, "                  receiver".into()));
                }
            }
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "linerate: error: {e}");
        }
        out
    }
}

/// RFC 1123 date in GMT, as iperf3 prints `start.timestamp.time`.
pub fn http_date(secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = secs / 86400;
    let rem = secs % 86400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_795_310_454), "Sun, 22 Nov 2026 01:20:54 GMT");
    }
}
