//! The terminal: a password asked for without echo.

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
