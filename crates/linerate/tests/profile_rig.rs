//! `blast --profile` and `sink --profile` on the namespace rig: two
//! streams (UDP with a port range, TCP SYNs with Poisson gaps) over a veth
//! pair, each counted exactly by the sender and, per stream, by the sink.

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};

const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// The profile, sent from host 0 to host 1 (`dst_mac`).
fn profile(dst_mac: &str) -> String {
    format!(
        r#"
seed = 3
[[streams]]
name = "udp"
rate = "30000pps"
count = 3000
[streams.eth]
dst = "{dst_mac}"
[streams.ipv4]
src = "198.18.0.1"
dst = "198.18.0.2"
[streams.udp]
src = {{ from = 1000, to = 1007 }}

[[streams]]
name = "syn"
id = 7
rate = "10000pps"
count = 1000
pattern = "poisson"
start_delay = "20ms"
[streams.eth]
dst = "{dst_mac}"
[streams.ipv4]
src = "198.18.0.1"
dst = "198.18.0.2"
[streams.tcp]
flags = "S"
src = {{ from = 1024, to = 65535, mode = "random" }}
dst = 443
"#
    )
}

#[test]
fn a_profile_over_a_veth_pair_is_counted_per_stream_at_both_ends() {
    if should_skip(
        "a_profile_over_a_veth_pair_is_counted_per_stream_at_both_ends",
        &[require_root(), require_program("ip")],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two.toml");
    std::fs::write(&path, profile(&rig.host(1).mac)).unwrap();
    let file = path.to_str().unwrap();
    // af_packet: the sink takes the TCP stream too (AF_XDP's default
    // filter takes UDP probes only).
    let (sink, blast) = support::sink_while(
        rig.command(1, BIN).args([
            "sink",
            "--iface",
            "veth0",
            "--backend",
            "af_packet",
            "--duration",
            "15",
            "--count",
            "4000",
            "--profile",
            file,
            "--json",
        ]),
        || {
            rig.command(0, BIN)
                .args([
                    "blast",
                    "--iface",
                    "veth0",
                    "--profile",
                    file,
                    "-t",
                    "10",
                    "--json",
                ])
                .output()
                .unwrap()
        },
    );
    assert!(
        blast.status.success(),
        "{}",
        String::from_utf8_lossy(&blast.stderr)
    );
    assert!(
        sink.status.success(),
        "{}",
        String::from_utf8_lossy(&sink.stderr)
    );
    let b = support::json(&blast.stdout);
    let sent: Vec<_> = (b["streams"].as_array().unwrap().iter())
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_string(),
                s["id"].as_u64().unwrap(),
                s["packets"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sent,
        [("udp".to_string(), 0, 3000), ("syn".to_string(), 7, 1000)],
        "{b}"
    );
    assert_eq!(b["packets"], 4000);
    assert_eq!(b["end_markers"]["frames"], 6, "three markers a stream");
    let s = support::json(&sink.stdout);
    let got: Vec<_> = (s["streams"].as_array().unwrap().iter())
        .map(|x| {
            (
                x["name"].as_str().unwrap().to_string(),
                x["packets"].as_u64().unwrap(),
                x["lost"].as_u64().unwrap(),
                x["sent_by_marker"].as_u64(),
                x["duplicates"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("udp".to_string(), 3000, 0, Some(3000), 0),
            ("syn".to_string(), 1000, 0, Some(1000), 0)
        ],
        "{s}"
    );
    for x in s["streams"].as_array().unwrap() {
        assert!(x["latency_ns"]["p50"].as_f64().unwrap() > 0.0, "{x}");
        assert!(x["jitter_ns"].as_f64().is_some(), "{x}");
    }
}

/// No root needed: the profile is read and checked before any port opens.
#[test]
fn a_wrong_field_fails_the_run_with_its_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    let text = profile("02:00:00:00:00:0b").replace("dst = 443", "dst = 65536");
    std::fs::write(&path, text).unwrap();
    let file = path.to_str().unwrap();
    for args in [
        vec!["blast", "--iface", "lo", "--profile", file],
        vec!["sink", "--iface", "lo", "--profile", file],
    ] {
        let out = support::linerate().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "linerate: error: {file}:30: field 'streams[1].tcp.dst': 65536 is not a port (0..65535)\n"
            ),
            "{args:?}"
        );
    }
}
