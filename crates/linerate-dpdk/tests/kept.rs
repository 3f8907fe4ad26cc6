//! A TX queue keeps its mbufs (issue 42 item 4): on net_null, burst after
//! burst of uneven sizes, the queue hands out its kept mbufs in turn
//! (slot `k` after slot `k - 1`, back to 0 after the last), each one
//! still holding what was built in it a turn before, and every one comes
//! back to the pool when the queue is closed. This is what lets the
//! frame builder leave a frame's flow fields as they are: with the pool's
//! own order (its per-lcore cache: the mbufs last freed, last first) the
//! slots a burst gets repeat after a cache's worth and the test fails.
#![cfg(feature = "ffi")]

use linerate_dpdk::{TxQueue, set_eal_args};
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

#[test]
fn a_tx_queue_hands_out_its_kept_mbufs_in_turn_with_their_frames() {
    let name = "a_tx_queue_hands_out_its_kept_mbufs_in_turn_with_their_frames";
    if should_skip(name, &[require_root(), require_net_null()]) {
        return;
    }
    let eal: Vec<String> = "-l 0 --no-huge -m 256 --no-pci --no-shconf --vdev net_null0"
        .split_whitespace()
        .map(String::from)
        .collect();
    set_eal_args(&eal).unwrap();
    let mut q = TxQueue::open("net_null0", 0).unwrap();
    let slots = q.slots();
    assert_eq!(slots, 4096, "kept mbufs");
    // What each slot was last given: the frame count when it was built.
    let mut last = vec![None::<u64>; slots];
    let (mut next, mut frames, mut rng) = (0usize, 0u64, 0x9e37_79b9_u64);
    while frames < 3 * slots as u64 + 1000 {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let n = 1 + (rng >> 33) as usize % 64;
        // (some bursts build fewer frames than they asked mbufs for)
        // (a burst also stops at the last kept mbuf)
        let build = if rng >> 60 == 0 { n / 2 } else { n };
        let mut built = 0;
        let (sent, _) = q
            .send_burst(n, |mut b| {
                for _ in 0..build {
                    let Some((buf, slot, received)) = b.next_mbuf() else {
                        assert_eq!(next, 0, "a burst cut short but at the last kept mbuf");
                        break;
                    };
                    assert!(!received, "slot {slot}");
                    assert_eq!(slot, next, "frame {frames}: the turn's next slot");
                    let held = u64::from_be_bytes(buf[..8].try_into().unwrap());
                    if let Some(f) = last[slot] {
                        assert_eq!(held, f, "slot {slot}: its last frame");
                    }
                    buf[..8].copy_from_slice(&frames.to_be_bytes());
                    buf[8..60].fill(0x5a);
                    b.built(60);
                    last[slot] = Some(frames);
                    next = (next + 1) % slots;
                    frames += 1;
                    built += 1;
                }
                b.taken()
            })
            .unwrap();
        assert_eq!(sent, built, "net_null takes every frame");
        assert!(built == build || next == 0, "{built} of {build} built");
    }
    drop(q);
    let q = TxQueue::open("net_null0", 0).unwrap();
    drop(q);
    let q = TxQueue::open("net_null0", 0).unwrap();
    assert_eq!(q.free_mbufs(), q.pool_mbufs(), "mbufs not given back");
}
