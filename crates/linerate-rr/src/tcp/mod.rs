//! `linerate rr` over TCP: the framing ([`frame`]), the server
//! ([`server`]) and the client's TCP workers (persistent connections and
//! connect-per-transaction).

pub mod config;
pub mod frame;
pub mod server;
mod worker;

pub use config::{TcpServerConfig, TcpServerCounts};
pub use frame::{FrameError, FrameReader, LEN_PREFIX, TCP_MESSAGE_MAX};
pub(crate) use server::raise_nofile;
pub use server::{TcpServer, TcpServerReport};
pub use worker::answer_len;
