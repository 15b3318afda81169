//! Files read and parsed again only when they changed: the daemon looks at every task's
//! pm_state.json and task.md several times per tick and per check-in, and parsing them was
//! most of an idle daemon's work.
//!
//! Why a file's identity is enough to know it is unchanged: our own writes replace the
//! file (temp file, rename), so each version is a new inode; a writer that changes the file
//! in place changes its ctime. The kernel stamps ctime with a coarse clock (a few ms), so a
//! change in the same tick as the read could keep the same ctime: a version is only
//! remembered when it was read [`SETTLED`] after its ctime, and a later change then always
//! carries a later ctime. A version read sooner is kept with its bytes: the next read
//! reads the file again and reuses the parse when the bytes are the same (a check-in reads
//! the state it just saved several times within those milliseconds).

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How long after its last change a file's version may be remembered (well above the
/// kernel's timestamp granularity).
pub const SETTLED: Duration = Duration::from_millis(20);

/// What tells one version of a file (or a folder: its entries) from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Version {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    pub(crate) fn of(m: &std::fs::Metadata) -> Version {
        Version {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether a read begun at `read_at` saw a version no later change can share a ctime with.
    pub(crate) fn settled_by(&self, read_at: SystemTime) -> bool {
        let ctime = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            self.ctime.0.max(0) as u64,
            self.ctime.1.clamp(0, 999_999_999) as u32,
        ));
        ctime.is_some_and(|c| read_at.duration_since(c).is_ok_and(|d| d >= SETTLED))
    }
}

/// Parsed files by path: each with the version and the bytes it was parsed from.
pub struct Cache<T> {
    files: Mutex<HashMap<PathBuf, Entry<T>>>,
}

/// One file as last parsed. `settled`: its version alone proves the file unchanged (see
/// the module doc); otherwise the file is read again and the parse reused only when the
/// bytes are the same.
struct Entry<T> {
    version: Option<Version>,
    settled: bool,
    bytes: Vec<u8>,
    parsed: T,
}

impl<T: Clone> Default for Cache<T> {
    fn default() -> Self {
        Cache {
            files: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone> Cache<T> {
    /// The parsed content of `path` (`None` when it does not exist): remembered while the
    /// file's version is unchanged, parsed again (`parse`) when its bytes changed. A
    /// parse error is returned and nothing is remembered.
    pub fn get<E>(
        &self,
        path: &Path,
        read_error: impl Fn(std::io::Error) -> E,
        parse: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        match std::fs::metadata(path) {
            Ok(meta) => {
                if let Some(e) = self.lock().get(path)
                    && e.settled
                    && e.version == Some(Version::of(&meta))
                {
                    return Ok(Some(e.parsed.clone()));
                }
            }
            // Nothing there (the usual config.toml): said by the stat, no open after it.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(_) => {}
        }
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_error(e)),
        };
        let meta = file.metadata().map_err(&read_error)?;
        let version = Version::of(&meta);
        let read_at = SystemTime::now();
        let bytes = read_rest(&file, meta.len()).map_err(read_error)?;
        let settled = version.settled_by(read_at);
        if let Some(e) = self.lock().get_mut(path)
            && e.bytes == bytes
        {
            e.version = Some(version);
            e.settled = settled;
            return Ok(Some(e.parsed.clone()));
        }
        let parsed = parse(&bytes)?;
        self.lock().insert(
            path.to_path_buf(),
            Entry {
                version: Some(version),
                settled,
                bytes,
                parsed: parsed.clone(),
            },
        );
        Ok(Some(parsed))
    }

    /// What `path` now holds, written by this process: the next [`Cache::get`] reads the
    /// file and, finding these bytes, takes `parsed` without parsing.
    pub fn prime(&self, path: &Path, bytes: Vec<u8>, parsed: T) {
        self.lock().insert(
            path.to_path_buf(),
            Entry {
                version: None,
                settled: false,
                bytes,
                parsed,
            },
        );
    }

    /// How many files it remembers.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Entry<T>>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The rest of `file`, whose size the caller just read from its metadata (`size`). std's
/// `read_to_end` on a `File` asks the kernel for the size and the position again (a statx
/// and an lseek per read: a dozen calls per check-in); a `Take` has no size hint, so this
/// reads straight into the room made for `size` and stops at the first empty read.
fn read_rest(file: &std::fs::File, size: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(u64::MAX).read_to_end(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn parse_count(c: &Cache<String>, path: &Path, parses: &Cell<u32>) -> Option<String> {
        c.get(
            path,
            |e| e.to_string(),
            |b| {
                parses.set(parses.get() + 1);
                Ok::<_, String>(String::from_utf8_lossy(b).into_owned())
            },
        )
        .unwrap()
    }

    /// Let a file's last change settle, so the version read next may be remembered.
    fn settle() {
        std::thread::sleep(SETTLED + Duration::from_millis(5));
    }

    #[test]
    fn a_version_is_parsed_once_and_every_change_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        let c = Cache::<String>::default();
        let n = Cell::new(0);
        assert_eq!(parse_count(&c, &p, &n), None);

        std::fs::write(&p, "one").unwrap();
        settle();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("one"));
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("one"));
        assert_eq!(n.get(), 1, "an unchanged file was parsed again");

        // Replaced by rename (how state is saved): a new inode.
        let tmp = dir.path().join("f.tmp");
        std::fs::write(&tmp, "two").unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("two"));
        // Changed in place, same size, at once: never mistaken for the version before.
        std::fs::write(&p, "TWO").unwrap();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("TWO"));
        std::fs::write(&p, "Two").unwrap();
        settle();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("Two"));
        let parses = n.get();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("Two"));
        assert_eq!(n.get(), parses, "remembered");
        // A remembered version changed in place, same size: seen at once.
        std::fs::write(&p, "2wo").unwrap();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("2wo"));

        std::fs::remove_file(&p).unwrap();
        assert_eq!(parse_count(&c, &p, &n), None);
    }

    #[test]
    fn a_version_read_at_once_is_read_again_and_its_parse_reused_when_the_bytes_match() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        let c = Cache::<String>::default();
        let n = Cell::new(0);
        std::fs::write(&p, "one").unwrap();
        c.prime(&p, b"one".to_vec(), "primed".into());
        assert_eq!(
            parse_count(&c, &p, &n).as_deref(),
            Some("primed"),
            "our own write: no parse"
        );
        assert_eq!(n.get(), 0);
        // Rewritten in place within the same tick, same size: the bytes tell.
        std::fs::write(&p, "two").unwrap();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("two"));
        std::fs::write(&p, "two").unwrap();
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("two"));
        assert_eq!(n.get(), 1, "same bytes, no second parse");
    }

    #[test]
    fn a_parse_error_is_returned_and_not_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "bad").unwrap();
        settle();
        let c = Cache::<String>::default();
        let bad = c.get(&p, |e| e.to_string(), |_| Err::<String, _>("corrupt".to_string()));
        assert_eq!(bad, Err("corrupt".into()));
        let n = Cell::new(0);
        assert_eq!(parse_count(&c, &p, &n).as_deref(), Some("bad"));
        assert_eq!(n.get(), 1);
    }
}
