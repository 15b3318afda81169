//! The handoff ledger and the lineage on disk: one append-only log beside pm_state.json
//! (`pm_state.log.jsonl`), one JSON line per record, `{"ledger": …}` or `{"lineage": …}`.
//!
//! Both grow with every handoff. Kept inside pm_state.json they made every save rewrite
//! and fsync the whole history and every new version cost a decode of it: after 30
//! minutes of the 100-agent soak that was ~120 KB per task and most of the daemon's CPU
//! (issue 13). Now a save appends only what is new, and a read parses only what was added
//! since the last read of the log. One log, not one per kind (version 3 had two): a
//! check-in adds to both, and each log cost its own open, append and fdatasync — a
//! twentieth of the 360-agent soak daemon's work.
//!
//! Crash safety: pm_state.json stays the one commit point. It records how many bytes of
//! the log it has committed ([`Logs`]); a save first cuts the log back to the length the
//! state on disk committed (the remains of a save that crashed before its rename, a torn
//! line from a full disk), appends and fsyncs, and only then renames the new state in. A
//! reader takes a state and reads the log up to that state's length, so it never sees a
//! record the state has not committed.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::core::error::{Error, Result};
use crate::core::handoff::{Ledger, LedgerEntry};
use crate::core::model::Lineage;
use crate::core::model::state::{LineageEntry, Logs, PmState};
use crate::store::memo::{self, Memo};

/// The log of the state at `state_path`.
pub fn log_path(state_path: &Path) -> PathBuf {
    state_path.with_file_name("pm_state.log.jsonl")
}

/// A version-3 state's ledger log: read until its first save, which moves the records
/// into [`log_path`].
pub fn ledger_path(state_path: &Path) -> PathBuf {
    state_path.with_file_name("pm_state.ledger.jsonl")
}

/// A version-3 state's lineage log, likewise.
pub fn lineage_path(state_path: &Path) -> PathBuf {
    state_path.with_file_name("pm_state.lineage.jsonl")
}

/// A ledger record; a later one for the same file replaces an earlier one. Borrowed when
/// written, owned when read. A version-3 ledger log's lines are these, untagged.
#[derive(Serialize, Deserialize)]
struct LedgerLine<'a> {
    file: Cow<'a, str>,
    #[serde(flatten)]
    entry: Cow<'a, LedgerEntry>,
}

/// One line of the log.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Line<'a> {
    Ledger(LedgerLine<'a>),
    Lineage(Cow<'a, LineageEntry>),
}

/// What a log holds once read: applied line by line.
trait Record: Default + Clone + Send + 'static {
    fn apply(&mut self, line: &[u8]) -> std::result::Result<(), serde_json::Error>;
}

/// The records of the log: the ledger and the lineage, each shared with the states
/// handed out (so a copy of this is two reference counts).
#[derive(Default, Clone)]
struct Records {
    ledger: Arc<Ledger>,
    lineage: Arc<Lineage>,
}

impl Record for Records {
    fn apply(&mut self, line: &[u8]) -> std::result::Result<(), serde_json::Error> {
        match serde_json::from_slice(line)? {
            Line::Ledger(l) => Arc::make_mut(&mut self.ledger).insert(l.file.into_owned(), l.entry.into_owned()),
            Line::Lineage(e) => Arc::make_mut(&mut self.lineage).push(e.into_owned()),
        }
        Ok(())
    }
}

impl Record for Ledger {
    fn apply(&mut self, line: &[u8]) -> std::result::Result<(), serde_json::Error> {
        let l: LedgerLine = serde_json::from_slice(line)?;
        self.insert(l.file.into_owned(), l.entry.into_owned());
        Ok(())
    }
}

impl Record for Lineage {
    fn apply(&mut self, line: &[u8]) -> std::result::Result<(), serde_json::Error> {
        self.push(serde_json::from_slice(line)?);
        Ok(())
    }
}

/// A log as far as it was read: the file's identity, the bytes consumed, the records
/// (shared with the states handed out; copied only when more records are read).
struct Consumed<T> {
    dev_ino: (u64, u64),
    read: u64,
    records: Arc<T>,
}

/// What has been read of each log, so the next read of a grown log parses only its tail.
struct Tails<T> {
    logs: Mutex<HashMap<PathBuf, Consumed<T>>>,
}

impl<T> Default for Tails<T> {
    fn default() -> Self {
        Tails {
            logs: Mutex::new(HashMap::new()),
        }
    }
}

