//! Patterns (a header field's values) become linerate ranges: `value`,
//! `values` (evenly spaced), `increment` and `decrement`; `auto` where the
//! model has it; `random` (ports, IPv4 addresses) as `count` values of
//! a seeded SplitMix64 sequence (`linerate_traffic::random`). Each field
//! steps on its own per frame, as the model does (`FlowSpec::lockstep`):
//! frame n carries value n mod count.

use crate::json::{Invalid, Obj, as_u64, invalid, short};
use linerate_traffic::flows::Range;
use linerate_traffic::random::Random;
use serde_json::Value;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Most values in a pattern's `values` or a size increment.
pub const VALUES_MAX: usize = 4096;

/// A header field: a range of values, or the model's `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Auto,
    Range(Range),
}

/// What a pattern's values are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Mac,
    V4,
    V6,
    /// An integer of this many bits.
    Bits(u32),
}

impl Kind {
    fn max(self) -> u128 {
        match self {
            Kind::Mac => (1 << 48) - 1,
            Kind::V4 => u128::from(u32::MAX),
            Kind::V6 => u128::MAX,
            Kind::Bits(b) => (1u128 << b) - 1,
        }
    }

    fn parse(self, path: &str, v: &Value) -> Result<u128, Invalid> {
        let bad = |what: &str| invalid(path, format!("expected {what}, got {}", short(v)));
        match self {
            Kind::Mac => v
                .as_str()
                .and_then(linerate_wire::MacAddr::parse)
                .map(|m| u128::from(m.to_u64()))
                .ok_or_else(|| bad("a MAC address")),
            Kind::V4 => v
                .as_str()
                .and_then(|s| s.parse::<Ipv4Addr>().ok())
                .map(|a| u128::from(u32::from(a)))
                .ok_or_else(|| bad("an IPv4 address")),
            Kind::V6 => v
                .as_str()
                .and_then(|s| s.parse::<Ipv6Addr>().ok())
                .map(u128::from)
                .ok_or_else(|| bad("an IPv6 address")),
            Kind::Bits(_) => {
                let n = u128::from(as_u64(path, v)?);
                if n > self.max() {
                    return Err(invalid(path, format!("{n} is above {}", self.max())));
                }
                Ok(n)
            }
        }
    }
}

/// A pattern object (`value`, `values`, `increment`, `decrement`, `auto`)
/// as a field; `default` is the model's value when it is absent,
/// `auto_default` whether the model's default choice is `auto`.
pub(crate) fn pattern(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto_default: bool,
) -> Result<Field, Invalid> {
    Ok(pattern_random(parent, key, kind, default, auto_default, false)?.0)
}

/// [`pattern`], with the model's `random` taken when `random_ok` (the
/// fields whose model has it): its values' generator comes along.
fn pattern_random(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto_default: bool,
    random_ok: bool,
) -> Result<(Field, Option<Random>), Invalid> {
    let Some(p) = parent.obj(key)? else {
        let f = if auto_default {
            Field::Auto
        } else {
            Field::Range(Range::single(default))
        };
        return Ok((f, None));
    };
    let mut choices = vec!["value", "values", "increment", "decrement"];
    if auto_default {
        choices.push("auto");
    }
    if random_ok {
        choices.push("random");
    }
    let c = p.choice(&choices, if auto_default { "auto" } else { "value" })?;
    // The other choices' values may come along (snappi sends only the
    // chosen one; others are read and checked, not used).
    let value = p
        .raw("value")
        .map(|v| kind.parse(&p.at("value"), v))
        .transpose()?;
    let values = p.list("values", VALUES_MAX)?;
    let inc = counter(&p, "increment", kind, default)?;
    let dec = counter(&p, "decrement", kind, default)?;
    let rnd = if random_ok { random(&p, kind)? } else { None };
    // Tags are read with the flow's whole packet (`crate::tags::read`):
    // which fields take them depends on the header.
    p.raw("metric_tags");
    if p.raw("auto").is_some() && !auto_default {
        return Err(invalid(&p.at("auto"), "this field has no auto"));
    }
    p.done()?;
    if c == "random" {
        let (r, count) = rnd.unwrap_or((Random::new(0, kind.max(), 1).expect("max >= 0"), 1));
        let range = Range {
            first: r.min,
            count,
            step: 1,
        };
        return Ok((Field::Range(range), Some(r)));
    }
    let f = match c {
        "auto" => Field::Auto,
        "value" => Field::Range(Range::single(value.unwrap_or(default))),
        "values" => Field::Range(values_range(&p, kind, values)?),
        "increment" => {
            let (s, st, n) = inc.unwrap_or((default, 1, 1));
            Field::Range(counter_range(&p, kind, s, st, n, true)?)
        }
        _ => {
            let (s, st, n) = dec.unwrap_or((default, 1, 1));
            Field::Range(counter_range(&p, kind, s, st, n, false)?)
        }
    };
    Ok((f, None))
}

