//! Read-only ethtool queries through the SIOCETHTOOL ioctl: driver, rings,
//! channels, the RSS indirection table, the legacy offload flags and any
//! netdev feature by name.

use std::io;
use std::os::fd::AsRawFd;

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSET: u32 = 0x01;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_GRXCSUM: u32 = 0x14;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_GSG: u32 = 0x18;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_GRXFHINDIR: u32 = 0x38;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GFEATURES: u32 = 0x3a;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;

#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// Runs one SIOCETHTOOL request; `buf` starts with the command word.
fn ioctl(iface: &str, buf: &mut [u32]) -> io::Result<()> {
    let (sock, name) = crate::iface::ioctl_target(iface)?;
    let mut req = IfReq {
        name,
        data: buf.as_mut_ptr().cast(),
        _pad: [0; 16],
    };
    // SAFETY: `req` is a valid ifreq whose data points to `buf`, which is
    // large enough for the command's reply (the callers size it).
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Whether the link auto-negotiates (ETHTOOL_GSET, which the kernel
/// answers from the driver's link settings; an error where the driver
/// has none).
pub fn autoneg(iface: &str) -> io::Result<bool> {
    let mut b = [0u32; 11];
    b[0] = ETHTOOL_GSET;
    ioctl(iface, &mut b)?;
    Ok(autoneg_of(&b))
}

/// `struct ethtool_cmd`'s autoneg byte: byte 18 (after cmd, supported,
/// advertising, speed, duplex, port, phy_address, transceiver).
fn autoneg_of(cmd: &[u32; 11]) -> bool {
    cmd[4].to_ne_bytes()[2] != 0
}

/// Driver name and bus.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrvInfo {
    pub driver: String,
    pub bus_info: String,
}

fn cstr(words: &[u32], byte_off: usize, len: usize) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let s = &bytes[byte_off..byte_off + len];
    let end = s.iter().position(|&b| b == 0).unwrap_or(len);
    String::from_utf8_lossy(&s[..end]).into_owned()
}

pub fn drvinfo(iface: &str) -> io::Result<DrvInfo> {
    let mut buf = [0u32; 64];
    buf[0] = ETHTOOL_GDRVINFO;
    ioctl(iface, &mut buf)?;
    Ok(DrvInfo {
        driver: cstr(&buf, 4, 32),
        bus_info: cstr(&buf, 4 + 96, 32),
    })
}

/// Ring sizes: current and hardware maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Rings {
    pub rx_max: u32,
    pub tx_max: u32,
    pub rx: u32,
    pub tx: u32,
}

pub fn rings(iface: &str) -> io::Result<Rings> {
    let mut b = [0u32; 9];
    b[0] = ETHTOOL_GRINGPARAM;
    ioctl(iface, &mut b)?;
    Ok(Rings {
        rx_max: b[1],
        tx_max: b[4],
        rx: b[5],
        tx: b[8],
    })
}

/// Queue (channel) counts: current and maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Channels {
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_combined: u32,
    pub rx: u32,
    pub tx: u32,
    pub combined: u32,
}

pub fn channels(iface: &str) -> io::Result<Channels> {
    let mut b = [0u32; 9];
    b[0] = ETHTOOL_GCHANNELS;
    ioctl(iface, &mut b)?;
    Ok(Channels {
        max_rx: b[1],
        max_tx: b[2],
        max_combined: b[4],
        rx: b[5],
        tx: b[6],
        combined: b[8],
    })
}

/// Whether the named netdev feature (the kernel's name, as in
/// `ethtool -k`'s indented lines: "tx-udp-segmentation", "rx-gro") is
/// active; None when the kernel has no such name.
pub fn feature(iface: &str, name: &str) -> io::Result<Option<bool>> {
    // How many feature names there are.
    let mut info = [ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_FEATURES, 0, 0];
    ioctl(iface, &mut info)?;
    let count = info[4] as usize;
    if count == 0 || count > 4096 {
        return Ok(None);
    }
    let mut strings = vec![0u32; 3 + count * ETH_GSTRING_LEN / 4];
    strings[..3].copy_from_slice(&[ETHTOOL_GSTRINGS, ETH_SS_FEATURES, count as u32]);
    ioctl(iface, &mut strings)?;
    let bytes: Vec<u8> = strings[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
    let Some(bit) = bytes.chunks(ETH_GSTRING_LEN).position(|c| {
        let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
        &c[..end] == name.as_bytes()
    }) else {
        return Ok(None);
    };
    // Blocks of {available, requested, active, never_changed}, 32 features each.
    let blocks = count.div_ceil(32);
    let mut feats = vec![0u32; 2 + blocks * 4];
    feats[..2].copy_from_slice(&[ETHTOOL_GFEATURES, blocks as u32]);
    ioctl(iface, &mut feats)?;
    let active = feats[2 + (bit / 32) * 4 + 2];
    Ok(Some(active & (1 << (bit % 32)) != 0))
}

/// The RSS indirection table: for each hash bucket, the RX queue it feeds.
pub fn rss_indirection(iface: &str) -> io::Result<Vec<u32>> {
    let mut head = [ETHTOOL_GRXFHINDIR, 0];
    ioctl(iface, &mut head)?;
    let size = head[1] as usize;
    if size == 0 || size > 65536 {
        return Ok(Vec::new());
    }
    let mut b = vec![0u32; 2 + size];
    b[0] = ETHTOOL_GRXFHINDIR;
    b[1] = size as u32;
    ioctl(iface, &mut b)?;
    Ok(b[2..].to_vec())
}

/// Legacy offload flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Offloads {
    pub rx_checksum: bool,
    pub tx_checksum: bool,
    pub scatter_gather: bool,
    pub tso: bool,
    pub gso: bool,
    pub gro: bool,
}

