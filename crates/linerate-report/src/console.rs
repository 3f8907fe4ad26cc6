//! Where a command's output goes, and what happens when it cannot be
//! written. Every byte for standard output, `--logfile`, `--csv` and the
//! other result files passes through a [`Checked`] writer: the first
//! failure is kept with where it went, what follows to that target is
//! dropped (the run goes on to its end and the other outputs still get
//! everything), and [`Console::finish`] turns it into the exit code: a
//! result that was not saved fails the run; a closed pipe (`| head -1`)
//! ends it quietly with 141, as a shell reports SIGPIPE. What is said of
//! a failure (and the warnings said once) goes to the console's `say`,
//! which the binary points at standard error: this crate prints nothing.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};

/// Where a console's lines for people go (the binary's: standard error).
pub type Say = Arc<dyn Fn(&str) + Send + Sync>;

/// A run's outputs: made once by `main`, handed to the command, and
/// cloned into every [`Checked`] writer it opens. It keeps the outputs
/// that failed (each said once, when it failed) and whether each was a
/// closed pipe; [`Console::finish`] turns them into the exit code.
#[derive(Clone)]
pub struct Console {
    failed: Arc<Mutex<Vec<(String, bool)>>>,
    /// The warnings said once a run, said.
    warned: Arc<Mutex<Vec<&'static str>>>,
    say: Say,
}

impl Default for Console {
    /// A console that says nothing (its failures still count).
    fn default() -> Self {
        Console::new(Arc::new(|_: &str| {}))
    }
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Console {
    /// A console whose lines for people go to `say`.
    pub fn new(say: Say) -> Self {
        Console {
            failed: Arc::default(),
            warned: Arc::default(),
            say,
        }
    }

    /// Says `warning` unless this run said it already.
    pub fn warn_once(&self, warning: &'static str) {
        if let Ok(mut w) = self.warned.lock()
            && !w.contains(&warning)
        {
            w.push(warning);
            (self.say)(warning);
        }
    }

    fn record(&self, target: &str, e: &io::Error) {
        let pipe = e.kind() == io::ErrorKind::BrokenPipe;
        if let Ok(mut failed) = self.failed.lock()
            && !failed.iter().any(|(t, _)| t == target)
        {
            failed.push((target.to_string(), pipe));
            // Said when it happens (a server goes on serving); a reader
            // that went away needs no word.
            if !pipe {
                (self.say)(&format!(
                    "linerate: error: the output to {target} could not be written ({e}): the result is not saved"
                ));
            }
        }
    }
    /// Standard output, checked.
    pub fn stdout(&self) -> Checked<io::Stdout> {
        self.checked(io::stdout(), "standard output")
    }

    /// `inner`, checked: its failure is kept under `target`'s name.
    pub fn checked<W: Write>(&self, inner: W, target: impl Into<String>) -> Checked<W> {
        Checked {
            inner,
            target: target.into(),
            failed: false,
            console: self.clone(),
        }
    }

    /// The exit code once the command returned `code`: standard output
    /// is flushed, and an output that failed (said on stderr when it did)
    /// makes a successful run fail (1); only closed pipes end it with 141.
    pub fn finish(&self, code: u8) -> u8 {
        let _ = self.stdout().flush();
        let failed = self.failed.lock().map(|f| f.clone()).unwrap_or_default();
        if failed.iter().any(|(_, pipe)| !pipe) {
            code.max(1)
        } else if failed.is_empty() {
            code
        } else {
            code.max(141)
        }
    }
}

/// A writer whose failures are kept for the exit code (see the module).
#[derive(Debug)]
pub struct Checked<W> {
    inner: W,
    target: String,
    failed: bool,
    console: Console,
}

impl<W: Write> Checked<W> {
    fn check<T>(&mut self, r: io::Result<T>, ok: T) -> io::Result<T> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                self.console.record(&self.target, &e);
                self.failed = true;
                Ok(ok)
            }
            r => r,
        }
    }
}

impl<W: Write> Write for Checked<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.failed {
            return Ok(buf.len());
        }
        let r = self.inner.write(buf);
        self.check(r, buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.failed {
            return Ok(());
        }
        let r = self.inner.flush();
        self.check(r, ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from_raw_os_error(28))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    struct ClosedPipe;

    impl Write for ClosedPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_pipe_ends_quietly_with_141_unless_a_result_was_lost() {
        let console = Console::default();
        let _ = console.checked(ClosedPipe, "standard output").write(b"x");
        assert_eq!(console.finish(0), 141);
        assert_eq!(console.finish(2), 141, "the larger code stands");
        let _ = console.checked(Full, "--csv out.csv").write(b"x");
        assert_eq!(console.finish(0), 1, "a lost result is a failure");
    }

    #[test]
    fn a_failed_write_is_kept_and_what_follows_is_dropped() {
        let console = Console::default();
        assert_eq!(console.finish(3), 3, "nothing failed: the command's code");
        let mut w = console.checked(Full, "test target");
        assert_eq!(w.write(b"abc").unwrap(), 3);
        assert!(w.failed);
        assert_eq!(w.write(b"more").unwrap(), 4);
        let failed = console.failed.lock().unwrap().clone();
        assert_eq!(failed, [("test target".to_string(), false)]);
        assert_eq!(console.finish(0), 1, "a result not saved fails the run");
        assert_eq!(
            Console::default().finish(0),
            0,
            "another run's console knows nothing of it"
        );
    }
}
