//! The rates, loss and latency of a flow row and of a tagged row (the
//! models' `Flow.Metric` and `Flow.TaggedMetric`), made one way for both:
//! a leaf that `metrics.rs` (the rows) and `tags.rs` (the tagged rows)
//! both take from.

use serde::Serialize;

/// Bits a frame takes on the wire beyond its bytes.
const L1_BITS: f64 = 160.0;

/// One-way latency, nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LatencyMetric {
    pub minimum_ns: f64,
    pub maximum_ns: f64,
    pub average_ns: f64,
}

impl From<(f64, f64, f64)> for LatencyMetric {
    /// From (min, max, mean), as the counts keep it.
    fn from((minimum_ns, maximum_ns, average_ns): (f64, f64, f64)) -> Self {
        LatencyMetric {
            minimum_ns,
            maximum_ns,
            average_ns,
        }
    }
}

/// The models' rates of a flow row and of a tagged row (`Flow.Metric`,
/// `Flow.TaggedMetric`): made by [`Rates::of`] from frames and bits a
/// second, sent and received. A rate is absent when its figure is not
/// known or not asked for ([`Rates::only`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Rates {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_tx_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frames_rx_rate: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_rate_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_rate_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_rate_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_rate_bytes: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_rate_kbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_rate_kbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_rate_mbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_rate_mbps: Option<f64>,
    /// The rate on the wire: 20 bytes (160 bits) of preamble, SFD and gap
    /// a frame beyond the frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_l1_rate_bps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_l1_rate_bps: Option<f64>,
}

impl Rates {
    /// From frames and bits a second sent and received; `tx_bps` none
    /// when the bytes sent are not known (the sent bit rates absent).
    pub fn of(tx_pps: f64, tx_bps: Option<f64>, rx_pps: f64, rx_bps: f64) -> Self {
        Rates {
            frames_tx_rate: Some(tx_pps),
            frames_rx_rate: Some(rx_pps),
            tx_rate_bps: tx_bps,
            rx_rate_bps: Some(rx_bps),
            tx_rate_bytes: tx_bps.map(|b| b / 8.0),
            rx_rate_bytes: Some(rx_bps / 8.0),
            tx_rate_kbps: tx_bps.map(|b| b / 1e3),
            rx_rate_kbps: Some(rx_bps / 1e3),
            tx_rate_mbps: tx_bps.map(|b| b / 1e6),
            rx_rate_mbps: Some(rx_bps / 1e6),
            tx_l1_rate_bps: tx_bps.map(|b| b + tx_pps * L1_BITS),
            rx_l1_rate_bps: Some(rx_bps + rx_pps * L1_BITS),
        }
    }

    /// Only the rates `wants` (by the models' name) keeps.
    pub fn only(self, wants: impl Fn(&str) -> bool) -> Self {
        let keep = |name: &str, v: Option<f64>| v.filter(|_| wants(name));
        Rates {
            frames_tx_rate: keep("frames_tx_rate", self.frames_tx_rate),
            frames_rx_rate: keep("frames_rx_rate", self.frames_rx_rate),
            tx_rate_bps: keep("tx_rate_bps", self.tx_rate_bps),
            rx_rate_bps: keep("rx_rate_bps", self.rx_rate_bps),
            tx_rate_bytes: keep("tx_rate_bytes", self.tx_rate_bytes),
            rx_rate_bytes: keep("rx_rate_bytes", self.rx_rate_bytes),
            tx_rate_kbps: keep("tx_rate_kbps", self.tx_rate_kbps),
            rx_rate_kbps: keep("rx_rate_kbps", self.rx_rate_kbps),
            tx_rate_mbps: keep("tx_rate_mbps", self.tx_rate_mbps),
            rx_rate_mbps: keep("rx_rate_mbps", self.rx_rate_mbps),
            tx_l1_rate_bps: keep("tx_l1_rate_bps", self.tx_l1_rate_bps),
            rx_l1_rate_bps: keep("rx_l1_rate_bps", self.rx_l1_rate_bps),
        }
    }
}

/// The rates a tagged row may be asked for by name (the models'
/// `Flow.TaggedMetrics.Filter.metric_names`, beside the four counters).
pub const RATE_NAMES: [&str; 12] = [
    "frames_tx_rate",
    "frames_rx_rate",
    "tx_l1_rate_bps",
    "rx_l1_rate_bps",
    "tx_rate_bytes",
    "rx_rate_bytes",
    "tx_rate_bps",
    "rx_rate_bps",
    "tx_rate_kbps",
    "rx_rate_kbps",
    "tx_rate_mbps",
    "rx_rate_mbps",
];

/// The model's flow `loss`: the share of sent frames not received,
/// percent (a flow received on several ports can count more than it sent:
/// 0 then).
pub fn loss_pct(tx: u64, rx: u64) -> f64 {
    if tx == 0 {
        0.0
    } else {
        tx.saturating_sub(rx) as f64 * 100.0 / tx as f64
    }
}
