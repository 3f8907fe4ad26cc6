//! An `arp` header's fields (`crate::arp_flow`): a leaf of the model, read
//! by `packet.rs`, held by `headers.rs`'s `Headers`.

use linerate_traffic::flows::Range;

/// An `arp` header's fields, each a range walked per frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arp {
    pub hardware_type: Range,
    pub protocol_type: Range,
    pub hardware_length: Range,
    pub protocol_length: Range,
    pub operation: Range,
    pub sender_hardware_addr: Range,
    pub sender_protocol_addr: Range,
    pub target_hardware_addr: Range,
    pub target_protocol_addr: Range,
}

impl Arp {
    /// The fields with their widths in bytes, in frame order.
    pub(crate) fn fields(&self) -> [(Range, usize); 9] {
        [
            (self.hardware_type, 2),
            (self.protocol_type, 2),
            (self.hardware_length, 1),
            (self.protocol_length, 1),
            (self.operation, 2),
            (self.sender_hardware_addr, 6),
            (self.sender_protocol_addr, 4),
            (self.target_hardware_addr, 6),
            (self.target_protocol_addr, 4),
        ]
    }
}
