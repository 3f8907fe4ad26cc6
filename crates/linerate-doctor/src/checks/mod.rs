//! The checks. Each reads through a [`Source`] and returns findings, or why
//! it could not check.

pub mod cpu;
pub mod kernel;
pub mod nic;

use crate::Source;

/// What the checks look at.
pub struct Ctx<'a> {
    pub src: &'a dyn Source,
    pub iface: Option<&'a str>,
    pub cpus: Vec<usize>,
    /// CPUs the caller's workers are pinned to (empty: not pinned / not known).
    pub workers: Vec<usize>,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("iface", &self.iface)
            .field("cpus", &self.cpus)
            .field("workers", &self.workers)
            .finish()
    }
}

/// Parses a CPU list such as `0-3,8,10-11`.
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if b < a || b - a > 4096 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// A hex CPU mask (`ff`, `00000000,00000003`) to CPU numbers.
pub fn parse_mask(s: &str) -> Option<Vec<usize>> {
    let hex: String = s.trim().chars().filter(|c| *c != ',').collect();
    let mut out = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let v = c.to_digit(16)?;
        for bit in 0..4 {
            if v & (1 << bit) != 0 {
                out.push(i * 4 + bit);
            }
        }
    }
    Some(out)
}

/// A CPU mask for `cpus`, as sysfs writes it (hex, comma every 32 bits).
pub fn to_mask(cpus: &[usize]) -> String {
    let max = cpus.iter().copied().max().unwrap_or(0);
    let mut words = vec![0u32; max / 32 + 1];
    for &c in cpus {
        words[c / 32] |= 1 << (c % 32);
    }
    let mut s: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    if let Some(first) = s.first_mut() {
        *first = first.trim_start_matches('0').to_string();
        if first.is_empty() {
            *first = "0".into();
        }
    }
    s.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_and_masks() {
        assert_eq!(parse_cpulist("0-3,8"), Some(vec![0, 1, 2, 3, 8]));
        assert_eq!(parse_cpulist(""), Some(vec![]));
        assert_eq!(parse_cpulist("3-1"), None);
        assert_eq!(parse_mask("00000000,00000003"), Some(vec![0, 1]));
        assert_eq!(parse_mask("0"), Some(vec![]));
        assert_eq!(parse_mask("zz"), None);
        assert_eq!(to_mask(&[0, 1]), "3");
        assert_eq!(to_mask(&[0, 33]), "2,00000001");
    }
}
