//! `linerate calc`: line-rate arithmetic from the command line.

use crate::output::Console;
use anyhow::{Context, Result, bail};
use clap::{ArgAction, Args};
use linerate_calc::{
    FrameSpec, Header, Imix, L1_OVERHEAD_BYTES, Payload, format_bps, format_count, line_rate,
    parse_bps, parse_pps, rate_at_pps,
};
use std::fmt::Write as _;

/// Line-rate arithmetic: link speed ⇄ packets per second, for a frame size,
/// a payload size or an IMIX.
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  linerate calc --speed 10G --frame 64          # 14,880,952 pps
  linerate calc --speed 10G --udp-payload 100   # 7,530,120 pps
  linerate calc --pps 1M --frame 64             # bits per second at L1 and L2
  linerate calc --speed 100G --imix             # simple IMIX 7:4:1 of 64/594/1518
  linerate calc --speed 25G --imix 64:5,1518:1 --json")]
pub struct CalcArgs {
    /// Link speed: 10M, 1G, 10G, 25g, 100Gbit, 2.5Gbps, or plain bits/s.
    #[arg(long, value_parser = parse_speed)]
    speed: Option<u64>,
    /// Packet rate: 1M, 14.88Mpps, 500k, or a plain number.
    #[arg(long, value_parser = parse_rate)]
    pps: Option<u64>,
    /// Ethernet frame size in bytes, FCS included (64..=9216) [default: 64].
    #[arg(long, group = "size")]
    frame: Option<u64>,
    /// UDP payload size in bytes; headers and FCS are added.
    #[arg(long, group = "size")]
    udp_payload: Option<u64>,
    /// TCP payload size in bytes (20-byte TCP header, no options).
    #[arg(long, group = "size")]
    tcp_payload: Option<u64>,
    /// IP packet size in bytes (IP header included).
    #[arg(long, group = "size")]
    ip_packet: Option<u64>,
    /// Frame-size mix: "simple" (7:4:1 of 64/594/1518, the default) or
    /// SIZE:WEIGHT,... such as 64:7,594:4,1518:1.
    #[arg(long, group = "size", num_args = 0..=1, default_missing_value = "simple",
          value_name = "SPEC")]
    imix: Option<String>,
    /// IPv6 instead of IPv4 (for payload sizes).
    #[arg(long)]
    ipv6: bool,
    /// Add an 802.1Q tag (give twice for QinQ).
    #[arg(long, action = ArgAction::Count)]
    vlan: u8,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_speed(s: &str) -> Result<u64, String> {
    parse_bps(s).map_err(|e| e.to_string())
}

fn parse_rate(s: &str) -> Result<u64, String> {
    parse_pps(s).map_err(|e| e.to_string())
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

fn build_mix(args: &CalcArgs) -> Result<Mix> {
    let ip = if args.ipv6 {
        Header::Ipv6
    } else {
        Header::Ipv4
    };
    if let Some(spec) = &args.imix {
        let imix = Imix::parse(spec).context("--imix")?;
        let parts: Vec<String> = imix
            .entries()
            .iter()
            .map(|e| format!("{}×{}", e.weight, e.frame_bytes))
            .collect();
        let avg = imix.average_frame_bytes();
        return Ok(Mix {
            derivation: format!("IMIX {} B, average {avg:.2} B per frame", parts.join(" + ")),
            label: format!("IMIX frames (average {avg:.2} B)"),
            imix,
            pad_bytes: 0,
        });
    }
    let (payload, what) = match (
        args.frame,
        args.udp_payload,
        args.tcp_payload,
        args.ip_packet,
    ) {
        (_, Some(p), _, _) => (Payload::Udp(p), "UDP payload"),
        (_, _, Some(p), _) => (Payload::Tcp(p), "TCP payload"),
        (_, _, _, Some(p)) => (Payload::IpPacket(p), "IP packet"),
        (f, ..) => (Payload::Frame(f.unwrap_or(64)), "frame"),
    };
    let spec = FrameSpec {
        payload,
        ip,
        vlan_tags: args.vlan,
    };
    let frame = spec.resolve()?;
    let ip_name = if args.ipv6 { "IPv6" } else { "IPv4" };
    let tags = match args.vlan {
        0 => String::new(),
        n => format!(" + {n}×4 802.1Q"),
    };
    let derivation = match payload {
        Payload::Frame(b) => format!("{b}-byte Ethernet frame (FCS included)"),
        Payload::IpPacket(b) => format!("14 Ethernet{tags} + {b} IP packet + 4 FCS"),
        Payload::Udp(b) => {
            let iph = if args.ipv6 { 40 } else { 20 };
            format!("14 Ethernet{tags} + {iph} {ip_name} + 8 UDP + {b} payload + 4 FCS")
        }
        Payload::Tcp(b) => {
            let iph = if args.ipv6 { 40 } else { 20 };
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

fn size_of(p: Payload) -> u64 {
    match p {
        Payload::Frame(b) | Payload::IpPacket(b) | Payload::Udp(b) | Payload::Tcp(b) => b,
    }
}

pub fn run(args: &CalcArgs, c: &Console) -> Result<()> {
    if args.speed.is_none() && args.pps.is_none() {
        bail!(
            "give --speed (e.g. 10G) to get packets per second, --pps (e.g. 1M) to get bits per second, or both"
        );
    }
    if (args.ipv6 || args.vlan > 0) && (args.frame.is_some() || args.imix.is_some()) {
        bail!(
            "--ipv6 and --vlan describe headers around a payload: use them with --udp-payload, --tcp-payload or --ip-packet (a --frame/--imix size already counts every header)"
        );
    }
    let mix = build_mix(args)?;
    let text = report(args, &mix);
    crate::say_raw!(c, "{text}");
    Ok(())
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
    mix: &'a [linerate_calc::ImixEntry],
}

/// The detail lines of a line rate and a rate at --pps, and their figures
/// into the document.
fn details(
    out: &mut String,
    json: &mut CalcDoc<'_>,
    line_rate: Option<&linerate_calc::LineRate>,
    at_pps: Option<&linerate_calc::RateReport>,
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

fn report(args: &CalcArgs, mix: &Mix) -> String {
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
    let line_rate = args.speed.map(|s| line_rate(s, &mix.imix));
    let at_pps = args.pps.map(|p| rate_at_pps(p, &mix.imix));
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
        (None, None) => unreachable!("checked in run"),
    }
    let _ = writeln!(out, "  frame              {}", mix.derivation);
    let _ = writeln!(
        out,
        "  on the wire (L1)   {:.2} B per frame (frame + 20 B preamble, SFD, inter-frame gap)",
        mix.imix.average_frame_bytes() + L1_OVERHEAD_BYTES as f64
    );
    details(&mut out, &mut json, line_rate.as_ref(), at_pps.as_ref());
    if args.json {
        let mut s = serde_json::to_string_pretty(&json).unwrap_or_default();
        s.push('\n');
        s
    } else {
        out
    }
}
