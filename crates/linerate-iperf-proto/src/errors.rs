//! iperf3's error numbers (`i_errno`) that cross the wire in SERVER_ERROR,
//! and the messages iperf3 prints for them.

use std::fmt;

/// An iperf3 error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IErr(pub i32);

impl IErr {
    pub const SERVER_ONLY: IErr = IErr(3);
    pub const CLIENT_ONLY: IErr = IErr(4);
    pub const DURATION: IErr = IErr(5);
    pub const NUM_STREAMS: IErr = IErr(6);
    pub const BLOCK_SIZE: IErr = IErr(7);
    pub const BUF_SIZE: IErr = IErr(8);
    pub const MSS: IErr = IErr(10);
    pub const OMIT: IErr = IErr(12);
    pub const BURST: IErr = IErr(15);
    pub const UDP_BLOCK_SIZE: IErr = IErr(20);
    pub const BAD_TOS: IErr = IErr(21);
    pub const SET_CLIENT_AUTH: IErr = IErr(22);
    pub const SET_SERVER_AUTH: IErr = IErr(23);
    pub const TOTAL_RATE: IErr = IErr(27);
    pub const SERVER_AUTH_USERS: IErr = IErr(35);
    pub const MAX_DURATION: IErr = IErr(37);
    pub const RECV_COOKIE: IErr = IErr(106);
    pub const CTRL_CLOSE: IErr = IErr(109);
    pub const MESSAGE: IErr = IErr(110);
    pub const RECV_PARAMS: IErr = IErr(114);
    pub const RECV_RESULTS: IErr = IErr(117);
    pub const CLIENT_TERM: IErr = IErr(119);
    pub const SERVER_TERM: IErr = IErr(120);
    pub const ACCESS_DENIED: IErr = IErr(121);
    pub const AUTH_TEST: IErr = IErr(142);
    pub const NO_MSG: IErr = IErr(144);
    pub const SERVER_DURATION_EXPIRED: IErr = IErr(160);
    pub const STREAM_CONNECT: IErr = IErr(202);
    pub const STREAM_WRITE: IErr = IErr(205);
    pub const STREAM_READ: IErr = IErr(206);
    pub const STREAM_ID: IErr = IErr(208);

    /// iperf3's text for the code.
    pub fn message(self) -> &'static str {
        match self.0 {
            3 => "some option you are trying to set is server only",
            4 => "some option you are trying to set is client only",
            5 => "test duration valid values are 0 to 86400 seconds",
            6 => "invalid number of parallel streams (min = 1, max = 128)",
            7 => "block size too large (maximum = 1048576 bytes)",
            8 => "socket buffer size too large",
            10 => "TCP MSS too large",
            12 => "bogus value for --omit",
            15 => "invalid burst count (maximum = 1000)",
            20 => "block size invalid (minimum = 16 bytes, maximum = 65507 bytes)",
            21 => "bad TOS value",
            22 => "you must specify a username, password, and path to a valid RSA public key",
            23 => "you must specify a path to a valid RSA private key and a user credential file",
            27 => "total required bandwidth is larger than server limit",
            35 => "cannot access authorized users file",
            37 => "client's requested duration exceeds the server's maximum permitted limit",
            106 => "unable to receive cookie at server",
            109 => "control socket has closed unexpectedly",
            110 => "received an unknown control message",
            114 => "unable to receive parameters from client",
            117 => "unable to receive results",
            119 => "the client has terminated",
            120 => "the server has terminated",
            121 => "the server is busy running a test. try again later",
            142 => "test authorization failed",
            144 => "idle timeout for receiving data",
            160 => "server test duration expired",
            200 => "unable to create a new stream",
            202 => "unable to connect stream",
            205 => "unable to write to stream socket",
            206 => "unable to read from stream socket",
            208 => "stream has an invalid id",
            _ => "error from the iperf3 server",
        }
    }
}

impl fmt::Display for IErr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (iperf3 error {})", self.message(), self.0)
    }
}

impl std::error::Error for IErr {}
