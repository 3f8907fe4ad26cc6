//! The results message each side sends after EXCHANGE_RESULTS.

use crate::IErr;
use crate::params::json_int;
use serde_json::{Map, Value, json};

/// One stream's figures as a side reports them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamResult {
    pub id: u32,
    /// Bytes sent (sender) or received (receiver) after the omit period.
    pub bytes: u64,
    /// TCP retransmits after omit, or -1 when unknown / receiving.
    pub retransmits: i64,
    /// Smoothed jitter in seconds (receiver, UDP).
    pub jitter_s: f64,
    /// Lost datagrams, cumulative including the omit period (receiver, UDP).
    pub errors: u64,
    pub omitted_errors: u64,
    /// Datagrams sent (sender) or highest sequence seen (receiver).
    pub packets: u64,
    pub omitted_packets: u64,
    pub start_time: f64,
    pub end_time: f64,
}

/// A side's results.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerResults {
    pub cpu_util_total: f64,
    pub cpu_util_user: f64,
    pub cpu_util_system: f64,
    /// 1: sent TCP with retransmit counts; 0: sent without; -1: only received.
    pub sender_has_retransmits: i64,
    pub congestion_used: Option<String>,
    pub streams: Vec<StreamResult>,
    pub server_output_text: Option<String>,
    pub server_output_json: Option<Value>,
}

fn num(m: &Map<String, Value>, k: &str) -> Result<f64, IErr> {
    m.get(k).and_then(Value::as_f64).ok_or(IErr::RECV_RESULTS)
}

fn int(m: &Map<String, Value>, k: &str) -> Result<i64, IErr> {
    m.get(k).and_then(json_int).ok_or(IErr::RECV_RESULTS)
}

fn count(m: &Map<String, Value>, k: &str) -> Result<u64, IErr> {
    Ok(int(m, k)?.max(0) as u64)
}

impl PeerResults {
    /// Checks that a peer's figures could be true: times finite, not
    /// negative, in order and (for a test of `test_s` seconds) not far
    /// beyond its length; jitter and CPU finite and not negative. Absurd
    /// results are refused rather than printed as measurements.
    pub fn check(&self, test_s: Option<f64>) -> Result<(), String> {
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        for (name, v) in [
            ("cpu_util_total", self.cpu_util_total),
            ("cpu_util_user", self.cpu_util_user),
            ("cpu_util_system", self.cpu_util_system),
        ] {
            if !ok(v) {
                return Err(format!("{name} is {v}"));
            }
        }
        let longest = test_s.map(|t| t * 2.0 + 60.0);
        for s in &self.streams {
            let id = s.id;
            if !ok(s.start_time) || !ok(s.end_time) || s.end_time < s.start_time {
                return Err(format!(
                    "stream {id} ran from {} s to {} s",
                    s.start_time, s.end_time
                ));
            }
            if let Some(max) = longest
                && s.end_time > max
            {
                return Err(format!(
                    "stream {id} ran {} s in a test of {} s",
                    s.end_time,
                    test_s.unwrap_or(0.0)
                ));
            }
            if !ok(s.jitter_s) || s.jitter_s > 3600.0 {
                return Err(format!("stream {id} has a jitter of {} s", s.jitter_s));
            }
            if s.retransmits < -1 {
                return Err(format!("stream {id} has {} retransmits", s.retransmits));
            }
        }
        Ok(())
    }

    /// Reads a peer's results; missing required keys are error 117.
    /// Accepts 3.12's unsigned -1 and a missing `omitted_*` pair.
    pub fn from_json(v: &Value) -> Result<Self, IErr> {
        let m = v.as_object().ok_or(IErr::RECV_RESULTS)?;
        let streams = m
            .get("streams")
            .and_then(Value::as_array)
            .ok_or(IErr::RECV_RESULTS)?
            .iter()
            .map(|s| {
                let s = s.as_object().ok_or(IErr::RECV_RESULTS)?;
                let id = int(s, "id")?;
                Ok(StreamResult {
                    id: u32::try_from(id).map_err(|_| IErr::STREAM_ID)?,
                    bytes: count(s, "bytes")?,
                    retransmits: int(s, "retransmits")?,
                    jitter_s: num(s, "jitter")?,
                    errors: count(s, "errors")?,
                    packets: count(s, "packets")?,
                    omitted_errors: count(s, "omitted_errors").unwrap_or(0),
                    omitted_packets: count(s, "omitted_packets").unwrap_or(0),
                    start_time: num(s, "start_time").unwrap_or(0.0),
                    end_time: num(s, "end_time").unwrap_or(0.0),
                })
            })
            .collect::<Result<Vec<_>, IErr>>()?;
        Ok(PeerResults {
            cpu_util_total: num(m, "cpu_util_total")?,
            cpu_util_user: num(m, "cpu_util_user")?,
            cpu_util_system: num(m, "cpu_util_system")?,
            sender_has_retransmits: int(m, "sender_has_retransmits")?,
            congestion_used: m
                .get("congestion_used")
                .and_then(Value::as_str)
                .map(str::to_string),
            streams,
            server_output_text: m
                .get("server_output_text")
                .and_then(Value::as_str)
                .map(str::to_string),
            server_output_json: m.get("server_output_json").cloned(),
        })
    }

