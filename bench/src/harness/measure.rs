//! One measured window of one contender.

use super::*;

/// One measured window.
#[derive(Debug, Default)]
pub(crate) struct Measured {
    pub(crate) pkts: u64,
    pub(crate) bytes: u64,
    pub(crate) secs: f64,
    pub(crate) cpu: f64,
    /// CPU of the helper processes (the servers) in the window.
    pub(crate) helper_cpu: f64,
    /// Receiver interface drops in the window.
    pub(crate) rx_dropped: u64,
    /// The sending veth's tx drops: its peer's ring was full (the
    /// receiver's NAPI did not keep up).
    pub(crate) ring_dropped: u64,
    /// The namespace's UDP RcvbufErrors / InErrors in the window.
    pub(crate) rcvbuf_errors: u64,
    pub(crate) udp_in_errors: u64,
    /// The receiver's NAPI threads in the window (from
    /// /proc/PID/schedstat): ns on a CPU, ns waiting on a run queue
    /// for one, and times run.
    pub(crate) napi: [u64; 3],
    /// What the server's report counted at its socket, if it reports.
    pub(crate) socket: Option<SocketCount>,
    /// The scenario's count (`Metric::Count`) in the window.
    pub(crate) count: Option<u64>,
    /// The client's own claimed rate, if it makes one.
    pub(crate) claimed: Option<f64>,
}

/// The scenario's count now, if it ranks by one.
pub(crate) fn read_count(rig: &Rig, sc: &Scenario) -> Result<Option<u64>> {
    match sc.metric {
        Metric::Count(c) => Ok(Some((c.read)(rig).context(c.what)?)),
        _ => Ok(None),
    }
}

pub(crate) fn measure_once(
    rig: &Rig,
    sc: &Scenario,
    c: &Contender,
    cfg: &Config,
    napi: &[i32],
) -> Result<Measured> {
    let run_for = WARMUP + cfg.window + Duration::from_secs(2);
    let mut running = (c.start)(rig, run_for).with_context(|| format!("starting {}", c.name))?;
    std::thread::sleep(WARMUP);
    let result = (|| -> Result<Measured> {
        if let Ok(Some(status)) = running.child.try_wait() {
            anyhow::bail!("{} exited early ({status})", c.name);
        }
        let pid = running.child.id();
        let helpers_cpu = || -> f64 { running.helpers.iter().map(|h| tree_cpu_s(h.id())).sum() };
        let cpu0 = tree_cpu_s(pid);
        let helper0 = helpers_cpu();
        let before = rig.stats(sc.receiver)?;
        // The rig is a pair: the other host sends.
        let sender0 = rig.stats(1 - sc.receiver)?;
        let udp0 = udp_errors(rig, sc.receiver);
        let ip0 = ip_received(rig, sc.receiver);
        let napi0 = schedstat(napi);
        let count0 = read_count(rig, sc)?;
        let t0 = Instant::now();
        std::thread::sleep(cfg.window);
        let count1 = read_count(rig, sc)?;
        let napi1 = schedstat(napi);
        let after = rig.stats(sc.receiver)?;
        let sender1 = rig.stats(1 - sc.receiver)?;
        let udp1 = udp_errors(rig, sc.receiver);
        let ip1 = ip_received(rig, sc.receiver);
        let secs = t0.elapsed().as_secs_f64();
        let cpu = tree_cpu_s(pid) - cpu0;
        let helper_cpu = helpers_cpu() - helper0;
        Ok(Measured {
            // A GSO packet (the rr client's batch of requests) crosses a
            // veth whole and counts one there; the receiver's IP layer
            // counts its segments, the datagrams it carries.
            pkts: (after.rx_packets - before.rx_packets).max(ip1.saturating_sub(ip0)),
            bytes: after.rx_bytes - before.rx_bytes,
            secs,
            cpu,
            helper_cpu,
            rx_dropped: after.rx_dropped.saturating_sub(before.rx_dropped),
            ring_dropped: sender1.tx_dropped.saturating_sub(sender0.tx_dropped),
            rcvbuf_errors: udp1.0.saturating_sub(udp0.0),
            udp_in_errors: udp1.1.saturating_sub(udp0.1),
            napi: [0, 1, 2].map(|i| napi1[i].saturating_sub(napi0[i])),
            socket: None,
            count: count0.zip(count1).map(|(a, b)| b.saturating_sub(a)),
            claimed: None,
        })
    })();
    let result = match (result, running.report.take()) {
        (Ok(mut m), Some(report)) => {
            // The server reports when the test ends: let the client run
            // out its -t (it was started for the window and 2 s more).
            if !wait_exit(&mut running.child, run_for + Duration::from_secs(5)) {
                eprintln!("  {}: the client did not end by itself; stopped", c.name);
            }
            for h in &mut running.helpers {
                wait_exit(h, Duration::from_secs(5));
            }
            let text = std::fs::read_to_string(&report.path).unwrap_or_default();
            let _ = std::fs::remove_file(&report.path);
            m.socket = serde_json::from_str(&text)
                .ok()
                .and_then(|v| socket_count(&v, report.datagram_len));
            match m.socket {
                Some(_) => Ok(m),
                // linerate's own server must report; a peer's missing
                // report is a hole in its column.
                None if is_ours(c.name) => Err(anyhow::anyhow!(
                    "{}: no usable server report ({} bytes of output)",
                    c.name,
                    text.len()
                )),
                None => {
                    eprintln!(
                        "  {}: no usable server report ({} bytes of output)",
                        c.name,
                        text.len()
                    );
                    Ok(m)
                }
            }
        }
        (r, _) => r,
    };
    // A client that claims a rate writes it when it ends: let it end by
    // itself (it was started for the window and 2 s more).
    let claim = running.claim.take();
    if result.is_ok()
        && claim.is_some()
        && !wait_exit(&mut running.child, run_for + Duration::from_secs(5))
    {
        eprintln!("  {}: the client did not end by itself; stopped", c.name);
    }
    stop(&mut running.child);
    for h in &mut running.helpers {
        stop(h);
    }
    for undo in running.restore.drain(..) {
        undo();
    }
    let result = match (result, claim) {
        (Ok(mut m), Some(claim)) => {
            let text = std::fs::read_to_string(&claim.path).unwrap_or_default();
            let _ = std::fs::remove_file(&claim.path);
            m.claimed = (claim.parse)(&text);
            if m.claimed.is_none() {
                eprintln!(
                    "  {}: no claimed rate in its output ({} bytes)",
                    c.name,
                    text.len()
                );
            }
            Ok(m)
        }
        (r, claim) => {
            if let Some(claim) = claim {
                let _ = std::fs::remove_file(&claim.path);
            }
            r
        }
    };
    // A sender that failed or delivered nothing: show what it said.
    if !matches!(&result, Ok(m) if m.pkts > 0) {
        let tail = stderr_tail(&mut running.child);
        if !tail.is_empty() {
            eprintln!("  {} said:\n{tail}", c.name);
        }
    }
    match result {
        // A peer tool that fails is a hole in its column, not the end of
        // the run; linerate failing is an error.
        Err(e) if !is_ours(c.name) => {
            eprintln!("  warning: {e:#}; counted as 0 for this run");
            Ok(Measured {
                secs: cfg.window.as_secs_f64(),
                ..Measured::default()
            })
        }
        r => r,
    }
}
