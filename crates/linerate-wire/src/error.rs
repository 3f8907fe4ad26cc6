use core::fmt;

/// Which header an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Ethernet,
    Vlan,
    Ipv4,
    Ipv6,
    Udp,
    Tcp,
    Icmp,
    Arp,
    /// IPv6 neighbour discovery.
    Ndisc,
    Probe,
    Vxlan,
    /// linerate rr's request/response header.
    Rr,
}

/// Why bytes are not a valid header. Never panics, never allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before the header (or the length it declares) does.
    Truncated {
        layer: Layer,
        need: usize,
        have: usize,
    },
    /// A field has a value the header cannot have.
    Malformed { layer: Layer, what: &'static str },
    /// Valid bytes, but not what was asked for (e.g. not a linerate probe).
    Unsupported { layer: Layer, what: &'static str },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { layer, need, have } => {
                write!(
                    f,
                    "{layer:?} header truncated: need {need} bytes, have {have}"
                )
            }
            Error::Malformed { layer, what } => write!(f, "malformed {layer:?} header: {what}"),
            Error::Unsupported { layer, what } => write!(f, "unsupported {layer:?}: {what}"),
        }
    }
}

impl core::error::Error for Error {}

pub(crate) fn need(layer: Layer, need: usize, have: usize) -> Result<(), Error> {
    if have < need {
        Err(Error::Truncated { layer, need, have })
    } else {
        Ok(())
    }
}
