//! `linerate-bench instr`: user-space instructions per frame, counted by
//! callgrind (deterministic: comparable across machines and commits).
//!
//! Each path runs twice under `valgrind --tool=callgrind` on the rig, with
//! a small and a large number of frames; instructions per frame are the
//! difference of the two totals over the difference of the frames the
//! measured side itself counted (so set-up and tear-down cancel out). Only
//! the worker function that handles the frames is collected
//! (`--toggle-collect`), so the once-per-interval sampler and the
//! process's start are not in the figure; a path whose worker was inlined
//! away falls back to the whole program and says so.

use crate::machine;
use crate::scenarios::tools::linerate_bin;
use anyhow::{Context, Result, bail};
use linerate_lab::Rig;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What is measured: which side runs under callgrind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Blast,
    Sink,
    Fwd,
    /// `rr server`, per transaction answered.
    RrServer,
    /// The iperf3 client's UDP sender (`-u -b 0 -l 64`), per datagram.
    IperfUdpSender,
}

struct Case {
    name: String,
    side: Side,
    backend: &'static str,
    flows: u32,
    /// `--size 64` or `--imix`.
    imix: bool,
    /// Sink and fwd: the measured side and the sender both pinned to this
    /// CPU. The sender then fills the receive ring while the measured side
    /// waits for the CPU, and the measured side takes full batches, as
    /// under a load it cannot keep up with (the kernel drops the rest,
    /// which costs it nothing). Unpinned, the two run side by side and a
    /// measured side that keeps up wakes for every frame or two.
    one_cpu: Option<usize>,
    /// Sink: the sender's rate (`--pps`); `None`: [`SEND_PPS`].
    pps: Option<&'static str>,
}

fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    for backend in ["af_xdp", "af_packet", "socket:raw", "socket:udp"] {
        for flows in [1, 4096] {
            v.push(Case {
                name: format!("blast {backend}, {flows} flow(s), 64 B"),
                side: Side::Blast,
                backend,
                flows,
                imix: false,
                one_cpu: None,
                pps: None,
            });
        }
    }
    // 4096 flows walk in step with the 4096 buffers of every backend (a
    // buffer keeps its flow); 1000 do not, and every frame gets its flow's
    // fields written.
    v.push(Case {
        name: "blast af_xdp, 1000 flows (buffers change flows), 64 B".into(),
        side: Side::Blast,
        backend: "af_xdp",
        flows: 1000,
        imix: false,
        one_cpu: None,
        pps: None,
    });
    v.push(Case {
        name: "blast af_xdp, 1 flow, IMIX".into(),
        side: Side::Blast,
        backend: "af_xdp",
        flows: 1,
        imix: true,
        one_cpu: None,
        pps: None,
    });
    for backend in ["af_xdp", "af_packet"] {
        for flows in [1, 4096] {
            v.push(Case {
                name: format!("sink {backend}, {flows} flow(s), 64 B"),
                side: Side::Sink,
                backend,
                flows,
                imix: false,
                one_cpu: None,
                pps: None,
            });
            v.push(Case {
                name: format!("sink {backend}, {flows} flow(s), 64 B, full batches (one CPU)"),
                side: Side::Sink,
                backend,
                flows,
                imix: false,
                one_cpu: Some(1),
                pps: None,
            });
        }
        // A light load (issue 42 item 4): a wake-up for each frame or
        // two, so the per-wake-up work (the wait, the clock, the ring
        // bookkeeping) is most of the figure.
        v.push(Case {
            name: format!("sink {backend}, 1 flow, 64 B, light load ({LIGHT_PPS} pps)"),
            side: Side::Sink,
            backend,
            flows: 1,
            imix: false,
            one_cpu: None,
            pps: Some(LIGHT_PPS),
        });
    }
    v.push(Case {
        name: "fwd macswap af_xdp, 1 flow, 64 B".into(),
        side: Side::Fwd,
        backend: "af_xdp",
        flows: 1,
        imix: false,
        one_cpu: None,
        pps: None,
    });
    // As the sink's: the forwarder and the sender on one CPU, so the
    // forwarder takes full batches (its per-batch work, the kick and the
    // reclaim, spread over 64 frames) whatever else the machine runs.
    v.push(Case {
        name: "fwd macswap af_xdp, 1 flow, 64 B, full batches (one CPU)".into(),
        side: Side::Fwd,
        backend: "af_xdp",
        flows: 1,
        imix: false,
        one_cpu: Some(1),
        pps: None,
    });
    v.push(Case {
        name: "rr server, 64 B requests (per transaction)".into(),
        side: Side::RrServer,
        backend: "socket",
        flows: 1,
        imix: false,
        one_cpu: None,
        pps: None,
    });
    v.push(Case {
        name: "iperf3 UDP sender, 64 B (per datagram)".into(),
        side: Side::IperfUdpSender,
        backend: "socket",
        flows: 1,
        imix: false,
        one_cpu: None,
        pps: None,
    });
    v
}

