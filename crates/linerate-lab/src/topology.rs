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
//! A prefix names another lab (the tests' own, `lr` by default); `down`
//! ends the lab's forwarder by the PID it recorded and deletes only the
//! namespaces of its prefix.

use crate::command::ip_text;
use crate::error::RigError;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Why a lab could not be made, ended or listed.
#[derive(Debug, Error)]
pub enum LabError {
    /// Options that describe no lab, or a lab that is there already.
    #[error("{0}")]
    Refused(String),
    /// An `ip` command failed.
    #[error(transparent)]
    Command(#[from] RigError),
    /// The device's TBF qdisc could not be added.
    #[error("TBF at {rate}")]
    Tbf {
        rate: String,
        #[source]
        source: RigError,
    },
    /// A file or process of the forwarder.
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Os(#[from] std::io::Error),
    /// The forwarder ended, or did not start forwarding in time.
    #[error("{0}")]
    Fwd(String),
}

type Result<T> = std::result::Result<T, LabError>;

/// What `lab up` makes: the options of `linerate lab up`, as given.
#[derive(Debug, Clone)]
pub struct Up<'a> {
    /// Name prefix of the lab's namespaces.
    pub prefix: &'a str,
    /// `pair` or `dut`.
    pub topology: &'a str,
    /// dut: `route` (the kernel) or `fwd` (`linerate fwd` forwards).
    pub dut: &'a str,
    /// dut: TBF rate on the device's egress towards the second port.
    pub dut_rate: Option<&'a str>,
    /// TBF's queue (limit), bytes.
    pub dut_limit: u32,
    /// TBF's bucket (burst), tc's units.
    pub dut_burst: &'a str,
    /// `--dut fwd`: more options for `linerate fwd`.
    pub fwd_args: &'a str,
    /// `--dut fwd`: seconds the forwarder runs before it stops by itself.
    pub fwd_time: f64,
    /// The linerate binary `--dut fwd` runs in the device namespace.
    pub exe: &'a Path,
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
    // (MAC_DA is written out in the blast line below; a test holds them
    // equal.)
    vec![
        (
            g,
            "rfc2544 --tx-iface ga --rx-iface gb --dut-ip 198.18.0.2 --src-ip 198.18.0.1 --dst-ip 198.18.1.2 --max-rate 100Mbps --sizes 64,1518 --trial-time 2",
            false,
        ),
        (
            g,
            // The device's port (da) by its fixed MAC: a forwarding
            // device (`--dut fwd`) answers no ARP for the far address.
            "blast --iface ga --rx-iface gb --dst-mac 02:00:00:00:02:01 --dst-ip 198.18.1.2 --pps 20k --count 20000 --repeat 3",
            false,
        ),
    ]
}

/// linerate's arguments of every command `lab up` suggests, of either
/// topology (for a test that linerate takes them all).
pub fn suggested_commands() -> Vec<&'static str> {
    let cmds = pair_try("a", "b").into_iter().chain(dut_try("g"));
    cmds.map(|(_, args, _)| args).collect()
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
    exe: &'a Path,
}

/// The generator's two ports and the device's, joined, addressed and up.
fn dut_links(g: &str, d: &str) -> Result<()> {
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
    Ok(())
}

