//! The client's side of the control connection, without I/O.

use crate::control::{ControlBuf, frame_json};
use crate::server::RESULTS_MAX_BYTES;
use crate::{Cookie, IErr, Params, PeerResults, state};
use std::collections::VecDeque;
use thiserror::Error;

/// Why a client's test failed on the control connection.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ClientError {
    #[error("the server is busy running a test. try again later")]
    AccessDenied,
    #[error("server error: {code}{}", errno_text(*.errno))]
    Server { code: IErr, errno: i32 },
    #[error("the server has terminated")]
    ServerTerminated,
    #[error("control socket has closed unexpectedly")]
    ControlClosed,
    #[error("received an unknown control message (state {0})")]
    UnknownMessage(u8),
    #[error("unable to receive results: {0}")]
    Results(IErr),
    #[error("the server's results are not plausible ({0}); not reported")]
    Implausible(String),
    #[error("the server reported an error, but sent only {0} of its 8 bytes")]
    ServerErrorCut(usize),
    #[error("timed out waiting for the server ({0} ms for one control message)")]
    Timeout(u128),
    #[error(
        "the server did not finish {phase} within {ms} ms (--control-timeout), whatever it sent meanwhile"
    )]
    Overdue { phase: &'static str, ms: u128 },
}

fn errno_text(errno: i32) -> String {
    if errno == 0 {
        String::new()
    } else {
        format!(": {}", std::io::Error::from_raw_os_error(errno))
    }
}

/// What the I/O layer must do next.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    /// Create the data streams, one after the other.
    CreateStreams,
    /// TEST_START: start timers.
    Start,
    /// TEST_RUNNING: move data.
    Running,
    /// Stop, then pass this side's figures to [`ClientSession::local_results`].
    ExchangeResults,
    /// The server's figures.
    ServerResults(PeerResults),
    /// DISPLAY_RESULTS received and IPERF_DONE queued: print and close.
    Done,
    Failed(ClientError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    AwaitParamRequest,
    AwaitCreate,
    AwaitStart,
    Running,
    Ending,
    AwaitServerResults,
    AwaitDisplay,
    ErrorPayload,
    Closed,
}

/// One test, client side.
#[derive(Debug)]
pub struct ClientSession {
    phase: Phase,
    params: Params,
    buf: ControlBuf,
    out: Vec<u8>,
    events: VecDeque<ClientEvent>,
    local: Option<PeerResults>,
    exchange_requested: bool,
    progress: u64,
}

impl ClientSession {
    /// Starts a test: the cookie is queued for sending.
    pub fn new(cookie: &Cookie, params: Params) -> Self {
        Self {
            phase: Phase::AwaitParamRequest,
            params,
            buf: ControlBuf::default(),
            out: cookie.to_vec(),
            events: VecDeque::new(),
            local: None,
            exchange_requested: false,
            progress: 0,
        }
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn is_closed(&self) -> bool {
        self.phase == Phase::Closed
    }

    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        (!self.out.is_empty()).then(|| std::mem::take(&mut self.out))
    }

    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// The client decided the test is over (time, bytes or blocks): TEST_END.
    pub fn end_test(&mut self) {
        if matches!(self.phase, Phase::Running | Phase::AwaitStart) {
            self.out.push(state::TEST_END);
            self.phase = Phase::Ending;
        }
    }

    /// The user interrupted: CLIENT_TERMINATE, then close.
    pub fn terminate(&mut self) {
        if self.phase != Phase::Closed {
            self.out.push(state::CLIENT_TERMINATE);
            self.phase = Phase::Closed;
        }
    }

    /// This side's figures, after [`ClientEvent::ExchangeResults`]. The client
    /// writes its results before reading the server's.
    pub fn local_results(&mut self, r: PeerResults) {
        if self.exchange_requested && self.phase == Phase::Ending {
            self.out.extend(frame_json(&r.to_json()));
            self.phase = Phase::AwaitServerResults;
            self.advance();
        } else {
            self.local = Some(r);
        }
    }

