//! `linerate doctor` for real, inside the rig's namespaces: it says what it
//! could and could not inspect on a veth, and its findings follow settings.

mod support;

use linerate_lab::Rig;
use linerate_testkit::{require_program, require_root, should_skip};
use serde_json::Value;

fn doctor(rig: &Rig, host: usize) -> Value {
    let out = rig
        .command(host, env!("CARGO_BIN_EXE_linerate"))
        .args(["doctor", "--iface", "veth0", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    support::json(&out.stdout)
}

fn ids(v: &Value) -> Vec<String> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn unchecked(v: &Value) -> Vec<String> {
    v["could_not_check"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["check"].as_str().unwrap().to_string())
        .collect()
}

fn sh(rig: &Rig, host: usize, cmd: &str) {
    let st = rig.command(host, "sh").args(["-c", cmd]).status().unwrap();
    assert!(st.success(), "{cmd}");
}

#[test]
fn doctor_on_a_veth_follows_gro_and_rp_filter() {
    if should_skip(
        "doctor_on_a_veth_follows_gro_and_rp_filter",
        &[
            require_root(),
            require_program("ip"),
            require_program("ethtool"),
        ],
    ) {
        return;
    }
    let rig = Rig::pair().unwrap();
    sh(
        &rig,
        0,
        "ethtool -K veth0 gro off && sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.veth0.rp_filter=0",
    );
    let before = doctor(&rig, 0);
    assert!(
        !ids(&before).contains(&"nic.gro".to_string()),
        "{:?}",
        ids(&before)
    );
    assert!(!ids(&before).contains(&"kernel.rp_filter".to_string()));
    // What a veth cannot tell, it says it could not check.
    let u = unchecked(&before);
    assert!(
        u.contains(&"nic.irq".to_string()) && u.contains(&"nic.rss_table".to_string()),
        "{u:?}"
    );
    let caps = before["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "nic.capabilities")
        .unwrap();
    assert_eq!(
        caps["title"],
        "veth0 (driver veth): native XDP, AF_XDP copy mode only"
    );

    sh(
        &rig,
        0,
        "ethtool -K veth0 gro on && sysctl -qw net.ipv4.conf.veth0.rp_filter=1",
    );
    let after = doctor(&rig, 0);
    assert!(
        ids(&after).contains(&"nic.gro".to_string()),
        "{:?}",
        ids(&after)
    );
    assert!(
        ids(&after).contains(&"kernel.rp_filter".to_string()),
        "{:?}",
        ids(&after)
    );
    // The other host is untouched.
    assert!(!ids(&doctor(&rig, 1)).contains(&"kernel.rp_filter".to_string()));
}
