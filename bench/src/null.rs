//! DPDK's `net_null`, where the driver only frees what it is handed and
//! makes up what it is asked for: no kernel and no wire, the frame
//! builders and the mbuf handling alone (issue 46).
//!
//! - `txonly`: `linerate blast --backend dpdk` against `dpdk-testpmd
//!   --forward-mode=txonly`, 64-byte frames (60 and the FCS) from one
//!   port;
//! - `io`: `linerate fwd --backend dpdk --mode io` against `dpdk-testpmd
//!   --forward-mode=io --port-topology=loop`, what one port receives sent
//!   back out of it.
//!
//! testpmd runs with `--burst=64`, linerate's burst and testpmd's best for
//! these jobs (callgrind: io 121.2 instructions a frame at 64 against
//! 124.9 at its default 32).
//!
//! Both run their forwarding on CPU 0, their EAL's main lcore on CPU 1
//! (testpmd prints its statistics from there once a second). Each figure
//! is the tool's own count of the frames the driver took, per second:
//! linerate's interval rows (`-i 1`), testpmd's `Tx-pps` lines, the first
//! second of each left out (start-up), the median of the rest. linerate
//! writes its 18-byte probe (flow, sequence, send time) into every frame
//! it sends; testpmd's txonly writes its headers only. Runs alternate
//! which tool goes first.
//!
//! Both tools run twice over: with their memory in 4 KiB pages
//! (`--no-huge`, what a host without hugepages has) and, where 2 MiB
//! hugepages are free and hugetlbfs is mounted, in hugepages (testpmd's
//! best; `echo 300 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages`
//! and `mount -t hugetlbfs nodev /dev/hugepages` reserve them, and the
//! bench says when it finds none).
//!
//! `--callgrind` adds the instructions per frame of linerate's worker
//! (callgrind, user space, the difference of two counts over the
//! difference of their frames), with the same EAL and port.

use crate::machine;
use crate::scenarios::tools::{linerate_bin, need};
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Where the forwarding runs, and the EAL's main lcore.
const WORK_CPU: usize = 0;
const MAIN_CPU: usize = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Job {
    TxOnly,
    Io,
}

impl Job {
    fn name(self) -> &'static str {
        match self {
            Job::TxOnly => "txonly",
            Job::Io => "io",
        }
    }
}

/// Where both tools' memory (and so their mbufs) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Memory {
    /// 4 KiB pages (`--no-huge`).
    Pages,
    /// 2 MiB hugepages.
    Huge,
}

impl Memory {
    fn name(self) -> &'static str {
        match self {
            Memory::Pages => "4k-pages",
            Memory::Huge => "hugepages",
        }
    }

    /// The EAL's memory options.
    fn eal(self) -> &'static [&'static str] {
        match self {
            Memory::Pages => &["--no-huge", "-m", "256"],
            Memory::Huge => &["-m", "256", "--in-memory"],
        }
    }
}

/// Whether 2 MiB hugepages enough for one tool's 256 MiB are free and
/// hugetlbfs is mounted (the reason where not).
fn hugepages() -> std::result::Result<(), String> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let free = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("HugePages_Free:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let mounted = std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"));
    match (free >= 160, mounted) {
        (true, true) => Ok(()),
        (false, _) => Err(format!("{free} 2 MiB hugepages free, 160 needed")),
        (true, false) => Err("no hugetlbfs mounted".into()),
    }
}

/// linerate's EAL: its main lcore on MAIN_CPU, one net_null port.
fn eal(memory: Memory) -> String {
    format!(
        "-l {MAIN_CPU} {} --no-pci --no-shconf --vdev net_null0",
        memory.eal().join(" ")
    )
}

/// linerate's arguments for `job`, sending or forwarding for `secs` (or
/// `count` frames).
fn linerate_args(job: Job, memory: Memory, secs: f64, count: Option<u64>) -> Vec<String> {
    let mut a: Vec<String> = match job {
        Job::TxOnly => [
            "blast",
            "--backend",
            "dpdk",
            "--iface",
            "net_null0",
            "--src-ip",
            "198.18.0.1",
            "--dst-ip",
            "198.18.0.2",
            "--dst-mac",
            "02:00:00:00:00:02",
            "--size",
            "64",
            "--no-end-marker",
        ]
        .map(String::from)
        .to_vec(),
        Job::Io => [
            "fwd",
            "--backend",
            "dpdk",
            "--iface",
            "net_null0",
            "--mode",
            "io",
        ]
        .map(String::from)
        .to_vec(),
    };
    a.extend([
        "--eal".into(),
        eal(memory),
        "--cores".into(),
        WORK_CPU.to_string(),
    ]);
    match count {
        Some(n) => a.extend(["--count".into(), n.to_string(), "-t".into(), "600".into()]),
        None => a.extend(["-t".into(), format!("{secs}")]),
    }
    a
}

