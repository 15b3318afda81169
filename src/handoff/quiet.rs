//! When a handoff is final: complete and quiet.
//!
//! A close after writing is not the end of a handoff: an agent that builds its file with
//! `printf … >> f` closes it after every append, and one running shell commands pauses a
//! few hundred ms between them. Announcing at each close shows the PM half a handoff
//! ("COMPLETE — None") and then the rest as more "new" handoffs. So a handoff is final
//! only when the daemon has seen it unchanged (inode, size, mtime, content hash) for
//! [`QUIET`] on its own monotonic clock, or when it was renamed into place (an atomic
//! write is complete by construction) and has not changed since.
//!
//! Nothing here compares a file's mtime with the wall clock: a file written while the
//! daemon was down, pulled by rsync (which keeps mtimes) or stamped by a host whose clock
//! is off (year 2035) is judged by what the daemon saw, from the moment it first saw it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Loaded;

/// How long a file closed after writing (or found by a scan) must stay unchanged before it
/// is read as final. Agents running shell commands leave ~100–400 ms between appends
/// (measured: a `printf >>` per tool call); 750 ms leaves room for a loaded machine while
/// keeping a close-after-write handoff within a second. Renames do not wait.
pub const QUIET: Duration = Duration::from_millis(750);

/// What the daemon observed of one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Look {
    /// Inode (a rename-in or a rewrite-by-rename gives a new one).
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// mtime in ns, as an identity only (never compared with now).
    pub mtime_ns: i64,
    /// Content hash, when the content was read (events only stat).
    pub sha256: Option<String>,
}

impl Look {
    /// Whether `other` is the same file state; an unknown hash on either side matches.
    fn same(&self, other: &Look) -> bool {
        self.ino == other.ino
            && self.size == other.size
            && self.mtime_ns == other.mtime_ns
            && match (&self.sha256, &other.sha256) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// How the daemon learnt of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// Closed after writing: maybe one of several appends.
    Closed,
    /// Renamed into place: complete.
    Renamed,
}

#[derive(Debug, Clone)]
struct Obs {
    look: Look,
    since: Instant,
    renamed: bool,
}

/// Decide whether a file that now looks like `now_look` is final, given what was observed
/// before; returns the decision and the observation to keep. Pure.
fn decide(prev: Option<&Obs>, now_look: Look, now: Instant) -> (bool, Obs) {
    match prev {
        Some(p) if p.look.same(&now_look) => {
            let ready = p.renamed || now.saturating_duration_since(p.since) >= QUIET;
            let look = Look {
                sha256: now_look.sha256.or_else(|| p.look.sha256.clone()),
                ..now_look
            };
            (ready, Obs { look, ..p.clone() })
        }
        _ => (
            false,
            Obs {
                look: now_look,
                since: now,
                renamed: false,
            },
        ),
    }
}

/// The daemon's observations of one task's handoffs: file name → what it last looked like
/// and since when (monotonic). Interior mutability, because a check-in asks "ready?" through
/// a shared `Fn` and every ask is an observation.
#[derive(Debug, Default)]
pub struct Quiet {
    seen: Mutex<BTreeMap<String, Obs>>,
}

/// Keep at most this many observations (the oldest names go first).
const KEEP: usize = 4096;

fn stat(dir: &Path, file: &str) -> Option<std::fs::Metadata> {
    std::fs::symlink_metadata(dir.join(file)).ok()
}

impl Quiet {
    /// An event for `file` in `dir`: the quiet time restarts now (a close) or the file
    /// is vouched complete as it is now (a rename into place).
    pub fn saw(&self, dir: &Path, file: &str, how: How) {
        self.saw_at(dir, file, how, Instant::now());
    }

