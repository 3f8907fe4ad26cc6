//! The rig for real: needs root and iproute2.

use linerate_lab::{Rig, RigConfig, napi_threads};
use linerate_testkit::{require_program, require_root, should_skip};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::Duration;

fn skip(test: &str) -> bool {
    should_skip(test, &[require_root(), require_program("ip")])
}

/// The tests of this file one at a time: a rig claims its namespace
/// names by creating them, so a name freed by one test's rig may be taken
/// at once by another's in this process, and a test that looks for its
/// rig's names after the drop would find the other's (as CI once did:
/// "left behind after panic").
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn netns_list() -> String {
    String::from_utf8(
        Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
}

/// Sends one UDP datagram from host `from` to host `to` and returns what arrived.
fn send_one(rig: &Rig, from: usize, to: usize, v6: bool) -> Vec<u8> {
    let dst_ip = if v6 {
        rig.host(to).ipv6.into()
    } else {
        rig.host(to).ipv4.into()
    };
    let src_ip = if v6 {
        rig.host(from).ipv6.into()
    } else {
        rig.host(from).ipv4.into()
    };
    let receiver = rig
        .run_in(to, || {
            let s = UdpSocket::bind(SocketAddr::new(dst_ip, 0)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
            s
        })
        .unwrap();
    let port = receiver.local_addr().unwrap().port();
    rig.run_in(from, || {
        let s = UdpSocket::bind(SocketAddr::new(src_ip, 0)).unwrap();
        s.send_to(b"across the rig", SocketAddr::new(dst_ip, port))
            .unwrap();
    })
    .unwrap();
    let mut buf = [0u8; 64];
    // A stop and continue of the process (SIGSTOP/SIGCONT) ends a wait
    // with a timeout set in EINTR, signal handler or not: waited again.
    let (n, peer) = loop {
        match receiver.recv_from(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => break r.expect("datagram arrived"),
        }
    };
    assert_eq!(peer.ip(), src_ip);
    buf[..n].to_vec()
}

#[test]
fn a_packet_crosses_the_rig_and_is_counted() {
    if skip("a_packet_crosses_the_rig_and_is_counted") {
        return;
    }
    let _one = one_at_a_time();
    let rig = Rig::pair().unwrap();
    let before = rig.stats(1).unwrap();
    assert_eq!(send_one(&rig, 0, 1, false), b"across the rig");
    assert_eq!(send_one(&rig, 0, 1, true), b"across the rig");
    let after = rig.stats(1).unwrap();
    // Static neighbours, no DAD, no router solicitations: besides our two
    // datagrams only the kernel's IPv6 multicast listener reports may arrive
    // (a few in the first seconds of a link; veth does not count them apart).
    let delta = after.rx_packets - before.rx_packets;
    assert!((2..=8).contains(&delta), "{delta} frames arrived");
    assert!(rig.host(0).ipv4.octets()[..2] == [198, 18]);
    assert!(rig.host(1).ipv6.segments()[..2] == [0x2001, 0xdb8]);
}

#[test]
fn three_hosts_through_a_switch_with_queues() {
    if skip("three_hosts_through_a_switch_with_queues") {
        return;
    }
    let _one = one_at_a_time();
    let rig = Rig::new(&RigConfig {
        hosts: 3,
        queues: 4,
        mtu: 9000,
    })
    .unwrap();
    assert_eq!(rig.namespaces().len(), 4);
    assert_eq!(send_one(&rig, 2, 0, false), b"across the rig");
    assert_eq!(send_one(&rig, 1, 2, true), b"across the rig");
    let out = rig
        .command(0, "ls")
        .arg("/sys/class/net/veth0/queues")
        .output()
        .unwrap();
    let queues = String::from_utf8_lossy(&out.stdout);
    assert_eq!(queues.matches("rx-").count(), 4, "{queues}");
}

#[test]
fn namespaces_are_deleted_on_drop_and_on_panic() {
    if skip("namespaces_are_deleted_on_drop_and_on_panic") {
        return;
    }
    let _one = one_at_a_time();
    let names = {
        let rig = Rig::pair().unwrap();
        let names = rig.namespaces().to_vec();
        let list = netns_list();
        assert!(names.iter().all(|n| list.contains(n.as_str())));
        names
    };
    let list = netns_list();
    assert!(
        names.iter().all(|n| !list.contains(n.as_str())),
        "left behind: {list}"
    );

    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::thread::spawn(move || {
        let rig = Rig::pair().unwrap();
        tx.send(rig.namespaces().to_vec()).unwrap();
        panic!("a failing test");
    })
    .join();
    assert!(result.is_err());
    let names = rx.recv().unwrap();
    let list = netns_list();
    assert!(
        names.iter().all(|n| !list.contains(n.as_str())),
        "left behind after panic: {list}"
    );
}

#[test]
fn receive_path_moves_to_its_own_cpu() {
    if should_skip(
        "receive_path_moves_to_its_own_cpu",
        &[
            require_root(),
            require_program("ip"),
            require_program("ethtool"),
        ],
    ) {
        return;
    }
    let _one = one_at_a_time();
    let rig = Rig::pair().unwrap();
    let before = napi_threads();
    rig.pin_receive_path(1, 1).unwrap();
    let fresh: Vec<i32> = napi_threads()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(!fresh.is_empty(), "no NAPI thread appeared");
    let threaded = rig
        .command(1, "cat")
        .arg("/sys/class/net/veth0/threaded")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&threaded.stdout).trim(), "1");
    // Without it the veth receives socket UDP on the sender's CPU.
    rig.udp_through_napi(1).unwrap();
    let features = rig
        .command(1, "ethtool")
        .args(["-k", "veth0"])
        .output()
        .unwrap();
    let features = String::from_utf8_lossy(&features.stdout);
    assert!(features.contains("rx-udp-gro-forwarding: on"), "{features}");
    assert_eq!(send_one(&rig, 0, 1, false), b"across the rig");
    // Socket UDP is received by the NAPI thread: it wakes for datagrams
    // sent a millisecond apart (on the sender's backlog it would not run).
    let switches = || -> u64 {
        fresh
            .iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
            .flat_map(|s| {
                s.lines()
                    .filter(|l| l.contains("ctxt_switches"))
                    .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .collect::<Vec<_>>()
            })
            .sum()
    };
    let woken0 = switches();
    for _ in 0..40 {
        assert_eq!(send_one(&rig, 0, 1, false), b"across the rig");
    }
    let woken = switches() - woken0;
    assert!(
        woken >= 20,
        "the NAPI thread ran {woken} times for 40 datagrams"
    );
}

