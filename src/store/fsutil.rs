//! Crash-safe file writes and careful reads.
//!
//! Every file the supervisor owns is replaced by write-temp, fsync, rename,
//! fsync-folder, so a `kill -9` at any instant leaves either the old or the new
//! content, never a torn file. Temp files start with a dot so watchers and
//! scans (which skip dot files) never pick them up.
//!
//! Reads of agent-written files go through [`read_regular`], which refuses
//! symlinks, FIFOs, devices and hard links: a handoff symlinked to a private
//! key must never be read, and a FIFO must never block the supervisor.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::core::error::{Error, Result};

pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

pub(crate) fn temp_in(dir: &Path) -> Result<tempfile::NamedTempFile> {
    tempfile::Builder::new()
        .prefix(".tmp-")
        .tempfile_in(dir)
        .map_err(|e| Error::io("create a temp file in", dir, e))
}

fn fill(tmp: &mut tempfile::NamedTempFile, bytes: &[u8]) -> Result<()> {
    let p = tmp.path().to_path_buf();
    tmp.write_all(bytes).map_err(|e| Error::io("write", &p, e))?;
    tmp.as_file().sync_all().map_err(|e| Error::io("fsync", &p, e))
}

/// fsync a folder so a rename inside it survives a power cut.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io("fsync folder", dir, e))
}

/// Replace `path` with `bytes` atomically (temp file in the same folder, fsync, rename, fsync folder).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_of(path);
    let mut tmp = temp_in(dir)?;
    fill(&mut tmp, bytes)?;
    tmp.persist(path)
        .map_err(|e| Error::io("rename into place", path, e.error))?;
    sync_dir(dir)
}

/// Replace `path` with `bytes` by a rename, without the fsyncs: for files rebuilt from the
/// state when lost (progress.md, usage.json's counts), rewritten at every check-in. A
/// reader never sees half a file and a killed process leaves the old one or the new one;
/// only a power cut may cost the last version, which the next check-in writes again.
pub fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = temp_in(parent_of(path))?;
    let p = tmp.path().to_path_buf();
    tmp.write_all(bytes).map_err(|e| Error::io("write", &p, e))?;
    tmp.persist(path)
        .map_err(|e| Error::io("rename into place", path, e.error))?;
    Ok(())
}

/// What an in-place record is padded to: a whole number of these, so its size stays put.
const PAGE: usize = 4096;

/// Overwrite `path` with `bytes` in place, padded with spaces to whole 4 KiB pages: no new
/// file, no rename, so no new inode for a small record rewritten at every check-in, and
/// while the record fits the same pages its size does not change. No fsync: what such a
/// record guards dies with the machine (see `app::checkin::intent`), and one write call
/// of whole pages outlives a `kill -9` of the writer. Not atomic against a power cut: old
/// and new bytes may come back mixed, so it is only for records whose reader takes JSON
/// followed by blanks and takes bytes that do not parse as "never saved".
pub fn overwrite_in_place(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    // The file exists at every save but a task's first: open it as it is, and create it
    // only when it is missing (one failed open per check-in otherwise).
    let f = match File::options().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::options()
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?,
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let padded = padded(bytes);
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    f.write_all_at(&padded, 0).map_err(|e| Error::io("write", path, e))?;
    if len != padded.len() as u64 {
        f.set_len(padded.len() as u64)
            .map_err(|e| Error::io("truncate", path, e))?;
    }
    Ok(())
}

/// `bytes` and spaces after them up to whole pages, at least one (pure).
fn padded(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len().div_ceil(PAGE).max(1) * PAGE);
    out.extend_from_slice(bytes);
    out.resize(out.capacity(), b' ');
    out
}

/// Blank `path` in place, spaces over its whole length (nothing to do when it does not
/// exist): the other half of [`overwrite_in_place`], keeping the size the next save
/// writes. Not synced: it survives the process's crash, not the machine's,
/// which is all its one caller needs (see [`crate::app::checkin::intent::clear`]).
pub fn blank_in_place(path: &Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let f = match File::options().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    let blanks = vec![b' '; usize::try_from(len).unwrap_or(usize::MAX).min(1 << 20)];
    if blanks.len() as u64 != len {
        // Not a file this module wrote: blank it the short way.
        return f.set_len(0).map_err(|e| Error::io("truncate", path, e));
    }
    f.write_all_at(&blanks, 0).map_err(|e| Error::io("write", path, e))
}

/// Create `path` atomically with `bytes`, never replacing an existing file.
/// Returns `Ok(false)` when the name is already taken.
pub fn atomic_create(path: &Path, bytes: &[u8]) -> Result<bool> {
    let dir = parent_of(path);
    let mut tmp = temp_in(dir)?;
    fill(&mut tmp, bytes)?;
    match tmp.persist_noclobber(path) {
        Ok(_) => {
            sync_dir(dir)?;
            Ok(true)
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::io("create", path, e.error)),
    }
}

