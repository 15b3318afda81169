//! `usage.json` in the task folder: for every agent and every Claude Code session it ran,
//! how far its transcript has been read and what was counted ([`Transcript`]). Kept so
//! each look reads only what was appended since the last one — a transcript grows to
//! many megabytes and `task status` must stay instant. Written atomically; two processes
//! refreshing at once can only lose the later one's progress (each save is a consistent
//! offset with its totals), never count a line twice. A missing or unreadable file means
//! starting again from byte 0: slower, never wrong.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::core::cost::supervisor::{Figures, Sent, Tally};
use crate::core::cost::usage::Transcript;
use crate::core::error::{Error, Result};
use crate::store::task::Task;

/// The first read of a transcript goes in chunks of this size, so a 100 MB file never
/// sits in memory at once.
const CHUNK: usize = 4 << 20;

/// What usage.json holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageFile {
    /// Agent → session id → its transcript as read so far.
    #[serde(default)]
    pub agents: BTreeMap<String, BTreeMap<String, Transcript>>,
    /// The supervisor's deliveries counted from events.jsonl, and how far it was read.
    #[serde(default)]
    pub events: Tally,
}

/// usage.json of a task.
pub fn path(task: &Task) -> PathBuf {
    task.dir().join("usage.json")
}

/// Every usage.json this process read or wrote, parsed: a check-in reads its task's at
/// every turn, and it changes only when a transcript moved or events.jsonl grew by a step.
#[derive(Default)]
struct Usages(crate::store::parsed::Cache<std::sync::Arc<UsageFile>>);

impl crate::store::memo::Memo for Usages {
    const NAME: &'static str = "parsed usage.json";
    fn entries(&self) -> usize {
        self.0.len()
    }
}

fn usages() -> &'static crate::store::parsed::Cache<std::sync::Arc<UsageFile>> {
    &crate::store::memo::get::<Usages>().0
}

/// The saved usage; empty when there is none, or (with a warning) when it is unreadable.
/// Parsed again only when the file changed ([`crate::store::parsed`]).
pub fn load(task: &Task) -> UsageFile {
    let p = path(task);
    let parsed = usages().get(
        &p,
        |e| e.to_string(),
        |b| {
            serde_json::from_slice(b)
                .map(std::sync::Arc::new)
                .map_err(|e| e.to_string())
        },
    );
    match parsed {
        Ok(Some(u)) => UsageFile::clone(&u),
        Ok(None) => UsageFile::default(),
        Err(e) => {
            tracing::warn!(path = %p.display(), error = %e, "usage.json is unreadable; transcripts are read again from the start");
            UsageFile::default()
        }
    }
}

/// Save by a rename (no fsync: an unreadable or lost file is counted again from the
/// transcripts and events.jsonl, see [`load`]).
pub fn save(task: &Task, u: &UsageFile) -> Result<()> {
    let p = path(task);
    let bytes = serde_json::to_vec(u).expect("usage serialises");
    crate::store::spare::replace(&p, &bytes)?;
    // The next load finds these bytes and takes this value: no parse.
    usages().prime(&p, bytes, std::sync::Arc::new(u.clone()));
    Ok(())
}

/// Read what was appended to the transcript at `file` since `t.offset` and count it.
/// Returns the warnings (malformed lines skipped, a file that shrank). A missing file is
/// nothing yet, not an error: Claude Code writes it at its first answer.
pub fn read_new(file: &Path, t: &mut Transcript) -> Result<Vec<String>> {
    let mut warnings = Vec::new();
    let mut f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(warnings),
        Err(e) => return Err(Error::io("open", file, e)),
    };
    let len = f.metadata().map_err(|e| Error::io("stat", file, e))?.len();
    if len < t.offset {
        warnings.push(format!(
            "{} is shorter than the {} bytes already read (replaced?); counting it again from the start",
            file.display(),
            t.offset
        ));
        *t = Transcript::default();
    }
    let mut chunk = CHUNK;
    let mut buf = Vec::new();
    loop {
        f.seek(SeekFrom::Start(t.offset))
            .map_err(|e| Error::io("seek in", file, e))?;
        buf.clear();
        let n = (&mut f)
            .take(chunk as u64)
            .read_to_end(&mut buf)
            .map_err(|e| Error::io("read", file, e))?;
        if n == 0 {
            break;
        }
        let fed = t.feed(&buf);
        warnings.extend(fed.warnings.into_iter().map(|w| format!("{}: {w}", file.display())));
        if fed.consumed == 0 {
            if n < chunk {
                break; // a line still being written: next time
            }
            chunk *= 2; // one line longer than a chunk
        }
    }
    Ok(warnings)
}

