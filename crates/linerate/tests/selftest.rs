//! `linerate selftest`: a test against an in-process server; Ctrl-C ends
//! it early with the report of what ran (issue 28: it exited 130 with no
//! report, and with -J nothing on stdout).

mod support;

use std::process::Command;
use std::time::{Duration, Instant};
use support::{Proc, json, linerate};

#[test]
fn selftest_reports_what_ran_when_interrupted() {
    for json_out in [true, false] {
        let mut cmd = linerate();
        cmd.args(["selftest", "-t", "20"]);
        if json_out {
            cmd.arg("-J");
        }
        let p = Proc::spawn(&mut cmd);
        std::thread::sleep(Duration::from_millis(2500));
        let t0 = Instant::now();
        let killed = Command::new("kill")
            .args(["-INT", &p.pid().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let out = p.wait(Duration::from_secs(10));
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        if json_out {
            let v = json(&out.stdout);
            let secs = v["end"]["sum_received"]["seconds"].as_f64().unwrap();
            assert!((1.0..10.0).contains(&secs), "{secs}");
            assert!(v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0);
        } else {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("receiver"), "{text}");
        }
    }
}
