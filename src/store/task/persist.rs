//! pm_state.json on disk: read (a corrupt file reported, or set aside when the state is
//! about to be rewritten), written atomically, never overwritten by an older version.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use chrono::{DateTime, Utc};

use super::logs;
use crate::core::error::{Error, Result};
use crate::core::model::state::{DecodeError, PmState, STATE_VERSION, decode};
use crate::store::memo::{self, Memo};
use crate::store::{fsutil, parsed, spare};

/// Every state file this process read or wrote, parsed, with its logs attached; and, by
/// file, how many of its versions it read that it had not written itself ([`foreign_reads`]).
#[derive(Default)]
struct States(parsed::Cache<Arc<PmState>>, Mutex<HashMap<PathBuf, u64>>);

impl Memo for States {
    const NAME: &'static str = "parsed pm_state.json";
    fn entries(&self) -> usize {
        self.0.len()
    }
}

fn states() -> &'static parsed::Cache<Arc<PmState>> {
    &memo::get::<States>().0
}

fn count_foreign(path: &Path) {
    let mut counts = memo::get::<States>().1.lock().unwrap_or_else(|e| e.into_inner());
    match counts.get_mut(path) {
        Some(n) => *n += 1,
        None => {
            counts.insert(path.to_path_buf(), 1);
        }
    }
}

/// Read the state for display. A missing file is a fresh state; a bad one is an error, untouched.
/// Parsed again only when the file changed ([`crate::store::parsed`]), its logs only from
/// where the last read of them ended ([`logs`]); shared, not copied, between readers.
pub fn load(path: &Path, task: &str) -> Result<Arc<PmState>> {
    load_in(None, path, task)
}

/// [`load`] in a turn's pass ([`parsed::Pass`]): a check of the file made in it moments
/// ago answers for it. Never for a read under the state lock.
pub fn load_in(pass: Option<&parsed::Pass>, path: &Path, task: &str) -> Result<Arc<PmState>> {
    static FRESH: LazyLock<Arc<PmState>> = LazyLock::new(Default::default);
    states()
        .get_in(
            pass,
            path,
            |e| Error::io("read", path, e),
            |bytes| {
                count_foreign(path);
                let mut st = decode_at(bytes, path, task)?;
                logs::attach(path, &mut st)?;
                Ok(Arc::new(st))
            },
        )
        .map(|st| {
            st.unwrap_or_else(|| {
                count_foreign(path);
                FRESH.clone()
            })
        })
}

/// How many versions of the state at `path` this process has read that it did not write
/// itself: bytes parsed (a save primes its own, so they never are) or the file found
/// missing. Why: another process sets a corrupt state aside only to write a fresh one in
/// its place (or dies leaving none), so while this count stands still no copy can have
/// been set aside since the last look, and the daemon need not list the task folder.
pub fn foreign_reads(path: &Path) -> u64 {
    let counts = memo::get::<States>().1.lock().unwrap_or_else(|e| e.into_inner());
    counts.get(path).copied().unwrap_or(0)
}

fn decode_at(bytes: &[u8], path: &Path, task: &str) -> Result<PmState> {
    decode(bytes).map_err(|e| match e {
        DecodeError::Corrupt(detail) => Error::CorruptState {
            path: path.to_path_buf(),
            task: task.to_string(),
            detail,
        },
        DecodeError::TooNew(found) => Error::StateTooNew {
            path: path.to_path_buf(),
            found,
            supported: STATE_VERSION,
        },
    })
}

/// Outcome of [`load_for_update`].
#[derive(Debug)]
pub struct Loaded {
    /// The state to modify and save.
    pub state: PmState,
    /// Where a corrupt file was moved, if it was.
    pub set_aside: Option<PathBuf>,
}

