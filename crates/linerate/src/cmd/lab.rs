//! `linerate lab up|down|status`: the namespace topologies the docs'
//! examples and the tests use, on one machine, with addresses from
//! 198.18.0.0/15 and 2001:db8::/32 only.
//!
//! - `pair`: `lr-a` and `lr-b`, each with `veth0`, joined.
//! - `dut`: a generator `lr-gen` with two ports (`ga`, `gb`) and a device
//!   under test `lr-dut` (`da`, `db`) between them: the kernel routing,
//!   optionally shaped by a TBF qdisc on `db` (`--dut-rate`), or `linerate
//!   fwd` forwarding da -> db (`--dut fwd`, with the loaded-server options
//!   in `--fwd-args`).
//!
//! `--prefix` names another lab (the tests' own, `lr` by default); `lab
//! down` ends the lab's forwarder by the PID it recorded and deletes only
//! the namespaces of its prefix.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use linerate_lab::ip_text;
use std::path::PathBuf;
use std::process::Command;

#[derive(Debug, Args)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: LabCmd,
}

/// Which lab: its namespaces are PREFIX-a, PREFIX-b, PREFIX-gen, PREFIX-dut.
#[derive(Debug, Clone, Args)]
struct Prefix {
    /// Name prefix of the lab's namespaces (letters, digits, '-').
    #[arg(long, default_value = "lr", value_parser = prefix)]
    prefix: String,
}

#[derive(Debug, Subcommand)]
enum LabCmd {
    /// Create a topology (namespaces, veths, addresses, routes).
    Up {
        /// pair: two hosts joined by a veth; dut: a generator with two
        /// ports and a device under test between them.
        #[arg(long, default_value = "pair")]
        topology: String,
        /// dut: route (the kernel; default) or fwd (`linerate fwd` in the
        /// device namespace forwards da -> db, the kernel does not).
        #[arg(long, default_value = "route")]
        dut: String,
        /// dut: shape the device's egress towards the generator's second
        /// port with TBF at this rate (tc's units: 100mbit, 1gbit).
        #[arg(long)]
        dut_rate: Option<String>,
        /// TBF's queue (limit), bytes.
        #[arg(long, default_value_t = 100_000, requires = "dut_rate")]
        dut_limit: u32,
        /// TBF's bucket (burst), tc's units (32kbit, 10kb): what it lets
        /// through at once above its rate.
        #[arg(long, default_value = "32kbit", requires = "dut_rate")]
        dut_burst: String,
        /// --dut fwd: more options for `linerate fwd` (the loaded-server
        /// simulation: "--fifo 64 --flush-us 200 --mem-mb 64 --reads 50").
        #[arg(long, allow_hyphen_values = true, default_value = "")]
        fwd_args: String,
        /// --dut fwd: seconds the forwarder runs before it stops by itself.
        #[arg(long, default_value_t = 3600.0)]
        fwd_time: f64,
        #[command(flatten)]
        p: Prefix,
    },
    /// Delete the lab's namespaces (only those this command creates) and
    /// end its forwarder.
    Down {
        #[command(flatten)]
        p: Prefix,
    },
    /// Which lab namespaces exist, with their interfaces and addresses.
    Status {
        #[command(flatten)]
        p: Prefix,
    },
}

fn prefix(s: &str) -> Result<String, String> {
    if !s.is_empty()
        && s.len() <= 16
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Ok(s.to_string())
    } else {
        Err(format!("'{s}': 1 to 16 lower-case letters, digits or '-'"))
    }
}

/// The lab's namespace names.
struct Names {
    a: String,
    b: String,
    gen_: String,
    dut: String,
    prefix: String,
}

impl Names {
    fn new(prefix: &str) -> Names {
        Names {
            a: format!("{prefix}-a"),
            b: format!("{prefix}-b"),
            gen_: format!("{prefix}-gen"),
            dut: format!("{prefix}-dut"),
            prefix: prefix.to_string(),
        }
    }

    fn all(&self) -> [&str; 4] {
        [&self.a, &self.b, &self.gen_, &self.dut]
    }

    /// Where the forwarder's PID and output are kept.
    fn fwd_files(&self) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir();
        (
            dir.join(format!("linerate-lab-{}-fwd.pid", self.prefix)),
            dir.join(format!("linerate-lab-{}-fwd.log", self.prefix)),
        )
    }
}

