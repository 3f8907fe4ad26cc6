//! rr messages on a TCP stream: each message (the 32-byte rr header and
//! its payload) preceded by its length, a big-endian u32 that counts the
//! message's bytes (not its own 4). A reader never trusts that length: a
//! frame longer than its limit is an error before a byte of it is
//! buffered, and the buffer grows only to the frame it holds.

use linerate_wire::RR_HEADER_LEN;
use std::io::{self, Read};

/// Bytes of the length before each message.
pub const LEN_PREFIX: usize = 4;

/// What a connection writes first, if no longer than this, goes out in
/// one segment whatever the path's MSS (IPv4's smallest, 536 bytes): with
/// nothing sent before it, nothing is unacknowledged, and Nagle's
/// algorithm holds a small segment back only while something is. So
/// TCP_NODELAY matters from a connection's second write, or for a first
/// one longer than this.
pub const ONE_SEGMENT: usize = 536;

/// Largest message (header and payload) either side accepts on TCP.
pub const TCP_MESSAGE_MAX: usize = 1 << 20;

/// Room a reader starts with (and shrinks back to when idle).
const START: usize = 4096;

/// Why a stream's bytes are not rr frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// A length above the reader's limit.
    TooLong(u32),
    /// A length below the rr header.
    TooShort(u32),
}

/// Appends the length of a `len`-byte message to `out`.
pub fn put_len(out: &mut Vec<u8>, len: usize) {
    out.extend_from_slice(&(len as u32).to_be_bytes());
}

/// The frames arriving on one stream, read into one bounded buffer.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max: usize,
    /// The last read took less than the room it had: the socket had no
    /// more then, and another read would most likely say so.
    short: bool,
}

impl FrameReader {
    /// A reader that accepts messages of up to `max` bytes.
    pub fn new(max: usize) -> Self {
        Self {
            short: false,
            buf: Vec::new(),
            start: 0,
            end: 0,
            max: max.clamp(RR_HEADER_LEN, TCP_MESSAGE_MAX),
        }
    }

    /// Bytes read and not yet taken as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// Bytes of memory this reader holds.
    pub fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// The length of the frame at the front, checked, once its prefix is in.
    fn front_len(&self) -> Result<Option<usize>, FrameError> {
        if self.buffered() < LEN_PREFIX {
            return Ok(None);
        }
        let mut b = [0u8; LEN_PREFIX];
        b.copy_from_slice(&self.buf[self.start..self.start + LEN_PREFIX]);
        let n = u32::from_be_bytes(b);
        if n as usize > self.max {
            return Err(FrameError::TooLong(n));
        }
        if (n as usize) < RR_HEADER_LEN {
            return Err(FrameError::TooShort(n));
        }
        Ok(Some(n as usize))
    }

