//! Address prefixes: the sources `--allow` lets ask for responses larger
//! than their requests (both servers).

use crate::RrError;

/// An address prefix (`198.18.0.0/15`, `2001:db8::/32`, or one address).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    pub addr: std::net::IpAddr,
    pub len: u8,
}

impl Prefix {
    /// Parses `ADDR/LEN` or a bare address.
    pub fn parse(s: &str) -> Result<Self, RrError> {
        let bad = || RrError::Config(format!("'{s}' is not an address prefix (198.18.0.0/15)"));
        let (a, l) = s.split_once('/').unwrap_or((s, ""));
        let addr: std::net::IpAddr = a.trim().parse().map_err(|_| bad())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = if l.is_empty() {
            max
        } else {
            l.trim()
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(bad)?
        };
        Ok(Prefix { addr, len })
    }

    /// Whether `ip` is inside (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
            v4 => v4,
        };
        let bits = |a: IpAddr| -> (u128, u32) {
            match a {
                IpAddr::V4(v) => (u128::from(u32::from(v)), 32),
                IpAddr::V6(v) => (u128::from(v), 128),
            }
        };
        let ((p, w), (x, wx)) = (bits(self.addr), bits(ip));
        if w != wx {
            return false;
        }
        let shift = w - u32::from(self.len);
        shift >= 128 || (p >> shift) == (x >> shift)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_hold_their_addresses() {
        let p = Prefix::parse("198.18.0.0/15").unwrap();
        assert!(p.contains("198.19.255.255".parse().unwrap()));
        assert!(!p.contains("198.20.0.0".parse().unwrap()));
        assert!(p.contains("::ffff:198.18.0.1".parse().unwrap()));
        assert!(!p.contains("2001:db8::1".parse().unwrap()));
        let one = Prefix::parse("2001:db8::1").unwrap();
        assert_eq!(one.len, 128);
        assert!(
            Prefix::parse("2001:db8::/32")
                .unwrap()
                .contains("2001:db8:1::1".parse().unwrap())
        );
        assert!(
            Prefix::parse("0.0.0.0/0")
                .unwrap()
                .contains("203.0.113.1".parse().unwrap())
        );
        assert_eq!(
            Prefix::parse("198.18.0.0/33").unwrap_err().to_string(),
            "'198.18.0.0/33' is not an address prefix (198.18.0.0/15)"
        );
    }
}
