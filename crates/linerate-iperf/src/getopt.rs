//! iperf3's long options as `getopt_long` reads them: a long option may be
//! shortened to any prefix that names one option (`--authorized-user=x`
//! for `--authorized-users-path=x`), and `--opt=value` works for every
//! option that takes a value. clap does neither the way getopt does, so
//! the command line is rewritten first: each abbreviation becomes the
//! option's full name, judged against iperf3 3.21's own table (so a script
//! means what it meant to iperf3), then against linerate's own options.
//! An exact name always wins, as in getopt (`--force` is linerate's
//! `--force`, not an abbreviation of `--forceflush`; `--repeat` likewise).
//!
//! The command line's own options come in as a [`Table`] of [`Opt`]s (the
//! binary lists its clap arguments): this module knows no argument parser.

use std::ffi::OsString;

/// iperf3 3.21's long options on Linux, each with the linerate option it
/// is (`--bandwidth` and `--linux-congestion` are iperf3's own aliases).
pub const IPERF3_LONG: &[(&str, &str)] = &[
    ("port", "port"),
    ("format", "format"),
    ("interval", "interval"),
    ("daemon", "daemon"),
    ("one-off", "one-off"),
    ("verbose", "verbose"),
    ("json", "json"),
    ("json-stream", "json-stream"),
    ("json-stream-full-output", "json-stream-full-output"),
    ("version", "version"),
    ("server", "server"),
    ("client", "client"),
    ("udp", "udp"),
    ("bitrate", "bitrate"),
    ("bandwidth", "bitrate"),
    ("server-bitrate-limit", "server-bitrate-limit"),
    ("server-max-duration", "server-max-duration"),
    ("time", "time"),
    ("bytes", "bytes"),
    ("blockcount", "blockcount"),
    ("length", "length"),
    ("parallel", "parallel"),
    ("reverse", "reverse"),
    ("bidir", "bidir"),
    ("window", "window"),
    ("bind", "bind"),
    ("bind-dev", "bind-dev"),
    ("cport", "cport"),
    ("set-mss", "set-mss"),
    ("no-delay", "no-delay"),
    ("version4", "version4"),
    ("version6", "version6"),
    ("tos", "tos"),
    ("dscp", "dscp"),
    ("extra-data", "extra-data"),
    ("flowlabel", "flowlabel"),
    ("zerocopy", "zerocopy"),
    ("omit", "omit"),
    ("file", "file"),
    ("repeating-payload", "repeating-payload"),
    ("timestamps", "timestamps"),
    ("affinity", "affinity"),
    ("title", "title"),
    ("congestion", "congestion"),
    ("linux-congestion", "congestion"),
    ("pidfile", "pidfile"),
    ("logfile", "logfile"),
    ("forceflush", "forceflush"),
    ("get-server-output", "get-server-output"),
    ("udp-counters-64bit", "udp-counters-64bit"),
    ("no-fq-socket-pacing", "no-fq-socket-pacing"),
    ("dont-fragment", "dont-fragment"),
    ("skip-rx-copy", "skip-rx-copy"),
    ("username", "username"),
    ("rsa-public-key-path", "rsa-public-key-path"),
    ("rsa-private-key-path", "rsa-private-key-path"),
    ("authorized-users-path", "authorized-users-path"),
    ("time-skew-threshold", "time-skew-threshold"),
    ("use-pkcs1-padding", "use-pkcs1-padding"),
    ("fq-rate", "fq-rate"),
    ("pacing-timer", "pacing-timer"),
    ("connect-timeout", "connect-timeout"),
    ("idle-timeout", "idle-timeout"),
    ("rcv-timeout", "rcv-timeout"),
    ("snd-timeout", "snd-timeout"),
    ("cntl-ka", "cntl-ka"),
    ("mptcp", "mptcp"),
    ("gsro", "gsro"),
    ("debug", "debug"),
    ("help", "help"),
];

/// How an option takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Takes {
    Nothing,
    /// `--opt v`, `--opt=v`, `-ov`, `-o v`.
    Required,
    /// Only attached: `--opt=v`, `-ov`.
    Optional,
}

/// One option of the command line: its long name and aliases, its short
/// letter, how it takes a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    pub long: Option<String>,
    pub aliases: Vec<String>,
    pub short: Option<char>,
    pub takes: Takes,
}

/// The options of a command line, as getopt reads them.
#[derive(Debug, Clone, Default)]
pub struct Table {
    /// Every long name and alias, with the option's main long name and how
    /// it takes a value.
    longs: Vec<(String, String, Takes)>,
    shorts: Vec<(char, Takes)>,
}

impl Table {
    /// The table of `opts`, with `--help`/`-h` and `--version`/`-v` when
    /// they are not among them (the argument parser's own flags).
    pub fn new(opts: impl IntoIterator<Item = Opt>) -> Table {
        let mut longs = Vec::new();
        let mut shorts = Vec::new();
        for o in opts {
            if let Some(s) = o.short {
                shorts.push((s, o.takes));
            }
            if let Some(l) = o.long {
                longs.push((l.clone(), l.clone(), o.takes));
                for alias in o.aliases {
                    longs.push((alias, l.clone(), o.takes));
                }
            }
        }
        for (l, s) in [("help", 'h'), ("version", 'v')] {
            if !longs.iter().any(|(n, _, _)| n == l) {
                longs.push((l.to_string(), l.to_string(), Takes::Nothing));
            }
            if !shorts.iter().any(|(c, _)| *c == s) {
                shorts.push((s, Takes::Nothing));
            }
        }
        Table { longs, shorts }
    }

