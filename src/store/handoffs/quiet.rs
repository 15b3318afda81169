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
//! Quiet is not enough for a file that does not yet read as a handoff: one with no status
//! line or no body text at all is most likely an agent between two appends, so it waits
//! [`INCOMPLETE_QUIET`] unchanged before it is announced anyway (with the parser's
//! warnings), never lost.
//!
//! Nothing here compares a file's mtime with the wall clock: a file written while the
//! daemon was down, pulled by rsync (which keeps mtimes) or stamped by a host whose clock
//! is off (year 2035) is judged by what the daemon saw, from the moment it first saw it.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Loaded;

/// How long a file closed after writing (or found by a scan) must stay unchanged before it
/// is read as final. The reproduced failures had pauses of a few hundred ms between an
/// agent's writes (the tests use 300 ms); 750 ms is 2.5 times that, for a loaded machine,
/// and keeps a close-after-write handoff within a second. Renames do not wait.
pub const QUIET: Duration = Duration::from_millis(750);

/// How long a file with no status line or no body text must stay unchanged before it is
/// announced as it is (e.g. an agent that forgot its status line: BLOCKED, with a warning).
pub const INCOMPLETE_QUIET: Duration = Duration::from_secs(5);

/// Whether a parsed handoff reads as complete: a status line (or a Cycle Result) and
/// some body text under a heading. Pure.
pub fn reads_complete(h: &crate::core::handoff::Handoff) -> bool {
    let blank = |t: &Option<String>| t.as_deref().is_none_or(|t| t.trim().is_empty());
    let s = &h.sections;
    let has_status = !h.warnings.iter().any(|w| w.starts_with("no status"));
    let has_body = [
        &s.instructions,
        &s.context,
        &s.success_criteria,
        &s.completed_work,
        &s.blockers,
        &s.skill_gaps,
        &s.scope,
        &s.next_action,
        &s.summary,
        &s.outcome,
    ]
    .into_iter()
    .any(|t| !blank(t))
        || s.skills_to_load.as_ref().is_some_and(|v| !v.is_empty())
        || s.artifacts_generated.as_ref().is_some_and(|v| !v.is_empty())
        || s.gates_honored.as_ref().is_some_and(|v| !v.is_empty())
        || s.other.iter().any(|(_, b)| !b.trim().is_empty());
    has_status && has_body
}

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
    /// Whether it read as a complete handoff when last read (assumed until read).
    complete: bool,
}

impl Obs {
    /// When it becomes final if it stays as it is.
    fn final_at(&self) -> Instant {
        self.since + if self.complete { QUIET } else { INCOMPLETE_QUIET }
    }
}

/// Decide whether a file that now looks like `now_look` (and reads as `complete`, see
/// [`reads_complete`]) is final, given what was observed before; returns the decision and
/// the observation to keep. Pure.
fn decide(prev: Option<&Obs>, now_look: Look, complete: bool, now: Instant) -> (bool, Obs) {
    match prev {
        Some(p) if p.look.same(&now_look) => {
            let look = Look {
                sha256: now_look.sha256.or_else(|| p.look.sha256.clone()),
                ..now_look
            };
            let obs = Obs {
                look,
                complete,
                ..p.clone()
            };
            (obs.renamed || now >= obs.final_at(), obs)
        }
        _ => (
            false,
            Obs {
                look: now_look,
                since: now,
                renamed: false,
                complete,
            },
        ),
    }
}

/// Which handoffs a check-in, a lane's release or a worktree merge may take as final now.
#[derive(Debug, Clone, Copy)]
pub enum Ready<'a> {
    /// Every file on disk: the CLI, cron mode and a check-in asked for by hand, where no
    /// watcher saw the files being written.
    All,
    /// Only those the daemon saw final in this folder (renamed in, or quiet for
    /// [`QUIET`]); one still being written stays new for a later check-in.
    Final(&'a Quiet, &'a Path),
}

impl Ready<'_> {
    /// Whether `l` may be taken now (asking is an observation: see [`Quiet::ready`]).
    pub fn accepts(&self, l: &Loaded) -> bool {
        match self {
            Ready::All => true,
            Ready::Final(q, dir) => q.ready(dir, l),
        }
    }

    /// `files` were put in place whole (a pull renamed them in): final from now, as the
    /// watcher's event for each will say when it comes.
    pub fn saw_renamed(&self, files: &[String]) {
        if let Ready::Final(q, dir) = self {
            for f in files {
                q.saw(dir, f, How::Renamed);
            }
        }
    }
}