fn flag(iface: &str, cmd: u32) -> io::Result<bool> {
    let mut b = [cmd, 0];
    ioctl(iface, &mut b)?;
    Ok(b[1] != 0)
}

pub fn offloads(iface: &str) -> io::Result<Offloads> {
    Ok(Offloads {
        rx_checksum: flag(iface, ETHTOOL_GRXCSUM)?,
        tx_checksum: flag(iface, ETHTOOL_GTXCSUM)?,
        scatter_gather: flag(iface, ETHTOOL_GSG)?,
        tso: flag(iface, ETHTOOL_GTSO)?,
        gso: flag(iface, ETHTOOL_GGSO)?,
        gro: flag(iface, ETHTOOL_GGRO)?,
    })
}

/// RLIMIT_MEMLOCK (soft limit, bytes; u64::MAX for unlimited).
pub fn memlock_limit() -> io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid pointer to an rlimit.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(if r.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        r.rlim_cur
    })
}

/// Whether UDP GSO batches leave `iface` whole: a veth with
/// tx-udp-segmentation on hands a batch to its peer as one packet, so a
/// sender counting datagrams counts what never crossed as datagrams.
pub fn gso_batches_pass_whole(iface: &str) -> bool {
    drvinfo(iface).is_ok_and(|d| d.driver == "veth")
        && feature(iface, "tx-udp-segmentation").ok().flatten() != Some(false)
}

/// The interface UDP datagrams to `dst` leave by (the one holding the
/// source address the kernel picks; no packet is sent).
pub fn udp_egress(dst: std::net::SocketAddr) -> Option<String> {
    let any: std::net::SocketAddr = if dst.is_ipv4() {
        ([0u8; 4], 0).into()
    } else {
        ([0u16; 8], 0).into()
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(dst).ok()?;
    crate::iface::of_addr(s.local_addr().ok()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The autoneg byte is the 19th of `struct ethtool_cmd`, whatever
    /// the bytes around it hold.
    #[test]
    fn autoneg_is_read_from_its_byte() {
        let mut bytes = [0xffu8; 44];
        bytes[18] = 0;
        let words = |b: &[u8; 44]| -> [u32; 11] {
            std::array::from_fn(|i| u32::from_ne_bytes(b[i * 4..i * 4 + 4].try_into().unwrap()))
        };
        assert!(!autoneg_of(&words(&bytes)));
        let mut bytes = [0u8; 44];
        bytes[18] = 1;
        assert!(autoneg_of(&words(&bytes)));
    }

    #[test]
    fn loopback_answers_or_refuses_cleanly() {
        // lo has a driver name and offload flags; rings/channels are refused.
        let d = drvinfo("lo");
        if let Ok(d) = d {
            assert!(!d.driver.is_empty());
        }
        assert!(offloads("lo").is_ok());
        assert!(drvinfo("no-such-if0").is_err());
        assert!(drvinfo("").is_err());
        assert!(drvinfo("a-name-that-is-far-too-long").is_err());
        assert!(memlock_limit().unwrap() > 0);
    }

    #[test]
    fn features_by_name_agree_with_the_legacy_flags() {
        let legacy = offloads("lo").unwrap();
        assert_eq!(feature("lo", "rx-gro").unwrap(), Some(legacy.gro));
        assert_eq!(
            feature("lo", "tx-generic-segmentation").unwrap(),
            Some(legacy.gso)
        );
        assert_eq!(
            feature("lo", "rx-checksum").unwrap(),
            Some(legacy.rx_checksum)
        );
        assert!(feature("lo", "tx-udp-segmentation").unwrap().is_some());
        assert_eq!(feature("lo", "no-such-feature").unwrap(), None);
        assert!(feature("no-such-if0", "rx-checksum").is_err());
    }
}