    /// The main long name `name` (a long name or an alias) stands for, and
    /// how it takes a value.
    pub fn long(&self, name: &str) -> Option<(&str, Takes)> {
        self.longs
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, main, t)| (main.as_str(), *t))
    }
}

/// An abbreviation that names more than one option, as getopt says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambiguous {
    pub given: String,
    pub candidates: Vec<String>,
}

impl std::fmt::Display for Ambiguous {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "option '--{}' is ambiguous; possibilities:", self.given)?;
        for c in &self.candidates {
            write!(f, " '--{c}'")?;
        }
        Ok(())
    }
}

impl std::error::Error for Ambiguous {}

/// The full name a long option `name` stands for: itself when exact, else
/// the one option of iperf3's table it abbreviates, else the one option of
/// linerate's; `Ok(None)` when nothing matches (clap then says so).
fn resolve(name: &str, t: &Table) -> Result<Option<String>, Ambiguous> {
    if t.long(name).is_some() {
        return Ok(Some(name.to_string()));
    }
    // getopt: several prefixes naming the same option are not ambiguous.
    let pick = |cands: Vec<(&str, &str)>| -> Result<Option<String>, Ambiguous> {
        let mut mains: Vec<&str> = cands.iter().map(|(_, m)| *m).collect();
        mains.dedup();
        match mains.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(one.to_string())),
            _ => Err(Ambiguous {
                given: name.to_string(),
                candidates: cands.iter().map(|(n, _)| n.to_string()).collect(),
            }),
        }
    };
    let iperf3: Vec<(&str, &str)> = IPERF3_LONG
        .iter()
        .filter(|(n, _)| n.starts_with(name))
        .map(|(n, m)| (*n, *m))
        .collect();
    if let Some(found) = pick(iperf3)? {
        return Ok(Some(found));
    }
    let ours: Vec<(&str, &str)> = t
        .longs
        .iter()
        .filter(|(n, _, _)| n.starts_with(name))
        .map(|(n, m, _)| (n.as_str(), m.as_str()))
        .collect();
    pick(ours)
}

/// `args` (without the program name) with every long option written out
/// in full; values (separate or attached) pass through untouched.
pub fn expand(args: &[OsString], t: &Table) -> Result<Vec<OsString>, Ambiguous> {
    let mut out = Vec::with_capacity(args.len());
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(s) = arg.to_str() else {
            out.push(arg.clone());
            continue;
        };
        if s == "--" {
            out.push(arg.clone());
            out.extend(it.cloned());
            break;
        }
        if let Some(body) = s.strip_prefix("--") {
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (body, None),
            };
            let Some(full) = resolve(name, t)? else {
                out.push(arg.clone());
                continue;
            };
            let takes = t.long(&full).map_or(Takes::Nothing, |(_, k)| k);
            match value {
                Some(v) => out.push(format!("--{full}={v}").into()),
                None => {
                    out.push(format!("--{full}").into());
                    if takes == Takes::Required
                        && let Some(v) = it.next()
                    {
                        out.push(v.clone());
                    }
                }
            }
            continue;
        }
        out.push(arg.clone());
        if let Some(cluster) = s.strip_prefix('-').filter(|c| !c.is_empty()) {
            // A cluster of short flags: the first that takes a value takes
            // the rest of the cluster, or (if none is left) the next word.
            for (i, c) in cluster.char_indices() {
                match t.shorts.iter().find(|(k, _)| *k == c).map(|(_, k)| *k) {
                    Some(Takes::Required) => {
                        if i + c.len_utf8() == cluster.len()
                            && let Some(v) = it.next()
                        {
                            out.push(v.clone());
                        }
                        break;
                    }
                    Some(Takes::Optional) => break,
                    Some(Takes::Nothing) => {}
                    None => break,
                }
            }
        }
    }
    Ok(out)
}