/// Runs `cmd` to its end within `limit` (stopped by PID past it); its
/// standard output.
fn output_within(mut cmd: Command, limit: Duration) -> Result<String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("{cmd:?}"))?;
    let mut stdout = child.stdout.take().context("stdout")?;
    let mut stderr = child.stderr.take().context("stderr")?;
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let status =
        crate::harness::exit_within(&mut child, limit).with_context(|| format!("{cmd:?}"))?;
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    // testpmd stopped by timeout's SIGINT ends with 124 (a SIGKILL 5 s later if
    // it ignores it: its output pipes close, so the readers end).
    if !status.success() && status.code() != Some(124) {
        bail!("{cmd:?}: {status}: {}", err.trim());
    }
    Ok(out)
}

/// The median of `v` (empty: none).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// linerate's frames per second: the median of its whole one-second
/// interval rows after the first (`-J` with `-i 1`; the sender's `tx` or
/// the forwarder's sum row).
fn linerate_pps(doc: &Value) -> Option<f64> {
    let per_s: Vec<f64> = doc["intervals"]
        .as_array()?
        .iter()
        .skip(1)
        .filter(|iv| iv["seconds"].as_f64().is_some_and(|s| s > 0.99))
        .filter_map(|iv| {
            iv["sums"].as_array()?.iter().find_map(|s| {
                let p = s["packets"].as_f64()?;
                let role = s["role"].as_str()?;
                (role == "tx" || role == "forwarded")
                    .then(|| p / iv["seconds"].as_f64().unwrap_or(1.0))
            })
        })
        .collect();
    median(per_s)
}

/// testpmd's frames per second: the median of its `Tx-pps:` lines after
/// the first.
fn testpmd_pps(out: &str) -> Option<f64> {
    let per_s: Vec<f64> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Tx-pps:"))
        .filter_map(|v| v.split_whitespace().next()?.parse().ok())
        .skip(1)
        .collect();
    median(per_s)
}

fn run_linerate(job: Job, memory: Memory, secs: f64) -> Result<f64> {
    let bin = linerate_bin()?;
    let mut c = Command::new("taskset");
    c.args(["-c", &format!("{WORK_CPU},{MAIN_CPU}")])
        .arg(&bin)
        .args(linerate_args(job, memory, secs, None))
        .args(["-i", "1", "-J"]);
    let out = output_within(c, Duration::from_secs_f64(secs + 30.0))?;
    let doc: Value = serde_json::from_str(&out).context("linerate's -J")?;
    linerate_pps(&doc).with_context(|| format!("no whole interval after the first in {doc}"))
}

fn run_testpmd(job: Job, memory: Memory, secs: f64) -> Result<f64> {
    let prefix = format!("linerate-bench-null-{}", std::process::id());
    let lcores = format!("{WORK_CPU},{MAIN_CPU}");
    let main = MAIN_CPU.to_string();
    let stop = format!("{}", secs.ceil() as u64 + 2);
    let mut c = Command::new("timeout");
    c.args(["-s", "INT", "-k", "5", &stop, "dpdk-testpmd", "-l", &lcores])
        .args(["--main-lcore", &main, "--file-prefix", &prefix])
        .args(memory.eal())
        .args(["--no-pci", "--vdev", "net_null0", "--"])
        .args([
            "--nb-cores=1",
            "--total-num-mbufs=8192",
            "--burst=64",
            "--stats-period",
            "1",
        ]);
    match job {
        Job::TxOnly => c.args(["--forward-mode=txonly", "--txpkts=60"]),
        Job::Io => c.args(["--forward-mode=io", "--port-topology=loop"]),
    };
    let out = output_within(c, Duration::from_secs_f64(secs + 30.0));
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    testpmd_pps(&out?).context("no Tx-pps line after the first in testpmd's output")
}