/// A two-queue rig's receiving veth as a NIC with RSS: one NAPI thread per
/// queue, each pinned to its own CPU, and datagrams of many flows (each
/// from its own source port) received by both.
#[test]
fn receive_queues_spread_over_cpus() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let two = if cpus >= 2 {
        Ok(())
    } else {
        Err("needs 2 CPUs".to_string())
    };
    if should_skip(
        "receive_queues_spread_over_cpus",
        &[
            require_root(),
            require_program("ip"),
            require_program("ethtool"),
            two,
        ],
    ) {
        return;
    }
    let _one = one_at_a_time();
    let rig = Rig::new(&RigConfig {
        queues: 2,
        ..Default::default()
    })
    .unwrap();
    let placed = rig.spread_receive_queues(1, &[0, 1]).unwrap();
    assert_eq!(placed.len(), 2, "{placed:?}");
    for &(pid, cpu) in &placed {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim();
        assert_eq!(allowed, cpu.to_string(), "NAPI thread {pid}");
    }
    let switches = |pid: i32| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .unwrap()
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    };
    let before: Vec<u64> = placed.iter().map(|&(p, _)| switches(p)).collect();
    for _ in 0..64 {
        assert_eq!(send_one(&rig, 0, 1, false), b"across the rig");
    }
    for (k, &(pid, cpu)) in placed.iter().enumerate() {
        let woken = switches(pid) - before[k];
        assert!(
            woken >= 4,
            "the NAPI thread on CPU{cpu} ran {woken} times for 64 flows"
        );
    }
}

/// Rigs made at once by several threads of one process get namespaces of
/// their own (each claims its name by creating it), and all go again.
#[test]
fn rigs_made_at_once_never_share_a_namespace() {
    if skip("rigs_made_at_once_never_share_a_namespace") {
        return;
    }
    let _one = one_at_a_time();
    let made: Vec<Vec<String>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let rig = Rig::pair().unwrap();
                    let names = rig.namespaces().to_vec();
                    // Held until every thread made its rig.
                    std::thread::sleep(Duration::from_millis(500));
                    names
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut all: Vec<&String> = made.iter().flatten().collect();
    assert_eq!(all.len(), 8, "{made:?}");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 8, "a namespace shared: {made:?}");
    let list = netns_list();
    assert!(
        made.iter().flatten().all(|n| !list.contains(n.as_str())),
        "left behind: {list}"
    );
}
