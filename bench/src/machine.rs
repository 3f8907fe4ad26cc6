//! What the numbers were measured on.

use serde_json::{Value, json};
use std::process::Command;

fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| "unknown".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// Machine, kernel, date and commit, for every result.
pub fn describe() -> Value {
    json!({
        "hostname": first_line("uname", &["-n"]),
        "kernel": first_line("uname", &["-r"]),
        "cpu": cpu_model(),
        "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "date_utc": first_line("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]),
        "commit": first_line("git", &["rev-parse", "--short", "HEAD"]),
    })
}