/// Read the state in order to change it. A corrupt file is moved aside ([`set_aside`],
/// reported in `set_aside`) and a fresh state returned; a too-new file is an error (never
/// set aside: it is valid, only not ours to rewrite).
pub fn load_for_update(path: &Path, task: &str, now: DateTime<Utc>) -> Result<Loaded> {
    match load(path, task) {
        Ok(state) => Ok(Loaded {
            state: Arc::unwrap_or_clone(state),
            set_aside: None,
        }),
        Err(Error::CorruptState { .. }) => Ok(Loaded {
            state: PmState::default(),
            set_aside: Some(set_aside(path, now)?),
        }),
        Err(e) => Err(e),
    }
}

/// The prefix of every set-aside copy's file name.
pub const SET_ASIDE_PREFIX: &str = "pm_state.json.corrupt-";

/// The name a corrupt state set aside at `now` gets: `pm_state.json.corrupt-<UTC time to
/// the nanosecond>`, with `-<n>` added for the `n`th try, so a second corruption in the same
/// instant (or a clock set back) gets a name of its own. Pure.
pub fn set_aside_name(now: DateTime<Utc>, attempt: u32) -> String {
    let stamp = now.format("%Y%m%dT%H%M%S%.9fZ");
    match attempt {
        0 => format!("{SET_ASIDE_PREFIX}{stamp}"),
        n => format!("{SET_ASIDE_PREFIX}{stamp}-{n}"),
    }
}

/// Move the corrupt file at `path` aside under a name no earlier copy has
/// ([`set_aside_name`]): hard-linked to the new name, which fails rather than replace an
/// existing copy, then unlinked; where hard links are not supported, renamed after checking
/// the name is free (the caller holds the state lock). Returns the copy's path.
pub fn set_aside(path: &Path, now: DateTime<Utc>) -> Result<PathBuf> {
    let dir = path.parent().unwrap_or(Path::new("."));
    for attempt in 0..1000 {
        let aside = dir.join(set_aside_name(now, attempt));
        match std::fs::hard_link(path, &aside) {
            Ok(()) => {
                std::fs::remove_file(path)
                    .map_err(|e| Error::io("remove the corrupt state after copying it aside", path, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) if aside.symlink_metadata().is_ok() => continue,
            Err(_) => {
                std::fs::rename(path, &aside).map_err(|e| Error::io("set aside corrupt state", path, e))?;
            }
        }
        set_logs_aside(path, &aside)?;
        fsutil::sync_dir(dir)?;
        return Ok(aside);
    }
    Err(Error::io(
        "set aside corrupt state",
        path,
        std::io::Error::other("1000 set-aside copies with this timestamp already exist; remove old ones"),
    ))
}

/// Move the state's log (and a version-3 state's two) aside with the state copy `aside` (same time
/// in the name): the fresh state that replaces a corrupt one starts its own logs, and the
/// records the corrupt state committed stay beside its copy for a human.
fn set_logs_aside(path: &Path, aside: &Path) -> Result<()> {
    let stamp = aside
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix(SET_ASIDE_PREFIX))
        .unwrap_or_default();
    for log in [logs::log_path(path), logs::ledger_path(path), logs::lineage_path(path)] {
        if log.exists() {
            let mut to = log.clone().into_os_string();
            to.push(format!(".corrupt-{stamp}"));
            std::fs::rename(&log, &to).map_err(|e| Error::io("set aside the log of a corrupt state", &log, e))?;
        }
    }
    Ok(())
}

/// The copies of corrupt states set aside in the task folder `dir`, oldest first (names
/// sort by time), so `task status` can name them until someone looks and removes them.
pub fn set_aside_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = rd
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(SET_ASIDE_PREFIX))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// The whole state as one JSON document, the ledger and the lineage included (the file
/// keeps them in their logs): what scripts and tests that look at a task's state read.
pub fn whole_json(st: &PmState) -> serde_json::Value {
    let mut v = serde_json::to_value(st).expect("state serialises");
    v["ledger"] = serde_json::to_value(&*st.ledger).expect("the ledger serialises");
    v["lineage"] = serde_json::to_value(&*st.lineage).expect("the lineage serialises");
    v
}

