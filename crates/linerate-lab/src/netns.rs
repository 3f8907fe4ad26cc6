//! Creating, using and deleting the namespaces of a rig.

use nix::sched::{CloneFlags, setns};
use std::fs::File;
use std::io::Read;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a rig could not be built or used.
#[derive(Debug, Error)]
pub enum RigError {
    #[error("{cmd}: {stderr} ({status})")]
    Command {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("could not run {cmd}: {source}")]
    Spawn { cmd: String, source: std::io::Error },
    #[error("rig configuration: {0}")]
    Config(String),
    #[error("network namespace {ns}: {source}")]
    Netns { ns: String, source: std::io::Error },
    #[error("unexpected output from {cmd}: {what}")]
    Parse { cmd: String, what: String },
    #[error("{cmd}: no answer within {after:?} (ended)")]
    Timeout { cmd: String, after: Duration },
    #[error("rig setup: {0}")]
    Setup(String),
}

/// How to build a rig.
#[derive(Debug, Clone)]
pub struct RigConfig {
    /// Number of test hosts (2..=200). Two hosts share one veth pair; more
    /// hosts are joined through a bridge in a separate "switch" namespace.
    pub hosts: usize,
    /// TX and RX queues of every veth (1..=64), for multi-queue tests.
    pub queues: u16,
    /// MTU of the test links.
    pub mtu: u32,
}

impl Default for RigConfig {
    fn default() -> Self {
        Self {
            hosts: 2,
            queues: 1,
            mtu: 1500,
        }
    }
}

/// One test host: a namespace with one interface on the test network.
#[derive(Debug, Clone)]
pub struct Host {
    pub netns: String,
    pub iface: String,
    pub mac: String,
    pub ipv4: Ipv4Addr,
    pub ipv6: Ipv6Addr,
}

/// Interface counters, as the kernel keeps them (the receiver's truth).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfaceStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_dropped: u64,
}

/// A set of test hosts. Dropping it deletes every namespace it made.
#[derive(Debug)]
pub struct Rig {
    hosts: Vec<Host>,
    /// Every namespace this rig created, switch included.
    namespaces: Vec<String>,
    /// TX and RX queues of every veth.
    queues: u16,
}

