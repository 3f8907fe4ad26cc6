//! The figures over a scenario's samples: medians, ratios against the
//! peers, CPU cost per million packets, implausible windows.

use super::*;

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// CPU milliseconds per million packets (0 with no packets).
pub(crate) fn ms_per_million(cpu_s: f64, pkts: u64) -> f64 {
    if pkts > 0 {
        cpu_s * 1e3 / (pkts as f64 / 1e6)
    } else {
        0.0
    }
}

/// Why a window cannot be trusted: its processes used more CPU time than
/// the machine had in it (the VM was paused, or its clocks jumped).
pub(crate) fn implausible(m: &Measured) -> Option<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let used = m.cpu + m.helper_cpu;
    (used > m.secs * cpus * 1.1).then(|| {
        format!(
            "{used:.2} CPU-seconds used in a {:.2} s window on {cpus} CPUs",
            m.secs
        )
    })
}

/// The median of `f` over contender `name`'s samples.
pub(crate) fn contender_median(samples: &[Sample], name: &str, f: fn(&Sample) -> f64) -> f64 {
    median(
        samples
            .iter()
            .filter(|s| s.contender == name)
            .map(f)
            .collect(),
    )
}

/// The sending side's cost per frame that left it (received, or dropped
/// at the receiver's full ring), each linerate contender against each
/// peer: peer's CPU per frame over ours (above 1: ours costs less).
pub(crate) fn sent_cost_ratios(
    sc: &Scenario,
    samples: &[Sample],
) -> serde_json::Map<String, serde_json::Value> {
    let cost = |n: &str| contender_median(samples, n, |s| s.sent_cpu_ms_per_mpkt);
    println!(
        "\nsender CPU per frame that left the sender (received + dropped at the receiver's full ring), medians:"
    );
    for c in &sc.contenders {
        println!(
            "  {:<28} {:>7.0} ms per million frames",
            c.name,
            cost(c.name)
        );
    }
    let mut out = serde_json::Map::new();
    let names: Vec<&str> = sc.contenders.iter().map(|c| c.name).collect();
    for peer in names.iter().filter(|n| !is_ours(n)) {
        for ours in names.iter().filter(|n| is_ours(n)) {
            let r = cost(peer) / cost(ours);
            println!(
                "sent-cost ratio {ours} / {peer} (sender CPU per frame sent, peer over this): {r:.2}"
            );
            out.insert(format!("sent-cost {ours}/{peer}"), json!(r));
        }
    }
    out
}

/// Every linerate contender against every peer tool (or, in a scenario of
/// peers only, each against the last), printed and returned.
/// `at` names where the figures were counted ("" = the interface); it
/// prefixes the printed line and the key.
pub(crate) fn ratios(
    sc: &Scenario,
    medians: &[(&str, f64, f64)],
    samples: &[Sample],
    at: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let (ours, peers): (Vec<_>, Vec<_>) = if medians.iter().any(|m| is_ours(m.0)) {
        (
            medians.iter().filter(|m| is_ours(m.0)).collect(),
            medians.iter().filter(|m| !is_ours(m.0)).collect(),
        )
    } else {
        (
            medians[..medians.len() - 1].iter().collect(),
            vec![&medians[medians.len() - 1]],
        )
    };
    let mut ratios = serde_json::Map::new();
    for base in &peers {
        for (name, pps, bps) in &ours {
            let (r, what) = match sc.metric {
                Metric::Packets => (pps / base.1, "received packet rate"),
                Metric::Bits => (bps / base.2, "received bit rate"),
                Metric::Count(count) => (pps / base.1, count.unit),
                Metric::CpuPerPacket => {
                    let cost = |n: &str| contender_median(samples, n, |s| s.cpu_ms_per_mpkt);
                    (
                        cost(base.0) / cost(name),
                        "sender CPU per received packet, peer over this",
                    )
                }
            };
            println!("{at}ratio {name} / {} ({what}): {r:.2}", base.0);
            ratios.insert(format!("{at}{name}/{}", base.0), json!(r));
        }
    }
    ratios
}