/// A pattern's `random` (min, max, seed, count; the model's defaults the
/// field's whole span, seed 1, count 1): its generator and count.
fn random(p: &Obj, kind: Kind) -> Result<Option<(Random, u64)>, Invalid> {
    let Some(o) = p.obj("random")? else {
        return Ok(None);
    };
    let bound = |k: &'static str, d: u128| {
        o.raw(k)
            .map(|v| kind.parse(&o.at(k), v))
            .transpose()
            .map(|v| v.unwrap_or(d))
    };
    let min = bound("min", 0)?;
    let max = bound("max", kind.max())?;
    let seed = o.u64("seed")?.unwrap_or(1);
    if seed > u64::from(u32::MAX) {
        return Err(invalid(
            &o.at("seed"),
            format!("{seed} is above {}", u32::MAX),
        ));
    }
    let count = o.u64("count")?.unwrap_or(1);
    if count == 0 || count > u64::from(u32::MAX) {
        return Err(invalid(&o.at("count"), "from 1 to 4294967295"));
    }
    o.done()?;
    let r = Random::new(min, max, seed)
        .ok_or_else(|| invalid(&o.at("max"), format!("{max} is below min {min}")))?;
    Ok(Some((r, count)))
}

/// A pattern's `increment` or `decrement` (key `k`): start, step, count.
fn counter(
    p: &Obj,
    k: &'static str,
    kind: Kind,
    default: u128,
) -> Result<Option<(u128, u128, u64)>, Invalid> {
    let Some(o) = p.obj(k)? else { return Ok(None) };
    let start = o
        .raw("start")
        .map(|v| kind.parse(&o.at("start"), v))
        .transpose()?
        .unwrap_or(default);
    let step = o
        .raw("step")
        .map(|v| kind.parse(&o.at("step"), v))
        .transpose()?
        .unwrap_or(1);
    let count = o.u64("count")?.unwrap_or(1);
    o.raw("metric_tags");
    o.done()?;
    if count == 0 {
        return Err(invalid(&o.at("count"), "at least 1"));
    }
    Ok(Some((start, step, count)))
}

/// `-step` in a field of `kind`: the step that walks downward when values
/// are taken modulo the field's width (`FlowSpec::lockstep`).
fn negated(kind: Kind, step: u128) -> u128 {
    match kind {
        Kind::V6 => step.wrapping_neg(),
        k => (k.max() + 1 - step % (k.max() + 1)) % (k.max() + 1),
    }
}

