//! What a UDP rr server does with one request, whichever way it came
//! (its sockets, or AF_XDP's rings): the answer's size and whether it may
//! be sent ([`decide`]), and the counts a worker keeps ([`ServerCounts`]).

use crate::Prefix;
use crate::client::DATAGRAM_MAX;
use linerate_wire::{RR_HEADER_LEN, RrHeader};
use std::net::SocketAddr;

#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct ServerCounts {
    /// Well-formed requests received.
    pub requests: u64,
    /// Responses the kernel took.
    pub answered: u64,
    /// Datagrams that were not a request (too short, not rr, a response,
    /// longer than a datagram, or asking for an impossible response size).
    pub malformed: u64,
    /// Requests asking for a response above the server's limit (not answered).
    pub too_large: u64,
    /// Responses the kernel refused.
    pub reply_errors: u64,
    /// UDP payload bytes received / sent.
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Receive calls that returned datagrams.
    pub batches: u64,
    /// Messages the responses left in (fewer than `answered` when answers
    /// to one client shared a UDP GSO message).
    pub reply_messages: u64,
    /// Connected sockets opened for clients ([`crate::clients`]).
    pub client_sockets: u64,
    /// Requests (of `requests`) that came by a client's connected socket.
    pub requests_on_client_sockets: u64,
}

/// The response size a request asks for, or None when it cannot be given.
fn response_len(asked: u32, request_len: usize, slot: usize) -> Option<usize> {
    let len = if asked == 0 {
        request_len
    } else {
        asked as usize
    };
    (RR_HEADER_LEN..=slot.min(DATAGRAM_MAX))
        .contains(&len)
        .then_some(len)
}

/// What the server does with one received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Send back the first `n` bytes of the slot (the response, written in
    /// place over the request).
    Answer(usize),
    /// Not a well-formed request: counted, not answered.
    Malformed,
    /// The response would be larger than this source may get: not answered.
    TooLarge,
}

/// Turns the request in `slot[..len]` into its response in place and says
/// whether to send it: never larger than the request, unless `source` is
/// in `allow`, and then at most `max_response` (no amplification).
pub fn decide(
    slot: &mut [u8],
    len: usize,
    source: Option<SocketAddr>,
    allow: &[Prefix],
    max_response: usize,
) -> Decision {
    let len = len.min(slot.len());
    let Ok(h) = RrHeader::make_response(&mut slot[..len]) else {
        return Decision::Malformed;
    };
    let Some(out) = response_len(h.reply_len, len, slot.len()) else {
        return Decision::Malformed;
    };
    let limit = match source {
        Some(a) if out > len && allow.iter().any(|p| p.contains(a.ip())) => max_response,
        _ => len,
    };
    if out > limit {
        return Decision::TooLarge;
    }
    if out > len {
        // never send back bytes of an earlier datagram
        slot[len..out].fill(0);
    }
    Decision::Answer(out)
}

/// A worker's counts, published for the supervising thread (a poisoned
/// lock still takes them: the counts are plain numbers).
pub(crate) fn publish(sh: &std::sync::Mutex<ServerCounts>, c: &ServerCounts) {
    *sh.lock().unwrap_or_else(|e| e.into_inner()) = *c;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn response_sizes_are_checked() {
        assert_eq!(response_len(0, 100, 65_508), Some(100));
        assert_eq!(response_len(512, 40, 65_508), Some(512));
        assert_eq!(response_len(31, 40, 65_508), None);
        assert_eq!(response_len(70_000, 40, 65_508), None);
        assert_eq!(response_len(65_507, 40, 65_508), Some(65_507));
    }
}
