//! The model's ports.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    pub name: String,
    /// The interface (or `https://agent:port/iface` on another agent).
    pub location: String,
}
