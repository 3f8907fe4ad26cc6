//! The parameters message (client → server), lenient on input as iperf3 is,
//! strict in validation (as iperf3 master is), exact on output.

use crate::IErr;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    #[default]
    Tcp,
    Udp,
}

/// Who sends: the client (forward), the server (`-R`) or both (`--bidir`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TestMode {
    #[default]
    Forward,
    Reverse,
    Bidir,
}

impl TestMode {
    /// Streams the client creates for `parallel`.
    pub fn stream_count(self, parallel: u32) -> usize {
        let p = parallel as usize;
        if self == TestMode::Bidir { 2 * p } else { p }
    }

    /// Whether the client's stream number `index` (creation order) sends.
    pub fn client_sends(self, index: usize, parallel: u32) -> bool {
        match self {
            TestMode::Forward => true,
            TestMode::Reverse => false,
            TestMode::Bidir => index < parallel as usize,
        }
    }
}

/// Default TCP block size.
pub const TCP_LEN_DEFAULT: u32 = 128 * 1024;
/// Default UDP rate when `-b` is not given (per stream).
pub const UDP_RATE_DEFAULT_BPS: u64 = 1024 * 1024;
/// Largest parameters message a server reads.
pub const PARAMS_MAX_BYTES: usize = 8192;

/// One test's parameters.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Params {
    pub protocol: Protocol,
    pub mode: TestMode,
    pub omit_s: u32,
    /// 0 when the test ends by bytes or blocks.
    pub time_s: u32,
    pub num_bytes: u64,
    pub block_count: u64,
    pub parallel: u32,
    /// Block (TCP write) or datagram size.
    pub len: u32,
    /// Per-stream rate, bit/s; 0 = unlimited.
    pub bandwidth_bps: u64,
    /// Datagrams/blocks per pacing decision (0 = not given).
    pub burst: u32,
    pub window: u32,
    pub mss: u32,
    pub nodelay: bool,
    pub tos: u32,
    pub fq_rate_bps: u64,
    pub congestion: Option<String>,
    pub title: Option<String>,
    pub extra_data: Option<String>,
    pub get_server_output: bool,
    pub udp_counters_64bit: bool,
    pub repeating_payload: bool,
    pub zerocopy: bool,
    pub dont_fragment: bool,
    pub server_affinity: Option<i64>,
    pub client_version: Option<String>,
    /// RSA authentication token (base64), see [`crate::auth`].
    pub authtoken: Option<String>,
    /// `--skip-rx-copy`: receivers discard data without copying it
    /// (MSG_TRUNC).
    pub skip_rx_copy: bool,
    /// `-m`: data connections are Multipath TCP.
    pub mptcp: bool,
    /// `-L`: IPv6 flow label of the client's data connections (0: none).
    pub flowlabel: u32,
}

/// An integer as iperf3 reads it: integer or double, and a 3.12-style
/// unsigned -1 (any value ≥ 2^63) as -1. `None` if absent or not a number.
pub fn json_int(v: &Value) -> Option<i64> {
    if let Some(i) = v.as_i64() {
        return Some(i);
    }
    if let Some(u) = v.as_u64() {
        return Some(if u >= 1 << 63 { -1 } else { u as i64 });
    }
    v.as_f64().filter(|f| f.is_finite()).map(|f| f as i64)
}

fn flag(m: &Map<String, Value>, k: &str) -> bool {
    match m.get(k) {
        Some(Value::Bool(b)) => *b,
        Some(v) => json_int(v).is_some_and(|i| i != 0),
        None => false,
    }
}

fn int(m: &Map<String, Value>, k: &str) -> Option<i64> {
    m.get(k).and_then(json_int)
}

fn string(m: &Map<String, Value>, k: &str) -> Option<String> {
    m.get(k).and_then(Value::as_str).map(str::to_string)
}

fn range(v: Option<i64>, default: i64, lo: i64, hi: i64, err: IErr) -> Result<i64, IErr> {
    let v = v.unwrap_or(default);
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(err)
    }
}

