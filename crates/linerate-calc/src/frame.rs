//! From what the user knows (a frame size, or an IP/UDP/TCP payload size) to
//! the Ethernet frame size that the arithmetic needs.

use crate::{
    ETH_HEADER_BYTES, FCS_BYTES, FRAME_MAX_BYTES, FRAME_MIN_BYTES, IPV4_HEADER_BYTES,
    IPV6_HEADER_BYTES, TCP_HEADER_BYTES, UDP_HEADER_BYTES, VLAN_TAG_BYTES,
};
use thiserror::Error;

/// A size that makes no Ethernet frame.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error(
        "a {0}-byte frame is below Ethernet's minimum of {FRAME_MIN_BYTES} bytes (FCS included); \
         smaller payloads are padded: give the payload size instead (e.g. --udp-payload)"
    )]
    TooSmall(u64),
    #[error("a {bytes}-byte frame is above the {FRAME_MAX_BYTES}-byte jumbo maximum{from}")]
    TooLarge { bytes: u64, from: String },
}

/// Which network header sits inside the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Header {
    #[default]
    Ipv4,
    Ipv6,
}

impl Header {
    fn bytes(self) -> u64 {
        match self {
            Header::Ipv4 => IPV4_HEADER_BYTES,
            Header::Ipv6 => IPV6_HEADER_BYTES,
        }
    }
}

/// The size the user gave, at the layer they gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// Whole Ethernet frame, FCS included.
    Frame(u64),
    /// IP packet (header included).
    IpPacket(u64),
    /// UDP payload (after the 8-byte UDP header).
    Udp(u64),
    /// TCP payload (after a 20-byte TCP header without options).
    Tcp(u64),
}

/// A frame described at any layer, with its encapsulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameSpec {
    pub payload: Payload,
    pub ip: Header,
    /// 802.1Q tags (2 for QinQ).
    pub vlan_tags: u8,
}

/// The frame a [`FrameSpec`] makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Frame bytes on the wire (FCS included), after padding.
    pub bytes: u64,
    /// Padding Ethernet added to reach the minimum frame size.
    pub pad_bytes: u64,
}

impl FrameSpec {
    pub fn frame(payload: u64) -> Self {
        Self {
            payload: Payload::Frame(payload),
            ip: Header::Ipv4,
            vlan_tags: 0,
        }
    }

    /// Bytes in front of the IP packet and after it: MACs, tags, EtherType, FCS.
    pub fn l2_overhead_bytes(&self) -> u64 {
        ETH_HEADER_BYTES + u64::from(self.vlan_tags) * VLAN_TAG_BYTES + FCS_BYTES
    }

    /// Resolves the frame size, padding short frames as Ethernet does.
    pub fn resolve(&self) -> Result<Frame, FrameError> {
        let (unpadded, from) = match self.payload {
            Payload::Frame(bytes) => {
                if bytes < FRAME_MIN_BYTES {
                    return Err(FrameError::TooSmall(bytes));
                }
                (bytes, String::new())
            }
            Payload::IpPacket(ip) => (
                self.l2_overhead_bytes().saturating_add(ip),
                format!(" (from a {ip}-byte IP packet)"),
            ),
            Payload::Udp(p) => (
                self.l2_overhead_bytes() + self.ip.bytes() + UDP_HEADER_BYTES + p,
                format!(" (from a {p}-byte UDP payload)"),
            ),
            Payload::Tcp(p) => (
                self.l2_overhead_bytes() + self.ip.bytes() + TCP_HEADER_BYTES + p,
                format!(" (from a {p}-byte TCP payload)"),
            ),
        };
        if unpadded > FRAME_MAX_BYTES {
            return Err(FrameError::TooLarge {
                bytes: unpadded,
                from,
            });
        }
        let bytes = unpadded.max(FRAME_MIN_BYTES);
        Ok(Frame {
            bytes,
            pad_bytes: bytes - unpadded,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(payload: Payload, ip: Header, vlan_tags: u8) -> FrameSpec {
        FrameSpec {
            payload,
            ip,
            vlan_tags,
        }
    }

    #[test]
    fn udp_payload_to_frame() {
        let f = spec(Payload::Udp(100), Header::Ipv4, 0).resolve().unwrap();
        assert_eq!(f.bytes, 146);
        assert_eq!(f.pad_bytes, 0);
        let f6 = spec(Payload::Udp(100), Header::Ipv6, 0).resolve().unwrap();
        assert_eq!(f6.bytes, 166);
        let tagged = spec(Payload::Udp(100), Header::Ipv4, 1).resolve().unwrap();
        assert_eq!(tagged.bytes, 150);
        let qinq = spec(Payload::Udp(100), Header::Ipv4, 2).resolve().unwrap();
        assert_eq!(qinq.bytes, 154);
    }

    #[test]
    fn short_payload_is_padded() {
        let f = spec(Payload::Udp(1), Header::Ipv4, 0).resolve().unwrap();
        assert_eq!(f.bytes, 64);
        assert_eq!(f.pad_bytes, 64 - 47);
        let t = spec(Payload::Tcp(0), Header::Ipv4, 0).resolve().unwrap();
        assert_eq!((t.bytes, t.pad_bytes), (64, 6));
    }

    #[test]
    fn ip_packet_and_tcp() {
        assert_eq!(
            spec(Payload::IpPacket(1500), Header::Ipv4, 0)
                .resolve()
                .unwrap()
                .bytes,
            1518
        );
        assert_eq!(
            spec(Payload::Tcp(1460), Header::Ipv4, 0)
                .resolve()
                .unwrap()
                .bytes,
            1518
        );
        assert_eq!(
            spec(Payload::Tcp(1440), Header::Ipv6, 0)
                .resolve()
                .unwrap()
                .bytes,
            1518
        );
    }

    #[test]
    fn limits() {
        assert_eq!(
            FrameSpec::frame(63).resolve(),
            Err(FrameError::TooSmall(63))
        );
        assert_eq!(FrameSpec::frame(64).resolve().unwrap().bytes, 64);
        assert_eq!(FrameSpec::frame(9216).resolve().unwrap().bytes, 9216);
        assert!(matches!(
            FrameSpec::frame(9217).resolve(),
            Err(FrameError::TooLarge { bytes: 9217, .. })
        ));
        let err = spec(Payload::Udp(9200), Header::Ipv4, 0)
            .resolve()
            .unwrap_err();
        assert!(err.to_string().contains("9200-byte UDP payload"), "{err}");
        assert!(matches!(
            spec(Payload::IpPacket(u64::MAX), Header::Ipv4, 0).resolve(),
            Err(FrameError::TooLarge { .. })
        ));
    }
}
