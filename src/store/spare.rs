//! Files rewritten at every check-in (pm_state.json, progress.md, usage.json) replaced
//! without a new inode per write.
//!
//! Why: on an ext4 without a journal (these machines' root file system) the inode
//! allocator passes over every inode freed in the last 30 s, and at 20 check-ins a second
//! each new temp file paid for some thousand of them: with the inodes the rename frees,
//! about a tenth of the 360-agent soak daemon's work. So the previous version is kept
//! beside the file as its spare (`.NAME.spare`): the next version is written into the
//! spare and exchanged with the file in one atomic rename (`RENAME_EXCHANGE`), which
//! leaves the version before as the next spare. No inode is made or freed.
//!
//! A reader sees what [`fsutil::replace`] gives it: the old file or the new one, whole,
//! never a file with two names (the hard-link rule of `read_regular`). A spare is written
//! only once it has been out of use for [`REST`], so a reader that opened the file just
//! before it was swapped out has long finished reading it. Anything else (no spare yet,
//! one swapped out moments ago, one another writer holds, a symlink or a second name
//! planted there, a file system without the exchange) takes [`fsutil::replace`]'s way,
//! with a new file, and the version it replaces becomes the spare.
//!
//! [`replace`] is `fsutil::replace`'s care: no fsync, for files rebuilt from the state when
//! lost. [`replace_durably`] is `fsutil::atomic_write`'s, for the state itself: the bytes
//! are fsynced before the exchange and the folder after it. Every writer of the state holds
//! its lock, so a reader under the lock (the one that would set a corrupt-looking state
//! aside) never meets a spare being written; a reader without it could only if it held the
//! file open for [`REST`] after it was swapped out, and such a reader only reports.

use std::ffi::CString;
use std::fs::{self, File};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::core::error::{Error, Result};
use crate::store::fsutil;

/// How long a spare rests after it was swapped out before it is written again: far longer
/// than a reader takes to read one of these files whole.
pub const REST: Duration = Duration::from_secs(2);

/// The spare kept beside `path`: a dot file, which every scan and watcher passes over.
pub fn spare_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.spare"))
}

/// How much a write must survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Care {
    /// A crash of the process (the file is rebuilt when a power cut loses it).
    Rebuilt,
    /// A power cut too: fsynced like `fsutil::atomic_write`.
    Durable,
}

/// Replace `path` with `bytes`, reusing its spare when it may be (see the module).
pub fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_after(path, bytes, REST, Care::Rebuilt)
}

/// [`replace`] that survives a power cut: the bytes fsynced before they are exchanged in,
/// the folder after.
pub fn replace_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_after(path, bytes, REST, Care::Durable)
}

fn replace_after(path: &Path, bytes: &[u8], rest: Duration, care: Care) -> Result<()> {
    if into_spare(path, bytes, rest, care)? {
        return Ok(());
    }
    replace_keeping_spare(path, bytes, care)
}

/// The folder fsync a durable write ends with. Needed after an exchange too, though both
/// names existed before it: the next save writes into the spare, and a directory that
/// never reached the disk would still call that inode the file, so a power cut in the
/// middle of that write would leave the file torn.
fn settle(path: &Path, care: Care) -> Result<()> {
    match care {
        Care::Durable => fsutil::sync_dir(fsutil::parent_of(path)),
        Care::Rebuilt => Ok(()),
    }
}

/// Write into the spare and exchange it with the file; `false` when the spare may not be
/// used (nothing written to the file then).
fn into_spare(path: &Path, bytes: &[u8], rest: Duration, care: Care) -> Result<bool> {
    let spare = spare_path(path);
    let Ok(f) = File::options()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&spare)
    else {
        return Ok(false);
    };
    // Another writer of the same file holds it: its way, not ours.
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(false);
    }
    let Some(len) = usable(&f, &spare, path, rest) else {
        return Ok(false);
    };
    f.write_all_at(bytes, 0).map_err(|e| Error::io("write", &spare, e))?;
    // A size that stays the same is not set again (a truncate of its own, and a durable
    // write's fdatasync would then write the inode as well as the data).
    if len != bytes.len() as u64 {
        f.set_len(bytes.len() as u64)
            .map_err(|e| Error::io("truncate", &spare, e))?;
    }
    if care == Care::Durable {
        f.sync_data().map_err(|e| Error::io("fsync", &spare, e))?;
    }
    if exchange(&spare, path).is_err() {
        return Ok(false);
    }
    settle(path, care)?;
    Ok(true)
}