impl Params {
    /// Reads and validates a parameters object. The error is the code a
    /// server answers with (SERVER_ERROR).
    pub fn from_json(v: &Value) -> Result<Params, IErr> {
        let m = v.as_object().ok_or(IErr::RECV_PARAMS)?;
        let protocol = if flag(m, "udp") {
            Protocol::Udp
        } else {
            Protocol::Tcp
        };
        let mode = if flag(m, "bidirectional") {
            TestMode::Bidir
        } else if flag(m, "reverse") {
            TestMode::Reverse
        } else {
            TestMode::Forward
        };
        let nonneg = |k: &str| -> Result<u64, IErr> {
            match int(m, k) {
                None => Ok(0),
                Some(i) if i >= 0 => Ok(i as u64),
                Some(_) => Err(IErr::RECV_PARAMS),
            }
        };
        let len = match protocol {
            Protocol::Tcp => range(
                int(m, "len"),
                TCP_LEN_DEFAULT.into(),
                1,
                1 << 20,
                IErr::BLOCK_SIZE,
            )?,
            Protocol::Udp => range(int(m, "len"), 1460, 16, 65507, IErr::UDP_BLOCK_SIZE)?,
        };
        let burst = match int(m, "burst") {
            None => 0,
            Some(b) if (1..=1000).contains(&b) => b,
            Some(_) => return Err(IErr::BURST),
        };
        Ok(Params {
            protocol,
            mode,
            omit_s: range(int(m, "omit"), 0, 0, 600, IErr::OMIT)? as u32,
            time_s: range(int(m, "time"), 10, 0, 86400, IErr::DURATION)? as u32,
            num_bytes: nonneg("num")?,
            block_count: nonneg("blockcount")?,
            parallel: range(int(m, "parallel"), 1, 1, 128, IErr::NUM_STREAMS)? as u32,
            len: len as u32,
            bandwidth_bps: nonneg("bandwidth")?,
            burst: burst as u32,
            window: range(int(m, "window"), 0, 0, 512 << 20, IErr::BUF_SIZE)? as u32,
            mss: range(int(m, "MSS"), 0, 0, 32767, IErr::MSS)? as u32,
            nodelay: flag(m, "nodelay"),
            tos: range(int(m, "TOS"), 0, 0, 255, IErr::BAD_TOS)? as u32,
            fq_rate_bps: nonneg("fqrate")?,
            congestion: string(m, "congestion"),
            title: string(m, "title"),
            extra_data: string(m, "extra_data"),
            get_server_output: flag(m, "get_server_output"),
            udp_counters_64bit: flag(m, "udp_counters_64bit"),
            repeating_payload: flag(m, "repeating_payload"),
            zerocopy: flag(m, "zerocopy"),
            dont_fragment: flag(m, "dont_fragment"),
            server_affinity: int(m, "server_affinity"),
            client_version: string(m, "client_version"),
            authtoken: string(m, "authtoken"),
            skip_rx_copy: flag(m, "skip_rx_copy"),
            mptcp: flag(m, "mptcp"),
            flowlabel: int(m, "flowlabel")
                .filter(|l| (1..=0xF_FFFF).contains(l))
                .unwrap_or(0) as u32,
        })
    }

