//! Files read and parsed again only when they changed: the daemon looks at every task's
//! pm_state.json (which carries the handoff ledger, hundreds of KB after a long run) and
//! task.md several times per tick and per check-in, and parsing them was most of an idle
//! daemon's work.
//!
//! Why a file's identity is enough to know it is unchanged: our own writes replace the
//! file (temp file, rename), so each version is a new inode; a writer that changes the file
//! in place changes its ctime. The kernel stamps ctime with a coarse clock (a few ms), so a
//! change in the same tick as the read could keep the same ctime: a version is only
//! remembered when it was read [`SETTLED`] after its ctime, and a later change then always
//! carries a later ctime.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How long after its last change a file's version may be remembered (well above the
/// kernel's timestamp granularity).
pub const SETTLED: Duration = Duration::from_millis(20);

/// What tells one version of a file from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Version {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Version {
    fn of(m: &std::fs::Metadata) -> Version {
        Version {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether a read begun at `read_at` saw a version no later change can share a ctime with.
    fn settled_by(&self, read_at: SystemTime) -> bool {
        let ctime = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            self.ctime.0.max(0) as u64,
            self.ctime.1.clamp(0, 999_999_999) as u32,
        ));
        ctime.is_some_and(|c| read_at.duration_since(c).is_ok_and(|d| d >= SETTLED))
    }
}

/// Parsed files of one kind, by path, each with the version it was parsed from.
pub struct Cache<T> {
    files: Mutex<HashMap<PathBuf, (Version, T)>>,
}

impl<T: Clone> Default for Cache<T> {
    fn default() -> Self {
        Cache {
            files: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone> Cache<T> {
    /// The file parsed by `parse`, or what it gave for this very version before. `Ok(None)`:
    /// no such file. An error (from reading or parsing) is never remembered.
    pub fn get<E>(
        &self,
        path: &Path,
        read_error: impl Fn(std::io::Error) -> E,
        parse: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        // One stat for an unchanged file (the common case: the daemon's ticks).
        if let Ok(meta) = std::fs::metadata(path)
            && let Some((v, t)) = self.lock().get(path)
            && *v == Version::of(&meta)
        {
            return Ok(Some(t.clone()));
        }
        let mut file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(read_error(e)),
        };
        // The version of the very file opened, so what is read belongs to it.
        let meta = file.metadata().map_err(&read_error)?;
        let version = Version::of(&meta);
        if let Some((v, t)) = self.lock().get(path)
            && *v == version
        {
            return Ok(Some(t.clone()));
        }
        let read_at = SystemTime::now();
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut bytes).map_err(read_error)?;
        let parsed = parse(&bytes)?;
        let mut files = self.lock();
        if version.settled_by(read_at) {
            files.insert(path.to_path_buf(), (version, parsed.clone()));
        } else {
            files.remove(path);
        }
        Ok(Some(parsed))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (Version, T)>> {
        self.files.lock().unwrap_or_else(|e| e.into_inner())
    }
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