/// [`atomic_create`] from a temp file written and closed in `stage`, a folder beside `path`'s
/// on the same file system that no one watches: of the whole write, only the rename in is an
/// event in `path`'s folder. Why: handoffs/ is watched, and a temp file made there told the
/// daemon's watcher six things about a file it then ignored (create, open, modify, close,
/// move away, and the close after the rename), each one read, decoded and matched by the
/// daemon at every handoff. Both folders are fsynced after the rename, so a power cut
/// cannot leave the old name beside the new one (a second link, which makes the file
/// unreadable to the daemon). Where `stage` cannot take a temp file, or is on another file
/// system, the temp file is made in `path`'s folder as [`atomic_create`] does.
pub fn atomic_create_staged(stage: &Path, path: &Path, bytes: &[u8]) -> Result<bool> {
    let Ok(mut tmp) = temp_in(stage) else {
        return atomic_create(path, bytes);
    };
    fill(&mut tmp, bytes)?;
    let tmp = tmp.into_temp_path();
    match tmp.persist_noclobber(path) {
        Ok(()) => {
            sync_dir(parent_of(path))?;
            sync_dir(stage)?;
            Ok(true)
        }
        Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) if e.error.raw_os_error() == Some(libc::EXDEV) => atomic_create(path, bytes),
        Err(e) => Err(Error::io("create", path, e.error)),
    }
}

/// Why an agent-written file was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    /// A symbolic link (never followed).
    Symlink,
    /// Not a regular file: FIFO, socket, device or folder.
    NotRegular,
    /// A regular file with more than one hard link (it may alias a private file).
    HardLinked,
    /// It vanished or changed identity between listing and reading.
    Raced,
}

impl Skip {
    /// A short phrase for warnings.
    pub fn reason(&self) -> &'static str {
        match self {
            Skip::Symlink => "it is a symbolic link",
            Skip::NotRegular => "it is not a regular file",
            Skip::HardLinked => "it has more than one hard link",
            Skip::Raced => "it changed while being read",
        }
    }
}

/// What [`read_regular`] found.
#[derive(Debug)]
pub struct Contents {
    /// The bytes read, at most `cap`.
    pub bytes: Vec<u8>,
    /// The file was larger than `cap`; `bytes` holds its head.
    pub truncated: bool,
    /// Size from fstat of the opened file.
    pub size: u64,
    /// Modification time in nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// The version read (identity, size, times), from the same fstat.
    pub version: crate::store::parsed::Version,
}

/// Check an lstat result against the regular-file rules.
pub fn check_regular(meta: &fs::Metadata) -> std::result::Result<(), Skip> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        Err(Skip::Symlink)
    } else if !ft.is_file() {
        Err(Skip::NotRegular)
    } else if meta.nlink() > 1 {
        Err(Skip::HardLinked)
    } else {
        Ok(())
    }
}

/// mtime of a metadata record in nanoseconds since the epoch.
pub fn mtime_ns(meta: &fs::Metadata) -> i64 {
    meta.mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.mtime_nsec())
}