/// The spare is still the one opened, a plain file with one name, not the file itself
/// (a crash or a hand could have made it so), and has rested: its length when it may be
/// written.
fn usable(f: &File, spare: &Path, path: &Path, rest: Duration) -> Option<u64> {
    let (Ok(mine), Ok(named), Ok(live)) = (f.metadata(), fs::symlink_metadata(spare), fs::symlink_metadata(path))
    else {
        return None;
    };
    let id = |m: &fs::Metadata| (m.dev(), m.ino());
    let rested = SystemTime::now().duration_since(ctime(&mine)).is_ok_and(|d| d >= rest);
    (mine.is_file()
        && mine.nlink() == 1
        && id(&mine) == id(&named)
        && live.is_file()
        && id(&mine) != id(&live)
        && rested)
        .then_some(mine.len())
}

fn ctime(m: &fs::Metadata) -> SystemTime {
    UNIX_EPOCH + Duration::new(m.ctime().max(0) as u64, m.ctime_nsec().clamp(0, 999_999_999) as u32)
}

/// [`fsutil::replace`]'s way (a new file renamed in), exchanged rather than renamed over
/// the file so the version it replaces is kept as the spare when there is none.
fn replace_keeping_spare(path: &Path, bytes: &[u8], care: Care) -> Result<()> {
    // An exchange would move whatever is at `path` — a folder, a link — to the spare's name;
    // only a plain file is kept as a spare, anything else meets the rename's own errors.
    let live_is_file = fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
    if fs::symlink_metadata(spare_path(path)).is_ok() || !live_is_file {
        return match care {
            Care::Rebuilt => fsutil::replace(path, bytes),
            Care::Durable => fsutil::atomic_write(path, bytes),
        };
    }
    let tmp = fsutil::temp_in(fsutil::parent_of(path))?;
    tmp.as_file()
        .write_all_at(bytes, 0)
        .map_err(|e| Error::io("write", tmp.path(), e))?;
    if care == Care::Durable {
        tmp.as_file()
            .sync_all()
            .map_err(|e| Error::io("fsync", tmp.path(), e))?;
    }
    match exchange(tmp.path(), path) {
        // The temp name now holds the previous version: the spare, unless another writer
        // made one meanwhile (then the temp file goes when dropped).
        Ok(()) => {
            if no_replace_rename(tmp.path(), &spare_path(path)).is_ok() {
                let _ = tmp.into_temp_path().keep();
            }
            settle(path, care)
        }
        // No file yet, or no exchange here: the plain rename.
        Err(_) => {
            tmp.persist(path)
                .map_err(|e| Error::io("rename into place", path, e.error))?;
            settle(path, care)
        }
    }
}

fn c_path(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
}

fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> std::io::Result<()> {
    let (from, to) = (c_path(from)?, c_path(to)?);
    // SAFETY: two NUL-terminated paths that live across the call.
    let rc = unsafe { libc::renameat2(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Swap two names' files atomically: a reader of either name never finds it missing.
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    renameat2(a, b, libc::RENAME_EXCHANGE)
}

fn no_replace_rename(from: &Path, to: &Path) -> std::io::Result<()> {
    renameat2(from, to, libc::RENAME_NOREPLACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ino(p: &Path) -> u64 {
        fs::symlink_metadata(p).unwrap().ino()
    }

    #[test]
    fn the_spare_is_reused_once_rested_and_no_inode_is_made() {
        for care in [Care::Rebuilt, Care::Durable] {
            the_spare_is_reused_with(care);
        }
    }

    fn the_spare_is_reused_with(care: Care) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("progress.md");
        replace_after(&p, b"one", Duration::ZERO, care).unwrap();
        assert!(!spare_path(&p).exists(), "no previous version, no spare");
        replace_after(&p, b"two", Duration::ZERO, care).unwrap();
        assert_eq!(
            fs::read(spare_path(&p)).unwrap(),
            b"one",
            "the version replaced is the spare"
        );
        let (live, spare) = (ino(&p), ino(&spare_path(&p)));
        replace_after(&p, b"three, longer", Duration::ZERO, care).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"three, longer");
        assert_eq!((ino(&p), ino(&spare_path(&p))), (spare, live), "the two inodes swapped");
        replace_after(&p, b"4", Duration::ZERO, care).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"4", "a shorter version leaves no tail");
        assert_eq!(ino(&p), live);
        replace_after(&p, b"five, longer!", Duration::ZERO, care).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"five, longer!", "same length as the spare");
        let names: Vec<String> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "the file and its spare, no temp left: {names:?}");
        assert_eq!(fs::symlink_metadata(&p).unwrap().nlink(), 1);
    }

    #[test]
    fn a_reader_of_the_old_version_keeps_it_whole_while_the_spare_rests() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("usage.json");
        replace_after(&p, b"one", REST, Care::Rebuilt).unwrap();
        replace_after(&p, b"two", REST, Care::Rebuilt).unwrap();
        let opened = File::open(&p).unwrap();
        // Swapped out just now: it rests, so the next two writes make new files.
        replace_after(&p, b"three", REST, Care::Rebuilt).unwrap();
        replace_after(&p, b"four", REST, Care::Rebuilt).unwrap();
        let mut seen = String::new();
        std::io::Read::read_to_string(&mut &opened, &mut seen).unwrap();
        assert_eq!(seen, "two");
        assert_eq!(fs::read(&p).unwrap(), b"four");
    }

    #[test]
    fn a_folder_where_the_file_goes_is_an_error_and_stays_where_it_is() {
        for care in [Care::Rebuilt, Care::Durable] {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("pm_state.json");
            fs::create_dir(&p).unwrap();
            assert!(replace_after(&p, b"one", Duration::ZERO, care).is_err(), "{care:?}");
            assert!(p.is_dir() && !spare_path(&p).exists(), "{care:?}");
            replace_after(&d.path().join("f"), b"one", Duration::ZERO, care).unwrap();
            replace_after(&d.path().join("f"), b"two", Duration::ZERO, care).unwrap();
            fs::remove_file(d.path().join("f")).unwrap();
            fs::create_dir(d.path().join("f")).unwrap();
            assert!(replace_after(&d.path().join("f"), b"three", Duration::ZERO, care).is_err());
            assert_eq!(fs::read(spare_path(&d.path().join("f"))).unwrap(), b"one", "{care:?}");
        }
    }

    #[test]
    fn a_spare_that_is_the_file_itself_or_a_link_is_never_written_into() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("progress.md");
        replace_after(&p, b"one", Duration::ZERO, Care::Rebuilt).unwrap();
        // The file's second name as its spare (a crash or a hand): writing into it would
        // change the file in place.
        fs::hard_link(&p, spare_path(&p)).unwrap();
        replace_after(&p, b"two", Duration::ZERO, Care::Rebuilt).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        // A symlink planted as the spare is not followed.
        let secret = d.path().join("secret");
        fs::write(&secret, "key").unwrap();
        fs::remove_file(spare_path(&p)).unwrap();
        std::os::unix::fs::symlink(&secret, spare_path(&p)).unwrap();
        replace_after(&p, b"three", Duration::ZERO, Care::Rebuilt).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"three");
        assert_eq!(fs::read(&secret).unwrap(), b"key");
    }

    #[test]
    fn a_writer_holding_the_spare_sends_another_the_plain_way() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("progress.md");
        replace_after(&p, b"one", Duration::ZERO, Care::Rebuilt).unwrap();
        replace_after(&p, b"two", Duration::ZERO, Care::Rebuilt).unwrap();
        let held = File::options().write(true).open(spare_path(&p)).unwrap();
        // SAFETY: flock on a descriptor the test owns.
        assert_eq!(unsafe { libc::flock(held.as_raw_fd(), libc::LOCK_EX) }, 0);
        replace_after(&p, b"three", Duration::ZERO, Care::Rebuilt).unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"three");
        assert_eq!(fs::read(spare_path(&p)).unwrap(), b"one", "the held spare untouched");
    }
}