/// Write the state: its new ledger and lineage records appended to the log (fsynced),
/// then the state itself atomically with the log's new mark — written into its spare,
/// fsynced, exchanged in, the folder fsynced (`store::spare`; a temp file the first time) —
/// the exchange commits both. The caller holds the state lock, which is what lets the
/// spare be written: no reader under the lock can meet it half-written. Taken by value:
/// the saved state is what the memo keeps, and a check-in saves twice (a copy of the
/// state's agents each time was a share of its allocations).
pub fn save(path: &Path, mut saved: PmState) -> Result<()> {
    let base = load(path, "").ok();
    saved.logs = logs::commit(path, &saved, base.as_deref())?;
    let bytes = padded(serde_json::to_vec_pretty(&saved).expect("state serialises"));
    spare::replace_durably(path, &bytes)?;
    if base.is_some_and(|b| b.logs.ledger_bytes > 0 || b.logs.lineage_bytes > 0) {
        // A version-3 state's two logs, now in the one: gone once the new state commits it.
        for old in [logs::ledger_path(path), logs::lineage_path(path)] {
            if let Err(e) = std::fs::remove_file(&old)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %old.display(), error = %e, "a version-3 log moved into pm_state.log.jsonl could not be removed");
            }
        }
    }
    // The next read finds these bytes and takes this state: no decode, no log read.
    states().prime(path, bytes, Arc::new(saved));
    Ok(())
}

/// pm_state.json's length is a multiple of this: the JSON, a newline, then blanks.
const PAD_TO: usize = 4096;

