//! Reporters: written once, fed by any mode's events.
//!
//! - [`Text`]: interval lines while the run goes on, then the mode's own
//!   summary (its outcome's text).
//! - [`Document`]: the mode's final JSON document (`-J`).
//! - [`JsonLines`]: one `{"event": …, "data": …}` object per event
//!   (`--json-stream`), flushed as each is written.
//! - [`Csv`]: a header, one row per interval per stream/flow/worker and per
//!   sum, then the totals (`--csv`).

use linerate_run::report::{format_bytes, format_rate};
use linerate_run::{Event, Host, Mode, Reporter, Row};
use std::io::{self, Write};

/// `--json-stream`: one JSON object per line per event.
#[derive(Debug)]
pub struct JsonLines<W: Write + Send>(pub W);

impl<W: Write + Send> Reporter for JsonLines<W> {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        // iperf3's key order: the event's name first.
        let data = match ev.json() {
            serde_json::Value::Object(mut m) => m.remove("data").unwrap_or_default(),
            _ => serde_json::Value::Null,
        };
        write!(self.0, "{{\"event\":\"{}\",\"data\":", ev.name())?;
        serde_json::to_writer(&mut self.0, &data)?;
        self.0.write_all(b"}\n")?;
        self.0.flush()
    }
}

/// `-J`: the final document, pretty-printed, once the run has ended. A
/// native mode's document ends with the host it ran on (`host`: the
/// command, host name, kernel, CPUs, linerate's version, the start time),
/// from the run's start; an iperf3 mode's is iperf3's, key for key (its
/// `start.system_info` says the host).
#[derive(Debug)]
pub struct Document<W: Write + Send> {
    w: W,
    host: Option<Host>,
}

impl<W: Write + Send> Document<W> {
    pub fn new(w: W) -> Self {
        Document { w, host: None }
    }
}

/// A native mode's document with its host after the mode's own keys.
#[derive(serde::Serialize)]
struct WithHost<'a> {
    #[serde(flatten)]
    result: &'a serde_json::Map<String, serde_json::Value>,
    host: &'a Host,
}

impl<W: Write + Send> Reporter for Document<W> {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        match ev {
            Event::Start(s) if !matches!(s.mode, Mode::Client | Mode::Server) => {
                self.host = Some(s.host.clone());
            }
            Event::End(e) => {
                let doc = e.outcome.document();
                match (&doc, &self.host) {
                    (serde_json::Value::Object(m), Some(host)) if !m.contains_key("host") => {
                        let with = WithHost { result: m, host };
                        serde_json::to_writer_pretty(&mut self.w, &with)?;
                    }
                    _ => serde_json::to_writer_pretty(&mut self.w, &doc)?,
                }
                self.w.write_all(b"\n")?;
                self.w.flush()?;
            }
            _ => {}
        }
        Ok(())
    }
}

/// The CSV columns, in order.
pub const CSV_COLUMNS: [&str; 22] = [
    "run",
    "mode",
    "event",
    "start_s",
    "end_s",
    "scope",
    "id",
    "role",
    "counted_by",
    "bytes",
    "packets",
    "bits_per_second",
    "packets_per_second",
    "lost",
    "reordered",
    "duplicates",
    "errors",
    "retransmits",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_max_ns",
    "jitter_ms",
];

/// `--csv`: a header, then one row per row of every interval (sums too),
/// then the totals as `end` rows. Figures a mode does not count are empty.
pub struct Csv<W: Write + Send> {
    w: csv::Writer<W>,
    header: bool,
    run: u64,
    mode: &'static str,
}

impl<W: Write + Send> std::fmt::Debug for Csv<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Csv(run {})", self.run)
    }
}

impl<W: Write + Send> Csv<W> {
    pub fn new(w: W) -> Self {
        Csv {
            w: csv::Writer::from_writer(w),
            header: false,
            run: 0,
            mode: "",
        }
    }

