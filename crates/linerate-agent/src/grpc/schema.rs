//! Protobuf wire data to and from the OTG JSON the HTTP path reads and
//! answers, by a table of the models' messages (`table_config`,
//! `table_flow`, `table_api`: field numbers, the JSON names, types, enums'
//! names): a `Config` in protobuf becomes the very document the HTTP
//! path's reader checks, and the API's JSON answers become protobuf. The
//! mapping is protobuf's own JSON mapping (proto3): 64-bit integers as
//! strings of digits, enums by name, field names as the models spell them.
//!
//! A field the table knows by name only ([`Ty::Opaque`]: a part of the
//! models the agent does not run) comes out as `{}` under its name, for
//! the reader to refuse by path as it refuses the same field in JSON; a
//! field number the models do not have is refused here, by path.

use crate::json::{Invalid, invalid, join};
use serde_json::{Map, Number, Value};

/// A message: its fields.
#[derive(Debug)]
pub struct Msg {
    pub fields: &'static [Field],
}

/// A field: its number, JSON name, type, and whether it repeats.
#[derive(Debug)]
pub struct Field {
    pub num: u32,
    pub name: &'static str,
    pub ty: Ty,
    pub rep: bool,
}

#[derive(Debug, Clone, Copy)]
pub enum Ty {
    Str,
    Bool,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// The enum's numbers and names.
    Enum(&'static [(i32, &'static str)]),
    Msg(&'static Msg),
    /// A message the agent does not read: known by its name only.
    Opaque,
}

/// A singular field.
pub const fn f(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        ty,
        rep: false,
    }
}

/// A repeated field.
pub const fn r(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        ty,
        rep: true,
    }
}

const VARINT: u8 = 0;
const I64_WIRE: u8 = 1;
const LEN: u8 = 2;
const I32_WIRE: u8 = 5;

impl Ty {
    /// The wire type of one value.
    fn wire(self) -> u8 {
        match self {
            Ty::Str | Ty::Msg(_) | Ty::Opaque => LEN,
            Ty::F32 => I32_WIRE,
            Ty::F64 => I64_WIRE,
            _ => VARINT,
        }
    }
}

/// A reader of wire data: the bytes left.
struct Wire<'a> {
    at: &'a [u8],
}

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self.at.split_first()?;
            self.at = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.at.len() {
            return None;
        }
        let (a, b) = self.at.split_at(n);
        self.at = b;
        Some(a)
    }

    /// One value of wire type `wire`: a varint or fixed width as a u64,
    /// or length-delimited bytes.
    fn value(&mut self, wire: u8) -> Option<Result<u64, &'a [u8]>> {
        match wire {
            VARINT => self.varint().map(Ok),
            I64_WIRE => self
                .take(8)
                .map(|b| Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))),
            I32_WIRE => self.take(4).map(|b| {
                Ok(u64::from(u32::from_le_bytes(
                    b.try_into().expect("4 bytes"),
                )))
            }),
            LEN => {
                let n = usize::try_from(self.varint()?).ok()?;
                self.take(n).map(Err)
            }
            _ => None,
        }
    }
}

/// `msg` read from wire data into its JSON object; `path` is the
/// object's path in errors (`flows[0].packet[1]`).
pub fn decode(msg: &Msg, bytes: &[u8], path: &str) -> Result<Value, Invalid> {
    let mut w = Wire { at: bytes };
    let mut out = Map::new();
    let broken = |what: &str| invalid(path, format!("not protobuf wire data: {what}"));
    while !w.at.is_empty() {
        let tag = w.varint().ok_or_else(|| broken("a cut tag"))?;
        let (num, wire) = (tag >> 3, (tag & 7) as u8);
        let Some(field) = msg.fields.iter().find(|f| u64::from(f.num) == num) else {
            return Err(invalid(
                &join(path, &format!("#{num}")),
                "not supported: a field number the OTG models (1.62) do not have here",
            ));
        };
        let at = join(path, field.name);
        let v = w.value(wire).ok_or_else(|| broken("a cut value"))?;
        let packed = field.rep && wire == LEN && field.ty.wire() != LEN;
        if wire != field.ty.wire() && !packed {
            return Err(invalid(
                &at,
                format!("wire type {wire}, not the models' {}", field.ty.wire()),
            ));
        }
        let mut values = Vec::new();
        match v {
            Err(b) if packed => {
                let mut p = Wire { at: b };
                while !p.at.is_empty() {
                    match p.value(field.ty.wire()) {
                        Some(Ok(x)) => values.push(scalar(field.ty, x, &at)?),
                        _ => return Err(broken("a cut packed value")),
                    }
                }
            }
            Ok(x) => values.push(scalar(field.ty, x, &at)?),
            Err(b) => {
                let i = out
                    .get(field.name)
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let item = if field.rep {
                    format!("{at}[{i}]")
                } else {
                    at.clone()
                };
                values.push(delimited(field.ty, b, &item)?);
            }
        }
        put(&mut out, field, values);
    }
    Ok(Value::Object(out))
}

