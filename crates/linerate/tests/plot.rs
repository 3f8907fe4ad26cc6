//! `linerate plot` on real results: an iperf3-mode client's -J (rate,
//! latency from TCP RTT), a receiving UDP client's -J (loss), rr's
//! --json-stream (latency over time and CDF); SVG checked element by
//! element, PNG by its header.

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
    svg.split("<polyline")
        .skip(1)
        .filter_map(|p| {
            Some(
                p.split("points=\"")
                    .nth(1)?
                    .split('"')
                    .next()?
                    .split_whitespace()
                    .count(),
            )
        })
        .collect()
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
    // Two streams and the total, one point per interval each.
    assert_eq!(
        polylines(&s).iter().filter(|&&k| k == n).count(),
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
    // A sender has no loss figures: said plainly, exit 2.
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
