//! Advisory locks on a task folder (flock), so one-shot commands started by
//! cron, the PM and a human never interleave a read-modify-write of
//! pm_state.json. Lock files are dot files: scans and watchers ignore them.

use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use crate::core::error::{Error, Result};

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Lock {
    _file: File,
    path: PathBuf,
}

impl Lock {
    /// Block until the lock at `path` is ours.
    pub fn acquire(path: &Path) -> Result<Lock> {
        Self::take(path, true).map(|l| l.expect("blocking lock is always taken"))
    }

    /// Take the lock if free; `None` when someone else holds it.
    pub fn try_acquire(path: &Path) -> Result<Option<Lock>> {
        Self::take(path, false)
    }

    /// Write `note` (one line: who holds the lock) at the start of the lock file, through
    /// the descriptor the lock holds: no second open, no truncation. A longer note written
    /// before may show after it, so readers take the first line.
    pub fn note(&self, note: &str) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        self._file.write_all_at(note.as_bytes(), 0)
    }

    fn take(path: &Path, block: bool) -> Result<Option<Lock>> {
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open lock file", path, e))?;
        let op = if block {
            libc::LOCK_EX
        } else {
            libc::LOCK_EX | libc::LOCK_NB
        };
        loop {
            // SAFETY: flock on a valid, owned descriptor.
            let rc = unsafe { libc::flock(file.as_raw_fd(), op) };
            if rc == 0 {
                return Ok(Some(Lock {
                    _file: file,
                    path: path.to_path_buf(),
                }));
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) if !block => return Ok(None),
                _ => return Err(Error::io("lock", path, err)),
            }
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_try_fails_until_released() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(".lock");
        let a = Lock::acquire(&p).unwrap();
        assert!(Lock::try_acquire(&p).unwrap().is_none());
        drop(a);
        assert!(Lock::try_acquire(&p).unwrap().is_some());
    }
}
