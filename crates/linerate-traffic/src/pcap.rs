//! Traces to replay: pcap and pcapng files of Ethernet frames, loaded whole
//! (bounded) and checked before anything is sent, and rewriting of MAC and
//! IP addresses with checksums fixed, as tcprewrite does.

use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::{Block, PcapNgReader};

use std::path::Path;
use std::time::Duration;
use thiserror::Error;

/// Most frames and bytes a trace may hold in memory.
pub const TRACE_FRAMES_MAX: usize = 4_000_000;
pub const TRACE_BYTES_MAX: usize = 1 << 30;

#[derive(Debug, Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: not a pcap or pcapng file")]
    NotPcap { path: String },
    #[error("{path}: corrupt or truncated capture after {frames} frames ({what})")]
    Corrupt {
        path: String,
        frames: usize,
        what: String,
    },
    #[error(
        "{path}: frame {index} was cut at {caplen} of {len} bytes by the capture's snaplen; it cannot be replayed"
    )]
    Snapped {
        path: String,
        index: usize,
        caplen: usize,
        len: usize,
    },
    #[error("{path}: link type {linktype} is not Ethernet")]
    NotEthernet { path: String, linktype: u32 },
    #[error("{path}: no frames")]
    Empty { path: String },
    #[error("{path}: more than {TRACE_FRAMES_MAX} frames or {TRACE_BYTES_MAX} bytes")]
    TooLarge { path: String },
}

/// Frames and their capture times (relative to the first).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    pub frames: Vec<Vec<u8>>,
    pub times: Vec<Duration>,
}

impl Trace {
    pub fn load(path: &Path) -> Result<Self, TraceError> {
        let p = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
            path: p.clone(),
            source,
        })?;
        // The parser must not take the process down on a hostile file.
        std::panic::catch_unwind(|| parse(&bytes, &p)).unwrap_or_else(|_| {
            Err(TraceError::Corrupt {
                path: p.clone(),
                frames: 0,
                what: "parser failure".into(),
            })
        })
    }
}

fn parse(bytes: &[u8], p: &str) -> Result<Trace, TraceError> {
    let magic = bytes
        .get(..4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    let mut l = Loading {
        path: p,
        t: Trace::default(),
        total: 0,
    };
    match magic {
        Some(0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1) => l.pcap(bytes)?,
        Some(0x0a0d_0d0a) => l.pcapng(bytes)?,
        _ => {
            return Err(TraceError::NotPcap {
                path: p.to_string(),
            });
        }
    }
    let mut t = l.t;
    if t.frames.is_empty() {
        return Err(TraceError::Empty {
            path: p.to_string(),
        });
    }
    let first = t.times[0];
    for x in &mut t.times {
        *x = x.saturating_sub(first);
    }
    Ok(t)
}

/// A trace being read from the file at `path`, with its bytes so far.
struct Loading<'p> {
    path: &'p str,
    t: Trace,
    total: usize,
}