    fn row(&mut self, event: &str, span: (f64, f64), r: &Row) -> io::Result<()> {
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        let f = |v: Option<f64>| v.map(|v| format!("{v:.3}")).unwrap_or_default();
        let (bps, pps) = r.rates(span.1 - span.0);
        let c = &r.counts;
        let g = &r.gauges;
        let rec = [
            self.run.to_string(),
            self.mode.to_string(),
            event.to_string(),
            format!("{:.6}", span.0),
            format!("{:.6}", span.1),
            r.scope.name().to_string(),
            r.id.clone(),
            r.role.clone(),
            r.counted_by.name().to_string(),
            opt(c.bytes),
            opt(c.packets),
            f(bps),
            f(pps),
            opt(c.lost),
            opt(c.reordered),
            opt(c.duplicates),
            opt(c.errors),
            opt(c.retransmits),
            opt(g.latency_p50_ns),
            opt(g.latency_p99_ns),
            opt(g.latency_max_ns),
            f(g.jitter_ms),
        ];
        self.w.write_record(&rec).map_err(io::Error::other)
    }
}

impl<W: Write + Send> Reporter for Csv<W> {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        if !self.header {
            self.w.write_record(CSV_COLUMNS).map_err(io::Error::other)?;
            self.header = true;
        }
        match ev {
            Event::Start(s) => {
                self.run += 1;
                self.mode = s.mode.name();
            }
            Event::Interval(iv) => {
                let span = (iv.start_s, iv.end_s);
                let event = if iv.omitted { "omitted" } else { "interval" };
                for r in iv.rows.iter().chain(&iv.sums) {
                    self.row(event, span, r)?;
                }
            }
            Event::Error(msg) => {
                let mut r = Row::new(
                    linerate_run::Scope::Sum,
                    msg.clone(),
                    "",
                    linerate_run::CountedBy::Sender,
                );
                r.role.clear();
                self.row("error", (0.0, 0.0), &r)?;
            }
            Event::End(e) => {
                for r in e.rows.iter().chain(&e.sums) {
                    self.row("end", (0.0, e.duration_s), r)?;
                }
            }
        }
        self.w.flush()
    }
}

/// Human text: interval lines as they come (one per row when a role has
/// several, up to [`Text::MAX_ROWS`], and the sums), then the mode's
/// summary.
#[derive(Debug)]
pub struct Text<W: Write + Send> {
    w: W,
    header: bool,
    said_many: bool,
    echo_errors: bool,
    intervals: bool,
}

impl<W: Write + Send> Text<W> {
    /// Most rows of one role printed per interval; above it only their sum
    /// (CSV and JSON lines carry them all).
    pub const MAX_ROWS: usize = 8;

    pub fn new(w: W) -> Self {
        Text {
            w,
            header: false,
            said_many: false,
            echo_errors: true,
            intervals: true,
        }
    }

    /// Whether interval rows are printed (off with `-i 0`: no intervals
    /// asked, the run's one closing interval is the summary's business).
    pub fn intervals(mut self, yes: bool) -> Self {
        self.intervals = yes;
        self
    }

    /// Whether the run's error is written here too (on by default, so a
    /// saved text report says why it stopped); off when this stream and
    /// stderr are one terminal, which shows the error once.
    pub fn echo_errors(mut self, yes: bool) -> Self {
        self.echo_errors = yes;
        self
    }

    fn line(&mut self, span: (f64, f64), r: &Row) -> io::Result<()> {
        let id = match r.scope {
            linerate_run::Scope::Sum => "[SUM]".to_string(),
            _ => format!("[{:>3}]", r.id),
        };
        let (bps, pps) = r.rates(span.1 - span.0);
        let mut s = format!("{id} {:>7.2}-{:<7.2} sec  {:<9}", span.0, span.1, r.role);
        if let Some(p) = r.counts.packets {
            s += &format!(
                " {p:>11} pkts {:>12}",
                format_rate(pps.unwrap_or(0.0), "pps")
            );
        }
        if let Some(b) = r.counts.bytes {
            s += &format!(
                " {:>12} {:>14}",
                format_bytes(b),
                format_rate(bps.unwrap_or(0.0), "bit/s")
            );
        }
        let c = &r.counts;
        for (name, v) in [
            ("lost", c.lost),
            ("reordered", c.reordered),
            ("dup", c.duplicates),
            ("errors", c.errors),
            ("retr", c.retransmits),
        ] {
            if let Some(v) = v {
                s += &format!("  {name} {v}");
            }
        }
        if let (Some(p50), Some(p99)) = (r.gauges.latency_p50_ns, r.gauges.latency_p99_ns) {
            s += &format!(
                "  latency p50 {:.1} us p99 {:.1} us",
                p50 as f64 / 1e3,
                p99 as f64 / 1e3
            );
        }
        writeln!(self.w, "{s}  ({})", r.counted_by.name())
    }
}

