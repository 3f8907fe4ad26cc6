//! Sending frames of headers beyond a template's (`linerate_traffic::stack`:
//! MPLS labels, GRE, ICMP echo): each frame written whole, its flow the
//! spec's flow of its index (every field stepping as the spec says), its
//! probe that flow's id and next sequence number.

use super::send::Fill;
use linerate_backend::FrameSource;
use linerate_backend::port::{Endpoints, PayloadSource};
use linerate_traffic::FlowSpec;
use linerate_traffic::stack::Stack;
use linerate_traffic::template::Framing;
use linerate_wire::Probe;

/// Builds one worker's frames: frames `worker, worker + workers, …` of
/// the run (every worker counted), frame n of flow index n mod the flows'
/// count, of size n mod the size cycle's length.
pub(super) struct StackFiller<'a> {
    stack: &'a Stack,
    framing: &'a Framing,
    flows: &'a FlowSpec,
    sizes: &'a [u16],
    /// This worker's next frame of the run.
    n: u64,
    stride: u64,
    /// Frames sent per probe flow id (a u16 indexes it: no hashing, no
    /// bounds check, nothing allocated while sending).
    seq: Box<[u64; 1 << 16]>,
    tx_ns: u64,
}

impl<'a> StackFiller<'a> {
    pub(super) fn new(
        framing: &'a Framing,
        flows: &'a FlowSpec,
        sizes: &'a [u16],
        (worker, workers): (usize, usize),
    ) -> Self {
        StackFiller {
            stack: framing.stack.as_ref().expect("a run of stacked headers"),
            framing,
            flows,
            sizes,
            n: worker as u64,
            stride: workers as u64,
            seq: vec![0u64; 1 << 16]
                .into_boxed_slice()
                .try_into()
                .expect("65536 entries"),
            tx_ns: 0,
        }
    }
}

impl FrameSource for StackFiller<'_> {
    fn build(&mut self, buf: &mut [u8], _slot: usize) -> usize {
        let count = self.flows.count().max(1);
        let index = self.n % count;
        let flow = self.flows.flow(index);
        let flow_id = self.flows.ids.of(index);
        let seq = &mut self.seq[usize::from(flow_id)];
        *seq += 1;
        let size = self.sizes[(self.n % self.sizes.len() as u64) as usize];
        let probe = Probe {
            flow_id,
            seq: *seq,
            tx_ns: self.tx_ns,
        };
        let len = self
            .stack
            .write(buf, usize::from(size), self.framing, &flow, probe, self.n);
        self.n += self.stride;
        len
    }

    fn forget(&mut self, _slot: usize) {}
}

impl PayloadSource for StackFiller<'_> {
    fn payload(&mut self, _: &mut [u8], _: usize) -> (usize, usize, Option<Endpoints<'_>>) {
        unreachable!("stacked headers are crafted: `traffic` never gives them the UDP socket path")
    }
}

impl Fill for StackFiller<'_> {
    fn set_stamp(&mut self, tx_ns: u64) {
        self.tx_ns = tx_ns;
    }

    fn per_flow(&self) -> Vec<(u16, u64)> {
        (self.seq.iter().enumerate())
            .filter(|(_, s)| **s > 0)
            .map(|(i, s)| (i as u16, *s))
            .collect()
    }
}
