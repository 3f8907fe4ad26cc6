//! Every check against fixture trees: a healthy host where it stays quiet,
//! and a host with the problem where it fires.

use linerate_doctor::{Fixture, Report, Severity, run, run_for};
use std::path::Path;

/// A fixture host: 4 CPUs, eth0 (driver ice) with 4 queues, tuned.
struct Tree(tempfile::TempDir);

impl Tree {
    fn healthy() -> Tree {
        let t = Tree(tempfile::tempdir().unwrap());
        for (p, v) in [
            ("sys/devices/system/cpu/online", "0-3"),
            ("sys/devices/system/cpu/isolated", ""),
            ("sys/devices/system/cpu/nohz_full", "(null)"),
            ("sys/devices/system/cpu/smt/active", "0"),
            ("sys/devices/system/node/node0/cpulist", "0-3"),
            ("sys/class/net/eth0/ifindex", "2"),
            ("sys/class/net/eth0/mtu", "1500"),
            ("sys/class/net/eth0/device/numa_node", "0"),
            ("proc/meminfo", "MemTotal: 1 kB\nHugePages_Total:    1024\n"),
            ("proc/sys/kernel/osrelease", "6.1.0"),
            ("proc/sys/net/ipv4/conf/all/rp_filter", "2"),
            ("proc/sys/net/ipv4/conf/eth0/rp_filter", "0"),
            ("proc/sys/net/ipv4/conf/eth0/accept_local", "1"),
            ("proc/sys/net/core/rmem_max", "67108864"),
            ("proc/sys/net/core/wmem_max", "67108864"),
            ("proc/sys/net/ipv4/tcp_rmem", "4096 131072 67108864"),
            ("proc/sys/net/ipv4/tcp_wmem", "4096 16384 67108864"),
            ("proc/sys/net/core/netdev_max_backlog", "250000"),
            ("proc/sys/net/ipv4/tcp_congestion_control", "cubic"),
            ("proc/sys/net/core/busy_poll", "50"),
            ("proc/sys/net/core/busy_read", "50"),
            ("proc/1/comm", "systemd"),
            ("proc/2/comm", "sshd"),
            ("limits/memlock", "18446744073709551615"),
            ("ethtool/eth0/driver", "ice"),
            (
                "ethtool/eth0/channels",
                r#"{"max_rx":0,"max_tx":0,"max_combined":16,"rx":0,"tx":0,"combined":4}"#,
            ),
            (
                "ethtool/eth0/rings",
                r#"{"rx_max":4096,"tx_max":4096,"rx":4096,"tx":4096}"#,
            ),
            ("ethtool/eth0/rss", "[0,1,2,3,0,1,2,3]"),
            (
                "ethtool/eth0/offloads",
                r#"{"rx_checksum":true,"tx_checksum":true,"scatter_gather":true,"tso":true,"gso":true,"gro":false}"#,
            ),
        ] {
            t.set(p, v);
        }
        let mut interrupts = String::from("           CPU0       CPU1       CPU2       CPU3\n");
        for q in 0..4 {
            t.set(&format!("sys/class/net/eth0/queues/rx-{q}/rps_cpus"), "0");
            t.set(
                &format!("sys/class/net/eth0/queues/tx-{q}/xps_cpus"),
                &format!("{:x}", 1 << q),
            );
            t.set(
                &format!("sys/devices/system/cpu/cpu{q}/cpufreq/scaling_governor"),
                "performance",
            );
            let irq = 40 + q;
            t.set(&format!("proc/irq/{irq}/smp_affinity_list"), &q.to_string());
            t.set(
                &format!("proc/irq/{irq}/affinity_hint"),
                &format!("{:x}", 1 << q),
            );
            interrupts.push_str(&format!(" {irq}:  1 2 3 4  IR-PCI-MSI  eth0-TxRx-{q}\n"));
        }
        t.set("proc/interrupts", &interrupts);
        t
    }

    fn set(&self, p: &str, v: &str) -> &Self {
        let path = self.0.path().join(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, v).unwrap();
        self
    }

    fn remove(&self, p: &str) -> &Self {
        let path = self.0.path().join(p);
        if path.is_dir() {
            std::fs::remove_dir_all(path).unwrap();
        } else {
            std::fs::remove_file(path).unwrap();
        }
        self
    }

    fn report_for(&self, iface: Option<&str>, workers: &[usize]) -> Report {
        run_for(
            &Fixture {
                root: self.0.path().to_path_buf(),
            },
            iface,
            workers,
        )
    }

