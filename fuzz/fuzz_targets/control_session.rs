//! Feeds arbitrary bytes, cut into arbitrary pieces, to both sides of the
//! iperf3 control protocol (the sans-IO sessions a server and a client
//! run): no panic, and the output each side queues stays bounded. Run with
//! `cargo fuzz run control_session` (nightly).
#![no_main]

use libfuzzer_sys::fuzz_target;
use linerate_iperf_proto::client::ClientSession;
use linerate_iperf_proto::server::ServerSession;
use linerate_iperf_proto::{Params, make_cookie};

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else {
        return;
    };
    let step = usize::from(cut).max(1);
    let mut server = ServerSession::new();
    let mut client = ClientSession::new(&make_cookie([7; 36]), Params::default());
    let mut queued = 0usize;
    for piece in rest.chunks(step) {
        server.handle_bytes(piece);
        client.handle_bytes(piece);
        while server.poll_event().is_some() {}
        while client.poll_event().is_some() {}
        queued += server.poll_transmit().map_or(0, |b| b.len());
        queued += client.poll_transmit().map_or(0, |b| b.len());
    }
    server.handle_eof();
    client.handle_eof();
    while server.poll_event().is_some() {}
    while client.poll_event().is_some() {}
    // What the sessions send is their own small messages, never an echo
    // of what they were fed.
    assert!(queued <= 4096 + rest.len() / 8, "{queued} bytes queued");
});
