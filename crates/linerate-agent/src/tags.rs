//! The model's `metric_tags`: a flow's header field tagged by name (some
//! or all of its bits), its metrics given per value of those bits.
//!
//! The fields a frame's flow tuple carries (ethernet src and dst, IPv4 or
//! IPv6 src and dst, UDP or TCP ports; a VXLAN flow's inner frame's) may be
//! tagged. Frame n carries tuple n mod the tuple count (the model's
//! patterns, `FlowSpec::lockstep`), and tuple i the probe id `ids.of(i)`:
//! so each probe id's frames carry one tag value, and the receivers'
//! per-id counts are the per-value counts. A flow whose tuples share probe
//! ids with other tag values is refused (its counts could not be told
//! apart), as are tags on fields whose values are not the tuple's.

use crate::json::{Invalid, Obj, invalid};
use crate::rates::{LatencyMetric, RATE_NAMES, Rates};
use linerate_traffic::{FlowFields, FlowSpec, ProbeIds};
use serde::{Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::IpAddr;

/// Tags a flow may carry.
const TAGS_MAX: usize = 8;
/// Tuples a tagged flow may have (each one's tag values are worked out
/// at configuration).
const TUPLES_MAX: u64 = 1 << 16;

/// A tagged field of the flow tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagField {
    EthSrc,
    EthDst,
    IpSrc,
    IpDst,
    SrcPort,
    DstPort,
}

impl TagField {
    /// The field `key` of header `header`, if it is the tuple's.
    fn of(header: &str, key: &str) -> Option<Self> {
        Some(match (header, key) {
            ("ethernet", "src") => Self::EthSrc,
            ("ethernet", "dst") => Self::EthDst,
            ("ipv4" | "ipv6", "src") => Self::IpSrc,
            ("ipv4" | "ipv6", "dst") => Self::IpDst,
            ("udp" | "tcp", "src_port") => Self::SrcPort,
            ("udp" | "tcp", "dst_port") => Self::DstPort,
            _ => return None,
        })
    }

    /// The field's value in tuple `t`.
    fn value(self, t: &FlowFields) -> u128 {
        let ip = |a: IpAddr| match a {
            IpAddr::V4(v) => u128::from(u32::from(v)),
            IpAddr::V6(v) => u128::from(v),
        };
        match self {
            Self::EthSrc => u128::from(t.src_mac.to_u64()),
            Self::EthDst => u128::from(t.dst_mac.to_u64()),
            Self::IpSrc => ip(t.src_ip),
            Self::IpDst => ip(t.dst_ip),
            Self::SrcPort => u128::from(t.src_port),
            Self::DstPort => u128::from(t.dst_port),
        }
    }
}

/// One `metric_tags` entry: `length` bits from bit `offset` (0 the
/// field's first, most significant) of a field `width` bits wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TagSpec {
    pub name: String,
    pub field: TagField,
    pub width: u32,
    pub offset: u32,
    pub length: u32,
}

impl TagSpec {
    /// The tag's bits of field value `v`.
    pub fn bits(&self, v: u128) -> u128 {
        let shifted = v >> (self.width - self.offset - self.length);
        if self.length >= 128 {
            shifted
        } else {
            shifted & ((1u128 << self.length) - 1)
        }
    }
}

