//! The model's capture `filters`: a list of headers (`ethernet`, `vlan`,
//! `ipv4`, `ipv6`) laid one after the other from the frame's first byte,
//! and `custom` fields at a bit offset from the end of the headers before
//! them; each field given (`value`, `mask`, `negate`) a test of the
//! frame's bits there. A frame is kept when every test holds (the model:
//! the filters are and-ed).
//!
//! A mask's 1 bits are bits not compared (the IxNetwork convention the
//! models' implementations follow: `mask` `00` compares every bit).

use crate::json::{Invalid, Obj, invalid};

/// Filters a capture may have.
const FILTERS_MAX: usize = 16;

/// One test: `bits` bits from bit `at` of the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldMatch {
    pub at: u32,
    pub bits: u32,
    pub value: u128,
    /// Bits not compared.
    pub mask: u128,
    pub negate: bool,
}

impl FieldMatch {
    /// Whether `frame` passes the test (a frame too short to hold the
    /// field does not).
    pub fn holds(&self, frame: &[u8]) -> bool {
        let Some(v) = bits_of(frame, self.at, self.bits) else {
            return false;
        };
        let care = !self.mask & width_mask(self.bits);
        ((v & care) == (self.value & care)) != self.negate
    }
}

/// Whether `frame` passes every test of `filters`.
pub fn matches(filters: &[FieldMatch], frame: &[u8]) -> bool {
    filters.iter().all(|f| f.holds(frame))
}

fn width_mask(bits: u32) -> u128 {
    if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    }
}

/// `bits` (at most 128) bits of `frame` from bit `at`, most significant
/// first.
fn bits_of(frame: &[u8], at: u32, bits: u32) -> Option<u128> {
    let end = at.checked_add(bits)?;
    if end as usize > frame.len() * 8 {
        return None;
    }
    let mut v = 0u128;
    for b in at..end {
        let byte = frame[(b / 8) as usize];
        v = (v << 1) | u128::from((byte >> (7 - b % 8)) & 1);
    }
    Some(v)
}

/// A header's fields: (name, bit offset, bits), and its length in bytes.
fn header(choice: &str) -> (&'static [(&'static str, u32, u32)], u32) {
    match choice {
        "ethernet" => (
            &[("dst", 0, 48), ("src", 48, 48), ("ether_type", 96, 16)],
            14,
        ),
        "vlan" => (
            &[
                ("priority", 0, 3),
                ("cfi", 3, 1),
                ("id", 4, 12),
                ("protocol", 16, 16),
            ],
            4,
        ),
        "ipv4" => (
            &[
                ("version", 0, 4),
                ("header_length", 4, 4),
                ("priority", 8, 8),
                ("total_length", 16, 16),
                ("identification", 32, 16),
                ("reserved", 48, 1),
                ("dont_fragment", 49, 1),
                ("more_fragments", 50, 1),
                ("fragment_offset", 51, 13),
                ("time_to_live", 64, 8),
                ("protocol", 72, 8),
                ("header_checksum", 80, 16),
                ("src", 96, 32),
                ("dst", 128, 32),
            ],
            20,
        ),
        _ => (
            &[
                ("version", 0, 4),
                ("traffic_class", 4, 8),
                ("flow_label", 12, 20),
                ("payload_length", 32, 16),
                ("next_header", 48, 8),
                ("hop_limit", 56, 8),
                ("src", 64, 128),
                ("dst", 192, 128),
            ],
            40,
        ),
    }
}

/// A hex string (`0x` optional) of at most `bits` bits, at `path`.
fn hex(path: &str, s: &str, bits: u32) -> Result<u128, Invalid> {
    let d = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    let v = if d.is_empty() || d.len() > 32 {
        None
    } else {
        u128::from_str_radix(d, 16).ok()
    };
    v.filter(|&v| v <= width_mask(bits))
        .ok_or_else(|| invalid(path, format!("'{s}': hex digits of a {bits}-bit field")))
}

/// A field object's test (`value`, `mask`, `negate`) at bit `at`, if it
/// gives a value.
fn field(o: &Obj, at: u32, bits: u32) -> Result<Option<FieldMatch>, Invalid> {
    let value = o.str("value")?;
    let mask = o.str("mask")?;
    let negate = o.bool("negate")?.unwrap_or(false);
    o.done()?;
    let Some(value) = value else { return Ok(None) };
    Ok(Some(FieldMatch {
        at,
        bits,
        value: hex(&o.at("value"), value, bits)?,
        mask: mask
            .map(|m| hex(&o.at("mask"), m, bits))
            .transpose()?
            .unwrap_or(0),
        negate,
    }))
}

