//! Where the binary's output goes, and what happens when it cannot be
//! written. Every byte for standard output, `--logfile`, `--csv` and the
//! other result files passes through a [`Checked`] writer: the first
//! failure is kept with where it went, what follows to that target is
//! dropped (the run goes on to its end and the other outputs still get
//! everything), and [`finish`] turns it into the exit code: a result that
//! was not saved fails the run with one line on stderr; a closed pipe
//! (`| head -1`) ends it quietly with 141, as a shell reports SIGPIPE.
//! Result files are created new ([`create_new`]): never through a link,
//! never over a file that is there unless asked to.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A run's outputs: made once by `main`, handed to the command, and
/// cloned into every [`Checked`] writer it opens. It keeps the outputs
/// that failed (each said once, when it failed) and whether each was a
/// closed pipe; [`Console::finish`] turns them into the exit code.
#[derive(Debug, Clone, Default)]
pub struct Console {
    failed: Arc<Mutex<Vec<(String, bool)>>>,
    /// The warnings said once a run, said.
    warned: Arc<Mutex<Vec<&'static str>>>,
}

impl Console {
    /// Says `warning` on stderr unless this run said it already.
    pub fn warn_once(&self, warning: &'static str) {
        if let Ok(mut w) = self.warned.lock()
            && !w.contains(&warning)
        {
            w.push(warning);
            eprintln!("{warning}");
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
                eprintln!(
                    "linerate: error: the output to {target} could not be written ({e}): the result is not saved"
                );
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

/// A file written in whole records: what is written between two flushes
/// (a reporter flushes after each record: a CSV row set, a JSON line) is
/// held, then written at once; a write that fails part-way (a disk that
/// fills) is cut back to the last whole record, so the file never ends
/// mid-row.
#[derive(Debug)]
pub struct Whole<F: Write + Truncate> {
    inner: F,
    held: Vec<u8>,
    /// The file's length after the last whole record.
    committed: u64,
}

/// A file that can be cut back to a length.
pub trait Truncate {
    fn truncate_to(&mut self, len: u64) -> io::Result<()>;
    /// Its length now (where an append starts).
    fn len_now(&mut self) -> u64;
}

impl Truncate for File {
    fn truncate_to(&mut self, len: u64) -> io::Result<()> {
        use std::io::Seek;
        self.set_len(len)?;
        self.seek(io::SeekFrom::Start(len)).map(|_| ())
    }

    fn len_now(&mut self) -> u64 {
        self.metadata().map_or(0, |m| m.len())
    }
}

/// Most held between two flushes before it is written anyway.
const HELD_MAX: usize = 16 << 20;

impl<F: Write + Truncate> Whole<F> {
    pub fn new(mut inner: F) -> Self {
        let committed = inner.len_now();
        Whole {
            inner,
            held: Vec::new(),
            committed,
        }
    }
}

impl<F: Write + Truncate> Write for Whole<F> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.held.extend_from_slice(buf);
        if self.held.len() > HELD_MAX {
            self.flush()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.held.is_empty() {
            return self.inner.flush();
        }
        let r = self
            .inner
            .write_all(&self.held)
            .and_then(|()| self.inner.flush());
        match r {
            Ok(()) => {
                self.committed += self.held.len() as u64;
                self.held.clear();
                Ok(())
            }
            Err(e) => {
                // Cut back to the last whole record (a pipe or a device
                // cannot be: what it took stands).
                let _ = self.inner.truncate_to(self.committed);
                self.held.clear();
                Err(e)
            }
        }
    }
}

impl<F: Write + Truncate> Drop for Whole<F> {
    fn drop(&mut self) {
        // What was written since the last flush goes out at the end.
        let _ = self.flush();
    }
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

/// Creates a result file that is not there yet: never through a symbolic
/// link to a file, never over an existing file unless `overwrite` (then an
/// existing regular file is replaced; a link or a directory is refused
/// either way). A pipe or a character device is written to as it is.
/// `what` names the flag in the error.
pub fn create_new(path: &Path, overwrite: bool, what: &str) -> anyhow::Result<File> {
    use std::os::unix::fs::FileTypeExt;
    let shown = path.display();
    // A pipe or a device (/dev/stdout, a process substitution's
    // /dev/fd/N, /dev/null): written to, nothing stored is replaced.
    if std::fs::metadata(path)
        .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_char_device())
    {
        return OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("{what} {shown}: {e}"));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            anyhow::bail!("{what} {shown} is a symbolic link: not written through")
        }
        Ok(m) if !m.file_type().is_file() => {
            anyhow::bail!("{what} {shown} exists and is not a regular file")
        }
        Ok(_) if !overwrite => anyhow::bail!(
            "{what} {shown} exists: not overwritten (--force replaces it, or name a new file)"
        ),
        Ok(_) => std::fs::remove_file(path)
            .map_err(|e| anyhow::anyhow!("{what} {shown}: replacing it: {e}"))?,
        Err(_) => {}
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("{what} {shown}: {e}"))
}