    fn saw_at(&self, dir: &Path, file: &str, how: How, now: Instant) {
        let Some(m) = stat(dir, file) else { return };
        use std::os::unix::fs::MetadataExt;
        let look = Look {
            ino: m.ino(),
            size: m.len(),
            mtime_ns: crate::fsutil::mtime_ns(&m),
            sha256: None,
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.insert(
            file.to_string(),
            Obs {
                look,
                since: now,
                renamed: how == How::Renamed,
            },
        );
        if seen.len() > KEEP {
            let first = seen.keys().next().cloned();
            if let Some(k) = first {
                seen.remove(&k);
            }
        }
    }

    /// Whether `l` (read from `dir`) is final now; also records this look, so a file first
    /// met here (startup scan, no event) becomes final after [`QUIET`] unchanged.
    pub fn ready(&self, dir: &Path, l: &Loaded) -> bool {
        use std::os::unix::fs::MetadataExt;
        let Some(m) = stat(dir, &l.file) else { return false };
        let look = Look {
            ino: m.ino(),
            size: l.size,
            mtime_ns: l.mtime_ns,
            sha256: Some(l.sha256.clone()),
        };
        self.ready_at(&l.file, look, Instant::now())
    }

    fn ready_at(&self, file: &str, look: Look, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (ready, obs) = decide(seen.get(file), look, now);
        seen.insert(file.to_string(), obs);
        ready
    }

    /// When the next file still settling may be final (to look again then); `None` when
    /// nothing observed is waiting.
    pub fn next_due(&self) -> Option<Instant> {
        let now = Instant::now();
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.values()
            .filter(|o| !o.renamed)
            .map(|o| o.since + QUIET)
            .filter(|t| *t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn look(size: u64, sha: &str) -> Look {
        Look {
            ino: 7,
            size,
            mtime_ns: size as i64,
            sha256: Some(sha.into()),
        }
    }

    #[test]
    fn final_only_after_a_quiet_time_unchanged() {
        let q = Quiet::default();
        let t0 = Instant::now();
        let f = "dev-20251127-090000.md";
        assert!(!q.ready_at(f, look(10, "a"), t0), "first sight is not quiet");
        assert!(!q.ready_at(f, look(10, "a"), t0 + QUIET / 2));
        // An append restarts the quiet time.
        assert!(!q.ready_at(f, look(20, "b"), t0 + QUIET));
        assert!(!q.ready_at(f, look(20, "b"), t0 + QUIET + QUIET / 2));
        assert!(q.ready_at(f, look(20, "b"), t0 + 2 * QUIET));
        // A later change (an amendment) waits its own quiet time.
        assert!(!q.ready_at(f, look(30, "c"), t0 + 3 * QUIET));
        assert!(q.ready_at(f, look(30, "c"), t0 + 4 * QUIET));
    }

    #[test]
    fn same_size_and_mtime_but_other_content_is_a_change() {
        let q = Quiet::default();
        let t0 = Instant::now();
        let f = "dev-20251127-090000.md";
        assert!(!q.ready_at(f, look(10, "a"), t0));
        assert!(!q.ready_at(f, look(10, "z"), t0 + QUIET));
        assert!(q.ready_at(f, look(10, "z"), t0 + 2 * QUIET));
    }

    #[test]
    fn a_rename_is_final_at_once_until_it_changes() {
        let d = tempfile::tempdir().unwrap();
        let f = "dev-20251127-090000.md";
        std::fs::write(d.path().join(f), "0123456789").unwrap();
        let m = std::fs::metadata(d.path().join(f)).unwrap();
        use std::os::unix::fs::MetadataExt;
        let q = Quiet::default();
        let t0 = Instant::now();
        q.saw_at(d.path(), f, How::Renamed, t0);
        let now = Look {
            ino: m.ino(),
            size: 10,
            mtime_ns: crate::fsutil::mtime_ns(&m),
            sha256: Some("a".into()),
        };
        assert!(q.ready_at(f, now.clone(), t0), "renamed in: final at once");
        assert_eq!(q.next_due(), None, "nothing left settling");
        let grown = Look { size: 11, ..now };
        assert!(!q.ready_at(f, grown, t0), "written after the rename: wait again");
        assert!(q.next_due().is_some());
    }
}
