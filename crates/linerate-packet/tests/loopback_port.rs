//! blast, sink and fwd on the in-memory loopback port: no root, no
//! namespaces, and faults the wire injects at exactly the frames it names,
//! so every figure the receiver counts is checked exactly.

use linerate_backend::loopback::{Faults, Port, Wires};
use linerate_packet::{
    BackendKind, BlastConfig, BlastReport, FwdConfig, FwdMode, Gso, Noisy, Rate, RxFilter,
    SinkConfig, SinkReport,
};
use linerate_traffic::template::Framing;
use linerate_traffic::{FlowSpec, SizeSequence};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// This file's loopback ports: one registry, the tests' ports named
/// apart (the library keeps none of its own).
fn wires() -> &'static Wires {
    static WIRES: std::sync::OnceLock<Wires> = std::sync::OnceLock::new();
    WIRES.get_or_init(Wires::default)
}

fn blast_cfg(port: &str, src_ports: &str, count: u64) -> BlastConfig {
    BlastConfig {
        iface: port.into(),
        flows: FlowSpec::parse(
            "02:00:00:00:00:01",
            "02:00:00:00:00:02",
            "198.18.0.1",
            "198.18.0.2",
            src_ports,
            "9",
        )
        .unwrap(),
        sizes: SizeSequence::list(&[64]),
        framing: Framing {
            ttl: 64,
            ..Framing::default()
        },
        count: Some(count),
        duration: Duration::from_secs(10),
        rate: Rate::Pps(200_000),
        burst: 1,
        catch_up: linerate_traffic::pacing::CatchUp::Burst,
        burst_tolerance: 0,
        backend: BackendKind::Loopback,
        wires: wires().clone(),
        cores: Vec::new(),
        replay: None,
        macs_given: true,
        gso: Gso::Off,
        interval: None,
        end_markers: true,
    }
}

fn sink_cfg(port: &str) -> SinkConfig {
    SinkConfig {
        iface: port.into(),
        duration: Duration::from_secs(20),
        backend: BackendKind::Loopback,
        wires: wires().clone(),
        clocks_shared: true,
        until_packets: None,
        capture: None,
        cores: Vec::new(),
        interval: None,
        take: RxFilter::Udp(None),
    }
}

/// Runs `send` while a sink counts on `rx`; the sink stops 200 ms after.
fn counted<T: Send>(rx: &str, send: impl FnOnce() -> T + Send) -> (T, SinkReport) {
    let (out, mut got) = linerate_packet::pair::while_counting(
        &[sink_cfg(rx)],
        Duration::from_millis(200),
        send,
        |_| true,
    )
    .expect("sink ready");
    (out, got.remove(0).expect("sink"))
}

fn blast(cfg: &BlastConfig) -> BlastReport {
    linerate_packet::blast(cfg, &AtomicBool::new(false), &mut |_| {}).expect("blast")
}

#[test]
fn blast_to_sink_counts_exactly_what_the_wire_did() {
    // 1003 frames: the end markers (frames 1004-1006 on the wire) are
    // multiples of none of the faults.
    let port = Port::create(
        wires(),
        "lp-exact",
        1500,
        Faults {
            drop_every: 10,
            duplicate_every: 7,
            reorder_every: 13,
            ..Faults::default()
        },
    )
    .unwrap();
    let (b, s) = counted("lp-exact", || blast(&blast_cfg("lp-exact", "1000", 1003)));
    let wire = port.wire().counts();
    assert_eq!(b.packets, 1003, "sender's count");
    assert_eq!(b.end_marker_frames, 3);
    assert_eq!(wire.offered, 1006);
    // Multiples of 10 dropped: 100. Multiples of 7 twice unless dropped or
    // held back (7 x 10 and 7 x 13 multiples): 143 - 14 - 11 + 1 = 119.
    // Multiples of 13 held back unless dropped: 77 - 7 = 70.
    assert_eq!(
        (wire.dropped, wire.duplicated, wire.reordered),
        (100, 119, 70)
    );
    let c = &s.counts;
    // The receiver counts every probe frame that arrived, duplicates too.
    assert_eq!(c.packets(), 1003 - 100 + 119, "receiver's count");
    assert_eq!(c.lost(), 100, "the end marker makes the tail count");
    assert_eq!(c.duplicates(), 119);
    assert_eq!(c.reordered(), 70);
    assert_eq!(c.markers_seen(), (1, 1));
    assert_eq!(s.backend, "loopback");
}