impl Loading<'_> {
    /// Adds a frame: refused if it was cut short (`orig` is its length on
    /// the wire) or the trace grows past its bounds.
    fn push(&mut self, ts: Duration, data: &[u8], orig: usize) -> Result<(), TraceError> {
        let t = &mut self.t;
        if data.len() < orig {
            return Err(TraceError::Snapped {
                path: self.path.to_string(),
                index: t.frames.len(),
                caplen: data.len(),
                len: orig,
            });
        }
        self.total += data.len();
        if t.frames.len() >= TRACE_FRAMES_MAX || self.total > TRACE_BYTES_MAX {
            return Err(TraceError::TooLarge {
                path: self.path.to_string(),
            });
        }
        t.frames.push(data.to_vec());
        t.times.push(ts);
        Ok(())
    }

    fn corrupt(&self, frames: usize, e: pcap_file::PcapError) -> TraceError {
        TraceError::Corrupt {
            path: self.path.to_string(),
            frames,
            what: e.to_string(),
        }
    }

    fn not_ethernet(&self, linktype: u32) -> TraceError {
        TraceError::NotEthernet {
            path: self.path.to_string(),
            linktype,
        }
    }

    /// A classic pcap file's frames.
    fn pcap(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        let mut r = PcapReader::new(bytes).map_err(|e| self.corrupt(0, e))?;
        if r.header().datalink != DataLink::ETHERNET {
            return Err(self.not_ethernet(u32::from(r.header().datalink)));
        }
        // Raw records: pcap-file's packet reader refuses a record whose
        // original length exceeds the header's snaplen, which is what a
        // frame cut by that snaplen is (`push` names it so). A record
        // holding more than the snaplen is corrupt.
        let header = r.header();
        while let Some(raw) = r.next_raw_packet() {
            let frames = self.t.frames.len();
            let raw = raw.map_err(|e| self.corrupt(frames, e))?;
            if raw.incl_len > header.snaplen {
                return Err(self.corrupt(
                    frames,
                    pcap_file::PcapError::InvalidField("PacketHeader incl_len > snap_len"),
                ));
            }
            let pkt = raw
                .try_into_pcap_packet(header.ts_resolution, u32::MAX)
                .map_err(|e| self.corrupt(frames, e))?;
            self.push(pkt.timestamp, &pkt.data, pkt.orig_len as usize)?;
        }
        Ok(())
    }

    /// A pcapng file's packet blocks (the other blocks skipped).
    fn pcapng(&mut self, bytes: &[u8]) -> Result<(), TraceError> {
        let mut r = PcapNgReader::new(bytes).map_err(|e| self.corrupt(0, e))?;
        while let Some(block) = r.next_block() {
            let block = block.map_err(|e| self.corrupt(self.t.frames.len(), e))?;
            let (iface, ts, data, orig) = match block {
                Block::EnhancedPacket(b) => (
                    Some(b.interface_id),
                    b.timestamp,
                    b.data.to_vec(),
                    b.original_len as usize,
                ),
                Block::SimplePacket(b) => (
                    Some(0),
                    Duration::ZERO,
                    b.data.to_vec(),
                    b.original_len as usize,
                ),
                _ => (None, Duration::ZERO, Vec::new(), 0),
            };
            let Some(iface) = iface else { continue };
            let link = r.interfaces().get(iface as usize).map(|i| i.linktype);
            if link != Some(DataLink::ETHERNET) {
                return Err(self.not_ethernet(link.map_or(u32::MAX, u32::from)));
            }
            self.push(ts, &data, orig)?;
        }
        Ok(())
    }
}

pub use crate::rewrite::{Rewrite, rewrite};

/// Writes received frames to a pcap file (nanosecond timestamps, Ethernet),
/// cut to `snaplen` bytes each and bounded to `max_frames`. After the first
/// write error it stops writing and keeps the error, so a full disk costs
/// the capture, never the measurement.
#[derive(Debug)]
pub struct CaptureWriter {
    path: String,
    writer: Option<pcap_file::pcap::PcapWriter<std::io::BufWriter<std::fs::File>>>,
    snaplen: u32,
    max_frames: u64,
    pub written: u64,
    pub error: Option<String>,
}

