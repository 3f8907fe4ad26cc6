//! The terminal: a password asked for without echo, and standard error
//! held back while a full-screen view is up.

use nix::sys::termios::{self, LocalFlags, SetArg};
use std::io::{BufRead, Write};
use std::os::fd::AsFd;

/// Asks on the terminal (prompt on stderr, so `-J` output stays clean) and
/// reads a line with echo off; fails when stdin is not a terminal.
pub fn read_password(prompt: &str) -> std::io::Result<String> {
    let stdin = std::io::stdin();
    let old = termios::tcgetattr(stdin.as_fd())?;
    let mut quiet = old.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    termios::tcsetattr(stdin.as_fd(), SetArg::TCSAFLUSH, &quiet)?;
    let mut err = std::io::stderr();
    let _ = write!(err, "{prompt}");
    let _ = err.flush();
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let _ = termios::tcsetattr(stdin.as_fd(), SetArg::TCSAFLUSH, &old);
    let _ = writeln!(err);
    read?;
    let end = line.find(['\r', '\n']).unwrap_or(line.len());
    line.truncate(end);
    Ok(line)
}

/// While held, what the process writes to its standard error (fd 2: every
/// thread's `eprintln!`, the libraries' warnings) goes into a pipe whose
/// lines are kept here instead of reaching the terminal, where they would
/// tear a full-screen view. Dropping it puts standard error back; the
/// lines kept are then for the caller to print.
#[derive(Debug)]
pub struct StderrCapture {
    saved: Option<std::os::fd::OwnedFd>,
    lines: std::sync::Arc<std::sync::Mutex<CapturedLines>>,
    /// Says when the reader reached EOF.
    reader_done: Option<std::sync::mpsc::Receiver<()>>,
}

/// The lines written while captured: the last [`CapturedLines::KEEP`]
/// and how many came before them.
#[derive(Debug, Default, Clone)]
pub struct CapturedLines {
    pub lines: std::collections::VecDeque<String>,
    pub dropped: u64,
}

impl CapturedLines {
    /// Lines kept, at most (a chatty library cannot fill memory).
    pub const KEEP: usize = 200;

    fn push(&mut self, line: String) {
        if self.lines.len() == Self::KEEP {
            self.lines.pop_front();
            self.dropped += 1;
        }
        self.lines.push_back(line);
    }
}

/// Longest wait for the capture's reader to take the last lines.
const READER_DRAIN_MAX: std::time::Duration = std::time::Duration::from_millis(500);

impl StderrCapture {
    /// Sends fd 2 into a pipe until dropped.
    pub fn start() -> std::io::Result<StderrCapture> {
        let saved = nix::unistd::dup(std::io::stderr().as_fd())?;
        let (read, write) = nix::unistd::pipe()?;
        let lines = std::sync::Arc::new(std::sync::Mutex::new(CapturedLines::default()));
        let keep = lines.clone();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("stderr-capture".into())
            .spawn(move || {
                // Ends at EOF: when fd 2 is given back and `write` closed.
                let r = std::io::BufReader::new(std::fs::File::from(read));
                for line in r.lines().map_while(Result::ok) {
                    if let Ok(mut l) = keep.lock() {
                        l.push(line);
                    }
                }
                let _ = done_tx.send(());
            })?;
        nix::unistd::dup2_stderr(&write)?;
        drop(write);
        Ok(StderrCapture {
            saved: Some(saved),
            lines,
            reader_done: Some(done_rx),
        })
    }

    /// The lines as they come, for a view drawn from another thread.
    pub fn shared(&self) -> std::sync::Arc<std::sync::Mutex<CapturedLines>> {
        self.lines.clone()
    }

    /// The lines so far.
    pub fn lines(&self) -> CapturedLines {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Gives fd 2 back and returns every line kept.
    pub fn finish(mut self) -> CapturedLines {
        self.restore();
        self.lines()
    }

    fn restore(&mut self) {
        if let Some(saved) = self.saved.take() {
            let _ = nix::unistd::dup2_stderr(&saved);
        }
        // fd 2 no longer holds the pipe: the reader sees EOF once what was
        // written is read. A child process started meanwhile may hold a
        // copy of the pipe and keep it open: the wait is bounded, and the
        // reader is left to end with that copy.
        if let Some(done) = self.reader_done.take() {
            let _ = done.recv_timeout(READER_DRAIN_MAX);
        }
    }
}

impl Drop for StderrCapture {
    fn drop(&mut self) {
        self.restore();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::FromRawFd;

    /// Writes to fd 2 itself (what a library's eprintln! reaches).
    fn write_fd2(text: &str) {
        let fd = nix::unistd::dup(std::io::stderr().as_fd()).unwrap();
        // SAFETY: `fd` is a fresh duplicate this File then owns.
        let mut f = unsafe { std::fs::File::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(fd)) };
        f.write_all(text.as_bytes()).unwrap();
    }

    /// What is written under the capture is kept, line by line, and a
    /// child that still holds the pipe does not hold the restore: it is
    /// given back within the drain bound.
    #[test]
    fn captured_lines_are_kept_and_a_child_cannot_hold_the_restore() {
        let c = StderrCapture::start().unwrap();
        write_fd2("first line\nsecond line\n");
        let mut child = std::process::Command::new("sleep")
            .arg("3")
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        let kept = c.finish();
        let took = t0.elapsed();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(kept.lines, ["first line", "second line"]);
        assert_eq!(kept.dropped, 0);
        assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    }
}