/// The range an increment (`up`) or decrement of pattern `p` walks, if
/// it stays within the field: the model's values in its order (a
/// decrement from `start` downward).
fn counter_range(
    p: &Obj,
    kind: Kind,
    start: u128,
    step: u128,
    count: u64,
    up: bool,
) -> Result<Range, Invalid> {
    let path = p.at(if up { "increment" } else { "decrement" });
    if count > 1 && step == 0 {
        return Err(invalid(
            &format!("{path}.step"),
            "a step of 0 repeats one value: use value",
        ));
    }
    let span = step
        .checked_mul(u128::from(count - 1))
        .ok_or_else(|| invalid(&path, "the values run past the field"))?;
    if up {
        start
            .checked_add(span)
            .filter(|&last| last <= kind.max())
            .ok_or_else(|| invalid(&path, "the values run past the field's largest"))?;
    } else {
        start
            .checked_sub(span)
            .ok_or_else(|| invalid(&path, "the values run below 0"))?;
    }
    Ok(Range {
        first: start,
        count,
        step: match (count, up) {
            (1, _) => 1,
            (_, true) => step,
            (_, false) => negated(kind, step),
        },
    })
}

/// The range pattern `p`'s `values` make, in the order given: they must
/// be evenly spaced (rising or falling).
fn values_range(p: &Obj, kind: Kind, values: Option<&[Value]>) -> Result<Range, Invalid> {
    let path = p.at("values");
    let list = values.ok_or_else(|| invalid(&path, "required by choice values"))?;
    let v = list
        .iter()
        .enumerate()
        .map(|(i, x)| kind.parse(&format!("{path}[{i}]"), x))
        .collect::<Result<Vec<_>, _>>()?;
    if v.is_empty() {
        return Err(invalid(&path, "at least one value"));
    }
    let rising = v.get(1).is_none_or(|&b| b > v[0]);
    let gap = |a: u128, b: u128| {
        if rising {
            b.checked_sub(a)
        } else {
            a.checked_sub(b)
        }
    };
    let step = v.get(1).map_or(Some(1), |&b| gap(v[0], b));
    if step == Some(0) || v.windows(2).any(|w| gap(w[0], w[1]) != step) {
        return Err(invalid(
            &path,
            "values must be evenly spaced, rising or falling, none twice: linerate walks a range (first, step, count)",
        ));
    }
    let step = step.expect("checked");
    Ok(Range {
        first: v[0],
        count: v.len() as u64,
        step: if rising { step } else { negated(kind, step) },
    })
}

/// A pattern that must be a range (the model has no auto for it).
pub(crate) fn ranged(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
) -> Result<Range, Invalid> {
    match pattern(parent, key, kind, default, false)? {
        Field::Range(r) => Ok(r),
        Field::Auto => unreachable!("no auto without auto_default"),
    }
}

/// A pattern that must be a range, or the model's `random` (the range
/// then holds `min` and the count).
pub(crate) fn ranged_random(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
) -> Result<(Range, Option<Random>), Invalid> {
    match pattern_random(parent, key, kind, 0, false, true)? {
        (Field::Range(r), rnd) => Ok((r, rnd)),
        (Field::Auto, _) => unreachable!("no auto without auto_default"),
    }
}

/// A pattern linerate writes one value of: it must be that value (or the
/// model's auto, when `auto` is).
pub(crate) fn single(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto: bool,
) -> Result<Option<u128>, Invalid> {
    match pattern(parent, key, kind, default, auto)? {
        Field::Auto => Ok(None),
        Field::Range(r) if r.count == 1 => Ok(Some(r.first)),
        Field::Range(_) => Err(invalid(
            &parent.at(key),
            "linerate sends one value of this field: give value",
        )),
    }
}

/// A field linerate writes as `fixed`: any other value is refused.
pub(crate) fn fixed(
    parent: &Obj,
    key: &'static str,
    kind: Kind,
    default: u128,
    auto: bool,
    fixed: u128,
    what: &str,
) -> Result<(), Invalid> {
    match single(parent, key, kind, default, auto)? {
        Some(v) if v != fixed => Err(invalid(
            &parent.at(key),
            format!("linerate's frames carry {what}; {v} is not sent"),
        )),
        _ => Ok(()),
    }
}
