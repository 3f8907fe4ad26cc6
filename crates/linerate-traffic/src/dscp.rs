//! DSCP values as every command takes them: a name or a number.

/// A DSCP: a name (`ef`, `af41`, `cs5`, `va`, `le`) or a number 0..63
/// (decimal or 0x hex), the same in every command.
pub fn parse(s: &str) -> Result<u8, String> {
    let named = match s.to_ascii_lowercase().as_str() {
        "ef" => Some(46),
        "va" => Some(44),
        "le" => Some(1),
        n if n.starts_with("cs") => n[2..].parse::<u8>().ok().filter(|c| *c <= 7).map(|c| c * 8),
        n if n.starts_with("af") && n.len() == 4 => {
            let (c, d) = (
                n.as_bytes()[2].wrapping_sub(b'0'),
                n.as_bytes()[3].wrapping_sub(b'0'),
            );
            ((1..=4).contains(&c) && (1..=3).contains(&d)).then(|| c * 8 + d * 2)
        }
        _ => None,
    };
    let number = || match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u8::from_str_radix(h, 16).ok(),
        None => s.parse::<u8>().ok(),
    };
    named
        .or_else(number)
        .filter(|v| *v <= 63)
        .ok_or_else(|| format!("bad DSCP value '{s}' (0..63, or a name such as ef, af41, cs5)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers() {
        for (s, v) in [
            ("ef", 46),
            ("EF", 46),
            ("af41", 34),
            ("cs5", 40),
            ("le", 1),
            ("0x2e", 46),
            ("63", 63),
        ] {
            assert_eq!(parse(s), Ok(v), "{s}");
        }
        for s in ["af51", "cs8", "64", "x"] {
            assert!(parse(s).is_err(), "{s}");
        }
    }
}