/// The kind of an event line as this program writes it (`"kind":"<plain word>"`, compact),
/// found without parsing the line; `None` sends the line to the JSON parser (spaces, an
/// escape, a hand-written line). Pure.
fn kind_as_written(line: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"kind\":\"";
    let at = line.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = line[at..].iter().position(|b| *b == b'"')?;
    let kind = &line[at..at + len];
    if kind.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(kind).ok()
}

/// An event's kind alone, borrowed from the line when it can be.
#[derive(serde::Deserialize)]
struct Kind<'a> {
    #[serde(borrow)]
    kind: std::borrow::Cow<'a, str>,
}

/// An event as [`read_events`] reads it: its time, kind and the figures it counts.
#[derive(serde::Deserialize)]
struct Counted<'a> {
    time: chrono::DateTime<chrono::Utc>,
    #[serde(borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    data: Figures<'a>,
}

/// The tallies this process counted, per events.jsonl and its identity (a process memo:
/// [`crate::store::memo`]). usage.json is saved only every few KiB of events, so without
/// them every check-in counted again all the events since that save.
#[derive(Default)]
struct Tallies(Mutex<HashMap<PathBuf, (FileId, Tally)>>);

/// A file's device and inode: a log replaced by another file is another log.
type FileId = (u64, u64);

impl crate::store::memo::Memo for Tallies {
    const NAME: &'static str = "events.jsonl tallies";
    fn entries(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// Count the events appended to `log` (events.jsonl) since `t.offset`; returns whether
/// anything was read. Complete lines only (a torn last line waits); a line that is not an
/// event is passed over, as every reader of the log does. A tally this process already
/// counted further in the same file is taken up from where it stopped.
pub fn read_events(log: &Path, t: &mut Tally) -> Result<bool> {
    // What this process appended itself since the offset is counted from its own copy.
    if let Ok(meta) = std::fs::metadata(log) {
        let (len, id) = (meta.len(), (meta.dev(), meta.ino()));
        take_kept(log, id, len, t);
        let read = if t.offset == len {
            Some(false)
        } else if t.offset < len {
            crate::store::events::own_tail(log, id, t.offset, len).map(|tail| count_lines(&tail, t))
        } else {
            None
        };
        if let Some(read) = read {
            keep_tally(log, id, t);
            return Ok(read);
        }
    }
    let mut f = match std::fs::File::open(log) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("open", log, e)),
    };
    let meta = f.metadata().map_err(|e| Error::io("stat", log, e))?;
    let (len, id) = (meta.len(), (meta.dev(), meta.ino()));
    take_kept(log, id, len, t);
    let read = count_from(&mut f, log, len, t)?;
    keep_tally(log, id, t);
    Ok(read)
}

/// Take up the tally this process counted further in the same log (`id`, `len` bytes).
fn take_kept(log: &Path, id: FileId, len: u64, t: &mut Tally) {
    let tallies = &crate::store::memo::get::<Tallies>().0;
    if let Some((_, kept)) = tallies
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(log)
        .filter(|(at, kept)| *at == id && kept.offset > t.offset && kept.offset <= len)
    {
        *t = kept.clone();
    }
}

fn keep_tally(log: &Path, id: FileId, t: &Tally) {
    crate::store::memo::get::<Tallies>()
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(log.to_path_buf(), (id, t.clone()));
}

/// [`read_events`] from `t.offset` of the open `f`, `len` bytes long.
fn count_from(f: &mut std::fs::File, log: &Path, len: u64, t: &mut Tally) -> Result<bool> {
    if len < t.offset {
        *t = Tally::default();
    }
    f.seek(SeekFrom::Start(t.offset))
        .map_err(|e| Error::io("seek in", log, e))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| Error::io("read", log, e))?;
    Ok(count_lines(&buf, t))
}