#[test]
fn blast_to_sink_many_flows_clean_wire_loses_nothing() {
    let _port = Port::create(wires(), "lp-flows", 1500, Faults::default()).unwrap();
    let (b, s) = counted("lp-flows", || {
        blast(&blast_cfg("lp-flows", "1000-1099", 5_000))
    });
    assert_eq!(b.packets, 5_000);
    assert_eq!(b.flows, 100);
    let c = &s.counts;
    assert_eq!(
        (c.packets(), c.lost(), c.duplicates(), c.reordered()),
        (5_000, 0, 0, 0)
    );
    assert_eq!(c.flows.len(), 100);
    assert_eq!(c.markers_seen(), (100, 100));
    assert_eq!(
        s.counts.bytes() + 4 * 5_000,
        5_000 * 64,
        "64 B frames with FCS"
    );
}

#[test]
fn fwd_macswap_between_two_ports_forwards_every_frame() {
    let _a = Port::create(wires(), "lp-fwd-a", 1500, Faults::default()).unwrap();
    let _b = Port::create(wires(), "lp-fwd-b", 1500, Faults::default()).unwrap();
    let cfg = FwdConfig {
        rx_iface: "lp-fwd-a".into(),
        tx_iface: Some("lp-fwd-b".into()),
        mode: FwdMode::MacSwap,
        backend: BackendKind::Loopback,
        wires: wires().clone(),
        duration: Duration::from_secs(20),
        count: None,
        noisy: Noisy::default(),
        cores: Vec::new(),
        interval: None,
        take: RxFilter::Udp(None),
    };
    let fwd_stop = AtomicBool::new(false);
    let (f, s) = std::thread::scope(|sc| {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let h = sc.spawn(|| {
            linerate_packet::fwd(
                &cfg,
                &fwd_stop,
                &mut move |_, _| {
                    let _ = ready_tx.send(());
                },
                &mut |_| {},
            )
        });
        ready_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("fwd ready");
        let (_, s) = counted("lp-fwd-b", || {
            blast(&blast_cfg("lp-fwd-a", "1000-1003", 2_000))
        });
        fwd_stop.store(true, Ordering::Relaxed);
        (h.join().unwrap().expect("fwd"), s)
    });
    // 2,000 probes and 4 flows x 3 end markers, forwarded one for one
    assert_eq!(
        (f.counts.rx, f.counts.tx, f.counts.tx_dropped),
        (2_012, 2_012, 0)
    );
    let c = &s.counts;
    assert_eq!((c.packets(), c.lost(), c.duplicates()), (2_000, 0, 0));
    assert_eq!(c.markers_seen(), (4, 4));
}

#[test]
fn a_port_that_goes_down_ends_the_sink_with_what_it_counted() {
    let port = Port::create(wires(), "lp-down", 1500, Faults::default()).unwrap();
    let stop = AtomicBool::new(false);
    let cfg = sink_cfg("lp-down");
    let s = std::thread::scope(|sc| {
        let h = sc.spawn(|| linerate_packet::sink(&cfg, &stop, &mut |_| {}, &mut |_| {}));
        std::thread::sleep(Duration::from_millis(300));
        let b = blast(&blast_cfg("lp-down", "7", 100));
        assert_eq!(b.packets, 100);
        std::thread::sleep(Duration::from_millis(200));
        port.wire().set_up(false);
        // The sink stops by itself; the stop flag is a bound on the test.
        let t = std::time::Instant::now();
        while !h.is_finished() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap().expect("sink")
    });
    assert_eq!(s.counts.packets(), 100);
    let e = s.error.expect("the link loss is reported");
    assert!(e.contains("went down"), "{e}");
}

