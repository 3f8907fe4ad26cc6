//! Faults a careless or hostile peer could cause (issue 12): each test
//! reproduces one, against the real binary, with fake peers written here
//! where a real iperf3 would not misbehave.

mod support;

use linerate_rig::{require_program, should_skip};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};
use support::{Proc, json, server};

fn skip(test: &str) -> bool {
    should_skip(test, &[require_program("iperf3")])
}

fn iperf3_client(port: u16, args: &[&str]) -> Proc {
    Proc::spawn(
        Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-J"])
            .args(args),
    )
}

/// iperf3 3.12 with `-R -P 4` against a server whose senders share one CPU
/// worker (`-A 0` pins them all to CPU 0): every stream must be closed at
/// the end, or iperf3 blocks reading one and the results are lost.
#[test]
fn reverse_streams_sharing_a_worker_all_end() {
    if skip("reverse_streams_sharing_a_worker_all_end") {
        return;
    }
    let (_srv, port) = server(&["-A", "0"]);
    for _ in 0..2 {
        let v = json(
            &iperf3_client(port, &["-R", "-P", "4", "-t", "1"])
                .wait(Duration::from_secs(20))
                .stdout,
        );
        assert!(v.get("error").is_none(), "iperf3 -R -P 4: {}", v["error"]);
        assert!(v["end"]["sum_received"]["bytes"].as_u64().unwrap() > 0);
        assert_eq!(v["end"]["streams"].as_array().unwrap().len(), 4);
    }
}
