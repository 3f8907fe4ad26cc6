//! Reading a JSON document field by field with the path of each field in
//! every error (`flows[0].packet[1].ipv4.dst.increment.count: …`), and a
//! field the reader did not take refused by name: what a client sends
//! that the agent would not honour is said, never dropped silently.

use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::BTreeSet;

/// A request the agent refuses: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {what}")]
pub struct Invalid {
    pub path: String,
    pub what: String,
}

pub fn invalid(path: &str, what: impl Into<String>) -> Invalid {
    Invalid {
        path: if path.is_empty() {
            "(document)".into()
        } else {
            path.into()
        },
        what: what.into(),
    }
}

/// Parses a request body as JSON, refusing what a plain parse would let
/// through silently: a key given twice in one object (the last would
/// win), with its path.
pub fn parse(body: &[u8]) -> Result<Value, String> {
    use serde::de::DeserializeSeed;
    let mut d = serde_json::Deserializer::from_slice(body);
    let v = Strict {
        path: String::new(),
    }
    .deserialize(&mut d)
    .map_err(|e| e.to_string())?;
    d.end().map_err(|e| e.to_string())?;
    Ok(v)
}

/// A JSON value read with its path, for the error of a repeated key.
struct Strict {
    path: String,
}

impl<'de> serde::de::DeserializeSeed<'de> for Strict {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, out.len());
            match seq.next_element_seed(Strict { path })? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let path = join(&self.path, &k);
            if out.contains_key(&k) {
                return Err(serde::de::Error::custom(format!(
                    "{path}: the key is given twice in one object (which one counts would be a guess)"
                )));
            }
            let v = map.next_value_seed(Strict { path })?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// An object being read: the fields taken so far are remembered, so
/// [`Obj::done`] can refuse the rest.
#[derive(Debug)]
pub struct Obj<'a> {
    pub path: String,
    map: &'a Map<String, Value>,
    taken: RefCell<BTreeSet<&'static str>>,
}

/// The path of field `key` under `path`.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

impl<'a> Obj<'a> {
    pub fn new(path: &str, v: &'a Value) -> Result<Self, Invalid> {
        match v {
            Value::Object(map) => Ok(Self {
                path: path.to_string(),
                map,
                taken: RefCell::new(BTreeSet::new()),
            }),
            other => Err(invalid(
                path,
                format!("expected an object, got {}", kind(other)),
            )),
        }
    }

    pub fn at(&self, key: &str) -> String {
        join(&self.path, key)
    }

