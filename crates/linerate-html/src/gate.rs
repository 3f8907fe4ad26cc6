//! `--fail-if 'throughput < -5%'`: a condition on a figure's change that a
//! CI job gates on, parsed into a typed expression.
//!
//! Grammar: `FIGURE OP NUMBER[%] [significant]`, where FIGURE is a
//! headline figure's name (`throughput`, `pps`, `loss`, `latency_p99`, …),
//! OP one of `<`, `<=`, `>`, `>=`, NUMBER a signed decimal. With `%` the
//! number is the relative change of the mean from the baseline (`--vs`)
//! in percent; without, the change in the figure's own unit. With
//! `significant`, the condition holds only when Welch's test also finds
//! the change significant.

use crate::figures::FigureName;
use crate::stats::Change;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn holds(self, x: f64, y: f64) -> bool {
        match self {
            Op::Lt => x < y,
            Op::Le => x <= y,
            Op::Gt => x > y,
            Op::Ge => x >= y,
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// The threshold: a relative change (a ratio, -0.05 for `-5%`) or an
/// absolute one in the figure's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    Relative(f64),
    Absolute(f64),
}

/// One `--fail-if` condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    pub figure: FigureName,
    pub op: Op,
    pub threshold: Threshold,
    /// Only when the change is significant.
    pub significant: bool,
    /// As written.
    pub text: String,
}

/// Why a `--fail-if` expression was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("--fail-if '{0}': expected FIGURE OP NUMBER[%] [significant], e.g. 'throughput < -5%'")]
    Shape(String),
    #[error("--fail-if '{text}': no figure '{name}' (figures: {known})")]
    Figure {
        text: String,
        name: String,
        known: String,
    },
    #[error("--fail-if '{text}': '{op}' is not an operator (<, <=, >, >=)")]
    Op { text: String, op: String },
    #[error("--fail-if '{text}': '{number}' is not a number (-5%, 0.5, 1e6)")]
    Number { text: String, number: String },
}

/// What a condition found.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The condition holds: the gate fails.
    Holds,
    /// It does not.
    Clear,
    /// It cannot be judged (the figure is missing from a side, a relative
    /// change of a baseline of 0, or no test for `significant`): said, and
    /// the gate fails (a CI job should not pass on what it could not see).
    Unknown(String),
}

impl Verdict {
    /// What `compare` says of it after the condition, and whether the
    /// gate fails on it.
    pub fn said(&self) -> (String, bool) {
        match self {
            Verdict::Holds => ("holds: fail".into(), true),
            Verdict::Clear => ("does not hold".into(), false),
            Verdict::Unknown(why) => (format!("cannot be judged ({why}): fail"), true),
        }
    }
}

impl std::str::FromStr for Condition {
    type Err = GateError;