    /// Reads what `r` has into the buffer (one read call); `Ok(0)` is the
    /// end of the stream. Call [`FrameReader::next_frame`] until it says
    /// `None` before reading again: a frame's length is checked there, and
    /// the buffer only grows to the length of a checked frame.
    pub fn fill(&mut self, r: &mut impl Read) -> io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buf.len() > START * 4 {
                self.buf = vec![0; START];
            }
        }
        // Room for the whole frame at the front (its length was checked
        // by next_frame), at least a prefix, and a little more.
        let want = match self.front_len() {
            Ok(Some(n)) => LEN_PREFIX + n,
            _ => LEN_PREFIX,
        };
        if self.buf.len() - self.start < want.max(START) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.buf.len() < want.max(START) {
                self.buf.resize(want.max(START), 0);
            }
        } else if self.end == self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            // A whole frame is buffered: next_frame was not called.
            return Err(io::Error::other("frame reader full: take the frames first"));
        }
        let room = self.buf.len() - self.end;
        let n = r.read(&mut self.buf[self.end..])?;
        self.short = n < room;
        self.end += n;
        Ok(n)
    }

    /// Whether the last [`fill`](Self::fill) read less than it had room
    /// for (the socket was emptied: a level-triggered wait says when more
    /// comes, no read is needed to find out).
    pub fn last_read_short(&self) -> bool {
        self.short
    }

    /// The next whole message, taken out of the buffer (without its
    /// length), or `None` until more bytes come.
    pub fn next_frame(&mut self) -> Result<Option<&mut [u8]>, FrameError> {
        let Some(n) = self.front_len()? else {
            return Ok(None);
        };
        if self.buffered() < LEN_PREFIX + n {
            return Ok(None);
        }
        let at = self.start + LEN_PREFIX;
        self.start = at + n;
        Ok(Some(&mut self.buf[at..at + n]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader handing out its bytes in the given pieces.
    struct Pieces(Vec<Vec<u8>>);

    impl Read for Pieces {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let Some(p) = self.0.first_mut() else {
                return Ok(0);
            };
            let n = p.len().min(out.len());
            out[..n].copy_from_slice(&p[..n]);
            p.drain(..n);
            if p.is_empty() {
                self.0.remove(0);
            }
            Ok(n)
        }
    }

    /// A read that took less than its room says the socket was emptied;
    /// one that filled the room does not.
    #[test]
    fn a_short_read_is_told_apart_from_a_full_one() {
        let mut r = FrameReader::new(1 << 20);
        let mut src = Pieces(vec![frame(64, 1)]);
        assert_eq!(r.fill(&mut src).unwrap(), 68);
        assert!(r.last_read_short());
        assert_eq!(r.next_frame().unwrap().unwrap().len(), 64);
        let big = vec![7u8; 3 * START];
        let mut src = Pieces(vec![big]);
        let n = r.fill(&mut src).unwrap();
        assert!(n < 3 * START && !r.last_read_short(), "{n}");
    }

    fn frame(len: usize, fill: u8) -> Vec<u8> {
        let mut v = Vec::new();
        put_len(&mut v, len);
        v.extend(std::iter::repeat_n(fill, len));
        v
    }

    fn drain(r: &mut FrameReader, src: &mut Pieces) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut got = Vec::new();
        loop {
            while let Some(f) = r.next_frame()? {
                got.push(f.to_vec());
            }
            if r.fill(src).unwrap() == 0 {
                return Ok(got);
            }
        }
    }

    #[test]
    fn frames_split_anywhere_come_out_whole() {
        let mut all = Vec::new();
        for (i, len) in [32usize, 100, 5000, 32, 70_000].iter().enumerate() {
            all.extend(frame(*len, i as u8));
        }
        for cut in [1usize, 3, 4, 7, 33, 1000, 4096, 100_000] {
            let pieces = all.chunks(cut).map(<[u8]>::to_vec).collect();
            let mut r = FrameReader::new(100_000);
            let got = drain(&mut r, &mut Pieces(pieces)).unwrap();
            let lens: Vec<usize> = got.iter().map(Vec::len).collect();
            assert_eq!(lens, vec![32, 100, 5000, 32, 70_000], "cut {cut}");
            for (i, f) in got.iter().enumerate() {
                assert!(f.iter().all(|b| *b == i as u8), "cut {cut} frame {i}");
            }
            assert_eq!(r.buffered(), 0);
            assert!(r.capacity() <= 70_004 + 4096, "cut {cut}: {}", r.capacity());
        }
    }

    #[test]
    fn an_oversized_length_is_refused_before_anything_is_buffered() {
        let mut r = FrameReader::new(1000);
        let mut src = Pieces(vec![u32::MAX.to_be_bytes().to_vec(), vec![0; 64]]);
        assert_eq!(drain(&mut r, &mut src), Err(FrameError::TooLong(u32::MAX)));
        assert!(r.capacity() <= START, "{}", r.capacity());
        let mut r = FrameReader::new(1000);
        let mut src = Pieces(vec![frame(1001, 0)]);
        assert_eq!(drain(&mut r, &mut src), Err(FrameError::TooLong(1001)));
    }

    #[test]
    fn garbage_is_an_error_not_a_hang() {
        // ASCII where a length should be: a huge length, refused.
        let mut r = FrameReader::new(TCP_MESSAGE_MAX);
        let mut src = Pieces(vec![b"GET / HTTP/1.1\r\n\r\n".to_vec()]);
        assert!(matches!(
            drain(&mut r, &mut src),
            Err(FrameError::TooLong(_))
        ));
        // A length too short for a header.
        let mut r = FrameReader::new(TCP_MESSAGE_MAX);
        let mut src = Pieces(vec![frame(5, 1)]);
        assert_eq!(drain(&mut r, &mut src), Err(FrameError::TooShort(5)));
        // A frame cut short by the end of the stream: nothing comes out.
        let mut r = FrameReader::new(TCP_MESSAGE_MAX);
        let mut cut = frame(64, 1);
        cut.truncate(40);
        let got = drain(&mut r, &mut Pieces(vec![cut])).unwrap();
        assert!(got.is_empty());
        assert_eq!(r.buffered(), 40);
    }
}
