//! trafgen vs iperf3 -u, 64-byte frames, one sender core: proves the harness
//! with peer tools only.

use super::tools::{need, raise_sysctl, spawn_pinned};
use crate::harness::{Contender, Metric, Running, Scenario};
use anyhow::Result;
use linerate_lab::Rig;
use std::time::Duration;

pub const NAME: &str = "peer-udp64";
pub const ABOUT: &str =
    "trafgen vs iperf3 -u, 64-byte frames (18-byte UDP payload), sender pinned to CPU0";

const SENDER: usize = 0;
const RECEIVER: usize = 1;

pub fn trafgen(rig: &Rig, run_for: Duration) -> Result<Running> {
    trafgen_at(rig, run_for, None)
}

/// trafgen at `pps` (or as fast as it can).
pub fn trafgen_at(rig: &Rig, run_for: Duration, pps: Option<u64>) -> Result<Running> {
    let (a, b) = (rig.host(SENDER), rig.host(RECEIVER));
    let conf =
        std::env::temp_dir().join(format!("linerate-bench-trafgen-{}.cfg", std::process::id()));
    std::fs::write(
        &conf,
        format!(
            "{{ eth(da={}, sa={}, type=0x0800), ipv4(saddr={}, daddr={}, ttl=64, df), udp(sp=9, dp=9), fill(0x41, 18), }}\n",
            b.mac, a.mac, a.ipv4, b.ipv4
        ),
    )?;
    // trafgen sets socket buffer sizes it cannot raise from inside a
    // namespace: raise the (global) limits for the run, restore after.
    let restore = vec![
        raise_sysctl("/proc/sys/net/core/wmem_max", 4 << 20)?,
        raise_sysctl("/proc/sys/net/core/wmem_default", 4 << 20)?,
    ];
    let secs = run_for.as_secs().max(1).to_string();
    let conf_s = conf.to_string_lossy().to_string();
    let rate = pps.map(|p| format!("{p}pps"));
    let mut argv = vec![
        "timeout",
        "-s",
        "INT",
        &secs,
        "trafgen",
        "--dev",
        &a.iface,
        "--conf",
        &conf_s,
        "--cpus",
        "1",
        "--no-sock-mem",
    ];
    if let Some(r) = &rate {
        argv.extend(["--rate", r.as_str()]);
    }
    let child = spawn_pinned(rig, SENDER, 0, &argv)?;
    Ok(Running {
        child,
        helpers: vec![],
        restore,
        report: None,
        claim: None,
    })
}

pub fn iperf3(rig: &Rig, run_for: Duration) -> Result<Running> {
    iperf3_at(rig, run_for, None)
}

/// iperf3 -u with 18-byte datagrams at `rate` (iperf3's -b) or -b 0.
pub fn iperf3_at(rig: &Rig, run_for: Duration, rate: Option<&str>) -> Result<Running> {
    let b = rig.host(RECEIVER);
    let server = spawn_pinned(
        rig,
        RECEIVER,
        1,
        &["iperf3", "-s", "-1", "-B", &b.ipv4.to_string()],
    )?;
    super::tools::wait_tcp_listen(rig, RECEIVER, 5201)?;
    let secs = run_for.as_secs().max(1).to_string();
    let child = spawn_pinned(
        rig,
        SENDER,
        0,
        &[
            "iperf3",
            "-c",
            &b.ipv4.to_string(),
            "-u",
            "-b",
            rate.unwrap_or("0"),
            "-l",
            "18",
            "-t",
            &secs,
        ],
    )?;
    Ok(Running {
        child,
        helpers: vec![server],
        restore: vec![],
        report: None,
        claim: None,
    })
}

pub fn build() -> Scenario {
    Scenario {
        name: NAME,
        about: ABOUT,
        receiver: RECEIVER,
        receive_cpu: Some(1),
        napi_setup: false,
        queues: 1,
        metric: Metric::Packets,
        setup: None,
        contenders: vec![
            Contender {
                name: "trafgen",
                start: trafgen,
            },
            Contender {
                name: "iperf3 -u -l 18",
                start: iperf3,
            },
        ],
        check: || need(&["trafgen", "iperf3", "taskset", "timeout", "ethtool", "ss"]),
    }
}
