//! The device under test (`linerate lab up --topology dut`), the skip rule,
//! and one test at a time.

use crate::support;
use linerate_testkit::{require_program, require_root, should_skip};
use std::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// `linerate lab up --topology dut` under a prefix of its own: gen (ga
/// 198.18.0.1, gb 198.18.1.2) <-> dut (da 198.18.0.2, db 198.18.1.1),
/// routing with TBF on db, or `linerate fwd` da -> db. `lab down` on drop
/// (a killed test's namespaces are swept by the next rig: `lrt-<pid>-`).
pub struct DutLab {
    pub prefix: String,
    pub gen_ns: String,
    pub dut_ns: String,
}

pub fn lab(args: &[&str]) -> String {
    let o = Command::new(BIN).arg("lab").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "lab {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

impl DutLab {
    /// The kernel routes, TBF at `rate` on db with a small queue: a rate
    /// above TBF's loses frames within a one-second trial; a bucket of ten
    /// full frames, so the sender's pacing jitter is not taken for the
    /// device's limit.
    pub fn new(tag: &str, rate: &str) -> DutLab {
        Self::up(
            tag,
            &[
                "--dut-rate",
                rate,
                "--dut-limit",
                "3000",
                "--dut-burst",
                "15000",
            ],
        )
    }

    pub fn up(tag: &str, extra: &[&str]) -> DutLab {
        let prefix = format!("lrt-{}-{tag}", std::process::id());
        let lab_ = DutLab {
            gen_ns: format!("{prefix}-gen"),
            dut_ns: format!("{prefix}-dut"),
            prefix,
        };
        let text = lab(&[
            &["up", "--topology", "dut", "--prefix", &lab_.prefix][..],
            extra,
        ]
        .concat());
        assert!(text.contains(&lab_.gen_ns), "{text}");
        lab_
    }

    pub fn mac(&self, ns: &str, dev: &str) -> String {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "cat",
                &format!("/sys/class/net/{dev}/address"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// linerate in the generator namespace, -J, its document.
    pub fn gen_json(&self, args: &[&str]) -> serde_json::Value {
        support::json_ok(
            Command::new("ip")
                .args(["netns", "exec", &self.gen_ns, BIN])
                .args(args),
        )
    }

    pub fn dut_mac(&self) -> String {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.dut_ns,
                "cat",
                "/sys/class/net/da/address",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    pub fn rfc2544(&self, args: &[&str]) -> serde_json::Value {
        self.rfc2544_on(None, args)
    }

    /// rfc2544 -J, the whole process on `cpu` when given (taskset).
    pub fn rfc2544_on(&self, cpu: Option<&str>, args: &[&str]) -> serde_json::Value {
        let dut_mac = self.dut_mac();
        let mut all = vec![
            "rfc2544",
            "--tx-iface",
            "ga",
            "--rx-iface",
            "gb",
            "--dst-mac",
            &dut_mac,
            "--src-ip",
            "198.18.0.1",
            "--dst-ip",
            "198.18.1.2",
            "-J",
        ];
        all.extend_from_slice(args);
        match cpu {
            None => self.gen_json(&all),
            Some(cpu) => support::json_ok(
                Command::new("ip")
                    .args(["netns", "exec", &self.gen_ns, "taskset", "-c", cpu, BIN])
                    .args(&all),
            ),
        }
    }
}

impl Drop for DutLab {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["lab", "down", "--prefix", &self.prefix])
            .output();
    }
}

/// The tests run one at a time, and beside no other test that measures
/// (two searches sharing 2 CPUs pace worse).
pub fn serial() -> linerate_testkit::Measuring {
    linerate_testkit::measuring()
}

pub fn skip(test: &str) -> bool {
    should_skip(
        test,
        &[
            require_root(),
            require_program("ip"),
            require_program("tc"),
            require_program("ping"),
        ],
    )
}
