//! `linerate plot` on real results: an iperf3-mode client's -J (rate,
//! latency from TCP RTT), a receiving UDP client's -J (loss), rr's
//! --json-stream (latency over time and CDF), a one-interval result, several
//! figures of which some are not in the result, a `--repeat -J` document;
//! SVG checked element by element, PNG by its header.

mod support;

use std::time::Duration;
use support::{Proc, free_port, json, linerate};

/// The text of each `<text>` element.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            Some(
                t.split_once('>')?
                    .1
                    .split("</text>")
                    .next()?
                    .trim()
                    .to_string(),
            )
        })
        .collect()
}

/// Points per `<polyline>`.
fn polylines(svg: &str) -> Vec<usize> {
    lines(svg).iter().map(Vec::len).collect()
}

fn plot(input: &std::path::Path, out: &std::path::Path, figure: &str) -> std::process::Output {
    linerate()
        .arg("plot")
        .arg(input)
        .arg("-o")
        .arg(out)
        .args(["-f", figure])
        .output()
        .unwrap()
}

#[test]
fn plots_of_real_results() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port) = support::server(&[]);
    let p = port.to_string();
    // TCP, two streams, 4 intervals of 0.5 s.
    let tcp = dir.path().join("tcp.json");
    let out = linerate()
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &p,
            "-J",
            "-t",
            "2",
            "-P",
            "2",
            "-i",
            "0.5",
        ])
        .output()
        .unwrap();
    let doc = json(&out.stdout);
    let n = doc["intervals"].as_array().unwrap().len();
    std::fs::write(&tcp, &out.stdout).unwrap();
    let svg = dir.path().join("rate.svg");
    let o = plot(&tcp, &svg, "rate");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = std::fs::read_to_string(&svg).unwrap();
    let t = texts(&s);
    for want in ["Rate over time", "time (s)", "total"] {
        assert!(t.iter().any(|x| x == want), "{want:?} not in {t:?}");
    }
    assert!(
        t.iter()
            .any(|x| x.starts_with("rate (") && x.ends_with("bit/s)")),
        "{t:?}"
    );
    let streams: Vec<&String> = t.iter().filter(|x| x.starts_with("stream ")).collect();
    assert_eq!(streams.len(), 2, "{t:?}");
    // Two streams and the total, each interval a level from its start to
    // its end (two points per interval).
    assert_eq!(
        polylines(&s).iter().filter(|&&k| k == 2 * n).count(),
        3,
        "{n} intervals: {:?}",
        polylines(&s)
    );
    let o = plot(&tcp, &dir.path().join("rtt.svg"), "latency");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        std::fs::read_to_string(dir.path().join("rtt.svg"))
            .unwrap()
            .contains("RTT (sender")
    );
    // A UDP receiver (-R): loss over time.
    let udp = dir.path().join("udp.json");
    let out = linerate()
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &p,
            "-J",
            "-t",
            "2",
            "-u",
            "-b",
            "50M",
            "-R",
        ])
        .output()
        .unwrap();
    std::fs::write(&udp, &out.stdout).unwrap();
    let o = plot(&udp, &dir.path().join("loss.svg"), "loss");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        texts(&std::fs::read_to_string(dir.path().join("loss.svg")).unwrap())
            .iter()
            .any(|x| x == "lost packets per interval")
    );
    // Issue 43 item 7: a UDP sender's loss is the receiver's count over
    // the run (its intervals have none): drawn, not "no loss figures".
    let sent = dir.path().join("udp-sent.json");
    std::fs::write(&sent, client_json(port, &["-t", "1", "-u", "-b", "10M"])).unwrap();
    let o = plot(&sent, &dir.path().join("sent-loss.svg"), "loss");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        texts(&std::fs::read_to_string(dir.path().join("sent-loss.svg")).unwrap())
            .iter()
            .any(|x| x.starts_with("total over the whole run"))
    );
    // A TCP sender has no loss figures: said plainly, exit 2.
    let o = plot(&tcp, &dir.path().join("none.svg"), "loss");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no loss figures"));
    // rr: latency over time and the CDF, PNG.
    let rport = free_port().to_string();
    let srv =
        Proc::spawn(linerate().args(["rr", "server", "-p", &rport, "-t", "6", "--cores", "0"]));
    std::thread::sleep(Duration::from_millis(500));
    let rr = dir.path().join("rr.jsonl");
    let out = linerate()
        .args([
            "rr",
            "client",
            "127.0.0.1",
            "-p",
            &rport,
            "-t",
            "2",
            "--json-stream",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&rr, &out.stdout).unwrap();
    drop(srv);
    let png = dir.path().join("rr.png");
    let o = plot(&rr, &png, "latency,cdf");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for fig in ["latency", "cdf"] {
        let b = std::fs::read(dir.path().join(format!("rr.{fig}.png"))).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n", "{fig}");
        let (w, h) = (
            u32::from_be_bytes(b[16..20].try_into().unwrap()),
            u32::from_be_bytes(b[20..24].try_into().unwrap()),
        );
        assert_eq!((w, h), (1280, 720), "{fig}");
    }
    let cdf = dir.path().join("cdf.svg");
    assert!(plot(&rr, &cdf, "cdf").status.success());
    let t = texts(&std::fs::read_to_string(&cdf).unwrap());
    assert!(
        t.iter().any(|x| x == "fraction of packets") && t.iter().any(|x| x == "rr_client latency"),
        "{t:?}"
    );
}

