//! Worker threads as EAL lcores (issue 46): each thread that moves bursts
//! is registered as an lcore, so the pools' per-lcore caches serve it, and
//! gives its cached mbufs and its lcore id back when it ends. Threads
//! come and go in one process (rfc2544's trials, the agent's flows): 200
//! of them one after another, more than DPDK's 128 lcore ids, each
//! sending 100 bursts of 64 frames through net_null, every one with an
//! lcore and every frame taken; afterwards the pool holds all its mbufs
//! again (a thread that kept its cache would strand up to 384 of the
//! 4,095, and the pool would run dry after a dozen threads).
#![cfg(feature = "ffi")]

use linerate_dpdk::{TxQueue, set_eal_args, thread_lcore};
use linerate_testkit::{Requirement, require_root, should_skip};

fn require_net_null() -> Requirement {
    let out = std::process::Command::new("pkg-config")
        .args(["--variable=libdir", "libdpdk"])
        .output()
        .map_err(|e| format!("needs pkg-config and libdpdk-dev: {e}"))?;
    let libdir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let found = std::fs::read_dir(format!("{libdir}/dpdk"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| d.path().join("librte_net_null.so").exists());
    if found {
        Ok(())
    } else {
        Err(format!(
            "needs DPDK's net_null driver under {libdir}/dpdk (dpdk, librte-net-null23)"
        ))
    }
}

/// Sends `bursts` full bursts of 60-byte frames on the queue; the frames
/// the port took.
fn send(q: &mut TxQueue, bursts: usize) -> usize {
    let mut sent = 0;
    for _ in 0..bursts {
        let (n, bytes) = q
            .send_burst(64, |b| {
                while let Some((buf, _)) = b.next_mbuf() {
                    buf[..60].fill(0x5a);
                    b.built(60);
                }
            })
            .unwrap();
        assert_eq!(bytes, n as u64 * 60);
        sent += n;
    }
    sent
}

#[test]
fn threads_come_and_go_as_lcores_and_give_their_mbufs_back() {
    let name = "threads_come_and_go_as_lcores_and_give_their_mbufs_back";
    if should_skip(name, &[require_root(), require_net_null()]) {
        return;
    }
    let eal: Vec<String> = "-l 0 --no-huge -m 256 --no-pci --no-shconf --vdev net_null0"
        .split_whitespace()
        .map(String::from)
        .collect();
    set_eal_args(&eal).unwrap();
    for t in 0..200 {
        let (lcore, sent) = std::thread::spawn(|| {
            let mut q = TxQueue::open("net_null0", 0).unwrap();
            let sent = send(&mut q, 100);
            (thread_lcore(), sent)
        })
        .join()
        .unwrap();
        assert!(lcore.is_some(), "thread {t} has no lcore id");
        assert_eq!(sent, 6400, "thread {t}");
    }
    let q = TxQueue::open("net_null0", 0).unwrap();
    assert_eq!(
        q.free_mbufs(),
        q.slots(),
        "mbufs left in ended threads' caches"
    );
}