/// `json` followed by a newline and blanks up to a multiple of [`PAD_TO`], ending in a
/// newline (JSON allows trailing whitespace). Pure. Why: a state changes its length by a
/// byte or two at most saves (a counter, a time), and a new length is what makes the
/// spare's fdatasync commit a journal (on ext4 with one; without, Linux 6.18 writes the
/// inode whenever its times moved, so it is no dearer there). Padded, the length changes
/// only when the state crosses a multiple.
fn padded(mut json: Vec<u8>) -> Vec<u8> {
    json.push(b'\n');
    let len = json.len().div_ceil(PAD_TO) * PAD_TO;
    if len > json.len() {
        json.resize(len - 1, b' ');
        json.push(b'\n');
    }
    json
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::handoff::Status;
    use crate::core::model::state::*;
    use serde_json::Value;

    #[test]
    fn round_trip() {
        let mut s = PmState {
            phase: Phase::Developing,
            ..Default::default()
        };
        s.last_checkin = Some("2025-11-27T09:00:00Z".parse().unwrap());
        Arc::make_mut(&mut s.ledger).record("dev-20251127-113000.md", 10, 5, "ab", "2025-11-27T11:31:00Z");
        s.review_rejections.insert("dev".into(), 2);
        s.agents.insert(
            "dev".into(),
            AgentState {
                role: "spoke".into(),
                host: crate::core::model::AgentHost::Local,
                status: "running".into(),
                last_status: Some(Status::NeedsReview),
                ..Default::default()
            },
        );
        s.extra.insert("future_field".into(), Value::from(7));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        save(&p, s.clone()).unwrap();
        let mut saved = s.clone();
        saved.logs = load(&p, "t").unwrap().logs;
        assert_eq!(*load(&p, "t").unwrap(), saved);
    }

    #[test]
    fn the_state_file_keeps_its_length_while_the_state_changes_by_a_few_bytes() {
        for (json, len) in [(2, 4096), (4094, 4096), (4095, 4096), (4096, 8192)] {
            let out = padded(vec![b'x'; json]);
            assert_eq!(out.len(), len, "{json} bytes of JSON");
            assert_eq!(&out[json..json + 1], b"\n", "the JSON ends its line");
            assert!(out[json..].iter().all(u8::is_ascii_whitespace) && out.ends_with(b"\n"));
        }
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let mut st = PmState::default();
        let mut lens = Vec::new();
        for n in [9, 10, 1000] {
            st.review_rejections.insert("dev".into(), n);
            save(&p, st.clone()).unwrap();
            lens.push(std::fs::metadata(&p).unwrap().len());
            // Any JSON reader takes the padded file (a fresh parse, not this process's memo).
            let file: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
            assert_eq!(file["review_rejections"]["dev"], n);
        }
        assert_eq!(lens, [4096, 4096, 4096]);
    }

    #[test]
    fn a_version_2_state_moves_its_ledger_and_lineage_into_the_logs_on_its_first_save() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        std::fs::write(&p, include_bytes!("../../../tests/fixtures/pm_state.v2.json")).unwrap();
        let v2 = load(&p, "t").unwrap();
        assert_eq!((v2.ledger.len(), v2.lineage.len()), (2, 2), "read inline");
        save(&p, PmState::clone(&v2)).unwrap();
        let file: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(file["version"], STATE_VERSION);
        assert!(file.get("ledger").is_none() && file.get("lineage").is_none(), "{file}");
        assert!(file["logs"]["log_bytes"].as_u64().unwrap() > 0, "{file}");
        let v3 = load(&p, "t").unwrap();
        assert_eq!((&v3.ledger, &v3.lineage), (&v2.ledger, &v2.lineage));
        assert_eq!(whole_json(&v3)["ledger"], whole_json(&v2)["ledger"]);
    }

    #[test]
    fn a_version_3_state_moves_its_two_logs_into_the_one_on_its_first_save() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        let ledger = "{\"file\":\"dev-20251127-113000.md\",\"size\":10,\"mtime_ns\":5,\"sha256\":\"ab\",\"processed_at\":\"2025-11-27T11:31:00Z\"}\n";
        let lineage = "{\"file\":\"dev-20251127-113000.md\",\"from\":\"dev\",\"target\":null,\"recommended_next\":null,\"status\":\"COMPLETE\",\"time\":\"2025-11-27T11:30:00Z\"}\n";
        std::fs::write(logs::ledger_path(&p), ledger).unwrap();
        std::fs::write(logs::lineage_path(&p), lineage).unwrap();
        std::fs::write(
            &p,
            format!(
                "{{\"version\": 3, \"phase\": \"DEVELOPING\", \"logs\": {{\"ledger_bytes\": {}, \"lineage_bytes\": {}}}}}",
                ledger.len(),
                lineage.len()
            ),
        )
        .unwrap();
        let v3 = load(&p, "t").unwrap();
        assert_eq!((v3.ledger.len(), v3.lineage.len()), (1, 1));
        save(&p, PmState::clone(&v3)).unwrap();
        assert!(!logs::ledger_path(&p).exists() && !logs::lineage_path(&p).exists());
        let file: Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(file["version"], 4);
        // The log runs ahead of its records, as newlines (`logs::append`).
        let log = std::fs::read(logs::log_path(&p)).unwrap();
        let n = file["logs"]["log_bytes"].as_u64().unwrap() as usize;
        assert_eq!(file["logs"], serde_json::json!({"log_bytes": n}));
        assert_eq!(log[..n].iter().filter(|b| **b == b'\n').count(), 2, "two records");
        assert!(log[n..].iter().all(|b| *b == b'\n'), "then room");
        std::fs::write(&p, std::fs::read(&p).unwrap()).unwrap();
        let v4 = load(&p, "t").unwrap();
        assert_eq!(
            (&v4.ledger, &v4.lineage, v4.phase),
            (&v3.ledger, &v3.lineage, Phase::Developing)
        );
    }

    #[test]
    fn transitions_follow_the_diagram() {
        use Phase::*;
        for (from, to) in [
            (Planning, Exploring),
            (Planning, Developing),
            (Planning, Testing),
            (Exploring, Reviewing),
            (Exploring, Developing),
            (Developing, Reviewing),
            (Reviewing, Complete),
            (Reviewing, Iterate),
            (Reviewing, Blocked),
            (Iterate, Developing),
            (Blocked, Developing),
            (Testing, Testing),
        ] {
            assert!(from.can_move_to(to), "{from} -> {to}");
        }
        for (from, to) in [
            (Planning, Reviewing),
            (Planning, Complete),
            (Developing, Complete),
            (Complete, Developing),
            (Complete, Blocked),
            (Iterate, Complete),
            (Exploring, Iterate),
        ] {
            assert!(!from.can_move_to(to), "{from} -> {to} must be refused");
        }
    }

    #[test]
    fn corrupt_is_reported_then_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        std::fs::write(&p, b"{\"version\": 2, \"phase\": ").unwrap();
        let e = load(&p, "t").unwrap_err();
        assert_eq!(e.exit_code(), crate::core::error::EXIT_STATE);
        assert!(e.to_string().contains("pm_state.json"), "{e}");
        assert!(p.exists(), "read-only load leaves the file");
        let now: DateTime<Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        std::fs::write(logs::ledger_path(&p), b"{\"file\": \"dev-1.md\"}\n").unwrap();
        let l = load_for_update(&p, "t", now).unwrap();
        let aside = l.set_aside.unwrap();
        assert!(!logs::ledger_path(&p).exists(), "the fresh state starts its own ledger");
        assert_eq!(
            std::fs::read(
                d.path()
                    .join("pm_state.ledger.jsonl.corrupt-20251127T090000.000000000Z")
            )
            .unwrap(),
            b"{\"file\": \"dev-1.md\"}\n",
            "the corrupt state's ledger is kept beside its copy"
        );
        assert!(
            aside
                .to_string_lossy()
                .ends_with("pm_state.json.corrupt-20251127T090000.000000000Z"),
            "{aside:?}"
        );
        assert_eq!(std::fs::read(&aside).unwrap(), b"{\"version\": 2, \"phase\": ");
        assert!(!p.exists());
        // A second corruption at the very same instant keeps both copies.
        std::fs::write(&p, b"second").unwrap();
        let again = load_for_update(&p, "t", now).unwrap().set_aside.unwrap();
        assert_ne!(again, aside);
        assert!(again.to_string_lossy().ends_with(".000000000Z-1"), "{again:?}");
        assert_eq!(std::fs::read(&again).unwrap(), b"second");
        assert_eq!(std::fs::read(&aside).unwrap(), b"{\"version\": 2, \"phase\": ");
        assert_eq!(set_aside_files(d.path()), vec![aside, again]);
    }

    #[test]
    fn set_aside_names_carry_nanoseconds() {
        let t: DateTime<Utc> = "2025-11-27T09:00:00.123456789Z".parse().unwrap();
        assert_eq!(set_aside_name(t, 0), "pm_state.json.corrupt-20251127T090000.123456789Z");
        assert_eq!(
            set_aside_name(t, 2),
            "pm_state.json.corrupt-20251127T090000.123456789Z-2"
        );
    }

    #[test]
    fn too_new_is_not_set_aside() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pm_state.json");
        std::fs::write(&p, b"{\"version\": 99, \"phase\": \"PLANNING\"}").unwrap();
        let now: DateTime<Utc> = "2025-11-27T09:00:00Z".parse().unwrap();
        assert!(matches!(
            load_for_update(&p, "t", now),
            Err(Error::StateTooNew { found: 99, .. })
        ));
        assert!(p.exists());
    }

    #[test]
    fn version_fixtures_are_read() {
        let v1 = decode(include_bytes!("../../../tests/fixtures/pm_state.v1.json")).unwrap();
        assert_eq!(v1.version, STATE_VERSION);
        assert_eq!(v1.phase, Phase::Exploring);
        assert_eq!(v1.last_checkin, Some("2025-11-27T09:30:00Z".parse().unwrap()));
        assert_eq!(v1.agents["explore"].session.as_deref(), Some("dds-writer-pool-explore"));
        assert!(v1.extra.contains_key("current_agent"), "unknown v1 fields are kept");

        let v2 = decode(include_bytes!("../../../tests/fixtures/pm_state.v2.json")).unwrap();
        assert_eq!(v2.phase, Phase::Reviewing);
        assert_eq!(v2.ledger.len(), 2);
        assert_eq!(v2.lineage.len(), 2);
        assert_eq!(v2.review_rejections["dev"], 1);
        assert_eq!(v2.agents["dev"].last_status, Some(Status::NeedsReview));
    }
}
