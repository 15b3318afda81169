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
//!
//! Why a [`Pass`]: one turn of the daemon's task actor (a check-in with its housekeeping, a
//! liveness look) asks for the same pm_state.json and task.md a score of times, each ask a
//! `statx` of the file's path. Within one turn a check made moments ago answers for the
//! next ask ([`Pass`] says how long), as if that read had been made a little earlier,
//! which a read outside the state lock may always be. Reads under the lock never take a
//! pass's word; neither does the next turn, so whatever woke it (a handoff, another
//! process's save) is read afresh.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

/// How long after its last change a file's version may be remembered (well above the
/// kernel's timestamp granularity).
pub const SETTLED: Duration = Duration::from_millis(20);

/// How long within a [`Pass`] a check of a file answers for it: well under a check-in's
/// own work (its delivery waits tens of milliseconds for the PM's pane), so what a turn
/// reads after a wait is checked again.
pub const PASS_TRUSTS: Duration = Duration::from_millis(20);

/// One turn of work that may take a recent check of a file as still good (see the module
/// doc). Open until closed: a handle that outlives its turn checks every time again.
#[derive(Clone)]
pub struct Pass(Arc<AtomicBool>);

impl Pass {
    /// A pass, open.
    pub fn open() -> Pass {
        Pass(Arc::new(AtomicBool::new(true)))
    }

    /// End it: no check made in it answers for anything any more.
    pub fn close(&self) {
        self.0.store(false, Ordering::Release);
    }

    fn is_open(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for Pass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pass").field("open", &self.is_open()).finish()
    }
}

/// When a file was last checked in which pass (weakly held: a pass ended and dropped
/// keeps only its allocation, so no later pass can be mistaken for it).
#[derive(Clone)]
struct Checked {
    by: Weak<AtomicBool>,
    at: Instant,
}

impl Checked {
    fn by(pass: Option<&Pass>) -> Option<Checked> {
        pass.map(|p| Checked {
            by: Arc::downgrade(&p.0),
            at: Instant::now(),
        })
    }
}

/// Whether a check made `checked` still answers for a file in `pass` at `now`: made in
/// this pass, which is still open, at most [`PASS_TRUSTS`] ago. Pure but for the flag.
fn answers(checked: Option<&Checked>, pass: Option<&Pass>, now: Instant) -> bool {
    match (checked, pass) {
        (Some(c), Some(p)) => {
            Weak::ptr_eq(&c.by, &Arc::downgrade(&p.0))
                && p.is_open()
                && now.checked_duration_since(c.at).is_some_and(|d| d <= PASS_TRUSTS)
        }
        _ => false,
    }
}

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
    /// The last check of the file made in a pass (see [`answers`]).
    checked: Option<Checked>,
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
        self.get_in(None, path, read_error, parse)
    }

    /// [`Cache::get`], in `pass`: a check of the file made in it moments ago answers
    /// without looking at the file ([`answers`]); a look made now is noted for the next ask.
    pub fn get_in<E>(
        &self,
        pass: Option<&Pass>,
        path: &Path,
        read_error: impl Fn(std::io::Error) -> E,
        parse: impl FnOnce(&[u8]) -> Result<T, E>,
    ) -> Result<Option<T>, E> {
        if pass.is_some()
            && let Some(e) = self.lock().get(path)
            && answers(e.checked.as_ref(), pass, Instant::now())
        {
            return Ok(Some(e.parsed.clone()));
        }
        match std::fs::metadata(path) {
            Ok(meta) => {
                if let Some(e) = self.lock().get_mut(path)
                    && e.settled
                    && e.version == Some(Version::of(&meta))
                {
                    if pass.is_some() {
                        e.checked = Checked::by(pass);
                    }
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
            if pass.is_some() {
                e.checked = Checked::by(pass);
            }
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
                checked: Checked::by(pass),
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
                checked: None,
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
        read_in(c, None, path, parses)
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

    fn read_in(c: &Cache<String>, pass: Option<&Pass>, path: &Path, parses: &Cell<u32>) -> Option<String> {
        c.get_in(
            pass,
            path,
            |e| e.to_string(),
            |b| {
                parses.set(parses.get() + 1);
                Ok::<_, String>(String::from_utf8_lossy(b).into_owned())
            },
        )
        .unwrap()
    }

    #[test]
    fn a_check_answers_only_in_its_own_open_pass_and_only_for_a_moment() {
        let now = Instant::now();
        let pass = Pass::open();
        let other = Pass::open();
        let fresh = Checked::by(Some(&pass));
        assert!(answers(fresh.as_ref(), Some(&pass), now + PASS_TRUSTS));
        assert!(!answers(fresh.as_ref(), Some(&pass), now + PASS_TRUSTS * 2), "too old");
        assert!(!answers(fresh.as_ref(), Some(&other), now), "another turn");
        assert!(!answers(fresh.as_ref(), None, now), "no pass: a read under the lock");
        assert!(!answers(None, Some(&pass), now), "never checked in a pass");
        pass.close();
        assert!(!answers(fresh.as_ref(), Some(&pass), now), "the turn ended");
    }

    #[test]
    fn in_a_pass_a_check_made_moments_ago_answers_and_a_read_outside_it_looks_at_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.json");
        let c = Cache::<String>::default();
        let n = Cell::new(0);
        std::fs::write(&p, "one").unwrap();
        let pass = Pass::open();
        assert_eq!(read_in(&c, Some(&pass), &p, &n).as_deref(), Some("one"));
        // Another process's save moments later: this turn may still answer from its
        // check (as if read a moment earlier)...
        std::fs::write(&p, "two").unwrap();
        assert_eq!(read_in(&c, Some(&pass), &p, &n).as_deref(), Some("one"));
        // ...but a read under the lock looks at the file, and the turn's next ask then
        // answers with what that read found, never older.
        assert_eq!(read_in(&c, None, &p, &n).as_deref(), Some("two"));
        assert_eq!(read_in(&c, Some(&pass), &p, &n).as_deref(), Some("two"));
        std::fs::write(&p, "six").unwrap();
        // The next turn reads afresh, as does this one once its check is too old.
        let next = Pass::open();
        assert_eq!(read_in(&c, Some(&next), &p, &n).as_deref(), Some("six"));
        std::fs::write(&p, "ten").unwrap();
        std::thread::sleep(PASS_TRUSTS + Duration::from_millis(5));
        assert_eq!(read_in(&c, Some(&next), &p, &n).as_deref(), Some("ten"));
        std::fs::write(&p, "end").unwrap();
        next.close();
        assert_eq!(
            read_in(&c, Some(&next), &p, &n).as_deref(),
            Some("end"),
            "closed: looks again"
        );
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
