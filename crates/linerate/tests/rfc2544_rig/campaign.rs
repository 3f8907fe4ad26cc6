//! A campaign interrupted, resumed and reported: finished trials kept, the
//! suggested blast, the HTML report.

use crate::lab::{BIN, DutLab, lab, serial, skip};
use crate::support;
use std::process::Command;

impl DutLab {
    /// rfc2544 --json-stream over sizes 64,1518 (and `args`), sent a
    /// SIGINT 200 ms into the 1518 B trial after the `after`th: its events,
    /// exit status, and whether the signal was sent.
    pub fn interrupted(
        &self,
        args: &[&str],
        after: usize,
    ) -> (Vec<serde_json::Value>, std::process::ExitStatus, bool) {
        use std::io::BufRead;
        let dut_mac = self.dut_mac();
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.gen_ns, BIN, "rfc2544"])
            .args([
                "--tx-iface",
                "ga",
                "--rx-iface",
                "gb",
                "--dst-mac",
                &dut_mac,
            ])
            .args([
                "--src-ip",
                "198.18.0.1",
                "--dst-ip",
                "198.18.1.2",
                "--json-stream",
            ])
            .args(["--sizes", "64,1518", "--tests", "throughput"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut events: Vec<serde_json::Value> = Vec::new();
            let mut signalled = false;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let ev: serde_json::Value = serde_json::from_str(&line).unwrap();
                events.push(ev);
                let big = events
                    .iter()
                    .filter(|e| {
                        e["event"] == "interval"
                            && e["data"]["rows"][0]["id"]
                                .as_str()
                                .is_some_and(|id| id.starts_with("1518 B trial"))
                    })
                    .count();
                if big >= after && !signalled {
                    // Into the next 1518 B trial.
                    std::thread::sleep(std::time::Duration::from_millis(200));
                    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
                    signalled = true;
                }
            }
            (events, signalled)
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("rfc2544 did not end within 300 s");
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        let (events, signalled) = reader.join().unwrap();
        (events, status, signalled)
    }
}

/// SIGINT during the second frame size's search: the first size's
/// result and the second's finished trials are all in the result (the
/// `--json-stream` end's, which is `-J`'s document), the trial cut short
/// is marked interrupted (not a failure), and the exit code says
/// interrupted (130).
#[test]
fn an_interrupted_campaign_keeps_every_finished_trial() {
    let _one = serial();
    if skip("an_interrupted_campaign_keeps_every_finished_trial") {
        return;
    }
    let lab = DutLab::new("int", "20mbit");
    let (events, status, signalled) = lab.interrupted(&["--trial-time", "0.5"], 2);
    assert!(signalled, "no second 1518 B trial: {events:#?}");
    assert_eq!(status.code(), Some(130));
    let end = events.last().unwrap();
    assert_eq!(end["event"], "end", "{end}");
    let v = &end["data"]["result"];
    let tp = v["throughput"].as_array().unwrap();
    assert_eq!(tp.len(), 2, "both sizes kept: {v}");
    assert_eq!(tp[0]["frame_size"], 64);
    assert!(tp[0].get("interrupted").is_none(), "{}", tp[0]);
    assert_eq!(tp[1]["frame_size"], 1518);
    assert_eq!(tp[1]["interrupted"], true);
    let trials = tp[1]["trials"].as_array().unwrap();
    assert!(trials.len() >= 3, "{}", tp[1]);
    let cut = trials.last().unwrap();
    assert_eq!(
        (&cut["interrupted"], &cut["passed"]),
        (&serde_json::json!(true), &serde_json::json!(false))
    );
    assert!(
        trials[..trials.len() - 1]
            .iter()
            .all(|t| t.get("interrupted").is_none())
    );
    assert!(
        v["error"]
            .as_str()
            .unwrap_or("")
            .starts_with("interrupted by a stop"),
        "{}",
        v["error"]
    );
    // Every trial was also an interval of the stream, the cut one too.
    let intervals = events.iter().filter(|e| e["event"] == "interval").count();
    let all_trials: usize = tp
        .iter()
        .map(|t| t["trials"].as_array().unwrap().len())
        .sum();
    assert_eq!(intervals, all_trials);
}

