//! One result's section of a report: what ran, the summary with each
//! figure's source, the plots, the latency percentiles, the per-flow or
//! per-stream table, a repetition's runs, and what the reader had to say.

use crate::figures::{self, Figure};
use crate::html::{Cell, esc, facts, figure, table};
use crate::input::{Doc, Loaded, RunRow};
use linerate_plot::Figure as Plot;
use serde_json::Value;

/// The report's section for `l` (its `id` makes anchors unique).
pub fn section(l: &Loaded, id: usize) -> String {
    let mut s = format!(
        "<section class=\"result\" id=\"result-{id}\"><h2>{} — {}</h2>\n",
        esc(&l.mode()),
        esc(&l.path)
    );
    s += &what_ran(l);
    for n in &l.notes {
        s += &format!("<p class=\"note\">{}</p>\n", esc(n));
    }
    if let Some(e) = &l.error {
        s += &format!(
            "<p class=\"note\">The run reported an error: {} (what it measured before is below)</p>\n",
            esc(e)
        );
    }
    if zero_packets(l) {
        s += "<p class=\"note\">Nothing was counted: the result has zero packets.</p>\n";
    }
    match &l.doc {
        Some(Doc::Rfc2544(d)) => s += &crate::rfc2544::section(d, &l.text),
        Some(Doc::Repeat { runs, summary }) => {
            s += &crate::repeat::section(runs, summary, &l.text);
        }
        _ => {
            s += &summary(l);
            s += &plots(&l.text);
            s += &percentiles(l);
            s += &rows_table(l);
        }
    }
    s + "</section>\n"
}

/// Whether the run counted no packets at all.
fn zero_packets(l: &Loaded) -> bool {
    match &l.doc {
        Some(Doc::Sink(d)) => d.packets == 0,
        Some(Doc::Blast(d)) => d.packets == 0,
        Some(Doc::Fwd(d)) => d.counts.rx == 0,
        Some(Doc::Iperf(d)) => d.end.sum_received.as_ref().is_some_and(|s| s.bytes == 0),
        _ => false,
    }
}