fn dut(n: &Names, dev: &Device<'_>) -> Result<String> {
    let (g, d) = (n.gen_.as_str(), n.dut.as_str());
    dut_links(g, d)?;
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
        .map_err(|e| match e {
            LabError::Command(source) => LabError::Tbf {
                rate: r.to_string(),
                source,
            },
            e => e,
        })?;
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

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

/// Starts `linerate fwd` (`dev.exe`) in the device namespace, da -> db,
/// rewriting the destination MAC to gb's; waits until it forwards.
fn start_fwd(n: &Names, dev: &Device<'_>) -> Result<String> {
    if !(1.0..=86400.0).contains(&dev.fwd_time) {
        return Err(LabError::Refused("--fwd-time: 1 to 86400 seconds".into()));
    }
    let (pidfile, logfile) = n.fwd_files();
    let log =
        std::fs::File::create(&logfile).map_err(io(format!("creating {}", logfile.display())))?;
    let gbmac = mac(&n.gen_, "gb");
    let extra: Vec<&str> = dev.fwd_args.split_whitespace().collect();
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &n.dut])
        .arg(dev.exe)
        .args(["fwd", "--iface", "da", "--out-iface", "db", "--mode", "mac"])
        .args(["--dst-mac", &gbmac, "--time", &dev.fwd_time.to_string()])
        .args(["-i", "0"])
        .args(&extra)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let mut child = cmd.spawn().map_err(io("starting linerate fwd"))?;
    std::fs::write(&pidfile, child.id().to_string())
        .map_err(io(format!("writing {}", pidfile.display())))?;
    wait_forwarding(&mut child, &pidfile, &logfile)?;
    Ok(format!(
        "linerate fwd da -> db (pid {}, stops after {} s; output in {})",
        child.id(),
        dev.fwd_time,
        logfile.display()
    ))
}

