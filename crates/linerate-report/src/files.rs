//! Result files: created new ([`create_new`]: never through a link,
//! never over a file that is there unless asked to), a log appended to
//! ([`append_log`]), and [`Whole`], a file written in whole records (a
//! write that fails part-way is cut back to the last whole one).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Why a result file could not be made; each names the flag and the path.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{0} is a symbolic link: not written through")]
    Link(String),
    #[error("{0} exists and is not a regular file")]
    NotRegular(String),
    #[error("{0} exists: not overwritten (--force replaces it, or name a new file)")]
    Exists(String),
    #[error("{0}: {1}")]
    Io(String, io::Error),
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

/// Creates a result file that is not there yet: never through a symbolic
/// link to a file, never over an existing file unless `overwrite` (then an
/// existing regular file is replaced; a link or a directory is refused
/// either way). A pipe or a character device is written to as it is.
/// `what` names the flag in the error.
pub fn create_new(path: &Path, overwrite: bool, what: &str) -> Result<File, FileError> {
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
            .map_err(|e| FileError::Io(format!("{what} {shown}"), e));
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(FileError::Link(format!("{what} {shown}")));
        }
        Ok(m) if !m.file_type().is_file() => {
            return Err(FileError::NotRegular(format!("{what} {shown}")));
        }
        Ok(_) if !overwrite => return Err(FileError::Exists(format!("{what} {shown}"))),
        Ok(_) => std::fs::remove_file(path)
            .map_err(|e| FileError::Io(format!("{what} {shown}: replacing it"), e))?,
        Err(_) => {}
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| FileError::Io(format!("{what} {shown}"), e))
}

/// Opens a log to append to (iperf3's `--logfile`): created if missing,
/// never through a symbolic link.
pub fn append_log(path: &Path, what: &str) -> Result<File, FileError> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(FileError::Link(format!("{what} {}", path.display())));
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| FileError::Io(format!("{what} {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
