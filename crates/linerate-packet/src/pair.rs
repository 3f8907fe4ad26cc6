//! A sender and its receivers in one process: sinks counting on their
//! ports while something sends, the choreography `blast --rx-iface` and
//! RFC 2544's trials share (and the tests on loopback ports): every sink
//! ready before the first frame, a drain after the last for what the
//! device still holds, then the sinks stopped and their counts taken.

use crate::{SinkConfig, SinkReport, sink};
use linerate_run::Interval;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a sink may take to be ready.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// Runs `send` while a sink counts on each of `sinks`; after it, waits
/// `drain` (when `drained(&sent)`: not after a send that failed) and stops
/// the sinks. Returns what `send` returned and each sink's report (or why
/// it failed), in the order of `sinks`. A sink not ready in 10 s ends it
/// all before anything is sent.
pub fn while_counting<T: Send>(
    sinks: &[SinkConfig],
    drain: Duration,
    send: impl FnOnce() -> T + Send,
    drained: impl FnOnce(&T) -> bool,
) -> Result<(T, Vec<Result<SinkReport, String>>), String> {
    while_counting_live(sinks, drain, send, drained, &|_, _| {})
}

/// [`while_counting`], handing each sink's intervals to `on_interval`
/// (with the sink's place in `sinks`) as they end: what arrived so far,
/// for a caller that reports while the send goes on.
pub fn while_counting_live<T: Send>(
    sinks: &[SinkConfig],
    drain: Duration,
    send: impl FnOnce() -> T + Send,
    drained: impl FnOnce(&T) -> bool,
    on_interval: &(dyn Fn(usize, &Interval) + Sync),
) -> Result<(T, Vec<Result<SinkReport, String>>), String> {
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stop = &stop;
        let handles: Vec<_> = sinks
            .iter()
            .enumerate()
            .map(|(i, cfg)| {
                let ready_tx = ready_tx.clone();
                sc.spawn(move || {
                    let ready = &mut |_: &str| {
                        let _ = ready_tx.send(());
                    };
                    sink(cfg, stop, ready, &mut |iv| on_interval(i, iv))
                })
            })
            .collect();
        for cfg in sinks {
            if ready_rx.recv_timeout(READY_WITHIN).is_err() {
                stop.store(true, Ordering::Relaxed);
                let why = handles
                    .into_iter()
                    .find_map(|h| match h.join() {
                        Ok(Err(e)) => Some(e.to_string()),
                        _ => None,
                    })
                    .unwrap_or_else(|| format!("not ready in {} s", READY_WITHIN.as_secs()));
                return Err(format!("receiving on {}: {why}", cfg.iface));
            }
        }
        let sent = send();
        if drained(&sent) {
            std::thread::sleep(drain);
        }
        stop.store(true, Ordering::Relaxed);
        let got = handles
            .into_iter()
            .zip(sinks)
            .map(|(h, cfg)| match h.join() {
                Ok(r) => r.map_err(|e| format!("receiving on {}: {e}", cfg.iface)),
                Err(_) => Err(format!("receiving on {}: the thread failed", cfg.iface)),
            })
            .collect();
        Ok((sent, got))
    })
}