impl<T> Tails<T> {
    /// How many logs it follows.
    fn len(&self) -> usize {
        self.logs.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl<T: Record> Tails<T> {
    /// The records in the first `upto` bytes of the log at `path`. Lines that do not parse
    /// are skipped with a warning (one bad record must not cost the rest); a log shorter
    /// than `upto` (cut by hand) gives what it has, with a warning.
    fn read(&self, path: &Path, upto: u64) -> Result<Arc<T>> {
        if upto == 0 {
            return Ok(Arc::default());
        }
        let mut file = std::fs::File::open(path).map_err(|e| Error::io("read", path, e))?;
        let meta = file.metadata().map_err(|e| Error::io("read", path, e))?;
        let id = (meta.dev(), meta.ino());
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        let (mut records, from) = match logs.remove(path) {
            Some(r) if r.dev_ino == id && r.read <= upto => (r.records, r.read),
            _ => (Arc::default(), 0),
        };
        let want = upto.min(meta.len());
        if want < upto {
            tracing::warn!(path = %path.display(), committed = upto, found = meta.len(), "a log is shorter than its state says; records are missing");
        }
        let mut tail = Vec::with_capacity((want - from.min(want)) as usize);
        file.seek(SeekFrom::Start(from))
            .map_err(|e| Error::io("read", path, e))?;
        (&mut file)
            .take(want.saturating_sub(from))
            .read_to_end(&mut tail)
            .map_err(|e| Error::io("read", path, e))?;
        for line in tail.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if let Err(e) = Arc::make_mut(&mut records).apply(line) {
                tracing::warn!(path = %path.display(), error = %e, "a record of a log does not parse; it is skipped");
            }
        }
        let read = from + tail.len() as u64;
        logs.insert(
            path.to_path_buf(),
            Consumed {
                dev_ino: id,
                read,
                records: records.clone(),
            },
        );
        Ok(records)
    }
}

impl Memo for Tails<Records> {
    const NAME: &'static str = "state log tails";
    fn entries(&self) -> usize {
        self.len()
    }
}

impl Memo for Tails<Ledger> {
    const NAME: &'static str = "version-3 ledger tails";
    fn entries(&self) -> usize {
        self.len()
    }
}

impl Memo for Tails<Lineage> {
    const NAME: &'static str = "version-3 lineage tails";
    fn entries(&self) -> usize {
        self.len()
    }
}

/// Fill `st` (just decoded from `state_path`) with the records its log holds up to its
/// mark. A version-3 state has two logs and marks for each; a state from before the logs
/// (version 2) carries its records inline and has no marks: it is left as it is. Either
/// moves its records into the one log at its first save.
pub fn attach(state_path: &Path, st: &mut PmState) -> Result<()> {
    if st.logs.log_bytes > 0 {
        let r = memo::get::<Tails<Records>>().read(&log_path(state_path), st.logs.log_bytes)?;
        st.ledger = r.ledger.clone();
        st.lineage = r.lineage.clone();
        return Ok(());
    }
    if st.logs.ledger_bytes > 0 {
        st.ledger = memo::get::<Tails<Ledger>>().read(&ledger_path(state_path), st.logs.ledger_bytes)?;
    }
    if st.logs.lineage_bytes > 0 {
        st.lineage = memo::get::<Tails<Lineage>>().read(&lineage_path(state_path), st.logs.lineage_bytes)?;
    }
    Ok(())
}

/// Write what `st` holds beyond `base` (the state on disk, whose mark says what the log
/// has committed; `None` when there is none or it is unreadable) to the log, fsynced, and
/// return the marks the new state must carry. Called under the state lock, before the
/// state itself is written.
pub fn commit(state_path: &Path, st: &PmState, base: Option<&PmState>) -> Result<Logs> {
    let empty = PmState::default();
    let base = base.unwrap_or(&empty);
    let path = log_path(state_path);
    let len = log_len(&path);
    // Incremental only over a log the base committed (a version-2 or -3 base has none),
    // still whole on disk, and that the new state extends in both its kinds.
    let grows = intact(len, base.logs.log_bytes)
        .then(|| ledger_added(st, base).zip(lineage_kept(st, base)))
        .flatten();
    let mut text = Vec::new();
    let mut line = |l: Line| {
        serde_json::to_writer(&mut text, &l).expect("a log line serialises");
        text.push(b'\n');
    };
    let keep = match grows {
        Some((ledger, lineage_from)) => {
            for (file, entry) in ledger {
                line(ledger_line(file, entry));
            }
            for e in st.lineage.since(lineage_from) {
                line(Line::Lineage(Cow::Borrowed(e)));
            }
            base.logs.log_bytes
        }
        None => {
            for (file, entry) in st.ledger.iter() {
                line(ledger_line(file, entry));
            }
            for e in st.lineage.iter() {
                line(Line::Lineage(Cow::Borrowed(e)));
            }
            0
        }
    };
    Ok(Logs {
        log_bytes: append(&path, len, keep, &text)?,
        ..Logs::default()
    })
}

fn ledger_line<'a>(file: &'a str, entry: &'a LedgerEntry) -> Line<'a> {
    Line::Ledger(LedgerLine {
        file: Cow::Borrowed(file),
        entry: Cow::Borrowed(entry),
    })
}

/// The ledger records `st` holds beyond `base`, when it keeps all of base's files:
/// from the records added to a copy of it when the two share their base (a check-in's
/// save: as many lines as it recorded), else by comparing every record (after a fold, or
/// a state read from elsewhere). `None`: it forgot some, and the log is written anew.
fn ledger_added<'a>(st: &'a PmState, base: &PmState) -> Option<Vec<(&'a String, &'a LedgerEntry)>> {
    // Unchanged (the common save: the closure left the ledger alone): nothing to add.
    if Arc::ptr_eq(&st.ledger, &base.ledger) {
        return Some(Vec::new());
    }
    if let Some(added) = st.ledger.added_since(&base.ledger) {
        return Some(added);
    }
    base.ledger.iter().all(|(f, _)| st.ledger.get(f).is_some()).then(|| {
        st.ledger
            .iter()
            .filter(|(f, e)| base.ledger.get(f) != Some(*e))
            .collect()
    })
}

