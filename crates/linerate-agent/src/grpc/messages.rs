//! The service's envelope messages (the models' `otg.proto`, 1.62:
//! `SetConfigRequest`, `GetMetricsResponse`, …), written out with prost's
//! derives. Each holds one message, kept here as its wire bytes (a nested
//! message and a `bytes` field are the same on the wire): `schema` reads
//! and writes them through the models' table.

/// `google.protobuf.Empty`: `GetConfig`'s and `GetVersion`'s request.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Empty {}

/// A request or answer holding one message (field 1, present or not):
/// `SetConfigRequest.config`, `SetConfigResponse.warning`,
/// `GetConfigResponse.config`, `SetControlStateRequest.control_state`,
/// `SetControlStateResponse.warning`, `GetMetricsRequest.metrics_request`,
/// `GetMetricsResponse.metrics_response`, `GetCaptureRequest.capture_request`,
/// `GetVersionResponse.version`, `GetStatesRequest.states_request`, and
/// the requests of the routes the agent does not serve.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Holding {
    #[prost(bytes = "vec", optional, tag = "1")]
    pub message: Option<Vec<u8>>,
}

impl Holding {
    pub fn of(message: Vec<u8>) -> Self {
        Self {
            message: Some(message),
        }
    }

    /// The message held (an absent one reads as empty, as protobuf has it).
    pub fn bytes(&self) -> &[u8] {
        self.message.as_deref().unwrap_or(&[])
    }
}

/// `GetCaptureResponse`: the capture file.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GetCaptureResponse {
    #[prost(bytes = "vec", tag = "1")]
    pub response_bytes: Vec<u8>,
}

/// `Data`: one piece of a streamed answer (`streamGetConfig`,
/// `streamGetMetrics`, `streamGetCapture`): the pieces in order are the
/// answer's message (or the capture file).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Data {
    #[prost(uint64, tag = "1")]
    pub chunk_size: u64,
    #[prost(bytes = "vec", tag = "2")]
    pub datum: Vec<u8>,
}

/// The pieces a streamed answer is sent in (snappi's default).
pub const CHUNK: usize = 4 * 1024 * 1024;

/// `bytes` as `Data` pieces of at most [`CHUNK`] (one empty piece for
/// nothing).
pub fn chunks(bytes: &[u8]) -> Vec<Data> {
    if bytes.is_empty() {
        return vec![Data {
            chunk_size: CHUNK as u64,
            datum: Vec::new(),
        }];
    }
    bytes
        .chunks(CHUNK)
        .map(|c| Data {
            chunk_size: CHUNK as u64,
            datum: c.to_vec(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn an_envelope_is_its_message_under_field_1() {
        // SetConfigRequest{config: Config{ports: [Port{name: "p"}]}} as
        // protobuf writes it.
        let wire = [0x0a, 0x05, 0x0a, 0x03, 0x12, 0x01, b'p'];
        let h = Holding::decode(&wire[..]).unwrap();
        assert_eq!(h.bytes(), &wire[2..]);
        assert_eq!(Holding::of(wire[2..].to_vec()).encode_to_vec(), wire);
        // An empty message present is still said (snappi reads a
        // `warning` with no warnings).
        assert_eq!(Holding::of(Vec::new()).encode_to_vec(), [0x0a, 0x00]);
        assert_eq!(Holding::decode(&[][..]).unwrap().bytes(), b"");
    }

    #[test]
    fn streamed_answers_come_in_pieces_of_4_mib() {
        let b = vec![7u8; CHUNK * 2 + 5];
        let c = chunks(&b);
        assert_eq!(
            c.iter().map(|d| d.datum.len()).collect::<Vec<_>>(),
            [CHUNK, CHUNK, 5]
        );
        assert_eq!(chunks(&[]).len(), 1);
    }
}
