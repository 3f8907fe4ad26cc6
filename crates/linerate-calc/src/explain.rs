//! `linerate calc`'s answer: a frame size (or a mix) and a link speed
//! and/or a packet rate, explained line by line, or as one JSON document.

use crate::{
    FrameError, FrameSpec, Header, Imix, ImixEntry, ImixError, L1_OVERHEAD_BYTES, LineRate,
    Payload, RateReport, format_bps, format_count, line_rate, rate_at_pps,
};
use std::fmt::Write as _;

/// What `calc` is asked: a speed, a rate or both, for frames of one size
/// (from a payload, with its headers) or a mix.
#[derive(Debug, Clone, PartialEq)]
pub struct Query<'a> {
    pub speed_bps: Option<u64>,
    pub pps: Option<u64>,
    /// None: 64-byte frames (and --ipv6/--vlan, which say nothing of a
    /// frame's size, are let be).
    pub size: Option<Size<'a>>,
    /// IPv6 instead of IPv4 (for payload sizes).
    pub ipv6: bool,
    /// 802.1Q tags (for payload sizes).
    pub vlan_tags: u8,
}

/// The frames counted: one size (a frame, or a payload with its headers)
/// or an IMIX spec ("simple" or SIZE:WEIGHT,...).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Size<'a> {
    Payload(Payload),
    Imix(&'a str),
}

impl<'a> Size<'a> {
    /// The size `calc`'s flags give (they exclude one another): `--imix`,
    /// `--udp-payload`, `--tcp-payload`, `--ip-packet`, `--frame`; none:
    /// the default.
    pub fn from_flags(
        imix: Option<&'a str>,
        [udp, tcp, ip, frame]: [Option<u64>; 4],
    ) -> Option<Size<'a>> {
        match (imix, udp, tcp, ip) {
            (Some(spec), ..) => Some(Size::Imix(spec)),
            (_, Some(p), _, _) => Some(Size::Payload(Payload::Udp(p))),
            (_, _, Some(p), _) => Some(Size::Payload(Payload::Tcp(p))),
            (_, _, _, Some(p)) => Some(Size::Payload(Payload::IpPacket(p))),
            _ => frame.map(|f| Size::Payload(Payload::Frame(f))),
        }
    }
}

/// Why a query has no answer.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error(
        "give --speed (e.g. 10G) to get packets per second, --pps (e.g. 1M) to get bits per second, or both"
    )]
    NothingAsked,
    #[error(
        "--ipv6 and --vlan describe headers around a payload: use them with --udp-payload, --tcp-payload or --ip-packet (a --frame/--imix size already counts every header)"
    )]
    HeadersAroundAFrame,
    /// (Said with its cause in one line: not a source.)
    #[error("--imix: {0}")]
    Imix(ImixError),
    #[error(transparent)]
    Frame(#[from] FrameError),
}

/// The frames being counted, and how we got there.
struct Mix {
    imix: Imix,
    /// One line explaining where the frame size came from.
    derivation: String,
    /// "64-byte frames" or "IMIX (average 361.83 B)".
    label: String,
    pad_bytes: u64,
}

/// `q` answered: the text, or with `json` the document (a line each).
pub fn explain(q: &Query<'_>, json: bool) -> Result<String, QueryError> {
    if q.speed_bps.is_none() && q.pps.is_none() {
        return Err(QueryError::NothingAsked);
    }
    let frame_given = matches!(
        q.size,
        Some(Size::Imix(_) | Size::Payload(Payload::Frame(_)))
    );
    if (q.ipv6 || q.vlan_tags > 0) && frame_given {
        return Err(QueryError::HeadersAroundAFrame);
    }
    let mix = build_mix(q)?;
    Ok(report(q, &mix, json))
}

