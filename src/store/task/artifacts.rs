//! A task's artifacts (every regular, non-dot file under `artifacts/`), listed for
//! progress.md and `task status` at every check-in.
//!
//! Why a memo: the listing opened and read six folders per check-in, nearly always
//! unchanged. A folder's entries are kept with the folder's version ([`parsed::Version`]:
//! adding, removing or renaming an entry changes its times) and read again only when the
//! version differs or was read too soon after its last change to be trusted (the
//! timestamp-granularity rule of [`parsed`]). The files themselves are looked at on every
//! listing: a file rewritten in place changes its mtime, not its folder.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::core::error::{Error, Result};
use crate::core::scribe::Artifact;
use crate::store::memo::{self, Memo};
use crate::store::{fsutil, parsed};

/// One folder's entries as last read: names, and which are folders.
struct Entries {
    version: parsed::Version,
    names: Vec<(OsString, Kind)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Folder,
    File,
}

/// Artifact folders by path, with their entries.
#[derive(Default)]
struct Folders(Mutex<HashMap<PathBuf, Entries>>);

impl Memo for Folders {
    const NAME: &'static str = "artifacts/ folders";
    fn entries(&self) -> usize {
        self.0.lock().map_or(0, |m| m.len())
    }
}

/// Every regular, non-dot file under the task's `artifacts/`, sorted by path. Symlinks are
/// not followed.
pub fn list(task_dir: &Path, artifacts: &Path) -> Result<Vec<Artifact>> {
    let mut out = Vec::new();
    let mut stack = vec![artifacts.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Some(names) = entries(&dir)? else {
            continue;
        };
        for (name, kind) in names {
            let path = dir.join(&name);
            match kind {
                Kind::Folder => stack.push(path),
                Kind::File => {
                    let meta = match std::fs::symlink_metadata(&path) {
                        Ok(m) if m.is_file() => m,
                        // Gone or replaced since the folder was read: its next version says.
                        Ok(_) => continue,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(e) => return Err(Error::io("inspect", &path, e)),
                    };
                    let rel = path.strip_prefix(task_dir).unwrap_or(&path);
                    out.push(Artifact {
                        path: rel.to_string_lossy().into_owned(),
                        mtime_ns: fsutil::mtime_ns(&meta),
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

/// The non-dot folders and regular files in `dir` (`None`: no such folder), from the memo
/// while the folder's version is the one they were read at.
fn entries(dir: &Path) -> Result<Option<Vec<(OsString, Kind)>>> {
    let version = match std::fs::metadata(dir) {
        Ok(m) => parsed::Version::of(&m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let folders = &memo::get::<Folders>().0;
    let lock = || folders.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = lock().get(dir)
        && e.version == version
    {
        return Ok(Some(e.names.clone()));
    }
    let read_at = SystemTime::now();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("list", dir, e)),
    };
    let mut names = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", dir, e))?;
        let name = entry.file_name();
        if name.as_encoded_bytes().starts_with(b".") {
            continue;
        }
        let ft = entry.file_type().map_err(|e| Error::io("inspect", entry.path(), e))?;
        if ft.is_dir() {
            names.push((name, Kind::Folder));
        } else if ft.is_file() {
            names.push((name, Kind::File));
        }
    }
    // Remembered only when no change can share the version's timestamps (see `parsed`);
    // the stat taken before the read names what the read saw at the latest.
    if version.settled_by(read_at) {
        lock().insert(
            dir.to_path_buf(),
            Entries {
                version,
                names: names.clone(),
            },
        );
    }
    Ok(Some(names))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(v: &[Artifact]) -> Vec<&str> {
        v.iter().map(|a| a.path.as_str()).collect()
    }

    /// Let the folders' last change settle, so the next listing may be remembered.
    fn settle() {
        std::thread::sleep(parsed::SETTLED + std::time::Duration::from_millis(5));
    }

    #[test]
    fn every_change_to_the_artifacts_shows_in_the_next_listing() {
        let d = tempfile::tempdir().unwrap();
        let (task, arts) = (d.path(), d.path().join("artifacts"));
        assert!(list(task, &arts).unwrap().is_empty(), "no folder: nothing");
        std::fs::create_dir_all(arts.join("code/deep")).unwrap();
        std::fs::write(arts.join("code/a.py"), "a").unwrap();
        std::fs::write(arts.join("code/.hidden"), "h").unwrap();
        std::fs::write(arts.join("code/deep/b.md"), "b").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", arts.join("code/link")).unwrap();
        settle();
        let first = list(task, &arts).unwrap();
        assert_eq!(paths(&first), ["artifacts/code/a.py", "artifacts/code/deep/b.md"]);
        assert_eq!(
            paths(&list(task, &arts).unwrap()),
            paths(&first),
            "remembered, same answer"
        );

        // At once after each change, no settling: added, rewritten in place, removed.
        std::fs::write(arts.join("code/deep/c.md"), "c").unwrap();
        assert_eq!(
            paths(&list(task, &arts).unwrap()),
            [
                "artifacts/code/a.py",
                "artifacts/code/deep/b.md",
                "artifacts/code/deep/c.md"
            ]
        );
        let old = first[0].mtime_ns;
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(arts.join("code/a.py"), "changed").unwrap();
        let now = list(task, &arts).unwrap();
        assert!(now[0].mtime_ns > old, "a file rewritten in place shows its new mtime");
        std::fs::remove_file(arts.join("code/deep/b.md")).unwrap();
        assert_eq!(
            paths(&list(task, &arts).unwrap()),
            ["artifacts/code/a.py", "artifacts/code/deep/c.md"]
        );
        std::fs::remove_dir_all(arts.join("code/deep")).unwrap();
        assert_eq!(paths(&list(task, &arts).unwrap()), ["artifacts/code/a.py"]);
    }
}
