//! `linerate report`, `linerate compare` and `--report` through the real
//! binary: the exit codes a CI job gates on (`--fail-if`), bad input, and
//! the report a run writes at its end (an iperf3 test on loopback, once
//! and repeated).

mod support;

use std::path::{Path, PathBuf};
use support::linerate;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../linerate-html/tests/fixtures")
        .join(name)
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// `compare A --vs B` with these flags: exit code, stdout, stderr.
fn compare(a: &str, b: &str, flags: &[&str]) -> (i32, String, String) {
    let out = linerate()
        .arg("compare")
        .arg(fixture(a))
        .arg("--vs")
        .arg(fixture(b))
        .args(flags)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn fail_if_exit_codes_gate_on_the_change() {
    // A (blast-rep.json, 20 kpps) against B (blast-rep2.json, 19 kpps):
    // +5.26%, three runs each, significant.
    let (code, out, err) = compare("blast-rep.json", "blast-rep2.json", &[]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("pps: A 20 kframes/s (n=3), B 19 kframes/s (n=3): +5.26%"),
        "{out}"
    );
    assert!(out.contains("Welch's t test"), "{out}");
    for (cond, want) in [
        ("pps < -3%", 0),
        ("pps > 3%", 1),
        ("pps > 3% significant", 1),
        ("pps > 6%", 0),
        ("pps >= 1000", 1),
        ("throughput < 0", 0),
        // Not in these results: cannot be judged, so the gate fails.
        ("jitter > 1", 1),
    ] {
        let (code, out, err) = compare("blast-rep.json", "blast-rep2.json", &["--fail-if", cond]);
        assert_eq!(code, want, "--fail-if '{cond}': {out}{err}");
        assert!(out.contains(&format!("--fail-if '{cond}'")), "{out}");
    }
    // Several conditions: one holding is enough.
    let (code, ..) = compare(
        "blast-rep.json",
        "blast-rep2.json",
        &["--fail-if", "pps < -3%", "--fail-if", "pps > 5%"],
    );
    assert_eq!(code, 1);
    // The other way round the change is -5%.
    let (code, out, _) = compare(
        "blast-rep2.json",
        "blast-rep.json",
        &["--fail-if", "pps < -5%"],
    );
    assert_eq!(code, 1, "{out}");
}

#[test]
fn bad_expressions_and_results_exit_2_with_the_reason() {
    for (cond, said) in [
        ("speed < -5%", "no figure 'speed'"),
        ("pps == 5%", "'==' is not an operator"),
        ("pps < lots", "'lots' is not a number"),
        ("pps", "expected FIGURE OP NUMBER"),
    ] {
        let (code, _, err) = compare("blast-rep.json", "blast-rep2.json", &["--fail-if", cond]);
        assert_eq!(code, 2, "{cond}: {err}");
        assert!(err.contains(said), "{cond}: {err}");
    }
    // Different tests.
    let (code, _, err) = compare("client.json", "rr.json", &[]);
    assert_eq!(code, 2);
    assert!(err.contains("different tests"), "{err}");
    // Not a result.
    let d = tmp();
    let junk = d.path().join("junk.json");
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let out = linerate()
        .args(["report"])
        .arg(&junk)
        .arg("-o")
        .arg(d.path().join("r.html"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a linerate or iperf3 result"), "{err}");
    assert!(!d.path().join("r.html").exists());
}

#[test]
fn report_writes_one_file_and_compare_takes_directories() {
    let d = tmp();
    let out_html = d.path().join("r.html");
    let mut cmd = linerate();
    cmd.arg("report");
    for f in ["client.json", "rfc2544.json", "blast.jsonl", "rr.json"] {
        cmd.arg(fixture(f));
    }
    let out = cmd.arg("-o").arg(&out_html).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&out_html).unwrap();
    for want in [
        "rfc2544-throughput",
        "class=\"summary\"",
        "<svg",
        "client.json",
    ] {
        assert!(page.contains(want), "no {want}");
    }
    for external in [
        "<script",
        "<link",
        "src=\"http",
        "href=\"http",
        "url(",
        "@import",
    ] {
        assert!(!page.contains(external), "{external} in the page");
    }
    // An existing file is kept unless --force.
    let again = linerate()
        .arg("report")
        .arg(fixture("rr.json"))
        .arg("-o")
        .arg(&out_html)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&out_html).unwrap(), page);
    // Directories of runs.
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::copy(fixture("blast-rep.json"), a.join("1.json")).unwrap();
    std::fs::copy(fixture("blast.json"), a.join("2.json")).unwrap();
    std::fs::copy(fixture("blast-rep2.json"), b.join("1.json")).unwrap();
    let html = d.path().join("c.html");
    let out = linerate()
        .arg("compare")
        .arg(&a)
        .arg("--vs")
        .arg(&b)
        .arg("-o")
        .arg(&html)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("A: 4 run(s), B (baseline): 3 run(s)"),
        "{text}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("class=\"comparison\"") && page.contains("overlaid"));
}

