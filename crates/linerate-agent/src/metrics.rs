//! The models' metrics answers, typed: `MetricsResponse` with its
//! `FlowMetric` and `PortMetric` rows (serde derives; 64-bit counters as
//! strings of digits, as the models give uint64 in JSON), made from a
//! flow's counts (`crate::campaign::FlowCounts`).

use crate::campaign::FlowCounts;
use crate::plan::Plan;
pub use crate::rates::{LatencyMetric, RATE_NAMES, Rates};
use crate::tags::TagRequest;
use serde::{Serialize, Serializer};

/// A 64-bit counter as the models write it: a string of digits.
fn digits<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// `transmit` and `capture`: started or stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Started,
    Stopped,
}

impl From<bool> for State {
    fn from(on: bool) -> Self {
        if on { State::Started } else { State::Stopped }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    Up,
    Down,
}

/// The models' `MetricsResponse`: the choice and its rows.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "choice", rename_all = "snake_case")]
pub enum MetricsResponse {
    FlowMetrics { flow_metrics: Vec<FlowMetric> },
    PortMetrics { port_metrics: Vec<PortMetric> },
}

#[derive(Debug, Clone, Serialize)]
pub struct FlowMetric {
    pub name: String,
    pub port_tx: String,
    /// The first receive port.
    pub port_rx: String,
    pub transmit: State,
    #[serde(serialize_with = "digits")]
    pub frames_tx: u64,
    #[serde(serialize_with = "digits")]
    pub frames_rx: u64,
    #[serde(serialize_with = "digits")]
    pub bytes_tx: u64,
    #[serde(serialize_with = "digits")]
    pub bytes_rx: u64,
    #[serde(flatten)]
    pub rates: Rates,
    /// Percent of the frames sent that did not arrive.
    pub loss: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyMetric>,
    /// Per value of its `metric_tags` (`crate::tags::rows`), when it has
    /// some and the request asks for them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tagged_metrics: Vec<crate::tags::TaggedMetric>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PortMetric {
    pub name: String,
    pub location: String,
    /// The interface's state (none for a port on a peer: its link is the
    /// peer's to tell).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<Link>,
    pub capture: State,
    pub transmit: State,
    #[serde(serialize_with = "digits")]
    pub frames_tx: u64,
    #[serde(serialize_with = "digits")]
    pub frames_rx: u64,
    #[serde(serialize_with = "digits")]
    pub bytes_tx: u64,
    #[serde(serialize_with = "digits")]
    pub bytes_rx: u64,
    pub frames_tx_rate: f64,
    pub frames_rx_rate: f64,
    pub bytes_tx_rate: f64,
    pub bytes_rx_rate: f64,
}

impl FlowMetric {
    /// Flow `i` of `plan` with its counts `c` and, when it has
    /// `metric_tags`, its rows per tag values as `req` asks
    /// (`crate::tags::rows`: their rates, loss and latency made by the
    /// same [`Rates::of`], `loss_pct` and [`LatencyMetric`] as this row's).
    pub fn with_tags(plan: &Plan, i: usize, c: &FlowCounts, req: &TagRequest) -> Self {
        let mut m = Self::of(plan, i, c);
        let f = &plan.flows[i];
        if let Some(t) = &f.tags {
            m.tagged_metrics = crate::tags::rows(t, &c.tag_counts(f.latency), req);
        }
        m
    }

    /// Flow `i` of `plan` with its counts `c`.
    pub fn of(plan: &Plan, i: usize, c: &FlowCounts) -> Self {
        let f = &plan.flows[i];
        let rx_pps: f64 = c.rx_pps.iter().sum();
        let rx_bps: f64 = c.rx_bps.iter().sum();
        let latency = c.latency.filter(|_| f.latency).map(LatencyMetric::from);
        FlowMetric {
            name: f.name.clone(),
            port_tx: plan.ports[f.tx].name.clone(),
            port_rx: f
                .rx
                .first()
                .map(|&r| plan.ports[r].name.clone())
                .unwrap_or_default(),
            transmit: c.running.into(),
            frames_tx: c.tx_packets,
            frames_rx: c.rx_packets(),
            bytes_tx: c.tx_bytes,
            bytes_rx: c.rx_bytes(),
            rates: Rates::of(c.tx_pps, Some(c.tx_bps), rx_pps, rx_bps),
            loss: crate::rates::loss_pct(c.tx_packets, c.rx_packets()),
            latency,
            tagged_metrics: Vec::new(),
        }
    }
}

impl PortMetric {
    /// Port `p` of `plan`: the sums of its flows' counts (`snaps`, one per
    /// flow), what was sent on it and what arrived on it.
    pub fn of(plan: &Plan, p: usize, snaps: &[FlowCounts], capture: bool) -> Self {
        let port = &plan.ports[p];
        let mut m = PortMetric {
            name: port.name.clone(),
            location: port.location.clone(),
            link: None,
            capture: capture.into(),
            transmit: State::Stopped,
            frames_tx: 0,
            frames_rx: 0,
            bytes_tx: 0,
            bytes_rx: 0,
            frames_tx_rate: 0.0,
            frames_rx_rate: 0.0,
            bytes_tx_rate: 0.0,
            bytes_rx_rate: 0.0,
        };
        for (f, c) in plan.flows.iter().zip(snaps) {
            if f.tx == p {
                m.frames_tx += c.tx_packets;
                m.bytes_tx += c.tx_bytes;
                m.frames_tx_rate += c.tx_pps;
                m.bytes_tx_rate += c.tx_bps / 8.0;
                if c.running {
                    m.transmit = State::Started;
                }
            }
            for (k, &r) in f.rx.iter().enumerate() {
                if r == p {
                    m.frames_rx += c.rx.get(k).map_or(0, |x| x.0);
                    m.bytes_rx += c.rx.get(k).map_or(0, |x| x.1);
                    m.frames_rx_rate += c.rx_pps.get(k).copied().unwrap_or(0.0);
                    m.bytes_rx_rate += c.rx_bps.get(k).copied().unwrap_or(0.0) / 8.0;
                }
            }
        }
        if port.remote.is_none() {
            let up = linerate_backend::iface::is_up(&port.iface).unwrap_or(false);
            m.link = Some(if up { Link::Up } else { Link::Down });
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counters_are_digits_and_the_choice_tags_the_answer() {
        let r = MetricsResponse::PortMetrics {
            port_metrics: vec![PortMetric {
                name: "p".into(),
                location: "x".into(),
                link: None,
                capture: State::Started,
                transmit: State::Stopped,
                frames_tx: u64::MAX,
                frames_rx: 1,
                bytes_tx: 2,
                bytes_rx: 3,
                frames_tx_rate: 0.5,
                frames_rx_rate: 0.0,
                bytes_tx_rate: 0.0,
                bytes_rx_rate: 0.0,
            }],
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["choice"], "port_metrics");
        let m = &v["port_metrics"][0];
        assert_eq!(m["frames_tx"], json!("18446744073709551615"));
        assert_eq!(m["capture"], "started");
        assert_eq!(m["transmit"], "stopped");
        assert!(m.get("link").is_none());
        assert_eq!(m["frames_tx_rate"], 0.5);
    }
}