    pub fn handle_eof(&mut self) {
        match self.phase {
            Phase::Closed => {}
            Phase::ErrorPayload => {
                // 3.12 sends only the first int32 for some errors.
                let code = self.buf.take_exact(4).map_or(IErr::CTRL_CLOSE, |b| {
                    IErr(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
                });
                self.fail(ClientError::Server { code, errno: 0 });
            }
            _ => self.fail(ClientError::ControlClosed),
        }
    }

    fn fail(&mut self, e: ClientError) {
        self.phase = Phase::Closed;
        self.events.push_back(ClientEvent::Failed(e));
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
                Phase::Closed => return,
                Phase::ErrorPayload => {
                    let Some(b) = self.buf.take_exact(8) else {
                        return;
                    };
                    let code = IErr(i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                    let errno = i32::from_be_bytes([b[4], b[5], b[6], b[7]]);
                    return self.fail(ClientError::Server { code, errno });
                }
                Phase::AwaitServerResults if self.buf.len() >= 4 => {
                    match self.buf.take_json(RESULTS_MAX_BYTES) {
                        Ok(None) => return,
                        Err(_) => return self.fail(ClientError::Results(IErr::RECV_RESULTS)),
                        Ok(Some(v)) => match PeerResults::from_json(&v) {
                            Ok(r) if !self.ids_known(&r) => {
                                return self.fail(ClientError::Results(IErr::STREAM_ID));
                            }
                            Ok(r) => {
                                if let Err(why) = r.check(self.test_seconds()) {
                                    return self.fail(ClientError::Implausible(why));
                                }
                                self.progress += 1;
                                self.phase = Phase::AwaitDisplay;
                                self.events.push_back(ClientEvent::ServerResults(r));
                            }
                            Err(e) => return self.fail(ClientError::Results(e)),
                        },
                    }
                }
                Phase::AwaitServerResults => {
                    // A state byte may come instead of results (an error).
                    match self.buf.peek_byte() {
                        Some(
                            b @ (state::SERVER_ERROR
                            | state::SERVER_TERMINATE
                            | state::ACCESS_DENIED),
                        ) => {
                            self.buf.take_byte();
                            self.on_state_byte(b);
                        }
                        _ => return,
                    }
                }
                _ => {
                    let Some(b) = self.buf.take_byte() else {
                        return;
                    };
                    self.on_state_byte(b);
                }
            }
        }
    }

    /// The asked test length (time + omit), `None` for one that ends by
    /// amount.
    fn test_seconds(&self) -> Option<f64> {
        (self.params.time_s > 0).then(|| f64::from(self.params.time_s + self.params.omit_s))
    }

    /// How many control messages were taken whole so far: a wait for the
    /// server is timed per message, and a byte that does not complete one
    /// does not restart it.
    pub fn progress(&self) -> u64 {
        self.progress
    }

    /// The wait for the server ran out (`waited`): the test fails with the
    /// server's error if one was half received, else with a time-out.
    pub fn timed_out(&mut self, waited: std::time::Duration) {
        if self.phase == Phase::ErrorPayload {
            let n = self.buf.len().min(7);
            self.fail(ClientError::ServerErrorCut(n));
        } else {
            self.fail(ClientError::Timeout(waited.as_millis()));
        }
    }

    /// A phase the server leads (setting up, ending) went on past its
    /// bound, however many messages came meanwhile.
    pub fn overdue(&mut self, phase: &'static str, waited: std::time::Duration) {
        self.fail(ClientError::Overdue {
            phase,
            ms: waited.as_millis(),
        });
    }

    /// True while a SERVER_ERROR's payload is being received.
    pub fn awaiting_error_payload(&self) -> bool {
        self.phase == Phase::ErrorPayload
    }

    /// Every stream in the server's results is one of ours (iperf3 fails
    /// with "stream has an invalid id" otherwise).
    fn ids_known(&self, r: &PeerResults) -> bool {
        let n = self.params.stream_count();
        r.streams
            .iter()
            .all(|s| (0..n).any(|i| crate::stream_id(i) == s.id))
    }

