//! Hostile control connections: whatever bytes a peer sends, in whatever
//! pieces, the sans-IO sessions answer with events and error codes, never a
//! panic, and a closed connection always ends them.

use linerate_iperf_proto::client::{ClientEvent, ClientSession};
use linerate_iperf_proto::server::{ServerEvent, ServerSession};
use linerate_iperf_proto::{Params, PeerResults, state};
use proptest::prelude::*;

/// A parameter frame (length prefix + JSON) some cases start with, so the
/// damage lands in later states too.
fn params_frame() -> Vec<u8> {
    let json = br#"{"tcp":true,"time":1,"parallel":2,"len":1000}"#;
    let mut v = (json.len() as u32).to_be_bytes().to_vec();
    v.extend_from_slice(json);
    v
}

/// Bytes that look like control traffic: state bytes, lengths, JSON bits.
fn chunk() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        proptest::sample::select(vec![
            vec![state::TEST_START],
            vec![state::TEST_RUNNING],
            vec![state::TEST_END],
            vec![state::PARAM_EXCHANGE],
            vec![state::CREATE_STREAMS],
            vec![state::EXCHANGE_RESULTS],
            vec![state::DISPLAY_RESULTS],
            vec![state::IPERF_DONE],
            vec![state::SERVER_ERROR, 0, 0, 0, 5, 0, 0, 0, 0],
            vec![0, 0, 0, 2, b'{', b'}'],
            vec![0xff, 0xff, 0xff, 0xff],
            params_frame(),
        ]),
    ]
}

fn drive_server(chunks: &[Vec<u8>]) -> bool {
    let mut s = ServerSession::new();
    let mut streams = 0;
    for c in chunks {
        s.handle_bytes(c);
        while s.poll_transmit().is_some() {}
        while let Some(ev) = s.poll_event() {
            match ev {
                ServerEvent::Params(_) => s.ready_for_streams(),
                ServerEvent::TestEnd => s.local_results(PeerResults::default()),
                _ => {}
            }
        }
        if s.accepting_streams() && streams < 4 {
            streams += 1;
            let _ = s.stream_connected();
        }
        if s.is_closed() {
            return true;
        }
    }
    s.handle_eof();
    while s.poll_transmit().is_some() {}
    while s.poll_event().is_some() {}
    s.is_closed()
}

fn drive_client(chunks: &[Vec<u8>]) -> bool {
    let mut c = ClientSession::new(&[b'a'; 37], Params::default());
    for ch in chunks {
        c.handle_bytes(ch);
        while c.poll_transmit().is_some() {}
        while let Some(ev) = c.poll_event() {
            match ev {
                ClientEvent::ExchangeResults => c.local_results(PeerResults::default()),
                ClientEvent::Running => c.end_test(),
                _ => {}
            }
        }
        if c.is_closed() {
            return true;
        }
    }
    c.handle_eof();
    while c.poll_transmit().is_some() {}
    while c.poll_event().is_some() {}
    c.is_closed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn the_server_session_survives_any_bytes(
        with_params in any::<bool>(),
        chunks in proptest::collection::vec(chunk(), 0..24),
    ) {
        let mut all = Vec::new();
        if with_params {
            all.push(params_frame());
        }
        all.extend(chunks);
        prop_assert!(drive_server(&all), "the session ends once the peer is gone");
    }

    #[test]
    fn the_client_session_survives_any_bytes(
        chunks in proptest::collection::vec(chunk(), 0..24),
    ) {
        prop_assert!(drive_client(&chunks), "the session ends once the peer is gone");
    }
}
