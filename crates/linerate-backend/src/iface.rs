//! Interfaces: index, MAC, MTU, addresses, up or down: the one place the
//! commands, workers and tests ask about an interface (of the calling
//! thread's network namespace).

use std::ffi::CString;
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;

/// The kernel's index of an interface.
pub fn index(iface: &str) -> io::Result<i32> {
    let name = CString::new(iface)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"))?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if idx == 0 {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no interface named {iface}"),
        ))
    } else {
        Ok(idx as i32)
    }
}

/// The MAC address of an interface, from sysfs.
/// `--iface NAME` checked before anything else is asked of it, so a
/// mistyped name is said as such (not as a missing address or MAC).
pub fn exists(name: &str) -> Result<(), NoSuchIface> {
    index(name)
        .map(|_| ())
        .map_err(|_| NoSuchIface(name.to_string()))
}

/// An interface name this host has not.
#[derive(Debug, thiserror::Error)]
#[error("no interface named {0} (`ip link` lists them)")]
pub struct NoSuchIface(pub String);

pub fn mac(iface: &str) -> io::Result<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{iface}/address"))?;
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.trim().split(':').collect();
    if parts.len() != 6 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bad MAC in sysfs",
        ));
    }
    for (o, p) in m.iter_mut().zip(parts) {
        *o = u8::from_str_radix(p, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad MAC in sysfs"))?;
    }
    Ok(m)
}

/// The MTU of an interface, from sysfs.
pub fn mtu(iface: &str) -> io::Result<usize> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu"))?
        .trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad MTU in sysfs"))
}

/// An interface's line rate in bits per second, from sysfs (Mb/s there);
/// none where it has none (a veth, a link that is down) or the name is
/// not an interface's.
pub fn speed_bps(iface: &str) -> Option<u64> {
    if iface.is_empty() || iface.contains('/') || iface.starts_with('.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{iface}/speed"))
        .ok()?
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|&m| m > 0)
        .map(|m| m as u64 * 1_000_000)
}

/// Whether an interface is administratively up (IFF_UP), asked of the
/// calling thread's network namespace (SIOCGIFFLAGS); an error when it
/// does not exist (any more).
pub fn is_up(iface: &str) -> io::Result<bool> {
    Ok(flags(iface)? & libc::IFF_UP as libc::c_short != 0)
}

/// Whether an interface is a loopback (IFF_LOOPBACK), as [`is_up`] asks.
pub fn is_loopback(iface: &str) -> io::Result<bool> {
    Ok(flags(iface)? & libc::IFF_LOOPBACK as libc::c_short != 0)
}

/// The first address of the family on `iface` (for IPv6, not link-local
/// or loopback): blast's default source address.
pub fn addr(iface: &str, v6: bool) -> Option<IpAddr> {
    nix::ifaddrs::getifaddrs().ok()?.find_map(|a| {
        if a.interface_name != iface {
            return None;
        }
        let addr = a.address?;
        if v6 {
            addr.as_sockaddr_in6()
                .map(|s| IpAddr::V6(s.ip()))
                .filter(|ip| {
                    !ip.is_loopback()
                        && !matches!(ip, IpAddr::V6(v) if v.segments()[0] & 0xffc0 == 0xfe80)
                })
        } else {
            addr.as_sockaddr_in().map(|s| IpAddr::V4(s.ip()))
        }
    })
}

/// The interface that holds a local address (an IPv4-mapped IPv6 address
/// counts as its IPv4 address).
pub fn of_addr(ip: IpAddr) -> Option<String> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    nix::ifaddrs::getifaddrs().ok()?.find_map(|a| {
        let addr = a.address?;
        let found = addr
            .as_sockaddr_in()
            .map(|s| IpAddr::V4(s.ip()))
            .or_else(|| addr.as_sockaddr_in6().map(|s| IpAddr::V6(s.ip())));
        (found == Some(ip)).then_some(a.interface_name)
    })
}

/// Whether `iface` receives in NAPI kernel threads (its
/// `/sys/class/net/IF/threaded` is not 0): then a thread spinning on the
/// CPU of such a NAPI thread must give it that CPU. None when it cannot
/// be read (no such interface, sysfs of another namespace, old kernel).
pub fn threaded_napi(iface: &str) -> Option<bool> {
    if iface.is_empty() || iface.contains('/') || iface.starts_with('.') {
        return None;
    }
    let s = std::fs::read_to_string(format!("/sys/class/net/{iface}/threaded")).ok()?;
    parse_threaded(&s)
}

/// Whether any interface of this network namespace receives in NAPI
/// kernel threads (for a socket bound to every address).
pub fn any_threaded_napi() -> bool {
    std::fs::read_dir("/sys/class/net").is_ok_and(|d| {
        d.flatten()
            .any(|e| threaded_napi(&e.file_name().to_string_lossy()) == Some(true))
    })
}

