//! Feeds arbitrary datagrams to the rr server's request handling: no
//! panic, and no answer larger than the request for a source that is not
//! allowed (the server is no amplifier). Run with
//! `cargo fuzz run rr_request` (nightly).
#![no_main]

use libfuzzer_sys::fuzz_target;
use linerate_rr::server::{Decision, decide};
use linerate_rr::Prefix;

fuzz_target!(|data: &[u8]| {
    let mut slot = vec![0u8; 65536];
    let len = data.len().min(slot.len());
    slot[..len].copy_from_slice(&data[..len]);
    let source = Some("198.18.0.1:9".parse().unwrap());
    match decide(&mut slot, len, source, &[], 65507) {
        Decision::Answer(out) => assert!(out <= len, "{out} bytes for {len}"),
        Decision::Malformed | Decision::TooLarge => {}
    }
    // An allowed source may get more, up to the limit and never more.
    let allow = [Prefix::parse("198.18.0.0/15").unwrap()];
    slot[..len].copy_from_slice(&data[..len]);
    if let Decision::Answer(out) = decide(&mut slot, len, source, &allow, 2048) {
        assert!(out <= len.max(2048), "{out} bytes for {len}");
    }
});