/// A flow's tags, read from its `packet` list (at `path`): every
/// `metric_tags` in it, refused where the field is not one the agent
/// counts per value.
pub fn read(path: &str, packet: Option<&Value>) -> Result<Vec<TagSpec>, Invalid> {
    let Some(Value::Array(hs)) = packet else {
        return Ok(Vec::new());
    };
    let names: Vec<&str> = hs
        .iter()
        .map(|h| {
            h.get("choice")
                .and_then(Value::as_str)
                .unwrap_or("ethernet")
        })
        .collect();
    let stacked = crate::kinds::is_stacked(&names);
    let inner_from = names
        .iter()
        .position(|n| *n == "vxlan")
        .map_or(0, |k| k + 1);
    let mut tags = Vec::new();
    for (i, (h, name)) in hs.iter().zip(&names).enumerate() {
        let Some(Value::Object(body)) = h.get(*name) else {
            continue;
        };
        let at = format!("{path}[{i}].{name}");
        for (key, v) in body {
            let Some(list) = tagged(v) else { continue };
            let here = format!("{at}.{key}.metric_tags");
            let field = TagField::of(name, key)
                .filter(|_| !stacked && i >= inner_from)
                .ok_or_else(|| invalid(&here, refusal(stacked, i < inner_from)))?;
            let width = match (field, *name) {
                (TagField::EthSrc | TagField::EthDst, _) => 48,
                (TagField::SrcPort | TagField::DstPort, _) => 16,
                (_, "ipv6") => 128,
                _ => 32,
            };
            for (k, t) in list.iter().enumerate() {
                tags.push(tag(&format!("{here}[{k}]"), t, field, width)?);
            }
        }
        for (key, v) in body {
            if TagField::of(name, key).is_none() {
                nested(&format!("{at}.{key}"), v)?;
            }
        }
    }
    if tags.len() > TAGS_MAX {
        return Err(invalid(
            path,
            format!("{} metric tags: at most {TAGS_MAX} a flow", tags.len()),
        ));
    }
    for (k, t) in tags.iter().enumerate() {
        if tags[..k].iter().any(|o| o.name == t.name) {
            return Err(invalid(
                path,
                format!(
                    "metric tag '{}' is named twice: a flow's tag names are unique",
                    t.name
                ),
            ));
        }
    }
    Ok(tags)
}

/// Why a tag on a field is refused.
fn refusal(stacked: bool, outer: bool) -> &'static str {
    if stacked {
        "not supported in MPLS, GRE and ICMP flows: metric tags are counted on plain frames' ethernet, ipv4/ipv6 and udp/tcp fields"
    } else if outer {
        "not supported on a VXLAN flow's outer headers (one value each): metric tags are counted on the inner frame's fields"
    } else {
        "not supported on this field: metric tags are counted on ethernet src and dst, ipv4/ipv6 src and dst, udp/tcp src_port and dst_port"
    }
}

/// A pattern object's non-empty `metric_tags`.
fn tagged(v: &Value) -> Option<&Vec<Value>> {
    match v.get("metric_tags") {
        Some(Value::Array(a)) if !a.is_empty() => Some(a),
        _ => None,
    }
}

/// Tags deeper in a header (`priority.dscp.phb`, …): refused.
fn nested(path: &str, v: &Value) -> Result<(), Invalid> {
    let Value::Object(o) = v else { return Ok(()) };
    if tagged(v).is_some() {
        return Err(invalid(
            &format!("{path}.metric_tags"),
            refusal(false, false),
        ));
    }
    for (k, x) in o {
        nested(&format!("{path}.{k}"), x)?;
    }
    Ok(())
}

/// One `{name, offset, length}` at `path` on a field `width` bits wide.
fn tag(path: &str, v: &Value, field: TagField, width: u32) -> Result<TagSpec, Invalid> {
    let o = Obj::new(path, v)?;
    let name = o
        .str("name")?
        .filter(|n| !n.is_empty())
        .ok_or_else(|| invalid(&o.at("name"), "required: the tag's name"))?
        .to_string();
    let offset = o.u64("offset")?.unwrap_or(0);
    let length = o.u64("length")?.unwrap_or(u64::from(width));
    o.done()?;
    if offset >= u64::from(width) {
        return Err(invalid(
            &o.at("offset"),
            format!("{offset}: the field has {width} bits (0 to {})", width - 1),
        ));
    }
    if length == 0 || offset + length > u64::from(width) {
        return Err(invalid(
            &o.at("length"),
            format!(
                "{length} bits from bit {offset}: 1 to {} (the field has {width})",
                u64::from(width) - offset
            ),
        ));
    }
    Ok(TagSpec {
        name,
        field,
        width,
        offset: offset as u32,
        length: length as u32,
    })
}