/// A `threaded` sysfs file's text: 0 off; 1 (or 2, busy-polling threads
/// on newer kernels) on.
fn parse_threaded(s: &str) -> Option<bool> {
    s.trim().parse::<u8>().ok().map(|v| v != 0)
}

/// Sets an interface's MTU (SIOCSIFMTU; needs CAP_NET_ADMIN).
pub fn set_mtu(iface: &str, mtu: usize) -> io::Result<()> {
    let mtu = libc::c_int::try_from(mtu)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "MTU out of range"))?;
    // SIOCSIFMTU reads the name and ifru_mtu.
    ifreq_ioctl(iface, libc::SIOCSIFMTU, |r| r.ifr_ifru.ifru_mtu = mtu).map(|_| ())
}

/// Whether an interface is promiscuous (IFF_PROMISC as set by
/// SIOCSIFFLAGS, not packet sockets' own memberships).
pub fn promiscuous(iface: &str) -> io::Result<bool> {
    Ok(flags(iface)? & libc::IFF_PROMISC as libc::c_short != 0)
}

/// Sets or clears an interface's IFF_PROMISC flag (needs CAP_NET_ADMIN).
pub fn set_promiscuous(iface: &str, on: bool) -> io::Result<()> {
    let bit = libc::IFF_PROMISC as libc::c_short;
    let f = flags(iface)?;
    let f = if on { f | bit } else { f & !bit };
    // SIOCSIFFLAGS reads the name and ifru_flags.
    ifreq_ioctl(iface, libc::SIOCSIFFLAGS, |r| r.ifr_ifru.ifru_flags = f).map(|_| ())
}

fn flags(iface: &str) -> io::Result<libc::c_short> {
    // SIOCGIFFLAGS reads the name and writes ifru_flags.
    let req = ifreq_ioctl(iface, libc::SIOCGIFFLAGS, |_| {})?;
    // SAFETY: the kernel filled the flags member of the union.
    Ok(unsafe { req.ifr_ifru.ifru_flags })
}

/// One interface ioctl whose argument is an `ifreq`: the name filled in,
/// `fill` sets the member the request reads; the request as the kernel
/// left it.
fn ifreq_ioctl(
    iface: &str,
    request: libc::c_ulong,
    fill: impl FnOnce(&mut libc::ifreq),
) -> io::Result<libc::ifreq> {
    let (sock, name) = ioctl_target(iface)?;
    // SAFETY: an all-zero ifreq is valid; the name and `fill`'s member are
    // set before the call.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name = name;
    fill(&mut req);
    // SAFETY: `req` is a valid ifreq for the interface ioctls, alive for
    // the call.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, &mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(req)
}

/// `02:00:00:00:00:0a` form of a MAC.
pub fn format_mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A throwaway socket for interface ioctls (of the calling thread's
/// network namespace) and `iface` as an ifreq name; a clear error for a
/// name the kernel could not hold.
pub(crate) fn ioctl_target(
    iface: &str,
) -> io::Result<(std::net::UdpSocket, [libc::c_char; libc::IFNAMSIZ])> {
    if iface.is_empty() || iface.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "bad interface name",
        ));
    }
    let sock =
        std::net::UdpSocket::bind("0.0.0.0:0").or_else(|_| std::net::UdpSocket::bind("[::]:0"))?;
    let mut name = [0 as libc::c_char; libc::IFNAMSIZ];
    for (d, s) in name.iter_mut().zip(iface.bytes()) {
        *d = s as libc::c_char;
    }
    Ok((sock, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threaded_files_are_read() {
        assert_eq!(parse_threaded("0\n"), Some(false));
        assert_eq!(parse_threaded("1\n"), Some(true));
        assert_eq!(parse_threaded("2"), Some(true));
        assert_eq!(parse_threaded(""), None);
        assert_eq!(parse_threaded("on"), None);
        // names that would leave /sys/class/net are not read
        assert_eq!(threaded_napi("../../../etc"), None);
        assert_eq!(threaded_napi(""), None);
        assert_eq!(threaded_napi("no-such-iface-here"), None);
    }

    #[test]
    fn loopback_facts() {
        assert!(is_up("lo").unwrap());
        assert!(is_up("no-such-if0").is_err());
        assert!(is_loopback("lo").unwrap());
        assert!(is_loopback("no-such-if0").is_err());
        assert!(is_up("").is_err());
        assert!(mtu("lo").unwrap() > 0);
        assert_eq!(mac("lo").unwrap(), [0; 6]);
        assert_eq!(index("lo").unwrap(), 1);
        assert!(
            index("no-such-if0")
                .unwrap_err()
                .to_string()
                .contains("no-such-if0")
        );
        assert_eq!(addr("lo", false), Some(IpAddr::from([127, 0, 0, 1])));
        assert_eq!(of_addr(IpAddr::from([127, 0, 0, 1])).as_deref(), Some("lo"));
        assert_eq!(format_mac([2, 0, 0, 0, 0, 0xa]), "02:00:00:00:00:0a");
    }
}
