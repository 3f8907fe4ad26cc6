//! One module per subcommand: each turns its parsed arguments into work and output.

pub mod blast;
pub mod calc;
pub mod doctor;
pub mod fwd;
pub mod iperf;
pub mod out;
pub mod rr;
pub mod selftest;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A flag set by SIGINT or SIGTERM: the run ends early and reports what it
/// measured.
pub(crate) fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let f = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, f.clone())?;
    }
    Ok(f)
}