    pub fn to_json(&self) -> Value {
        let streams: Vec<Value> = self
            .streams
            .iter()
            .map(|s| {
                json!({
                    "id": s.id,
                    "bytes": s.bytes,
                    "retransmits": s.retransmits,
                    "jitter": s.jitter_s,
                    "errors": s.errors,
                    "omitted_errors": s.omitted_errors,
                    "packets": s.packets,
                    "omitted_packets": s.omitted_packets,
                    "start_time": s.start_time,
                    "end_time": s.end_time,
                })
            })
            .collect();
        let mut v = json!({
            "cpu_util_total": self.cpu_util_total,
            "cpu_util_user": self.cpu_util_user,
            "cpu_util_system": self.cpu_util_system,
            "sender_has_retransmits": self.sender_has_retransmits,
            "streams": streams,
        });
        if let Some(c) = &self.congestion_used {
            v["congestion_used"] = json!(c);
        }
        if let Some(t) = &self.server_output_text {
            v["server_output_text"] = json!(t);
        }
        if let Some(j) = &self.server_output_json {
            v["server_output_json"] = j.clone();
        }
        v
    }

    pub fn stream(&self, id: u32) -> Option<&StreamResult> {
        self.streams.iter().find(|s| s.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_312_server_results() {
        let v: Value = serde_json::from_str(r#"{"cpu_util_total":0.034545353649934087,"cpu_util_user":0.0344953603740297,"cpu_util_system":0,"sender_has_retransmits":18446744073709551615,"congestion_used":"bbr","streams":[{"id":1,"bytes":524288,"retransmits":18446744073709551615,"jitter":0,"errors":0,"packets":0,"start_time":0,"end_time":2.000241}]}"#).unwrap();
        let r = PeerResults::from_json(&v).unwrap();
        assert_eq!(r.sender_has_retransmits, -1);
        assert_eq!(r.streams[0].retransmits, -1);
        assert_eq!(r.streams[0].bytes, 524288);
        assert_eq!(r.congestion_used.as_deref(), Some("bbr"));
        assert_eq!(PeerResults::from_json(&r.to_json()).unwrap(), r);
    }

    #[test]
    fn captured_321_udp_results() {
        let v: Value = serde_json::from_str(r#"{"cpu_util_total":0.2,"cpu_util_user":0,"cpu_util_system":0.2,"sender_has_retransmits":0,"streams":[{"id":1,"bytes":25500,"retransmits":-1,"jitter":0,"errors":0,"omitted_errors":0,"packets":76,"omitted_packets":25,"start_time":0,"end_time":2.000776}]}"#).unwrap();
        let r = PeerResults::from_json(&v).unwrap();
        assert_eq!(
            (r.streams[0].packets, r.streams[0].omitted_packets),
            (76, 25)
        );
        assert!(r.stream(1).is_some() && r.stream(3).is_none());
    }

    #[test]
    fn missing_keys_are_117() {
        let bad = [
            r#"{"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[]}"#,
            r#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0}"#,
            r#"{"cpu_util_total":0,"cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[{"id":1}]}"#,
            r#"{"cpu_util_total":"x","cpu_util_user":0,"cpu_util_system":0,"sender_has_retransmits":0,"streams":[]}"#,
            "[]",
        ];
        for b in bad {
            let v: Value = serde_json::from_str(b).unwrap();
            assert_eq!(PeerResults::from_json(&v), Err(IErr::RECV_RESULTS), "{b}");
        }
    }
}