#[test]
fn an_unknown_loopback_port_is_a_clear_error() {
    let e = linerate_packet::sink(
        &sink_cfg("lp-nosuch"),
        &AtomicBool::new(false),
        &mut |_| {},
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("no loopback port named lp-nosuch"),
        "{e}"
    );
}

#[test]
fn rfc2544_finds_the_rate_a_policing_device_passes() {
    use linerate_packet::rfc2544::{self, DeviceRunner, FrameSize, MaxRate, Settings};
    // The device: a wire that passes 10,000 frames/s (a 200-frame bucket).
    let port = Port::create(
        wires(),
        "lp-dut",
        1500,
        Faults {
            police_fps: 10_000,
            police_burst: 200,
            ..Faults::default()
        },
    )
    .unwrap();
    let mut runner = DeviceRunner {
        tx_iface: "lp-dut".into(),
        rx_iface: "lp-dut".into(),
        flows: blast_cfg("lp-dut", "1000", 1).flows,
        reverse: None,
        backend: BackendKind::Loopback,
        wires: wires().clone(),
        drain: Duration::from_millis(100),
        clocks_shared: true,
        stop: std::sync::Arc::new(AtomicBool::new(false)),
        warmup: Duration::ZERO,
    };
    let settings = Settings {
        max_rate: MaxRate::Fps(40_000.0),
        trial_time: Duration::from_secs(1),
        resolution: 0.005,
        offered_min: 0.99,
        max_trials: 30,
        pace: rfc2544::Pace::default(),
    };
    let mut trials = 0;
    let r = rfc2544::throughput(
        &mut runner,
        &FrameSize::Fixed(64),
        0.0,
        &settings,
        &mut |_| trials += 1,
    )
    .expect("search");
    assert!(
        (9_500.0..=10_500.0).contains(&r.rate_fps),
        "found {} fps after {trials} trials ({:?})",
        r.rate_fps,
        port.wire().counts()
    );
    assert_eq!(r.trials.len(), trials);
    assert!(
        port.wire().counts().policed > 0,
        "trials above the rate were policed"
    );
}

/// Probes a hostile sender crafts, straight onto the wire: `(flow id,
/// sequence)` each.
fn forge(port: &str, probes: &[(u16, u64)]) {
    let spec = FlowSpec::parse(
        "02:00:00:00:00:01",
        "02:00:00:00:00:02",
        "198.18.0.1",
        "198.18.0.2",
        "2000",
        "9",
    )
    .unwrap();
    let flow = spec.flow(0);
    let t = linerate_traffic::Template::new(64, &flow, &Framing::default()).unwrap();
    let frames: Vec<Vec<u8>> = probes
        .iter()
        .map(|&(id, seq)| {
            let mut b = vec![0u8; t.len()];
            t.write(
                &mut b,
                &flow,
                id,
                seq,
                linerate_backend::clock::monotonic_ns(),
            );
            b
        })
        .collect();
    let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    let mut tx = linerate_backend::loopback::LoopTx::open(wires(), port, 128, 64).unwrap();
    let mut done = 0;
    while done < refs.len() {
        done += tx.send(&refs[done..]).unwrap();
    }
}

#[test]
fn forged_probes_are_anomalies_not_losses() {
    let _port = Port::create(wires(), "lp-forged", 1500, Faults::default()).unwrap();
    let huge = 1u64 << 62;
    let marker = linerate_wire::END_MARKER;
    let (b, s) = counted("lp-forged", || {
        let b = blast(&blast_cfg("lp-forged", "1000", 500));
        // Five flows opened by a sequence of 2^62 (each alone was
        // 4.6e18 losses and their sum wrapped), a forged sender's count
        // for them and for the real flow, and a flow counting from 0.
        let mut probes: Vec<(u16, u64)> = (100..105).map(|id| (id, huge)).collect();
        probes.extend((100..106).map(|id| (id, marker | huge)));
        probes.extend([(200, 0), (200, 1), (200, 2)]);
        forge("lp-forged", &probes);
        b
    });
    let c = &s.counts;
    assert_eq!(b.packets, 500);
    // The real flow and the zero-based one count as sent; nothing lost.
    assert_eq!(
        c.packets(),
        503,
        "the forged probes are not received frames"
    );
    assert_eq!(c.lost(), 0);
    assert_eq!(c.reordered(), 0, "sequence 0 first is in order");
    assert_eq!(c.duplicates(), 0);
    // 5 jumps, 6 implausible counts (5 on the forged flows, 1 on flow
    // 105, which never sent a probe).
    assert_eq!(c.anomalies(), 11);
    let j = s.json();
    assert_eq!(j["anomalies"], 11);
    assert_eq!(j["lost"], 0);
}

