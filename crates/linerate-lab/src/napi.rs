//! A rig host's receive path on kernel threads: threaded NAPI pinned to a
//! CPU, UDP through it, a multi-queue veth as an RSS NIC; one rig on the
//! host sets NAPI up at a time.

use crate::command::run;
use crate::error::RigError;
use crate::netns::Rig;
use std::time::Duration;

/// Locked while a rig turns threaded NAPI on and tells its new NAPI
/// threads from the ones before ([`Rig::threaded_napi`]): the threads are
/// found by that difference, so no two rigs on the host (of this process
/// or another) may do it at once. A file lock: the host's, not a static.
const NAPI_SETUP_LOCK: &str = "/run/lock/linerate-napi-setup.lock";

/// The longest a rig waits for another's NAPI setup (it takes a second).
const NAPI_SETUP_WAIT: Duration = Duration::from_secs(60);

/// Takes the host's NAPI-setup lock (released when the file is dropped).
fn napi_setup_lock(wait: Duration) -> Result<std::fs::File, RigError> {
    let io = |e: std::io::Error| RigError::Setup(format!("{NAPI_SETUP_LOCK}: {e}"));
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(NAPI_SETUP_LOCK)
        .map_err(io)?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(RigError::Setup(format!(
                    "{NAPI_SETUP_LOCK}: another rig held it for {:.1} s",
                    wait.as_secs_f64()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
    }
}

impl Rig {
    /// Makes host `i`'s receive path run in its own kernel thread (threaded
    /// NAPI, which veth enables with GRO) pinned to `cpu`, so receive cost
    /// lands on that CPU instead of on the sender's, as on two real hosts.
    ///
    /// But a veth hands a frame to its peer's NAPI only if the frame may be
    /// aggregated: when the sending veth has TSO on (the default), only
    /// datagrams of local UDP sockets, and only if the receiving veth has
    /// `rx-udp-gro-forwarding` (or `rx-gro-list`) on (see
    /// [`udp_through_napi`](Self::udp_through_napi)). Everything else (TCP,
    /// whose TSO super-packets pass whole, frames sent by AF_XDP or
    /// AF_PACKET) is received through the backlog on the sending CPU.
    ///
    /// Returns the NAPI threads it pinned.
    pub fn pin_receive_path(&self, host: usize, cpu: usize) -> Result<Vec<i32>, RigError> {
        let fresh = self.threaded_napi(host)?;
        if fresh.is_empty() {
            let h = &self.hosts[host];
            return Err(RigError::Config(format!(
                "no NAPI thread appeared for {} in {}",
                h.iface, h.netns
            )));
        }
        for &pid in &fresh {
            self.pin_thread(host, pid, cpu)?;
        }
        Ok(fresh)
    }

    /// Turns GRO and threaded NAPI on for host `host`'s veth; the NAPI
    /// threads that appeared, in pid order. They are found by difference,
    /// so rigs on the host do this one at a time (a file lock).
    fn threaded_napi(&self, host: usize) -> Result<Vec<i32>, RigError> {
        let h = &self.hosts[host];
        let _one_at_a_time = napi_setup_lock(NAPI_SETUP_WAIT)?;
        let before = napi_threads();
        run(self
            .command(host, "ethtool")
            .args(["-K", &h.iface, "gro", "on"]))?;
        run(self.command(host, "sh").args([
            "-c",
            &format!("echo 1 > /sys/class/net/{}/threaded", h.iface),
        ]))?;
        let mut fresh: Vec<i32> = napi_threads()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        fresh.sort_unstable();
        Ok(fresh)
    }

    /// Holds kernel thread `pid` (of host `host`'s veth) to `cpu`.
    fn pin_thread(&self, host: usize, pid: i32, cpu: usize) -> Result<(), RigError> {
        let mut set = nix::sched::CpuSet::new();
        set.set(cpu)
            .map_err(|e| RigError::Config(format!("CPU {cpu}: {e}")))?;
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid), &set).map_err(|e| {
            RigError::Netns {
                ns: self.hosts[host].netns.clone(),
                source: e.into(),
            }
        })
    }

    /// Turns `rx-udp-gro-forwarding` on for host `i`'s veth: UDP datagrams
    /// from sockets then take its NAPI thread (see
    /// [`pin_receive_path`](Self::pin_receive_path)) and GRO, as on a NIC:
    /// coalesced only for sockets that ask for UDP_GRO (and forwarded UDP,
    /// which the rig does not route). Without it they are received on the
    /// sender's CPU.
    pub fn udp_through_napi(&self, host: usize) -> Result<(), RigError> {
        let h = &self.hosts[host];
        run(self
            .command(host, "ethtool")
            .args(["-K", &h.iface, "rx-udp-gro-forwarding", "on"]))?;
        Ok(())
    }

    /// Host `host`'s veth as a multi-queue NIC with RSS: one threaded NAPI
    /// per receive queue, with GRO and socket UDP through it (see
    /// [`udp_through_napi`](Self::udp_through_napi)), the threads pinned
    /// in turn to `cpus`, as each queue's interrupt would be. A veth
    /// receives on the queue its peer sent on, which the peer picks by the
    /// flow's hash: flows spread over the queues as RSS spreads them.
    /// Returns each NAPI thread and its CPU.
    pub fn spread_receive_queues(
        &self,
        host: usize,
        cpus: &[usize],
    ) -> Result<Vec<(i32, usize)>, RigError> {
        if cpus.is_empty() {
            return Err(RigError::Config("no CPU to spread the queues over".into()));
        }
        self.udp_through_napi(host)?;
        let fresh = self.threaded_napi(host)?;
        if fresh.len() != usize::from(self.queues) {
            let h = &self.hosts[host];
            return Err(RigError::Config(format!(
                "{} NAPI threads appeared for {} in {}, not one per queue ({})",
                fresh.len(),
                h.iface,
                h.netns,
                self.queues
            )));
        }
        let placed: Vec<(i32, usize)> = fresh
            .into_iter()
            .zip(cpus.iter().cycle())
            .map(|(pid, &cpu)| (pid, cpu))
            .collect();
        for &(pid, cpu) in &placed {
            self.pin_thread(host, pid, cpu)?;
        }
        Ok(placed)
    }
}

/// PIDs of the kernel's NAPI threads (`napi/<iface>-<id>`).
pub fn napi_threads() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
        comm.starts_with("napi/").then_some(pid)
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rig_at_a_time_sets_napi_up_on_the_host() {
        if linerate_testkit::should_skip(
            "one_rig_at_a_time_sets_napi_up_on_the_host",
            &[linerate_testkit::require_root()],
        ) {
            return;
        }
        let held = napi_setup_lock(Duration::from_millis(10)).unwrap();
        let e = napi_setup_lock(Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("another rig held it"), "{e}");
        drop(held);
        napi_setup_lock(Duration::from_millis(100)).expect("free once dropped");
    }
}