impl<W: Write + Send> Reporter for Text<W> {
    fn report(&mut self, ev: &Event) -> io::Result<()> {
        match ev {
            Event::Start(_) => self.header = false,
            Event::Interval(_) if !self.intervals => {}
            Event::Interval(iv) => {
                if !self.header {
                    writeln!(
                        self.w,
                        "[ ID]  Interval          Role       figures of the interval (counted by)"
                    )?;
                    self.header = true;
                }
                let span = (iv.start_s, iv.end_s);
                for sum in &iv.sums {
                    let rows: Vec<&Row> = iv.rows.iter().filter(|r| r.role == sum.role).collect();
                    if rows.len() > Self::MAX_ROWS {
                        if !self.said_many {
                            writeln!(
                                self.w,
                                "      ({} {} rows per interval: their sum here, each row in --csv / --json-stream)",
                                rows.len(),
                                sum.role
                            )?;
                            self.said_many = true;
                        }
                    } else if rows.len() > 1 {
                        for r in rows {
                            self.line(span, r)?;
                        }
                    }
                    self.line(span, sum)?;
                }
            }
            Event::Error(e) => {
                // The error goes to stderr from the binary; keep the text
                // stream readable on its own too.
                if self.echo_errors {
                    writeln!(self.w, "error: {e}")?;
                }
            }
            Event::End(e) => {
                if self.header {
                    writeln!(self.w, "- - - - - - - - - - - - - - - - - - - - - - - - -")?;
                }
                self.w.write_all(e.outcome.text().as_bytes())?;
            }
        }
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_run::{CountedBy, Counts, End, Host, Interval, Mode, Scope, Start, sums};
    use serde_json::json;

    fn events() -> Vec<Event> {
        let rows = |a: u64, b: u64| {
            vec![
                Row::new(Scope::Flow, "1", "rx", CountedBy::Receiver).with_counts(Counts {
                    packets: Some(a),
                    bytes: Some(a * 64),
                    lost: Some(0),
                    ..Counts::default()
                }),
                Row::new(Scope::Flow, "2,x", "rx", CountedBy::Receiver).with_counts(Counts {
                    packets: Some(b),
                    bytes: Some(b * 64),
                    lost: Some(1),
                    ..Counts::default()
                }),
            ]
        };
        let iv = |s, e, r: Vec<Row>| Event::Interval(Interval::new(s, e, r));
        let total = rows(30, 12);
        vec![
            Event::Start(Box::new(Start {
                mode: Mode::Sink,
                config: json!({"iface": "x"}),
                planned_s: None,
                doctor: None,
                host: Host::here(),
            })),
            iv(0.0, 1.0, rows(10, 5)),
            iv(1.0, 2.0, rows(20, 7)),
            Event::End(Box::new(End {
                duration_s: 2.0,
                sums: sums(&total),
                rows: total,
                outcome: std::sync::Arc::new(linerate_run::Written {
                    document: json!({"packets": 42}),
                    text: "received 42\n".into(),
                    figure: None,
                }),
                exit_code: 0,
            })),
        ]
    }

    fn run(r: &mut dyn Reporter) {
        for e in events() {
            r.report(&e).unwrap();
        }
    }

    #[test]
    fn a_native_document_ends_with_its_host_and_an_iperf3_one_has_none() {
        let mut d = Document::new(Vec::new());
        run(&mut d);
        let text = String::from_utf8(d.w.clone()).unwrap();
        let at = |k: &str| text.find(&format!("\n  \"{k}\":")).unwrap();
        assert!(
            at("packets") < at("host"),
            "the host after the mode's keys: {text}"
        );
        let v: serde_json::Value = serde_json::from_slice(&d.w).unwrap();
        assert_eq!(v.as_object().unwrap().len(), 2);
        assert_eq!(v["packets"], 42);
        let here = Host::here();
        assert_eq!(v["host"]["kernel"], here.kernel.as_str());
        assert_eq!(v["host"]["cpus"], here.cpus);
        assert_eq!(v["host"]["command"], json!(here.command));
        // An iperf3 client's document is iperf3's: no key of linerate's.
        let mut d = Document::new(Vec::new());
        for mut e in events() {
            if let Event::Start(s) = &mut e {
                s.mode = Mode::Client;
            }
            d.report(&e).unwrap();
        }
        let v: serde_json::Value = serde_json::from_slice(&d.w).unwrap();
        assert_eq!(v, json!({"packets": 42}));
    }

    #[test]
    fn csv_has_a_header_a_row_per_row_and_quotes_what_needs_it() {
        let mut c = Csv::new(Vec::new());
        run(&mut c);
        let out = String::from_utf8(c.w.into_inner().unwrap()).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], CSV_COLUMNS.join(","));
        // 2 intervals x (2 flows + 1 sum) + end (2 flows + 1 sum)
        assert_eq!(lines.len(), 1 + 9);
        assert!(lines[1].starts_with(
            "1,sink,interval,0.000000,1.000000,flow,1,rx,receiver,640,10,5120.000,10.000,0,"
        ));
        assert!(lines[2].contains(",\"2,x\","));
        assert!(lines[3].contains(",sum,sum,rx,receiver,960,15,"));
        assert!(lines[9].starts_with("1,sink,end,0.000000,2.000000,sum,sum,rx,receiver,2688,42,"));
    }

    #[test]
    fn json_lines_are_one_event_each() {
        let mut j = JsonLines(Vec::new());
        run(&mut j);
        let out = String::from_utf8(j.0).unwrap();
        let evs: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(out.starts_with("{\"event\":\"start\",\"data\":{"));
        let names: Vec<&str> = evs.iter().map(|e| e["event"].as_str().unwrap()).collect();
        assert_eq!(names, ["start", "interval", "interval", "end"]);
        assert_eq!(evs[1]["data"]["sums"][0]["packets"], 15);
        assert_eq!(evs[3]["data"]["result"]["packets"], 42);
    }

    #[test]
    fn text_prints_rows_sums_and_the_summary() {
        let mut t = Text::new(Vec::new());
        run(&mut t);
        let out = String::from_utf8(t.w).unwrap();
        assert_eq!(out.lines().filter(|l| l.starts_with("[SUM]")).count(), 2);
        assert!(out.contains("[  1]    0.00-1.00    sec  rx"));
        assert!(out.contains("lost 1"));
        assert!(out.ends_with("received 42\n"));
    }

    /// Issue 43 item 8: `-i 0` (no intervals) prints no interval row,
    /// only the summary.
    #[test]
    fn text_without_intervals_prints_the_summary_only() {
        let mut t = Text::new(Vec::new()).intervals(false);
        run(&mut t);
        let out = String::from_utf8(t.w).unwrap();
        assert_eq!(out, "received 42\n");
    }

    #[test]
    fn text_shows_only_the_sum_of_many_rows_and_says_so_once() {
        let rows: Vec<Row> = (0..10)
            .map(|i| {
                Row::new(Scope::Flow, i.to_string(), "rx", CountedBy::Receiver).with_counts(
                    Counts {
                        packets: Some(1),
                        ..Counts::default()
                    },
                )
            })
            .collect();
        let mut t = Text::new(Vec::new());
        for k in 0..2 {
            let iv = Interval::new(f64::from(k), f64::from(k + 1), rows.clone());
            t.report(&Event::Interval(iv)).unwrap();
        }
        let out = String::from_utf8(t.w).unwrap();
        assert_eq!(out.matches("10 rx rows per interval").count(), 1, "{out}");
        assert_eq!(out.lines().filter(|l| l.starts_with("[SUM]")).count(), 2);
        assert!(!out.contains("[  3]"), "{out}");
        assert!(out.contains("10 pkts"), "{out}");
    }

    #[test]
    fn units() {
        assert_eq!(format_bytes(1536), "1.50 KBytes");
        assert_eq!(format_bytes(12), "12 Bytes");
        assert_eq!(format_rate(1.5e6, "pps"), "1.500 Mpps");
    }
}
