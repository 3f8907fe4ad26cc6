//! `linerate agent` sends a flow with the OTG model's `custom` header (the
//! conformance suite's quickstart example, with a receive port), driven
//! by snappi (tests/snappi/agent_custom.py) over HTTP and over gRPC: the
//! receive port's capture shows every frame of the flow, frame n with the
//! UDP ports the model gives frame n and the custom bytes right after
//! linerate's probe. Then a flow of a configuration of its own with the
//! model's `random` UDP ports:
//! its captured frames carry the values of the seeded sequence that
//! docs/agent.md gives (SplitMix64), frame n value n mod count.
//!
//! Needs root (namespaces), `ip` and a Python with snappi
//! (`target/snappi-venv`, or `LINERATE_SNAPPI_PYTHON`).

mod support;

use serde_json::Value;

#[test]
fn a_custom_header_flow_over_http_is_captured_as_the_model_says() {
    custom_flow(
        "a_custom_header_flow_over_http_is_captured_as_the_model_says",
        false,
    );
}

#[test]
fn a_custom_header_flow_over_grpc_is_captured_as_the_model_says() {
    custom_flow(
        "a_custom_header_flow_over_grpc_is_captured_as_the_model_says",
        true,
    );
}

fn custom_flow(test: &str, grpc: bool) {
    let Some(doc) = support::snappi_on_looped_agent(test, "agent_custom.py", grpc) else {
        return;
    };
    check(&doc);
}

/// 20 frames sent and received; frame n carries src values[n % 5], dst
/// 6010 + 5 (n % 5), 128 bytes with the FCS, the custom bytes at 60.
fn check(doc: &Value) {
    assert_eq!(doc["transmit"], "stopped", "{doc}");
    assert_eq!(
        (doc["frames_tx"].as_u64(), doc["frames_rx"].as_u64()),
        (Some(20), Some(20)),
        "{doc}"
    );
    let frames = doc["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 20, "every frame of the flow captured: {doc}");
    for (n, f) in frames.iter().enumerate() {
        let k = (n % 5) as u64;
        assert_eq!(f["len"], 128, "frame {n}");
        assert_eq!(f["src_port"].as_u64(), Some(5010 + 5 * k), "frame {n}");
        assert_eq!(f["dst_port"].as_u64(), Some(6010 + 5 * k), "frame {n}");
        assert_eq!(f["after_probe"], "..QUICKSTART SNAPPI..", "frame {n}");
    }
    check_random(&doc["random"]);
}

/// Frame n of the random flow: source port value n mod 5 of seed 42 in
/// 1024..=65535, destination value n mod 4 of seed 1 in 5000..=5009, as
/// docs/agent.md's formula gives them (written out here, and computed by
/// the formula, so a change of generator fails the test).
fn check_random(doc: &Value) {
    assert_eq!(doc["transmit"], "stopped", "{doc}");
    assert_eq!(
        (doc["frames_tx"].as_u64(), doc["frames_rx"].as_u64()),
        (Some(20), Some(20)),
        "{doc}"
    );
    let src = [17045u64, 50435, 3922, 28564, 4082];
    let dst = [5005u64, 5009, 5000, 5005];
    let formula = |seed: u64, n: u64, min: u64, span: u64| {
        let mut z = seed.wrapping_add((n + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        min + (z ^ (z >> 31)) % span
    };
    let frames = doc["frames"].as_array().unwrap();
    assert_eq!(frames.len(), 20, "every frame of the flow captured: {doc}");
    for (n, f) in frames.iter().enumerate() {
        let n = n as u64;
        assert_eq!(f["len"], 128, "frame {n}");
        assert_eq!(
            f["src_port"].as_u64(),
            Some(src[(n % 5) as usize]),
            "frame {n}"
        );
        assert_eq!(
            f["src_port"].as_u64(),
            Some(formula(42, n % 5, 1024, 64512))
        );
        assert_eq!(
            f["dst_port"].as_u64(),
            Some(dst[(n % 4) as usize]),
            "frame {n}"
        );
        assert_eq!(f["dst_port"].as_u64(), Some(formula(1, n % 4, 5000, 10)));
    }
}