/// Whether the command line is iperf3's (`-s`, `-c HOST`, or argv[0] iperf3).
pub fn iperf3_form(argv: &[std::ffi::OsString]) -> bool {
    let prog = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|f| f.to_str())
        .unwrap_or("");
    if prog == "iperf3" {
        return true;
    }
    argv.get(1)
        .and_then(|a| a.to_str())
        .is_some_and(|a| a.starts_with('-') && !matches!(a, "-h" | "--help" | "--version"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// linerate's iperf3 command line as it matters here: iperf3's options
    /// (and aliases) with a few of linerate's own, `-s`/`-c`/`-u`/`-T`.
    fn table() -> Table {
        let nothing = [
            "server",
            "udp",
            "json",
            "force",
            "forceflush",
            "reverse",
            "repeating-payload",
            "help",
            "version",
        ];
        let optional = ["timestamps", "debug", "cntl-ka"];
        let mut opts: Vec<Opt> = Vec::new();
        let mains = IPERF3_LONG.iter().map(|(_, m)| *m);
        let ours = ["force", "repeat", "max-tests", "max-tests-per-source"];
        for main in mains.chain(ours).chain(["max-pending-per-source"]) {
            if opts.iter().any(|o| o.long.as_deref() == Some(main)) {
                continue;
            }
            let takes = if nothing.contains(&main) {
                Takes::Nothing
            } else if optional.contains(&main) {
                Takes::Optional
            } else {
                Takes::Required
            };
            let short = match main {
                "server" => Some('s'),
                "client" => Some('c'),
                "udp" => Some('u'),
                "title" => Some('T'),
                _ => None,
            };
            let aliases = (IPERF3_LONG.iter())
                .filter(|(n, m)| *m == main && n != m)
                .map(|(n, _)| n.to_string())
                .collect();
            opts.push(Opt {
                long: Some(main.to_string()),
                aliases,
                short,
                takes,
            });
        }
        Table::new(opts)
    }

    fn exp(args: &[&str]) -> Result<Vec<String>, Ambiguous> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        expand(&args, &table()).map(|v| {
            v.into_iter()
                .map(|a| a.into_string().unwrap())
                .collect::<Vec<_>>()
        })
    }

    #[test]
    fn aliases_stand_for_their_option() {
        let t = table();
        assert_eq!(t.long("bandwidth"), Some(("bitrate", Takes::Required)));
        assert_eq!(t.long("help"), Some(("help", Takes::Nothing)));
        assert_eq!(t.long("nosuch"), None);
    }

    #[test]
    fn abbreviations_become_the_option_iperf3_meant() {
        assert_eq!(
            exp(&["-s", "--authorized-user=/tmp/u", "--rsa-pri", "k.pem"]).unwrap(),
            [
                "-s",
                "--authorized-users-path=/tmp/u",
                "--rsa-private-key-path",
                "k.pem"
            ]
        );
        // `--rep` is repeating-payload to iperf3 (linerate's --repeat is
        // only reached by its full name).
        assert_eq!(
            exp(&["-c", "h", "--rep"]).unwrap(),
            ["-c", "h", "--repeating-payload"]
        );
        assert_eq!(exp(&["--band", "10M"]).unwrap(), ["--bitrate", "10M"]);
        assert_eq!(exp(&["--linux-c", "bbr"]).unwrap(), ["--congestion", "bbr"]);
    }

    #[test]
    fn an_exact_name_wins_over_a_longer_option() {
        assert_eq!(exp(&["--json"]).unwrap(), ["--json"]);
        assert_eq!(exp(&["--bind", "x"]).unwrap(), ["--bind", "x"]);
        assert_eq!(exp(&["--force"]).unwrap(), ["--force"]);
        assert_eq!(exp(&["--repeat", "3"]).unwrap(), ["--repeat", "3"]);
    }

    #[test]
    fn ambiguous_abbreviations_are_refused_as_getopt_does() {
        let e = exp(&["--tim", "1"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "option '--tim' is ambiguous; possibilities: '--time' '--timestamps' '--time-skew-threshold'"
        );
        assert!(exp(&["--rsa-p", "x"]).is_err());
    }

    #[test]
    fn values_are_never_read_as_options() {
        // The title "--tim" is a value, not an option to expand.
        assert_eq!(
            exp(&["-T", "--tim", "--tit", "--x"]).unwrap(),
            ["-T", "--tim", "--title", "--x"]
        );
        assert_eq!(exp(&["-uT", "--tim"]).unwrap(), ["-uT", "--tim"]);
        assert_eq!(
            exp(&["-T--tim", "--fo"]).unwrap_err().candidates,
            ["format", "forceflush"]
        );
        assert_eq!(
            exp(&["-T--tim", "--form"]).unwrap(),
            ["-T--tim", "--format"]
        );
        assert_eq!(exp(&["--", "--tim"]).unwrap(), ["--", "--tim"]);
    }

    #[test]
    fn linerate_options_abbreviate_when_iperf3_has_none() {
        assert_eq!(
            exp(&["--max-pending", "4"]).unwrap(),
            ["--max-pending-per-source", "4"]
        );
        assert!(
            exp(&["--max-t", "4"]).is_err(),
            "max-tests or max-tests-per-source"
        );
        assert_eq!(exp(&["--nosuch"]).unwrap(), ["--nosuch"]);
    }

    #[test]
    fn iperf3_forms_are_known_by_their_first_word_or_name() {
        let argv = |a: &[&str]| {
            a.iter()
                .map(Into::into)
                .collect::<Vec<std::ffi::OsString>>()
        };
        assert!(iperf3_form(&argv(&["linerate", "-s"])));
        assert!(iperf3_form(&argv(&["/usr/bin/iperf3", "--help"])));
        assert!(!iperf3_form(&argv(&["linerate", "--help"])));
        assert!(!iperf3_form(&argv(&["linerate", "blast", "-c"])));
    }
}
