//! `linerate calc` through the real binary: every option and every error.

use std::process::{Command, Output};

fn calc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_linerate"))
        .arg("calc")
        .args(args)
        .output()
        .expect("run linerate")
}

fn ok(args: &[&str]) -> String {
    let out = calc(args);
    assert!(
        out.status.success(),
        "linerate calc {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn headline(args: &[&str]) -> String {
    ok(args).lines().next().unwrap().to_string()
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.push("--json");
    serde_json::from_str(&ok(&a)).expect("valid JSON")
}

fn fails(args: &[&str], needle: &str) {
    let out = calc(args);
    assert!(!out.status.success(), "linerate calc {args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(needle),
        "stderr of {args:?} lacks {needle:?}: {err}"
    );
}

#[test]
fn the_three_required_figures() {
    assert!(headline(&["--speed", "10G", "--frame", "64"]).starts_with("14,880,952 pps"));
    assert!(headline(&["--speed", "100M", "--frame", "64"]).starts_with("148,809 pps"));
    assert!(headline(&["--speed", "10G", "--udp-payload", "100"]).starts_with("7,530,120 pps"));
}

#[test]
fn speed_spellings() {
    for s in ["10G", "10g", "10Gbit", "10Gbps", "10000000000", "10000M"] {
        assert_eq!(json(&["--speed", s])["pps_max"], 14_880_952, "{s}");
    }
    assert_eq!(json(&["--speed", "25g"])["pps_max"], 37_202_380);
    assert_eq!(json(&["--speed", "100Gbit"])["pps_max"], 148_809_523);
    assert_eq!(json(&["--speed", "800G"])["pps_max"], 1_190_476_190u64);
}

#[test]
fn default_frame_is_64() {
    assert_eq!(json(&["--speed", "1G"])["frame"]["bytes_avg"], 64.0);
}

#[test]
fn pps_to_bits() {
    let v = json(&["--pps", "1M", "--frame", "64"]);
    assert_eq!(v["bps_l1"], 672_000_000.0);
    assert_eq!(v["bps_l2"], 512_000_000.0);
    assert!(headline(&["--pps", "1M", "--frame", "64"]).starts_with("672.000 Mbit/s at L1"));
}

#[test]
fn both_directions_give_utilization() {
    let v = json(&["--speed", "10G", "--pps", "20M"]);
    assert_eq!(v["fits"], false);
    assert!((v["utilization_pct"].as_f64().unwrap() - 134.4).abs() < 1e-9);
    let v = json(&["--speed", "10G", "--pps", "14880952"]);
    assert_eq!(v["fits"], true);
    assert!(headline(&["--speed", "10G", "--pps", "20M"]).contains("does NOT fit"));
}

#[test]
fn payload_layers_ipv6_and_vlan() {
    let bytes = |a: &[&str]| json(a)["frame"]["bytes_avg"].as_f64().unwrap();
    assert_eq!(bytes(&["--speed", "1G", "--udp-payload", "100"]), 146.0);
    assert_eq!(
        bytes(&["--speed", "1G", "--udp-payload", "100", "--ipv6"]),
        166.0
    );
    assert_eq!(
        bytes(&["--speed", "1G", "--udp-payload", "100", "--vlan"]),
        150.0
    );
    assert_eq!(
        bytes(&["--speed", "1G", "--udp-payload", "100", "--vlan", "--vlan"]),
        154.0
    );
    assert_eq!(bytes(&["--speed", "1G", "--tcp-payload", "1460"]), 1518.0);
    assert_eq!(bytes(&["--speed", "1G", "--ip-packet", "1500"]), 1518.0);
    let padded = json(&["--speed", "1G", "--udp-payload", "1"]);
    assert_eq!(padded["frame"]["bytes_avg"], 64.0);
    assert_eq!(padded["frame"]["pad_bytes"], 17);
}

#[test]
fn imix_default_and_custom() {
    let v = json(&["--speed", "100G", "--imix"]);
    assert_eq!(v["pps_max"], 32_736_796);
    assert_eq!(v["frame"]["mix"].as_array().unwrap().len(), 3);
    assert!(headline(&["--speed", "100G", "--imix"]).contains("IMIX"));
    let v = json(&["--speed", "1G", "--imix", "64:5,1518:1"]);
    assert_eq!(v["pps_max"], 383_043);
    let v = json(&["--pps", "1M", "--imix", "simple"]);
    assert!((v["bps_l2"].as_f64().unwrap() - 1e6 * 4342.0 / 12.0 * 8.0).abs() < 1.0);
}

#[test]
fn errors_are_clear() {
    fails(&["--frame", "64"], "give --speed");
    fails(
        &["--speed", "10G", "--frame", "63"],
        "below Ethernet's minimum",
    );
    fails(&["--speed", "10G", "--frame", "9217"], "jumbo maximum");
    fails(
        &["--speed", "10G", "--udp-payload", "9200"],
        "9200-byte UDP payload",
    );
    fails(&["--speed", "10Q"], "unknown unit");
    fails(&["--speed", "10GB"], "in bytes");
    fails(&["--speed", "0"], "greater than zero");
    fails(&["--pps", "lots"], "not a number");
    fails(&["--speed", "1G", "--imix", "64:0"], "weight 0");
    fails(&["--speed", "1G", "--imix", "30:1"], "outside");
    fails(
        &["--speed", "1G", "--frame", "64", "--udp-payload", "10"],
        "cannot be used with",
    );
    fails(
        &["--speed", "1G", "--frame", "128", "--ipv6"],
        "--ipv6 and --vlan",
    );
}
