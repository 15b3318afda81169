//! Exactly-once check-ins across a crash: the INTENT of a delivery (its id and the handoff
//! files it reports) is saved before anything is pasted, to last as long as the pane it
//! guards ([`save`]), the id travels in the message (`[checkin c-1a2b3c]`,
//! templates/checkin-tag.md), and the intent is removed only once the check-in is recorded.
//! An intent still on disk means "maybe delivered": the next check-in looks for its id in
//! the PM's pane (with scrollback) and, for Claude Code, in its transcripts, before it ever
//! delivers again. An id seen only in the PM's input area was pasted and never submitted:
//! that delivery is finished with Enter, not counted as received (the PM would never get
//! it) and not pasted again (it would get it twice).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::error::{Error, Result};
use crate::core::screen::{Patterns, Sighting, sighting};
use crate::io::tmux::Tmux;
use crate::store::fsutil;
use crate::store::task::Task;

/// The tag template that carries the id in the message.
const TAG_TEMPLATE: &str = include_str!("../../../templates/checkin-tag.md");

/// Lines of scrollback searched for an id (a check-in is a few dozen lines).
const SCROLLBACK: &str = "-5000";

/// A check-in about to be delivered (or delivered and not yet recorded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// Short id written into the message, e.g. `c-1a2b3c`.
    pub id: String,
    /// The handoff files the message reports.
    pub files: Vec<String>,
}

/// Where a task's unfinished intent lives.
pub fn path(task: &Task) -> PathBuf {
    task.dir().join(".checkin-intent.json")
}

/// A fresh short id.
pub fn new_id() -> String {
    format!("c-{}", &uuid::Uuid::new_v4().simple().to_string()[..6])
}

/// The line appended to the message (pure).
pub fn tag(id: &str) -> String {
    crate::core::preamble::fill(TAG_TEMPLATE, &[("id", id)])
        .trim_end()
        .to_string()
}

/// The message as delivered: the rendered check-in and its tag on the last line (pure).
pub fn tagged(message: &str, id: &str) -> String {
    format!("{}\n{}", message.trim_end(), tag(id))
}

