//! `-I FILE` (iperf3's `--pidfile`): this process's ID in FILE while it
//! runs, removed when it ends if it is still the file this process made.
//! A file that is there is replaced only when it names a process that is
//! gone (as iperf3 does); a link, a live process's pidfile or any other
//! file is refused.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a pidfile was not written.
#[derive(Debug, thiserror::Error)]
pub enum PidFileError {
    #[error("--pidfile {0} exists and is not a regular file")]
    NotAFile(String),
    #[error("--pidfile {0}: process {1} is running and holds it")]
    Held(String, u32),
    #[error("--pidfile {0} exists and holds no process ID: not replaced")]
    Foreign(String),
    #[error("--pidfile {0}: {1}")]
    Io(String, std::io::Error),
}

/// The pidfile this process wrote; dropping it removes the file if it is
/// still ours.
#[derive(Debug)]
pub struct PidFile {
    path: PathBuf,
    /// The created file's device and inode.
    id: (u64, u64),
}

impl PidFile {
    /// Writes this process's ID to `path` (see [`absolute`]: a daemon
    /// names its file before it moves to /).
    pub fn write(path: &Path) -> Result<Self, PidFileError> {
        let shown = path.display().to_string();
        let io = |e| PidFileError::Io(shown.clone(), e);
        let path = absolute(path).map_err(io)?;
        if let Ok(m) = std::fs::symlink_metadata(&path) {
            if !m.file_type().is_file() {
                return Err(PidFileError::NotAFile(shown));
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            match text.trim().parse::<u32>() {
                Ok(pid) if Path::new(&format!("/proc/{pid}")).exists() => {
                    return Err(PidFileError::Held(shown, pid));
                }
                Ok(_) => std::fs::remove_file(&path).map_err(io)?,
                Err(_) => return Err(PidFileError::Foreign(shown)),
            }
        }
        // O_EXCL: never through a link, never over a file made meanwhile.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&path)
            .map_err(io)?;
        f.write_all(format!("{}\n", std::process::id()).as_bytes())
            .map_err(io)?;
        let m = f.metadata().map_err(io)?;
        Ok(Self {
            path,
            id: (m.dev(), m.ino()),
        })
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Only the file this process made, still holding its ID.
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_file() && (m.dev(), m.ino()) == self.id)
            && std::fs::read_to_string(&self.path)
                .is_ok_and(|t| t.trim() == std::process::id().to_string());
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An absolute form of `p`, from the working directory now (a daemon's
/// becomes /).
pub fn absolute(p: &Path) -> std::io::Result<PathBuf> {
    Ok(if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()?.join(p)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pidfile_is_ours_alone_and_a_stale_one_is_replaced() {
        let dir = std::env::temp_dir().join(format!("lr-pid-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("pid");
        let me = std::process::id().to_string();
        {
            let _f = PidFile::write(&p).unwrap();
            assert_eq!(std::fs::read_to_string(&p).unwrap().trim(), me);
            let e = PidFile::write(&p).unwrap_err();
            assert!(matches!(e, PidFileError::Held(_, pid) if pid == std::process::id()));
        }
        assert!(!p.exists(), "removed when dropped");
        // A stale one (no such process) is replaced.
        std::fs::write(&p, "4194305\n").unwrap();
        drop(PidFile::write(&p).unwrap());
        std::fs::write(&p, "not a pid\n").unwrap();
        assert!(matches!(
            PidFile::write(&p).unwrap_err(),
            PidFileError::Foreign(_)
        ));
        let link = dir.join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(matches!(
            PidFile::write(&link).unwrap_err(),
            PidFileError::NotAFile(_)
        ));
        // Replaced by another file meanwhile: not removed.
        std::fs::remove_file(&p).unwrap();
        let f = PidFile::write(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "other\n").unwrap();
        drop(f);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "other\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
