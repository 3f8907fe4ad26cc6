//! Creating, using and deleting the namespaces of a rig.

use crate::command::ip;
use crate::error::RigError;
use nix::sched::{CloneFlags, setns};
use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

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
    pub(crate) hosts: Vec<Host>,
    /// Every namespace this rig created, switch included.
    namespaces: Vec<String>,
    /// TX and RX queues of every veth.
    pub(crate) queues: u16,
}

/// Whether a named network namespace exists (`ip netns` keeps them in
/// /run/netns).
fn exists_netns(name: &str) -> bool {
    std::path::Path::new("/run/netns").join(name).exists()
}

/// Prefix of every namespace a rig makes: `lrt-<pid>-<n>-<role>`.
const PREFIX: &str = "lrt-";

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

    /// Names of the namespaces this rig made (hosts and switch).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }
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