fn build_mix(q: &Query<'_>) -> Result<Mix, QueryError> {
    let payload = match q.size {
        Some(Size::Imix(spec)) => return imix_mix(spec),
        Some(Size::Payload(p)) => p,
        None => Payload::Frame(64),
    };
    let what = match payload {
        Payload::Udp(_) => "UDP payload",
        Payload::Tcp(_) => "TCP payload",
        Payload::IpPacket(_) => "IP packet",
        Payload::Frame(_) => "frame",
    };
    let spec = FrameSpec {
        payload,
        ip: if q.ipv6 { Header::Ipv6 } else { Header::Ipv4 },
        vlan_tags: q.vlan_tags,
    };
    let frame = spec.resolve()?;
    let ip_name = if q.ipv6 { "IPv6" } else { "IPv4" };
    let iph = if q.ipv6 { 40 } else { 20 };
    let tags = match q.vlan_tags {
        0 => String::new(),
        n => format!(" + {n}×4 802.1Q"),
    };
    let derivation = match payload {
        Payload::Frame(b) => format!("{b}-byte Ethernet frame (FCS included)"),
        Payload::IpPacket(b) => format!("14 Ethernet{tags} + {b} IP packet + 4 FCS"),
        Payload::Udp(b) => {
            format!("14 Ethernet{tags} + {iph} {ip_name} + 8 UDP + {b} payload + 4 FCS")
        }
        Payload::Tcp(b) => {
            format!("14 Ethernet{tags} + {iph} {ip_name} + 20 TCP + {b} payload + 4 FCS")
        }
    };
    let derivation = if frame.pad_bytes > 0 {
        format!(
            "{derivation}, padded by {} B to {} B",
            frame.pad_bytes, frame.bytes
        )
    } else {
        derivation
    };
    let label = match payload {
        Payload::Frame(_) => format!("{}-byte frames", frame.bytes),
        _ => format!("{}-byte frames ({what} {})", frame.bytes, size_of(payload)),
    };
    Ok(Mix {
        imix: Imix::single(frame.bytes),
        derivation,
        label,
        pad_bytes: frame.pad_bytes,
    })
}

fn imix_mix(spec: &str) -> Result<Mix, QueryError> {
    let imix = Imix::parse(spec).map_err(QueryError::Imix)?;
    let parts: Vec<String> = (imix.entries().iter())
        .map(|e| format!("{}×{}", e.weight, e.frame_bytes))
        .collect();
    let avg = imix.average_frame_bytes();
    Ok(Mix {
        derivation: format!("IMIX {} B, average {avg:.2} B per frame", parts.join(" + ")),
        label: format!("IMIX frames (average {avg:.2} B)"),
        imix,
        pad_bytes: 0,
    })
}

fn size_of(p: Payload) -> u64 {
    match p {
        Payload::Frame(b) | Payload::IpPacket(b) | Payload::Udp(b) | Payload::Tcp(b) => b,
    }
}
/// `calc --json`: the frame, then what was asked (keys in this order).
#[derive(Debug, Default, serde::Serialize)]
struct CalcDoc<'a> {
    frame: FrameDoc<'a>,
    l1_overhead_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    utilization_pct: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fits: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    speed_bps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pps_max: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bps_l2_max: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frame_time_ns: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bps_l1: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bps_l2: Option<f64>,
}

#[derive(Debug, Default, serde::Serialize)]
struct FrameDoc<'a> {
    bytes_avg: f64,
    wire_bytes_avg: f64,
    pad_bytes: u64,
    derivation: &'a str,
    mix: &'a [ImixEntry],
}

/// The detail lines of a line rate and a rate at --pps, and their figures
/// into the document.
fn details(
    out: &mut String,
    json: &mut CalcDoc<'_>,
    line_rate: Option<&LineRate>,
    at_pps: Option<&RateReport>,
) {
    if let Some(lr) = line_rate {
        let _ = writeln!(out, "  line rate          {} pps", format_count(lr.pps_max));
        let _ = writeln!(
            out,
            "  L2 at line rate    {} (frames incl. FCS)",
            format_bps(lr.bps_l2_max)
        );
        let _ = writeln!(out, "  time per frame     {:.3} ns", lr.frame_time_ns);
        json.speed_bps = Some(lr.speed_bps);
        json.pps_max = Some(lr.pps_max);
        json.bps_l2_max = Some(lr.bps_l2_max);
        json.frame_time_ns = Some(lr.frame_time_ns);
    }
    if let Some(r) = at_pps {
        let _ = writeln!(
            out,
            "  L1 at {} pps   {}",
            format_count(r.pps),
            format_bps(r.bps_l1)
        );
        let _ = writeln!(
            out,
            "  L2 at {} pps   {}",
            format_count(r.pps),
            format_bps(r.bps_l2)
        );
        json.pps = Some(r.pps);
        json.bps_l1 = Some(r.bps_l1);
        json.bps_l2 = Some(r.bps_l2);
    }
}

