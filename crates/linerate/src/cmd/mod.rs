//! One module per subcommand: each turns its parsed arguments into work and output.

pub mod blast;
pub mod calc;
pub mod doctor;
pub mod iperf;
pub mod selftest;