/// The rate blast sends at to an instrumented sink or forwarder: none,
/// as fast as it goes, meant to be above what the measured side takes
/// under valgrind (some 50 times slower), so it has a batch waiting, as
/// under load, rather than an idle wake-up per frame (a fixed 200k/s
/// stopped being enough once the sink got faster). The kernel drops what
/// does not fit the ring, which costs the measured side nothing; the
/// figure is per frame it counted. With copy-mode AF_XDP on a veth the
/// kernel's side is slow, so an AF_XDP receiver can still see small
/// batches: the figure then carries its per-wake-up work.
const SEND_PPS: Option<&str> = None;

/// The sender's rate for the sink's light-load cases.
const LIGHT_PPS: &str = "30k";

/// The backend that sender uses: the rig's fastest (AF_XDP).
const SEND_BACKEND: &str = "af_xdp";

/// How long the instrumented sink or forwarder runs after it is ready: the
/// same for both frame counts, so its idle wake-ups after the burst cancel
/// out.
const MEASURED_SECS: &str = "12";

/// The sink's and forwarder's periodic check that the interface is still
/// there (excluded from the worker's count).
const LINK_CHECK_FN: &str = "*backend::link_lost";

/// The function whose instructions are collected, per side. The pattern
/// must not match anything the worker calls: callgrind toggles collection
/// at every entry of a matching function, so a closure or generic named
/// after the worker (`run_worker::{{closure}}`) would switch it off.
fn worker_fn(side: Side) -> &'static str {
    match side {
        Side::Blast => "*blast::run_worker",
        Side::Sink => "*sink::receive",
        Side::Fwd => "*worker::forward_in_place",
        Side::RrServer => "*server::serve",
        Side::IperfUdpSender => "*udp_io::udp_send",
    }
}

/// `cmd` started under callgrind on a rig host, its stderr in a file (so
/// readiness lines can be watched).
fn callgrind_start(
    rig: &Rig,
    host: usize,
    args: &[String],
    toggle: Option<&str>,
    out: &Path,
    cpu: Option<usize>,
) -> Result<(std::process::Child, PathBuf)> {
    let err = out.with_extension("stderr");
    let mut c = pinned(rig, host, "valgrind", cpu);
    c.args(["--tool=callgrind", "--quiet"])
        .arg(format!("--callgrind-out-file={}", out.display()));
    if std::env::var_os("LINERATE_INSTR_KEEP").is_some() {
        // Kept outputs are for reading: counts per instruction too (for
        // `callgrind_annotate` with objdump beside it).
        c.arg("--dump-instr=yes");
    }
    if let Some(t) = toggle {
        c.arg(format!("--toggle-collect={t}"));
        // The link check every 100 ms is work per unit of time, not per
        // frame: under valgrind (some 50 times slower) it would land on
        // the frames 50 times over. Entering it toggles collection off,
        // leaving it on again.
        c.arg(format!("--toggle-collect={LINK_CHECK_FN}"));
    }
    let child = c
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err)?)
        .spawn()
        .context("valgrind")?;
    Ok((child, err))
}

