//! A TOML document's values with their place: a field being read knows
//! its path (`streams[1].ipv4.src`) and its line, so every error names
//! both; a table remembers the keys taken and refuses the rest.

use super::ProfileError;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::Duration;
use toml_edit::{Item, TableLike, Value};

/// The file being read: its text (for lines) and its name.
pub(super) struct Src<'a> {
    pub(super) text: &'a str,
    pub(super) file: String,
}

impl Src<'_> {
    pub(super) fn line(&self, at: usize) -> usize {
        self.text.as_bytes()[..at.min(self.text.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    pub(super) fn err(&self, line: usize, field: &str, message: impl Into<String>) -> ProfileError {
        ProfileError::Field {
            file: self.file.clone(),
            line,
            field: field.to_string(),
            message: message.into(),
        }
    }
}

pub(super) type Res<T> = Result<T, ProfileError>;

/// A value in the document: an item of a table or a value of an array.
#[derive(Clone, Copy)]
pub(super) enum Ref<'a> {
    Item(&'a Item),
    Value(&'a Value),
}

/// A field being read: its value, its path and its line.
#[derive(Clone)]
pub(super) struct Node<'s, 'a> {
    pub(super) src: &'s Src<'a>,
    pub(super) v: Ref<'a>,
    pub(super) path: String,
    pub(super) line: usize,
}

impl<'s, 'a> Node<'s, 'a> {
    pub(super) fn err(&self, message: impl Into<String>) -> ProfileError {
        self.src.err(self.line, &self.path, message)
    }

    pub(super) fn value(&self) -> Option<&'a Value> {
        match self.v {
            Ref::Item(i) => i.as_value(),
            Ref::Value(v) => Some(v),
        }
    }

    pub(super) fn type_name(&self) -> &'static str {
        match self.v {
            Ref::Item(i) => i.type_name(),
            Ref::Value(v) => v.type_name(),
        }
    }

    pub(super) fn table(&self) -> Option<&'a dyn TableLike> {
        match self.v {
            Ref::Item(i) => i.as_table_like(),
            Ref::Value(v) => v.as_inline_table().map(|t| t as &dyn TableLike),
        }
    }

    pub(super) fn wrong(&self, want: &str) -> ProfileError {
        self.err(format!("expected {want}, found {}", self.type_name()))
    }

    pub(super) fn str(&self) -> Res<&'a str> {
        self.value()
            .and_then(Value::as_str)
            .ok_or_else(|| self.wrong("a string"))
    }

    pub(super) fn int(&self, min: i64, max: i64) -> Res<i64> {
        let n = self
            .value()
            .and_then(Value::as_integer)
            .ok_or_else(|| self.wrong("an integer"))?;
        if !(min..=max).contains(&n) {
            return Err(self.err(format!("{n} is out of range ({min}..={max})")));
        }
        Ok(n)
    }

    pub(super) fn bool(&self) -> Res<bool> {
        self.value()
            .and_then(Value::as_bool)
            .ok_or_else(|| self.wrong("true or false"))
    }

    /// The elements of an array (as nodes under `path[i]`).
    pub(super) fn array(&self) -> Res<Vec<Node<'s, 'a>>> {
        let a = self
            .value()
            .and_then(Value::as_array)
            .ok_or_else(|| self.wrong("an array"))?;
        Ok(a.iter()
            .enumerate()
            .map(|(i, v)| Node {
                src: self.src,
                v: Ref::Value(v),
                path: format!("{}[{i}]", self.path),
                line: v.span().map_or(self.line, |s| self.src.line(s.start)),
            })
            .collect())
    }

    pub(super) fn obj(&self) -> Res<Obj<'s, 'a>> {
        let t = self.table().ok_or_else(|| self.wrong("a table"))?;
        Ok(Obj {
            node: self.clone(),
            t,
            taken: RefCell::new(BTreeSet::new()),
        })
    }

    /// A duration: a number of seconds, or a string with its unit (2s,
    /// 150ms, 500us, 1m).
    pub(super) fn duration(&self) -> Res<Duration> {
        let secs = match self.value() {
            Some(Value::Integer(i)) => *i.value() as f64,
            Some(Value::Float(f)) => *f.value(),
            Some(Value::String(s)) => parse_duration(s.value()).ok_or_else(|| {
                self.err(format!(
                    "'{}' is not a duration (2s, 150ms, 500us, 1m)",
                    s.value()
                ))
            })?,
            _ => return Err(self.wrong("a duration (2s, 150ms, or seconds)")),
        };
        if !(0.0..=86_400.0).contains(&secs) {
            return Err(self.err(format!("{secs} s is out of range (0 to 86400 s)")));
        }
        Ok(Duration::from_secs_f64(secs))
    }
}

pub(super) fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, mult) = [
        ("ms", 1e-3),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ns", 1e-9),
        ("s", 1.0),
        ("m", 60.0),
    ]
    .iter()
    .find_map(|(u, m)| s.strip_suffix(u).map(|n| (n, *m)))?;
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * mult)
}

/// A table being read: the keys taken so far are remembered, so
/// [`Obj::done`] can refuse the rest.
pub(super) struct Obj<'s, 'a> {
    pub(super) node: Node<'s, 'a>,
    pub(super) t: &'a dyn TableLike,
    pub(super) taken: RefCell<BTreeSet<&'static str>>,
}

impl<'s, 'a> Obj<'s, 'a> {
    pub(super) fn path(&self, key: &str) -> String {
        if self.node.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.node.path)
        }
    }

    /// Field `key` (its path kept in `path`), marked taken.
    pub(super) fn get(&self, key: &'static str) -> Option<Node<'s, 'a>> {
        self.taken.borrow_mut().insert(key);
        let (k, item) = self.t.get_key_value(key)?;
        let path = self.path(key);
        let line = (k.span().or_else(|| item.span()))
            .map_or(self.node.line, |s| self.node.src.line(s.start));
        Some(Node {
            src: self.node.src,
            v: Ref::Item(item),
            path,
            line,
        })
    }

    /// Field `key`, which must be there.
    pub(super) fn need(&self, key: &'static str) -> Res<Node<'s, 'a>> {
        let p = self.path(key);
        self.get(key).ok_or_else(|| {
            self.node
                .src
                .err(self.node.line, &p, "missing (this field is required)")
        })
    }

    /// Refuses the keys nobody took.
    pub(super) fn done(&self) -> Res<()> {
        let taken = self.taken.borrow();
        for (key, item) in self.t.iter() {
            if !taken.contains(key) {
                let (k, _) = self.t.get_key_value(key).expect("a key of the table");
                let line = (k.span().or_else(|| item.span()))
                    .map_or(self.node.line, |s| self.node.src.line(s.start));
                let known = taken.iter().copied().collect::<Vec<_>>().join(", ");
                return Err(self.node.src.err(
                    line,
                    &self.path(key),
                    format!("unknown field (known here: {known})"),
                ));
            }
        }
        Ok(())
    }
}
