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
    reader: Option<std::thread::JoinHandle<()>>,
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

impl StderrCapture {
    /// Sends fd 2 into a pipe until dropped.
    pub fn start() -> std::io::Result<StderrCapture> {
        let saved = nix::unistd::dup(std::io::stderr().as_fd())?;
        let (read, write) = nix::unistd::pipe()?;
        let lines = std::sync::Arc::new(std::sync::Mutex::new(CapturedLines::default()));
        let keep = lines.clone();
        let reader = std::thread::Builder::new()
            .name("stderr-capture".into())
            .spawn(move || {
                // Ends at EOF: when fd 2 is given back and `write` closed.
                let r = std::io::BufReader::new(std::fs::File::from(read));
                for line in r.lines().map_while(Result::ok) {
                    if let Ok(mut l) = keep.lock() {
                        l.push(line);
                    }
                }
            })?;
        nix::unistd::dup2_stderr(&write)?;
        drop(write);
        Ok(StderrCapture {
            saved: Some(saved),
            lines,
            reader: Some(reader),
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
        // written is read (a thread still writing holds no copy of it).
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

impl Drop for StderrCapture {
    fn drop(&mut self) {
        self.restore();
    }
}
