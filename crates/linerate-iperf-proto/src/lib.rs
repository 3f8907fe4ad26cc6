//! iperf3's protocol without I/O: the control-connection state machines of
//! server and client, the parameter and result messages, the UDP datagram
//! header and receiver accounting, and the `-J` / human output formats.
//!
//! Nothing here reads a socket or a clock: the I/O layer feeds bytes and
//! times in (`handle_*`), and takes bytes and events out (`poll_*`).
//! `../shared/reference/iperf3-protocol.md` is the specification followed.

pub mod auth;
pub mod client;
pub mod control;
pub mod errors;
pub mod params;
pub mod report;
pub mod results;
pub mod server;
pub mod udp;
pub mod units;

pub use errors::IErr;
pub use params::{Params, Protocol, TestMode};
pub use results::{PeerResults, StreamResult};

/// The cookie that names a test: 36 characters of `a-z2-7` and a NUL.
pub type Cookie = [u8; COOKIE_LEN];
pub const COOKIE_LEN: usize = 37;
const COOKIE_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Builds a cookie from 36 random bytes (each taken modulo 32, as iperf3 does).
pub fn make_cookie(random: [u8; 36]) -> Cookie {
    let mut c = [0u8; COOKIE_LEN];
    for (o, r) in c.iter_mut().zip(random) {
        *o = COOKIE_ALPHABET[usize::from(r % 32)];
    }
    c
}

/// The cookie as text (without the NUL), as iperf3 prints it.
pub fn cookie_str(c: &Cookie) -> String {
    String::from_utf8_lossy(&c[..36]).into_owned()
}

/// Stream ids as iperf3 numbers them: 1, 3, 4, 5, … (2 is skipped).
pub fn stream_id(index: usize) -> u32 {
    if index == 0 { 1 } else { index as u32 + 2 }
}

/// Control-connection state codes (one signed byte each).
pub mod state {
    pub const TEST_START: u8 = 1;
    pub const TEST_RUNNING: u8 = 2;
    pub const TEST_END: u8 = 4;
    pub const PARAM_EXCHANGE: u8 = 9;
    pub const CREATE_STREAMS: u8 = 10;
    pub const SERVER_TERMINATE: u8 = 11;
    pub const CLIENT_TERMINATE: u8 = 12;
    pub const EXCHANGE_RESULTS: u8 = 13;
    pub const DISPLAY_RESULTS: u8 = 14;
    pub const IPERF_DONE: u8 = 16;
    pub const ACCESS_DENIED: u8 = 0xff;
    pub const SERVER_ERROR: u8 = 0xfe;
}

/// UDP stream set-up datagrams.
pub mod udp_connect {
    /// What a 3.12+ client sends ("9876").
    pub const CONNECT: [u8; 4] = *b"9876";
    /// What a 3.12+ server replies ("6789").
    pub const REPLY: [u8; 4] = *b"6789";
    /// Replies a client accepts: current, legacy, and big-endian variants.
    pub const REPLIES_ACCEPTED: [[u8; 4]; 4] = [
        *b"6789",
        [0xb1, 0x68, 0xde, 0x3a],
        *b"9876",
        [0x3a, 0xde, 0x68, 0xb1],
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_and_ids() {
        let c = make_cookie([200; 36]);
        assert_eq!(c[36], 0);
        assert!(c[..36].iter().all(|b| COOKIE_ALPHABET.contains(b)));
        assert_eq!(cookie_str(&c).len(), 36);
        assert_eq!(
            (0..5).map(stream_id).collect::<Vec<_>>(),
            vec![1, 3, 4, 5, 6]
        );
    }
}