fn report(q: &Query<'_>, mix: &Mix, json_wanted: bool) -> String {
    let mut json = CalcDoc {
        frame: FrameDoc {
            bytes_avg: mix.imix.average_frame_bytes(),
            wire_bytes_avg: mix.imix.average_frame_bytes() + L1_OVERHEAD_BYTES as f64,
            pad_bytes: mix.pad_bytes,
            derivation: &mix.derivation,
            mix: mix.imix.entries(),
        },
        l1_overhead_bytes: L1_OVERHEAD_BYTES,
        ..CalcDoc::default()
    };
    let mut out = String::new();
    let line_rate = q.speed_bps.map(|s| line_rate(s, &mix.imix));
    let at_pps = q.pps.map(|p| rate_at_pps(p, &mix.imix));
    match (&line_rate, &at_pps) {
        (Some(lr), None) => {
            let _ = writeln!(
                out,
                "{} pps at {} with {} (most frames per second the link carries)",
                format_count(lr.pps_max),
                format_bps(lr.speed_bps as f64),
                mix.label
            );
        }
        (None, Some(r)) => {
            let _ = writeln!(
                out,
                "{} at L1 for {} pps of {} (L2: {})",
                format_bps(r.bps_l1),
                format_count(r.pps),
                mix.label,
                format_bps(r.bps_l2)
            );
        }
        (Some(lr), Some(r)) => {
            let util = r.bps_l1 / lr.speed_bps as f64 * 100.0;
            let verdict = if r.pps <= lr.pps_max {
                "fits"
            } else {
                "does NOT fit"
            };
            let _ = writeln!(
                out,
                "{util:.2}% of {}: {} pps of {} {verdict} (needs {} at L1, line rate is {} pps)",
                format_bps(lr.speed_bps as f64),
                format_count(r.pps),
                mix.label,
                format_bps(r.bps_l1),
                format_count(lr.pps_max)
            );
            json.utilization_pct = Some(util);
            json.fits = Some(r.pps <= lr.pps_max);
        }
        // Refused by `explain`.
        (None, None) => {}
    }
    let _ = writeln!(out, "  frame              {}", mix.derivation);
    let _ = writeln!(
        out,
        "  on the wire (L1)   {:.2} B per frame (frame + 20 B preamble, SFD, inter-frame gap)",
        mix.imix.average_frame_bytes() + L1_OVERHEAD_BYTES as f64
    );
    details(&mut out, &mut json, line_rate.as_ref(), at_pps.as_ref());
    if json_wanted {
        let mut s = serde_json::to_string_pretty(&json).unwrap_or_default();
        s.push('\n');
        s
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(speed_bps: Option<u64>, pps: Option<u64>, size: Size<'_>) -> Query<'_> {
        Query {
            speed_bps,
            pps,
            size: Some(size),
            ipv6: false,
            vlan_tags: 0,
        }
    }

    #[test]
    fn a_speed_gives_the_line_rate_with_its_derivation() {
        let text = explain(
            &q(Some(10_000_000_000), None, Size::Payload(Payload::Udp(100))),
            false,
        )
        .unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next().unwrap(),
            "7,530,120 pps at 10.000 Gbit/s with 146-byte frames (UDP payload 100) (most frames per second the link carries)"
        );
        assert_eq!(
            lines.next().unwrap(),
            "  frame              14 Ethernet + 20 IPv4 + 8 UDP + 100 payload + 4 FCS"
        );
    }

    #[test]
    fn speed_and_rate_say_whether_it_fits() {
        let doc = explain(
            &q(
                Some(10_000_000_000),
                Some(20_000_000),
                Size::Payload(Payload::Frame(64)),
            ),
            true,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
        assert_eq!(v["fits"], false);
        assert_eq!(v["pps_max"], 14_880_952);
        assert_eq!(v["bps_l1"], 13_440_000_000.0);
        assert_eq!(
            v["frame"]["derivation"],
            "64-byte Ethernet frame (FCS included)"
        );
        let keys: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("  \""))
            .map(|l| &l[..l.find('"').unwrap()])
            .collect();
        assert_eq!(
            keys,
            [
                "frame",
                "l1_overhead_bytes",
                "utilization_pct",
                "fits",
                "speed_bps",
                "pps_max",
                "bps_l2_max",
                "frame_time_ns",
                "pps",
                "bps_l1",
                "bps_l2"
            ]
        );
    }

    #[test]
    fn an_imix_is_averaged() {
        let text = explain(&q(None, Some(1_000_000), Size::Imix("64:1,1518:1")), false).unwrap();
        assert!(
            text.contains("  frame              IMIX 1×64 + 1×1518 B, average 791.00 B per frame"),
            "{text}"
        );
    }

    #[test]
    fn bad_queries_are_typed_errors() {
        let e = explain(&q(None, None, Size::Payload(Payload::Frame(64))), false);
        assert!(matches!(e, Err(QueryError::NothingAsked)));
        let mut v6 = q(Some(1), None, Size::Payload(Payload::Frame(64)));
        v6.ipv6 = true;
        assert!(matches!(
            explain(&v6, false),
            Err(QueryError::HeadersAroundAFrame)
        ));
        // No size at all: 64-byte frames, the headers let be.
        v6.size = None;
        assert!(explain(&v6, false).unwrap().starts_with("0 pps at"));
        let e = explain(&q(Some(1), None, Size::Imix("64:0")), false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--imix: weight 0 for frame size 64: leave the size out instead"
        );
        let e = explain(
            &q(Some(1), None, Size::Payload(Payload::Frame(10_000))),
            false,
        );
        assert!(matches!(e, Err(QueryError::Frame(_))));
    }
}