    /// The message as an iperf3 client sends it (types as iperf3 sends them).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        match self.protocol {
            Protocol::Tcp => m.insert("tcp".into(), json!(true)),
            Protocol::Udp => m.insert("udp".into(), json!(true)),
        };
        m.insert("omit".into(), json!(self.omit_s));
        if let Some(a) = self.server_affinity {
            m.insert("server_affinity".into(), json!(a));
        }
        m.insert("time".into(), json!(self.time_s));
        m.insert("num".into(), json!(self.num_bytes));
        m.insert("blockcount".into(), json!(self.block_count));
        if self.mss > 0 {
            m.insert("MSS".into(), json!(self.mss));
        }
        if self.nodelay {
            m.insert("nodelay".into(), json!(true));
        }
        m.insert("parallel".into(), json!(self.parallel));
        match self.mode {
            TestMode::Reverse => m.insert("reverse".into(), json!(true)),
            TestMode::Bidir => m.insert("bidirectional".into(), json!(true)),
            TestMode::Forward => None,
        };
        if self.window > 0 {
            m.insert("window".into(), json!(self.window));
        }
        m.insert("len".into(), json!(self.len));
        if self.bandwidth_bps > 0 {
            m.insert("bandwidth".into(), json!(self.bandwidth_bps));
        }
        if self.fq_rate_bps > 0 {
            m.insert("fqrate".into(), json!(self.fq_rate_bps));
        }
        m.insert("pacing_timer".into(), json!(1000));
        if self.burst > 0 {
            m.insert("burst".into(), json!(self.burst));
        }
        if self.tos > 0 {
            m.insert("TOS".into(), json!(self.tos));
        }
        for (k, v) in [
            ("title", &self.title),
            ("extra_data", &self.extra_data),
            ("congestion", &self.congestion),
            ("authtoken", &self.authtoken),
        ] {
            if let Some(s) = v {
                m.insert(k.into(), json!(s));
            }
        }
        for (k, on) in [
            ("get_server_output", self.get_server_output),
            ("udp_counters_64bit", self.udp_counters_64bit),
            ("repeating_payload", self.repeating_payload),
            ("zerocopy", self.zerocopy),
            ("dont_fragment", self.dont_fragment),
            ("skip_rx_copy", self.skip_rx_copy),
        ] {
            if on {
                m.insert(k.into(), json!(1));
            }
        }
        if self.mptcp {
            m.insert("mptcp".into(), json!(true));
        }
        if self.flowlabel > 0 {
            m.insert("flowlabel".into(), json!(self.flowlabel));
        }
        m.insert(
            "client_version".into(),
            json!(self.client_version.clone().unwrap_or_else(|| "3.12".into())),
        );
        Value::Object(m)
    }

    /// Total number of data streams (P, or 2P in bidir).
    pub fn stream_count(&self) -> usize {
        self.mode.stream_count(self.parallel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Params, IErr> {
        Params::from_json(&serde_json::from_str(s).unwrap())
    }

    #[test]
    fn captured_312_messages() {
        let p = parse(r#"{"tcp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":1,"len":131072,"bandwidth":2000000,"pacing_timer":1000,"client_version":"3.12"}"#).unwrap();
        assert_eq!(
            (p.protocol, p.mode, p.time_s, p.len, p.bandwidth_bps),
            (Protocol::Tcp, TestMode::Forward, 2, 131072, 2_000_000)
        );
        let p = parse(r#"{"udp":true,"omit":0,"time":2,"num":0,"blockcount":0,"parallel":1,"reverse":true,"len":200,"bandwidth":100000,"pacing_timer":1000,"client_version":"3.12"}"#).unwrap();
        assert_eq!(
            (p.protocol, p.mode, p.len),
            (Protocol::Udp, TestMode::Reverse, 200)
        );
        let p = parse(r#"{"tcp":true,"omit":1,"server_affinity":0,"time":2,"num":0,"blockcount":0,"MSS":1400,"nodelay":true,"parallel":1,"window":262144,"len":131072,"bandwidth":2000000,"fqrate":10000000,"pacing_timer":1000,"TOS":16,"title":"mytitle","extra_data":"xd","congestion":"cubic","get_server_output":1,"repeating_payload":1,"zerocopy":1,"client_version":"3.12"}"#).unwrap();
        assert_eq!(
            (p.mss, p.nodelay, p.window, p.tos, p.omit_s),
            (1400, true, 262144, 16, 1)
        );
        assert_eq!(p.title.as_deref(), Some("mytitle"));
        assert!(p.get_server_output && p.repeating_payload && p.zerocopy);
        let p = parse(r#"{"udp":true,"time":1.0,"parallel":2,"bidirectional":true,"len":1000,"burst":5,"udp_counters_64bit":1,"dont_fragment":1}"#).unwrap();
        assert_eq!(
            (p.time_s, p.mode, p.stream_count(), p.burst),
            (1, TestMode::Bidir, 4, 5)
        );
        assert!(p.udp_counters_64bit && p.dont_fragment);
    }

    #[test]
    fn validation_codes_match_iperf3_master() {
        let code = |s: &str| parse(s).unwrap_err().0;
        assert_eq!(code(r#"{"tcp":true,"parallel":0}"#), 6);
        assert_eq!(code(r#"{"tcp":true,"parallel":129}"#), 6);
        assert_eq!(code(r#"{"udp":true,"len":5}"#), 20);
        assert_eq!(code(r#"{"udp":true,"len":65508}"#), 20);
        assert_eq!(code(r#"{"tcp":true,"len":0}"#), 7);
        assert_eq!(code(r#"{"tcp":true,"len":1048577}"#), 7);
        assert_eq!(code(r#"{"tcp":true,"burst":0}"#), 15);
        assert_eq!(code(r#"{"tcp":true,"time":-5}"#), 5);
        assert_eq!(code(r#"{"tcp":true,"time":86401}"#), 5);
        assert_eq!(code(r#"{"tcp":true,"omit":601}"#), 12);
        assert_eq!(code(r#"{"tcp":true,"TOS":256}"#), 21);
        assert_eq!(code(r#"{"tcp":true,"MSS":40000}"#), 10);
        assert_eq!(code(r#"{"tcp":true,"window":1000000000}"#), 8);
        assert_eq!(code(r#"{"tcp":true,"num":-1}"#), 114);
        assert_eq!(code(r#"[1,2]"#), 114);
    }

    #[test]
    fn defaults_and_round_trip() {
        let p = parse("{}").unwrap();
        assert_eq!(
            (p.protocol, p.time_s, p.parallel, p.len),
            (Protocol::Tcp, 10, 1, TCP_LEN_DEFAULT)
        );
        let mut q = Params {
            protocol: Protocol::Udp,
            mode: TestMode::Bidir,
            omit_s: 2,
            time_s: 5,
            parallel: 3,
            len: 1400,
            bandwidth_bps: 10_000_000,
            burst: 20,
            tos: 0x28,
            title: Some("t".into()),
            get_server_output: true,
            udp_counters_64bit: true,
            ..Params::default()
        };
        q.client_version = Some("3.12".into());
        let v = q.to_json();
        assert_eq!(v["get_server_output"], 1, "numbers, not booleans");
        assert_eq!(v["udp"], true);
        assert_eq!(Params::from_json(&v).unwrap(), q);
    }

    #[test]
    fn unsigned_minus_one() {
        assert_eq!(
            json_int(&serde_json::json!(18446744073709551615u64)),
            Some(-1)
        );
        assert_eq!(json_int(&serde_json::json!(2.0)), Some(2));
        assert_eq!(json_int(&serde_json::json!("2")), None);
    }
}