/// Ready when the forwarder says its sockets are open (the doctor's
/// summary and the receive path take a moment; a bad option ends it at
/// once). Not ready in time: stopped, and an error (lab up then removes the
/// lab).
fn wait_forwarding(child: &mut Child, pidfile: &Path, logfile: &Path) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait()? {
            let out = std::fs::read_to_string(logfile).unwrap_or_default();
            let _ = std::fs::remove_file(pidfile);
            return Err(LabError::Fwd(format!(
                "linerate fwd ended ({st}): {}",
                out.trim()
            )));
        }
        if std::fs::read_to_string(logfile).is_ok_and(|s| s.contains("forwarding")) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let _ = std::fs::remove_file(pidfile);
            return Err(LabError::Fwd(format!(
                "linerate fwd did not start forwarding within 20 s (output in {})",
                logfile.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(pid)
}

/// The namespaces `u` makes and how its device forwards (true: `linerate
/// fwd`), once the options are checked.
fn checked<'n>(u: &Up<'_>, n: &'n Names) -> Result<(Vec<&'n str>, bool)> {
    let refuse = |s: String| Err(LabError::Refused(s));
    let names: Vec<&str> = match u.topology {
        "pair" => vec![&n.a, &n.b],
        "dut" => vec![&n.gen_, &n.dut],
        t => return refuse(format!("--topology {t}: pair or dut")),
    };
    let fwd = match u.dut {
        "route" => false,
        "fwd" => true,
        x => return refuse(format!("--dut {x}: route or fwd")),
    };
    if u.topology != "dut" && (u.dut_rate.is_some() || fwd) {
        return refuse("--dut and --dut-rate describe the dut topology's device".into());
    }
    if !fwd && !u.fwd_args.is_empty() {
        return refuse("--fwd-args go with --dut fwd".into());
    }
    if let Some(x) = names.iter().find(|x| exists(x)) {
        return refuse(format!("{x} exists: `linerate lab down` first"));
    }
    Ok((names, fwd))
}

/// Makes the lab `u` describes; returns what it made and commands to try
/// on it. A lab half made is removed again (its forwarder ended, its
/// namespaces deleted) before the error returns.
pub fn up(u: &Up<'_>) -> Result<String> {
    let n = Names::new(u.prefix);
    let (names, fwd) = checked(u, &n)?;
    let made = match u.topology {
        "pair" => pair(&n),
        _ => dut(
            &n,
            &Device {
                fwd,
                rate: u.dut_rate,
                limit: u.dut_limit,
                burst: u.dut_burst,
                fwd_args: u.fwd_args,
                fwd_time: u.fwd_time,
                exe: u.exe,
            },
        ),
    };
    if made.is_err() {
        // Half a lab is no lab.
        stop_fwd(&n);
        for x in names {
            let _ = ipx(&["netns", "del", x]);
        }
    }
    made
}

/// Ends the lab of `prefix`: its forwarder, then its namespaces. Returns
/// what it ended (empty: there was no lab).
pub fn down(prefix: &str) -> Result<Vec<String>> {
    let n = Names::new(prefix);
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
    Ok(gone)
}

/// The lab namespaces of `prefix` that exist, each with its interfaces'
/// addresses (`ip -br addr` lines, loopback left out).
pub fn status(prefix: &str) -> Result<Vec<(String, Vec<String>)>> {
    let n = Names::new(prefix);
    let mut found = Vec::new();
    for x in n.all() {
        if exists(x) {
            let lines = ipx(&["-n", x, "-br", "addr"])?
                .lines()
                .filter(|l| !l.starts_with("lo "))
                .map(str::to_string)
                .collect();
            found.push((x.to_string(), lines));
        }
    }
    Ok(found)
}

/// A lab's name prefix, checked: 1 to 16 lower-case letters, digits or
/// '-' (it names the lab's namespaces and files).
pub fn valid_prefix(s: &str) -> std::result::Result<String, String> {
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

/// `lab down`'s line: what [`down`] ended.
pub fn down_text(gone: &[String]) -> String {
    match gone {
        [] => "lab down: nothing to delete\n".into(),
        _ => format!("lab down: {}\n", gone.join(", ")),
    }
}

/// `lab status`'s lines: what [`status`] found, each namespace with its
/// addresses, or how to make a lab.
pub fn status_text(found: &[(String, Vec<String>)]) -> String {
    let mut out = String::new();
    for (ns, addrs) in found {
        out += &format!("{ns}:\n");
        for l in addrs {
            out += &format!("  {l}\n");
        }
    }
    if found.is_empty() {
        out += "no lab: `linerate lab up --topology pair|dut`\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{down_text, status_text, valid_prefix};

    #[test]
    fn prefixes_and_texts() {
        assert_eq!(valid_prefix("lr-t1"), Ok("lr-t1".into()));
        assert!(valid_prefix("").is_err());
        assert!(valid_prefix("Lr").is_err());
        assert!(valid_prefix("a-very-long-prefix").is_err());
        assert_eq!(down_text(&[]), "lab down: nothing to delete\n");
        assert_eq!(
            down_text(&["lr-a".into(), "lr-b".into()]),
            "lab down: lr-a, lr-b\n"
        );
        assert_eq!(
            status_text(&[("lr-a".into(), vec!["veth0 UP 198.18.0.1/24".into()])]),
            "lr-a:\n  veth0 UP 198.18.0.1/24\n"
        );
        assert_eq!(
            status_text(&[]),
            "no lab: `linerate lab up --topology pair|dut`\n"
        );
    }

    use super::*;

    #[test]
    fn suggestions_name_the_namespace_and_run_in_the_background() {
        let s = render_try(&pair_try("a", "b"));
        assert!(s.contains("ip netns exec b linerate -s -1 &\n"));
        assert!(s.contains("ip netns exec a linerate -c 198.18.0.2 -t 3\n"));
        assert_eq!(suggested_commands().len(), 6);
        // The dut's blast names the device's port by its fixed MAC.
        let dut = render_try(&dut_try("g"));
        assert!(
            dut.contains(&format!(
                "blast --iface ga --rx-iface gb --dst-mac {MAC_DA} "
            )),
            "{dut}"
        );
    }

    #[test]
    fn options_of_no_lab_are_refused_before_anything_is_made() {
        let n = Names::new("lr-test-no");
        let u = Up {
            prefix: "lr-test-no",
            topology: "pair",
            dut: "route",
            dut_rate: None,
            dut_limit: 100_000,
            dut_burst: "32kbit",
            fwd_args: "",
            fwd_time: 3600.0,
            exe: Path::new("/nonexistent"),
        };
        let refused = |u: &Up<'_>| match checked(u, &n) {
            Err(LabError::Refused(s)) => s,
            r => panic!("{:?}", r.map(|(_, f)| f)),
        };
        let e = refused(&Up {
            topology: "ring",
            ..u.clone()
        });
        assert_eq!(e, "--topology ring: pair or dut");
        let e = refused(&Up {
            dut: "fwd",
            ..u.clone()
        });
        assert_eq!(e, "--dut and --dut-rate describe the dut topology's device");
        let e = refused(&Up {
            fwd_args: "--fifo 64",
            ..u.clone()
        });
        assert_eq!(e, "--fwd-args go with --dut fwd");
    }
}
