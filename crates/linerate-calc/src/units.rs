//! Parsing and printing of rates the way people type them: `10G`, `25g`,
//! `100Gbit`, `2.5Gbps`, `1M` (pps), `14.88Mpps`, plain numbers.

use thiserror::Error;

/// A rate or count that could not be read.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum UnitError {
    #[error("empty value")]
    Empty,
    #[error("'{0}' is not a number")]
    NotANumber(String),
    #[error("unknown unit '{unit}' in '{input}' (use k, M, G or T, optionally followed by {hint})")]
    UnknownUnit {
        input: String,
        unit: String,
        hint: &'static str,
    },
    #[error(
        "'{0}' is in bytes; linerate speaks bits: write e.g. 10G, 10Gbit or 80Gbit for 10 GB/s"
    )]
    Bytes(String),
    #[error("'{0}' must be greater than zero")]
    NotPositive(String),
    #[error("'{0}' is too large")]
    TooLarge(String),
}

fn split_number(input: &str) -> Result<(f64, &str), UnitError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(UnitError::Empty);
    }
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == ','))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let cleaned: String = num.chars().filter(|c| *c != '_' && *c != ',').collect();
    let value: f64 = cleaned
        .parse()
        .map_err(|_| UnitError::NotANumber(input.to_string()))?;
    if !value.is_finite() {
        return Err(UnitError::NotANumber(input.to_string()));
    }
    Ok((value, unit.trim()))
}

fn prefix_multiplier(c: char) -> Option<f64> {
    match c {
        'k' | 'K' => Some(1e3),
        'm' | 'M' => Some(1e6),
        'g' | 'G' => Some(1e9),
        't' | 'T' => Some(1e12),
        _ => None,
    }
}

fn to_integer(value: f64, input: &str) -> Result<u64, UnitError> {
    if value <= 0.0 {
        return Err(UnitError::NotPositive(input.to_string()));
    }
    // 2^53: beyond this f64 no longer holds every integer.
    if value >= 9.0e15 {
        return Err(UnitError::TooLarge(input.to_string()));
    }
    let rounded = value.round();
    if rounded < 1.0 {
        return Err(UnitError::NotPositive(input.to_string()));
    }
    Ok(rounded as u64)
}

/// Reads a bit rate. Accepts `10G`, `25g`, `100Gbit`, `2.5Gbps`, `10Gb/s`,
/// `100Mbit/s`, `1e9`-free plain bits per second (`1000000000`).
/// Prefixes are decimal (k = 1000), as link speeds are.
pub fn parse_bps(input: &str) -> Result<u64, UnitError> {
    let (value, mult, rest) = split_prefixed(input)?;
    match rest {
        "" | "b" | "bit" | "bits" | "bps" | "b/s" | "bit/s" | "bits/s" => {}
        "B" | "Bps" | "B/s" | "byte" | "bytes" | "Byte" | "Bytes" => {
            return Err(UnitError::Bytes(input.to_string()));
        }
        _ => return Err(unknown_unit(input, "bit, bps or b/s")),
    }
    to_integer(value * mult, input)
}

/// Number, decimal prefix multiplier, and what follows the prefix.
fn split_prefixed(input: &str) -> Result<(f64, f64, &str), UnitError> {
    let (value, unit) = split_number(input)?;
    let mut chars = unit.chars();
    Ok(match chars.next().and_then(prefix_multiplier) {
        Some(m) => (value, m, chars.as_str()),
        None => (value, 1.0, unit),
    })
}

fn unknown_unit(input: &str, hint: &'static str) -> UnitError {
    let (_, unit) = split_number(input).unwrap_or((0.0, ""));
    UnitError::UnknownUnit {
        input: input.to_string(),
        unit: unit.to_string(),
        hint,
    }
}

/// Reads a packet rate: `1M`, `14.88Mpps`, `500k`, `148809`, `2Mpps`.
pub fn parse_pps(input: &str) -> Result<u64, UnitError> {
    let (value, mult, rest) = split_prefixed(input)?;
    if !matches!(rest, "" | "pps" | "p/s") {
        return Err(unknown_unit(input, "pps"));
    }
    to_integer(value * mult, input)
}

/// A rate written with its unit (see [`parse_rate_with_unit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitRate {
    /// Packets, frames or transactions per second.
    PerSecond(u64),
    /// Bits per second.
    Bits(u64),
}

/// linerate's one rule for rates: an option named for one kind of rate
/// (`--pps`, `--bitrate`/`-b`, iperf3's `-b`) takes a bare number with a
/// decimal prefix (`10M`); an option that takes either kind (`--rate`,
/// `--max-rate`) needs the unit written (`10Mpps`, `10Mbps`, `10Mbit`),
/// since a packet rate and a bit rate are never guessed. `option` names
/// the option in the message.
pub fn parse_rate_with_unit(option: &str, input: &str) -> Result<UnitRate, String> {
    let t = input.trim();
    let lower = t.to_ascii_lowercase();
    let per_second = ["pps", "fps", "tps", "p/s"];
    if let Some(u) = per_second.iter().find(|u| lower.ends_with(*u)) {
        let n = &t[..t.len() - u.len()];
        return parse_pps(n)
            .map(UnitRate::PerSecond)
            .map_err(|e| format!("{option} {input}: {e}"));
    }
    if ["bps", "bit", "bits", "b/s"]
        .iter()
        .any(|u| lower.ends_with(u))
    {
        return parse_bps(t)
            .map(UnitRate::Bits)
            .map_err(|e| format!("{option} {input}: {e}"));
    }
    Err(format!(
        "{option} {input} is ambiguous: write the unit ({option} {input}pps for packets/s, {option} {input}bps for bits/s)"
    ))
}

