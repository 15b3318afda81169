//! Handoffs parsed by this process, kept while their files are unchanged: progress.md and
//! `task status` read each agent's newest handoff at every check-in and every look, and
//! reading, hashing and parsing the same few files again was a twentieth of the soak
//! daemon's work. An entry is taken on an `lstat` alone only when it finds the very
//! version it was parsed from, read [`SETTLED`] after its last change (the rule of
//! [`crate::store::parsed`]: a change within the kernel's timestamp tick could keep the
//! same times). A version read sooner — every handoff the daemon reads as it lands — is
//! kept too, but only its parse is reused, when the file is read again and its bytes hash
//! the same: the next check-in reads it as its agent's newest. The `lstat` also keeps the
//! regular-file rules: a symlink or a hard link put in a handoff's place is another
//! version, never taken from here.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use crate::core::handoff::Loaded;
use crate::store::parsed::Version;

#[cfg(doc)]
use crate::store::parsed::SETTLED;

/// Past this many entries, or this many bytes of handoffs, the memo starts again empty: a
/// task's handoffs/ keeps every file ever written, and only each agent's newest few are
/// read again and again (a handoff may be as large as the size cap).
const MAX: usize = 4096;
const MAX_BYTES: u64 = 64 * 1024 * 1024;

/// The parsed handoffs (a process memo: [`crate::store::memo`]).
#[derive(Default)]
struct Loads(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    files: HashMap<PathBuf, Entry>,
    /// The kept handoffs' sizes, summed.
    bytes: u64,
}

/// A handoff as parsed from one version of its file.
struct Entry {
    version: Version,
    loaded: Loaded,
    /// Read [`SETTLED`] after the version's last change: the version alone proves the
    /// file unchanged since.
    settled: bool,
}

impl crate::store::memo::Memo for Loads {
    const NAME: &'static str = "parsed handoffs";
    fn entries(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).files.len()
    }
}

fn loads() -> MutexGuard<'static, Kept> {
    crate::store::memo::get::<Loads>()
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// The handoff at `path` as parsed before, when the file is still the settled version it
/// was parsed from.
pub(super) fn kept(path: &Path) -> Option<Loaded> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let now = Version::of(&meta);
    let mut all = loads();
    match all.files.get(path) {
        Some(e) if e.version == now => e.settled.then(|| e.loaded.clone()),
        Some(_) => {
            if let Some(e) = all.files.remove(path) {
                all.bytes = all.bytes.saturating_sub(e.loaded.size);
            }
            None
        }
        None => None,
    }
}

/// The parse kept for `path` when the bytes just read from `version` of it hash to
/// `sha256`, as the kept parse's did: the same bytes, the same handoff.
pub(super) fn same_bytes(path: &Path, version: Version, sha256: &str) -> Option<Loaded> {
    let all = loads();
    let e = all.files.get(path)?;
    (e.version == version && e.loaded.sha256 == sha256).then(|| e.loaded.clone())
}