#[test]
fn vxlan_frames_are_counted_behind_their_outer_headers() {
    use linerate_traffic::flows::Range;
    use linerate_traffic::vxlan::Vxlan;
    let _port = Port::create(wires(), "lp-vxlan", 1500, Faults::default()).unwrap();
    let mut cfg = blast_cfg("lp-vxlan", "1000-1001", 1_000);
    cfg.flows.lockstep = true;
    cfg.sizes = SizeSequence::list(&[256, 300]);
    cfg.framing.tcp_flags = Some(0x10);
    cfg.framing.vxlan = Some(Vxlan {
        outer: cfg.flows.flow(0),
        vlan: None,
        dscp: 0,
        ttl: 64,
        flags: 0x08,
        reserved0: 0,
        reserved1: 0,
        vni: Range {
            first: 1000,
            count: 5,
            step: 1,
        },
    });
    cfg.framing.vxlan.as_mut().unwrap().outer.dst_port = 4789;
    let (b, s) = counted("lp-vxlan", || blast(&cfg));
    assert_eq!(b.packets, 1_000);
    assert_eq!(b.end_marker_frames, 0, "no marker behind VXLAN");
    let c = &s.counts;
    assert_eq!((c.packets(), c.lost(), c.other), (1_000, 0, 0));
    assert_eq!(c.flows.len(), 2);
    assert_eq!(s.counts.bytes() + 4 * 1_000, 500 * 256 + 500 * 300);
}

#[test]
fn stacked_headers_frames_are_counted_behind_them() {
    use linerate_traffic::flows::Range;
    use linerate_traffic::stack::{Gre, Label, Stack};
    let label = |first| Label {
        label: Range {
            first,
            count: 3,
            step: 1,
        },
        traffic_class: Range::single(0),
        bottom_of_stack: None,
        ttl: Range::single(64),
    };
    let stacks = [
        Stack {
            icmp: Some((8, 0)),
            ..Stack::default()
        },
        Stack {
            mpls: vec![label(16), label(100)],
            ..Stack::default()
        },
        Stack {
            gre: Some(Gre {
                src: "198.18.1.1".parse().unwrap(),
                dst: "198.18.1.2".parse().unwrap(),
                dscp: 0,
                ttl: 64,
                checksum_present: true,
                reserved0: 0,
                version: 0,
                protocol: None,
                reserved1: 0,
            }),
            ..Stack::default()
        },
    ];
    for (i, stack) in stacks.into_iter().enumerate() {
        let name = format!("lp-stack{i}");
        let _port = Port::create(wires(), &name, 1500, Faults::default()).unwrap();
        let mut cfg = blast_cfg(&name, "1000-1001", 1_000);
        cfg.flows.lockstep = true;
        cfg.sizes = SizeSequence::list(&[128, 200]);
        cfg.framing.stack = Some(stack);
        let sink = SinkConfig {
            take: RxFilter::All,
            ..sink_cfg(&name)
        };
        let (b, mut got) = linerate_packet::pair::while_counting(
            &[sink],
            Duration::from_millis(200),
            || blast(&cfg),
            |_| true,
        )
        .expect("sink ready");
        let s = got.remove(0).expect("sink");
        assert_eq!(b.packets, 1_000, "{name}");
        assert_eq!(b.end_marker_frames, 0, "no marker carries these headers");
        let c = &s.counts;
        assert_eq!((c.packets(), c.lost(), c.other), (1_000, 0, 0), "{name}");
        assert_eq!(c.flows.len(), 2);
        assert_eq!(c.bytes() + 4 * 1_000, 500 * 128 + 500 * 200, "{name}");
    }
}