/// Whether every change to files under `dir` goes through this machine's kernel, so a
/// file watcher (inotify) sees it: `None` when the folder cannot be asked (`statfs`).
pub fn is_local_fs(dir: &Path) -> Option<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut buf = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c` is a NUL-terminated path and `buf` is a statfs the call fills in.
    let rc = unsafe { libc::statfs(c.as_ptr(), buf.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statfs returned 0, so it filled `buf`.
    let f_type = unsafe { buf.assume_init() }.f_type;
    // Its width and sign differ between C libraries (i64 with glibc on x86-64, u64 or u32
    // elsewhere): the cast is the one way that compiles on each.
    #[allow(clippy::unnecessary_cast)]
    Some(is_local_kind(f_type as i64))
}

/// Whether a file system of this `statfs` type is written only through the local kernel
/// (pure). Network and FUSE file systems (NFS, SMB/CIFS, 9p, Ceph, AFS, Coda, GlusterFS
/// and sshfs over FUSE, Lustre, GPFS) can be written from another machine, which no
/// watcher here sees; every other type is taken as local.
pub fn is_local_kind(f_type: i64) -> bool {
    const REMOTE: &[i64] = &[
        0x6969,      // NFS
        0x517B,      // SMB
        0xFF53_4D42, // CIFS
        0xFE53_4D42, // SMB2
        0x0102_1997, // 9P (v9fs)
        0x00C3_6400, // Ceph
        0x5346_414F, // AFS
        0x6B41_4653, // kAFS
        0x7375_7245, // Coda
        0x6573_5546, // FUSE
        0x0BD0_0BD0, // Lustre
        0x4750_4653, // GPFS
    ];
    !REMOTE.contains(&(f_type & 0xFFFF_FFFF))
}

/// Now, in nanoseconds since the epoch, to compare with [`mtime_ns`].
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Read an agent-written file if and only if it is a plain regular file.
///
/// Opened with O_NOFOLLOW|O_NONBLOCK (a symlink swapped in after the lstat
/// fails to open; a FIFO never blocks), then re-checked with fstat.
pub fn read_regular(path: &Path, cap: u64) -> Result<std::result::Result<Contents, Skip>> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Err(Skip::Raced)),
        Err(e) => return Err(Error::io("inspect", path, e)),
    };
    if let Err(skip) = check_regular(&meta) {
        return Ok(Err(skip));
    }
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(Err(Skip::Symlink)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Err(Skip::Raced)),
        Err(e) => return Err(Error::io("open", path, e)),
    };
    let fmeta = file.metadata().map_err(|e| Error::io("inspect", path, e))?;
    if let Err(skip) = check_regular(&fmeta) {
        return Ok(Err(skip));
    }
    if fmeta.ino() != meta.ino() || fmeta.dev() != meta.dev() {
        return Ok(Err(Skip::Raced));
    }
    let mut bytes = Vec::with_capacity(fmeta.len().min(cap) as usize + 1);
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read", path, e))?;
    let truncated = bytes.len() as u64 > cap;
    if truncated {
        bytes.truncate(cap as usize);
    }
    Ok(Ok(Contents {
        bytes,
        truncated,
        size: fmeta.len(),
        mtime_ns: mtime_ns(&fmeta),
        version: crate::store::parsed::Version::of(&fmeta),
    }))
}

/// Create a folder and its parents, naming the folder on failure.
pub fn create_dir_all(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io("create folder", dir, e))
}

/// Make a path absolute against the current directory without touching the disk.
pub fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| Error::io("resolve", path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn network_and_fuse_file_systems_are_not_local() {
        assert!(is_local_kind(0xEF53), "ext4");
        assert!(is_local_kind(0x0102_1994), "tmpfs");
        assert!(is_local_kind(0x794C_7630), "overlayfs");
        assert!(!is_local_kind(0x6969), "NFS");
        assert!(!is_local_kind(0x6573_5546), "FUSE (sshfs)");
        assert!(!is_local_kind(0xFF53_4D42), "CIFS");
        assert!(!is_local_kind(0xFFFF_FFFF_FF53_4D42u64 as i64), "CIFS, sign-extended");
        let d = tempfile::tempdir().unwrap();
        assert!(is_local_fs(d.path()).is_some(), "a real folder can be asked");
        assert_eq!(is_local_fs(&d.path().join("gone")), None);
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.json");
        atomic_write(&p, b"one").unwrap();
        atomic_write(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_in_place_record_keeps_its_inode_and_size_and_reads_back_as_json() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.json");
        overwrite_in_place(&p, br#"{"id":"c-1","files":["a.md","b.md","c.md"]}"#).unwrap();
        let first = fs::metadata(&p).unwrap();
        overwrite_in_place(&p, br#"{"id":"c-2","files":[]}"#).unwrap();
        let second = fs::metadata(&p).unwrap();
        assert_eq!(
            (second.ino(), second.len()),
            (first.ino(), PAGE as u64),
            "same file, same size"
        );
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert_eq!(v["id"], "c-2", "no byte of the longer record before it is left");

        let big = format!(r#"{{"pad":"{}"}}"#, "x".repeat(PAGE));
        overwrite_in_place(&p, big.as_bytes()).unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), 2 * PAGE as u64, "grows by whole pages");
        overwrite_in_place(&p, b"{}").unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), PAGE as u64, "and shrinks back");

        blank_in_place(&p).unwrap();
        let blanked = fs::read(&p).unwrap();
        assert_eq!(blanked.len(), PAGE, "blanking keeps the size");
        assert!(blanked.iter().all(|b| *b == b' '));
        assert_eq!(fs::metadata(&p).unwrap().ino(), first.ino());
        blank_in_place(&d.path().join("absent")).unwrap();
        assert!(!d.path().join("absent").exists(), "blanking creates nothing");
    }

    #[test]
    fn atomic_create_never_clobbers() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.md");
        assert!(atomic_create(&p, b"first").unwrap());
        assert!(!atomic_create(&p, b"second").unwrap());
        assert_eq!(fs::read(&p).unwrap(), b"first");
        assert_eq!(fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn read_regular_refuses_links_and_fifos() {
        let d = tempfile::tempdir().unwrap();
        let secret = d.path().join("secret");
        fs::write(&secret, "key").unwrap();
        let sym = d.path().join("sym.md");
        std::os::unix::fs::symlink(&secret, &sym).unwrap();
        assert_eq!(read_regular(&sym, 10).unwrap().unwrap_err(), Skip::Symlink);

        let hard = d.path().join("hard.md");
        fs::hard_link(&secret, &hard).unwrap();
        assert_eq!(read_regular(&hard, 10).unwrap().unwrap_err(), Skip::HardLinked);

        let fifo = d.path().join("fifo.md");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_regular(&fifo, 10).unwrap().unwrap_err(), Skip::NotRegular);

        let dir = d.path().join("dir.md");
        fs::create_dir(&dir).unwrap();
        assert_eq!(read_regular(&dir, 10).unwrap().unwrap_err(), Skip::NotRegular);
    }

    #[test]
    fn read_regular_caps_size() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.md");
        fs::write(&p, vec![b'x'; 100]).unwrap();
        let c = read_regular(&p, 10).unwrap().unwrap();
        assert!(c.truncated);
        assert_eq!(c.bytes.len(), 10);
        assert_eq!(c.size, 100);
        let c = read_regular(&p, 100).unwrap().unwrap();
        assert!(!c.truncated);
    }
}