const MAC_A: &str = "02:00:00:00:00:0a";
const MAC_B: &str = "02:00:00:00:00:0b";
const MAC_GA: &str = "02:00:00:00:01:01";
const MAC_GB: &str = "02:00:00:00:01:02";
const MAC_DA: &str = "02:00:00:00:02:01";
const MAC_DB: &str = "02:00:00:00:02:02";

fn ipx(args: &[&str]) -> Result<String> {
    Ok(ip_text(args)?)
}

fn exists(ns: &str) -> bool {
    ipx(&["netns", "list"])
        .is_ok_and(|l| l.lines().any(|x| x.split_whitespace().next() == Some(ns)))
}

fn mac(ns: &str, dev: &str) -> String {
    ipx(&["-n", ns, "-br", "link", "show", dev])
        .ok()
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        .unwrap_or_default()
}

fn up_dev(ns: &str, dev: &str, addrs: &[&str]) -> Result<()> {
    for a in addrs {
        ipx(&["-n", ns, "addr", "add", a, "dev", dev])?;
    }
    ipx(&["-n", ns, "link", "set", dev, "up"])?;
    Ok(())
}

fn pair(n: &Names) -> Result<String> {
    let (a, b) = (n.a.as_str(), n.b.as_str());
    ipx(&["netns", "add", a])?;
    ipx(&["netns", "add", b])?;
    // Fixed, locally administered MACs: the examples in docs/ name them.
    ipx(&[
        "link", "add", "veth0", "netns", a, "address", MAC_A, "type", "veth", "peer", "name",
        "veth0", "netns", b, "address", MAC_B,
    ])?;
    up_dev(a, "veth0", &["198.18.0.1/24", "2001:db8::1/64"])?;
    up_dev(b, "veth0", &["198.18.0.2/24", "2001:db8::2/64"])?;
    for ns in [a, b] {
        ipx(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    let bmac = mac(b, "veth0");
    Ok(format!(
        "lab up: pair\n  {a} veth0 198.18.0.1 2001:db8::1 {}\n  {b} veth0 198.18.0.2 2001:db8::2 {bmac}\n\n{}",
        mac(a, "veth0"),
        render_try(&pair_try(a, b))
    ))
}

/// A command `lab up` suggests: the namespace, linerate's arguments, and
/// whether it runs in the background.
type Try<'a> = (&'a str, &'static str, bool);

fn pair_try<'a>(a: &'a str, b: &'a str) -> Vec<Try<'a>> {
    vec![
        (b, "sink --iface veth0 --duration 10", true),
        (
            a,
            "blast --iface veth0 --dst-ip 198.18.0.2 --count 100000 --pps 50k",
            false,
        ),
        (b, "-s -1", true),
        (a, "-c 198.18.0.2 -t 3", false),
    ]
}

fn dut_try(g: &str) -> Vec<Try<'_>> {
    vec![
        (
            g,
            "rfc2544 --tx-iface ga --rx-iface gb --dut-ip 198.18.0.2 --src-ip 198.18.0.1 --dst-ip 198.18.1.2 --max-rate 100Mbps --sizes 64,1518 --trial-time 2",
            false,
        ),
        (
            g,
            "blast --iface ga --rx-iface gb --dst-ip 198.18.1.2 --pps 20k --count 20000 --repeat 3",
            false,
        ),
    ]
}

fn render_try(cmds: &[Try]) -> String {
    let mut s = String::from("try:\n");
    for (ns, args, background) in cmds {
        let amp = if *background { " &" } else { "" };
        s += &format!("  ip netns exec {ns} linerate {args}{amp}\n");
    }
    s
}

/// How the dut topology's device forwards.
struct Device<'a> {
    fwd: bool,
    rate: Option<&'a str>,
    limit: u32,
    burst: &'a str,
    fwd_args: &'a str,
    fwd_time: f64,
}