impl CaptureWriter {
    /// Creates the file and writes its header.
    pub fn create(
        path: &Path,
        snaplen: u32,
        max_frames: u64,
        overwrite: bool,
    ) -> Result<Self, TraceError> {
        let p = path.display().to_string();
        let io_err = |source| TraceError::Io {
            path: p.clone(),
            source,
        };
        let refuse = |why: &str| io_err(std::io::Error::other(why.to_string()));
        // Never through a symbolic link, never over a file unless asked;
        // O_CREAT|O_EXCL (create_new) refuses both, and a link planted
        // between the removal and the creation.
        if overwrite {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(refuse("is a symbolic link (not followed)"));
                }
                Ok(m) if m.is_file() => std::fs::remove_file(path).map_err(io_err)?,
                Ok(_) => return Err(refuse("exists and is not a regular file")),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => {
                    refuse("exists (or is a link): give --force to replace a file")
                }
                _ => io_err(e),
            })?;
        // The header says the snaplen frames are cut at. A record whose
        // original length exceeds it is what a snaplen means (tcpdump and
        // libpcap read it so); pcap-file's packet reader refuses one, so
        // `parse` reads raw records.
        let snaplen = snaplen.max(64);
        let header = pcap_file::pcap::PcapHeader {
            snaplen,
            datalink: DataLink::ETHERNET,
            ts_resolution: pcap_file::TsResolution::NanoSecond,
            endianness: pcap_file::Endianness::native(),
            ..Default::default()
        };
        let writer =
            pcap_file::pcap::PcapWriter::with_header(std::io::BufWriter::new(file), header)
                .map_err(|e| io_err(std::io::Error::other(e.to_string())))?;
        Ok(Self {
            path: p,
            writer: Some(writer),
            snaplen,
            max_frames,
            written: 0,
            error: None,
        })
    }

    /// Whether more frames will be written.
    pub fn wants_more(&self) -> bool {
        self.writer.is_some() && self.written < self.max_frames
    }

    /// Appends one frame seen at `wall_ns` (nanoseconds since the Unix epoch).
    pub fn write(&mut self, wall_ns: u64, frame: &[u8]) {
        let Some(w) = self
            .writer
            .as_mut()
            .filter(|_| self.written < self.max_frames)
        else {
            return;
        };
        let cut = &frame[..frame.len().min(self.snaplen as usize)];
        let packet = pcap_file::pcap::PcapPacket::new(
            Duration::from_nanos(wall_ns),
            frame.len() as u32,
            cut,
        );
        match w.write_packet(&packet) {
            Ok(_) => self.written += 1,
            Err(e) => {
                // The I/O error itself (pcap-file's text for it is vague).
                let why = match e {
                    pcap_file::PcapError::IoError(io) => io.to_string(),
                    other => other.to_string(),
                };
                self.error = Some(format!("writing {}: {why}", self.path));
                self.writer = None;
            }
        }
    }

    /// Flushes the file; the first error (of a write or of this flush), if any.
    pub fn finish(&mut self) -> Option<String> {
        if let Some(w) = self.writer.take() {
            use std::io::Write as _;
            if let Err(e) = w.into_writer().flush() {
                self.error.get_or_insert(format!("{}: {e}", self.path));
            }
        }
        self.error.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::{Ipv4Packet, MacAddr, TcpPacket, UdpPacket, ip_proto};
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};

    #[test]
    fn capture_writer_round_trips_and_stops_at_its_bounds() {
        let path = std::env::temp_dir().join(format!("linerate-cap-{}.pcap", std::process::id()));
        let mut w = CaptureWriter::create(&path, 100, 3, false).unwrap();
        let frames: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 60 + 40 * i as usize]).collect();
        for (i, f) in frames.iter().enumerate() {
            w.write(1_700_000_000_000_000_000 + i as u64 * 1_500, f);
        }
        assert!(!w.wants_more());
        assert_eq!((w.written, w.finish()), (3, None));
        let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(r.header().snaplen, 100);
        let mut got = Vec::new();
        // Raw records: pcap-file's packet reader refuses an original length
        // above the header's snaplen.
        while let Some(p) = r.next_raw_packet() {
            let p = p
                .unwrap()
                .try_into_pcap_packet(pcap_file::TsResolution::NanoSecond, u32::MAX)
                .unwrap();
            got.push((p.timestamp, p.orig_len, p.data.to_vec()));
        }
        let _ = std::fs::remove_file(&path);
        // Three frames (the bound), the third cut to the snaplen but with
        // its original length kept; nanosecond timestamps.
        assert_eq!(got.len(), 3);
        assert_eq!((got[0].1, &got[0].2), (60, &frames[0]));
        assert_eq!((got[1].1, &got[1].2), (100, &frames[1]));
        assert_eq!((got[2].1, &got[2].2[..]), (140, &frames[2][..100]));
        assert_eq!(got[2].0 - got[0].0, Duration::from_nanos(3_000));
        // A file that cannot be created is a typed error naming it.
        let e =
            CaptureWriter::create(Path::new("/nonexistent-dir/x.pcap"), 100, 1, false).unwrap_err();
        assert!(e.to_string().contains("/nonexistent-dir/x.pcap"), "{e}");
    }

    /// The file header's snaplen is the one in effect (`--snaplen N`, at
    /// least 64), not a fixed 262144; records are cut at it with their
    /// original length kept, and our own trace loader reads the file back
    /// (a cut frame is refused as cut, not as a corrupt file).
    #[test]
    fn capture_header_says_the_snaplen_records_are_cut_at() {
        let dir = std::env::temp_dir().join(format!("lr-snap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (asked, in_effect) in [(96u32, 96u32), (200, 200), (10, 64), (262_144, 262_144)] {
            let path = dir.join(format!("s{asked}.pcap"));
            let mut w = CaptureWriter::create(&path, asked, 10, false).unwrap();
            w.write(1_700_000_000_000_000_000, &udp_frame(1)); // 60 bytes
            let big: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
            w.write(1_700_000_000_000_001_000, &big);
            assert_eq!(w.finish(), None);
            let b = std::fs::read(&path).unwrap();
            let le = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
            // Native endianness is little here (x86-64, aarch64): the
            // nanosecond magic, then the snaplen at 16..20, Ethernet at 20.
            assert_eq!(le(0), 0xa1b2_3c4d);
            assert_eq!(le(16), in_effect, "header snaplen for --snaplen {asked}");
            assert_eq!(le(20), 1);
            // First record at 24: incl_len at +8, orig_len at +12.
            assert_eq!((le(24 + 8), le(24 + 12)), (60, 60));
            let second = 24 + 16 + 60;
            let cut = 300.min(in_effect);
            assert_eq!((le(second + 8), le(second + 12)), (cut, 300));
            assert_eq!(&b[second + 16..], &big[..cut as usize]);
            // pcap-file's raw reader agrees on the header and the records.
            let mut r = pcap_file::pcap::PcapReader::new(&b[..]).unwrap();
            assert_eq!(r.header().snaplen, in_effect);
            let mut lens = Vec::new();
            while let Some(p) = r.next_raw_packet() {
                let p = p.unwrap();
                lens.push((p.incl_len, p.orig_len));
            }
            assert_eq!(lens, [(60, 60), (cut, 300)]);
            // The loader: a cut frame is a cut frame (not "corrupt").
            match parse(&b, "s.pcap") {
                Ok(t) => {
                    assert!(cut == 300, "loaded a cut capture");
                    assert_eq!(t.frames[1], big);
                }
                Err(TraceError::Snapped {
                    index: 1,
                    caplen,
                    len: 300,
                    ..
                }) => assert_eq!(caplen as u32, cut),
                Err(e) => panic!("--snaplen {asked}: {e}"),
            }
            let _ = std::fs::remove_file(&path);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_capture_never_replaces_a_file_unasked_nor_follows_a_link() {
        let dir = std::env::temp_dir().join(format!("lr-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("old.pcap");
        std::fs::write(&file, b"keep me").unwrap();
        let e = CaptureWriter::create(&file, 100, 1, false).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
        // A link to a file: refused with or without --force, target intact.
        let link = dir.join("link.pcap");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&file, &link).unwrap();
        for force in [false, true] {
            assert!(CaptureWriter::create(&link, 100, 1, force).is_err());
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"keep me");
        // A dangling link is not followed either (it would create its target).
        let dangling = dir.join("dangling.pcap");
        let _ = std::fs::remove_file(&dangling);
        std::os::unix::fs::symlink(dir.join("nowhere.pcap"), &dangling).unwrap();
        assert!(CaptureWriter::create(&dangling, 100, 1, false).is_err());
        assert!(!dir.join("nowhere.pcap").exists());
        // --force replaces a regular file.
        let mut w = CaptureWriter::create(&file, 100, 1, true).unwrap();
        w.write(1, &[0u8; 60]);
        assert_eq!(w.finish(), None);
        assert_ne!(std::fs::read(&file).unwrap(), b"keep me");
        // Not a regular file: refused.
        assert!(CaptureWriter::create(Path::new("/dev/null"), 100, 1, true).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn udp_frame(i: u8) -> Vec<u8> {
        let mut b = vec![0u8; 60];
        b[12..14].copy_from_slice(&[0x08, 0x00]);
        linerate_wire::Ipv4Repr {
            src: [198, 18, 0, 1].into(),
            dst: [198, 18, 0, 2].into(),
            protocol: ip_proto::UDP,
            payload_len: 26,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: u16::from(i),
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut b[14..]));
        b[42] = i;
        linerate_wire::UdpRepr {
            src_port: 1000,
            dst_port: 9,
            payload_len: 18,
        }
        .emit(
            &mut UdpPacket::new_unchecked(&mut b[34..60]),
            Some(("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())),
        );
        b
    }

    fn write_pcap(frames: &[Vec<u8>]) -> Vec<u8> {
        let mut w = PcapWriter::with_header(
            Vec::new(),
            PcapHeader {
                datalink: DataLink::ETHERNET,
                ..Default::default()
            },
        )
        .unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write_packet(&PcapPacket::new(
                Duration::from_millis(10 * i as u64),
                f.len() as u32,
                f,
            ))
            .unwrap();
        }
        w.into_writer()
    }

    #[test]
    fn loads_pcap_and_reports_corruption() {
        let frames: Vec<Vec<u8>> = (0..5).map(udp_frame).collect();
        let bytes = write_pcap(&frames);
        let t = parse(&bytes, "t.pcap").unwrap();
        assert_eq!(t.frames, frames);
        assert_eq!(t.times[4], Duration::from_millis(40));
        let cut = &bytes[..bytes.len() - 7];
        assert!(
            matches!(
                parse(cut, "t.pcap"),
                Err(TraceError::Corrupt { frames: 4, .. })
            ),
            "{:?}",
            parse(cut, "t.pcap")
        );
        assert!(matches!(
            parse(b"hello world", "t.pcap"),
            Err(TraceError::NotPcap { .. })
        ));
        assert!(matches!(
            parse(&bytes[..24], "t.pcap"),
            Err(TraceError::Empty { .. })
        ));
        let mut snapped = PcapWriter::with_header(
            Vec::new(),
            PcapHeader {
                datalink: DataLink::ETHERNET,
                ..Default::default()
            },
        )
        .unwrap();
        snapped
            .write_packet(&PcapPacket::new(Duration::ZERO, 100, &frames[0]))
            .unwrap();
        assert!(matches!(
            parse(&snapped.into_writer(), "t.pcap"),
            Err(TraceError::Snapped {
                caplen: 60,
                len: 100,
                ..
            })
        ));
    }

    #[test]
    fn rewrite_keeps_checksums_valid() {
        let mut f = udp_frame(1);
        let rw = Rewrite {
            dst_mac: MacAddr::parse("02:00:00:00:00:0b"),
            src_ip: Some("198.19.7.7".parse().unwrap()),
            dst_ip: Some("198.19.8.8".parse().unwrap()),
            ..Rewrite::default()
        };
        rewrite(&mut f, &rw);
        let p = linerate_wire::parse_frame(&f).unwrap();
        assert_eq!(p.eth.dst, MacAddr::parse("02:00:00:00:00:0b").unwrap());
        let linerate_wire::L3::Ipv4(ip) = p.l3 else {
            panic!()
        };
        assert_eq!(ip.src, std::net::Ipv4Addr::new(198, 19, 7, 7));
        assert!(Ipv4Packet::new_checked(&f[14..]).unwrap().verify_checksum());
        assert!(
            UdpPacket::new_checked(&f[34..])
                .unwrap()
                .verify_checksum(ip.src.into(), ip.dst.into())
        );
        // TCP too.
        let mut t = vec![0u8; 54];
        t[12..14].copy_from_slice(&[0x08, 0x00]);
        linerate_wire::Ipv4Repr {
            src: [198, 18, 0, 1].into(),
            dst: [198, 18, 0, 2].into(),
            protocol: ip_proto::TCP,
            payload_len: 20,
            ttl: 64,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut t[14..]));
        linerate_wire::TcpRepr {
            src_port: 1,
            dst_port: 2,
            seq: 3,
            ack: 0,
            flags: linerate_wire::TcpFlags(2),
            window: 100,
            urgent: 0,
            payload_len: 0,
        }
        .emit(
            &mut TcpPacket::new_unchecked(&mut t[34..]),
            Some(("198.18.0.1".parse().unwrap(), "198.18.0.2".parse().unwrap())),
        );
        rewrite(&mut t, &rw);
        assert!(
            TcpPacket::new_checked(&t[34..])
                .unwrap()
                .verify_checksum("198.19.7.7".parse().unwrap(), "198.19.8.8".parse().unwrap())
        );
    }

    fn write_pcapng(frames: &[Vec<u8>]) -> Vec<u8> {
        use pcap_file::pcapng::PcapNgWriter;
        use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
        use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionBlock;
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 0,
            options: vec![],
        })
        .unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write_pcapng_block(EnhancedPacketBlock {
                interface_id: 0,
                timestamp: Duration::from_millis(10 * i as u64),
                original_len: f.len() as u32,
                data: std::borrow::Cow::Borrowed(&f[..]),
                options: vec![],
            })
            .unwrap();
        }
        w.into_inner()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Hostile files: valid pcap and pcapng traces with bytes changed
        /// and cut short. The parser itself (not just `load`'s guard) must
        /// answer with frames or a typed error, never a panic.
        #[test]
        fn damaged_traces_never_panic_the_parser(
            ng in proptest::bool::ANY,
            flips in proptest::collection::vec((0usize..4096, proptest::num::u8::ANY), 0..8),
            cut in 0usize..4096,
        ) {
            let frames: Vec<Vec<u8>> = (0..4).map(udp_frame).collect();
            let mut b = if ng { write_pcapng(&frames) } else { write_pcap(&frames) };
            for (at, v) in flips {
                let n = b.len();
                b[at % n] ^= v;
            }
            b.truncate(cut.min(b.len()));
            match parse(&b, "fuzzed") {
                Ok(t) => proptest::prop_assert_eq!(t.frames.len(), t.times.len()),
                Err(e) => proptest::prop_assert!(!e.to_string().is_empty()),
            }
        }
    }
}