/// A flow's tags made runnable: each distinct set of tag values (a key)
/// and which probe ids and tuples carry it.
#[derive(Debug, Clone)]
pub struct TagPlan {
    pub tags: Vec<TagSpec>,
    /// The distinct keys (one value per tag), in the order of their first
    /// tuple.
    pub keys: Vec<Vec<u128>>,
    /// Per tuple (0..count): its key.
    pub of_tuple: Vec<u32>,
    /// Per probe id of the flow's block (its place from the base): the
    /// key its frames carry, if any tuple takes it.
    pub of_id: Vec<Option<u32>>,
    pub ids: ProbeIds,
    /// Every frame has one size (so a key's bytes sent are its frames'
    /// times that size).
    pub one_size: bool,
}

/// The plan of flow `path`'s tags over its tuples `spec` (probe ids
/// given); none when it has none. `remote`: some receive port is on a
/// peer (its counts come without probe ids).
pub fn plan(
    path: &str,
    tags: &[TagSpec],
    spec: &FlowSpec,
    remote: bool,
    one_size: bool,
) -> Result<Option<TagPlan>, Invalid> {
    if tags.is_empty() {
        return Ok(None);
    }
    if remote {
        return Err(invalid(
            &format!("{path}.packet"),
            "metric tags are counted by this agent's receivers: a tagged flow's receive ports are on this agent",
        ));
    }
    let count = spec.count().max(1);
    if count > TUPLES_MAX {
        return Err(invalid(
            &format!("{path}.packet"),
            format!(
                "metric tags: the flow steps through {count} tuples, at most {TUPLES_MAX} for a tagged flow"
            ),
        ));
    }
    let span = spec.ids.span() as usize;
    let mut keys: Vec<Vec<u128>> = Vec::new();
    let mut index: BTreeMap<Vec<u128>, u32> = BTreeMap::new();
    let mut of_tuple = Vec::with_capacity(count as usize);
    let mut of_id: Vec<Option<u32>> = vec![None; span];
    for i in 0..count {
        let t = spec.flow(i);
        let key: Vec<u128> = tags.iter().map(|g| g.bits(g.field.value(&t))).collect();
        let k = *index.entry(key.clone()).or_insert_with(|| {
            keys.push(key);
            (keys.len() - 1) as u32
        });
        of_tuple.push(k);
        let slot = &mut of_id[usize::from(spec.ids.of(i).wrapping_sub(spec.ids.base))];
        match slot {
            Some(o) if *o != k => {
                return Err(invalid(
                    &format!("{path}.packet"),
                    format!(
                        "metric tags: the flow's {count} tuples share {span} probe ids, and tuples of one id carry different tag values (tuple {i}), so a receiver could not tell them apart; make the tagged fields' value counts divide {span}"
                    ),
                ));
            }
            _ => *slot = Some(k),
        }
    }
    Ok(Some(TagPlan {
        tags: tags.to_vec(),
        keys,
        of_tuple,
        of_id,
        ids: spec.ids,
        one_size,
    }))
}

/// What `tagged_metrics` of a flow metrics request asks for.
#[derive(Debug, Clone)]
pub struct TagRequest {
    pub include: bool,
    pub include_empty: bool,
    /// Counters to give (empty: all).
    pub metric_names: Vec<String>,
    /// (tag name, its values, hex as given back) rows must match.
    pub filters: Vec<(String, Vec<String>)>,
}

impl Default for TagRequest {
    fn default() -> Self {
        Self {
            include: true,
            include_empty: false,
            metric_names: Vec::new(),
            filters: Vec::new(),
        }
    }
}