/// A command line as a shell would take it back: a word with anything
/// but letters, digits and `-_./:=,+@%` in single quotes.
fn shell_words(words: &[String]) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c);
    words
        .iter()
        .map(|w| {
            if !w.is_empty() && w.chars().all(plain) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Command, mode, host, kernel, backend, settings and the doctor's findings.
fn what_ran(l: &Loaded) -> String {
    let mut items: Vec<(&str, String)> = vec![("mode", l.mode()), ("file", l.path.clone())];
    if let Some(h) = l.host.as_ref() {
        if !h.command.is_empty() {
            items.push(("command", shell_words(&h.command)));
        }
        items.push(("host", h.hostname.clone()));
        items.push(("kernel", h.kernel.clone()));
        items.push(("CPUs", h.cpus.to_string()));
        items.push(("linerate", h.linerate.clone()));
        items.push(("started (Unix time)", format!("{:.0}", h.timestamp)));
    }
    match &l.doc {
        Some(Doc::Iperf(d)) => {
            items.push(("iperf3 version", d.start.version.clone()));
            items.push(("system", d.start.system_info.clone()));
            let t = &d.start.test_start;
            items.push((
                "test",
                format!(
                    "{} {} stream(s), {} s{}{}",
                    t.protocol,
                    t.num_streams,
                    t.duration,
                    if t.reverse == 1 { ", reverse" } else { "" },
                    if t.bidir == 1 { ", bidirectional" } else { "" }
                ),
            ));
        }
        Some(Doc::Blast(d)) => {
            items.push(("backend", d.backend.clone()));
            items.push(("flows", d.flows.to_string()));
            items.push(("workers (placement)", compact(&d.workers)));
        }
        Some(Doc::Sink(d)) => {
            items.push(("backend", d.backend.clone()));
            items.push(("latency clock", d.latency_clock.clone()));
        }
        Some(Doc::Fwd(d)) => {
            items.push(("fwd mode", d.mode.clone()));
            items.push(("ports", format!("{} → {}", d.rx_iface, d.tx_iface)));
            items.push(("backends", format!("{} / {}", d.rx_backend, d.tx_backend)));
        }
        Some(Doc::RrClient(d)) => {
            items.push(("server", d.server.clone()));
            items.push(("load", d.mode.clone()));
            items.push(("transport", d.transport.clone()));
            items.push(("flows", d.flows.to_string()));
        }
        _ => {}
    }
    let mut s = facts(&items);
    if let Some(st) = l.start.as_ref().filter(|st| !st.config.is_null()) {
        s += &format!(
            "<details><summary>Settings</summary><pre>{}</pre></details>\n",
            esc(&serde_json::to_string_pretty(&st.config).unwrap_or_default())
        );
    }
    let doctor = l
        .start
        .as_ref()
        .and_then(|s| s.doctor.clone())
        .or_else(|| doc_value(l).and_then(|v| v.get("doctor").cloned()))
        .filter(|d| !d.is_null());
    if let Some(d) = doctor {
        s += &format!(
            "<details open><summary>The doctor's findings</summary><pre class=\"doctor\">{}</pre></details>\n",
            esc(&serde_json::to_string_pretty(&d).unwrap_or_default())
        );
    }
    s
}

/// The raw document of a `-J` file (for fields not typed: the doctor).
fn doc_value(l: &Loaded) -> Option<Value> {
    serde_json::from_str(&l.text).ok()
}

/// A JSON value on one line, shortened.
fn compact(v: &Value) -> String {
    let s = if v.is_null() {
        String::new()
    } else {
        v.to_string()
    };
    if s.chars().count() > 200 {
        s.chars().take(200).collect::<String>() + "…"
    } else {
        s
    }
}

fn figure_cell(f: &Figure) -> Cell {
    match f.name.unit() {
        "%" => Cell {
            text: format!("{}%", crate::html::plain(f.value, 4)),
            value: Some(f.value),
        },
        "µs" | "ms" => Cell {
            text: format!("{} {}", crate::html::plain(f.value, 3), f.name.unit()),
            value: Some(f.value),
        },
        u => Cell::si(f.value, u),
    }
}

/// The headline figures with their sources, and the counts beside them.
fn summary(l: &Loaded) -> String {
    let runs = figures::runs(l);
    let mut rows: Vec<Vec<Cell>> = runs
        .first()
        .into_iter()
        .flatten()
        .map(|f| vec![Cell::text(f.label()), figure_cell(f), Cell::text(&f.source)])
        .collect();
    let mut count = |name: &str, v: Option<f64>, src: &str| {
        if let Some(v) = v {
            rows.push(vec![Cell::text(name), Cell::num(v, 3), Cell::text(src)]);
        }
    };
    match &l.doc {
        Some(Doc::Blast(b)) => {
            count("frames sent", Some(b.packets as f64), "sender's count");
            count(
                "bytes sent",
                Some(b.bytes as f64),
                "sender's count (L2 without FCS)",
            );
            count("duration (s)", Some(b.duration_s), "sender's clock");
            count("send errors", Some(b.send_errors as f64), "sender");
            if let Some(r) = &b.receiver {
                count(
                    "frames received",
                    Some(r.packets as f64),
                    "receiver's count",
                );
            }
        }
        Some(Doc::Sink(d)) => {
            count(
                "frames received",
                Some(d.packets as f64),
                "receiver's count",
            );
            count("lost", Some(d.lost as f64), "receiver's sequence gaps");
            count("reordered", Some(d.reordered as f64), "receiver");
            count("duplicates", Some(d.duplicates as f64), "receiver");
            count("duration (s)", Some(d.duration_s), "receiver's clock");
        }
        Some(Doc::Fwd(d)) => {
            count("frames received", Some(d.counts.rx as f64), "forwarder");
            count("frames sent on", Some(d.counts.tx as f64), "forwarder");
            count("send drops", Some(d.counts.tx_dropped as f64), "forwarder");
            count("received per second", Some(d.rx_pps), "forwarder");
        }
        Some(Doc::Other { doc, .. }) => {
            for (k, v) in doc.as_object().into_iter().flatten() {
                count(k, v.as_f64(), "the document's own key");
            }
        }
        _ => {}
    }
    if rows.is_empty() {
        return "<p class=\"note\">No headline figures in this result.</p>\n".into();
    }
    table(
        "summary",
        "Summary: each figure and who counted it",
        &["figure", "value", "source"],
        &rows,
    )
}

/// Rate, loss and latency over time and the latency CDF, those the result
/// has.
pub fn plots(text: &str) -> String {
    let Ok(input) = linerate_plot::Input::parse(text) else {
        return String::new();
    };
    [Plot::Rate, Plot::Loss, Plot::Latency, Plot::Cdf]
        .into_iter()
        .filter_map(|f| figure(input.chart(f)))
        .collect()
}

/// The latency percentiles, where the result has them.
fn percentiles(l: &Loaded) -> String {
    let (p, unit, scale, src) = match &l.doc {
        Some(Doc::Sink(d)) => (d.latency_ns, "µs", 1e-3, "receiver, one-way"),
        Some(Doc::Blast(b)) => match &b.receiver {
            Some(r) => (r.latency_ns, "µs", 1e-3, "receiver, one-way"),
            None => (None, "", 1.0, ""),
        },
        Some(Doc::RrClient(d)) => (d.latency_us, "µs", 1.0, "client, round trip"),
        _ => (None, "", 1.0, ""),
    };
    let Some(p) = p else { return String::new() };
    let present = p.present();
    if present.is_empty() {
        return String::new();
    }
    let head: Vec<&str> = present.iter().map(|(k, _)| *k).collect();
    let row: Vec<Cell> = present
        .iter()
        .map(|(_, v)| Cell::num(v * scale, 3))
        .collect();
    table(
        "percentiles",
        &format!("Latency percentiles ({unit}, {src})"),
        &head,
        &[row],
    )
}

/// A row's counts as cells.
fn row_cells(r: &RunRow, seconds: f64) -> Vec<Cell> {
    let o = |v: Option<u64>| Cell::opt(v.map(|x| x as f64), |x| Cell::num(x, 0));
    let rate = |v: Option<u64>, k: f64, unit: &str| {
        Cell::opt(
            v.filter(|_| seconds > 0.0).map(|x| x as f64 * k / seconds),
            |x| Cell::si(x, unit),
        )
    };
    vec![
        Cell::text(format!("{} {}", r.scope, r.id_text())),
        Cell::text(&r.role),
        Cell::text(&r.counted_by),
        o(r.packets),
        o(r.bytes),
        rate(r.bytes, 8.0, "bit/s"),
        rate(r.packets, 1.0, "packets/s"),
        o(r.lost),
        o(r.reordered),
        o(r.duplicates),
        o(r.retransmits),
    ]
}

/// Per flow / stream / worker: the run's end rows, or its intervals'
/// rows added up; iperf3's streams; the sink's flows.
fn rows_table(l: &Loaded) -> String {
    match &l.doc {
        Some(Doc::Sink(d)) if !d.flows.is_empty() => sink_flows(d),
        Some(Doc::Iperf(d)) if !d.end.streams.is_empty() => iperf_streams(d),
        Some(Doc::RrClient(_)) => String::new(),
        _ => run_rows(l),
    }
}

fn run_rows(l: &Loaded) -> String {
    let head = [
        "row",
        "role",
        "counted by",
        "packets",
        "bytes",
        "bit/s",
        "packets/s",
        "lost",
        "reordered",
        "duplicates",
        "retransmits",
    ];
    if let Some(e) = l.end.as_ref().filter(|e| !e.rows.is_empty()) {
        {
            let rows: Vec<Vec<Cell>> = e
                .rows
                .iter()
                .chain(&e.sums)
                .map(|r| row_cells(r, e.duration_s))
                .collect();
            return table(
                "rows",
                "Per flow, stream or worker: the run's totals",
                &head,
                &rows,
            );
        }
    }
    // The intervals' rows added up.
    let ivs = l.run_intervals();
    let mut acc: Vec<RunRow> = Vec::new();
    let add = |a: &mut Option<u64>, b: Option<u64>| {
        if let Some(b) = b {
            *a = Some(a.unwrap_or(0) + b);
        }
    };
    for r in ivs.iter().filter(|i| !i.omitted).flat_map(|i| &i.rows) {
        let key = (r.scope.as_str(), r.id_text(), r.role.as_str());
        let i = match acc
            .iter()
            .position(|x| (x.scope.as_str(), x.id_text(), x.role.as_str()) == key)
        {
            Some(i) => i,
            None => {
                acc.push(RunRow {
                    scope: r.scope.clone(),
                    id: r.id.clone(),
                    role: r.role.clone(),
                    counted_by: r.counted_by.clone(),
                    ..RunRow::default()
                });
                acc.len() - 1
            }
        };
        let a = &mut acc[i];
        add(&mut a.packets, r.packets);
        add(&mut a.bytes, r.bytes);
        add(&mut a.lost, r.lost);
        add(&mut a.reordered, r.reordered);
        add(&mut a.duplicates, r.duplicates);
        add(&mut a.retransmits, r.retransmits);
    }
    if acc.is_empty() {
        return String::new();
    }
    let secs: f64 = ivs
        .iter()
        .filter(|i| !i.omitted)
        .map(|i| i.end - i.start)
        .sum();
    let rows: Vec<Vec<Cell>> = acc.iter().map(|r| row_cells(r, secs)).collect();
    table(
        "rows",
        "Per flow, stream or worker: the intervals added up",
        &head,
        &rows,
    )
}

fn sink_flows(d: &crate::input::SinkDoc) -> String {
    let us = |p: Option<f64>| Cell::opt(p.map(|v| v / 1e3), |v| Cell::num(v, 3));
    let rows: Vec<Vec<Cell>> = d
        .flows
        .iter()
        .take(1000)
        .map(|f| {
            vec![
                Cell::text(match &f.flow {
                    Value::String(s) => s.clone(),
                    v => v.to_string(),
                }),
                Cell::int(f.packets),
                Cell::int(f.bytes),
                Cell::int(f.lost),
                Cell::int(f.reordered),
                Cell::int(f.duplicates),
                Cell::opt(f.jitter_ns.map(|j| j / 1e3), |v| Cell::num(v, 3)),
                us(f.latency_ns.and_then(|l| l.p50)),
                us(f.latency_ns.and_then(|l| l.p99)),
                us(f.latency_ns.and_then(|l| l.max)),
            ]
        })
        .collect();
    table(
        "flows",
        "Per flow (receiver's count; latency and jitter in µs)",
        &[
            "flow",
            "packets",
            "bytes",
            "lost",
            "reordered",
            "duplicates",
            "jitter",
            "p50",
            "p99",
            "max",
        ],
        &rows,
    )
}

fn iperf_streams(d: &crate::input::IperfDoc) -> String {
    let rows: Vec<Vec<Cell>> = d
        .end
        .streams
        .iter()
        .map(|s| {
            let snd = s.sender.as_ref().or(s.udp.as_ref());
            let rcv = s.receiver.as_ref().or(s.udp.as_ref());
            vec![
                Cell::text(
                    snd.or(rcv)
                        .and_then(|x| x.socket)
                        .map_or_else(String::new, |n| n.to_string()),
                ),
                Cell::opt(snd.map(|x| x.bits_per_second), |v| Cell::si(v, "bit/s")),
                Cell::opt(rcv.map(|x| x.bits_per_second), |v| Cell::si(v, "bit/s")),
                Cell::opt(snd.and_then(|x| x.retransmits).map(|v| v as f64), |v| {
                    Cell::num(v, 0)
                }),
                Cell::opt(rcv.and_then(|x| x.lost_percent), |v| Cell::num(v, 4)),
            ]
        })
        .collect();
    table(
        "streams",
        "Per stream (sender's and receiver's counts)",
        &[
            "stream",
            "sent bit/s",
            "received bit/s",
            "retransmits",
            "lost %",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_line_is_shown_as_a_shell_takes_it_back() {
        let w = |a: &[&str]| shell_words(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            w(&["linerate", "-c", "198.18.0.2"]),
            "linerate -c 198.18.0.2"
        );
        assert_eq!(w(&["--report", "a b.html"]), "--report 'a b.html'");
        assert_eq!(w(&["it's", ""]), r"'it'\''s' ''");
    }

    #[test]
    fn what_ran_starts_with_the_command_escaped() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/blast.jsonl"),
        )
        .unwrap();
        let l = Loaded::parse("blast.jsonl", text).unwrap();
        let html = what_ran(&l);
        assert!(
            html.contains(
                "<dt>command</dt><dd>linerate blast --iface lo --dst-ip 127.0.0.1 --pps 20k -t 1 \
                 --json-stream --report &#39;it&#39;\\&#39;&#39;s &lt;mine&gt;.html&#39;</dd>"
            ),
            "{html}"
        );
    }

    #[test]
    fn a_native_documents_host_is_what_ran() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rr.json"),
        )
        .unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        let without = what_ran(&Loaded::parse("rr.json", text).unwrap());
        assert!(!without.contains("<dt>kernel</dt>"), "{without}");
        doc["host"] = serde_json::json!({"hostname": "gen1", "kernel": "6.1.0-28-amd64",
            "cpus": 2, "linerate": "0.1.0", "timestamp": 1.7e9,
            "command": ["linerate", "rr", "client", "198.18.0.2", "-J"]});
        let html = what_ran(&Loaded::parse("rr.json", doc.to_string()).unwrap());
        for fact in [
            "<dt>command</dt><dd>linerate rr client 198.18.0.2 -J</dd>",
            "<dt>host</dt><dd>gen1</dd>",
            "<dt>kernel</dt><dd>6.1.0-28-amd64</dd>",
            "<dt>CPUs</dt><dd>2</dd>",
        ] {
            assert!(html.contains(fact), "{fact} not in {html}");
        }
    }
}
