//! What a user can do about an error the operating system gave: every
//! command's failure goes through [`for_error`], which finds the OS error
//! in the chain and says the fix beside the message (issue 43: "Operation
//! not permitted" alone names neither root nor the capability).

use std::error::Error;
use std::io;

/// One class of OS error and what to do about it.
struct Advice {
    /// The errno values it covers.
    errnos: &'static [i32],
    /// The kind an error made without an errno (`io::Error::new`) has.
    kind: Option<io::ErrorKind>,
    /// Words that show a message already says the fix.
    said_by: &'static [&'static str],
    fix: &'static str,
}

const ADVICE: &[Advice] = &[
    Advice {
        errnos: &[libc::EPERM, libc::EACCES],
        kind: Some(io::ErrorKind::PermissionDenied),
        said_by: &["root", "CAP_"],
        fix: "run as root, or give linerate the capabilities it needs: \
              `setcap cap_net_raw,cap_net_admin,cap_bpf+ep $(command -v linerate)` \
              (a port below 1024 needs CAP_NET_BIND_SERVICE; a file needs write permission)",
    },
    Advice {
        errnos: &[libc::EADDRINUSE],
        kind: Some(io::ErrorKind::AddrInUse),
        said_by: &["another port"],
        fix: "another process holds that address and port: stop it (`ss -lntup` shows which) or choose another port (-p)",
    },
    Advice {
        errnos: &[libc::EADDRNOTAVAIL],
        kind: Some(io::ErrorKind::AddrNotAvailable),
        said_by: &["ip addr"],
        fix: "no interface of this host (in this network namespace) has that address: check -B/--src-ip against `ip addr`",
    },
    Advice {
        errnos: &[libc::ECONNREFUSED],
        kind: Some(io::ErrorKind::ConnectionRefused),
        said_by: &["start the server"],
        fix: "nothing listens there: start the server (`linerate -s`, `linerate rr server`) or check the host and -p",
    },
    Advice {
        errnos: &[libc::ENETUNREACH, libc::EHOSTUNREACH],
        kind: Some(io::ErrorKind::NetworkUnreachable),
        said_by: &["ip route"],
        fix: "no route to that address: `ip route get ADDRESS` shows the way the kernel would take",
    },
    Advice {
        errnos: &[libc::ENETDOWN],
        kind: Some(io::ErrorKind::NetworkDown),
        said_by: &["set up", "link up"],
        fix: "the interface is down: `ip link set dev IFACE up`",
    },
    Advice {
        errnos: &[libc::ETIMEDOUT],
        kind: Some(io::ErrorKind::TimedOut),
        said_by: &["firewall"],
        fix: "no answer in time: check that the host is up and that no firewall drops the port",
    },
    Advice {
        errnos: &[libc::ECONNRESET],
        kind: Some(io::ErrorKind::ConnectionReset),
        said_by: &["its log"],
        fix: "the peer closed the connection: its log says why (busy, refused the test, or stopped)",
    },
    Advice {
        errnos: &[libc::EMFILE, libc::ENFILE],
        kind: None,
        said_by: &["ulimit"],
        fix: "too many open files: raise the limit (`ulimit -n 65536`) or use fewer flows, streams or connections",
    },
    Advice {
        errnos: &[libc::ENODEV, libc::ENXIO],
        kind: None,
        said_by: &["ip link"],
        fix: "no such interface in this network namespace: `ip link` lists them",
    },
    Advice {
        errnos: &[libc::ENOMEM, libc::ENOBUFS],
        kind: Some(io::ErrorKind::OutOfMemory),
        said_by: &["ulimit -l", "memlock"],
        fix: "the kernel refused memory: for AF_XDP raise the locked-memory limit (`ulimit -l unlimited`) or ask for smaller rings; else free memory",
    },
    Advice {
        errnos: &[libc::EBUSY],
        kind: Some(io::ErrorKind::ResourceBusy),
        said_by: &["another queue", "detach"],
        fix: "the device or queue is in use (another AF_XDP socket or XDP program): stop it, detach it (`ip link set dev IFACE xdp off`) or use another queue",
    },
    Advice {
        errnos: &[libc::EOPNOTSUPP],
        kind: Some(io::ErrorKind::Unsupported),
        said_by: &["--backend"],
        fix: "this interface's driver or kernel does not support it: try another --backend (`linerate doctor --iface IFACE` says what it has)",
    },
    Advice {
        errnos: &[libc::EMSGSIZE],
        kind: None,
        said_by: &["MTU"],
        fix: "the packet is larger than the interface's MTU: send smaller ones (-l, --size) or raise the MTU",
    },
    Advice {
        errnos: &[libc::ENOSPC, libc::EDQUOT],
        kind: Some(io::ErrorKind::StorageFull),
        said_by: &["free space"],
        fix: "the disk is full: free space or write the file elsewhere",
    },
    Advice {
        errnos: &[libc::EROFS],
        kind: Some(io::ErrorKind::ReadOnlyFilesystem),
        said_by: &["elsewhere"],
        fix: "the file system is read-only: write the file elsewhere (a container needs a volume)",
    },
    Advice {
        errnos: &[libc::ENOENT],
        kind: Some(io::ErrorKind::NotFound),
        said_by: &["check the path", "ip link"],
        fix: "no such file or directory: check the path",
    },
];