/// `program` on a rig host, held to `cpu` by taskset if one is given.
fn pinned(rig: &Rig, host: usize, program: &str, cpu: Option<usize>) -> std::process::Command {
    match cpu {
        Some(n) => {
            let mut c = rig.command(host, "taskset");
            c.args(["-c", &n.to_string(), program]);
            c
        }
        None => rig.command(host, program),
    }
}

/// Waits (bounded) for the callgrind run to end; its instruction total
/// and standard output.
fn callgrind_finish(
    mut child: std::process::Child,
    err: &Path,
    out: &Path,
    within: Duration,
) -> Result<(u64, Vec<u8>)> {
    let mut stdout = child.stdout.take().context("stdout")?;
    let reader = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut b);
        b
    });
    let status = crate::harness::exit_within(&mut child, within)?;
    let stdout = reader.join().unwrap_or_default();
    if std::env::var_os("LINERATE_INSTR_KEEP").is_some() {
        std::fs::write(out.with_extension("stdout"), &stdout)?;
    }
    if !status.success() {
        bail!(
            "{status}: {}",
            std::fs::read_to_string(err).unwrap_or_default().trim()
        );
    }
    let text = std::fs::read_to_string(out).context("callgrind output")?;
    let total = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("no totals in the callgrind output")?;
    Ok((total, stdout))
}

fn frames_flags(c: &Case) -> Vec<String> {
    let mut v: Vec<String> = vec!["--dst-ip".into(), "198.18.0.2".into()];
    if c.flows > 1 {
        v.push("--dst-port".into());
        v.push(format!("1000-{}", 999 + c.flows));
    }
    if c.imix {
        v.push("--imix".into());
    } else {
        v.push("--size".into());
        v.push("64".into());
    }
    v
}