/// The `<circle>` centres of an SVG (markers): (cx, cy).
fn circles(svg: &str) -> Vec<(f64, f64)> {
    let attr = |e: &str, k: &str| -> Option<f64> {
        e.split(&format!(" {k}=\""))
            .nth(1)?
            .split('"')
            .next()?
            .parse()
            .ok()
    };
    svg.split("<circle")
        .skip(1)
        .filter_map(|c| {
            let e = c.split('>').next()?;
            Some((attr(e, "cx")?, attr(e, "cy")?))
        })
        .collect()
}

/// The plotting area's x range: the widest horizontal black line (the
/// x axis).
fn x_axis(svg: &str) -> (f64, f64) {
    svg.split("<polyline")
        .skip(1)
        .filter(|p| p.contains("stroke=\"#000000\" stroke-width=\"1\""))
        .filter_map(|p| {
            let pts: Vec<(f64, f64)> = p
                .split("points=\"")
                .nth(1)?
                .split('"')
                .next()?
                .split_whitespace()
                .filter_map(|xy| {
                    let (x, y) = xy.split_once(',')?;
                    Some((x.parse().ok()?, y.parse().ok()?))
                })
                .collect();
            match pts[..] {
                [a, b] if a.1 == b.1 => Some((a.0.min(b.0), a.0.max(b.0))),
                _ => None,
            }
        })
        .max_by(|a, b| (a.1 - a.0).total_cmp(&(b.1 - b.0)))
        .unwrap()
}

fn client_json(port: u16, args: &[&str]) -> Vec<u8> {
    let out = linerate()
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A TCP client's -J of one interval (-t 1, -i 1), written in `dir`.
fn one_interval(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let one = dir.join("one.json");
    std::fs::write(&one, client_json(port, &["-t", "1"])).unwrap();
    assert_eq!(
        json(&std::fs::read(&one).unwrap())["intervals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    one
}

/// The `<polyline>`s' points.
fn lines(svg: &str) -> Vec<Vec<(f64, f64)>> {
    linerate_testkit::svg_polylines(svg)
}

/// Issue 26 item 6, issue 43 item 7: a one-interval result draws its
/// figure visibly: a level from the interval's start (the x axis's left
/// end, 0 s) to its end inside the plotting area, not a one-point line on
/// its edge.
#[test]
fn a_one_interval_result_draws_its_point() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port) = support::server(&[]);
    let one = one_interval(dir.path(), port);
    let svg = dir.path().join("one.svg");
    let o = plot(&one, &svg, "rate");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = std::fs::read_to_string(&svg).unwrap();
    let (left, right) = x_axis(&s);
    // The stream and the total: one level each, from 0 s to 1 s.
    let levels: Vec<Vec<(f64, f64)>> = lines(&s)
        .into_iter()
        .filter(|l| l.len() == 2 && l[0].0 == left && l[0].1 == l[1].1 && l[1].0 > left + 100.0)
        // Not the x axis itself (at the plotting area's bottom, y 476).
        .filter(|l| l[1].0 <= right && l[0].1 < 470.0)
        .collect();
    assert_eq!(levels.len(), 2, "{:?}", lines(&s));
    assert!(circles(&s).is_empty());
}

/// Issue 43 item 7: `plot` does not overwrite a file (as --csv does
/// not) unless --force.
#[test]
fn plot_overwrites_only_with_force() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port) = support::server(&[]);
    let one = one_interval(dir.path(), port);
    for ext in ["svg", "png"] {
        let out = dir.path().join(format!("there.{ext}"));
        std::fs::write(&out, "keep me").unwrap();
        let o = plot(&one, &out, "rate");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("exists: not overwritten (--force"), "{err}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep me");
        let o = linerate()
            .arg("plot")
            .arg(&one)
            .arg("-o")
            .arg(&out)
            .arg("--force")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_ne!(std::fs::read(&out).unwrap(), b"keep me");
    }
}