/// The unfinished intent, if any. The file is rewritten in place ([`save`]), so bytes that
/// do not parse are a save that never finished — and nothing is delivered before a save
/// has finished — which is no intent; said in the log, never an error that stops the task.
pub fn load(task: &Task) -> Result<Option<Intent>> {
    let p = path(task);
    match std::fs::read(&p) {
        Ok(b) if b.iter().all(u8::is_ascii_whitespace) => Ok(None),
        Ok(b) => Ok(serde_json::from_slice(&b).map_or_else(
            |e| {
                tracing::warn!(path = %p.display(), error = %e, "a check-in intent whose save never finished; nothing was delivered under it");
                None
            },
            Some,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", &p, e)),
    }
}

/// Save the intent before anything is pasted; nothing is delivered unless this worked. In
/// place, one file kept per task and one size (see `fsutil::overwrite_in_place`): a temp
/// file, a rename and two fsyncs at every check-in were a tenth of the daemon's CPU with 60
/// busy tasks. Not fsynced either (its fdatasync was a ninth of the 360-agent soak
/// daemon's CPU per check-in, docs/benchmarks.md): the intent must outlive what it
/// guards, the paste into the PM's pane, and a `kill -9` of the daemon keeps it in the
/// page cache. A power cut takes the pane (the PM runs here, under this machine's tmux)
/// and, often, the PM's own record of the message (Claude Code does not fsync its
/// transcript); writeback takes older dirty files first, so a transcript that reached the
/// disk with the message had this intent, written before the paste, reach it too. An
/// intent lost with the power names no delivery, and the handoffs it named, never
/// recorded, are told to the resumed PM again.
pub fn save(task: &Task, intent: &Intent) -> Result<()> {
    let mut bytes = serde_json::to_vec(intent).expect("intent serialises");
    bytes.push(b'\n');
    fsutil::overwrite_in_place(&path(task), &bytes)
}

/// Finish the intent once its check-in is recorded (the file is blanked, not removed).
/// Without an fsync, like [`save`]: the record it follows is durable, so an
/// intent that comes back after a power loss names handoffs the ledger holds — recovery
/// finds it never reached the PM's new pane and delivers afresh under its id, and a
/// recorded handoff is never a candidate again. A `kill -9` keeps the emptying anyway.
pub fn clear(task: &Task) -> Result<()> {
    fsutil::blank_in_place(&path(task))
}

/// Whether `text` shows the check-in `id` (its tag, or the id alone where a TUI wrapped
/// the tag; pure).
pub fn shows(text: &str, id: &str) -> bool {
    text.contains(&tag(id)) || text.contains(id)
}

/// Claude Code's folder name for a working folder: every character that is not a
/// letter or digit becomes `-` (pure).
pub fn claude_slug(cwd: &Path) -> String {
    cwd.to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

/// Whether Claude Code's transcripts of `cwd` under `home` mention `id`.
fn in_transcripts(home: &Path, cwd: &Path, id: &str) -> bool {
    let dir = home.join(".claude/projects").join(claude_slug(cwd));
    let Ok(rd) = std::fs::read_dir(&dir) else { return false };
    rd.flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .any(|e| std::fs::read(e.path()).is_ok_and(|b| shows(&String::from_utf8_lossy(&b), id)))
}

/// What became of an unfinished check-in, as far as can be seen after the fact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The PM has it: submitted (its transcript, the demo inbox, an echo in its pane) or
    /// waiting in its agent's queue, which takes it by itself.
    Submitted,
    /// Pasted into the PM's input and never submitted (killed between paste and Enter): to
    /// be submitted with Enter, never pasted again and never counted before it is.
    Unsent,
    /// Nowhere: it never reached the PM, and is delivered again under the same id.
    Nowhere,
}

impl Found {
    /// The word events.jsonl records (`checkin_settled`'s `seen`).
    pub fn word(self) -> &'static str {
        match self {
            Found::Submitted => "submitted",
            Found::Unsent => "unsent",
            Found::Nowhere => "nowhere",
        }
    }
}

/// What became of check-in `id`: its tag in the PM's pane (with scrollback) judged by the
/// runtime's input area ([`sighting`]: sitting unsent in the input is not received), the
/// demo runtime's inbox or, for Claude Code, its transcripts. A pane that cannot be read is
/// an error: the caller must not deliver again on a guess.
pub async fn delivered(task: &Task, tmux: &Tmux, pm: Option<(&str, &Patterns)>, id: &str) -> Result<Found> {
    let mut seen = Sighting::Nowhere;
    if let Some((pane, patterns)) = pm {
        if tmux.pane(pane).await?.is_some() {
            let text = tmux
                .run("read pane", &["capture-pane", "-p", "-J", "-S", SCROLLBACK, "-t", pane])
                .await?;
            // The id alone, where a TUI wrapped the tag.
            seen = sighting(&text, id, patterns);
            if seen == Sighting::Submitted {
                return Ok(Found::Submitted);
            }
        }
    }
    // The demo runtime's transcript: its inbox (its screen shows only a count).
    let inbox = task.scratchpad().join("pm").join("inbox.jsonl");
    if std::fs::read(&inbox).is_ok_and(|b| shows(&String::from_utf8_lossy(&b), id)) {
        return Ok(Found::Submitted);
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let cwd = crate::app::session::local_cwd(task).ok();
    if matches!((home, cwd), (Some(h), Some(c)) if in_transcripts(&h, &c, id)) {
        return Ok(Found::Submitted);
    }
    Ok(match seen {
        Sighting::Unsent => Found::Unsent,
        _ => Found::Nowhere,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_carries_the_id_and_is_found_again() {
        let id = new_id();
        assert!(id.starts_with("c-") && id.len() == 8, "{id}");
        let m = tagged("Check-in for task t1.\nDecide.\n", &id);
        assert!(m.starts_with("Check-in for task t1."), "{m}");
        assert!(m.ends_with(&format!("[checkin {id}]")), "{m}");
        assert!(shows(&format!("demo> {m}\n"), &id));
        assert!(!shows(&m, "c-ffffff"));
    }

    #[test]
    fn claude_slugs_replace_every_separator() {
        assert_eq!(claude_slug(Path::new("/tmp/ao.x/proj")), "-tmp-ao-x-proj");
    }

    #[test]
    fn claude_codes_transcripts_of_the_working_folder_are_searched() {
        let home = tempfile::tempdir().unwrap();
        let cwd = Path::new("/tmp/ao.x/proj");
        assert!(!in_transcripts(home.path(), cwd, "c-abcdef"), "no transcripts yet");
        let dir = home.path().join(".claude/projects/-tmp-ao-x-proj");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("s1.jsonl"),
            "{\"message\":\"Check-in\\n[checkin c-abcdef]\"}\n",
        )
        .unwrap();
        assert!(in_transcripts(home.path(), cwd, "c-abcdef"));
        assert!(!in_transcripts(home.path(), cwd, "c-123456"));
        assert!(!in_transcripts(home.path(), Path::new("/elsewhere"), "c-abcdef"));
    }

    #[test]
    fn an_intent_survives_on_disk_until_cleared() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        crate::store::task::create_or_repair(&task, chrono::Utc::now()).unwrap();
        assert_eq!(load(&task).unwrap(), None);
        let i = Intent {
            id: "c-abcdef".into(),
            files: vec!["dev-20261123-090000.md".into()],
        };
        save(&task, &i).unwrap();
        assert_eq!(load(&task).unwrap(), Some(i.clone()));
        clear(&task).unwrap();
        clear(&task).unwrap();
        assert_eq!(load(&task).unwrap(), None);
        // A longer intent, then a shorter one over it: no tail of the first is left.
        let long = Intent {
            id: "c-123456".into(),
            files: (0..20).map(|i| format!("dev-20261123-0900{i:02}.md")).collect(),
        };
        save(&task, &long).unwrap();
        save(&task, &i).unwrap();
        assert_eq!(load(&task).unwrap(), Some(i));
    }

    #[test]
    fn a_save_that_never_finished_is_no_intent() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        crate::store::task::create_or_repair(&task, chrono::Utc::now()).unwrap();
        // What a crash between the write and the truncation leaves: new bytes, old tail.
        std::fs::write(path(&task), "{\"id\":\"c-abcdef\",\"files\":[]}\n0-090000.md\"]}\n").unwrap();
        assert_eq!(load(&task).unwrap(), None);
    }
}
