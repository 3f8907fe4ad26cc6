//! One module per subcommand: each turns its parsed arguments into work and output.

pub mod calc;
