//! Each flag's value grammar, as iperf3 reads it (the binary's argument
//! parser calls these; the message is what it prints).

use linerate_iperf_proto::units::parse_suffixed;
use std::net::IpAddr;

/// `-f`: k/m/g/t (bits), K/M/G/T (bytes).
pub fn format(s: &str) -> Result<char, String> {
    match s {
        "k" | "m" | "g" | "t" | "K" | "M" | "G" | "T" => Ok(s.chars().next().unwrap_or('m')),
        _ => Err("use one of k m g t (bits) or K M G T (bytes)".into()),
    }
}

/// `--cntl-ka[=IDLE/INTERVAL/COUNT]`, each part optional.
pub fn keepalive(s: &str) -> Result<(u32, u32, u32), String> {
    let mut v = [0u32; 3];
    for (i, part) in s.split('/').enumerate() {
        if i >= 3 {
            return Err(format!("'{s}': at most IDLE/INTERVAL/COUNT"));
        }
        if !part.is_empty() {
            v[i] = part
                .parse()
                .map_err(|_| format!("'{part}' in '{s}' is not a number"))?;
        }
    }
    Ok((v[0], v[1], v[2]))
}

/// `-B HOST[%DEV]`.
pub fn bind(s: &str) -> Result<(IpAddr, Option<String>), String> {
    let (host, dev) = match s.split_once('%') {
        Some((h, d)) if !d.is_empty() => (h, Some(d.to_string())),
        _ => (s, None),
    };
    let ip = host
        .parse()
        .map_err(|_| format!("'{host}' is not an IP address"))?;
    Ok((ip, dev))
}

/// A rate in bit/s with K/M/G suffixes (powers of 1000).
pub fn rate(s: &str) -> Result<u64, String> {
    parse_suffixed(s, 1000).ok_or_else(|| format!("'{s}' is not a rate (e.g. 10M)"))
}

/// A count of 1 or more (a limit of 0 would refuse every client).
pub fn at_least_one(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("'{s}' is not a count of 1 or more (0 would refuse every client)"))
}

/// `RATE[/SECONDS]` (iperf3's `--server-bitrate-limit`).
pub fn rate_window(s: &str) -> Result<(u64, u64), String> {
    let (r, secs) = match s.split_once('/') {
        Some((r, w)) => (
            r,
            w.parse::<u64>()
                .ok()
                .filter(|w| *w > 0)
                .ok_or_else(|| format!("'{w}' is not a number of seconds (e.g. 50M/5)"))?,
        ),
        None => (s, 5),
    };
    Ok((rate(r)?, secs))
}

/// `-t`: seconds from 0 to 86400 (iperf3's range), fractions allowed.
pub fn test_time(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|t| (0.0..=86400.0).contains(t))
        .ok_or_else(|| format!("'{s}': test duration valid values are 0 to 86400 seconds"))
}

/// A size in bytes with K/M/G suffixes (powers of 1024).
pub fn size(s: &str) -> Result<u64, String> {
    parse_suffixed(s, 1024).ok_or_else(|| format!("'{s}' is not a size (e.g. 128K)"))
}

/// `-L`: an IPv6 flow label, 1..0xFFFFF, decimal or 0x hex.
pub fn flowlabel(s: &str) -> Result<u32, String> {
    let v = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    v.ok()
        .filter(|v| (1..=0xF_FFFF).contains(v))
        .ok_or_else(|| "bogus flow label value (1..0xFFFFF)".to_string())
}

/// `-S`: a TOS byte, 0x hex, 0 octal or decimal.
pub fn tos(s: &str) -> Result<u32, String> {
    let v = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u32::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    };
    v.filter(|v| *v <= 255)
        .ok_or_else(|| format!("bad TOS value '{s}' (0..255)"))
}

/// The command line's ids (the clap declarations' field names) of the
/// flags only a server uses: hidden from `linerate client --help`.
pub const SERVER_ONLY_IDS: &[&str] = &[
    "one_off",
    "server_max_duration",
    "server_bitrate_limit",
    "server_grace",
    "max_tests",
    "max_tests_per_source",
    "max_pending_per_source",
    "server_max_streams",
    "daemon",
];

/// The ids of the flags only a client uses: hidden from `linerate server
/// --help`.
pub const CLIENT_ONLY_IDS: &[&str] = &[
    "udp",
    "bitrate",
    "fq_rate",
    "no_fq_socket_pacing",
    "time",
    "bytes",
    "blockcount",
    "length",
    "cport",
    "parallel",
    "reverse",
    "bidir",
    "window",
    "mss",
    "nodelay",
    "tos",
    "dscp",
    "omit",
    "title",
    "extra_data",
    "congestion",
    "get_server_output",
    "udp_counters_64bit",
    "repeating_payload",
    "zerocopy",
    "dont_fragment",
    "connect_timeout",
    "cntl_ka",
    "snd_timeout",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_iperf3_reads_them() {
        assert_eq!(format("G"), Ok('G'));
        assert!(format("x").is_err());
        assert_eq!(keepalive(""), Ok((0, 0, 0)));
        assert_eq!(keepalive("10//3"), Ok((10, 0, 3)));
        assert!(keepalive("1/2/3/4").is_err());
        assert_eq!(
            bind("198.18.0.1%veth0"),
            Ok(("198.18.0.1".parse().unwrap(), Some("veth0".into())))
        );
        assert_eq!(
            bind("2001:db8::1"),
            Ok(("2001:db8::1".parse().unwrap(), None))
        );
        assert_eq!(rate("10M"), Ok(10_000_000));
        assert_eq!(rate_window("50M"), Ok((50_000_000, 5)));
        assert_eq!(rate_window("50M/2"), Ok((50_000_000, 2)));
        assert!(rate_window("50M/0").is_err());
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").is_err());
        assert_eq!(test_time("2.5"), Ok(2.5));
        assert!(test_time("90000").is_err());
        assert!(test_time("-1").is_err());
        assert_eq!(size("128K"), Ok(131_072));
        assert_eq!(flowlabel("0xFFFFF"), Ok(0xF_FFFF));
        assert!(flowlabel("0").is_err());
        assert_eq!(tos("0x28"), Ok(0x28));
        assert_eq!(tos("010"), Ok(8));
        assert_eq!(tos("40"), Ok(40));
        assert_eq!(tos("300"), Err("bad TOS value '300' (0..255)".into()));
    }
}