/// Opens a log to append to (iperf3's `--logfile`): created if missing,
/// never through a symbolic link.
pub fn append_log(path: &Path, what: &str) -> anyhow::Result<File> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        anyhow::bail!(
            "{what} {} is a symbolic link: not written through",
            path.display()
        );
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("{what} {}: {e}", path.display()))
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

    #[test]
    fn files_are_created_new_never_through_links_or_over_files() {
        let dir = std::env::temp_dir().join(format!("lr-out-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("target");
        std::fs::write(&target, "keep").unwrap();
        let link = dir.join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        for overwrite in [false, true] {
            let e = create_new(&link, overwrite, "--csv")
                .unwrap_err()
                .to_string();
            assert!(e.contains("symbolic link"), "{e}");
        }
        let e = create_new(&target, false, "--csv").unwrap_err().to_string();
        assert!(e.contains("exists: not overwritten"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        let mut f = create_new(&target, true, "--csv").unwrap();
        f.write_all(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        assert!(create_new(&dir, true, "--csv").is_err(), "a directory");
        create_new(Path::new("/dev/null"), false, "--csv").expect("a device is written to");
        let fresh = dir.join("fresh");
        create_new(&fresh, false, "--csv").unwrap();
        assert!(append_log(&link, "--logfile").is_err());
        append_log(&fresh, "--logfile").unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A disk with room for `room` bytes: a write past it takes what fits
    /// and then fails with ENOSPC, as write(2) does.
    struct Disk {
        data: Vec<u8>,
        room: usize,
    }

    impl Write for Disk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let free = self.room.saturating_sub(self.data.len());
            if free == 0 {
                return Err(io::Error::from_raw_os_error(28));
            }
            let n = free.min(buf.len());
            self.data.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Truncate for Disk {
        fn truncate_to(&mut self, len: u64) -> io::Result<()> {
            self.data.truncate(len as usize);
            Ok(())
        }
        fn len_now(&mut self) -> u64 {
            self.data.len() as u64
        }
    }

    #[test]
    fn a_disk_that_fills_keeps_whole_records_only() {
        let mut w = Whole::new(Disk {
            data: b"earlier\n".to_vec(),
            room: 30,
        });
        for row in ["1,aaaa\n", "2,bbbb\n", "3,cccc\n", "4,dddd\n"] {
            // A record written in pieces, then flushed, as a reporter does.
            let (a, b) = row.split_at(2);
            w.write_all(a.as_bytes()).unwrap();
            w.write_all(b.as_bytes()).unwrap();
            let r = w.flush();
            if row.starts_with('4') {
                assert!(r.is_err(), "the fourth row does not fit");
            } else {
                r.unwrap();
            }
        }
        assert_eq!(
            String::from_utf8(w.inner.data.clone()).unwrap(),
            "earlier\n1,aaaa\n2,bbbb\n3,cccc\n",
            "the row cut mid-way is taken back"
        );
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