/// A capture's `filters` (`c` the capture object): its tests.
pub fn read(c: &Obj) -> Result<Vec<FieldMatch>, Invalid> {
    let mut out = Vec::new();
    let mut pos = 0u32;
    for (i, v) in c
        .list("filters", FILTERS_MAX)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let f = Obj::new(&format!("{}[{i}]", c.at("filters")), v)?;
        const CHOICES: [&str; 5] = ["custom", "ethernet", "vlan", "ipv4", "ipv6"];
        let given = f.choice(&CHOICES, "custom")?;
        let choice = CHOICES.into_iter().find(|c| *c == given).expect("a choice");
        let Some(h) = f.obj(choice)? else {
            f.done()?;
            if choice != "custom" {
                pos += header(choice).1 * 8;
            }
            continue;
        };
        f.done()?;
        if choice == "custom" {
            let offset = h.u64("offset")?.unwrap_or(0);
            let bits = h.u64("bit_length")?.unwrap_or(8);
            if bits == 0 || bits > 128 || offset > 9216 * 8 {
                return Err(invalid(
                    &h.path,
                    format!("{bits} bits at bit {offset}: 1 to 128 bits within a frame"),
                ));
            }
            out.extend(field(&h, pos + offset as u32, bits as u32)?);
            continue;
        }
        let (fields, len) = header(choice);
        if h.raw("pfc_queue").is_some() {
            return Err(invalid(
                &h.at("pfc_queue"),
                "not supported: a PFC queue is no field of the frame",
            ));
        }
        for (name, off, bits) in fields {
            if let Some(o) = h.obj(name)? {
                out.extend(field(&o, pos + off, *bits)?);
            }
        }
        h.done()?;
        pos += len * 8;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tests_of(filters: serde_json::Value) -> Result<Vec<FieldMatch>, Invalid> {
        let doc = json!({ "filters": filters });
        read(&Obj::new("captures[0]", &doc).unwrap())
    }

    /// An Ethernet/VLAN/IPv4/UDP frame: src 02:..:01, VLAN 5, 198.18.0.1
    /// to 198.18.0.2, UDP to `port`.
    fn frame(port: u16) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0, 0, 5, 8, 0];
        f.extend([
            0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        ]);
        f.extend(5000u16.to_be_bytes());
        f.extend(port.to_be_bytes());
        f.extend([0, 8, 0, 0]);
        f
    }

    #[test]
    fn headers_lay_one_after_another_and_every_test_must_hold() {
        let t = tests_of(json!([
            {"choice": "ethernet", "ethernet": {"src": {"value": "020000000001"}}},
            {"choice": "vlan", "vlan": {"id": {"value": "005"}}},
            {"choice": "ipv4", "ipv4": {"dst": {"value": "c6120002"}, "protocol": {"value": "11"}}},
            {"choice": "custom", "custom": {"offset": 16, "bit_length": 16, "value": "1770"}}
        ]))
        .unwrap();
        assert_eq!(t.len(), 5);
        assert!(matches(&t, &frame(6000)));
        assert!(
            !matches(&t, &frame(6001)),
            "the custom field (UDP dst) differs"
        );
        assert!(
            !matches(&t, &frame(6000)[..40]),
            "too short for the last field"
        );
    }

    #[test]
    fn a_masks_ones_are_not_compared_and_negate_inverts() {
        let t = tests_of(json!([
            {"choice": "custom", "custom": {"offset": 320, "bit_length": 16, "value": "1770", "mask": "0001"}}
        ]))
        .unwrap();
        assert!(matches(&t, &frame(6000)) && matches(&t, &frame(6001)));
        assert!(!matches(&t, &frame(6002)));
        let t = tests_of(json!([
            {"choice": "ethernet"},
            {"choice": "vlan", "vlan": {"id": {"value": "005", "negate": true}}}
        ]))
        .unwrap();
        assert!(!matches(&t, &frame(6000)));
        assert!(tests_of(json!([])).unwrap().is_empty());
        assert!(matches(&[], &frame(1)), "no filter keeps every frame");
    }

    #[test]
    fn bad_filters_are_refused_by_path() {
        let e = tests_of(
            json!([{"choice": "ethernet", "ethernet": {"src": {"value": "0102030405060708"}}}]),
        )
        .unwrap_err();
        assert_eq!(e.path, "captures[0].filters[0].ethernet.src.value");
        let e =
            tests_of(json!([{"choice": "ipv4", "ipv4": {"ttl": {"value": "01"}}}])).unwrap_err();
        assert_eq!(e.path, "captures[0].filters[0].ipv4.ttl");
        let e = tests_of(json!([{"choice": "custom", "custom": {"bit_length": 0}}])).unwrap_err();
        assert_eq!(e.path, "captures[0].filters[0].custom");
        let e =
            tests_of(json!([{"choice": "ethernet", "ethernet": {"pfc_queue": {"value": "1"}}}]))
                .unwrap_err();
        assert_eq!(e.path, "captures[0].filters[0].ethernet.pfc_queue");
        let e = tests_of(json!([{"choice": "tcp"}])).unwrap_err();
        assert_eq!(e.path, "captures[0].filters[0].choice");
    }
}