/// What to do about the first OS error in `chain` (an error and its
/// sources), unless the message `said` (the whole chain as printed)
/// already says it. `None` for errors that are not the OS's, or whose fix
/// is not general (EINVAL).
pub fn for_error<'a>(
    chain: impl IntoIterator<Item = &'a (dyn Error + 'static)>,
    said: &str,
) -> Option<&'static str> {
    let a = match chain
        .into_iter()
        .find_map(|e| e.downcast_ref::<io::Error>())
    {
        Some(io) => ADVICE.iter().find(|a| match io.raw_os_error() {
            Some(n) => a.errnos.contains(&n),
            None => a.kind == Some(io.kind()),
        })?,
        None => class_of(said)?,
    };
    (!a.said_by.iter().any(|w| said.contains(w))).then_some(a.fix)
}

/// What to do about the OS error a message reports as text (a run's error
/// kept as a string ends with the OS's `(os error N)`), unless it already
/// says it.
pub fn for_message(said: &str) -> Option<&'static str> {
    let a = class_of(said)?;
    (!a.said_by.iter().any(|w| said.contains(w))).then_some(a.fix)
}

/// The class of the last `(os error N)` in a message.
fn class_of(said: &str) -> Option<&'static Advice> {
    let at = said.rfind("(os error ")?;
    let n: i32 = said[at + 10..].split(')').next()?.parse().ok()?;
    ADVICE.iter().find(|a| a.errnos.contains(&n))
}

/// A run's error for stderr: `linerate: error: …`, and on a line of its
/// own what to do about it where it is the OS's.
pub fn error_lines(msg: &str) -> String {
    match for_message(msg) {
        Some(fix) => format!("linerate: error: {msg}\nlinerate: what to do: {fix}\n"),
        None => format!("linerate: error: {msg}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advice(e: &io::Error) -> Option<&'static str> {
        for_error([e as &(dyn Error + 'static)], &e.to_string())
    }

    #[test]
    fn every_class_has_its_fix_by_errno_and_by_kind() {
        for a in ADVICE {
            for &n in a.errnos {
                let e = io::Error::from_raw_os_error(n);
                assert_eq!(advice(&e), Some(a.fix), "errno {n}: {e}");
            }
            if let Some(kind) = a.kind {
                let e = io::Error::new(kind, "refused");
                assert_eq!(advice(&e), Some(a.fix), "{kind:?}");
            }
        }
        // EINVAL has no general fix; an error that is not the OS's none.
        assert_eq!(advice(&io::Error::from_raw_os_error(libc::EINVAL)), None);
        let parse = "x".parse::<u8>().unwrap_err();
        assert_eq!(for_error([&parse as &(dyn Error + 'static)], ""), None);
    }

    #[test]
    fn the_os_error_is_found_among_the_causes_and_not_said_twice() {
        #[derive(Debug, thiserror::Error)]
        #[error("UDP socket 127.0.0.1:9")]
        struct Outer(#[source] io::Error);
        let e = Outer(io::Error::from_raw_os_error(libc::EACCES));
        let chain = [&e as &(dyn Error + 'static), &e.0];
        assert!(for_error(chain, "UDP socket 127.0.0.1:9: Permission denied").is_some());
        // A message that already names the fix gets none.
        let said = "UDP socket 127.0.0.1:9: Permission denied: need root or CAP_NET_RAW";
        assert_eq!(for_error(chain, said), None);
    }

    #[test]
    fn a_message_says_its_os_error_and_gets_its_fix() {
        let msg = "unable to connect to server 127.0.0.1:5999: Connection refused (os error 111)";
        assert!(
            for_message(msg)
                .unwrap()
                .starts_with("nothing listens there")
        );
        assert_eq!(
            error_lines(msg),
            format!(
                "linerate: error: {msg}\nlinerate: what to do: {}\n",
                for_message(msg).unwrap()
            )
        );
        assert_eq!(error_lines("bad flag"), "linerate: error: bad flag\n");
        assert_eq!(for_message("Invalid argument (os error 22)"), None);
        assert_eq!(for_message("(os error x)"), None);
    }

    #[test]
    fn no_two_classes_share_an_errno() {
        let mut seen = std::collections::BTreeSet::new();
        for a in ADVICE {
            for n in a.errnos {
                assert!(seen.insert(*n), "errno {n} in two classes");
            }
        }
    }
}