/// One measurement: the instruction total of the measured side and the
/// frames it counted.
fn measure(rig: &Rig, c: &Case, frames: u64, toggle: bool, dir: &Path) -> Result<(u64, u64)> {
    let bin = linerate_bin()?.display().to_string();
    let out = dir.join(format!(
        "cg-{}-{frames}",
        c.name.replace([' ', ',', ':'], "_")
    ));
    let t = toggle.then(|| worker_fn(c.side));
    let blast_args = |count: u64, backend: &str, rate: Option<&str>| -> Vec<String> {
        let mut a = vec![
            bin.clone(),
            "blast".into(),
            "--iface".into(),
            "veth0".into(),
            "--backend".into(),
            backend.into(),
            "--count".into(),
            count.to_string(),
            "--no-end-marker".into(),
            "-i".into(),
            "0".into(),
            "-t".into(),
            "120".into(),
            "-J".into(),
        ];
        if let Some(r) = rate {
            a.extend(["--pps".into(), r.into()]);
        }
        a.extend(frames_flags(c));
        a
    };
    match c.side {
        Side::RrServer => {
            // The server under callgrind on host 1; the client (native,
            // 16 requests in flight) for 1 s per 100,000 frames asked.
            let args: Vec<String> = [&bin, "rr", "server", "-t", MEASURED_SECS, "-i", "0", "-J"]
                .map(String::from)
                .to_vec();
            let (child, err) = callgrind_start(rig, 1, &args, t, &out, c.one_cpu)?;
            wait_ready(&err, "rr", &c.name)?;
            let secs = (frames as f64 / 100_000.0).max(0.2);
            let client = rig
                .command(0, &bin)
                .args([
                    "rr",
                    "client",
                    "198.18.0.2",
                    "--outstanding",
                    "16",
                    "-l",
                    "64",
                    "-i",
                    "0",
                ])
                .args(["-t", &format!("{secs}")])
                .output()
                .context("rr client")?;
            if !client.status.success() {
                bail!("rr client: {}", String::from_utf8_lossy(&client.stderr));
            }
            let (ir, stdout) = callgrind_finish(child, &err, &out, Duration::from_secs(300))?;
            let v: Value = serde_json::from_slice(&stdout).context("rr server -J")?;
            Ok((ir, v["counts"]["answered"].as_u64().unwrap_or(0)))
        }
        Side::IperfUdpSender => {
            // A native server on host 1; the client under callgrind sends
            // `frames` datagrams of 64 bytes as fast as it can.
            let mut server = rig
                .command(1, &bin)
                .args(["-s", "-1", "-J"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .context("server")?;
            // Listening (asked of `ss`, bounded), not a fixed pause.
            if let Err(e) = crate::scenarios::tools::wait_tcp_listen(rig, 1, 5201) {
                crate::harness::stop_child(&mut server);
                return Err(e);
            }
            let args: Vec<String> = vec![
                bin.clone(),
                "-c".into(),
                "198.18.0.2".into(),
                "-u".into(),
                "-b".into(),
                "0".into(),
                "-l".into(),
                "64".into(),
                "-n".into(),
                (frames * 64).to_string(),
                "-J".into(),
            ];
            let r = callgrind_start(rig, 0, &args, t, &out, None).and_then(|(child, err)| {
                callgrind_finish(child, &err, &out, Duration::from_secs(300))
            });
            crate::harness::stop_child(&mut server);
            let (ir, stdout) = r?;
            let v: Value = serde_json::from_slice(&stdout).context("client -J")?;
            Ok((ir, v["end"]["sum"]["packets"].as_u64().unwrap_or(0)))
        }
        Side::Blast => {
            let (child, err) =
                callgrind_start(rig, 0, &blast_args(frames, c.backend, None), t, &out, None)?;
            let (ir, stdout) = callgrind_finish(child, &err, &out, Duration::from_secs(300))?;
            let v: Value = serde_json::from_slice(&stdout).context("blast -J")?;
            Ok((ir, v["packets"].as_u64().unwrap_or(0)))
        }
        Side::Sink | Side::Fwd => {
            // The measured side on host 1 under callgrind; blast (native)
            // from host 0, faster than the instrumented side takes it.
            let mode: &[&str] = match c.side {
                Side::Sink => &["sink"],
                _ => &["fwd", "--mode", "macswap"],
            };
            let mut args = vec![bin.clone()];
            args.extend(mode.iter().map(|m| m.to_string()));
            args.extend(
                [
                    "--iface",
                    "veth0",
                    "--backend",
                    c.backend,
                    "-t",
                    MEASURED_SECS,
                    "-i",
                    "0",
                    "-J",
                ]
                .map(String::from),
            );
            let (child, err) = callgrind_start(rig, 1, &args, t, &out, c.one_cpu)?;
            wait_ready(&err, "receiving on|forwarding", &c.name)?;
            // Every flow's first frame, slowly: what the measured side does
            // once per flow (its table entry, its histogram) is done before
            // the burst, the same in both runs, so it cancels out and the
            // burst does not overflow the ring while it happens.
            if c.flows > 1 {
                let warm = rig
                    .command(0, &bin)
                    .args(&blast_args(u64::from(c.flows), "af_packet", Some("5k"))[1..])
                    .output()
                    .context("blast")?;
                if !warm.status.success() {
                    bail!("blast: {}", String::from_utf8_lossy(&warm.stderr));
                }
            }
            let sent = pinned(rig, 0, &bin, c.one_cpu)
                .args(&blast_args(frames, SEND_BACKEND, c.pps.or(SEND_PPS))[1..])
                .output()
                .context("blast")?;
            if !sent.status.success() {
                bail!("blast: {}", String::from_utf8_lossy(&sent.stderr));
            }
            let (ir, stdout) = callgrind_finish(child, &err, &out, Duration::from_secs(300))?;
            let v: Value = serde_json::from_slice(&stdout).context("-J of the measured side")?;
            let n = match c.side {
                Side::Sink => v["packets"].as_u64(),
                _ => v["counts"]["rx"].as_u64(),
            }
            .unwrap_or(0);
            Ok((ir, n))
        }
    }
}

/// Waits (up to 120 s) until the instrumented side's stderr shows one of
/// the `|`-separated readiness words.
fn wait_ready(err: &Path, words: &str, name: &str) -> Result<()> {
    let until = Instant::now() + Duration::from_secs(120);
    while !std::fs::read_to_string(err).is_ok_and(|e| words.split('|').any(|w| e.contains(w))) {
        if Instant::now() > until {
            bail!("{name}: not ready under valgrind in 120 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Whether case `name` is one `only` asks for: its name contains one of
/// the words, or does with its commas left out (`--only` splits at
/// commas: `--only "blast af_xdp 4096"` names one case).
fn wanted(name: &str, only: &[String]) -> bool {
    let bare = name.replace(',', "");
    only.is_empty()
        || only
            .iter()
            .any(|w| name.contains(w.as_str()) || bare.contains(w.as_str()))
}

/// Runs every case (or those whose name contains one of `only`).
pub fn run(small: u64, large: u64, only: &[String], out_dir: &Path) -> Result<()> {
    crate::scenarios::tools::need(&["valgrind", "ip"])?;
    if small == 0 || large <= small {
        bail!("--frames: two counts, the second larger");
    }
    let rig = Rig::pair().context("the rig (root)")?;
    let dir = tempfile_dir()?;
    let started = Instant::now();
    let mut rows = Vec::new();
    println!(
        "instructions per frame (callgrind, user space; ({large} - {small}) frames; worker function only)"
    );
    for c in cases().into_iter().filter(|c| wanted(&c.name, only)) {
        let mut toggle = true;
        let mut m = (
            measure(&rig, &c, small, toggle, &dir)?,
            measure(&rig, &c, large, toggle, &dir)?,
        );
        if m.0.0 == 0 || m.1.0 == 0 {
            // The worker was inlined: the whole program instead.
            toggle = false;
            m = (
                measure(&rig, &c, small, toggle, &dir)?,
                measure(&rig, &c, large, toggle, &dir)?,
            );
        }
        let ((ir1, n1), (ir2, n2)) = m;
        let per = if n2 > n1 {
            (ir2 as f64 - ir1 as f64) / (n2 - n1) as f64
        } else {
            f64::NAN
        };
        println!(
            "{:<40} {:>9.1}   ({} / {} frames counted; {})",
            c.name,
            per,
            n1,
            n2,
            if toggle {
                "worker only"
            } else {
                "whole program"
            }
        );
        rows.push(json!({
            "path": c.name, "instructions_per_frame": per,
            "frames": [n1, n2], "instructions": [ir1, ir2],
            "collected": if toggle { worker_fn(c.side) } else { "whole program" },
        }));
    }
    let result = json!({
        "scenario": "instr",
        "machine": machine::describe(),
        "counted_by": "valgrind --tool=callgrind, instructions retired in user space",
        "elapsed_s": started.elapsed().as_secs_f64(),
        "paths": rows,
    });
    println!("{}", serde_json::to_string_pretty(&result["machine"])?);
    std::fs::create_dir_all(out_dir)?;
    let stamp = result["machine"]["date_utc"]
        .as_str()
        .unwrap_or("now")
        .replace(':', "");
    let path = out_dir.join(format!("instr-{stamp}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&result)?)?;
    println!("raw results: {}", path.display());
    // LINERATE_INSTR_KEEP=1 keeps callgrind's own outputs (for
    // callgrind_annotate: where in the worker the instructions go).
    if std::env::var_os("LINERATE_INSTR_KEEP").is_some() {
        println!("callgrind outputs kept in {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn tempfile_dir() -> Result<PathBuf> {
    let d = std::env::temp_dir().join(format!("linerate-instr-{}", std::process::id()));
    std::fs::create_dir_all(&d)?;
    Ok(d)
}
