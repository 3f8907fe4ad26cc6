//! iperf3's human units: bytes in powers of 1024 (`KBytes`), rates in
//! powers of 1000 (`Mbits/sec`), and its flag values (`-b 10M`, `-l 1K`).

/// `unit_snprintf`'s adaptive precision: 2 decimals below 10, 1 below 100.
fn adaptive(v: f64) -> String {
    if v < 9.995 {
        format!("{v:4.2}")
    } else if v < 99.95 {
        format!("{v:4.1}")
    } else {
        format!("{v:4.0}")
    }
}

/// `1.25 MBytes`.
pub fn bytes(n: f64) -> String {
    const U: [&str; 5] = ["Bytes", "KBytes", "MBytes", "GBytes", "TBytes"];
    let mut v = n;
    let mut i = 0;
    while v >= 1024.0 && i < U.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    format!("{} {}", adaptive(v), U[i])
}

/// `30.2 Gbits/sec`.
pub fn bits_per_sec(bps: f64) -> String {
    const U: [&str; 5] = [
        "bits/sec",
        "Kbits/sec",
        "Mbits/sec",
        "Gbits/sec",
        "Tbits/sec",
    ];
    let mut v = bps;
    let mut i = 0;
    while v >= 1000.0 && i < U.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    format!("{} {}", adaptive(v), U[i])
}

/// A `-f` format letter: k/m/g/t (bits) or K/M/G/T (bytes); fixed units.
pub fn with_format(value_bytes: f64, per_sec: bool, format: Option<char>) -> String {
    let Some(f) = format else {
        return if per_sec {
            bits_per_sec(value_bytes * 8.0)
        } else {
            bytes(value_bytes)
        };
    };
    let (div, name): (f64, &str) = match f {
        'k' => (1e3 / 8.0, "Kbits"),
        'm' => (1e6 / 8.0, "Mbits"),
        'g' => (1e9 / 8.0, "Gbits"),
        't' => (1e12 / 8.0, "Tbits"),
        'K' => (1024.0, "KBytes"),
        'M' => (1024.0 * 1024.0, "MBytes"),
        'G' => (1024.0 * 1024.0 * 1024.0, "GBytes"),
        'T' => (1024f64.powi(4), "TBytes"),
        _ => (1.0, "Bytes"),
    };
    let v = value_bytes / div;
    if per_sec {
        format!("{} {name}/sec", adaptive(v))
    } else {
        format!("{} {name}", adaptive(v))
    }
}

/// Parses iperf3 numbers with suffixes: `k`/`m`/`g`/`t` multiply by
/// `base` (1000 for rates, 1024 for sizes).
pub fn parse_suffixed(s: &str, base: u64) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], base),
        'm' | 'M' => (&s[..s.len() - 1], base * base),
        'g' | 'G' => (&s[..s.len() - 1], base * base * base),
        't' | 'T' => (&s[..s.len() - 1], base * base * base * base),
        _ => (s, 1),
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some((v * mult as f64) as u64)
}

/// A C `strtol(s, &end, 0)`: the integer at the start of `s` (decimal,
/// `0x` hex or `0` octal, optional sign) and what follows it.
pub fn c_integer_prefix(s: &str) -> (Option<i64>, &str) {
    let t = s.trim_start();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) =
        if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
            (16, h)
        } else if body.len() > 1 && body.starts_with('0') {
            (8, &body[1..])
        } else {
            (10, body)
        };
    let end = digits
        .char_indices()
        .find(|(_, c)| !c.is_digit(radix))
        .map_or(digits.len(), |(i, _)| i);
    if end == 0 {
        // "0" alone, or "0x" with no hex digit: the 0 is the number.
        return match body.strip_prefix('0') {
            Some(rest) => (Some(0), rest),
            None => (None, s),
        };
    }
    let v = i64::from_str_radix(&digits[..end], radix).ok();
    (v.map(|v| if neg { -v } else { v }), &digits[end..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_units() {
        assert_eq!(bytes(131072.0), " 128 KBytes");
        assert_eq!(bytes(1.25 * 1024.0 * 1024.0), "1.25 MBytes");
        assert_eq!(bytes(35.2 * 1024f64.powi(3)), "35.2 GBytes");
        assert_eq!(bits_per_sec(1_048_576.0), "1.05 Mbits/sec");
        assert_eq!(bits_per_sec(30.2e9), "30.2 Gbits/sec");
        assert_eq!(bits_per_sec(0.0), "0.00 bits/sec");
        assert_eq!(with_format(125_000.0, true, Some('m')), "1.00 Mbits/sec");
        assert_eq!(with_format(2048.0, false, Some('K')), "2.00 KBytes");
    }

    #[test]
    fn suffixes() {
        assert_eq!(parse_suffixed("10M", 1000), Some(10_000_000));
        assert_eq!(parse_suffixed("256K", 1024), Some(262_144));
        assert_eq!(parse_suffixed("1.5G", 1000), Some(1_500_000_000));
        assert_eq!(parse_suffixed("100", 1000), Some(100));
        assert_eq!(parse_suffixed("x", 1000), None);
        assert_eq!(parse_suffixed("-1", 1000), None);
    }

    #[test]
    fn c_integers_as_strtol_reads_them() {
        assert_eq!(c_integer_prefix("2/3"), (Some(2), "/3"));
        assert_eq!(c_integer_prefix("0x1f,2"), (Some(31), ",2"));
        assert_eq!(c_integer_prefix("010"), (Some(8), ""));
        assert_eq!(c_integer_prefix("0x"), (Some(0), "x"));
        assert_eq!(c_integer_prefix("-4"), (Some(-4), ""));
        assert_eq!(c_integer_prefix("abc"), (None, "abc"));
    }
}