/// Count the complete lines of `buf`, the log's bytes from `t.offset`; whether there was one.
fn count_lines(buf: &[u8], t: &mut Tally) -> bool {
    let Some(end) = buf.iter().rposition(|b| *b == b'\n') else {
        return false;
    };
    for line in buf[..end].split(|b| *b == b'\n') {
        // The kind first (its details unread): most events count for nothing here.
        let counts = match kind_as_written(line) {
            Some(k) => Sent::counts(k),
            None => serde_json::from_slice::<Kind>(line).is_ok_and(|k| Sent::counts(&k.kind)),
        };
        if !counts {
            continue;
        }
        // Only the figures counted; a line whose figures are not of their types (another
        // version's) is read whole, as `Value`'s accessors read it.
        let sent = match serde_json::from_slice::<Counted>(line) {
            Ok(c) => Sent::from_figures(&c.kind, &c.data).map(|s| (c.time, s)),
            Err(_) => serde_json::from_slice::<crate::store::events::Event>(line)
                .ok()
                .and_then(|e| Sent::from_event(&e.kind, &e.data).map(|s| (e.time, s))),
        };
        if let Some((time, s)) = sent {
            t.add(time, s);
        }
    }
    t.offset += end as u64 + 1;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::cost::usage::sum;
    use std::io::Write;

    fn answer(id: &str, out: u64) -> String {
        format!(
            "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"m\",\"usage\":{{\"input_tokens\":1,\"output_tokens\":{out}}}}}}}\n"
        )
    }

    #[test]
    fn an_events_kind_is_found_as_written_and_left_to_the_parser_otherwise() {
        assert_eq!(
            kind_as_written(br#"{"time":"x","kind":"checkin","data":{}}"#),
            Some("checkin")
        );
        assert_eq!(kind_as_written(br#"{"time":"x", "kind": "checkin"}"#), None);
        assert_eq!(kind_as_written(br#"{"kind":"check\"in"}"#), None);
        assert_eq!(kind_as_written(b"not json"), None);
        // A line the fast path passes over is still counted through the parser.
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("events.jsonl");
        std::fs::write(
            &log,
            concat!(
                r#"{"time":"2026-11-27T09:00:00Z","kind":"checkin","data":{"outcome":"delivered","bytes":10}}"#,
                "\n",
                r#"{"time":"2026-11-27T09:00:01Z", "kind": "checkin", "data": {"outcome": "delivered", "bytes": 5}}"#,
                "\n",
                r#"{"time":"2026-11-27T09:00:02Z","kind":"handoff","data":{"outcome":"delivered","bytes":99}}"#,
                "\n",
            ),
        )
        .unwrap();
        let mut t = Tally::default();
        assert!(read_events(&log, &mut t).unwrap());
        assert_eq!((t.checkins, t.checkin_bytes), (2, 15));
    }

    #[test]
    fn only_what_was_appended_is_read_and_a_torn_tail_waits() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.jsonl");
        let mut t = Transcript::default();
        assert!(read_new(&p, &mut t).unwrap().is_empty(), "no file yet is nothing yet");
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(answer("a", 2).as_bytes()).unwrap();
        let torn = answer("b", 3);
        f.write_all(&torn.as_bytes()[..10]).unwrap();
        read_new(&p, &mut t).unwrap();
        assert_eq!((t.messages, t.offset), (1, answer("a", 2).len() as u64));
        f.write_all(&torn.as_bytes()[10..]).unwrap();
        read_new(&p, &mut t).unwrap();
        assert_eq!(t.messages, 2);
        assert_eq!(sum(&t.by_model).output, 5);
        // Read again with nothing new: the same totals.
        read_new(&p, &mut t).unwrap();
        assert_eq!(sum(&t.by_model).output, 5);
        // A file that shrank is counted again from the start, with a warning.
        std::fs::write(&p, answer("c", 7)).unwrap();
        let w = read_new(&p, &mut t).unwrap();
        assert!(w[0].contains("shorter"), "{w:?}");
        assert_eq!(sum(&t.by_model).output, 7);
    }

    #[test]
    fn a_line_longer_than_a_chunk_is_still_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.jsonl");
        let big = format!("{{\"type\":\"user\",\"pad\":\"{}\"}}\n", "x".repeat(CHUNK + 10));
        std::fs::write(&p, format!("{big}{}", answer("a", 4))).unwrap();
        let mut t = Transcript::default();
        read_new(&p, &mut t).unwrap();
        assert_eq!(sum(&t.by_model).output, 4);
    }

    #[test]
    fn a_saved_usage_is_loaded_back_and_a_change_by_another_writer_is_seen() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        crate::store::task::create_or_repair(&task, chrono::Utc::now()).unwrap();
        assert_eq!(load(&task), UsageFile::default(), "none saved yet");
        let mut u = UsageFile::default();
        u.events.offset = 10;
        u.events.checkins = 1;
        save(&task, &u).unwrap();
        assert_eq!(load(&task), u);
        // Another process's save: a file of other bytes (a memo that trusted this
        // process's own save would still say 1).
        u.events.checkins = 2;
        std::fs::write(path(&task), serde_json::to_vec(&u).unwrap()).unwrap();
        assert_eq!(load(&task).events.checkins, 2);
        std::fs::write(path(&task), b"{not json").unwrap();
        assert_eq!(
            load(&task),
            UsageFile::default(),
            "unreadable: counted again from the start"
        );
        std::fs::remove_file(path(&task)).unwrap();
        assert_eq!(load(&task), UsageFile::default());
    }

    #[test]
    fn events_are_counted_once_from_where_the_last_read_stopped() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        crate::store::task::create_or_repair(&task, chrono::Utc::now()).unwrap();
        let log = crate::store::events::path(&task);
        let mut t = Tally::default();
        assert!(!read_events(&log, &mut t).unwrap());
        let now = chrono::Utc::now();
        let delivered = serde_json::json!({"outcome": "delivered", "bytes": 100});
        crate::store::events::append(
            &task,
            crate::store::events::Kind::Checkin,
            Some("pm"),
            delivered.clone(),
            now,
        )
        .unwrap();
        crate::store::events::append(
            &task,
            crate::store::events::Kind::Spawn,
            Some("dev"),
            serde_json::json!({}),
            now,
        )
        .unwrap();
        assert!(read_events(&log, &mut t).unwrap());
        assert_eq!((t.checkins, t.checkin_bytes), (1, 100));
        assert!(!read_events(&log, &mut t).unwrap(), "nothing new");
        assert_eq!(t.checkins, 1, "nothing counted twice");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(b"{\"time\": \"20")
            .unwrap();
        crate::store::events::append(&task, crate::store::events::Kind::Checkin, Some("pm"), delivered, now).unwrap();
        read_events(&log, &mut t).unwrap();
        assert_eq!(t.checkins, 1, "a torn line glued to the next is not an event");
    }

    #[test]
    fn this_process_s_own_appends_are_counted_from_its_copy_and_anyone_else_s_from_the_file() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        crate::store::task::create_or_repair(&task, chrono::Utc::now()).unwrap();
        let log = crate::store::events::path(&task);
        let now = chrono::Utc::now();
        let ours = |bytes: u64| {
            let data = serde_json::json!({"outcome": "delivered", "bytes": bytes});
            crate::store::events::append(&task, crate::store::events::Kind::Checkin, Some("pm"), data, now).unwrap();
        };
        let theirs = |line: String| {
            std::fs::OpenOptions::new()
                .append(true)
                .open(&log)
                .unwrap()
                .write_all(line.as_bytes())
                .unwrap();
        };
        let mut t = Tally::default();
        ours(100);
        assert!(read_events(&log, &mut t).unwrap());
        assert_eq!((t.checkins, t.checkin_bytes), (1, 100));
        // Our next line, then overwritten in place by a line of the same length that
        // counts for nothing: the count comes from what this process wrote, not the file.
        ours(7);
        let text = std::fs::read_to_string(&log).unwrap();
        std::fs::write(&log, text.replacen("\"checkin\"", "\"nothing\"", 2)).unwrap();
        assert!(read_events(&log, &mut t).unwrap());
        assert_eq!((t.checkins, t.checkin_bytes), (2, 107), "{t:?}");
        // Another writer's line before ours, and after ours: both read from the file.
        theirs(checkin_line(1, 5));
        ours(9);
        assert!(read_events(&log, &mut t).unwrap());
        assert_eq!((t.checkins, t.checkin_bytes), (4, 121), "{t:?}");
        ours(20);
        theirs(checkin_line(2, 40));
        assert!(read_events(&log, &mut t).unwrap());
        assert_eq!((t.checkins, t.checkin_bytes), (6, 181), "{t:?}");
        assert!(!read_events(&log, &mut t).unwrap(), "nothing new");
        // A tally behind the process's own copy (usage.json's older offset, before the
        // kept tally) takes up the kept one, never counts a line twice.
        let mut behind = Tally::default();
        read_events(&log, &mut behind).unwrap();
        assert_eq!(behind.checkins, 6);
    }

    fn checkin_line(second: u32, bytes: u64) -> String {
        format!(
            "{{\"time\":\"2026-11-28T09:00:{second:02}Z\",\"kind\":\"checkin\",\"data\":{{\"outcome\":\"delivered\",\"bytes\":{bytes}}}}}\n"
        )
    }

    #[test]
    fn a_tally_counted_before_in_this_process_is_taken_up_where_it_stopped() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("events.jsonl");
        std::fs::write(&log, checkin_line(0, 10) + &checkin_line(1, 20)).unwrap();
        let mut first = Tally::default();
        read_events(&log, &mut first).unwrap();
        assert_eq!(first.checkins, 2);
        // The first line overwritten in place (same file, same length) and one appended:
        // a reader starting from usage.json's older offset gets the kept count, and reads
        // only the new line — it does not count the file again.
        let mut f = std::fs::OpenOptions::new().write(true).open(&log).unwrap();
        f.write_all(checkin_line(0, 10).replace("checkin", "nothing").as_bytes())
            .unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .unwrap()
            .write_all(checkin_line(2, 40).as_bytes())
            .unwrap();
        let mut from_file = Tally::default();
        assert!(read_events(&log, &mut from_file).unwrap());
        assert_eq!((from_file.checkins, from_file.checkin_bytes), (3, 70), "{from_file:?}");
        // A tally further on than the kept one (another process saved usage.json later)
        // is not set back.
        let mut ahead = from_file.clone();
        ahead.checkins = 99;
        read_events(&log, &mut ahead).unwrap();
        assert_eq!(ahead.checkins, 99);
    }

    #[test]
    fn a_replaced_events_log_is_counted_afresh_not_from_the_kept_tally() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("events.jsonl");
        std::fs::write(&log, checkin_line(0, 10) + &checkin_line(1, 20)).unwrap();
        read_events(&log, &mut Tally::default()).unwrap();
        let new = d.path().join("new");
        std::fs::write(&new, checkin_line(5, 1) + &checkin_line(6, 2) + &checkin_line(7, 4)).unwrap();
        std::fs::rename(&new, &log).unwrap();
        let mut t = Tally::default();
        read_events(&log, &mut t).unwrap();
        assert_eq!((t.checkins, t.checkin_bytes), (3, 7), "{t:?}");
    }

    #[test]
    fn only_the_figures_counted_are_read_and_a_field_of_another_type_is_absent() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("events.jsonl");
        let lines = [
            r#"{"time":"2025-11-27T09:00:00Z","kind":"checkin","data":{"trigger":"handoff","files":["dev-1.md","a\"b.md"],"signals":["x"],"outcome":"delivered","bytes":120,"pm_tokens":7,"pm_context":null}}"#,
            r#"{"time":"2025-11-27T09:00:01Z","kind":"checkin","data":{"outcome":"delivered","bytes":"80","pm_tokens":[1]}}"#,
            r#"{"time":"2025-11-27T09:00:02Z","kind":"checkin_skipped","data":{"why":"nothing new","files":[]}}"#,
            r#"{"time":"2025-11-27T09:00:03Z","kind":"resumed","data":{"outcome":"delivered","bytes":30}}"#,
            r#"{"time":"2025-11-27T09:00:04Z","kind":"checkin","data":{"outcome":"failed","bytes":999}}"#,
        ];
        std::fs::write(&log, lines.join("\n") + "\n").unwrap();
        let mut t = Tally::default();
        assert!(read_events(&log, &mut t).unwrap());
        assert_eq!(
            (t.checkins, t.checkin_bytes),
            (2, 120),
            "a bytes that is not a number counts 0: {t:?}"
        );
        assert_eq!((t.messages, t.message_bytes), (1, 30));
        let mut whole = Tally::default();
        for l in lines {
            let e: crate::store::events::Event = serde_json::from_str(l).unwrap();
            if let Some(s) = Sent::from_event(&e.kind, &e.data) {
                whole.add(e.time, s);
            }
        }
        whole.offset = t.offset;
        assert_eq!(t, whole, "the same as reading each event whole");
    }

    #[test]
    fn the_usage_file_round_trips_and_a_corrupt_one_starts_over() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        crate::store::task::create_or_repair(&task, chrono::Utc::now()).unwrap();
        assert_eq!(load(&task), UsageFile::default());
        let mut u = UsageFile::default();
        u.agents.entry("dev".into()).or_default().insert(
            "s1".into(),
            Transcript {
                offset: 9,
                ..Default::default()
            },
        );
        save(&task, &u).unwrap();
        assert_eq!(load(&task), u);
        std::fs::write(path(&task), "{not json").unwrap();
        assert_eq!(load(&task), UsageFile::default());
    }
}
