//! `linerate calc`: line-rate arithmetic from the command line.

use crate::output::Console;
use anyhow::Result;
use clap::{ArgAction, Args};
use linerate_calc::{Query, Size, parse_bps, parse_pps};

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

/// Runs `calc`: the answer (`linerate_calc::explain`) printed.
pub fn run(args: &CalcArgs, c: &Console) -> Result<()> {
    let sizes = [
        args.udp_payload,
        args.tcp_payload,
        args.ip_packet,
        args.frame,
    ];
    let size = Size::from_flags(args.imix.as_deref(), sizes);
    let query = Query {
        speed_bps: args.speed,
        pps: args.pps,
        size,
        ipv6: args.ipv6,
        vlan_tags: args.vlan,
    };
    let text = linerate_calc::explain(&query, args.json)?;
    crate::say_raw!(c, "{text}");
    Ok(())
}