fn dut(n: &Names, dev: &Device<'_>) -> Result<String> {
    let (g, d) = (n.gen_.as_str(), n.dut.as_str());
    ipx(&["netns", "add", g])?;
    ipx(&["netns", "add", d])?;
    ipx(&[
        "link", "add", "ga", "netns", g, "address", MAC_GA, "type", "veth", "peer", "name", "da",
        "netns", d, "address", MAC_DA,
    ])?;
    ipx(&[
        "link", "add", "gb", "netns", g, "address", MAC_GB, "type", "veth", "peer", "name", "db",
        "netns", d, "address", MAC_DB,
    ])?;
    up_dev(g, "ga", &["198.18.0.1/24"])?;
    up_dev(g, "gb", &["198.18.1.2/24"])?;
    up_dev(d, "da", &["198.18.0.2/24"])?;
    up_dev(d, "db", &["198.18.1.1/24"])?;
    for ns in [g, d] {
        ipx(&["-n", ns, "link", "set", "lo", "up"])?;
    }
    // With fwd the kernel must not forward too (every frame would arrive
    // twice).
    let forwarding = if dev.fwd { "0" } else { "1" };
    ipx(&[
        "netns",
        "exec",
        d,
        "sysctl",
        "-qw",
        &format!("net.ipv4.ip_forward={forwarding}"),
    ])?;
    if let Some(r) = dev.rate {
        let limit = dev.limit.to_string();
        ipx(&[
            "netns", "exec", d, "tc", "qdisc", "add", "dev", "db", "root", "tbf", "rate", r,
            "burst", dev.burst, "limit", &limit,
        ])
        .with_context(|| format!("TBF at {r}"))?;
    }
    // The device learns the receiving port's MAC now, not in the first
    // trial (a ping that gets no answer changes nothing else).
    let _ = ipx(&[
        "netns",
        "exec",
        d,
        "ping",
        "-c",
        "1",
        "-W",
        "2",
        "198.18.1.2",
    ]);
    let shaped = dev
        .rate
        .map_or(String::new(), |r| format!(", TBF {r} on db"));
    let how = if dev.fwd {
        start_fwd(n, dev)?
    } else {
        "the kernel routes 198.18.0.0/24 <-> 198.18.1.0/24".to_string()
    };
    Ok(format!(
        "lab up: dut ({}{shaped})\n  {g} ga 198.18.0.1 {} -> {d} da 198.18.0.2 {}\n  {d} db 198.18.1.1 {} -> {g} gb 198.18.1.2 {}\n  {how}\n\n{}",
        if dev.fwd { "linerate fwd" } else { "routing" },
        mac(g, "ga"),
        mac(d, "da"),
        mac(d, "db"),
        mac(g, "gb"),
        render_try(&dut_try(g))
    ))
}