/// The counters a tagged row can give (its rates: `metrics::RATE_NAMES`).
const TAG_METRICS: [&str; 4] = ["frames_tx", "frames_rx", "bytes_tx", "bytes_rx"];

impl TagRequest {
    /// A request's `tagged_metrics` object (absent: the model's defaults).
    pub fn read(o: Option<Obj>) -> Result<Self, Invalid> {
        let mut r = Self::default();
        let Some(o) = o else { return Ok(r) };
        r.include = o.bool("include")?.unwrap_or(true);
        r.include_empty = o.bool("include_empty_metrics")?.unwrap_or(false);
        r.metric_names = o
            .strs("metric_names", 32)?
            .unwrap_or_default()
            .into_iter()
            .map(String::from)
            .collect();
        for (i, n) in r.metric_names.iter().enumerate() {
            if !TAG_METRICS.contains(&n.as_str()) && !RATE_NAMES.contains(&n.as_str()) {
                return Err(invalid(
                    &format!("{}[{i}]", o.at("metric_names")),
                    format!(
                        "'{n}' is not a tagged metric: the models' are {}, {}",
                        TAG_METRICS.join(", "),
                        RATE_NAMES.join(", ")
                    ),
                ));
            }
        }
        if let Some(list) = o.list("filters", 32)? {
            for (i, v) in list.iter().enumerate() {
                let f = Obj::new(&format!("{}[{i}]", o.at("filters")), v)?;
                let name = f.str("name")?.unwrap_or("").to_string();
                let values = f.strs("values", 1024)?.unwrap_or_default();
                f.done()?;
                r.filters
                    .push((name, values.into_iter().map(str::to_lowercase).collect()));
            }
        }
        o.done()?;
        Ok(r)
    }

    fn wants(&self, m: &str) -> bool {
        self.metric_names.is_empty() || self.metric_names.iter().any(|n| n == m)
    }
}

/// A 64-bit counter as the models write it: a string of digits.
fn digits<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

/// The models' `Flow.TaggedMetric`: the counters, rates, loss and
/// latency of the frames that carry one set of tag values (no
/// `timestamps`: the flow rows have none either).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaggedMetric {
    pub tags: Vec<MetricTag>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "digits")]
    pub frames_tx: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "digits")]
    pub frames_rx: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "digits")]
    pub bytes_tx: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "digits")]
    pub bytes_rx: Option<u64>,
    #[serde(flatten)]
    pub rates: Rates,
    /// Percent of the row's frames sent that did not arrive.
    pub loss: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyMetric>,
}

/// The models' `Flow.MetricTag`: a tag's name and value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetricTag {
    pub name: String,
    pub value: TagValue,
}

/// The models' `Flow.MetricTag.Value`: hex, `0x` and lowercase digits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "choice", rename_all = "snake_case")]
pub enum TagValue {
    Hex { hex: String },
}

/// What a flow's counts say to its tags (the campaign's `FlowCounts`
/// lends them: `FlowCounts::tag_counts`).
#[derive(Debug, Clone, Copy)]
pub struct TagCounts<'a> {
    pub running: bool,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// The flow's last interval's frames and bits a second sent (0 once
    /// ended).
    pub tx_pps: f64,
    pub tx_bps: f64,
    /// Frames sent per probe id slot (empty while the flow runs).
    pub tx_ids: &'a [u64],
    /// Frames and bytes received per probe id slot.
    pub rx_ids: &'a [(u64, u64)],
    /// Per receive port, per probe id slot: the port's last interval's
    /// frames and bits a second received (0 once ended).
    pub rx_id_rates: &'a [Vec<(f64, f64)>],
    /// Per key: one-way latency (min, max, mean, ns) of its frames; none
    /// when the flow measures none.
    pub latency: Option<&'a [Option<MinMaxMean>]>,
}

/// One-way latency: min, max, mean, ns.
pub type MinMaxMean = (f64, f64, f64);