    fn from_str(text: &str) -> Result<Condition, GateError> {
        let shape = || GateError::Shape(text.to_string());
        let t = text.trim();
        // The figure: a name of letters, digits and underscores.
        let name_end = t
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(t.len());
        let (name, rest) = t.split_at(name_end);
        if name.is_empty() {
            return Err(shape());
        }
        let figure = FigureName::parse(name).ok_or_else(|| GateError::Figure {
            text: text.to_string(),
            name: name.to_string(),
            known: FigureName::ALL
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        let rest = rest.trim_start();
        let op_end = rest
            .find(|c: char| !matches!(c, '<' | '>' | '=' | '!'))
            .unwrap_or(rest.len());
        let (op_text, rest) = rest.split_at(op_end);
        let op = match op_text {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "" => return Err(shape()),
            other => {
                return Err(GateError::Op {
                    text: text.to_string(),
                    op: other.to_string(),
                });
            }
        };
        let mut words = rest.split_whitespace();
        let number = words.next().ok_or_else(shape)?;
        let significant = match (words.next(), words.next()) {
            (None, _) => false,
            (Some("significant"), None) => true,
            _ => return Err(shape()),
        };
        let bad = || GateError::Number {
            text: text.to_string(),
            number: number.to_string(),
        };
        let threshold = match number.strip_suffix('%') {
            Some(p) => Threshold::Relative(finite(p).ok_or_else(bad)? / 100.0),
            None => Threshold::Absolute(finite(number).ok_or_else(bad)?),
        };
        Ok(Condition {
            figure,
            op,
            threshold,
            significant,
            text: t.to_string(),
        })
    }
}

/// A finite decimal (no `inf`, `NaN`).
fn finite(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|v| v.is_finite())
}

impl Condition {
    /// The verdict on this figure's change (`None`: the figure is not in
    /// both sets).
    pub fn judge(&self, change: Option<&Change>) -> Verdict {
        let Some(c) = change else {
            return Verdict::Unknown(format!(
                "{} is not in both sets of runs",
                self.figure.name()
            ));
        };
        let x = match self.threshold {
            Threshold::Absolute(_) => c.diff,
            Threshold::Relative(_) => match c.ratio {
                Some(r) => r,
                None => {
                    return Verdict::Unknown(format!(
                        "{}'s baseline mean is 0: no relative change",
                        self.figure.name()
                    ));
                }
            },
        };
        let y = match self.threshold {
            Threshold::Relative(v) | Threshold::Absolute(v) => v,
        };
        if !self.op.holds(x, y) {
            return Verdict::Clear;
        }
        if self.significant {
            return match &c.test {
                Ok(w) if w.significant() => Verdict::Holds,
                Ok(_) => Verdict::Clear,
                Err(u) => Verdict::Unknown(u.reason().to_string()),
            };
        }
        Verdict::Holds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::change;

    fn cond(s: &str) -> Condition {
        s.parse().unwrap()
    }

    #[test]
    fn expressions_parse_into_their_parts() {
        let c = cond("throughput < -5%");
        assert_eq!(c.figure, FigureName::Throughput);
        assert_eq!(c.op, Op::Lt);
        assert_eq!(c.threshold, Threshold::Relative(-0.05));
        assert!(!c.significant);
        let c = cond("  latency_p99>=20 significant");
        assert_eq!(c.figure, FigureName::LatencyP99);
        assert_eq!(c.op, Op::Ge);
        assert_eq!(c.threshold, Threshold::Absolute(20.0));
        assert!(c.significant);
        assert_eq!(cond("loss <= 0.5%").threshold, Threshold::Relative(0.005));
        assert_eq!(cond("pps > 1e6").threshold, Threshold::Absolute(1e6));
    }

    #[test]
    fn bad_expressions_say_what_is_wrong() {
        let err = |s: &str| s.parse::<Condition>().unwrap_err();
        assert!(matches!(err("speed < 5%"), GateError::Figure { name, .. } if name == "speed"));
        assert!(matches!(err("throughput == 5%"), GateError::Op { op, .. } if op == "=="));
        assert!(matches!(err("throughput =< 5%"), GateError::Op { .. }));
        assert!(
            matches!(err("throughput < five"), GateError::Number { number, .. } if number == "five")
        );
        assert!(matches!(err("throughput < inf%"), GateError::Number { .. }));
        for s in [
            "",
            "throughput",
            "throughput <",
            "< 5%",
            "throughput < 5% maybe",
            "throughput 5%",
        ] {
            assert!(matches!(err(s), GateError::Shape(_)), "{s:?}: {:?}", err(s));
        }
        let msg = err("speed < 5%").to_string();
        assert!(
            msg.contains("throughput") && msg.contains("latency_p99"),
            "{msg}"
        );
    }

    #[test]
    fn verdicts_follow_the_change() {
        // a: 90, 92, 94 against b: 100, 101, 99: -8%, significant.
        let c = change(&[90.0, 92.0, 94.0], &[100.0, 101.0, 99.0], 0.95).unwrap();
        assert_eq!(cond("throughput < -5%").judge(Some(&c)), Verdict::Holds);
        assert_eq!(cond("throughput < -10%").judge(Some(&c)), Verdict::Clear);
        assert_eq!(
            cond("throughput < -5 significant").judge(Some(&c)),
            Verdict::Holds
        );
        assert_eq!(cond("throughput > 0").judge(Some(&c)), Verdict::Clear);
        // Noisy: -8% but not significant.
        let n = change(&[60.0, 92.0, 124.0], &[100.0, 101.0, 99.0], 0.95).unwrap();
        assert_eq!(cond("throughput < -5%").judge(Some(&n)), Verdict::Holds);
        assert_eq!(
            cond("throughput < -5% significant").judge(Some(&n)),
            Verdict::Clear
        );
        // What cannot be judged.
        assert!(matches!(
            cond("throughput < -5%").judge(None),
            Verdict::Unknown(_)
        ));
        let one = change(&[90.0], &[100.0], 0.95).unwrap();
        assert_eq!(cond("throughput < -5%").judge(Some(&one)), Verdict::Holds);
        assert!(matches!(
            cond("throughput < -5% significant").judge(Some(&one)),
            Verdict::Unknown(_)
        ));
        let zero = change(&[1.0, 2.0], &[0.0, 0.0], 0.95).unwrap();
        assert!(matches!(
            cond("loss > 1%").judge(Some(&zero)),
            Verdict::Unknown(_)
        ));
        assert_eq!(cond("loss > 1").judge(Some(&zero)), Verdict::Holds);
    }
}
