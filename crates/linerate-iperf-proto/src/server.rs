//! The server's side of one test's control connection, without I/O.
//!
//! The I/O layer reads the 37-byte cookie, creates a [`ServerSession`],
//! feeds it control bytes, and acts on its events; it writes whatever
//! [`ServerSession::poll_transmit`] gives it.

use crate::control::{ControlBuf, frame_json};
use crate::params::PARAMS_MAX_BYTES;
use crate::{IErr, Params, PeerResults, state, stream_id};
use std::collections::VecDeque;

/// Largest results message read from a client.
pub const RESULTS_MAX_BYTES: usize = 1 << 20;

/// What the I/O layer must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerEvent {
    /// Valid parameters arrived: prepare data listeners, then call
    /// [`ServerSession::ready_for_streams`].
    Params(Params),
    /// Every stream is connected; TEST_START and TEST_RUNNING are queued.
    Start,
    /// The client ended the test; EXCHANGE_RESULTS is queued. Stop the
    /// streams (receivers may go on taking what was sent before), and pass
    /// the final figures to [`ServerSession::local_results`], now or once
    /// the client's results are in.
    TestEnd,
    /// The client's results: ours are queued in reply if they were given
    /// already, else they go when [`ServerSession::local_results`] gives
    /// them (a receiver can take what the client says it sent first).
    ClientResults(PeerResults),
    /// The client said IPERF_DONE: close the connection.
    Done,
    /// The client sent CLIENT_TERMINATE.
    ClientTerminated,
    /// The client closed the control connection before the test was done.
    ClientGone,
    /// The test failed; any error message for the client is queued.
    Failed(IErr),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitParams,
    Setup,
    CreateStreams {
        expected: usize,
        connected: usize,
    },
    Running,
    AwaitResults,
    /// The client's results are in; ours are awaited.
    Answering,
    AwaitDone,
    Closed,
}

/// One test, server side.
#[derive(Debug)]
pub struct ServerSession {
    phase: Phase,
    buf: ControlBuf,
    out: Vec<u8>,
    events: VecDeque<ServerEvent>,
    params: Option<Params>,
    local: Option<PeerResults>,
}

impl Default for ServerSession {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerSession {
    /// A session whose cookie has been read: asks for parameters at once.
    pub fn new() -> Self {
        Self {
            phase: Phase::AwaitParams,
            buf: ControlBuf::default(),
            out: vec![state::PARAM_EXCHANGE],
            events: VecDeque::new(),
            params: None,
            local: None,
        }
    }

    pub fn params(&self) -> Option<&Params> {
        self.params.as_ref()
    }

    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    /// True while streams are being created (data connections are expected).
    pub fn accepting_streams(&self) -> bool {
        matches!(self.phase, Phase::CreateStreams { .. })
    }

