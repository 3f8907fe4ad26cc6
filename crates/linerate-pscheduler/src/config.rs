//! The tool's configuration file: `key = value` lines, read as leniently
//! as the iperf3 tool reads its own (Python's configparser, any error a
//! warning and the defaults): a file that is missing or unreadable, a key
//! it does not know, a line it cannot read or a value that is not a port
//! never stops a method; each is a warning (on standard error, which
//! pScheduler logs) and the default stands. An inline comment after the
//! value (`server_port = 5999 # firewall`) is a comment.

use std::path::{Path, PathBuf};

/// The configuration file, unless LINERATE_PSCHEDULER_CONFIG names another.
pub const CONFIG_FILE: &str = "/etc/pscheduler/tool/linerate.conf";
/// iperf3's port (the iperf3 tool's DEFAULT_SERVER_PORT).
pub const DEFAULT_SERVER_PORT: u16 = 5201;

/// Ports from the configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Where participant 1's iperf3-compatible server listens.
    pub server_port: u16,
    /// Where rtt's rr server listens when the spec gives no port.
    pub rr_port: u16,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            server_port: DEFAULT_SERVER_PORT,
            rr_port: linerate_rr::DEFAULT_PORT,
        }
    }
}

/// The file in use: LINERATE_PSCHEDULER_CONFIG, else [`CONFIG_FILE`].
pub fn path() -> PathBuf {
    std::env::var_os("LINERATE_PSCHEDULER_CONFIG").map_or_else(|| CONFIG_FILE.into(), PathBuf::from)
}

/// The configuration at `path`, and a warning for each thing in it not
/// taken.
pub fn read(path: &Path) -> (Config, Vec<String>) {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Config::default(), Vec::new()),
        Err(e) => (
            Config::default(),
            vec![format!(
                "{}: {e}; proceeding with the defaults",
                path.display()
            )],
        ),
    }
}

/// The text of a configuration file named `name` (for the warnings).
pub fn parse(text: &str, name: &str) -> (Config, Vec<String>) {
    let mut c = Config::default();
    let mut warnings = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = strip_comment(raw).trim();
        if line.is_empty() || line.starts_with('[') {
            continue;
        }
        let mut warn = |why: String| warnings.push(format!("{name}:{}: {why}", n + 1));
        let Some((k, v)) = line.split_once(['=', ':']) else {
            warn(format!("'{line}' is not key = value; ignored"));
            continue;
        };
        let slot = match k.trim() {
            "server_port" => &mut c.server_port,
            "rr_port" => &mut c.rr_port,
            other => {
                warn(format!("unknown key '{other}' ignored"));
                continue;
            }
        };
        match v.trim().parse::<u16>().ok().filter(|p| *p > 0) {
            Some(p) => *slot = p,
            None => warn(format!(
                "{} = {} is not a port; the default {} stands",
                k.trim(),
                v.trim(),
                *slot
            )),
        }
    }
    (c, warnings)
}

/// The line without its comment: a whole-line `#` or `;`, or one after
/// white space.
fn strip_comment(line: &str) -> &str {
    if line.trim_start().starts_with(['#', ';']) {
        return "";
    }
    let cut = line
        .char_indices()
        .find(|&(i, c)| {
            matches!(c, '#' | ';') && line[..i].ends_with(|p: char| p.is_ascii_whitespace())
        })
        .map_or(line.len(), |(i, _)| i);
    &line[..cut]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_stopped_every_task_is_a_warning() {
        // Issue 40's inputs: an inline comment, a key it does not know.
        let (c, w) = parse(
            "[linerate]\nlinerate_cmd = /opt/linerate\nserver_port=5999 # fw\n",
            "linerate.conf",
        );
        assert_eq!(c.server_port, 5999);
        assert_eq!(c.rr_port, 5300);
        assert_eq!(w, ["linerate.conf:2: unknown key 'linerate_cmd' ignored"]);
        let (c, w) = parse(
            "; comment\nrr_port = 6000 ; mine\nserver_port = many\nnonsense\n",
            "f",
        );
        assert_eq!(
            c,
            Config {
                server_port: 5201,
                rr_port: 6000
            }
        );
        assert_eq!(
            w,
            [
                "f:3: server_port = many is not a port; the default 5201 stands",
                "f:4: 'nonsense' is not key = value; ignored"
            ]
        );
    }

    #[test]
    fn a_file_that_cannot_be_read_is_the_defaults() {
        let (c, w) = read(Path::new("/nonexistent/linerate.conf"));
        assert_eq!((c, w.len()), (Config::default(), 0));
        // A directory cannot be read as a file, whoever runs the test.
        let dir = tempfile::tempdir().unwrap();
        let (c, w) = read(dir.path());
        assert_eq!(c, Config::default());
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].ends_with("; proceeding with the defaults"), "{w:?}");
    }
}