/// The daemon's observations of one task's handoffs: file name → what it last looked like
/// and since when (monotonic). Interior mutability, because a check-in asks "ready?" through
/// a shared [`Ready`] and every ask is an observation.
#[derive(Debug, Default)]
pub struct Quiet {
    seen: Mutex<Seen>,
}

/// The observations, and the order their quiet times began in.
#[derive(Debug, Default)]
struct Seen {
    obs: BTreeMap<String, Obs>,
    /// (since, file) of every observation whose quiet time began within the longest quiet
    /// time ([`INCOMPLETE_QUIET`]), oldest first: only those can still be settling, so
    /// [`Quiet::next_due`] looks at them and not at every file of a long history (2 % of
    /// the daemon at 600 files a task, growing with each).
    began: VecDeque<(Instant, String)>,
}

impl Seen {
    fn get(&self, file: &str) -> Option<&Obs> {
        self.obs.get(file)
    }

    fn insert(&mut self, file: String, obs: Obs) {
        if self.obs.get(&file).is_none_or(|p| p.since != obs.since) {
            self.prune(obs.since);
            self.began.push_back((obs.since, file.clone()));
        }
        self.obs.insert(file, obs);
        if self.obs.len() > KEEP {
            let first = self.obs.keys().next().cloned();
            if let Some(k) = first {
                self.obs.remove(&k);
            }
        }
    }