/// How many of `st`'s lineage entries the log already holds (base's, when `st` extends
/// them); `None` when it does not, and the log is written anew.
fn lineage_kept(st: &PmState, base: &PmState) -> Option<usize> {
    let n = base.lineage.len();
    (st.lineage.len() >= n && n.checked_sub(1).and_then(|i| st.lineage.get(i)) == base.lineage.last()).then_some(n)
}

/// The length of the log at `path` (none: 0).
fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Whether a log of `len` bytes holds the `committed` bytes its state says (none
/// committed: no). A log cut short (by hand, or by a power cut before its fsync reached
/// the disk) is written again in full from the records in memory rather than padded.
fn intact(len: u64, committed: u64) -> bool {
    committed > 0 && len >= committed
}

/// The log grows by this much at a time, written as newlines ([`append`]).
const GROW_BY: u64 = 64 * 1024;

/// A page: the part of the log a save rewrites after its records ([`append`]).
const PAGE: u64 = 4096;

/// Write `text` into the log at `path` (`len` bytes) at `keep` (what is committed), fsync,
/// and return the new committed length. Nothing is touched when there is nothing to add.
///
/// The file runs ahead of its records: it grows [`GROW_BY`] at a time, the room made
/// written as newlines, and a save writes its records over that room. Why: an fdatasync
/// that finds the file's length changed or a block newly allocated must write metadata as
/// well as the data (on ext4 with a journal a commit; without, the block bitmap and the
/// extent): an append + fdatasync cost a quarter of the CPU on a journalled ext4 and half
/// on this machine's journal-less one. A reader stops at the length its state commits, so
/// neither the room nor what a crashed save left beyond that is ever read; a save clears
/// the rest of the page its records end in, and later saves write over the remains.
fn append(path: &Path, len: u64, keep: u64, text: &[u8]) -> Result<u64> {
    if text.is_empty() {
        return Ok(keep);
    }
    if keep == 0 && len > 0 {
        // Written anew: a new file (a new inode), so no reader takes it for the old one
        // grown (what was read of a log is remembered by its identity and length).
        crate::store::fsutil::atomic_write(path, text)?;
        return Ok(text.len() as u64);
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| Error::io("open the log", path, e))?;
    let end = keep + text.len() as u64;
    let mut bytes = Vec::with_capacity((room_after(end, len) + text.len() as u64) as usize);
    bytes.extend_from_slice(text);
    bytes.resize(bytes.capacity(), b'\n');
    let write = |b: &[u8]| std::os::unix::fs::FileExt::write_all_at(&f, b, keep);
    match write(&bytes) {
        // A disk too full for the room still takes the records alone.
        Err(e) if e.kind() == std::io::ErrorKind::StorageFull && end > len => write(text),
        r => r,
    }
    .map_err(|e| Error::io("append to", path, e))?;
    f.sync_data().map_err(|e| Error::io("fsync", path, e))?;
    Ok(end)
}

/// How many newlines follow records ending at `end` in a log of `len` bytes (pure): to the
/// end of their page when the file reaches past it, else to the next multiple of
/// [`GROW_BY`] beyond `end` (the file grows).
fn room_after(end: u64, len: u64) -> u64 {
    if end <= len {
        end.next_multiple_of(PAGE).min(len) - end
    } else {
        (end / GROW_BY + 1) * GROW_BY - end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(at: &str) -> LedgerEntry {
        LedgerEntry {
            size: 1,
            mtime_ns: 2,
            sha256: "ab".into(),
            processed_at: at.into(),
        }
    }

    fn lineage(file: &str) -> LineageEntry {
        LineageEntry {
            file: file.into(),
            from: "dev".into(),
            target: None,
            recommended_next: None,
            status: crate::core::handoff::Status::Complete,
            time: "2025-11-27T09:00:00Z".parse().unwrap(),
        }
    }

    /// Commit `st` over `base` and return it as a reader sees it afterwards.
    fn save(p: &Path, st: &mut PmState, base: &PmState) -> PmState {
        st.logs = commit(p, st, Some(base)).unwrap();
        let mut read = PmState {
            logs: st.logs,
            ..PmState::default()
        };
        attach(p, &mut read).unwrap();
        read
    }

    #[test]
    fn a_save_appends_only_what_is_new_and_a_reader_sees_only_what_is_committed() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let mut a = PmState::default();
        Arc::make_mut(&mut a.ledger).insert("dev-1.md".into(), entry("t1"));
        Arc::make_mut(&mut a.lineage).push(lineage("dev-1.md"));
        let read_a = save(&p, &mut a, &PmState::default());
        assert_eq!(
            (read_a.ledger.clone(), read_a.lineage.clone()),
            (a.ledger.clone(), a.lineage.clone())
        );

        let mut b = a.clone();
        Arc::make_mut(&mut b.ledger).insert("dev-2.md".into(), entry("t2"));
        Arc::make_mut(&mut b.ledger).insert("dev-1.md".into(), entry("t3"));
        Arc::make_mut(&mut b.lineage).push(lineage("dev-2.md"));
        let before = committed(&p, a.logs.log_bytes);
        let read_b = save(&p, &mut b, &a);
        assert_eq!(read_b.ledger, b.ledger, "a changed entry replaces the old one");
        assert_eq!(read_b.lineage, b.lineage);
        let log = committed(&p, b.logs.log_bytes);
        assert_eq!(log.lines().count(), 5, "three lines appended, none rewritten: {log}");
        assert!(log.starts_with(&before), "{log}");
        assert!(log.ends_with('\n'));
        assert_eq!(room(&p, b.logs.log_bytes), Some(GROW_BY - b.logs.log_bytes));

        // A save that crashed after its appends: the logs are longer than any state says.
        let mut c = b.clone();
        Arc::make_mut(&mut c.ledger).insert("dev-3.md".into(), entry("t4"));
        Arc::make_mut(&mut c.lineage).push(lineage("dev-3.md"));
        commit(&p, &c, Some(&b)).unwrap();
        let mut reader = PmState {
            logs: b.logs,
            ..PmState::default()
        };
        attach(&p, &mut reader).unwrap();
        assert_eq!(
            reader.ledger, b.ledger,
            "records beyond the committed marks are not seen"
        );
        assert_eq!(reader.lineage.len(), 2);
        // The next save from the committed state writes over them (a shorter record here)
        // and clears what is left of them.
        let mut d2 = b.clone();
        Arc::make_mut(&mut d2.lineage).push(lineage("dev-4.md"));
        let read_d = save(&p, &mut d2, &b);
        assert_eq!(read_d.lineage.last().unwrap().file, "dev-4.md");
        assert_eq!(read_d.lineage.len(), 3);
        assert!(read_d.ledger.get("dev-3.md").is_none());
        assert_eq!(room(&p, d2.logs.log_bytes), Some(GROW_BY - d2.logs.log_bytes));
    }

    /// The first `n` bytes of the log beside `p`: its committed records.
    fn committed(p: &Path, n: u64) -> String {
        let all = std::fs::read(log_path(p)).unwrap();
        String::from_utf8(all[..n as usize].to_vec()).unwrap()
    }

    /// How many bytes follow the first `n` of the log beside `p`, when all are newlines.
    fn room(p: &Path, n: u64) -> Option<u64> {
        let all = std::fs::read(log_path(p)).unwrap();
        all[n as usize..]
            .iter()
            .all(|b| *b == b'\n')
            .then(|| all.len() as u64 - n)
    }

    #[test]
    fn a_disk_without_room_to_grow_the_log_still_takes_the_records() {
        let d = tempfile::tempdir().unwrap();
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(d.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "mount a tmpfs (run as root): {o:?}");
        /// Unmounted however the test ends.
        struct Mounted<'a>(&'a Path);
        impl Drop for Mounted<'_> {
            fn drop(&mut self) {
                let _ = std::process::Command::new("umount").arg("-l").arg(self.0).output();
            }
        }
        let _mounted = Mounted(d.path());
        let p = d.path().join("pm_state.json");
        let mut st = PmState::default();
        Arc::make_mut(&mut st.lineage).push(lineage("dev-0.md"));
        save(&p, &mut st, &PmState::default());
        // The log's room used up but for a few bytes, then the disk filled but for 8 KiB.
        let f = std::fs::OpenOptions::new().write(true).open(log_path(&p)).unwrap();
        f.set_len(st.logs.log_bytes + 10).unwrap();
        let filler = d.path().join("filler");
        let mut fill = std::fs::File::create(&filler).unwrap();
        while std::io::Write::write_all(&mut fill, &[0u8; 4096]).is_ok() {}
        fill.set_len(fill.metadata().unwrap().len() - 8192).unwrap();
        let base = st.clone();
        Arc::make_mut(&mut st.lineage).push(lineage("dev-1.md"));
        let read = save(&p, &mut st, &base);
        assert_eq!(read.lineage.len(), 2);
        let room = room(&p, st.logs.log_bytes);
        // What part of the room fitted is newlines; the records are whole before it.
        assert!(room.is_some_and(|r| r < GROW_BY), "{room:?}");
    }

    #[test]
    fn the_log_grows_ahead_of_its_records_so_a_save_keeps_its_length() {
        assert_eq!(room_after(100, GROW_BY), PAGE - 100, "the rest of the page is cleared");
        assert_eq!(room_after(PAGE, GROW_BY), 0);
        assert_eq!(room_after(GROW_BY - 10, GROW_BY), 10);
        assert_eq!(
            room_after(GROW_BY + 1, GROW_BY),
            GROW_BY - 1,
            "grown to the next multiple"
        );
        assert_eq!(room_after(5, 0), GROW_BY - 5);

        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let mut st = PmState::default();
        let mut lens = std::collections::BTreeSet::new();
        for i in 0..1000 {
            let base = st.clone();
            Arc::make_mut(&mut st.lineage).push(lineage(&format!("dev-{i}.md")));
            let read = save(&p, &mut st, &base);
            assert_eq!(read.lineage.len(), i + 1);
            lens.insert(std::fs::metadata(log_path(&p)).unwrap().len());
        }
        // 1000 records of ~100 bytes: past the first 64 KiB once, so two lengths in all.
        assert!(st.logs.log_bytes > GROW_BY, "{}", st.logs.log_bytes);
        assert_eq!(lens.into_iter().collect::<Vec<_>>(), [GROW_BY, 2 * GROW_BY]);
        assert_eq!(committed(&p, st.logs.log_bytes).lines().count(), 1000);
        assert_eq!(room(&p, st.logs.log_bytes), Some(2 * GROW_BY - st.logs.log_bytes));
    }

    #[test]
    fn a_state_that_forgot_records_rewrites_the_logs() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let mut a = PmState::default();
        Arc::make_mut(&mut a.ledger).insert("dev-1.md".into(), entry("t1"));
        Arc::make_mut(&mut a.ledger).insert("dev-2.md".into(), entry("t1"));
        Arc::make_mut(&mut a.lineage).push(lineage("dev-1.md"));
        Arc::make_mut(&mut a.lineage).push(lineage("dev-2.md"));
        save(&p, &mut a, &PmState::default());
        // A fresh state replacing a corrupt one (or any that does not extend the logs).
        let mut fresh = PmState::default();
        Arc::make_mut(&mut fresh.ledger).insert("dev-2.md".into(), entry("t9"));
        let read = save(&p, &mut fresh, &a);
        assert_eq!(read.ledger, fresh.ledger);
        assert!(read.lineage.is_empty());
        assert_eq!(std::fs::read_to_string(log_path(&p)).unwrap().lines().count(), 1);
    }

    #[test]
    fn a_log_cut_short_is_written_again_in_full() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let mut a = PmState::default();
        Arc::make_mut(&mut a.lineage).push(lineage("dev-1.md"));
        Arc::make_mut(&mut a.lineage).push(lineage("dev-2.md"));
        save(&p, &mut a, &PmState::default());
        let f = std::fs::OpenOptions::new().write(true).open(log_path(&p)).unwrap();
        f.set_len(a.logs.log_bytes / 2).unwrap();
        let mut b = a.clone();
        Arc::make_mut(&mut b.lineage).push(lineage("dev-3.md"));
        let read = save(&p, &mut b, &a);
        assert_eq!(read.lineage, b.lineage, "never padded with zeros to the old mark");
        let text = std::fs::read_to_string(log_path(&p)).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        // Written anew with other records: a reader that had read the old log sees the new.
        let mut c = PmState::default();
        Arc::make_mut(&mut c.lineage).push(lineage("other-1.md"));
        Arc::make_mut(&mut c.lineage).push(lineage("other-2.md"));
        Arc::make_mut(&mut c.lineage).push(lineage("other-3.md"));
        Arc::make_mut(&mut c.lineage).push(lineage("other-4.md"));
        let read = save(&p, &mut c, &PmState::default());
        assert_eq!(read.lineage, c.lineage);
    }

    #[test]
    fn a_bad_line_is_skipped_and_the_rest_kept() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let mut a = PmState::default();
        Arc::make_mut(&mut a.lineage).push(lineage("dev-1.md"));
        let text = format!(
            "{}\nnot json\n{}\n",
            serde_json::to_string(&Line::Lineage(Cow::Owned(lineage("dev-1.md")))).unwrap(),
            serde_json::to_string(&Line::Lineage(Cow::Owned(lineage("dev-2.md")))).unwrap()
        );
        std::fs::write(log_path(&p), &text).unwrap();
        let mut st = PmState {
            logs: Logs {
                log_bytes: text.len() as u64,
                ..Logs::default()
            },
            ..PmState::default()
        };
        attach(&p, &mut st).unwrap();
        assert_eq!(st.lineage.len(), 2);
    }

    #[test]
    fn a_version_3_states_two_logs_are_read_and_its_next_save_writes_the_one() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let ledger = format!(
            "{}\n",
            serde_json::to_string(&LedgerLine {
                file: "dev-1.md".into(),
                entry: Cow::Owned(entry("t1")),
            })
            .unwrap()
        );
        let lineage_text = format!(
            "{}\n{}\n",
            serde_json::to_string(&lineage("dev-1.md")).unwrap(),
            serde_json::to_string(&lineage("dev-2.md")).unwrap()
        );
        std::fs::write(ledger_path(&p), &ledger).unwrap();
        std::fs::write(lineage_path(&p), &lineage_text).unwrap();
        let mut v3 = PmState {
            logs: Logs {
                log_bytes: 0,
                ledger_bytes: ledger.len() as u64,
                lineage_bytes: lineage_text.len() as u64,
            },
            ..PmState::default()
        };
        attach(&p, &mut v3).unwrap();
        assert_eq!((v3.ledger.len(), v3.lineage.len()), (1, 2));
        let mut next = v3.clone();
        Arc::make_mut(&mut next.lineage).push(lineage("dev-3.md"));
        let read = save(&p, &mut next, &v3);
        assert_eq!(
            (read.ledger.clone(), read.lineage.clone()),
            (next.ledger.clone(), next.lineage.clone())
        );
        assert_eq!(
            (next.logs.ledger_bytes, next.logs.lineage_bytes),
            (0, 0),
            "{:?}",
            next.logs
        );
        let text = committed(&p, next.logs.log_bytes);
        assert_eq!(text.lines().count(), 4, "everything in the one log: {text}");
        assert!(text.starts_with("{\"ledger\":{\"file\":\"dev-1.md\""), "{text}");
    }
}