    pub fn is_running(&self) -> bool {
        self.phase == Phase::Running
    }

    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.out.is_empty()).then(|| std::mem::take(&mut self.out))
    }

    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.events.pop_front()
    }

    /// Fails the test with `err`, telling the client (SERVER_ERROR + code + errno 0).
    pub fn fail(&mut self, err: IErr) {
        if self.phase == Phase::Closed {
            return;
        }
        self.out.push(state::SERVER_ERROR);
        self.out.extend_from_slice(&err.0.to_be_bytes());
        self.out.extend_from_slice(&0i32.to_be_bytes());
        self.phase = Phase::Closed;
        self.events.push_back(ServerEvent::Failed(err));
    }

    /// Data listeners are ready: tell the client to create its streams.
    pub fn ready_for_streams(&mut self) {
        if self.phase != Phase::Setup {
            return;
        }
        let expected = self.params.as_ref().map_or(0, Params::stream_count);
        self.out.push(state::CREATE_STREAMS);
        self.phase = Phase::CreateStreams {
            expected,
            connected: 0,
        };
        self.maybe_start();
    }

    /// A data stream connected (cookie checked by the I/O layer). Returns its
    /// id and whether the server sends on it, or `None` if no stream was due.
    pub fn stream_connected(&mut self) -> Option<(u32, bool)> {
        let Phase::CreateStreams {
            expected,
            connected,
        } = self.phase
        else {
            return None;
        };
        if connected >= expected {
            return None;
        }
        let p = self.params.as_ref()?;
        let server_sends = !p.mode.client_sends(connected, p.parallel);
        self.phase = Phase::CreateStreams {
            expected,
            connected: connected + 1,
        };
        self.maybe_start();
        Some((stream_id(connected), server_sends))
    }

    fn maybe_start(&mut self) {
        if let Phase::CreateStreams {
            expected,
            connected,
        } = self.phase
            && connected == expected
        {
            self.out
                .extend_from_slice(&[state::TEST_START, state::TEST_RUNNING]);
            self.phase = Phase::Running;
            self.events.push_back(ServerEvent::Start);
        }
    }

    /// The streams are stopped and these are the server's figures: sent
    /// in reply to the client's results (at once if those are in).
    pub fn local_results(&mut self, r: PeerResults) {
        match self.phase {
            Phase::AwaitResults => self.local = Some(r),
            Phase::Answering => self.answer(r),
            _ => {}
        }
    }

    fn answer(&mut self, r: PeerResults) {
        self.out.extend(frame_json(&r.to_json()));
        self.out.push(state::DISPLAY_RESULTS);
        self.phase = Phase::AwaitDone;
        self.advance();
    }

    /// TEST_END: the exchange starts at once, while the streams stop.
    fn test_ended(&mut self) {
        self.out.push(state::EXCHANGE_RESULTS);
        self.phase = Phase::AwaitResults;
        self.events.push_back(ServerEvent::TestEnd);
    }

    pub fn handle_eof(&mut self) {
        match self.phase {
            Phase::Closed => {}
            Phase::AwaitDone => {
                self.phase = Phase::Closed;
                self.events.push_back(ServerEvent::Done);
            }
            _ => {
                self.phase = Phase::Closed;
                self.events.push_back(ServerEvent::ClientGone);
            }
        }
    }

    pub fn handle_bytes(&mut self, data: &[u8]) {
        if self.phase == Phase::Closed {
            return;
        }
        self.buf.push(data);
        self.advance();
    }

    fn advance(&mut self) {
        loop {
            match self.phase {
                Phase::AwaitParams => match self.buf.take_json(PARAMS_MAX_BYTES) {
                    Ok(None) => return,
                    Err(_) => return self.fail(IErr::RECV_PARAMS),
                    Ok(Some(v)) => match Params::from_json(&v) {
                        Ok(p) => {
                            self.params = Some(p.clone());
                            self.phase = Phase::Setup;
                            self.events.push_back(ServerEvent::Params(p));
                        }
                        Err(e) => return self.fail(e),
                    },
                },
                Phase::AwaitResults => match self.buf.take_json(RESULTS_MAX_BYTES) {
                    Ok(None) => return,
                    Err(_) => return self.fail(IErr::RECV_RESULTS),
                    Ok(Some(v)) => match PeerResults::from_json(&v) {
                        Ok(r) => {
                            self.phase = Phase::Answering;
                            self.events.push_back(ServerEvent::ClientResults(r));
                            if let Some(local) = self.local.take() {
                                self.answer(local);
                            }
                        }
                        Err(e) => return self.fail(e),
                    },
                },
                Phase::Closed | Phase::Answering => return,
                _ => {
                    let Some(b) = self.buf.take_byte() else {
                        return;
                    };
                    self.on_state_byte(b);
                }
            }
        }
    }

    fn on_state_byte(&mut self, b: u8) {
        match (b, self.phase) {
            (state::TEST_START, _) => {}
            (state::CLIENT_TERMINATE, _) => {
                self.phase = Phase::Closed;
                self.events.push_back(ServerEvent::ClientTerminated);
            }
            (state::TEST_END, Phase::Running) => self.test_ended(),
            (state::IPERF_DONE, Phase::AwaitDone) => {
                self.phase = Phase::Closed;
                self.events.push_back(ServerEvent::Done);
            }
            // A client that gives up early (e.g. -n reached before streams
            // were all up) may end the test in any phase after params.
            (state::TEST_END, Phase::CreateStreams { .. } | Phase::Setup) => self.test_ended(),
            _ => self.fail(IErr::MESSAGE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::frame_json;
    use serde_json::json;

    fn results_json() -> Vec<u8> {
        frame_json(
            &json!({"cpu_util_total":1,"cpu_util_user":0.5,"cpu_util_system":0.5,
            "sender_has_retransmits":1,"streams":[{"id":1,"bytes":100,"retransmits":0,
            "jitter":0,"errors":0,"packets":0}]}),
        )
    }

    #[test]
    fn forward_tcp_sequence() {
        let mut s = ServerSession::new();
        assert_eq!(s.poll_transmit(), Some(vec![9]));
        let params = frame_json(&json!({"tcp":true,"time":2,"parallel":2,"len":131072}));
        // Split in the middle of the length prefix.
        s.handle_bytes(&params[..2]);
        assert_eq!(s.poll_event(), None);
        s.handle_bytes(&params[2..]);
        let Some(ServerEvent::Params(p)) = s.poll_event() else {
            panic!()
        };
        assert_eq!(p.parallel, 2);
        s.ready_for_streams();
        assert_eq!(s.poll_transmit(), Some(vec![10]));
        assert!(s.accepting_streams());
        assert_eq!(s.stream_connected(), Some((1, false)));
        assert_eq!(s.poll_event(), None);
        assert_eq!(s.stream_connected(), Some((3, false)));
        assert_eq!(s.poll_event(), Some(ServerEvent::Start));
        assert_eq!(s.poll_transmit(), Some(vec![1, 2]));
        assert_eq!(s.stream_connected(), None);
        s.handle_bytes(&[4]);
        assert_eq!(s.poll_event(), Some(ServerEvent::TestEnd));
        // The exchange starts at once; our figures can wait for the
        // client's (what it says it sent).
        assert_eq!(s.poll_transmit(), Some(vec![13]));
        let mut tail = results_json();
        tail.push(16);
        s.handle_bytes(&tail);
        assert!(matches!(
            s.poll_event(),
            Some(ServerEvent::ClientResults(_))
        ));
        assert_eq!(s.poll_transmit(), None, "nothing before our results");
        s.local_results(PeerResults {
            sender_has_retransmits: -1,
            ..Default::default()
        });
        let out = s.poll_transmit().unwrap();
        assert_eq!(*out.last().unwrap(), 14);
        assert_eq!(s.poll_event(), Some(ServerEvent::Done));
        assert!(s.is_closed());
    }

    #[test]
    fn bidir_roles_by_arrival() {
        let mut s = ServerSession::new();
        s.handle_bytes(&frame_json(
            &json!({"udp":true,"parallel":2,"bidirectional":true,"len":1000}),
        ));
        assert!(matches!(s.poll_event(), Some(ServerEvent::Params(_))));
        s.ready_for_streams();
        let roles: Vec<_> = (0..4).map(|_| s.stream_connected().unwrap()).collect();
        assert_eq!(roles, vec![(1, false), (3, false), (4, true), (5, true)]);
    }

    #[test]
    fn bad_params_get_server_error() {
        let mut s = ServerSession::new();
        s.poll_transmit();
        s.handle_bytes(&frame_json(&json!({"tcp":true,"parallel":0})));
        assert_eq!(s.poll_event(), Some(ServerEvent::Failed(IErr::NUM_STREAMS)));
        assert_eq!(s.poll_transmit(), Some(vec![0xfe, 0, 0, 0, 6, 0, 0, 0, 0]));
        assert!(s.is_closed());
        let mut s = ServerSession::new();
        s.poll_transmit();
        s.handle_bytes(&[0, 0, 0x20, 1]);
        assert_eq!(s.poll_event(), Some(ServerEvent::Failed(IErr::RECV_PARAMS)));
        let mut s = ServerSession::new();
        s.handle_bytes(&[0, 0, 0, 2, b'{', b'{']);
        assert_eq!(s.poll_event(), Some(ServerEvent::Failed(IErr::RECV_PARAMS)));
    }

    #[test]
    fn unknown_state_byte_while_running() {
        let mut s = ServerSession::new();
        s.handle_bytes(&frame_json(&json!({"tcp":true,"parallel":1})));
        s.poll_event();
        s.ready_for_streams();
        s.stream_connected();
        s.poll_event();
        s.poll_transmit();
        s.handle_bytes(&[2]);
        assert_eq!(s.poll_event(), Some(ServerEvent::Failed(IErr::MESSAGE)));
        assert_eq!(s.poll_transmit().unwrap()[..5], [0xfe, 0, 0, 0, 110]);
    }

    #[test]
    fn client_terminates_or_vanishes() {
        let mut s = ServerSession::new();
        s.handle_bytes(&frame_json(&json!({"tcp":true})));
        s.poll_event();
        s.handle_bytes(&[12]);
        assert_eq!(s.poll_event(), Some(ServerEvent::ClientTerminated));
        let mut s = ServerSession::new();
        s.handle_eof();
        assert_eq!(s.poll_event(), Some(ServerEvent::ClientGone));
    }
}
