//! Reports loaded in a real browser: headless Chromium (Debian's
//! `chromium`, installed by scripts/test) renders each report of the
//! results in tests/fixtures (iperf3 client, blast, blast --json-stream, a
//! blast --repeat, sink, fwd, rr client: real loopback runs; an RFC 2544
//! campaign written by hand in `rfc2544 -J`'s shape, a real search's
//! report being `rfc2544_rig`'s), and the test
//! reads back its DOM: the tables and the SVG plots are there, the
//! numbers in the tables equal those in the JSON the report came from,
//! the page logged no console error, asked the network for nothing (the
//! browser's net log, with a canary page that does load something to show
//! the check can fail), and its screenshot is not blank.
//!
//! Chromium is kept off the network: its proxy is a closed local port and
//! its resolver resolves nothing.

use linerate_html::Loaded;
use linerate_testkit::{require_program, should_skip};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap()
}

fn workdir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("linerate-html-browser-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What the browser made of a page.
struct Rendered {
    dom: String,
    /// Its stderr (console messages with --enable-logging).
    log: String,
    /// The URLs the net log saw.
    urls: Vec<String>,
    screenshot_bytes: u64,
}

fn chromium(dir: &Path, page: &Path, tag: &str) -> Rendered {
    let base = |out: &str| -> Command {
        let mut c = Command::new("timeout");
        c.args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .args([
            "--proxy-server=socks5://127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dir.join(format!("profile-{tag}-{out}")).display()
        ));
        c
    };
    let url = format!("file://{}", page.display());
    let netlog = dir.join(format!("{tag}.netlog.json"));
    let out = base("dom")
        .arg(format!("--log-net-log={}", netlog.display()))
        .args(["--dump-dom", &url])
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium --dump-dom {tag}: {:?}",
        out.status
    );
    let shot = dir.join(format!("{tag}.png"));
    let s = base("shot")
        .args(["--window-size=1000,1400"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .expect("chromium runs");
    assert!(
        s.status.success(),
        "chromium --screenshot {tag}: {:?}",
        s.status
    );
    let net = std::fs::read_to_string(&netlog).unwrap_or_default();
    let urls = net
        .split("\"url\":\"")
        .skip(1)
        .filter_map(|u| u.split('"').next())
        .map(str::to_string)
        .collect();
    Rendered {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        log: String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&s.stderr),
        urls,
        screenshot_bytes: std::fs::metadata(&shot).map_or(0, |m| m.len()),
    }
}

/// Requests the page made: every URL the net log saw but the browser's
/// own services' (update checks, clock, accounts), which it asks for
/// whatever the page.
fn page_requests(r: &Rendered) -> Vec<&str> {
    r.urls
        .iter()
        .map(String::as_str)
        .filter(|u| !u.starts_with("file://") && !u.starts_with("data:"))
        .filter(|u| {
            let host = u
                .split("://")
                .nth(1)
                .and_then(|h| h.split(['/', ':', '?']).next())
                .unwrap_or("");
            !["google.com", "googleapis.com", "gvt1.com", "gstatic.com"]
                .iter()
                .any(|d| host == *d || host.ends_with(&format!(".{d}")))
        })
        .collect()
}

/// The `data-value`s of the table with class `class`, in order.
fn table_values(dom: &str, class: &str) -> Vec<f64> {
    let Some(start) = dom.find(&format!("<table class=\"{class}\"")) else {
        return Vec::new();
    };
    let t = &dom[start..];
    let t = &t[..t.find("</table>").unwrap_or(t.len())];
    t.split("data-value=\"")
        .skip(1)
        .filter_map(|v| v.split('"').next()?.parse().ok())
        .collect()
}

fn console_errors(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// Each fixture, its tables that must be there, and (table, index, value
/// in the JSON) checks.
/// (table, index of its value, the value in the JSON).
type Check = (&'static str, usize, f64);

fn cases() -> Vec<(&'static str, Vec<&'static str>, Vec<Check>)> {
    let client = json("client.json");
    let sink = json("sink.json");
    let rr = json("rr.json");
    let blast = json("blast.json");
    let rep = json("blast-rep.json");
    let rfc = json("rfc2544.json");
    let fwd = json("fwd.json");
    let f = |v: &Value| v.as_f64().unwrap();
    vec![
        (
            "client.json",
            vec!["summary", "streams"],
            vec![(
                "summary",
                0,
                f(&client["end"]["sum_received"]["bits_per_second"]),
            )],
        ),
        (
            "sink.json",
            vec!["summary", "flows"],
            vec![
                ("summary", 0, f(&sink["bps_l2"])),
                ("summary", 1, f(&sink["pps"])),
                ("flows", 0, f(&sink["flows"][0]["packets"])),
            ],
        ),
        (
            "rr.json",
            vec!["summary", "percentiles"],
            vec![
                ("summary", 0, f(&rr["transactions_per_s"])),
                ("percentiles", 0, f(&rr["latency_us"]["min"])),
            ],
        ),
        (
            "blast.json",
            vec!["summary", "rows"],
            vec![
                ("summary", 0, f(&blast["bps_l2"])),
                ("summary", 1, f(&blast["pps"])),
            ],
        ),
        ("blast.jsonl", vec!["summary", "rows"], vec![]),
        // A forwarder that saw nothing (its own namespace's lo): said.
        (
            "fwd.json",
            vec!["summary", "rows"],
            vec![("summary", 0, f(&fwd["tx_pps"]))],
        ),
        (
            "blast-rep.json",
            vec!["runs", "repeat-statistics", "run-figures"],
            vec![
                ("runs", 1, f(&rep["repeat"]["values"][0])),
                (
                    "repeat-statistics",
                    1,
                    f(&rep["repeat"]["statistics"]["mean"]),
                ),
                (
                    "repeat-statistics",
                    3,
                    f(&rep["repeat"]["statistics"]["low"]),
                ),
            ],
        ),
        (
            "rfc2544.json",
            vec![
                "rfc2544-throughput",
                "rfc2544-latency",
                "rfc2544-frame-loss",
                "rfc2544-back-to-back",
                "rfc2544-trials",
            ],
            vec![
                (
                    "rfc2544-throughput",
                    0,
                    f(&rfc["throughput"][0]["frame_size"]),
                ),
                (
                    "rfc2544-throughput",
                    2,
                    f(&rfc["throughput"][0]["rate_fps"]),
                ),
                (
                    "rfc2544-throughput",
                    3,
                    f(&rfc["throughput"][0]["rate_l1_bps"]),
                ),
                (
                    "rfc2544-throughput",
                    4,
                    f(&rfc["throughput"][0]["rate_l2_bps"]),
                ),
                (
                    "rfc2544-frame-loss",
                    3,
                    f(&rfc["frame_loss"][0]["loss_ratio"]),
                ),
                (
                    "rfc2544-back-to-back",
                    2,
                    f(&rfc["back_to_back"][0]["mean_burst"]),
                ),
            ],
        ),
    ]
}

#[test]
fn every_report_renders_in_chromium_with_its_numbers_and_nothing_fetched() {
    if should_skip("report in a browser", &[require_program("chromium")]) {
        return;
    }
    let dir = workdir();
    // The canary: a page that loads an image and a stylesheet from
    // 198.18.0.1 (never reached: the proxy is a closed port). The net log
    // must show them, or the check below proves nothing.
    let canary = dir.join("canary.html");
    std::fs::write(
        &canary,
        "<!DOCTYPE html><html><head><link rel=\"stylesheet\" href=\"http://198.18.0.1/a.css\"></head>\
         <body><img src=\"http://198.18.0.1/x.png\"></body></html>",
    )
    .unwrap();
    let c = chromium(&dir, &canary, "canary");
    assert!(
        page_requests(&c).iter().any(|u| u.contains("198.18.0.1")),
        "the net log did not show the canary's requests: {:?}",
        c.urls
    );
    for (name, tables, checks) in cases() {
        let l = Loaded::read(&fixture(name)).unwrap();
        let page = dir.join(format!("{name}.html"));
        std::fs::write(&page, linerate_html::report_page(&[l])).unwrap();
        let r = chromium(&dir, &page, name);
        assert!(r.dom.contains("<svg"), "{name}: no SVG plot in the DOM");
        assert_eq!(
            r.dom.contains("zero packets"),
            name == "fwd.json",
            "{name}: the zero-packet note"
        );
        for t in &tables {
            assert!(
                r.dom.contains(&format!("<table class=\"{t}\"")),
                "{name}: no table {t} in the DOM"
            );
        }
        for (t, i, want) in checks {
            let got = table_values(&r.dom, t);
            assert_eq!(
                got.get(i),
                Some(&want),
                "{name}: table {t} value {i}: {got:?}"
            );
        }
        assert_eq!(page_requests(&r), Vec::<&str>::new(), "{name}: requests");
        assert_eq!(
            console_errors(&r.log),
            Vec::<&str>::new(),
            "{name}: console"
        );
        // A blank 1000x1400 page is a few kB of PNG; one with text, tables
        // and plots is tens.
        assert!(
            r.screenshot_bytes > 20_000,
            "{name}: screenshot of {} bytes",
            r.screenshot_bytes
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_comparison_renders_with_its_table_and_overlaid_plots() {
    if should_skip("compare in a browser", &[require_program("chromium")]) {
        return;
    }
    let dir = workdir().join("compare");
    std::fs::create_dir_all(&dir).unwrap();
    let a = vec![Loaded::read(&fixture("blast-rep.json")).unwrap()];
    let b = vec![Loaded::read(&fixture("blast-rep2.json")).unwrap()];
    let c = linerate_html::compare(&a, &b, 0.95).unwrap();
    let cond: linerate_html::Condition = "pps < -3%".parse().unwrap();
    let v = c.judge(&[cond]);
    let page = dir.join("compare.html");
    std::fs::write(&page, linerate_html::compare_page(&c, &a, &b, &v)).unwrap();
    let r = chromium(&dir, &page, "compare");
    assert!(r.dom.contains("<table class=\"comparison\""));
    assert!(r.dom.contains("<table class=\"gate\""));
    assert!(r.dom.contains("overlaid"), "no overlaid plot");
    let pps = c
        .lines
        .iter()
        .find(|l| l.name == linerate_html::FigureName::Pps)
        .unwrap();
    let vals = table_values(&r.dom, "comparison");
    let ch = pps.change.as_ref().unwrap();
    assert!(
        vals.contains(&ch.a.mean) && vals.contains(&ch.b.mean),
        "{vals:?}"
    );
    assert_eq!(page_requests(&r), Vec::<&str>::new());
    assert_eq!(console_errors(&r.log), Vec::<&str>::new());
    let _ = std::fs::remove_dir_all(&dir);
}