    fn report(&self, iface: Option<&str>) -> Report {
        run(
            &Fixture {
                root: self.0.path().to_path_buf(),
            },
            iface,
        )
    }

    fn root(&self) -> &Path {
        self.0.path()
    }
}

fn ids(r: &Report, at_least: Severity) -> Vec<&'static str> {
    r.findings
        .iter()
        .filter(|f| f.severity >= at_least)
        .map(|f| f.id)
        .collect()
}

fn has(r: &Report, id: &str) -> bool {
    r.findings.iter().any(|f| f.id == id)
}

fn finding<'a>(r: &'a Report, id: &str) -> &'a linerate_doctor::Finding {
    r.findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} in {:?}", ids(r, Severity::Info)))
}

#[test]
fn healthy_host_has_no_warnings_and_checked_everything() {
    let r = Tree::healthy().report(Some("eth0"));
    assert_eq!(
        ids(&r, Severity::Warning),
        Vec::<&str>::new(),
        "{}",
        r.text()
    );
    assert!(r.could_not_check.is_empty(), "{:?}", r.could_not_check);
    assert_eq!(r.exit_code(), 0);
    assert_eq!(r.cpus, 4);
    assert!(has(&r, "nic.capabilities") && has(&r, "kernel.congestion"));
    assert!(finding(&r, "nic.capabilities").title.contains("zero-copy"));
}

