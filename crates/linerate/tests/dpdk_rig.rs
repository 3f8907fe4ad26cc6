//! `--backend dpdk` (built with the `dpdk` feature) on DPDK's virtual
//! devices, without hugepages or PCI: blast on net_null (the sender's count
//! exact), blast and sink on net_af_packet ports over the rig's veth pair
//! (counts exact at the receiver, also with linerate's af_packet sink as
//! the receiver), fwd macswap between two net_af_packet ports, an rfc2544
//! search on two of them through a forwarder, and blast on a net_af_xdp
//! port (built in its UMEM) counted exactly.

#![cfg(feature = "dpdk")]

mod support;

use linerate_lab::Rig;
use linerate_testkit::{Requirement, require_program, require_root, should_skip};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// Without hugepages, PCI or shared files: processes side by side never meet.
const EAL: &str = "--no-huge -m 128 --no-pci --no-shconf -l 0";

/// net_af_packet's rings: 16384 frames (its default of 512 is 10 ms at
/// 50 kpps: a receiver held off the CPU that long by a busy host loses
/// frames from a full ring, which its port counters do not show).
const RING: &str = "blocksz=4096,framesz=2048,framecnt=16384";

/// DPDK's net_null, net_af_packet, net_af_xdp and net_pcap drivers: in a
/// static build (the default) they are linked into the binary, in a
/// dynamic one (`LINERATE_DPDK_LINK=dynamic`) the EAL loads them from its
/// plugin directory (`<libdir>/dpdk/pmds-*`); libdpdk-dev installs both.
fn require_dpdk_pmds() -> Requirement {
    let libdir = Command::new("pkg-config")
        .args(["--variable=libdir", "libdpdk"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .ok_or("needs pkg-config and libdpdk-dev (the README's test command installs them)")?;
    let dirs = std::fs::read_dir(format!("{libdir}/dpdk")).map_err(|e| {
        format!("needs DPDK's drivers in {libdir}/dpdk ({e}): apt-get install dpdk librte-net-af-packet23")
    })?;
    let names: Vec<String> = dirs
        .flatten()
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flatten()
        .flatten()
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .collect();
    for pmd in [
        "librte_net_null.so",
        "librte_net_af_packet.so",
        "librte_net_af_xdp.so",
        "librte_net_pcap.so",
    ] {
        if !names.iter().any(|n| n.starts_with(pmd)) {
            return Err(format!(
                "needs DPDK's {pmd} under {libdir}/dpdk (apt-get install dpdk librte-net-af-packet23 librte-net-af-xdp23 librte-net-pcap23)"
            ));
        }
    }
    Ok(())
}

fn skip(test: &str, rig: bool) -> bool {
    let mut reqs = vec![require_root(), require_dpdk_pmds()];
    if rig {
        reqs.push(require_program("ip"));
    }
    should_skip(test, &reqs)
}

/// A running process whose standard error is read as it comes.
struct Running {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Running {
    fn spawn(cmd: &mut Command) -> Running {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(l);
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line of standard error containing `what`.
    fn wait_for(&mut self, what: &str, limit: Duration) {
        let end = Instant::now() + limit;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let found = l.contains(what);
                    self.seen.push(l);
                    if found {
                        return;
                    }
                }
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        panic!("no '{what}' within {limit:?}; stderr: {:?}", self.seen);
    }

    /// Waits for the end (killed after `limit`): its output and JSON.
    fn finish(mut self, limit: Duration) -> (Output, Value) {
        let end = Instant::now() + limit;
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > end {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = self.child.wait_with_output().unwrap();
        self.seen.extend(self.lines.try_iter());
        let err = self.seen.join("\n");
        assert!(out.status.success(), "{err}");
        let v = support::json(&out.stdout);
        (out, v)
    }
}

fn eal(vdevs: &[&str]) -> String {
    let mut s = EAL.to_string();
    for v in vdevs {
        s += &format!(" --vdev {v}");
    }
    s
}

/// A rig pair with a second link between the two hosts, veth1 (it goes
/// with their namespaces).
fn two_links() -> Rig {
    let rig = Rig::pair().unwrap();
    let (ns0, ns1) = (&rig.host(0).netns, &rig.host(1).netns);
    for args in [
        &[
            "-n", ns0, "link", "add", "veth1", "type", "veth", "peer", "name", "veth1", "netns",
            ns1,
        ][..],
        &["-n", ns0, "link", "set", "veth1", "up"],
        &["-n", ns1, "link", "set", "veth1", "up"],
    ] {
        linerate_lab::ip_text(args).unwrap();
    }
    rig
}

fn run(cmd: &mut Command) -> Value {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    support::json(&out.stdout)
}

/// blast from host 0's DPDK port `vdev` (its name first) to host 1:
/// `count` frames over the flows of `src_ports` at `pps`; its JSON.
fn dpdk_blast(rig: &Rig, vdev: &str, src_ports: &str, count: u64, pps: &str) -> Value {
    let port = vdev.split(',').next().unwrap();
    run(rig.command(0, BIN).args([
        "blast",
        "--backend",
        "dpdk",
        "--eal",
        &eal(&[vdev]),
        "--iface",
        port,
        "--src-ip",
        &rig.host(0).ipv4.to_string(),
        "--dst-ip",
        &rig.host(1).ipv4.to_string(),
        "--dst-mac",
        &rig.host(1).mac,
        "--src-port",
        src_ports,
        "--count",
        &count.to_string(),
        "--pps",
        pps,
        "--json",
    ]))
}

#[test]
fn dpdk_blast_on_net_null_sends_exactly_the_count_from_each_worker() {
    if skip(
        "dpdk_blast_on_net_null_sends_exactly_the_count_from_each_worker",
        false,
    ) {
        return;
    }
    let v = run(Command::new(BIN).args([
        "blast",
        "--backend",
        "dpdk",
        "--eal",
        &eal(&["net_null0"]),
        "--iface",
        "net_null0",
        "--src-ip",
        "198.18.0.1",
        "--dst-ip",
        "198.18.0.2",
        "--dst-mac",
        "02:00:00:00:00:02",
        "--src-port",
        "1000-1003",
        "--count",
        "100001",
        "--cores",
        "0,1",
        "--json",
    ]));
    assert_eq!(v["backend"], "dpdk", "{v}");
    assert_eq!(v["packets"], 100_001, "{v}");
    assert_eq!(v["workers"], 2, "{v}");
    assert_eq!(v["bytes"], 100_001 * 64, "{v}");
    let note = v["backend_note"].as_str().unwrap();
    assert!(note.contains("net_null"), "{note}");
}

/// fwd's io mode on one net_null port (what its RX queue makes up, sent
/// back out of its TX queue; each burst handed over whole, no frame
/// read): every frame received is sent, none dropped, and it stops at
/// `--count` within the burst (64 frames) that crossed it.
#[test]
fn dpdk_fwd_io_on_net_null_sends_every_frame_it_receives() {
    if skip(
        "dpdk_fwd_io_on_net_null_sends_every_frame_it_receives",
        false,
    ) {
        return;
    }
    let v = run(Command::new(BIN).args([
        "fwd",
        "--backend",
        "dpdk",
        "--eal",
        &eal(&["net_null0"]),
        "--iface",
        "net_null0",
        "--mode",
        "io",
        "--count",
        "100000",
        "--duration",
        "20",
        "--json",
    ]));
    let c = &v["counts"];
    let tx = c["tx"].as_u64().unwrap();
    assert_eq!(c["rx"], tx, "{v}");
    assert!((100_000..100_064).contains(&tx), "{v}");
    for k in ["tx_dropped", "too_long", "not_ip"] {
        assert_eq!(c[k], 0, "{k}: {v}");
    }
    assert_eq!(v["rx_backend"], "dpdk", "{v}");
}

/// Frame `k` of [`mixed_lengths_pcap`]'s file: 64 B every tenth, else
/// 600, 1,514 (the port's largest) and 1,600 B (too long) in turn.
fn mixed_length(k: u64) -> usize {
    if k.is_multiple_of(10) {
        64
    } else {
        [600, 1514, 1600][(k % 3) as usize]
    }
}

/// A pcap file of 300 Ethernet frames of [`mixed_length`]s, each with its
/// index after the Ethernet header.
fn mixed_lengths_pcap(path: &std::path::Path) {
    let mut b = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&w.to_le_bytes());
    }
    for k in 0..300u64 {
        let n = mixed_length(k) as u32;
        for w in [0, k as u32, n, n] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        let mut f = vec![0u8; n as usize];
        f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        // (its index, to find it again in what was sent)
        f[14..18].copy_from_slice(&(k as u32).to_le_bytes());
        b.extend_from_slice(&f);
    }
    std::fs::write(path, b).unwrap();
}

/// fwd's io mode hands a burst over whole after one look at its frames'
/// lengths (their OR, the exact maximum only when the OR is over the
/// port's largest frame): a burst of 64, 600 and 1,514 B frames (OR
/// 1,530) keeps every one, a 1,600 B frame is dropped and counted
/// `too_long`, exactly, frame by frame, over net_pcap replaying a file.
#[test]
fn dpdk_fwd_io_drops_exactly_the_frames_too_long_for_the_port() {
    if skip(
        "dpdk_fwd_io_drops_exactly_the_frames_too_long_for_the_port",
        false,
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (rx, tx) = (dir.path().join("in.pcap"), dir.path().join("out.pcap"));
    mixed_lengths_pcap(&rx);
    let vdev = format!(
        "net_pcap0,rx_pcap={},tx_pcap={},infinite_rx=1",
        rx.display(),
        tx.display()
    );
    let v = run(Command::new(BIN).args([
        "fwd",
        "--backend",
        "dpdk",
        "--eal",
        &eal(&[&vdev]),
        "--iface",
        "net_pcap0",
        "--mode",
        "io",
        "--count",
        "3000",
        "--duration",
        "20",
        "--json",
    ]));
    let c = &v["counts"];
    let (got, sent, long) = (
        c["rx"].as_u64().unwrap(),
        c["tx"].as_u64().unwrap(),
        c["too_long"].as_u64().unwrap(),
    );
    assert!(sent >= 3000 && long > 0, "{v}");
    assert_eq!(got, sent + long, "{v}");
    assert_eq!(c["tx_dropped"], 0, "{v}");
    // What went out, frame by frame (the file replays from where the PMD
    // stands when the run starts): each frame its own length, at most
    // 1,514 B, in the file's order with only too-long frames missing
    // (never two in a row) between them; those counted too long are the
    // ones missing, give or take one before the first and after the last.
    let out = std::fs::read(&tx).unwrap();
    let (mut at, mut last, mut n, mut skipped) = (24, None::<u64>, 0u64, 0u64);
    while at + 16 <= out.len() {
        let len = u32::from_le_bytes(out[at + 8..at + 12].try_into().unwrap()) as usize;
        let f = &out[at + 16..at + 16 + len];
        let k = u64::from(u32::from_le_bytes(f[14..18].try_into().unwrap()));
        assert_eq!(len, mixed_length(k), "frame {k}");
        assert!(len <= 1514, "frame {k} of {len} B went out");
        if let Some(p) = last {
            let gap = (k + 300 - p) % 300;
            assert!(
                gap == 1 || (gap == 2 && mixed_length((p + 1) % 300) > 1514),
                "{p} then {k}"
            );
            skipped += gap - 1;
        }
        (last, n, at) = (Some(k), n + 1, at + 16 + len);
    }
    assert_eq!(n, sent, "frames in the TX file");
    assert!(
        (skipped..=skipped + 2).contains(&long),
        "{skipped} missing, {long} counted"
    );
}

#[test]
fn dpdk_without_a_port_or_with_eal_alone_is_refused_before_sending() {
    if skip(
        "dpdk_without_a_port_or_with_eal_alone_is_refused_before_sending",
        false,
    ) {
        return;
    }
    let out = Command::new(BIN)
        .args(["blast", "--backend", "dpdk", "--eal", EAL])
        .args(["--iface", "net_null7", "--src-ip", "198.18.0.1"])
        .args(["--dst-ip", "198.18.0.2", "--dst-mac", "02:00:00:00:00:02"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no DPDK port named net_null7"), "{err}");
    let out = Command::new(BIN)
        .args(["sink", "--iface", "lo", "--eal", EAL])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--eal goes with --backend dpdk"), "{err}");
}

/// blast on host 0's net_af_packet port (over veth0) → a sink on host 1:
/// DPDK's (net_af_packet on host 1's veth0), then linerate's af_packet.
#[test]
fn dpdk_blast_over_veth_is_counted_exactly_by_dpdk_and_af_packet_sinks() {
    if skip(
        "dpdk_blast_over_veth_is_counted_exactly_by_dpdk_and_af_packet_sinks",
        true,
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    let n = 5000u64;
    let count = n.to_string();
    let port = "net_af_packet0";
    let vdev = format!("{port},iface=veth0,{RING}");
    for sink_backend in ["dpdk", "af_packet"] {
        let mut sink_cmd = rig.command(1, BIN);
        sink_cmd.args(["sink", "--json", "--duration", "8", "--count", &count]);
        if sink_backend == "dpdk" {
            sink_cmd.args([
                "--backend",
                "dpdk",
                "--eal",
                &eal(&[&vdev]),
                "--iface",
                port,
            ]);
        } else {
            sink_cmd.args(["--backend", "af_packet", "--iface", "veth0"]);
        }
        let mut sink = Running::spawn(&mut sink_cmd);
        sink.wait_for("sink receiving", Duration::from_secs(10));
        let b = dpdk_blast(&rig, &vdev, "2000-2007", n, "50k");
        let (_, s) = sink.finish(Duration::from_secs(10));
        assert_eq!(b["packets"], n, "{b}");
        assert_eq!(s["packets"], n, "{sink_backend}: {s}");
        assert_eq!(s["lost"], 0, "{sink_backend}: {s}");
        assert_eq!(s["backend"], sink_backend, "{s}");
    }
}

/// blast (af_packet) on host 0's veth0 → fwd macswap on host 1, in on a
/// net_af_packet port over veth0, out on another over veth1 → linerate's
/// sink on host 0's veth1: every frame forwarded and counted.
#[test]
fn dpdk_fwd_macswap_between_two_net_af_packet_ports_forwards_every_frame() {
    if skip(
        "dpdk_fwd_macswap_between_two_net_af_packet_ports_forwards_every_frame",
        true,
    ) {
        return;
    }
    let rig = two_links();
    let n = 4000u64;
    let count = n.to_string();
    let mut fwd = Running::spawn(rig.command(1, BIN).args([
        "fwd",
        "--backend",
        "dpdk",
        "--eal",
        &eal(&[
            &format!("net_af_packet0,iface=veth0,{RING}"),
            &format!("net_af_packet1,iface=veth1,{RING}"),
        ]),
        "--iface",
        "net_af_packet0",
        "--out-iface",
        "net_af_packet1",
        "--mode",
        "macswap",
        // no --count: fwd also forwards what is not a probe
        "--duration",
        "5",
        "--json",
    ]));
    fwd.wait_for("fwd forwarding", Duration::from_secs(10));
    let mut sink = Running::spawn(rig.command(0, BIN).args([
        "sink",
        "--backend",
        "af_packet",
        "--iface",
        "veth1",
        "--json",
        "--duration",
        "6",
        "--count",
        &count,
    ]));
    sink.wait_for("sink receiving", Duration::from_secs(10));
    let b = run(rig.command(0, BIN).args([
        "blast",
        "--backend",
        "af_packet",
        "--iface",
        "veth0",
        "--dst-mac",
        &rig.host(1).mac,
        "--dst-ip",
        &rig.host(1).ipv4.to_string(),
        "--src-port",
        "3000-3003",
        "--count",
        &count,
        "--pps",
        "40k",
        "--no-end-marker",
        "--json",
    ]));
    assert_eq!(b["packets"], n, "{b}");
    let (_, s) = sink.finish(Duration::from_secs(10));
    let (_, f) = fwd.finish(Duration::from_secs(10));
    assert_eq!(s["packets"], n, "sink {s}");
    assert_eq!(s["lost"], 0, "sink {s}");
    assert_eq!(f["rx_backend"], "dpdk", "{f}");
    assert_eq!(f["tx_backend"], "dpdk", "{f}");
    assert_eq!(f["mode"], "macswap");
    assert!(f["counts"]["tx"].as_u64().unwrap() >= n, "{f}");
    assert_eq!(f["counts"]["tx_dropped"], 0, "{f}");
}

/// rfc2544 on two DPDK ports of host 0 (net_af_packet over veth0 and
/// veth1) through linerate fwd (af_packet) on host 1: every trial's frames
/// come back, so the search ends at its ceiling with no loss.
#[test]
fn dpdk_rfc2544_through_a_forwarder_passes_at_its_ceiling() {
    if skip(
        "dpdk_rfc2544_through_a_forwarder_passes_at_its_ceiling",
        true,
    ) {
        return;
    }
    let rig = two_links();
    let mut fwd = Running::spawn(rig.command(1, BIN).args([
        "fwd",
        "--backend",
        "af_packet",
        "--iface",
        "veth0",
        "--out-iface",
        "veth1",
        "--mode",
        "macswap",
        "--duration",
        "6",
        "--json",
    ]));
    fwd.wait_for("fwd forwarding", Duration::from_secs(10));
    let v = run(rig.command(0, BIN).args([
        "rfc2544",
        "--backend",
        "dpdk",
        "--eal",
        &eal(&[
            &format!("net_af_packet0,iface=veth0,{RING}"),
            &format!("net_af_packet1,iface=veth1,{RING}"),
        ]),
        "--tx-iface",
        "net_af_packet0",
        "--rx-iface",
        "net_af_packet1",
        "--dst-mac",
        &rig.host(1).mac,
        "--src-ip",
        &rig.host(0).ipv4.to_string(),
        "--dst-ip",
        &rig.host(1).ipv4.to_string(),
        "--sizes",
        "64",
        "--tests",
        "throughput",
        "--max-rate",
        "10kpps",
        "--trial-time",
        "0.5",
        "--drain",
        "0.3",
        "--max-trials",
        "2",
        "-J",
    ]));
    let _ = fwd.finish(Duration::from_secs(10));
    let r = &v["throughput"][0];
    assert_eq!(r["loss_ratio"], 0.0, "{v}");
    let found = r["rate_fps"].as_f64().unwrap();
    assert!(found >= 9_500.0, "{r}");
    for t in r["trials"].as_array().unwrap() {
        assert!(t["sent"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["sent"], t["received"], "{t}");
    }
}

/// blast on host 0's net_af_xdp port (over veth0) → linerate's af_packet
/// sink on host 1. The port's TX queue builds its frames in the mbufs of
/// its RX queue's pool (the UMEM: the PMD sends them without a copy), a
/// pool laid out end to end as the PMD registers it (laid out a page per
/// mbuf, as DPDK does without hugepages, the kernel dropped every frame
/// from the last 39% of it as an invalid descriptor); 30,000 frames, more
/// than the pool's 16,383 mbufs, so every mbuf is built in again: each
/// counted exactly and in order.
#[test]
fn dpdk_blast_over_af_xdp_builds_in_the_umem_and_is_counted_exactly() {
    if skip(
        "dpdk_blast_over_af_xdp_builds_in_the_umem_and_is_counted_exactly",
        true,
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    let n = 30_000u64;
    let count = n.to_string();
    let port = "net_af_xdp0";
    let mut sink = Running::spawn(rig.command(1, BIN).args([
        "sink",
        "--backend",
        "af_packet",
        "--iface",
        "veth0",
        "--json",
        "--duration",
        "8",
        "--count",
        &count,
    ]));
    sink.wait_for("sink receiving", Duration::from_secs(10));
    let vdev = format!("{port},iface=veth0,start_queue=0,queue_count=1");
    let b = dpdk_blast(&rig, &vdev, "2000-2002", n, "15k");
    let (_, s) = sink.finish(Duration::from_secs(12));
    assert_eq!(b["packets"], n, "{b}");
    assert!(
        b["backend_note"].as_str().unwrap().contains("net_af_xdp"),
        "{b}"
    );
    assert_eq!(s["packets"], n, "{s}");
    assert_eq!(s["lost"], 0, "{s}");
    assert_eq!(s["duplicates"], 0, "{s}");
    assert_eq!(s["reordered"], 0, "{s}");
}
