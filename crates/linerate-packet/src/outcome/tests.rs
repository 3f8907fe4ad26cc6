//! Each outcome's `-J` document against one captured from the code before
//! the documents were typed (`tests/golden/`), byte for byte as pretty
//! JSON: the same keys, values and order (a renamed key fails).

use super::*;
use crate::rfc2544::{self, BackToBack, FrameLossStep, FrameSize, Latency, Throughput, Trial};
use crate::rfc2544_outcome::{RepeatedRate, Rfc2544Outcome};
use crate::{FwdCounts, FwdMode, FwdOutcome, FwdReport, Noisy, StreamSent};
use linerate_backend::port::TxStats;
use linerate_run::stats::{Policy, Stop};
use linerate_run::{CountedBy, Counts, Interval, Row, Scope};
use linerate_traffic::pacing::{CatchUp, Departures, Shape};
use linerate_traffic::{FlowSpec, Framing, SinkCounts, Template};
use std::time::{Duration, Instant};

/// The document as pretty JSON against `tests/golden/NAME.json`.
pub(crate) fn golden(name: &str, doc: &serde_json::Value) {
    let path = format!("{}/tests/golden/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let got = serde_json::to_string_pretty(doc).unwrap();
    if std::env::var_os("LINERATE_CAPTURE").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    assert_eq!(got, want.trim_end(), "{name}: the document changed");
}

fn interval(role: &str) -> Interval {
    let rows = (0..2)
        .map(|w| {
            Row::new(Scope::Worker, w.to_string(), role, CountedBy::Sender).with_counts(Counts {
                packets: Some(1000 + w),
                bytes: Some(64_000 + w),
                ..Counts::default()
            })
        })
        .collect();
    Interval::new(0.0, 0.5, rows)
}

fn departures(gaps_us: &[u64]) -> Departures {
    let t0 = Instant::now();
    let mut d = Departures::default();
    d.record(t0, 4);
    let mut t = t0;
    for g in gaps_us {
        t += Duration::from_micros(*g);
        d.record(t, 4);
    }
    d
}

fn blast_report() -> BlastReport {
    BlastReport {
        backend: "af_packet",
        note: Some("chosen: af_packet".into()),
        packets: 123_456,
        bytes: 123_456 * 64,
        duration_s: 1.25,
        duration_from: "first send to last send",
        send_calls: 2000,
        send_errors: 3,
        flows: 2,
        per_flow: [(0, 61_728), (1, 61_728)].into(),
        intervals: vec![interval("sender")],
        worker_rows: Vec::new(),
        backend_stats: vec![TxStats::Raw {
            socket_mode: "af_packet ring",
        }],
        capabilities: linerate_backend::port::Capabilities {
            batch: 64,
            max_frame: 1518,
            crafted_frames: true,
            zero_copy: false,
            per_queue: false,
            gso: false,
            qdisc_bypass: true,
        },
        pacing: vec![(departures(&[10, 12, 9, 11]), 2500.0)],
        shape: Some(Shape {
            late_wakeups: 2,
            max_late_ns: 1_500_000,
            max_burst: 17,
            skipped: 0,
        }),
        catch_up: CatchUp::Burst,
        workers: 1,
        end_marker_frames: 6,
        end_marker_note: None,
        count_note: None,
        streams: vec![StreamSent {
            name: "voice".into(),
            id: 1,
            packets: 500,
            bytes: 500 * 128,
            departures: departures(&[20, 20, 21]),
        }],
    }
}

/// Two flows' probe frames, the second with one lost and one reordered,
/// latency 10 µs and 30 µs.
fn sink_report(shared: bool) -> SinkReport {
    let flows = FlowSpec::parse(
        "02:00:00:00:00:0a",
        "02:00:00:00:00:0b",
        "198.18.0.1-198.18.0.2",
        "198.18.1.1",
        "9",
        "9",
    )
    .unwrap();
    let t = Template::new(64, &flows.flow(0), &Framing::default()).unwrap();
    let mut c = SinkCounts::new(shared);
    let base = 1_000_000_000u64;
    let mut frame = |id: u16, seq: u64, lat: u64| {
        let mut b = vec![0u8; t.len()];
        t.write(
            &mut b,
            &flows.flow(u64::from(id)),
            id,
            seq,
            base + seq * 1000,
        );
        c.on_frame(&b, base + seq * 1000 + lat);
    };
    for s in 1..=20 {
        frame(0, s, 10_000);
    }
    for s in [1, 2, 4, 3, 6, 7] {
        frame(1, s, 30_000);
    }
    SinkReport {
        backend: "af_packet",
        note: None,
        counts: c,
        duration_s: 2.0,
        kernel_drops: 1,
        capture: Some(("/tmp/x.pcap".into(), 26, 128, None)),
        error: None,
        arrival_stamped: 26,
        arrival_handover: 0,
        capabilities: linerate_backend::port::RxCapabilities {
            batch: 64,
            max_frame: 1518,
            queues: None,
            zero_copy: false,
            kernel_receive_stamps: true,
        },
        workers: 1,
        intervals: vec![interval("receiver")],
    }
}

fn doctor() -> serde_json::Value {
    serde_json::json!({"iface": "veth0", "findings": [], "ok": true})
}

#[test]
fn blast_documents_are_as_captured() {
    let plain = BlastOutcome {
        report: blast_report(),
        doctor: doctor(),
        receiver: None,
        streams: Vec::new(),
    };
    golden("blast", &plain.document());
    let with_rx = BlastOutcome {
        report: blast_report(),
        doctor: doctor(),
        receiver: Some(("veth1".into(), sink_report(true))),
        streams: vec![("voice".into(), 1), ("video".into(), 7)],
    };
    golden("blast_rx", &with_rx.document());
}

#[test]
fn sink_documents_are_as_captured() {
    let plain = SinkOutcome {
        report: sink_report(true),
        doctor: doctor(),
        iface: "veth1".into(),
        hist: None,
        streams: Vec::new(),
    };
    golden("sink", &plain.document());
    let hist = SinkOutcome {
        report: sink_report(false),
        doctor: doctor(),
        iface: "veth1".into(),
        hist: Some(("/tmp/h.log".into(), Ok(()))),
        streams: vec![("a".into(), 0), ("b".into(), 9)],
    };
    golden("sink_hist", &hist.document());
    let failed = SinkOutcome {
        hist: Some(("/tmp/h.log".into(), Err("disk full".into()))),
        ..hist
    };
    golden("sink_hist_failed", &failed.document());
}

#[test]
fn fwd_document_is_as_captured() {
    let c = FwdCounts {
        rx: 1000,
        tx: 990,
        tx_dropped: 7,
        too_long: 3,
        not_ip: 0,
        fifo_peak: 12,
    };
    let o = FwdOutcome {
        report: FwdReport {
            rx_backend: "af_xdp",
            tx_backend: "af_xdp",
            notes: vec!["copy mode".into()],
            mode: FwdMode::MacSwap,
            noisy: Noisy {
                fifo: 16,
                flush: Duration::from_micros(50),
                mem_bytes: 1 << 20,
                reads: 2,
                writes: 1,
                read_writes: 0,
            },
            counts: c,
            kernel_drops: 4,
            duration_s: 0.75,
            intervals: vec![interval("rx")],
            error: Some("link down".into()),
            mem_sum: 42,
            rx_iface: "veth0".into(),
            tx_iface: "veth1".into(),
            workers: vec![c],
        },
        doctor: doctor(),
        fifo: true,
    };
    golden("fwd", &o.document());
}

fn trial(fps: f64) -> Trial {
    Trial {
        frame_size: FrameSize::Fixed(64),
        asked_fps: fps,
        offered_fps: fps,
        forwarded_fps: fps * 0.99,
        sent: 1000,
        received: 990,
        sent_bytes: 64_000,
        received_bytes: 63_360,
        loss_ratio: 0.01,
        passed: false,
        reason: Some("loss".into()),
        held_back: false,
        latency_ns: Some([1.0, 2.0, 3.0, 4.0, 5.0]),
        rx_iface_packets: None,
        directions: None,
        shape: None,
        spoiled: None,
        interrupted: false,
    }
}

#[test]
fn rfc2544_documents_are_as_captured() {
    let size = FrameSize::Fixed(64);
    let (l1, l2) = rfc2544::bits(1000.0, &size);
    let t = Throughput {
        frame_size: size.clone(),
        mean_frame_size: 64.0,
        bidirectional: false,
        loss_allowed: 0.0,
        rate_fps: 1000.0,
        rate_l1_bps: l1,
        rate_l2_bps: l2,
        loss_ratio: 0.0,
        of_max: 0.5,
        held_back: true,
        converged: false,
        spoiled_trials: 0,
        interrupted: false,
        trials: vec![trial(2000.0)],
    };
    let all = Rfc2544Outcome {
        config: serde_json::json!({"sizes": [64], "trial_time_s": 2.0}),
        trial_time_s: 2.0,
        bidir: false,
        policy: Some(Policy {
            runs: Some(2),
            confidence: 0.95,
            ci_target: None,
            max_runs: 20,
            warmup_runs: 1,
        }),
        throughput: vec![t.clone()],
        repeats: vec![RepeatedRate {
            frame_size: size.clone(),
            loss_allowed: 0.0,
            rates: vec![800.0, 900.0, 1100.0],
            stop: Stop::Count,
        }],
        latency: Some(vec![Latency {
            frame_size: size.clone(),
            load: 1.0,
            rate_fps: 1000.0,
            trial: trial(1000.0),
        }]),
        frame_loss: Some(vec![FrameLossStep {
            frame_size: size.clone(),
            load: 1.0,
            rate_fps: 2000.0,
            loss_ratio: 0.01,
            offered_short: false,
            trial: trial(2000.0),
        }]),
        back_to_back: Some(vec![BackToBack {
            frame_size: size,
            rate_fps: 2000.0,
            bursts: vec![100, 120],
            mean_burst: 110.0,
            trials: vec![trial(2000.0)],
        }]),
        error: Some("the link went down".into()),
    };
    golden("rfc2544", &all.document());
    let bare = Rfc2544Outcome {
        policy: None,
        repeats: Vec::new(),
        latency: None,
        frame_loss: None,
        back_to_back: None,
        error: None,
        throughput: vec![t],
        ..all.clone()
    };
    golden("rfc2544_bare", &bare.document());
    let none = Rfc2544Outcome {
        throughput: Vec::new(),
        ..bare
    };
    golden("rfc2544_none", &none.document());
}

#[test]
fn a_sink_is_judged_by_its_first_failure() {
    let judged = |r: SinkReport, hist: Option<crate::HistWritten>, holder: Option<&str>| {
        crate::sink_measured(r, hist, holder, doctor(), ("veth1".into(), Vec::new())).error
    };
    assert_eq!(judged(sink_report(true), None, None), None);
    assert_eq!(
        judged(sink_report(true), None, Some("an XDP program")),
        None,
        "a sink behind an XDP program that counted frames was not blind"
    );
    let hist = Some(("/tmp/h.hlog".into(), Err("disk full".to_string())));
    assert_eq!(
        judged(sink_report(true), hist.clone(), None).as_deref(),
        Some("--hist /tmp/h.hlog: disk full (the histograms were not saved)")
    );
    let mut failed = sink_report(true);
    failed.error = Some("link down".into());
    assert_eq!(
        judged(failed, hist, None).as_deref(),
        Some("link down (the counts are what arrived before it)"),
        "the receiver's error comes first"
    );
    let mut empty = sink_report(true);
    empty.counts = SinkCounts::new(true);
    assert_eq!(judged(empty, None, None), None, "idle, not blind");
    let mut empty = sink_report(true);
    empty.counts = SinkCounts::new(true);
    assert_eq!(
        judged(empty, None, Some("an XDP program")).as_deref(),
        Some(
            "this sink counted nothing, and an XDP program: stop the other receiver, or receive with --backend af_xdp on a queue of its own"
        )
    );
    // The sender's end markers came but none of its frames: blind; with an
    // XDP program seen holding the interface, that program is named.
    let marked = || {
        let mut r = sink_report(true);
        r.counts = SinkCounts::new(true);
        r.counts.flows.entry(7).sent_marker = Some(1000);
        r
    };
    assert_eq!(
        judged(marked(), None, None).as_deref(),
        Some(
            "the sender's end markers say 1000 frames were sent and this sink counted none of them: something else takes them before it (another receiver's XDP program, a filter)"
        )
    );
    assert_eq!(
        judged(marked(), None, Some("an XDP program")).as_deref(),
        Some(
            "this sink counted nothing, and an XDP program: stop the other receiver, or receive with --backend af_xdp on a queue of its own"
        ),
        "the holder named before the markers' general cause"
    );
}
