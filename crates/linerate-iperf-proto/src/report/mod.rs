//! What a test prints: iperf3's human layout, its `-J` document (same keys,
//! types and units), and `--json-stream` events. Pure: figures in, text out.
//! linerate's own extra figures go under the top-level key `linerate`.

use crate::units;
use crate::{Params, PeerResults, Protocol, StreamResult, TestMode};
use serde_json::Value;
use std::fmt::Write as _;

mod date;
pub mod doc;
mod figures;
mod text;

pub use date::http_date;
use doc::{EndDoc, EndInput, IntervalDoc, IntervalSet, LinerateDoc, StartDoc, StreamEvent};
pub use doc::{Extra, IperfOutcome, Mptcp};
pub use figures::*;

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
    start: StartDoc,
    intervals: Vec<IntervalSet>,
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

/// iperf3's `test_start` object: the test as the parameters set it (also
/// the run model's start configuration of the client and server).
pub fn test_start(p: &Params, interval_s: f64, gso: bool, gro: bool) -> Value {
    serde_json::to_value(doc::TestStart::new(p, interval_s, gso, gro)).unwrap_or(Value::Null)
}

impl Report {
    pub fn new(info: StartInfo, mode: OutputMode) -> Self {
        let start = StartDoc::new(&info);
        Self {
            info,
            mode,
            start,
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
                config: serde_json::to_value(&self.start.test_start).unwrap_or(Value::Null),
                planned_s: (self.info.params.time_s > 0)
                    .then(|| f64::from(self.info.params.time_s)),
                doctor: None,
                host: self.info.host.clone(),
            })));
        if self.mode.json_stream {
            return StreamEvent::new("start", &self.start).line();
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
            (IntervalSample::sum(&fwd), IntervalSample::sum(&rev))
        } else {
            (
                IntervalSample::sum(&samples.iter().collect::<Vec<_>>()),
                None,
            )
        };
        let v = IntervalSet {
            streams: samples.iter().map(|s| IntervalDoc::new(s, true)).collect(),
            sum: sum.as_ref().map_or(doc::Sum::Empty {}, |s| {
                doc::Sum::Of(IntervalDoc::new(s, false))
            }),
            sum_bidir_reverse: sum_rev.as_ref().map(|r| IntervalDoc::new(r, false)),
        };
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
                    && let Some(sum) = IntervalSample::sum(&group)
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
            StreamEvent::new("interval", &v).line()
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
        extra: Extra,
    ) -> String {
        let (end, received_bps) = EndDoc::new(
            finals,
            &EndInput {
                role: self.info.role,
                params: &self.info.params,
                cpu,
                peer,
                diskfile: self.diskfile.as_ref(),
            },
        );
        let human = self.end_text(finals, peer, cpu);
        self.text.push_str(&human);
        let outcome = IperfOutcome {
            start: self.start.clone(),
            intervals: self.intervals.clone(),
            end,
            title: self.info.params.title.clone(),
            extra_data: self.info.params.extra_data.clone(),
            server_output_text: peer.and_then(|p| p.server_output_text.clone()),
            server_output_json: peer.and_then(|p| p.server_output_json.clone()),
            linerate: LinerateDoc::new(finals, extra),
            error: self.error.clone(),
            text: human,
            received_bps,
        };
        if let Some(e) = &self.error {
            self.run_events
                .push_back(linerate_run::Event::Error(e.clone()));
        }
        let printed = self.render(&outcome);
        self.push_end(finals, outcome);
        printed
    }

    /// The run model's end event: a row per stream and the outcome (the
    /// document, the text, the received rate as the figure).
    fn push_end(&mut self, finals: &[StreamFinal], outcome: IperfOutcome) {
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
                outcome: std::sync::Arc::new(outcome),
                exit_code: u8::from(self.error.is_some()),
            })));
    }

    /// The end as the output mode writes it: JSON stream events, the
    /// JSON document, or the text (with the server's, if it sent it).
    fn render(&self, o: &IperfOutcome) -> String {
        let pretty = || serde_json::to_string_pretty(o).unwrap_or_default() + "\n";
        if self.mode.json_stream {
            let mut out = String::new();
            if let Some(e) = &o.error {
                out.push_str(&StreamEvent::new("error", e).line());
            }
            if let Some(j) = &o.server_output_json {
                out.push_str(&StreamEvent::new("server_output_json", j).line());
            }
            if let Some(t) = &o.server_output_text {
                out.push_str(&StreamEvent::new("server_output_text", t).line());
            }
            out.push_str(&StreamEvent::new("end", &o.end).line());
            if self.mode.json_stream_full {
                out.push_str(&pretty());
            }
            out
        } else if self.mode.json {
            pretty()
        } else {
            let mut out = o.text.clone();
            if let Some(t) = &o.server_output_text {
                out.push_str("\nServer output:\n");
                out.push_str(t);
            }
            out
        }
    }

    /// The `-J` document as it stands (for `--get-server-output` in JSON).
    pub fn document(&self) -> doc::Partial<'_> {
        doc::Partial {
            start: &self.start,
            intervals: &self.intervals,
        }
    }
}
