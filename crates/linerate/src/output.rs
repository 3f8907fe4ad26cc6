//! Where the binary's output goes: the run's `Console` and its `Checked`
//! writers (`linerate_report::console`: a failed output is kept for the
//! exit code, a closed pipe ends the run quietly with 141), said on
//! standard error; result files created new (`linerate_report::files`).

pub use linerate_report::console::Console;
pub use linerate_report::files::{Whole, append_log, create_new};

/// The run's console: what it says of failed outputs, on standard error.
pub fn console() -> Console {
    Console::new(std::sync::Arc::new(|line: &str| eprintln!("{line}")))
}

/// Writes a line to the console's standard output (checked: never
/// panics): `say!(console, "...", ...)`.
#[macro_export]
macro_rules! say {
    ($console:expr, $($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($console.stdout(), $($arg)*);
    }};
}

/// Writes to the console's standard output without a newline (checked).
#[macro_export]
macro_rules! say_raw {
    ($console:expr, $($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!($console.stdout(), $($arg)*);
    }};
}