/// One key's share of a flow's counts.
#[derive(Debug, Clone, Copy, Default)]
struct KeyCounts {
    /// Tuples carrying it.
    tuples: u64,
    tx: u64,
    rx: u64,
    rx_bytes: u64,
    rx_pps: f64,
    rx_bps: f64,
}

/// Per key: its tuples, frames sent, frames and bytes received, receive
/// rates.
fn per_key(p: &TagPlan, c: &TagCounts) -> Vec<KeyCounts> {
    let mut out = vec![KeyCounts::default(); p.keys.len()];
    let n = p.of_tuple.len() as u64;
    for (i, &k) in p.of_tuple.iter().enumerate() {
        let o = &mut out[k as usize];
        o.tuples += 1;
        if c.tx_ids.is_empty() {
            // Running (or never run): frame n carried tuple n mod count.
            o.tx += c.tx_packets / n + u64::from((i as u64) < c.tx_packets % n);
        }
    }
    for (slot, &sent) in c.tx_ids.iter().enumerate() {
        if let Some(Some(k)) = p.of_id.get(slot) {
            out[*k as usize].tx += sent;
        }
    }
    for (slot, &(frames, bytes)) in c.rx_ids.iter().enumerate() {
        if let Some(Some(k)) = p.of_id.get(slot) {
            out[*k as usize].rx += frames;
            out[*k as usize].rx_bytes += bytes;
        }
    }
    for port in c.rx_id_rates {
        for (slot, &(pps, bps)) in port.iter().enumerate() {
            if let Some(Some(k)) = p.of_id.get(slot) {
                out[*k as usize].rx_pps += pps;
                out[*k as usize].rx_bps += bps;
            }
        }
    }
    out
}

/// A key's values as the models' tags.
fn tags_of(p: &TagPlan, key: &[u128]) -> Vec<MetricTag> {
    p.tags
        .iter()
        .zip(key)
        .map(|(t, v)| MetricTag {
            name: t.name.clone(),
            value: TagValue::Hex {
                hex: format!("{v:#x}"),
            },
        })
        .collect()
}

/// Flow counts `c`'s rows per tag values, as `req` asks: the counters,
/// the rates (frame n carries tuple n mod count, so a key's share of
/// the frames sent a second is its share of the tuples; of the bits, when
/// every frame has one size), the loss and the latency, made as the
/// flow's row makes its own (`crate::metrics`).
pub fn rows(p: &TagPlan, c: &TagCounts, req: &TagRequest) -> Vec<TaggedMetric> {
    if !req.include {
        return Vec::new();
    }
    let frame_bytes = (p.one_size && c.tx_packets > 0).then(|| c.tx_bytes / c.tx_packets);
    let n = p.of_tuple.len().max(1) as f64;
    let mut rows = Vec::new();
    for (k, (key, mut kc)) in p.keys.iter().zip(per_key(p, c)).enumerate() {
        if c.running && kc.rx > kc.tx {
            // Counted apart while running: what arrived is at most what left.
            kc.rx_bytes =
                (u128::from(kc.rx_bytes) * u128::from(kc.tx) / u128::from(kc.rx.max(1))) as u64;
            kc.rx = kc.tx;
        }
        if !req.include_empty && kc.tx == 0 && kc.rx == 0 {
            continue;
        }
        let tags = tags_of(p, key);
        let passes = req.filters.iter().all(|(name, values)| {
            values.is_empty()
                || tags.iter().any(|t| {
                    let TagValue::Hex { hex } = &t.value;
                    t.name == *name && values.contains(hex)
                })
        });
        if !passes {
            continue;
        }
        let share = kc.tuples as f64 / n;
        let rates = Rates::of(
            c.tx_pps * share,
            p.one_size.then_some(c.tx_bps * share),
            kc.rx_pps,
            kc.rx_bps,
        );
        let latency = c.latency.and_then(|l| *l.get(k)?).map(LatencyMetric::from);
        let pick = |m: &str, v: Option<u64>| v.filter(|_| req.wants(m));
        rows.push(TaggedMetric {
            tags,
            frames_tx: pick("frames_tx", Some(kc.tx)),
            frames_rx: pick("frames_rx", Some(kc.rx)),
            bytes_tx: pick("bytes_tx", frame_bytes.map(|b| b * kc.tx)),
            bytes_rx: pick("bytes_rx", Some(kc.rx_bytes)),
            rates: rates.only(|m| req.wants(m)),
            loss: crate::rates::loss_pct(kc.tx, kc.rx),
            latency,
        });
    }
    rows
}