#[test]
fn rss_table_covering_few_queues_will_limit() {
    let t = Tree::healthy();
    t.set("ethtool/eth0/rss", "[0,1,2,0,1,2]");
    let r = t.report(Some("eth0"));
    let f = finding(&r, "nic.rss_table");
    assert_eq!(f.severity, Severity::Limit);
    assert!(f.title.contains("3 of 4"), "{}", f.title);
    assert_eq!(f.fix.as_deref(), Some("ethtool -X eth0 equal 4"));
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn few_queues_without_rps() {
    let t = Tree::healthy();
    t.remove("sys/class/net/eth0/queues/rx-2")
        .remove("sys/class/net/eth0/queues/rx-3");
    t.set("ethtool/eth0/rss", "[0,1]");
    let r = t.report(Some("eth0"));
    assert_eq!(
        finding(&r, "nic.queues").severity,
        Severity::Warning,
        "driver allows more"
    );
    assert!(
        finding(&r, "nic.queues")
            .fix
            .as_deref()
            .unwrap()
            .contains("combined 4")
    );
    assert!(
        finding(&r, "nic.rps")
            .fix
            .as_deref()
            .unwrap()
            .contains("echo f >")
    );
    t.set("sys/class/net/eth0/queues/rx-0/rps_cpus", "f");
    assert!(!has(&t.report(Some("eth0")), "nic.rps"), "RPS configured");
}

#[test]
fn xps_unset() {
    let t = Tree::healthy();
    t.set("sys/class/net/eth0/queues/tx-2/xps_cpus", "0");
    let r = t.report(Some("eth0"));
    assert!(finding(&r, "nic.xps").title.contains("1 of 4"));
}

#[test]
fn misplaced_irqs() {
    let t = Tree::healthy();
    for q in 0..4 {
        t.set(&format!("proc/irq/{}/smp_affinity_list", 40 + q), "0");
    }
    t.set("proc/77/comm", "irqbalance");
    let r = t.report(Some("eth0"));
    assert_eq!(finding(&r, "nic.irq_one_cpu").severity, Severity::Limit);
    assert!(finding(&r, "nic.irq_hint").title.contains("3 IRQ"));
    assert!(has(&r, "nic.irqbalance"));
}

#[test]
fn irqs_on_the_far_numa_node() {
    let t = Tree::healthy();
    t.set("sys/devices/system/node/node0/cpulist", "0-1")
        .set("sys/devices/system/node/node1/cpulist", "2-3");
    let r = t.report(Some("eth0"));
    assert!(finding(&r, "nic.numa").title.contains("[2, 3]"));
}

#[test]
fn workers_on_the_far_numa_node() {
    let t = Tree::healthy();
    t.set("sys/devices/system/node/node0/cpulist", "0-1")
        .set("sys/devices/system/node/node1/cpulist", "2-3");
    // Near workers: quiet; the check ran (one more than without workers).
    let near = t.report_for(Some("eth0"), &[0, 1]);
    assert!(!has(&near, "nic.workers_numa"));
    assert_eq!(near.checks_run, t.report(Some("eth0")).checks_run + 2);
    assert!(
        near.could_not_check.is_empty(),
        "{:?}",
        near.could_not_check
    );
    let far = t.report_for(Some("eth0"), &[1, 3]);
    let f = finding(&far, "nic.workers_numa");
    assert!(f.title.contains("[3]"), "{}", f.title);
    assert_eq!(f.severity, Severity::Warning);
    // Without pinned workers the check does not run at all.
    assert!(!has(&t.report(Some("eth0")), "nic.workers_numa"));
}

#[test]
fn workers_numa_on_a_virtual_device_says_why_not() {
    let t = Tree::healthy();
    t.set("sys/class/net/eth0/device/numa_node", "-1");
    let r = t.report_for(Some("eth0"), &[0]);
    let u = r
        .could_not_check
        .iter()
        .find(|u| u.check == "nic.workers_numa")
        .expect("workers_numa reported as not checked");
    assert!(u.reason.contains("no NUMA node"), "{}", u.reason);
}

#[test]
fn workers_offline_or_doubled_up() {
    let t = Tree::healthy();
    let ok = t.report_for(Some("eth0"), &[0, 1, 2, 3]);
    assert!(!has(&ok, "cpu.workers_offline") && !has(&ok, "cpu.workers_shared"));
    let r = t.report_for(Some("eth0"), &[1, 1, 7]);
    assert_eq!(finding(&r, "cpu.workers_offline").severity, Severity::Limit);
    assert!(finding(&r, "cpu.workers_offline").title.contains("[7]"));
    assert!(finding(&r, "cpu.workers_shared").title.contains("[1]"));
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn offloads_and_gro() {
    let t = Tree::healthy();
    t.set("ethtool/eth0/offloads", r#"{"rx_checksum":true,"tx_checksum":false,"scatter_gather":true,"tso":false,"gso":true,"gro":true}"#);
    let r = t.report(Some("eth0"));
    assert_eq!(finding(&r, "nic.gro").severity, Severity::Info);
    let f = finding(&r, "nic.offloads_off");
    assert_eq!(
        f.fix.as_deref(),
        Some("ethtool -K eth0 tso on tx-checksum on")
    );
}

#[test]
fn short_rings_and_mtu() {
    let t = Tree::healthy();
    t.set(
        "ethtool/eth0/rings",
        r#"{"rx_max":4096,"tx_max":4096,"rx":512,"tx":4096}"#,
    );
    t.set("sys/class/net/eth0/mtu", "1400");
    let r = t.report(Some("eth0"));
    assert_eq!(
        finding(&r, "nic.rings").fix.as_deref(),
        Some("ethtool -G eth0 rx 4096 tx 4096")
    );
    assert_eq!(finding(&r, "nic.mtu").severity, Severity::Warning);
    t.set("sys/class/net/eth0/mtu", "9000");
    assert_eq!(
        finding(&t.report(Some("eth0")), "nic.mtu").severity,
        Severity::Info
    );
}

#[test]
fn driver_without_native_xdp() {
    let t = Tree::healthy();
    t.set("ethtool/eth0/driver", "r8169");
    let f = finding(&t.report(Some("eth0")), "nic.capabilities").clone();
    assert_eq!(f.severity, Severity::Warning);
    assert!(f.title.contains("generic (skb) XDP only"), "{}", f.title);
}

#[test]
fn firewall_and_conntrack() {
    let t = Tree::healthy();
    t.set("proc/net/ip_tables_names", "filter\n");
    t.set("proc/sys/net/netfilter/nf_conntrack_count", "0");
    let r = t.report(None);
    assert!(finding(&r, "kernel.firewall").evidence[0].contains("filter"));
    assert_eq!(finding(&r, "kernel.conntrack").severity, Severity::Info);
    t.set("proc/sys/net/netfilter/nf_conntrack_count", "1200");
    assert_eq!(
        finding(&t.report(None), "kernel.conntrack").severity,
        Severity::Warning
    );
}

#[test]
fn reverse_path_filter_and_accept_local() {
    let t = Tree::healthy();
    // The kernel uses the larger of "all" and the interface's value.
    t.set("proc/sys/net/ipv4/conf/eth0/rp_filter", "1");
    assert!(
        !has(&t.report(Some("eth0")), "kernel.rp_filter"),
        "all=2 makes it loose"
    );
    t.set("proc/sys/net/ipv4/conf/all/rp_filter", "0");
    t.set("proc/sys/net/ipv4/conf/eth0/accept_local", "0");
    let r = t.report(Some("eth0"));
    assert!(
        finding(&r, "kernel.rp_filter")
            .evidence
            .iter()
            .any(|e| e.contains("eth0.rp_filter = 1"))
    );
    assert!(has(&r, "kernel.accept_local"));
}

#[test]
fn auditd_buffers_backlog_busy_poll() {
    let t = Tree::healthy();
    t.set("proc/99/comm", "auditd");
    t.set("proc/sys/net/core/rmem_max", "212992");
    t.set("proc/sys/net/core/netdev_max_backlog", "1000");
    t.set("proc/sys/net/core/busy_poll", "0")
        .set("proc/sys/net/core/busy_read", "0");
    let r = t.report(None);
    assert!(has(&r, "kernel.audit"));
    assert_eq!(
        finding(&r, "kernel.buffers").evidence,
        vec!["net.core.rmem_max = 212992"]
    );
    assert!(has(&r, "kernel.backlog"));
    assert!(has(&r, "kernel.busy_poll"));
}

#[test]
fn cpu_checks() {
    let t = Tree::healthy();
    t.set("sys/devices/system/cpu/isolated", "2-3");
    t.set("sys/devices/system/cpu/smt/active", "1");
    t.set(
        "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "powersave",
    );
    t.set("proc/meminfo", "HugePages_Total:       0\n");
    t.set("limits/memlock", "65536");
    t.set("proc/sys/kernel/osrelease", "5.4.0-150-generic");
    let r = t.report(None);
    assert!(finding(&r, "cpu.isolated").title.contains("2-3"));
    assert!(has(&r, "cpu.smt"));
    assert!(finding(&r, "cpu.governor").title.contains("1 of 4"));
    assert!(has(&r, "cpu.hugepages"));
    assert!(has(&r, "cpu.memlock"), "old kernel with a 64 KiB limit");
    t.set("proc/sys/kernel/osrelease", "6.1.0");
    assert!(
        !has(&t.report(None), "cpu.memlock"),
        "5.11+ does not use RLIMIT_MEMLOCK for UMEM"
    );
}

#[test]
fn missing_files_and_interfaces_are_reported_not_guessed() {
    let t = Tree::healthy();
    // A VM without cpufreq, a driver that refuses the ring and RSS ioctls.
    for q in 0..4 {
        t.remove(&format!("sys/devices/system/cpu/cpu{q}/cpufreq"));
    }
    t.remove("ethtool/eth0/rings").remove("ethtool/eth0/rss");
    t.set("ethtool/eth0/offloads", "not json");
    let r = t.report(Some("eth0"));
    let unchecked: Vec<&str> = r.could_not_check.iter().map(|u| u.check).collect();
    for c in ["cpu.governor", "nic.rings", "nic.rss_table", "nic.offloads"] {
        assert!(unchecked.contains(&c), "{c} missing from {unchecked:?}");
    }
    assert!(r.text().contains("COULD NOT CHECK"));
    // An interface that does not exist: every NIC check says so.
    let r = t.report(Some("eth9"));
    assert!(
        r.could_not_check
            .iter()
            .filter(|u| u.check.starts_with("nic."))
            .all(|u| u.reason.contains("eth9 does not exist"))
    );
    assert!(r.could_not_check.iter().any(|u| u.check == "nic.queues"));
    // An empty tree: nothing crashes, nothing is called fine.
    let empty = tempfile::tempdir().unwrap();
    let r = run(
        &Fixture {
            root: empty.path().to_path_buf(),
        },
        Some("eth0"),
    );
    assert!(r.could_not_check.len() >= 8, "{:?}", r.could_not_check);
    let _ = t.root();
}

#[test]
fn one_unreadable_setting_does_not_hide_the_others() {
    // Inside a network namespace the host-wide net.core settings are absent.
    let t = Tree::healthy();
    t.set("proc/sys/net/core/rmem_max", "4194304");
    t.remove("proc/sys/net/core/netdev_max_backlog")
        .remove("proc/sys/net/core/busy_poll");
    let r = t.report(None);
    assert!(has(&r, "kernel.buffers"));
    assert!(has(&r, "kernel.congestion"));
    let backlog = r
        .could_not_check
        .iter()
        .find(|u| u.check == "kernel.backlog")
        .unwrap();
    assert!(
        backlog.reason.contains("network namespace"),
        "{}",
        backlog.reason
    );
    assert!(
        r.could_not_check
            .iter()
            .any(|u| u.check == "kernel.busy_poll")
    );
}