/// The blast command `lab up --topology dut --dut fwd` suggests runs as
/// printed (it once failed: no MAC for the far address through a
/// forwarder that answers no ARP).
#[test]
fn the_dut_labs_suggested_blast_runs_as_printed() {
    let _one = serial();
    if skip("the_dut_labs_suggested_blast_runs_as_printed") {
        return;
    }
    let prefix = format!("lrt-{}-try", std::process::id());
    let text = lab(&[
        "up",
        "--topology",
        "dut",
        "--prefix",
        &prefix,
        "--dut",
        "fwd",
    ]);
    let _down = DutLab {
        gen_ns: format!("{prefix}-gen"),
        dut_ns: format!("{prefix}-dut"),
        prefix: prefix.clone(),
    };
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| l.contains(" linerate blast "))
        .unwrap_or_else(|| panic!("no blast suggested: {text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[..3], ["ip", "netns", "exec"], "{line}");
    let at = words.iter().position(|w| *w == "linerate").unwrap();
    let out = Command::new("ip")
        .args(&words[1..at])
        .arg(BIN)
        .args(&words[at + 1..])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{line}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A real search through the lab's device written as an HTML report
/// (`--report`): the section 26 tables, the trials, the plots, and the
/// figures of the run's own `-J` document in them.
#[test]
fn a_real_search_writes_its_html_report() {
    let _one = serial();
    if skip("a_real_search_writes_its_html_report") {
        return;
    }
    let lab = DutLab::new("html", "10mbit");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("rfc2544.html");
    let v = lab.rfc2544(&[
        "--sizes",
        "512",
        "--tests",
        "throughput,latency",
        "--trial-time",
        "1",
        "--latency-time",
        "1",
        "--max-rate",
        "20Mbps",
        "--drain",
        "0.4",
        // A loaded host spoils trials: this test is of the report.
        "--spoiled-max",
        "50",
        "-i",
        "0",
        "--report",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    let t = &v["throughput"][0];
    for key in ["rate_fps", "rate_l1_bps", "rate_l2_bps"] {
        let n = t[key].as_f64().unwrap();
        assert!(
            html.contains(&format!("data-value=\"{n}\"")),
            "{key} {n} not in the report"
        );
    }
    for class in ["rfc2544-throughput", "rfc2544-latency", "rfc2544-trials"] {
        assert!(
            html.contains(&format!("<table class=\"{class}\"")),
            "{class}"
        );
    }
    let trials = t["trials"].as_array().unwrap().len();
    let rows = html
        .split("<table class=\"rfc2544-trials\"")
        .nth(1)
        .unwrap()
        .split("</table>")
        .next()
        .unwrap()
        .matches("<tr>")
        .count();
    assert_eq!(rows, trials + 1, "a row per trial and the head");
    assert!(html.contains("<svg"));
}

/// `--resume`: a campaign cut short in its 1518 B search, resumed from
/// its `--json-stream` output, ends as one whole result: the 64 B search
/// taken as it was (no trial of it runs again), the 1518 B one going on
/// from its finished trials, none interrupted, exit 0; a command with other
/// settings is refused naming the field.
#[test]
fn an_interrupted_campaign_resumes_from_its_output() {
    let _one = serial();
    if skip("an_interrupted_campaign_resumes_from_its_output") {
        return;
    }
    let lab = DutLab::new("res", "20mbit");
    let quick = [
        "--trial-time",
        "0.5",
        "--drain",
        "0.2",
        "--max-rate",
        "40Mbps",
        "--resolution",
        "5%",
        // a busy 2-CPU machine spoils a debug build's trials now and then
        "--spoiled-max",
        "20",
    ];
    let (events, status, signalled) = lab.interrupted(&quick, 1);
    assert!(
        signalled && status.code() == Some(130),
        "{status:?} {events:#?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.jsonl");
    let lines: Vec<String> = events.iter().map(|e| e.to_string()).collect();
    std::fs::write(&file, lines.join("\n")).unwrap();
    let cut = &events.last().unwrap()["data"]["result"]["throughput"];
    let done_1518 = cut[1]["trials"].as_array().unwrap().len() - 1;
    let file_arg = file.to_str().unwrap();
    let dut_mac = lab.dut_mac();
    let resume = |extra: &[&str]| {
        Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.gen_ns,
                BIN,
                "rfc2544",
                "--tx-iface",
                "ga",
            ])
            .args([
                "--rx-iface",
                "gb",
                "--dst-mac",
                &dut_mac,
                "--src-ip",
                "198.18.0.1",
            ])
            .args([
                "--dst-ip",
                "198.18.1.2",
                "--sizes",
                "64,1518",
                "--resume",
                file_arg,
            ])
            .args(["-J", "--progress"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = resume(&quick);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Progress for people on stderr (asked: stderr is no terminal here),
    // none in the document.
    assert!(err.contains("linerate: progress: trial 1 of ~"), "{err}");
    let v = support::json(&o.stdout);
    assert!(!v.to_string().contains("of ~"), "{v}");
    let tp = v["throughput"].as_array().unwrap();
    assert_eq!(tp.len(), 2, "{v}");
    assert!(v.get("error").is_none(), "{v}");
    assert_eq!(v["config"]["resumed_from"], file_arg);
    assert_eq!(tp[0]["trials"], cut[0]["trials"], "64 B taken as it was");
    let trials = tp[1]["trials"].as_array().unwrap();
    assert!(
        trials.iter().all(|t| t.get("interrupted").is_none()),
        "{}",
        tp[1]
    );
    assert_eq!(
        trials[..done_1518],
        cut[1]["trials"].as_array().unwrap()[..done_1518]
    );
    assert!(trials.len() > done_1518 && tp[1]["rate_fps"].as_f64().unwrap() > 0.0);
    let mut other = quick;
    other[1] = "1";
    let o = resume(&other);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("trial_time_s is 0.5"),
        "{err}"
    );
}