/// A tag request's filters checked against the flows' tag names: a name
/// no flow of `plans` carries is refused.
pub fn check_filters<'a>(
    req: &TagRequest,
    plans: impl Iterator<Item = Option<&'a TagPlan>> + Clone,
) -> Result<(), Invalid> {
    for (i, (name, _)) in req.filters.iter().enumerate() {
        let known = plans
            .clone()
            .flatten()
            .any(|p| p.tags.iter().any(|t| t.name == *name));
        if !known {
            return Err(invalid(
                &format!("flow.tagged_metrics.filters[{i}].name"),
                format!("no flow carries a metric tag named '{name}'"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 4 tuples, tag "t": tuples 0 to 2 carry 0x0 (ids 0 to 2), tuple 3
    /// carries 0x1 (id 3).
    fn plan(one_size: bool) -> TagPlan {
        TagPlan {
            tags: vec![TagSpec {
                name: "t".into(),
                field: TagField::DstPort,
                width: 16,
                offset: 0,
                length: 16,
            }],
            keys: vec![vec![0], vec![1]],
            of_tuple: vec![0, 0, 0, 1],
            of_id: vec![Some(0), Some(0), Some(0), Some(1)],
            ids: ProbeIds::block(0, 4).unwrap(),
            one_size,
        }
    }

    /// A running flow of 128-byte frames: 10 sent (tuples 0 and 1 three,
    /// 2 and 3 two), 400 frames a second; received on two ports.
    fn counts<'a>(
        rx_ids: &'a [(u64, u64)],
        rates: &'a [Vec<(f64, f64)>],
        latency: Option<&'a [Option<MinMaxMean>]>,
    ) -> TagCounts<'a> {
        TagCounts {
            running: true,
            tx_packets: 10,
            tx_bytes: 1280,
            tx_pps: 400.0,
            tx_bps: 400.0 * 1024.0,
            tx_ids: &[],
            rx_ids,
            rx_id_rates: rates,
            latency,
        }
    }

    /// A row's rates are the key's share of the tuples of the sent rates
    /// and its ids' received rates over every port, its loss and latency
    /// its own, each made as the flow row's (`Rates::of`, `loss_pct`).
    #[test]
    fn a_rows_rates_loss_and_latency_are_its_frames() {
        let rx_ids = [(3, 384), (3, 384), (1, 128), (3, 384)];
        let rates = [
            vec![
                (100.0, 102_400.0),
                (50.0, 51_200.0),
                (30.0, 30_720.0),
                (0.0, 0.0),
            ],
            vec![(20.0, 20_480.0), (0.0, 0.0), (0.0, 0.0), (90.0, 92_160.0)],
        ];
        let lat = [Some((1000.0, 5000.0, 2000.0)), None];
        let p = plan(true);
        let got = rows(
            &p,
            &counts(&rx_ids, &rates, Some(&lat)),
            &TagRequest::default(),
        );
        let v = serde_json::to_value(&got).unwrap();
        assert_eq!(
            v,
            json!([
                {"tags": [{"name": "t", "value": {"choice": "hex", "hex": "0x0"}}],
                 "frames_tx": "8", "frames_rx": "7", "bytes_tx": "1024", "bytes_rx": "896",
                 "frames_tx_rate": 300.0, "frames_rx_rate": 200.0,
                 "tx_rate_bps": 307_200.0, "rx_rate_bps": 204_800.0,
                 "tx_rate_bytes": 38_400.0, "rx_rate_bytes": 25_600.0,
                 "tx_rate_kbps": 307.2, "rx_rate_kbps": 204.8,
                 "tx_rate_mbps": 0.3072, "rx_rate_mbps": 0.2048,
                 "tx_l1_rate_bps": 307_200.0 + 300.0 * 160.0,
                 "rx_l1_rate_bps": 204_800.0 + 200.0 * 160.0,
                 "loss": 12.5,
                 "latency": {"minimum_ns": 1000.0, "maximum_ns": 5000.0, "average_ns": 2000.0}},
                // 3 arrived of 2 sent, counted apart while running: 2
                // shown, its bytes in proportion.
                {"tags": [{"name": "t", "value": {"choice": "hex", "hex": "0x1"}}],
                 "frames_tx": "2", "frames_rx": "2", "bytes_tx": "256", "bytes_rx": "256",
                 "frames_tx_rate": 100.0, "frames_rx_rate": 90.0,
                 "tx_rate_bps": 102_400.0, "rx_rate_bps": 92_160.0,
                 "tx_rate_bytes": 12_800.0, "rx_rate_bytes": 11_520.0,
                 "tx_rate_kbps": 102.4, "rx_rate_kbps": 92.16,
                 "tx_rate_mbps": 0.1024, "rx_rate_mbps": 0.09216,
                 "tx_l1_rate_bps": 102_400.0 + 100.0 * 160.0,
                 "rx_l1_rate_bps": 92_160.0 + 90.0 * 160.0,
                 "loss": 0.0}
            ])
        );
        // The rows' sent rates sum to the flow's.
        let tx: f64 = got.iter().map(|r| r.rates.frames_tx_rate.unwrap()).sum();
        assert_eq!(tx, 400.0);
        // No latency asked of the flow: none a row.
        let got = rows(&p, &counts(&rx_ids, &rates, None), &TagRequest::default());
        assert!(got.iter().all(|r| r.latency.is_none()));
        // Frames of several sizes: no bytes sent, no sent bit rates.
        let got = rows(
            &plan(false),
            &counts(&rx_ids, &rates, None),
            &TagRequest::default(),
        );
        let r = &got[0];
        assert_eq!((r.bytes_tx, r.rates.frames_tx_rate), (None, Some(300.0)));
        assert_eq!((r.rates.tx_rate_bps, r.rates.tx_l1_rate_bps), (None, None));
        assert_eq!(r.rates.rx_rate_bps, Some(204_800.0));
    }

    /// `metric_names` keeps the counters and rates it names (loss and
    /// latency, which it cannot name, stay); a name the models do not
    /// have is refused at its path.
    #[test]
    fn metric_names_pick_counters_and_rates() {
        let doc = json!({"metric_names": ["frames_rx", "rx_rate_mbps"]});
        let req = TagRequest::read(Some(Obj::new("flow.tagged_metrics", &doc).unwrap())).unwrap();
        let rates = [vec![(10.0, 8e6); 4]];
        let got = rows(&plan(true), &counts(&[(1, 128); 4], &rates, None), &req);
        assert_eq!(
            serde_json::to_value(&got[1]).unwrap(),
            json!({"tags": [{"name": "t", "value": {"choice": "hex", "hex": "0x1"}}],
                   "frames_rx": "1", "rx_rate_mbps": 8.0, "loss": 50.0})
        );
        let doc = json!({"metric_names": ["frames_rx", "bytes_rx_rate"]});
        let e = TagRequest::read(Some(Obj::new("flow.tagged_metrics", &doc).unwrap()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "flow.tagged_metrics.metric_names[1]: 'bytes_rx_rate' is not a tagged metric"
            ),
            "{e}"
        );
    }
}
