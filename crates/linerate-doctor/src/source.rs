//! Where the doctor reads from: the live host, or a fixture tree that
//! stands in for it in tests (sysfs/procfs snapshots plus ethtool answers).

use serde::Deserialize;
use std::io;
use std::path::PathBuf;

/// NIC facts that come from ethtool ioctls (the backend's types; fixtures
/// hold them as JSON).
pub use linerate_backend::ethtool::{Channels, Offloads, Rings};

/// Everything the checks read. Paths are absolute host paths
/// (`/proc/…`, `/sys/…`); a fixture maps them under its own root.
pub trait Source {
    fn read(&self, path: &str) -> io::Result<String>;
    fn list(&self, path: &str) -> io::Result<Vec<String>>;
    fn driver(&self, iface: &str) -> io::Result<String>;
    fn channels(&self, iface: &str) -> io::Result<Channels>;
    fn rings(&self, iface: &str) -> io::Result<Rings>;
    fn rss_table(&self, iface: &str) -> io::Result<Vec<u32>>;
    fn offloads(&self, iface: &str) -> io::Result<Offloads>;
    fn memlock_limit(&self) -> io::Result<u64>;
    /// Whether this is the live host (so the report can say so).
    fn describe(&self) -> String;

    fn read_trim(&self, path: &str) -> io::Result<String> {
        self.read(path).map(|s| s.trim().to_string())
    }

    /// Names (`comm`) of running processes.
    fn processes(&self) -> io::Result<Vec<String>> {
        let mut out = Vec::new();
        for pid in self
            .list("/proc")?
            .into_iter()
            .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
        {
            if let Ok(c) = self.read_trim(&format!("/proc/{pid}/comm")) {
                out.push(c);
            }
        }
        Ok(out)
    }
}

/// The live host.
#[derive(Debug, Default)]
pub struct ThisHost;

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

impl Source for ThisHost {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        Ok(sorted(
            std::fs::read_dir(path)?
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect(),
        ))
    }

    fn driver(&self, iface: &str) -> io::Result<String> {
        linerate_backend::ethtool::drvinfo(iface).map(|d| d.driver)
    }

    fn channels(&self, iface: &str) -> io::Result<Channels> {
        linerate_backend::ethtool::channels(iface)
    }

    fn rings(&self, iface: &str) -> io::Result<Rings> {
        linerate_backend::ethtool::rings(iface)
    }

    fn rss_table(&self, iface: &str) -> io::Result<Vec<u32>> {
        linerate_backend::ethtool::rss_indirection(iface)
    }

    fn offloads(&self, iface: &str) -> io::Result<Offloads> {
        linerate_backend::ethtool::offloads(iface)
    }

    fn memlock_limit(&self) -> io::Result<u64> {
        linerate_backend::ethtool::memlock_limit()
    }

    fn describe(&self) -> String {
        "this host".into()
    }
}

/// A fixture tree: `<root>/proc/…`, `<root>/sys/…`, and ethtool answers as
/// JSON in `<root>/ethtool/<iface>/{driver,channels,rings,rss,offloads}`,
/// `<root>/limits/memlock`. A missing file reads as "not found".
#[derive(Debug, Clone)]
pub struct Fixture {
    pub root: PathBuf,
}

impl Fixture {
    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p.trim_start_matches('/'))
    }

    fn json<T: for<'de> Deserialize<'de>>(&self, p: &str) -> io::Result<T> {
        let text = std::fs::read_to_string(self.path(p))?;
        serde_json::from_str(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

impl Source for Fixture {
    fn read(&self, path: &str) -> io::Result<String> {
        std::fs::read_to_string(self.path(path))
    }

    fn list(&self, path: &str) -> io::Result<Vec<String>> {
        Ok(sorted(
            std::fs::read_dir(self.path(path))?
                .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect(),
        ))
    }

    fn driver(&self, iface: &str) -> io::Result<String> {
        self.read_trim(&format!("ethtool/{iface}/driver"))
    }

    fn channels(&self, iface: &str) -> io::Result<Channels> {
        self.json(&format!("ethtool/{iface}/channels"))
    }

    fn rings(&self, iface: &str) -> io::Result<Rings> {
        self.json(&format!("ethtool/{iface}/rings"))
    }

    fn rss_table(&self, iface: &str) -> io::Result<Vec<u32>> {
        self.json(&format!("ethtool/{iface}/rss"))
    }

    fn offloads(&self, iface: &str) -> io::Result<Offloads> {
        self.json(&format!("ethtool/{iface}/offloads"))
    }

    fn memlock_limit(&self) -> io::Result<u64> {
        self.read_trim("limits/memlock")?
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn describe(&self) -> String {
        format!("fixture {}", self.root.display())
    }
}