    /// The raw value of `key` (JSON null counts as absent), marked taken.
    pub fn raw(&self, key: &'static str) -> Option<&'a Value> {
        self.taken.borrow_mut().insert(key);
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn obj(&self, key: &'static str) -> Result<Option<Obj<'a>>, Invalid> {
        self.raw(key)
            .map(|v| Obj::new(&self.at(key), v))
            .transpose()
    }

    pub fn str(&self, key: &'static str) -> Result<Option<&'a str>, Invalid> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(invalid(
                &self.at(key),
                format!("expected a string, got {}", kind(v)),
            )),
        }
    }

    /// An unsigned integer, as a number or (the models' 64-bit integers
    /// in JSON) a string of digits.
    pub fn u64(&self, key: &'static str) -> Result<Option<u64>, Invalid> {
        self.raw(key).map(|v| as_u64(&self.at(key), v)).transpose()
    }

    pub fn f64(&self, key: &'static str) -> Result<Option<f64>, Invalid> {
        match self.raw(key) {
            None => Ok(None),
            Some(v) => as_f64(&self.at(key), v).map(Some),
        }
    }

    pub fn bool(&self, key: &'static str) -> Result<Option<bool>, Invalid> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(invalid(
                &self.at(key),
                format!("expected true or false, got {}", kind(v)),
            )),
        }
    }

    /// An array of at most `max` items.
    pub fn list(&self, key: &'static str, max: usize) -> Result<Option<&'a [Value]>, Invalid> {
        match self.raw(key) {
            None => Ok(None),
            Some(Value::Array(a)) if a.len() <= max => Ok(Some(a)),
            Some(Value::Array(a)) => Err(invalid(
                &self.at(key),
                format!("{} items: the agent takes at most {max}", a.len()),
            )),
            Some(v) => Err(invalid(
                &self.at(key),
                format!("expected a list, got {}", kind(v)),
            )),
        }
    }

    /// A list of strings.
    pub fn strs(&self, key: &'static str, max: usize) -> Result<Option<Vec<&'a str>>, Invalid> {
        let Some(items) = self.list(key, max)? else {
            return Ok(None);
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().ok_or_else(|| {
                    invalid(
                        &format!("{}[{i}]", self.at(key)),
                        format!("expected a string, got {}", kind(v)),
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    /// The object's `choice`, or `default` when it has none.
    pub fn choice(&self, allowed: &[&str], default: &'static str) -> Result<&'a str, Invalid> {
        let c = self.str("choice")?.unwrap_or(default);
        if allowed.contains(&c) {
            Ok(c)
        } else {
            Err(invalid(
                &self.at("choice"),
                format!(
                    "'{c}' is not one the agent runs (it takes: {})",
                    allowed.join(", ")
                ),
            ))
        }
    }

    /// Refuses every field that was not taken: the agent would not
    /// honour it.
    pub fn done(&self) -> Result<(), Invalid> {
        let taken = self.taken.borrow();
        match self
            .map
            .iter()
            .find(|(k, v)| !taken.contains(k.as_str()) && !v.is_null())
        {
            None => Ok(()),
            Some((k, _)) => Err(invalid(
                &self.at(k),
                "not supported by linerate agent (see docs/agent.md for the fields it runs)",
            )),
        }
    }
}

pub fn as_u64(path: &str, v: &Value) -> Result<u64, Invalid> {
    let n = match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    };
    n.ok_or_else(|| {
        invalid(
            path,
            format!("expected an unsigned integer, got {}", short(v)),
        )
    })
}

pub fn as_f64(path: &str, v: &Value) -> Result<f64, Invalid> {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    n.filter(|x| x.is_finite())
        .ok_or_else(|| invalid(path, format!("expected a number, got {}", short(v))))
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A value as the error shows it: at most 40 characters.
pub fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_key_given_twice_is_refused_with_its_path() {
        let e = parse(
            br#"{"ports": [], "flows": [{"name": "a", "rate": {"pps": 1, "pps": 2}}], "x": 1}"#,
        )
        .unwrap_err();
        assert!(
            e.starts_with("flows[0].rate.pps: the key is given twice"),
            "{e}"
        );
        let e = parse(br#"{"ports": [], "ports": []}"#).unwrap_err();
        assert!(e.starts_with("ports: the key is given twice"), "{e}");
        assert_eq!(
            parse(br#"{"a": [1, -2, 3.5, "x", null, true, {"b": {}}]}"#).unwrap(),
            serde_json::json!({"a": [1, -2, 3.5, "x", null, true, {"b": {}}]})
        );
        assert!(parse(b"{} trailing").is_err());
        assert!(parse(b"[[[[[[").is_err());
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn paths_name_the_field() {
        let v = json!({"a": {"b": "x", "n": "12", "m": 3, "bad": true}});
        let o = Obj::new("", &v).unwrap();
        let a = o.obj("a").unwrap().unwrap();
        assert_eq!(a.u64("n").unwrap(), Some(12));
        assert_eq!(a.u64("m").unwrap(), Some(3));
        let e = a.u64("b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "a.b: expected an unsigned integer, got \"x\""
        );
        let e = a.done().unwrap_err();
        assert!(e.to_string().starts_with("a.bad: not supported"), "{e}");
        assert!(o.done().is_ok());
    }

    #[test]
    fn choices_and_lists_are_checked() {
        let v = json!({"choice": "random", "l": [1, 2, 3]});
        let o = Obj::new("p", &v).unwrap();
        let e = o.choice(&["value", "values"], "value").unwrap_err();
        assert!(e.to_string().contains("'random' is not one"), "{e}");
        assert!(
            o.list("l", 2)
                .unwrap_err()
                .to_string()
                .contains("at most 2")
        );
        assert!(Obj::new("x", &json!(3)).is_err());
    }
}
