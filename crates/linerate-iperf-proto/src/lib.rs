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

/// The name of a control state code, as iperf3's debug output gives it.
pub fn state_name(code: u8) -> &'static str {
    match code {
        state::TEST_START => "TEST_START",
        state::TEST_RUNNING => "TEST_RUNNING",
        state::TEST_END => "TEST_END",
        state::PARAM_EXCHANGE => "PARAM_EXCHANGE",
        state::CREATE_STREAMS => "CREATE_STREAMS",
        state::SERVER_TERMINATE => "SERVER_TERMINATE",
        state::CLIENT_TERMINATE => "CLIENT_TERMINATE",
        state::EXCHANGE_RESULTS => "EXCHANGE_RESULTS",
        state::DISPLAY_RESULTS => "DISPLAY_RESULTS",
        state::IPERF_DONE => "IPERF_DONE",
        state::ACCESS_DENIED => "ACCESS_DENIED",
        state::SERVER_ERROR => "SERVER_ERROR",
        _ => "unknown state",
    }
}

/// Control messages as `-d` shows them: states by name, a SERVER_ERROR
/// with its code, JSON messages as compact JSON (an authentication token
/// shown as `(hidden)`), a cookie, anything else by its length; several
/// messages in one write joined with ` + `.
pub fn describe_message(bytes: &[u8]) -> String {
    if bytes.len() == COOKIE_LEN
        && bytes[..COOKIE_LEN - 1]
            .iter()
            .all(u8::is_ascii_alphanumeric)
    {
        return "cookie".into();
    }
    let mut parts = Vec::new();
    let mut rest = bytes;
    while !rest.is_empty() {
        let json_len = (rest.len() >= 4 && rest[0] == 0)
            .then(|| u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize)
            .filter(|&n| n <= rest.len() - 4);
        if let Some(n) = json_len {
            parts.push(
                match serde_json::from_slice::<serde_json::Value>(&rest[4..4 + n]) {
                    Ok(mut v) => {
                        if let Some(t) = v.get_mut("authtoken") {
                            *t = serde_json::json!("(hidden)");
                        }
                        format!("JSON ({n} bytes) {v}")
                    }
                    Err(_) => format!("{} bytes (not JSON)", n + 4),
                },
            );
            rest = &rest[4 + n..];
        } else if rest[0] == state::SERVER_ERROR && rest.len() >= 9 {
            let code = i32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]);
            parts.push(format!(
                "SERVER_ERROR {code} ({})",
                errors::IErr(code).message()
            ));
            rest = &rest[9..];
        } else if state_name(rest[0]) != "unknown state" {
            parts.push(state_name(rest[0]).to_string());
            rest = &rest[1..];
        } else {
            parts.push(format!("{} bytes", rest.len()));
            break;
        }
    }
    parts.join(" + ")
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
    #[test]
    fn debug_descriptions_name_states_and_hide_tokens() {
        use super::*;
        assert_eq!(describe_message(&[state::TEST_END]), "TEST_END");
        let mut e = vec![state::SERVER_ERROR];
        e.extend_from_slice(&142i32.to_be_bytes());
        e.extend_from_slice(&0i32.to_be_bytes());
        assert_eq!(
            describe_message(&e),
            "SERVER_ERROR 142 (test authorization failed)"
        );
        let j = br#"{"tcp":true,"authtoken":"c2VjcmV0"}"#;
        let mut m = (j.len() as u32).to_be_bytes().to_vec();
        m.extend_from_slice(j);
        let d = describe_message(&m);
        assert!(
            d.contains(r#""authtoken":"(hidden)""#) && !d.contains("c2VjcmV0"),
            "{d}"
        );
        assert_eq!(describe_message(&[1, 2]), "TEST_START + TEST_RUNNING");
        let mut two = m.clone();
        two.push(state::DISPLAY_RESULTS);
        assert!(describe_message(&two).ends_with("} + DISPLAY_RESULTS"));
        assert_eq!(describe_message(&[0x40, 0x41]), "2 bytes");
        assert_eq!(describe_message(&[b'a'; 37]), "cookie");
    }

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