/// Keep `loaded`, parsed from `version` of `path` as read at `read_at`.
pub(super) fn keep(path: PathBuf, version: Version, read_at: SystemTime, loaded: &Loaded) {
    let mut all = loads();
    if all.files.len() >= MAX || all.bytes.saturating_add(loaded.size) > MAX_BYTES {
        all.files.clear();
        all.bytes = 0;
    }
    let entry = Entry {
        version,
        loaded: loaded.clone(),
        settled: version.settled_by(read_at),
    };
    if let Some(old) = all.files.insert(path, entry) {
        all.bytes = all.bytes.saturating_sub(old.loaded.size);
    }
    all.bytes += loaded.size;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::handoff::{HandoffName, Status};
    use crate::store::fsutil::Skip;

    fn status(dir: &Path, name: &HandoffName) -> std::result::Result<Status, Skip> {
        super::super::load(dir, name).unwrap().map(|l| l.handoff.status)
    }

    #[test]
    fn a_kept_parse_is_taken_only_while_the_file_is_that_version() {
        let d = tempfile::tempdir().unwrap();
        let name = HandoffName::parse("dev-20261128-090000.md").unwrap();
        let path = d.path().join(name.file_name());
        std::fs::write(&path, "# Handoff: dev\n**Status:** COMPLETE\n").unwrap();
        // Aged past the timestamp tick, so the version read is kept.
        std::thread::sleep(crate::store::parsed::SETTLED * 2);
        assert_eq!(status(d.path(), &name), Ok(Status::Complete));
        assert!(kept(&path).is_some(), "a settled version is kept");
        assert!(loads().bytes >= 36, "its size counted against the bound");
        // The same length, other words: a new version, read again.
        std::fs::write(&path, "# Handoff: dev\n**Status:** BLOCKED\n\n").unwrap();
        assert_eq!(status(d.path(), &name), Ok(Status::Blocked));
        // A symlink in its place is never taken from the memo.
        std::thread::sleep(crate::store::parsed::SETTLED * 2);
        assert_eq!(status(d.path(), &name), Ok(Status::Blocked));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(d.path().join("secret"), "# Handoff: dev\n**Status:** COMPLETE\n").unwrap();
        std::os::unix::fs::symlink(d.path().join("secret"), &path).unwrap();
        assert_eq!(status(d.path(), &name), Err(Skip::Symlink));
        // A hard link (it changes the file's ctime) is read again, and refused.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "# Handoff: dev\n**Status:** COMPLETE\n").unwrap();
        std::thread::sleep(crate::store::parsed::SETTLED * 2);
        assert_eq!(status(d.path(), &name), Ok(Status::Complete));
        std::fs::hard_link(&path, d.path().join("other")).unwrap();
        assert_eq!(status(d.path(), &name), Err(Skip::HardLinked));
    }

    #[test]
    fn a_version_read_within_the_tick_of_its_change_is_not_kept() {
        let d = tempfile::tempdir().unwrap();
        let name = HandoffName::parse("dev-20261128-090001.md").unwrap();
        let path = d.path().join(name.file_name());
        std::fs::write(&path, "# Handoff: dev\n**Status:** COMPLETE\n").unwrap();
        assert_eq!(status(d.path(), &name), Ok(Status::Complete));
        assert!(
            kept(&path).is_none(),
            "read at once after its write: not taken on its version"
        );
        // Changed within the same tick — the same length and, as may happen, the same
        // times: its bytes are read again and tell.
        let before = std::fs::metadata(&path).unwrap();
        std::fs::write(&path, "# Handoff: dev\n**Status:** BLOCKED\n").unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_times(
            std::fs::FileTimes::new()
                .set_modified(before.modified().unwrap())
                .set_accessed(before.accessed().unwrap()),
        )
        .unwrap();
        assert_eq!(status(d.path(), &name), Ok(Status::Blocked));
    }

    #[test]
    fn a_handoff_read_as_it_lands_is_parsed_once_when_its_bytes_are_read_again() {
        let d = tempfile::tempdir().unwrap();
        let name = HandoffName::parse("dev-20261128-090002.md").unwrap();
        let path = d.path().join(name.file_name());
        std::fs::write(&path, "# Handoff: dev\n**Status:** COMPLETE\n").unwrap();
        let first = super::super::load(d.path(), &name).unwrap().unwrap();
        // A parse reused is the very one kept: the kept copy is marked, as a fresh parse
        // would not be.
        std::sync::Arc::make_mut(&mut loads().files.get_mut(&path).unwrap().loaded.handoff)
            .warnings
            .push("kept".into());
        let again = super::super::load(d.path(), &name).unwrap().unwrap();
        assert_eq!(
            again.handoff.warnings.last().map(String::as_str),
            Some("kept"),
            "the same bytes: the kept parse"
        );
        assert_eq!(again.sha256, first.sha256);
    }
}
