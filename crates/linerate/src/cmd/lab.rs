//! `linerate lab up|down|status`: the namespace topologies the README's
//! examples and the tests use, on one machine, with addresses from
//! 198.18.0.0/15 and 2001:db8::/32 only.
//!
//! - `pair`: `lr-a` and `lr-b`, each with `veth0`, joined.
//! - `dut`: a generator `lr-gen` with two ports (`ga`, `gb`) and a device
//!   under test `lr-dut` (`da`, `db`) that routes between them, optionally
//!   shaped by a TBF qdisc on `db` (`--dut-rate`).

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use std::process::Command;

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: LabCmd,
}

#[derive(Debug, Subcommand)]
enum LabCmd {
    /// Create a topology (namespaces, veths, addresses, routes).
    Up {
        /// pair: two hosts joined by a veth; dut: a generator with two
        /// ports and a routing device under test between them.
        #[arg(long, default_value = "pair")]
        topology: String,
        /// dut: shape the device's egress towards the generator's second
        /// port with TBF at this rate (tc's units: 100mbit, 1gbit).
        #[arg(long)]
        dut_rate: Option<String>,
    },
    /// Delete the lab's namespaces (only those this command creates).
    Down,
    /// Which lab namespaces exist, with their interfaces and addresses.
    Status,
}

const PAIR: [&str; 2] = ["lr-a", "lr-b"];
const DUT: [&str; 2] = ["lr-gen", "lr-dut"];

fn ip(args: &[&str]) -> Result<String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .context("running ip (iproute2)")?;
    if !o.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).to_string())
}

fn exists(ns: &str) -> bool {
    ip(&["netns", "list"]).is_ok_and(|l| l.lines().any(|x| x.split_whitespace().next() == Some(ns)))
}

fn mac(ns: &str, dev: &str) -> String {
    ip(&["-n", ns, "-br", "link", "show", dev])
        .ok()
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        .unwrap_or_default()
}

fn up_dev(ns: &str, dev: &str, addrs: &[&str]) -> Result<()> {
    for a in addrs {
        ip(&["-n", ns, "addr", "add", a, "dev", dev])?;
    }
    ip(&["-n", ns, "link", "set", dev, "up"])?;
    Ok(())
}

fn pair() -> Result<String> {
    let [a, b] = PAIR;
    ip(&["netns", "add", a])?;
    ip(&["netns", "add", b])?;
    ip(&[
        "link", "add", "veth0", "netns", a, "type", "veth", "peer", "name", "veth0", "netns", b,
    ])?;
    up_dev(a, "veth0", &["198.18.0.1/24", "2001:db8::1/64"])?;
    up_dev(b, "veth0", &["198.18.0.2/24", "2001:db8::2/64"])?;
    for ns in PAIR {
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    let bmac = mac(b, "veth0");
    Ok(format!(
        "lab up: pair\n  lr-a veth0 198.18.0.1 2001:db8::1 {}\n  lr-b veth0 198.18.0.2 2001:db8::2 {bmac}\n\ntry:\n  ip netns exec lr-b linerate sink --iface veth0 --duration 10 &\n  ip netns exec lr-a linerate blast --iface veth0 --dst-ip 198.18.0.2 --dst-mac {bmac} --count 100000 --pps 50k\n  ip netns exec lr-b linerate -s -1 &\n  ip netns exec lr-a linerate -c 198.18.0.2 -t 3\n",
        mac(a, "veth0")
    ))
}

fn dut(rate: Option<&str>) -> Result<String> {
    let [g, d] = DUT;
    ip(&["netns", "add", g])?;
    ip(&["netns", "add", d])?;
    ip(&[
        "link", "add", "ga", "netns", g, "type", "veth", "peer", "name", "da", "netns", d,
    ])?;
    ip(&[
        "link", "add", "gb", "netns", g, "type", "veth", "peer", "name", "db", "netns", d,
    ])?;
    up_dev(g, "ga", &["198.18.0.1/24"])?;
    up_dev(g, "gb", &["198.18.1.2/24"])?;
    up_dev(d, "da", &["198.18.0.2/24"])?;
    up_dev(d, "db", &["198.18.1.1/24"])?;
    for ns in DUT {
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    ip(&["netns", "exec", d, "sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    if let Some(r) = rate {
        let o = Command::new("ip")
            .args([
                "netns", "exec", d, "tc", "qdisc", "add", "dev", "db", "root", "tbf",
            ])
            .args(["rate", r, "burst", "15000", "limit", "15000"])
            .output()
            .context("running tc")?;
        if !o.status.success() {
            bail!(
                "tc tbf rate {r}: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
    }
    // The device learns the receiving port's MAC now, not in the first trial.
    let _ = Command::new("ip")
        .args([
            "netns",
            "exec",
            d,
            "ping",
            "-c",
            "1",
            "-W",
            "2",
            "198.18.1.2",
        ])
        .output();
    let damac = mac(d, "da");
    let shaped = rate.map_or("not shaped".to_string(), |r| format!("TBF {r} on db"));
    Ok(format!(
        "lab up: dut ({shaped})\n  lr-gen ga 198.18.0.1 {} -> lr-dut da 198.18.0.2 {damac}\n  lr-dut db 198.18.1.1 {} -> lr-gen gb 198.18.1.2 {}\n  lr-dut routes 198.18.0.0/24 <-> 198.18.1.0/24\n\ntry:\n  ip netns exec lr-gen linerate rfc2544 --tx-iface ga --rx-iface gb --dut-ip 198.18.0.2 --src-ip 198.18.0.1 --dst-ip 198.18.1.2 --max-rate 100M --sizes 64,1518 --trial-time 2\n",
        mac(g, "ga"),
        mac(d, "db"),
        mac(g, "gb")
    ))
}

pub fn run(a: &LabArgs) -> Result<u8> {
    match &a.cmd {
        LabCmd::Up { topology, dut_rate } => {
            let names: &[&str] = match topology.as_str() {
                "pair" => &PAIR,
                "dut" => &DUT,
                t => bail!("--topology {t}: pair or dut"),
            };
            if let Some(n) = names.iter().find(|n| exists(n)) {
                bail!("{n} exists: `linerate lab down` first");
            }
            if dut_rate.is_some() && topology != "dut" {
                bail!("--dut-rate shapes the dut topology's device");
            }
            let made = match topology.as_str() {
                "pair" => pair(),
                _ => dut(dut_rate.as_deref()),
            };
            match made {
                Ok(text) => {
                    print!("{text}");
                    Ok(0)
                }
                Err(e) => {
                    // Half a lab is no lab.
                    for n in names {
                        let _ = ip(&["netns", "del", n]);
                    }
                    Err(e)
                }
            }
        }
        LabCmd::Down => {
            let mut gone = Vec::new();
            for n in PAIR.iter().chain(&DUT) {
                if exists(n) {
                    ip(&["netns", "del", n])?;
                    gone.push(*n);
                }
            }
            println!(
                "lab down: {}",
                if gone.is_empty() {
                    "nothing to delete".into()
                } else {
                    gone.join(", ")
                }
            );
            Ok(0)
        }
        LabCmd::Status => {
            let mut any = false;
            for n in PAIR.iter().chain(&DUT) {
                if exists(n) {
                    any = true;
                    println!("{n}:");
                    for l in ip(&["-n", n, "-br", "addr"])?
                        .lines()
                        .filter(|l| !l.starts_with("lo "))
                    {
                        println!("  {l}");
                    }
                }
            }
            if !any {
                println!("no lab: `linerate lab up --topology pair|dut`");
            }
            Ok(0)
        }
    }
}