/// Values read into the object: appended to a repeated field, the last
/// one kept for a singular one (a message merged into the one before).
fn put(out: &mut Map<String, Value>, field: &Field, values: Vec<Value>) {
    let key = field.name.to_string();
    if field.rep {
        let list = out.entry(key).or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(l) = list {
            l.extend(values);
        }
        return;
    }
    for v in values {
        match (out.get_mut(&key), v) {
            (Some(Value::Object(old)), Value::Object(new)) => old.extend(new),
            (_, v) => {
                out.insert(key.clone(), v);
            }
        }
    }
}

/// A length-delimited value: a string, a message, or a message kept by
/// name only.
fn delimited(ty: Ty, b: &[u8], at: &str) -> Result<Value, Invalid> {
    match ty {
        Ty::Str => std::str::from_utf8(b)
            .map(|s| Value::String(s.into()))
            .map_err(|_| invalid(at, "a string that is not UTF-8")),
        Ty::Msg(m) => decode(m, b, at),
        _ => Ok(Value::Object(Map::new())),
    }
}

/// A varint or fixed-width value as the JSON mapping writes it.
fn scalar(ty: Ty, x: u64, at: &str) -> Result<Value, Invalid> {
    Ok(match ty {
        Ty::Bool => Value::Bool(x != 0),
        Ty::I32 => Value::from(x as i32),
        Ty::U32 => Value::from(x as u32),
        Ty::I64 => Value::String((x as i64).to_string()),
        Ty::U64 => Value::String(x.to_string()),
        Ty::F32 => {
            // Its shortest decimal form, as the JSON mapping prints it.
            let v = f32::from_bits(x as u32);
            let v: f64 = v.to_string().parse().unwrap_or(f64::NAN);
            Value::Number(Number::from_f64(v).ok_or_else(|| invalid(at, "not a finite number"))?)
        }
        Ty::F64 => Value::Number(
            Number::from_f64(f64::from_bits(x))
                .ok_or_else(|| invalid(at, "not a finite number"))?,
        ),
        Ty::Enum(names) => {
            let n = x as i32;
            let name = names.iter().find(|(k, _)| *k == n).map(|(_, s)| *s);
            Value::String(
                name.ok_or_else(|| invalid(at, format!("{n} is not one of the models' values")))?
                    .into(),
            )
        }
        Ty::Str | Ty::Msg(_) | Ty::Opaque => unreachable!("length-delimited"),
    })
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_len(out: &mut Vec<u8>, num: u32, bytes: &[u8]) {
    put_varint(out, (u64::from(num) << 3) | u64::from(LEN));
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A JSON object as `msg`'s wire data (the answers and the configuration
/// in force); a key the table does not have is an error naming its path.
pub fn encode(msg: &Msg, v: &Value, path: &str) -> Result<Vec<u8>, String> {
    let Value::Object(map) = v else {
        return Err(format!("{path}: not an object"));
    };
    if let Some(k) = map
        .keys()
        .find(|k| !msg.fields.iter().any(|f| f.name == *k))
    {
        return Err(format!(
            "{}: not a field of the models' message",
            join(path, k)
        ));
    }
    // In the table's order (the models' field numbers), as protobuf
    // writes.
    let mut out = Vec::new();
    for field in msg.fields {
        let Some(v) = map.get(field.name) else {
            continue;
        };
        let at = join(path, field.name);
        match (v, field.rep) {
            (Value::Null, _) => {}
            (Value::Array(items), true) if field.ty.wire() != LEN => {
                // proto3 packs repeated numbers.
                let mut packed = Vec::new();
                for (i, x) in items.iter().enumerate() {
                    put_scalar(&mut packed, field.ty, x, &format!("{at}[{i}]"))?;
                }
                put_len(&mut out, field.num, &packed);
            }
            (Value::Array(items), true) => {
                for (i, x) in items.iter().enumerate() {
                    put_one(&mut out, field, x, &format!("{at}[{i}]"))?;
                }
            }
            (_, true) => return Err(format!("{at}: not a list")),
            (x, false) => put_one(&mut out, field, x, &at)?,
        }
    }
    Ok(out)
}

/// One value of `field` with its tag.
fn put_one(out: &mut Vec<u8>, field: &Field, v: &Value, at: &str) -> Result<(), String> {
    match field.ty {
        Ty::Str => match v {
            Value::String(s) => put_len(out, field.num, s.as_bytes()),
            _ => return Err(format!("{at}: not a string")),
        },
        Ty::Msg(m) => put_len(out, field.num, &encode(m, v, at)?),
        Ty::Opaque => {
            return Err(format!(
                "{at}: a part of the models the agent does not hold"
            ));
        }
        ty => {
            put_varint(out, (u64::from(field.num) << 3) | u64::from(ty.wire()));
            put_scalar(out, ty, v, at)?;
        }
    }
    Ok(())
}

/// A number, boolean or enum's value without its tag. Integers may come
/// as strings of digits (the JSON mapping's 64-bit form, and the HTTP
/// path takes them so).
fn put_scalar(out: &mut Vec<u8>, ty: Ty, v: &Value, at: &str) -> Result<(), String> {
    let int = || -> Result<i128, String> {
        match v {
            Value::Number(n) => n.as_i64().map(i128::from).or(n.as_u64().map(i128::from)),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("{at}: not an integer"))
    };
    let float = || -> Result<f64, String> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("{at}: not a number"))
    };
    let ranged = |lo: i128, hi: i128| -> Result<u64, String> {
        let x = int()?;
        if (lo..=hi).contains(&x) {
            Ok(x as i64 as u64)
        } else {
            Err(format!("{at}: {x} is out of the field's range"))
        }
    };
    match ty {
        Ty::Bool => match v {
            Value::Bool(b) => put_varint(out, u64::from(*b)),
            _ => return Err(format!("{at}: not a boolean")),
        },
        // A negative int32 is sign-extended to ten bytes, as protobuf does.
        Ty::I32 => put_varint(out, ranged(i32::MIN.into(), i32::MAX.into())?),
        Ty::U32 => put_varint(out, ranged(0, u32::MAX.into())?),
        Ty::I64 => put_varint(out, ranged(i64::MIN.into(), i64::MAX.into())?),
        Ty::U64 => put_varint(
            out,
            int().and_then(|x| {
                u64::try_from(x).map_err(|_| format!("{at}: {x} is out of the field's range"))
            })?,
        ),
        Ty::F32 => out.extend_from_slice(&(float()? as f32).to_le_bytes()),
        Ty::F64 => out.extend_from_slice(&float()?.to_le_bytes()),
        Ty::Enum(names) => {
            let n = match v {
                Value::String(s) => names.iter().find(|(_, n)| n == s).map(|(k, _)| *k),
                _ => None,
            }
            .ok_or_else(|| format!("{at}: {v} is not one of the models' values"))?;
            put_varint(out, n as i64 as u64);
        }
        Ty::Str | Ty::Msg(_) | Ty::Opaque => unreachable!("length-delimited"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::table_api::M_METRICS_RESPONSE;
    use super::super::table_config::M_CONFIG;
    use super::*;
    use serde_json::json;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// `json_format.Parse(CONFIG_JSON, otg_pb2.Config()).SerializeToString()`
    /// with snappi 1.62's otg_pb2: protobuf's own encoding, written down.
    const CONFIG_WIRE: &str = "0a0b0a057769726530120274780a0b0a057769726531120272781a130a0274780a0272781005200128dc0b52026c7922090a027278280132016332b8010a0c080112080a0274781a027278121b08021a1712150802121130323a30303a30303a30303a30303a3031120a080322061a040802100a12210805321d721b08042a170a0a3139382e31382e302e321207302e302e302e311804121d080a5a190a0a08031a06e807ea07ec07120b08053207088827100218031a1a08042a1608021a08088001150000e0401a0808ee0b150000003f2205080110e8072a0808011204080a100c320808012204080110013a0266314a020802";

    fn config_json() -> Value {
        json!({
            "ports": [{"location": "wire0", "name": "tx"}, {"location": "wire1", "name": "rx"}],
            "layer1": [{"port_names": ["tx", "rx"], "speed": "speed_1_gbps", "promiscuous": true, "mtu": 1500, "name": "ly"}],
            "captures": [{"port_names": ["rx"], "format": "pcap", "name": "c"}],
            "flows": [{
                "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
                "packet": [
                    {"choice": "ethernet", "ethernet": {"src": {"choice": "value", "value": "02:00:00:00:00:01"}}},
                    {"choice": "vlan", "vlan": {"id": {"choice": "value", "value": 10}}},
                    {"choice": "ipv4", "ipv4": {"dst": {"choice": "increment", "increment": {"start": "198.18.0.2", "step": "0.0.0.1", "count": 4}}}},
                    {"choice": "udp", "udp": {
                        "src_port": {"choice": "values", "values": [1000, 1002, 1004]},
                        "dst_port": {"choice": "decrement", "decrement": {"start": 5000, "step": 2, "count": 3}}}}
                ],
                "size": {"choice": "weight_pairs", "weight_pairs": {"choice": "custom", "custom": [{"size": 128, "weight": 7.0}, {"size": 1518, "weight": 0.5}]}},
                "rate": {"choice": "pps", "pps": "1000"},
                "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 10, "gap": 12}},
                "metrics": {"enable": true, "latency": {"enable": true, "mode": "store_forward"}},
                "name": "f1",
                "egress_packet": [{"choice": "ethernet"}]
            }]
        })
    }

    #[test]
    fn protobufs_own_encoding_of_a_config_reads_as_its_json() {
        let got = decode(&M_CONFIG, &hex(CONFIG_WIRE), "").unwrap();
        assert_eq!(got, config_json());
    }

    #[test]
    fn a_config_written_reads_back_the_same() {
        let wire = encode(&M_CONFIG, &config_json(), "").unwrap();
        assert_eq!(wire, hex(CONFIG_WIRE), "protobuf's own bytes");
        // Integers given as strings of digits (as the HTTP path takes
        // them) are written as numbers.
        let doc = json!({"flows": [{"duration": {"choice": "fixed_packets", "fixed_packets": {"packets": "10"}}}]});
        let back = decode(&M_CONFIG, &encode(&M_CONFIG, &doc, "").unwrap(), "").unwrap();
        assert_eq!(back["flows"][0]["duration"]["fixed_packets"]["packets"], 10);
    }

    /// A flow's `custom` header (its bytes and metric tags) by protobuf
    /// (snappi 1.62's otg_pb2): read as the HTTP path's JSON, not opaque.
    const CUSTOM_WIRE: &str = "321e1202080a1215080112110a0632653265353112070a0174100418083a0166";

    #[test]
    fn a_custom_header_reads_as_its_json() {
        let doc = json!({"flows": [{"name": "f", "packet": [
            {"choice": "udp"},
            {"choice": "custom", "custom": {"bytes": "2e2e51",
                "metric_tags": [{"name": "t", "offset": 4, "length": 8}]}}]}]});
        assert_eq!(decode(&M_CONFIG, &hex(CUSTOM_WIRE), "").unwrap(), doc);
        assert_eq!(encode(&M_CONFIG, &doc, "").unwrap(), hex(CUSTOM_WIRE));
    }

    /// The `random` pattern of an IPv4 address and a UDP port by protobuf
    /// (snappi 1.62's otg_pb2): read as the HTTP path's JSON, not opaque.
    const RANDOM_WIRE: &str = "3246122a08053226722408064a200a0a3139382e31382e302e30120e3139382e31382e3235352e323535180920031215080a5a110a0f0806420b08800810ffff03182a20053a0166";

    #[test]
    fn a_random_pattern_reads_as_its_json() {
        let doc = json!({"flows": [{"name": "f", "packet": [
            {"choice": "ipv4", "ipv4": {"dst": {"choice": "random", "random":
                {"min": "198.18.0.0", "max": "198.18.255.255", "seed": 9, "count": 3}}}},
            {"choice": "udp", "udp": {"src_port": {"choice": "random", "random":
                {"min": 1024, "max": 65535, "seed": 42, "count": 5}}}}]}]});
        assert_eq!(decode(&M_CONFIG, &hex(RANDOM_WIRE), "").unwrap(), doc);
        assert_eq!(encode(&M_CONFIG, &doc, "").unwrap(), hex(RANDOM_WIRE));
    }

    /// A `MetricsResponse` by protobuf (snappi 1.62's otg_pb2).
    const METRICS_WIRE: &str = "08011a3f0a026631120274781a0272782802300a380a40800a48800a550000003f6500000000721b090000000000408f4011000000000088a340190000000000589b40";

    /// A capture's `filters` by protobuf (snappi 1.62's otg_pb2): read
    /// as the HTTP path's JSON, not opaque.
    const CAPTURE_FILTERS_WIRE: &str = "22450a027278122408021a200a1e0a0c303230303030303030303031120c3030303030303030303030301800121608011212081010101a04313737302204303030312801320163";

    #[test]
    fn capture_filters_read_as_their_json() {
        let doc = json!({"captures": [{"port_names": ["rx"], "filters": [
            {"choice": "ethernet", "ethernet": {"src": {"value": "020000000001", "mask": "000000000000", "negate": false}}},
            {"choice": "custom", "custom": {"offset": 16, "bit_length": 16, "value": "1770", "mask": "0001", "negate": true}}],
            "name": "c"}]});
        assert_eq!(
            decode(&M_CONFIG, &hex(CAPTURE_FILTERS_WIRE), "").unwrap(),
            doc
        );
        assert_eq!(
            encode(&M_CONFIG, &doc, "").unwrap(),
            hex(CAPTURE_FILTERS_WIRE)
        );
    }

    /// A flow's tagged metrics and a request's `tagged_metrics` by
    /// protobuf (snappi 1.62's otg_pb2 from this JSON): written and read
    /// as the HTTP path's JSON, not opaque.
    const TAGGED_WIRE: &str =
        "08011a240a016630067a1d0a110a03647374120a0801120630783137373010061806208006288006";
    const TAGGED_REQUEST_WIRE: &str =
        "08021a1b0a01662216080010011a0102220d0a036473741206307831373730";

    #[test]
    fn tagged_metrics_are_the_models_fields() {
        let m = json!({"choice": "flow_metrics", "flow_metrics": [{"name": "f", "frames_tx": "6",
            "tagged_metrics": [{"tags": [{"name": "dst", "value": {"choice": "hex", "hex": "0x1770"}}],
                "frames_tx": "6", "frames_rx": "6", "bytes_tx": "768", "bytes_rx": "768"}]}]});
        let wire = encode(&M_METRICS_RESPONSE, &m, "").unwrap();
        assert_eq!(wire, hex(TAGGED_WIRE), "protobuf's own bytes");
        assert_eq!(decode(&M_METRICS_RESPONSE, &wire, "").unwrap(), m);
        let req = json!({"choice": "flow", "flow": {"flow_names": ["f"], "tagged_metrics": {
            "include": false, "include_empty_metrics": true, "metric_names": ["frames_rx"],
            "filters": [{"name": "dst", "values": ["0x1770"]}]}}});
        let got = decode(
            &super::super::table_api::M_METRICS_REQUEST,
            &hex(TAGGED_REQUEST_WIRE),
            "",
        )
        .unwrap();
        assert_eq!(got, req);
    }

    #[test]
    fn metrics_are_the_models_fields() {
        let m = json!({"choice": "flow_metrics", "flow_metrics": [{
            "name": "f1", "port_tx": "tx", "port_rx": "rx", "transmit": "stopped",
            "frames_tx": "10", "frames_rx": "10", "bytes_tx": "1280", "bytes_rx": "1280",
            "frames_tx_rate": 0.5, "loss": 0.0,
            "latency": {"minimum_ns": 1000.0, "maximum_ns": 2500.0, "average_ns": 1750.0}}]});
        assert_eq!(
            decode(&M_METRICS_RESPONSE, &hex(METRICS_WIRE), "").unwrap(),
            m
        );
        let wire = encode(&M_METRICS_RESPONSE, &m, "").unwrap();
        assert_eq!(wire, hex(METRICS_WIRE), "protobuf's own bytes");
    }

    #[test]
    fn what_is_not_the_models_is_refused_by_path() {
        // Config.flows[0] with field 99 (varint 1).
        let wire = [0x32, 0x03, 0x98, 0x06, 0x01];
        let e = decode(&M_CONFIG, &wire, "").unwrap_err();
        assert_eq!(e.path, "flows[0].#99", "{e}");
        assert!(e.what.starts_with("not supported"), "{e}");
        // ports[0].name as a varint: the wrong wire type.
        let e = decode(&M_CONFIG, &[0x0a, 0x02, 0x10, 0x01], "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "ports[0].name: wire type 0, not the models' 2"
        );
        // Cut short, and a string that is not UTF-8.
        let e = decode(&M_CONFIG, &[0x0a, 0x05, 0x12], "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "(document): not protobuf wire data: a cut value"
        );
        let e = decode(&M_CONFIG, &[0x0a, 0x03, 0x12, 0x01, 0xff], "").unwrap_err();
        assert_eq!(e.to_string(), "ports[0].name: a string that is not UTF-8");
        // An enum's number the models do not have.
        let e = decode(&M_CONFIG, &[0x1a, 0x02, 0x10, 0x63], "").unwrap_err();
        assert_eq!(
            e.to_string(),
            "layer1[0].speed: 99 is not one of the models' values"
        );
        // A part of the models the agent does not run comes by its name,
        // for the reader to refuse: lags[0] = {ports: …}.
        let got = decode(&M_CONFIG, &[0x12, 0x03, 0x0a, 0x01, b'l'], "").unwrap();
        assert_eq!(got, json!({"lags": [{}]}));
        assert_eq!(
            encode(&M_CONFIG, &json!({"nope": 1}), "").unwrap_err(),
            "nope: not a field of the models' message"
        );
    }

    #[test]
    fn numbers_keep_their_sign_and_width() {
        static M: Msg = Msg {
            fields: &[
                f(1, "i", Ty::I32),
                f(2, "u", Ty::U64),
                r(3, "l", Ty::U32),
                f(4, "x", Ty::F32),
            ],
        };
        let v = json!({"i": -2, "u": "18446744073709551615", "l": [1, 300], "x": 0.1});
        let wire = encode(&M, &v, "").unwrap();
        assert_eq!(
            wire,
            [
                [0x08].as_slice(),
                &[0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
                &[
                    0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01
                ],
                &[0x1a, 0x03, 0x01, 0xac, 0x02],
                &[0x25],
                &0.1f32.to_le_bytes(),
            ]
            .concat()
        );
        assert_eq!(decode(&M, &wire, "").unwrap(), v);
        // Repeated numbers unpacked are read too.
        assert_eq!(
            decode(&M, &[0x18, 0x01, 0x18, 0x02], "").unwrap(),
            json!({"l": [1, 2]})
        );
        assert_eq!(
            encode(&M, &json!({"i": 2147483648u64}), "").unwrap_err(),
            "i: 2147483648 is out of the field's range"
        );
    }

    /// Random bytes, and protobuf's own bytes with bytes changed, cut or
    /// added, are read or refused, never panicked on.
    #[test]
    fn hostile_wire_data_is_answered_never_panicked_on() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let good = hex(CONFIG_WIRE);
        let (mut read, mut refused) = (0, 0);
        for _ in 0..20_000 {
            let mut b = good.clone();
            match rnd() % 4 {
                0 => b = (0..rnd() % 300).map(|_| rnd() as u8).collect(),
                1 => b.truncate((rnd() % b.len() as u64) as usize),
                2 => b.insert((rnd() % b.len() as u64) as usize, rnd() as u8),
                _ => {}
            }
            for _ in 0..1 + rnd() % 3 {
                let i = (rnd() % b.len().max(1) as u64) as usize;
                if let Some(x) = b.get_mut(i) {
                    *x = rnd() as u8;
                }
            }
            match decode(&M_CONFIG, &b, "") {
                Ok(v) => {
                    read += 1;
                    // What is read is written back and read the same.
                    if let Ok(w) = encode(&M_CONFIG, &v, "") {
                        assert_eq!(decode(&M_CONFIG, &w, "").unwrap(), v);
                    }
                }
                Err(_) => refused += 1,
            }
        }
        assert!(
            read > 100 && refused > 100,
            "{read} read, {refused} refused"
        );
    }
}
