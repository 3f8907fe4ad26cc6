//! ISO 8601 as pScheduler writes it: durations (`PT10S`, `P1DT1H`) read
//! and written to the microsecond, and a run's start time.

use std::time::{Duration, SystemTime};

/// Seconds of an ISO 8601 duration as pScheduler writes them
/// (`P[nW][nD][T[nH][nM][nS]]`, decimals allowed; no years or months).
pub fn iso_seconds(s: &str) -> Option<f64> {
    let rest = s.strip_prefix('P').filter(|r| !r.is_empty())?;
    let (date, time) = match rest.split_once('T') {
        Some((d, t)) if !t.is_empty() => (d, Some(t)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total = units(date, &[('W', 604_800.0), ('D', 86_400.0)])?;
    if let Some(t) = time {
        total += units(t, &[('H', 3600.0), ('M', 60.0), ('S', 1.0)])?;
    }
    Some(total)
}

/// The sum of `n<unit>` parts of `s`, each unit at most once, in order.
fn units(s: &str, order: &[(char, f64)]) -> Option<f64> {
    let (mut total, mut rest, mut allowed) = (0.0, s, order);
    while !rest.is_empty() {
        let at = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        let n: f64 = rest[..at].parse().ok().filter(|_| at > 0)?;
        let unit = rest[at..].chars().next()?;
        let i = allowed.iter().position(|(u, _)| *u == unit)?;
        total += n * allowed[i].1;
        allowed = &allowed[i + 1..];
        rest = &rest[at + unit.len_utf8()..];
    }
    Some(total)
}

/// An ISO 8601 duration of `secs` to the microsecond, as pScheduler's
/// timedelta_as_iso8601 (isodate) writes one: PT0.000173S, PT1M30S, P0D.
pub fn iso_duration(secs: f64) -> String {
    let us = (secs.max(0.0) * 1e6).round() as u64;
    let (days, rem) = (us / 86_400_000_000, us % 86_400_000_000);
    let mut out = String::from("P");
    if days > 0 {
        out += &format!("{days}D");
    }
    if rem > 0 {
        let (h, m) = (rem / 3_600_000_000, rem % 3_600_000_000 / 60_000_000);
        let (s, frac) = (rem % 60_000_000 / 1_000_000, rem % 1_000_000);
        out.push('T');
        if h > 0 {
            out += &format!("{h}H");
        }
        if m > 0 {
            out += &format!("{m}M");
        }
        if frac > 0 {
            out += format!("{s}.{frac:06}").trim_end_matches('0');
            out.push('S');
        } else if s > 0 {
            out += &format!("{s}S");
        }
    }
    if out == "P" { "P0D".into() } else { out }
}

/// A date and time as pScheduler writes one
/// (`2024-05-01T12:00:00.123456+00:00`; `Z`, `±HH:MM`, `±HHMM`; none is UTC).
pub fn parse_time(s: &str) -> Option<SystemTime> {
    let (date, time) = s.split_once(['T', ' '])?;
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, mo, day) = (d.next()??, d.next()??, d.next()??);
    let (clock, offset) = match time.strip_suffix('Z') {
        Some(c) => (c, 0),
        None => match time.rfind(['+', '-']) {
            Some(i) => (&time[..i], zone_offset(&time[i..])?),
            None => (time, 0),
        },
    };
    let mut c = clock.splitn(3, ':');
    let h: i64 = c.next()?.parse().ok()?;
    let mi: i64 = c.next()?.parse().ok()?;
    let sec: f64 = c.next().unwrap_or("0").parse().ok()?;
    let valid = (1..=12).contains(&mo) && (1..=31).contains(&day) && h < 24 && mi < 60;
    if !valid || !(0.0..61.0).contains(&sec) {
        return None;
    }
    let whole = days_from_civil(y, mo, day) * 86_400 + h * 3600 + mi * 60 - offset;
    let unix = whole as f64 + sec;
    (unix >= 0.0).then(|| SystemTime::UNIX_EPOCH + Duration::from_secs_f64(unix))
}

/// Seconds east of UTC of `+HH:MM`, `-HHMM` or `+HH`.
fn zone_offset(z: &str) -> Option<i64> {
    let sign = if z.starts_with('-') { -1 } else { 1 };
    let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
    if !matches!(digits.len(), 2 | 4) || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let h: i64 = digits[..2].parse().ok()?;
    let m: i64 = digits
        .get(2..)
        .filter(|m| !m.is_empty())
        .map_or(Some(0), |m| m.parse().ok())?;
    Some(sign * (h * 3600 + m * 60))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_durations_read_as_pscheduler_writes_them() {
        assert_eq!(iso_seconds("PT10S"), Some(10.0));
        assert_eq!(iso_seconds("PT0.200S"), Some(0.2));
        assert_eq!(iso_seconds("P0D"), Some(0.0));
        assert_eq!(iso_seconds("P1DT1H1M1.5S"), Some(90_061.5));
        assert_eq!(iso_seconds("P1W"), Some(604_800.0));
        for wrong in [
            "", "P", "PT", "10S", "PT1S1M", "P1M", "P1Y", "PT-1S", "PTS", "PT1X",
        ] {
            assert_eq!(iso_seconds(wrong), None, "{wrong}");
        }
    }

    #[test]
    fn iso_durations_written_as_isodate_writes_them() {
        assert_eq!(iso_duration(0.0), "P0D");
        assert_eq!(iso_duration(0.000_173_824), "PT0.000174S");
        assert_eq!(iso_duration(0.5), "PT0.5S");
        assert_eq!(iso_duration(9.0), "PT9S");
        assert_eq!(iso_duration(90.25), "PT1M30.25S");
        assert_eq!(iso_duration(3600.0), "PT1H");
        assert_eq!(iso_duration(86_401.0), "P1DT1S");
    }

    #[test]
    fn times_in_every_zone_form() {
        let at = |s: &str| {
            parse_time(s).map(|t| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs_f64()
            })
        };
        assert_eq!(at("1970-01-01T00:00:00Z"), Some(0.0));
        assert_eq!(at("2024-03-01T12:00:00+00:00"), Some(1_709_294_400.0));
        assert_eq!(at("2024-03-01T08:00:00-04:00"), Some(1_709_294_400.0));
        assert_eq!(at("2024-03-01T13:30:00+0130"), Some(1_709_294_400.0));
        assert_eq!(at("2024-03-01T12:00:00.250000"), Some(1_709_294_400.25));
        for wrong in [
            "2024-03-01",
            "2024-13-01T00:00:00Z",
            "2024-03-01T25:00:00Z",
            "x",
        ] {
            assert_eq!(at(wrong), None, "{wrong}");
        }
    }
}