/// Issue 26 item 6: of several figures asked, those the result has are
/// drawn and each one it has not is said on a line of its own, naming it
/// and why (exit 1; exit 2 when none was drawn).
#[test]
fn several_figures_draw_all_the_result_has() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port) = support::server(&[]);
    let one = one_interval(dir.path(), port);
    // A TCP sender: rate and latency (RTT) drawn, loss and cdf not.
    let o = plot(&one, &dir.path().join("many.svg"), "loss,rate,cdf,latency");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    for fig in ["rate", "latency"] {
        let f = dir.path().join(format!("many.{fig}.svg"));
        assert!(f.exists(), "{fig} not drawn: {err}");
        assert!(
            err.lines()
                .any(|l| l.contains(&format!("{fig} figure written to"))),
            "{err}"
        );
    }
    for (fig, why) in [
        ("loss", "no loss figures"),
        ("cdf", "no latency percentile"),
    ] {
        assert!(!dir.path().join(format!("many.{fig}.svg")).exists());
        let lines: Vec<&str> = err
            .lines()
            .filter(|l| l.contains(&format!("{fig} figure not drawn")))
            .collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains(why), "{err}");
    }
    // None of the figures asked: exit 2, each said.
    let o = plot(&one, &dir.path().join("none.svg"), "loss,cdf");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("loss figure not drawn") && err.contains("cdf figure not drawn"));
}

/// Issue 26 item 6: a `--repeat -J` document plots one series per run
/// and the figure over the runs.
#[test]
fn a_repeat_document_plots_each_run_and_the_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (_srv, port) = support::server(&[]);

    // --repeat 2 -J, four intervals a run: a series per run (a point per
    // interval each) and the runs' figure with its mean.
    let rep = dir.path().join("rep.json");
    std::fs::write(
        &rep,
        client_json(port, &["--repeat", "2", "-t", "1", "-i", "0.25"]),
    )
    .unwrap();
    let doc = json(&std::fs::read(&rep).unwrap());
    assert_eq!(doc["runs"].as_array().unwrap().len(), 2, "{doc}");
    let o = plot(&rep, &dir.path().join("rep.svg"), "rate,runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = std::fs::read_to_string(dir.path().join("rep.rate.svg")).unwrap();
    let t = texts(&s);
    for want in ["run 1", "run 2"] {
        assert!(t.iter().any(|x| x == want), "{want:?} not in {t:?}");
    }
    assert!(!t.iter().any(|x| x.starts_with("stream")), "{t:?}");
    // Data lines: more than the 2 points of the axis ticks and legend marks.
    // Each interval a level: two points each.
    let mut per_run: Vec<usize> = (0..2)
        .map(|i| 2 * doc["runs"][i]["intervals"].as_array().unwrap().len())
        .collect();
    per_run.sort_unstable();
    assert!(per_run[0] >= 3, "{per_run:?}");
    let mut lines: Vec<usize> = polylines(&s).into_iter().filter(|&k| k >= 3).collect();
    lines.sort_unstable();
    assert_eq!(lines, per_run, "{:?}", polylines(&s));
    let s = std::fs::read_to_string(dir.path().join("rep.runs.svg")).unwrap();
    let t = texts(&s);
    let figure = doc["repeat"]["figure"].as_str().unwrap();
    assert!(
        t.iter().any(|x| x.contains(figure)) && t.iter().any(|x| x == "mean"),
        "{t:?}"
    );
    // A marker per run, the runs in order along the x axis.
    let marks = circles(&s);
    assert_eq!(marks.len(), 2, "{marks:?}");
    assert!(marks[0].0 < marks[1].0, "{marks:?}");
}