    fn on_state_byte(&mut self, b: u8) {
        self.progress += 1;
        match (b, self.phase) {
            (state::ACCESS_DENIED, _) => self.fail(ClientError::AccessDenied),
            (state::SERVER_ERROR, _) => self.phase = Phase::ErrorPayload,
            (state::SERVER_TERMINATE, _) => {
                // iperf3 still writes IPERF_DONE into the dying socket.
                self.out.push(state::IPERF_DONE);
                self.fail(ClientError::ServerTerminated);
            }
            (state::PARAM_EXCHANGE, Phase::AwaitParamRequest) => {
                self.out.extend(frame_json(&self.params.to_json()));
                self.phase = Phase::AwaitCreate;
            }
            (state::CREATE_STREAMS, Phase::AwaitCreate) => {
                self.phase = Phase::AwaitStart;
                self.events.push_back(ClientEvent::CreateStreams);
            }
            (state::TEST_START, Phase::AwaitStart | Phase::Ending) => {
                if self.phase == Phase::AwaitStart {
                    self.events.push_back(ClientEvent::Start);
                }
            }
            (state::TEST_RUNNING, Phase::AwaitStart) => {
                self.phase = Phase::Running;
                self.events.push_back(ClientEvent::Running);
            }
            (state::TEST_RUNNING, Phase::Ending) => {}
            (state::EXCHANGE_RESULTS, Phase::Ending | Phase::Running) => {
                self.phase = Phase::Ending;
                self.exchange_requested = true;
                match self.local.take() {
                    Some(r) => self.local_results(r),
                    None => self.events.push_back(ClientEvent::ExchangeResults),
                }
            }
            (state::DISPLAY_RESULTS, Phase::AwaitDisplay) => {
                self.out.push(state::IPERF_DONE);
                self.phase = Phase::Closed;
                self.events.push_back(ClientEvent::Done);
            }
            (state::IPERF_DONE, _) => {}
            (other, _) => self.fail(ClientError::UnknownMessage(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{ServerEvent, ServerSession};
    use crate::{COOKIE_LEN, Protocol, TestMode, make_cookie};

    fn params() -> Params {
        Params {
            protocol: Protocol::Tcp,
            mode: TestMode::Bidir,
            time_s: 1,
            parallel: 2,
            len: 1000,
            ..Params::default()
        }
    }

    /// Drives a client and a server session against each other in memory.
    fn pump(c: &mut ClientSession, s: &mut ServerSession) {
        for _ in 0..10 {
            if let Some(b) = c.poll_transmit() {
                s.handle_bytes(&b);
            }
            if let Some(b) = s.poll_transmit() {
                c.handle_bytes(&b);
            }
        }
    }

    fn results(id_base: u32) -> PeerResults {
        PeerResults {
            sender_has_retransmits: 1,
            streams: [1, 3, 4, 5]
                .iter()
                .map(|&id| crate::StreamResult {
                    id,
                    bytes: u64::from(id_base + id),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn full_test_in_memory() {
        let cookie = make_cookie([7; 36]);
        let mut c = ClientSession::new(&cookie, params());
        let first = c.poll_transmit().unwrap();
        assert_eq!(first.len(), COOKIE_LEN);
        let mut s = ServerSession::new();
        pump(&mut c, &mut s);
        let Some(ServerEvent::Params(p)) = s.poll_event() else {
            panic!("no params")
        };
        assert_eq!(
            p,
            Params {
                client_version: Some("3.12".into()),
                ..params()
            }
        );
        s.ready_for_streams();
        pump(&mut c, &mut s);
        assert_eq!(c.poll_event(), Some(ClientEvent::CreateStreams));
        for _ in 0..4 {
            s.stream_connected().unwrap();
        }
        assert_eq!(s.poll_event(), Some(ServerEvent::Start));
        pump(&mut c, &mut s);
        assert_eq!(c.poll_event(), Some(ClientEvent::Start));
        assert_eq!(c.poll_event(), Some(ClientEvent::Running));
        c.end_test();
        pump(&mut c, &mut s);
        assert_eq!(s.poll_event(), Some(ServerEvent::TestEnd));
        s.local_results(results(100));
        pump(&mut c, &mut s);
        assert_eq!(c.poll_event(), Some(ClientEvent::ExchangeResults));
        c.local_results(results(0));
        pump(&mut c, &mut s);
        let Some(ServerEvent::ClientResults(cr)) = s.poll_event() else {
            panic!()
        };
        assert_eq!(cr.streams[0].bytes, 1);
        let Some(ClientEvent::ServerResults(sr)) = c.poll_event() else {
            panic!()
        };
        assert_eq!(sr.stream(5).unwrap().bytes, 105);
        assert_eq!(c.poll_event(), Some(ClientEvent::Done));
        assert_eq!(s.poll_event(), Some(ServerEvent::Done));
        assert!(c.is_closed() && s.is_closed());
    }

    #[test]
    fn busy_and_errors() {
        let cookie = make_cookie([1; 36]);
        let mut c = ClientSession::new(&cookie, params());
        c.handle_bytes(&[0xff]);
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::AccessDenied))
        );
        let mut c = ClientSession::new(&cookie, params());
        c.handle_bytes(&[9, 0xfe, 0, 0, 0]);
        c.handle_bytes(&[6, 0, 0, 0, 0]);
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::Server {
                code: IErr::NUM_STREAMS,
                errno: 0
            }))
        );
        // 3.12 auth failure: only the first int32, then EOF.
        let mut c = ClientSession::new(&cookie, params());
        c.handle_bytes(&[0xfe, 0, 0, 0, 142]);
        c.handle_eof();
        assert!(matches!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::Server {
                code: IErr(142),
                ..
            }))
        ));
        let mut c = ClientSession::new(&cookie, params());
        c.handle_bytes(&[9, 10]);
        c.poll_event();
        c.handle_eof();
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::ControlClosed))
        );
        let mut c = ClientSession::new(&cookie, params());
        c.handle_bytes(&[9, 10, 1, 2, 11]);
        assert_eq!(c.poll_event(), Some(ClientEvent::CreateStreams));
        assert_eq!(c.poll_event(), Some(ClientEvent::Start));
        assert_eq!(c.poll_event(), Some(ClientEvent::Running));
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::ServerTerminated))
        );
        let mut c = ClientSession::new(&cookie, params());
        c.handle_bytes(&[3]);
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::UnknownMessage(3)))
        );
    }

    /// A session through the test, its own results sent, waiting for the
    /// server's.
    fn awaiting_server_results() -> ClientSession {
        let cookie = make_cookie([1; 36]);
        let mut c = ClientSession::new(&cookie, params());
        c.handle_bytes(&[9, 10, 1, 2]);
        c.end_test();
        c.handle_bytes(&[13]);
        while c.poll_event().is_some() {}
        c.local_results(PeerResults::default());
        c
    }

    #[test]
    fn results_naming_an_unknown_stream_fail() {
        let mut c = awaiting_server_results();
        c.handle_bytes(&frame_json(
            &serde_json::json!({"cpu_util_total":0,"cpu_util_user":0,
            "cpu_util_system":0,"sender_has_retransmits":-1,"streams":[{"id":9,"bytes":1,
            "retransmits":-1,"jitter":0,"errors":0,"packets":0}]}),
        ));
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::Results(IErr::STREAM_ID)))
        );
    }

    #[test]
    fn results_with_bad_content() {
        let mut c = awaiting_server_results();
        c.handle_bytes(&frame_json(&serde_json::json!({"streams": "nope"})));
        assert_eq!(
            c.poll_event(),
            Some(ClientEvent::Failed(ClientError::Results(
                IErr::RECV_RESULTS
            )))
        );
    }
}