/// Whether a named network namespace exists (`ip netns` keeps them in
/// /run/netns).
fn exists_netns(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

/// Prefix of every namespace a rig makes: `lrt-<pid>-<n>-<role>`.
const PREFIX: &str = "lrt-";

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

/// The longest a configuration command (ip, tc, ethtool) may take: they
/// answer in milliseconds; one that hangs (a wedged netlink, a namespace
/// being torn down) is ended, not waited for.
const COMMAND_DEADLINE: Duration = Duration::from_secs(30);

fn run(cmd: &mut Command) -> Result<Output, RigError> {
    run_within(cmd, COMMAND_DEADLINE)
}

/// Runs `cmd` to its end within `deadline`: its output, or which command
/// failed and why. A command still running at the deadline is killed (it
/// is this process's child) and reaped; one that exited but left its
/// output open (a child of its own holding the pipe) is not waited for
/// past the deadline either.
fn run_within(cmd: &mut Command, deadline: Duration) -> Result<Output, RigError> {
    let text = format!("{cmd:?}").replace('"', "");
    let end = Instant::now() + deadline;
    let timeout = || RigError::Timeout {
        cmd: text.clone(),
        after: deadline,
    };
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| RigError::Spawn {
            cmd: text.clone(),
            source,
        })?;
    // Both pipes read on their own threads (a command that fills one pipe
    // while we wait on the other would never end); each answers once.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut v);
            }
            let _ = tx.send(v);
        });
        rx
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let mut pause = Duration::from_micros(100);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < end => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(10));
            }
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(timeout());
            }
            Err(source) => {
                return Err(RigError::Spawn {
                    cmd: text.clone(),
                    source,
                });
            }
        }
    };
    let left = |rx: mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(end.saturating_duration_since(Instant::now()))
            .map_err(|_| timeout())
    };
    let out = Output {
        status,
        stdout: left(stdout)?,
        stderr: left(stderr)?,
    };
    if !out.status.success() {
        return Err(RigError::Command {
            cmd: text,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out)
}

fn ip(args: &[&str]) -> Result<Output, RigError> {
    run(Command::new("ip").args(args))
}

/// Runs `ip ARGS`: its standard output, or which command failed and why.
pub fn ip_text(args: &[&str]) -> Result<String, RigError> {
    ip(args).map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Deletes namespaces left by rig processes that no longer exist (a test
/// killed with SIGKILL cannot run its destructor).
fn sweep_stale() {
    let Ok(out) = ip(&["netns", "list"]) else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// The hosts of rig `id`: names, MACs and addresses (host i has
/// 198.18.0.(i+1) and 2001:db8::(i+1)).
fn hosts(id: &str, cfg: &RigConfig) -> Result<Vec<Host>, RigError> {
    (0..cfg.hosts)
        .map(|i| {
            let host_no = u8::try_from(i + 1)
                .map_err(|_| RigError::Config(format!("host {i}: at most 200 hosts")))?;
            Ok(Host {
                netns: format!("{id}-h{i}"),
                iface: "veth0".into(),
                mac: format!("02:00:00:00:00:{:02x}", 0x0a + i),
                ipv4: Ipv4Addr::new(198, 18, 0, host_no),
                ipv6: Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(host_no)),
            })
        })
        .collect()
}

/// A veth pair `a` (in `a_ns`) to `b` (in `b_ns`) with the rig's queues
/// and MTU.
fn veth(cfg: &RigConfig, a_ns: &str, a: &str, b_ns: &str, b: &str) -> Result<(), RigError> {
    let q = cfg.queues.to_string();
    let mtu = cfg.mtu.to_string();
    ip(&[
        "link",
        "add",
        "name",
        a,
        "netns",
        a_ns,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "mtu",
        &mtu,
        "type",
        "veth",
        "peer",
        "name",
        b,
        "netns",
        b_ns,
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "mtu",
        &mtu,
    ])?;
    Ok(())
}

impl Rig {
    /// Two hosts on one veth pair, single queue, MTU 1500.
    pub fn pair() -> Result<Self, RigError> {
        Self::new(&RigConfig::default())
    }

    /// A pair whose host 0 holds both ends: its `veth0`, and host 1's end
    /// moved in as `veth1` (up, no address): two ports of one program (an
    /// agent's), joined. Host 1's namespace stays, empty, and goes with
    /// the rig.
    pub fn looped() -> Result<Self, RigError> {
        let rig = Self::pair()?;
        let (ns0, ns1) = (rig.hosts[0].netns.clone(), rig.hosts[1].netns.clone());
        ip(&["-n", &ns1, "link", "set", "dev", "veth0", "name", "veth1"])?;
        ip(&["-n", &ns1, "link", "set", "dev", "veth1", "netns", &ns0])?;
        ip(&["-n", &ns0, "link", "set", "dev", "veth1", "up"])?;
        Ok(rig)
    }

    pub fn new(cfg: &RigConfig) -> Result<Self, RigError> {
        if !(2..=200).contains(&cfg.hosts) {
            return Err(RigError::Config(format!(
                "{} hosts: a rig has 2 to 200",
                cfg.hosts
            )));
        }
        if !(1..=64).contains(&cfg.queues) {
            return Err(RigError::Config(format!(
                "{} queues: veth takes 1 to 64",
                cfg.queues
            )));
        }
        if !(68..=65535).contains(&cfg.mtu) {
            return Err(RigError::Config(format!("MTU {} out of range", cfg.mtu)));
        }
        sweep_stale();
        let mut rig = Rig {
            hosts: Vec::new(),
            namespaces: Vec::new(),
            queues: cfg.queues,
        };
        // From here on, an error drops `rig`, which deletes what was made.
        let id = rig.claim_id()?;
        rig.build(&id, cfg)?;
        Ok(rig)
    }

    /// The rig's id, `lrt-<pid>-<n>`: the first n whose host 0 namespace
    /// this call could create (`ip netns add` fails on a name that
    /// exists, so two rigs made at once never share one; no counter in the
    /// process is needed).
    fn claim_id(&mut self) -> Result<String, RigError> {
        let pid = std::process::id();
        let mut last = None;
        for n in 0..1000u32 {
            let id = format!("{PREFIX}{pid}-{n}");
            let first = format!("{id}-h0");
            if exists_netns(&first) {
                continue;
            }
            match self.add_netns(first.clone()) {
                Ok(()) => return Ok(id),
                // Taken between the check and the add: the next one.
                Err(e) if exists_netns(&first) && !self.namespaces.contains(&first) => {
                    last = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            RigError::Config(format!("1000 rigs of process {pid} exist: delete some"))
        }))
    }

    fn add_netns(&mut self, name: String) -> Result<(), RigError> {
        ip(&["netns", "add", &name])?;
        self.namespaces.push(name.clone());
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        Ok(())
    }

    fn build(&mut self, id: &str, cfg: &RigConfig) -> Result<(), RigError> {
        self.hosts = hosts(id, cfg)?;
        // Host 0's namespace is the one claim_id made.
        for h in self.hosts.clone().into_iter().skip(1) {
            self.add_netns(h.netns.clone())?;
        }
        self.link(id, cfg)?;
        for h in &self.hosts {
            self.address(h)?;
        }
        self.neighbours()
    }

    /// Joins the hosts: two by one veth pair, more through a bridge in a
    /// "switch" namespace, each by a veth pair of its own.
    fn link(&mut self, id: &str, cfg: &RigConfig) -> Result<(), RigError> {
        if cfg.hosts == 2 {
            let (a, b) = (&self.hosts[0], &self.hosts[1]);
            return veth(cfg, &a.netns, &a.iface, &b.netns, &b.iface);
        }
        let sw = format!("{id}-sw");
        self.add_netns(sw.clone())?;
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &sw, "link", "set", "br0", "up"])?;
        for (i, h) in self.hosts.iter().enumerate() {
            let port = format!("p{i}");
            veth(cfg, &h.netns, &h.iface, &sw, &port)?;
            ip(&["-n", &sw, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &sw, "link", "set", &port, "up"])?;
        }
        Ok(())
    }

    /// A host's interface: IPv6 without duplicate address detection or
    /// router discovery (nothing but the test's traffic), its MAC, its
    /// addresses, up.
    fn address(&self, h: &Host) -> Result<(), RigError> {
        self.run_in_netns(&h.netns, || -> std::io::Result<()> {
            for knob in ["all", "default", "veth0"] {
                for (k, v) in [
                    ("accept_dad", "0"),
                    ("accept_ra", "0"),
                    ("router_solicitations", "0"),
                ] {
                    let path = format!("/proc/sys/net/ipv6/conf/{knob}/{k}");
                    if std::path::Path::new(&path).exists() {
                        std::fs::write(path, v)?;
                    }
                }
            }
            Ok(())
        })?
        .map_err(|source| RigError::Netns {
            ns: h.netns.clone(),
            source,
        })?;
        let ns = h.netns.as_str();
        ip(&["-n", ns, "link", "set", &h.iface, "address", &h.mac])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/24", h.ipv4),
            "dev",
            &h.iface,
        ])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/64", h.ipv6),
            "dev",
            &h.iface,
            "nodad",
        ])?;
        ip(&["-n", ns, "link", "set", &h.iface, "up"])?;
        Ok(())
    }

    /// Every host knows every other's MACs (static entries: no ARP/ND).
    fn neighbours(&self) -> Result<(), RigError> {
        for h in &self.hosts {
            for peer in self.hosts.iter().filter(|p| p.netns != h.netns) {
                for addr in [peer.ipv4.to_string(), peer.ipv6.to_string()] {
                    ip(&[
                        "-n",
                        &h.netns,
                        "neigh",
                        "replace",
                        &addr,
                        "lladdr",
                        &peer.mac,
                        "dev",
                        &h.iface,
                        "nud",
                        "permanent",
                    ])?;
                }
            }
        }
        Ok(())
    }

    pub fn hosts(&self) -> &[Host] {
        &self.hosts
    }

    pub fn host(&self, i: usize) -> &Host {
        &self.hosts[i]
    }

    /// `ip netns exec <ns of host i> program`: a command to run on a host.
    pub fn command(&self, host: usize, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.hosts[host].netns, program]);
        c
    }

    /// Runs `f` on a new thread that has joined host `i`'s network namespace,
    /// and returns its result. Sockets made in `f` belong to that host.
    pub fn run_in<R: Send>(
        &self,
        host: usize,
        f: impl FnOnce() -> R + Send,
    ) -> Result<R, RigError> {
        self.run_in_netns(&self.hosts[host].netns, f)
    }

    fn run_in_netns<R: Send>(&self, ns: &str, f: impl FnOnce() -> R + Send) -> Result<R, RigError> {
        let path = format!("/var/run/netns/{ns}");
        let file = File::open(&path).map_err(|source| RigError::Netns {
            ns: ns.to_string(),
            source,
        })?;
        std::thread::scope(|s| {
            s.spawn(move || {
                setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| RigError::Netns {
                    ns: ns.to_string(),
                    source: e.into(),
                })?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Interface counters of host `i`'s test interface.
    pub fn stats(&self, host: usize) -> Result<IfaceStats, RigError> {
        let h = &self.hosts[host];
        let out = ip(&["-n", &h.netns, "-s", "-j", "link", "show", "dev", &h.iface])?;
        parse_stats(&out.stdout).ok_or_else(|| RigError::Parse {
            cmd: "ip -s -j link show".into(),
            what: String::from_utf8_lossy(&out.stdout)
                .chars()
                .take(200)
                .collect(),
        })
    }

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

    /// Names of the namespaces this rig made (hosts and switch).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
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

fn parse_stats(json: &[u8]) -> Option<IfaceStats> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let s = v.get(0)?.get("stats64")?;
    let n = |dir: &str, k: &str| s.get(dir)?.get(k)?.as_u64();
    Some(IfaceStats {
        rx_packets: n("rx", "packets")?,
        rx_bytes: n("rx", "bytes")?,
        rx_dropped: n("rx", "dropped")?,
        tx_packets: n("tx", "packets")?,
        tx_bytes: n("tx", "bytes")?,
        tx_dropped: n("tx", "dropped")?,
    })
}

impl Drop for Rig {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth ends inside it.
        for ns in self.namespaces.iter().rev() {
            if let Err(e) = ip(&["netns", "del", ns]) {
                eprintln!("linerate-lab: could not delete namespace {ns}: {e}");
            }
        }
    }
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

    #[test]
    fn a_command_gets_its_output_and_its_failure_says_why() {
        let out = run(Command::new("sh").args(["-c", "echo out; echo err >&2"])).unwrap();
        assert_eq!(
            (&out.stdout[..], &out.stderr[..]),
            (&b"out\n"[..], &b"err\n"[..])
        );
        // More than a pipe's buffer on both pipes: read as it comes.
        let out = run(Command::new("sh").args([
            "-c",
            "head -c 200000 /dev/zero; head -c 200000 /dev/zero >&2",
        ]))
        .unwrap();
        assert_eq!((out.stdout.len(), out.stderr.len()), (200_000, 200_000));
        match run(Command::new("sh").args(["-c", "echo no >&2; exit 3"])) {
            Err(RigError::Command { stderr, status, .. }) => {
                assert_eq!(stderr, "no");
                assert!(status.contains('3'), "{status}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            run(&mut Command::new("/nonexistent/linerate-lab-test")),
            Err(RigError::Spawn { .. })
        ));
    }

    #[test]
    fn a_command_that_hangs_is_ended_at_its_deadline() {
        // (Sleeps of 2 s: without the deadline each call would return Ok
        // after them, and what the test leaves behind ends by itself.)
        let t = Instant::now();
        let e = run_within(Command::new("sleep").arg("2"), Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, RigError::Timeout { .. }), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
        // Exited, but a child of its own holds the output open.
        let t = Instant::now();
        let e = run_within(
            Command::new("sh").args(["-c", "sleep 2 & echo started"]),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(matches!(e, RigError::Timeout { .. }), "{e}");
        assert!(
            t.elapsed() < Duration::from_millis(1500),
            "{:?}",
            t.elapsed()
        );
    }

    #[test]
    fn stats_from_ip_json() {
        let json = br#"[{"ifname":"veth0","stats64":{"rx":{"bytes":120,"packets":2,"errors":0,"dropped":1,"multicast":0},"tx":{"bytes":60,"packets":1,"errors":0,"dropped":0}}}]"#;
        assert_eq!(
            parse_stats(json),
            Some(IfaceStats {
                rx_packets: 2,
                rx_bytes: 120,
                rx_dropped: 1,
                tx_packets: 1,
                tx_bytes: 60,
                tx_dropped: 0,
            })
        );
        assert_eq!(parse_stats(b"[]"), None);
        assert_eq!(parse_stats(b"not json"), None);
    }

    #[test]
    fn bad_configs_are_refused_before_anything_is_made() {
        for cfg in [
            RigConfig {
                hosts: 1,
                ..RigConfig::default()
            },
            RigConfig {
                queues: 0,
                ..RigConfig::default()
            },
            RigConfig {
                mtu: 10,
                ..RigConfig::default()
            },
        ] {
            assert!(matches!(Rig::new(&cfg), Err(RigError::Config(_))));
        }
    }
}