    /// Forget the beginnings too old to be settling at `now`.
    fn prune(&mut self, now: Instant) {
        while self
            .began
            .front()
            .is_some_and(|(since, _)| *since + INCOMPLETE_QUIET.max(QUIET) <= now)
        {
            self.began.pop_front();
        }
    }
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
            mtime_ns: crate::store::fsutil::mtime_ns(&m),
            sha256: None,
        };
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        // A close that changed nothing is no write: the writer of an atomic rename closes
        // its file after the rename (inotify reports the close under the new name), and
        // that must not restart the quiet time of a file already vouched for.
        if how == How::Closed && seen.get(file).is_some_and(|p| p.look.same(&look)) {
            return;
        }
        seen.insert(
            file.to_string(),
            Obs {
                look,
                since: now,
                renamed: how == How::Renamed,
                complete: true,
            },
        );
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
        self.ready_at(&l.file, look, reads_complete(&l.handoff), Instant::now())
    }

    fn ready_at(&self, file: &str, look: Look, complete: bool, now: Instant) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let (ready, obs) = decide(seen.get(file), look, complete, now);
        seen.insert(file.to_string(), obs);
        ready
    }

    /// When `file`, observed but not vouched for by a rename, becomes final if it stays as
    /// it was last seen; `None` for a file renamed into place or never observed.
    pub fn settles_at(&self, file: &str) -> Option<Instant> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.get(file).filter(|o| !o.renamed).map(Obs::final_at)
    }

    /// When the next file still settling may be final (to look again then); `None` when
    /// nothing observed is waiting.
    pub fn next_due(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.prune(now);
        seen.began
            .iter()
            .filter_map(|(since, file)| seen.obs.get(file).filter(|o| o.since == *since))
            .filter(|o| !o.renamed)
            .map(Obs::final_at)
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
        assert!(!q.ready_at(f, look(10, "a"), true, t0), "first sight is not quiet");
        assert!(!q.ready_at(f, look(10, "a"), true, t0 + QUIET / 2));
        // An append restarts the quiet time.
        assert!(!q.ready_at(f, look(20, "b"), true, t0 + QUIET));
        assert!(!q.ready_at(f, look(20, "b"), true, t0 + QUIET + QUIET / 2));
        assert!(q.ready_at(f, look(20, "b"), true, t0 + 2 * QUIET));
        // A later change (an amendment) waits its own quiet time.
        assert!(!q.ready_at(f, look(30, "c"), true, t0 + 3 * QUIET));
        assert!(q.ready_at(f, look(30, "c"), true, t0 + 4 * QUIET));
    }

    #[test]
    fn a_handoff_without_status_or_body_waits_longer_then_is_announced_anyway() {
        let q = Quiet::default();
        let t0 = Instant::now();
        let f = "dev-20251127-090000.md";
        assert!(!q.ready_at(f, look(10, "a"), false, t0));
        assert!(!q.ready_at(f, look(10, "a"), false, t0 + QUIET), "quiet but incomplete");
        assert!(q.ready_at(f, look(10, "a"), false, t0 + INCOMPLETE_QUIET), "never lost");
        let h = |t: &str| crate::core::handoff::parse(t);
        assert!(!reads_complete(&h("# Handoff: dev\n")));
        assert!(!reads_complete(&h(
            "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\n"
        )));
        assert!(!reads_complete(&h("# Handoff: dev\n## Completed Work\nWrote it.\n")));
        assert!(reads_complete(&h(
            "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nWrote it.\n"
        )));
        assert!(reads_complete(&h(
            "# Handoff: x\nCycle Result: PASS\n\n## Summary\nok\n"
        )));
    }

    #[test]
    fn same_size_and_mtime_but_other_content_is_a_change() {
        let q = Quiet::default();
        let t0 = Instant::now();
        let f = "dev-20251127-090000.md";
        assert!(!q.ready_at(f, look(10, "a"), true, t0));
        assert!(!q.ready_at(f, look(10, "z"), true, t0 + QUIET));
        assert!(q.ready_at(f, look(10, "z"), true, t0 + 2 * QUIET));
    }

    #[test]
    fn the_close_after_an_atomic_rename_keeps_it_final() {
        let d = tempfile::tempdir().unwrap();
        let f = "dev-20251127-090000.md";
        std::fs::write(
            d.path().join(f),
            "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nx\n",
        )
        .unwrap();
        let q = Quiet::default();
        let t0 = Instant::now();
        q.saw_at(d.path(), f, How::Renamed, t0);
        q.saw_at(d.path(), f, How::Closed, t0);
        let m = std::fs::metadata(d.path().join(f)).unwrap();
        use std::os::unix::fs::MetadataExt;
        let now = Look {
            ino: m.ino(),
            size: m.len(),
            mtime_ns: crate::store::fsutil::mtime_ns(&m),
            sha256: Some("h".into()),
        };
        assert!(q.ready_at(f, now, true, t0), "final at once: the close wrote nothing");
        // A close after a real write (an append) starts the quiet time again.
        std::fs::write(
            d.path().join(f),
            "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nxy\n",
        )
        .unwrap();
        q.saw_at(d.path(), f, How::Closed, t0);
        let m = std::fs::metadata(d.path().join(f)).unwrap();
        let changed = Look {
            ino: m.ino(),
            size: m.len(),
            mtime_ns: crate::store::fsutil::mtime_ns(&m),
            sha256: Some("h2".into()),
        };
        assert!(!q.ready_at(f, changed, true, t0));
    }

    #[test]
    fn only_observations_young_enough_to_settle_are_looked_at_for_the_next_due() {
        let q = Quiet::default();
        let t0 = Instant::now();
        for i in 0..1000 {
            let f = format!("dev-20251127-09{:04}.md", i);
            assert!(!q.ready_at(&f, look(10, "a"), true, t0));
        }
        assert_eq!(q.seen.lock().unwrap().began.len(), 1000);
        let later = t0 + INCOMPLETE_QUIET + QUIET;
        let f = "qa-20251127-100000.md";
        assert!(!q.ready_at(f, look(5, "b"), true, later), "first sight");
        let seen = q.seen.lock().unwrap();
        assert_eq!(seen.began.len(), 1, "the thousand old beginnings are forgotten");
        assert_eq!(seen.obs.len(), 1001, "their observations are kept");
        drop(seen);
        assert!(q.next_due().is_some_and(|t| t >= later), "the young one is still due");
        assert!(
            q.ready_at("dev-20251127-090007.md", look(10, "a"), true, later),
            "an old one is final"
        );
    }

    #[test]
    fn handoffs_a_pull_brought_are_final_at_once_and_the_others_settle() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let (pulled, other) = ("dev-20251127-090000.md", "dev-20251127-090001.md");
        let look = |f: &str| {
            std::fs::write(d.path().join(f), "0123456789").unwrap();
            let m = std::fs::metadata(d.path().join(f)).unwrap();
            Look {
                ino: m.ino(),
                size: 10,
                mtime_ns: crate::store::fsutil::mtime_ns(&m),
                sha256: Some("a".into()),
            }
        };
        let (pulled_look, other_look) = (look(pulled), look(other));
        let q = Quiet::default();
        Ready::Final(&q, d.path()).saw_renamed(&[pulled.to_string()]);
        Ready::All.saw_renamed(&[other.to_string()]);
        let now = Instant::now();
        assert!(q.ready_at(pulled, pulled_look, true, now), "brought whole by the pull");
        assert!(
            !q.ready_at(other, other_look, true, now),
            "no event, no pull: first seen now, it settles"
        );
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
            mtime_ns: crate::store::fsutil::mtime_ns(&m),
            sha256: Some("a".into()),
        };
        assert!(q.ready_at(f, now.clone(), true, t0), "renamed in: final at once");
        assert_eq!(q.next_due(), None, "nothing left settling");
        let grown = Look { size: 11, ..now };
        assert!(!q.ready_at(f, grown, true, t0), "written after the rename: wait again");
        assert!(q.next_due().is_some());
    }
}