#[test]
fn report_flag_writes_the_runs_report_at_its_end() {
    let (_srv, port) = support::server(&[]);
    let d = tmp();
    let one = d.path().join("one.html");
    let out = linerate()
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1", "-J"])
        .arg("--report")
        .arg(&one)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let page = std::fs::read_to_string(&one).unwrap();
    let bps = doc["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .unwrap();
    assert!(
        page.contains(&format!("data-value=\"{bps}\"")),
        "the report's throughput is not the document's {bps}"
    );
    assert!(page.contains("<svg") && page.contains("class=\"streams\""));
    let command = format!(
        "-c 127.0.0.1 -p {port} -t 1 -J --report {}</dd>",
        one.display()
    );
    assert!(
        page.contains("<dt>command</dt>") && page.contains(&command),
        "the report does not show the command line: {command}"
    );
    // Repeated: one report of every run.
    let rep = d.path().join("rep.html");
    let out = linerate()
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .args(["--repeat", "2", "--report"])
        .arg(&rep)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = std::fs::read_to_string(&rep).unwrap();
    assert!(page.contains("class=\"runs\"") && page.contains("class=\"repeat-statistics\""));
    // The report that exists is refused before the first run, not after
    // the last (three runs of a second each).
    let t0 = std::time::Instant::now();
    let out = linerate()
        .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
        .args(["--repeat", "3", "--report"])
        .arg(&rep)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(t0.elapsed().as_secs_f64() < 1.5, "{:?}", t0.elapsed());
    assert_eq!(std::fs::read_to_string(&rep).unwrap(), page);
}

/// A native mode's `-J` (an rr client on loopback) ends with the host it
/// ran on, and `linerate report` of that file shows its command and kernel.
#[test]
fn a_native_document_carries_its_host_and_the_report_shows_it() {
    let (_srv, port) = support::rr_tcp_server(&["-t", "30"]);
    let d = tmp();
    let out = support::rr_tcp_client(port)
        .args(["-t", "1", "-J"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = support::json(&out.stdout);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(doc["host"]["kernel"], kernel.trim());
    let command: Vec<&str> = doc["host"]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let port = port.to_string();
    assert_eq!(
        command[1..],
        [
            "rr",
            "client",
            "127.0.0.1",
            "-p",
            &port,
            "--tcp",
            "-t",
            "1",
            "-J"
        ]
    );
    let json = d.path().join("rr.json");
    std::fs::write(&json, &out.stdout).unwrap();
    let page = d.path().join("rr.html");
    let st = linerate()
        .arg("report")
        .arg(&json)
        .arg("-o")
        .arg(&page)
        .status()
        .unwrap();
    assert!(st.success());
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(
        page.contains(&format!("rr client 127.0.0.1 -p {port} --tcp -t 1 -J</dd>")),
        "the report does not show the command"
    );
    assert!(page.contains(&format!("<dt>kernel</dt><dd>{}</dd>", kernel.trim())));
}
