//! Which headers make a flow's packet a stack: a leaf the model, its
//! stacked headers and the tags all ask, so none of them imports another
//! for it.

/// Whether a packet's headers (a custom header left out) need a stack:
/// it has one of these headers.
pub fn is_stacked(names: &[&str]) -> bool {
    names
        .iter()
        .any(|n| matches!(*n, "mpls" | "gre" | "icmp" | "icmpv6"))
}
