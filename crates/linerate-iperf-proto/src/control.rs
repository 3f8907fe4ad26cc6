//! The control connection as a byte stream: state bytes and length-framed
//! JSON may arrive split or coalesced; nothing read past a message is lost.

use serde_json::Value;
use std::collections::VecDeque;
use thiserror::Error;

/// A JSON message that cannot be accepted.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum JsonFrameError {
    #[error("zero-length JSON message")]
    Empty,
    #[error("JSON message of {0} bytes is over the {1}-byte limit")]
    TooLarge(usize, usize),
    #[error("JSON message is not valid JSON: {0}")]
    Invalid(String),
}

/// Bytes received on a control connection, not yet consumed.
#[derive(Debug, Default)]
pub struct ControlBuf {
    buf: VecDeque<u8>,
}

impl ControlBuf {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend(data);
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn peek_byte(&self) -> Option<u8> {
        self.buf.front().copied()
    }

    pub fn take_byte(&mut self) -> Option<u8> {
        self.buf.pop_front()
    }

    /// Takes exactly `n` bytes, or nothing if fewer are buffered.
    pub fn take_exact(&mut self, n: usize) -> Option<Vec<u8>> {
        (self.buf.len() >= n).then(|| self.buf.drain(..n).collect())
    }

    /// Takes a length-prefixed JSON message once it is complete. Checks the
    /// length as soon as the prefix is in, so an oversized message is refused
    /// before its body is read.
    pub fn take_json(&mut self, max_bytes: usize) -> Result<Option<Value>, JsonFrameError> {
        if self.buf.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len == 0 {
            return Err(JsonFrameError::Empty);
        }
        if len > max_bytes {
            return Err(JsonFrameError::TooLarge(len, max_bytes));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        self.buf.drain(..4);
        let body: Vec<u8> = self.buf.drain(..len).collect();
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| JsonFrameError::Invalid(e.to_string()))
    }
}

/// Frames a JSON value as iperf3 does: u32 big-endian length, compact text.
pub fn frame_json(v: &Value) -> Vec<u8> {
    let text = v.to_string();
    let mut out = Vec::with_capacity(4 + text.len());
    out.extend_from_slice(&(text.len() as u32).to_be_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn split_and_coalesced() {
        let mut b = ControlBuf::default();
        let mut wire = vec![1u8, 2];
        wire.extend(frame_json(&json!({"a": 1})));
        wire.push(14);
        for chunk in wire.chunks(3) {
            b.push(chunk);
        }
        assert_eq!(b.take_byte(), Some(1));
        assert_eq!(b.take_byte(), Some(2));
        assert_eq!(b.take_json(100), Ok(Some(json!({"a": 1}))));
        assert_eq!(b.take_byte(), Some(14));
        assert!(b.is_empty());
    }

    #[test]
    fn partial_json_waits() {
        let mut b = ControlBuf::default();
        let f = frame_json(&json!([1, 2, 3]));
        b.push(&f[..5]);
        assert_eq!(b.take_json(100), Ok(None));
        b.push(&f[5..]);
        assert_eq!(b.take_json(100), Ok(Some(json!([1, 2, 3]))));
    }

    #[test]
    fn bad_frames() {
        let mut b = ControlBuf::default();
        b.push(&[0, 0, 0, 0]);
        assert_eq!(b.take_json(100), Err(JsonFrameError::Empty));
        let mut b = ControlBuf::default();
        b.push(&[0, 0, 0x20, 1]);
        assert_eq!(b.take_json(8192), Err(JsonFrameError::TooLarge(8193, 8192)));
        let mut b = ControlBuf::default();
        b.push(&[0, 0, 0, 3, b'{', b'x', b'}']);
        assert!(matches!(b.take_json(100), Err(JsonFrameError::Invalid(_))));
        assert_eq!(b.take_exact(2), None);
    }
}