/// Starts `linerate fwd` (this binary) in the device namespace, da -> db,
/// rewriting the destination MAC to gb's; waits until it forwards.
fn start_fwd(n: &Names, dev: &Device<'_>) -> Result<String> {
    if !(1.0..=86400.0).contains(&dev.fwd_time) {
        bail!("--fwd-time: 1 to 86400 seconds");
    }
    let exe = std::env::current_exe().context("this program's path")?;
    let (pidfile, logfile) = n.fwd_files();
    let log = std::fs::File::create(&logfile)
        .with_context(|| format!("creating {}", logfile.display()))?;
    let gbmac = mac(&n.gen_, "gb");
    let extra: Vec<&str> = dev.fwd_args.split_whitespace().collect();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &n.dut])
        .arg(&exe)
        .args(["fwd", "--iface", "da", "--out-iface", "db", "--mode", "mac"])
        .args(["--dst-mac", &gbmac, "--time", &dev.fwd_time.to_string()])
        .args(["-i", "0"])
        .args(&extra)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let mut child = cmd.spawn().context("starting linerate fwd")?;
    std::fs::write(&pidfile, child.id().to_string())
        .with_context(|| format!("writing {}", pidfile.display()))?;
    // Ready when it says its sockets are open (the doctor's summary and
    // the receive path take a moment; a bad option ends it at once). Not
    // ready in time: stopped, and an error (lab up then removes the lab).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait()? {
            let out = std::fs::read_to_string(&logfile).unwrap_or_default();
            let _ = std::fs::remove_file(&pidfile);
            bail!("linerate fwd ended ({st}): {}", out.trim());
        }
        if std::fs::read_to_string(&logfile).is_ok_and(|s| s.contains("forwarding")) {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(&pidfile);
            bail!(
                "linerate fwd did not start forwarding within 20 s (output in {})",
                logfile.display()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(format!(
        "linerate fwd da -> db (pid {}, stops after {} s; output in {})",
        child.id(),
        dev.fwd_time,
        logfile.display()
    ))
}

/// Ends the lab's forwarder: by the PID it recorded, if that process is
/// still `ip netns exec … linerate fwd` (a PID reused by another program
/// is left alone).
fn stop_fwd(n: &Names) -> Option<u32> {
    let (pidfile, _) = n.fwd_files();
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let _ = std::fs::remove_file(&pidfile);
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
    // `ip netns exec` execs the forwarder: the PID is linerate's own.
    let ours = args.get(1) == Some(&&b"fwd"[..])
        && args
            .windows(2)
            .any(|w| w[0] == b"--out-iface" && w[1] == b"db");
    if !ours {
        return None;
    }
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    // It ends its run and prints its report; a bounded wait for that.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Some(pid)
}

pub fn run(a: &LabArgs) -> Result<u8> {
    match &a.cmd {
        LabCmd::Up {
            topology,
            dut: device,
            dut_rate,
            dut_limit,
            dut_burst,
            fwd_args,
            fwd_time,
            p,
        } => {
            let n = Names::new(&p.prefix);
            let names: Vec<&str> = match topology.as_str() {
                "pair" => vec![&n.a, &n.b],
                "dut" => vec![&n.gen_, &n.dut],
                t => bail!("--topology {t}: pair or dut"),
            };
            let fwd = match device.as_str() {
                "route" => false,
                "fwd" => true,
                x => bail!("--dut {x}: route or fwd"),
            };
            if topology != "dut" && (dut_rate.is_some() || fwd) {
                bail!("--dut and --dut-rate describe the dut topology's device");
            }
            if !fwd && !fwd_args.is_empty() {
                bail!("--fwd-args go with --dut fwd");
            }
            if let Some(x) = names.iter().find(|x| exists(x)) {
                bail!("{x} exists: `linerate lab down` first");
            }
            let made = match topology.as_str() {
                "pair" => pair(&n),
                _ => self::dut(
                    &n,
                    &Device {
                        fwd,
                        rate: dut_rate.as_deref(),
                        limit: *dut_limit,
                        burst: dut_burst,
                        fwd_args,
                        fwd_time: *fwd_time,
                    },
                ),
            };
            match made {
                Ok(text) => {
                    crate::say_raw!("{text}");
                    Ok(0)
                }
                Err(e) => {
                    // Half a lab is no lab.
                    stop_fwd(&n);
                    for x in names {
                        let _ = ipx(&["netns", "del", x]);
                    }
                    Err(e)
                }
            }
        }
        LabCmd::Down { p } => {
            let n = Names::new(&p.prefix);
            let mut gone = Vec::new();
            if let Some(pid) = stop_fwd(&n) {
                gone.push(format!("linerate fwd (pid {pid})"));
            }
            for x in n.all() {
                if exists(x) {
                    ipx(&["netns", "del", x])?;
                    gone.push(x.to_string());
                }
            }
            crate::say!(
                "lab down: {}",
                if gone.is_empty() {
                    "nothing to delete".into()
                } else {
                    gone.join(", ")
                }
            );
            Ok(0)
        }
        LabCmd::Status { p } => {
            let n = Names::new(&p.prefix);
            let mut any = false;
            for x in n.all() {
                if exists(x) {
                    any = true;
                    crate::say!("{x}:");
                    for l in ipx(&["-n", x, "-br", "addr"])?
                        .lines()
                        .filter(|l| !l.starts_with("lo "))
                    {
                        crate::say!("  {l}");
                    }
                }
            }
            if !any {
                crate::say!("no lab: `linerate lab up --topology pair|dut`");
            }
            Ok(0)
        }
    }
}

#[cfg(test)]
mod try_tests {
    use super::*;
    use clap::{CommandFactory, FromArgMatches};

    /// Every command `lab up` suggests is one linerate takes (a suggestion
    /// once named a flag that did not exist).
    #[test]
    fn every_suggested_command_parses() {
        let cmds: Vec<Try> = pair_try("a", "b").into_iter().chain(dut_try("g")).collect();
        for (_, args, _) in cmds {
            let argv: Vec<std::ffi::OsString> = std::iter::once("linerate")
                .chain(args.split_whitespace())
                .map(Into::into)
                .collect();
            if crate::iperf3_form(&argv) {
                let r = <crate::IperfArgs as clap::Parser>::try_parse_from(&argv);
                assert!(r.is_ok(), "{args}: {:?}", r.err());
            } else {
                let m = crate::Cli::command().try_get_matches_from(&argv);
                let cli = m.and_then(|m| crate::Cli::from_arg_matches(&m));
                assert!(cli.is_ok(), "{args}: {:?}", cli.err());
            }
        }
        assert!(render_try(&pair_try("a", "b")).contains("ip netns exec b linerate -s -1 &\n"));
    }
}