/// `14880952` → `14,880,952`.
pub fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A bit rate with a decimal prefix and three decimals: `7.619 Gbit/s`.
pub fn format_bps(bps: f64) -> String {
    let (div, prefix) = if bps >= 1e12 {
        (1e12, "T")
    } else if bps >= 1e9 {
        (1e9, "G")
    } else if bps >= 1e6 {
        (1e6, "M")
    } else if bps >= 1e3 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    format!("{:.3} {prefix}bit/s", bps / div)
}

/// `95%` or `0.95`: a share strictly between 0 and 1.
pub fn share(s: &str) -> Result<f64, String> {
    ratio(s)
        .ok()
        .filter(|x| *x > 0.0 && *x < 1.0)
        .ok_or_else(|| format!("'{s}' is not a share (95%, 2%, 0.02)"))
}

/// `0`, `0.001%`, `1e-5`, `100%`: a ratio from 0 to 1 inclusive.
pub fn ratio(s: &str) -> Result<f64, String> {
    let v = match s.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0),
        None => s.trim().parse::<f64>(),
    };
    v.ok()
        .filter(|x| (0.0..=1.0).contains(x))
        .ok_or_else(|| format!("'{s}' is not a ratio (0.5%, 0.001, 0)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_that_can_be_either_kind_needs_its_unit() {
        assert_eq!(
            parse_rate_with_unit("--max-rate", "100kpps"),
            Ok(UnitRate::PerSecond(100_000))
        );
        assert_eq!(
            parse_rate_with_unit("--rate", "14.88Mfps"),
            Ok(UnitRate::PerSecond(14_880_000))
        );
        assert_eq!(
            parse_rate_with_unit("--max-rate", "2.5Gbps"),
            Ok(UnitRate::Bits(2_500_000_000))
        );
        assert_eq!(
            parse_rate_with_unit("--max-rate", "100Mbit"),
            Ok(UnitRate::Bits(100_000_000))
        );
        assert_eq!(
            parse_rate_with_unit("--max-rate", "100M"),
            Err("--max-rate 100M is ambiguous: write the unit (--max-rate 100Mpps for packets/s, --max-rate 100Mbps for bits/s)".into())
        );
        assert!(parse_rate_with_unit("--rate", "xpps").is_err());
    }

    #[test]
    fn speeds_as_typed() {
        assert_eq!(parse_bps("10G"), Ok(10_000_000_000));
        assert_eq!(parse_bps("25g"), Ok(25_000_000_000));
        assert_eq!(parse_bps("100Gbit"), Ok(100_000_000_000));
        assert_eq!(parse_bps("2.5Gbps"), Ok(2_500_000_000));
        assert_eq!(parse_bps("10Gb/s"), Ok(10_000_000_000));
        assert_eq!(parse_bps("100M"), Ok(100_000_000));
        assert_eq!(parse_bps("10M"), Ok(10_000_000));
        assert_eq!(parse_bps("800G"), Ok(800_000_000_000));
        assert_eq!(parse_bps("1000000000"), Ok(1_000_000_000));
        assert_eq!(parse_bps("1_000_000"), Ok(1_000_000));
        assert_eq!(parse_bps(" 40 G "), Ok(40_000_000_000));
        assert_eq!(parse_bps("1T"), Ok(1_000_000_000_000));
    }

    #[test]
    fn bad_speeds() {
        assert_eq!(parse_bps(""), Err(UnitError::Empty));
        assert!(matches!(parse_bps("fast"), Err(UnitError::NotANumber(_))));
        assert!(matches!(
            parse_bps("10Q"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(parse_bps("10GB"), Err(UnitError::Bytes(_))));
        assert!(matches!(parse_bps("0"), Err(UnitError::NotPositive(_))));
        assert!(matches!(parse_bps("0.1"), Err(UnitError::NotPositive(_))));
        assert!(matches!(
            parse_bps("1e9"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(parse_bps("99999T"), Err(UnitError::TooLarge(_))));
        assert!(matches!(parse_bps("1..2G"), Err(UnitError::NotANumber(_))));
    }

    #[test]
    fn packet_rates() {
        assert_eq!(parse_pps("1M"), Ok(1_000_000));
        assert_eq!(parse_pps("14.88Mpps"), Ok(14_880_000));
        assert_eq!(parse_pps("500k"), Ok(500_000));
        assert_eq!(parse_pps("148809"), Ok(148_809));
        assert!(matches!(
            parse_pps("1Gbit"),
            Err(UnitError::UnknownUnit { .. })
        ));
        assert!(matches!(parse_pps("-5"), Err(UnitError::NotANumber(_))));
    }

    #[test]
    fn formatting() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1000), "1,000");
        assert_eq!(format_count(14_880_952), "14,880,952");
        assert_eq!(format_bps(7_619_047_619.0), "7.619 Gbit/s");
        assert_eq!(format_bps(512.0), "512.000 bit/s");
        assert_eq!(format_bps(1.5e12), "1.500 Tbit/s");
    }

    #[test]
    fn ratios_and_shares() {
        assert_eq!(ratio("0.5%"), Ok(0.005));
        assert_eq!(ratio("1e-5"), Ok(1e-5));
        assert_eq!(ratio("100%"), Ok(1.0));
        assert!(ratio("101%").is_err());
        assert_eq!(share("95%"), Ok(0.95));
        assert!(share("100%").is_err() && share("0").is_err());
    }
}