/// Instructions of linerate's worker for `frames` frames (callgrind).
fn callgrind(job: Job, frames: u64, dir: &Path) -> Result<u64> {
    let bin = linerate_bin()?;
    let out = dir.join(format!("cg-null-{}-{frames}", job.name()));
    let worker = match job {
        Job::TxOnly => "*blast::run_worker",
        Job::Io => "*worker::forward_in_place",
    };
    let mut c = Command::new("valgrind");
    c.args(["--tool=callgrind", "--quiet"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(format!("--toggle-collect={worker}"))
        .arg("--toggle-collect=*backend::link_lost")
        .arg(&bin)
        .args(linerate_args(job, Memory::Pages, 0.0, Some(frames)))
        .arg("-J");
    output_within(c, Duration::from_secs(600))?;
    let text = std::fs::read_to_string(&out).context("callgrind output")?;
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no totals in the callgrind output")
}

/// Runs `job` in `memory` `runs` times with each tool, alternating which
/// goes first; prints the medians and the ratio; their raw figures.
fn run_job(job: Job, memory: Memory, runs: usize, secs: f64) -> Result<Value> {
    let (mut lr, mut tp) = (Vec::new(), Vec::new());
    for r in 0..runs {
        let order: [bool; 2] = if r % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for ours in order {
            if ours {
                lr.push(run_linerate(job, memory, secs).context("linerate")?);
            } else {
                match run_testpmd(job, memory, secs) {
                    Ok(v) => tp.push(v),
                    Err(e) => eprintln!("  testpmd {}: {e:#}", job.name()),
                }
            }
        }
    }
    let (l, t) = (median(lr.clone()), median(tp.clone()));
    let ratio = l.zip(t).map(|(l, t)| l / t);
    println!(
        "{:<7} {:<9} linerate {:>8.2} Mpps   testpmd {:>8.2} Mpps   ratio {}",
        job.name(),
        memory.name(),
        l.unwrap_or(f64::NAN) / 1e6,
        t.unwrap_or(f64::NAN) / 1e6,
        ratio.map_or("-".into(), |r| format!("{r:.2}x"))
    );
    Ok(json!({
        "job": job.name(), "memory": memory.name(), "linerate_pps": lr, "testpmd_pps": tp,
        "median_linerate_pps": l, "median_testpmd_pps": t, "ratio": ratio,
    }))
}

/// Runs both jobs `runs` times each, alternating; prints medians and
/// ratios and writes the raw figures under `out_dir`.
pub fn run(runs: usize, secs: f64, with_callgrind: bool, out_dir: &Path) -> Result<()> {
    need(&["dpdk-testpmd", "taskset", "timeout"])?;
    if with_callgrind {
        need(&["valgrind"])?;
    }
    let secs = secs.max(3.0);
    println!(
        "dpdk-null: frames per second the driver took, each tool's own count, median of its 1-s figures after the first; 64 B; forwarding on CPU {WORK_CPU}, EAL main lcore on CPU {MAIN_CPU}; {runs} runs of {secs} s, alternating"
    );
    let mut memories = vec![Memory::Pages];
    match hugepages() {
        Ok(()) => memories.push(Memory::Huge),
        Err(why) => println!(
            "hugepages: {why}; skipped (echo 300 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages; mount -t hugetlbfs nodev /dev/hugepages)"
        ),
    }
    let mut rows = Vec::new();
    for memory in memories {
        for job in [Job::TxOnly, Job::Io] {
            rows.push(run_job(job, memory, runs, secs)?);
        }
    }
    let mut instr = Vec::new();
    if with_callgrind {
        let dir = std::env::temp_dir().join(format!("linerate-null-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let (small, large) = (200_000u64, 1_000_000u64);
        for job in [Job::TxOnly, Job::Io] {
            let per = (callgrind(job, large, &dir)? as f64 - callgrind(job, small, &dir)? as f64)
                / (large - small) as f64;
            println!(
                "{:<7} linerate worker: {per:.1} instructions per frame (callgrind, user space, ({large} - {small}) frames)",
                job.name()
            );
            instr.push(
                json!({"job": job.name(), "instructions_per_frame": per, "frames": [small, large]}),
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let result = json!({
        "scenario": "dpdk-null",
        "machine": machine::describe(),
        "counted_by": "each tool's own count of the frames net_null took (linerate's interval rows, testpmd's Tx-pps)",
        "seconds": secs,
        "jobs": rows,
        "instructions": instr,
    });
    println!("{}", serde_json::to_string_pretty(&result["machine"])?);
    std::fs::create_dir_all(out_dir)?;
    let stamp = result["machine"]["date_utc"]
        .as_str()
        .unwrap_or("now")
        .replace(':', "");
    let path = out_dir.join(format!("dpdk-null-{stamp}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&result)?)?;
    println!("raw results: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn testpmd_rates_leave_out_the_first_second() {
        let out = "  Tx-pps:     40000000          Tx-bps:  1\n  Rx-pps: 0\n  Tx-pps:     50000000          Tx-bps:  1\n  Tx-pps:     52000000          Tx-bps:  1\n  Tx-pps:     51000000          Tx-bps:  1\n";
        assert_eq!(testpmd_pps(out), Some(51_000_000.0));
        assert_eq!(testpmd_pps("nothing"), None);
    }

    #[test]
    fn linerate_rates_are_whole_seconds_after_the_first() {
        let iv =
            |secs: f64, p: u64| json!({"seconds": secs, "sums": [{"role": "tx", "packets": p}]});
        let doc = json!({"intervals": [iv(1.0, 5), iv(1.0, 20), iv(1.0, 30), iv(0.4, 1)]});
        assert_eq!(linerate_pps(&doc), Some(25.0));
        let fwd = json!({"intervals": [iv(1.0, 5), {"seconds": 1.0, "sums": [{"role": "forwarded", "packets": 7}]}]});
        assert_eq!(linerate_pps(&fwd), Some(7.0));
    }
}
