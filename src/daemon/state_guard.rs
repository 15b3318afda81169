//! The actor's guard over its task's pm_state.json, so a bad file never silences a task.
//!
//! Without it a corrupt state stopped check-ins and death detection without a word (every
//! read failed), and whoever wrote first set it aside silently with an empty state, which
//! forgot every agent. At each look the guard: sets a corrupt file aside and puts back the
//! last good state it read (agents, ledger, restarts), then reports it (event, log
//! warning, escalation); reports copies set aside by anyone else and puts the agents it
//! knew back into the fresh state; and for a state written by a newer version, which is
//! never rewritten, logs and escalates once and lends the last good state to the death
//! watch read-only.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::core::model::{PmState, state};
use crate::store::events::Kind as EventKind;
use crate::store::task::{StateHealth, Task, persist};

/// What the actor may use this look.
#[derive(Debug)]
pub struct View {
    /// The state to watch deaths in.
    pub state: Arc<PmState>,
    /// Whether the file on disk may be changed (false: a newer version's state).
    pub writable: bool,
}

/// One per actor: what it last read well, and which set-aside copies it has reported.
#[derive(Debug, Default)]
pub struct Guard {
    last_good: Option<Arc<PmState>>,
    known_copies: BTreeSet<PathBuf>,
    too_new_told: Option<u64>,
    /// The task folder's identity and times when its set-aside copies were last listed.
    dir_stamp: Option<(u64, i64, i64, i64, i64)>,
    /// [`persist::foreign_reads`] just before that listing, and when it was made.
    listed: Option<(u64, Instant)>,
}

/// How often the copies are listed when nothing says one was made ([`Guard::foreign_copies`]).
const RELIST_EVERY: Duration = Duration::from_secs(60);

impl Guard {
    /// A guard that starts from the state as it is now, and takes the copies already in
    /// the task folder as reported (they were named by whoever made them, and `task
    /// status` lists them).
    pub fn new(task: &Task) -> Guard {
        let last_good = task.state().ok();
        let reads = persist::foreign_reads(&task.state_path());
        Guard {
            last_good,
            known_copies: persist::set_aside_files(&task.dir()).into_iter().collect(),
            too_new_told: None,
            dir_stamp: None,
            listed: Some((reads, Instant::now())),
        }
    }

    /// Look at the state, repairing and reporting what needs it; `None` when it cannot be
    /// read at all (an I/O error, logged) and nothing good was read before.
    pub fn look(&mut self, task: &Task, now: DateTime<Utc>) -> Option<View> {
        match task.recover_state(now, self.last_good.as_deref()) {
            Ok(StateHealth::Fine(st)) => {
                self.too_new_told = None;
                let st = self.foreign_copies(task, st, now);
                self.last_good = Some(st.clone());
                Some(View {
                    state: st,
                    writable: true,
                })
            }
            Ok(StateHealth::SetAside { copy, detail, restored }) => {
                self.known_copies.insert(copy.clone());
                report(task, &copy, &detail, restored, now);
                let st = task.state().ok().or_else(|| self.last_good.clone())?;
                self.last_good = Some(st.clone());
                Some(View {
                    state: st,
                    writable: true,
                })
            }
            Ok(StateHealth::TooNew { found }) => {
                if self.too_new_told != Some(found) {
                    self.too_new_told = Some(found);
                    too_new(task, found, now);
                }
                self.last_good.clone().map(|state| View { state, writable: false })
            }
            Err(e) => {
                tracing::warn!(task = %task.name, error = %e, "cannot read pm_state.json; deaths are watched from the last good copy");
                self.last_good.clone().map(|state| View { state, writable: false })
            }
        }
    }

    /// Copies set aside by someone else since the last look (a check-in, a CLI command):
    /// reported, and the agents this guard knew put back into the fresh state so their
    /// deaths are still seen. Returns the state to use.
    fn foreign_copies(&mut self, task: &Task, st: Arc<PmState>, now: DateTime<Utc>) -> Arc<PmState> {
        // A copy set aside is a new name in the task folder, which changes the folder's
        // times: unchanged times, nothing new to list (a tick of an idle task).
        // Times set within the kernel's coarse tick of now are not remembered (a second
        // change in that tick would keep them): see store::parsed.
        let stamp = std::fs::metadata(task.dir()).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.ino(), m.mtime(), m.mtime_nsec(), m.ctime(), m.ctime_nsec())
        });
        if stamp.is_some() && stamp == self.dir_stamp {
            return st;
        }
        // The folder changes at every save, but a copy is only ever set aside by a process
        // that then writes a fresh state in its place (or dies leaving none): a state this
        // process reads without having written it. None since the last listing, none to
        // find; still listed once a minute, for a copy made some other way (by hand).
        let reads = persist::foreign_reads(&task.state_path());
        if self
            .listed
            .is_some_and(|(seen, at)| seen == reads && at.elapsed() < RELIST_EVERY)
        {
            return st;
        }
        self.listed = Some((reads, Instant::now()));
        let settled = stamp.is_some_and(|(_, _, _, secs, nanos)| {
            let ctime = std::time::UNIX_EPOCH
                + std::time::Duration::new(secs.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
            std::time::SystemTime::now()
                .duration_since(ctime)
                .is_ok_and(|d| d >= crate::store::parsed::SETTLED)
        });
        self.dir_stamp = stamp.filter(|_| settled);
        let new: Vec<PathBuf> = persist::set_aside_files(&task.dir())
            .into_iter()
            .filter(|c| !self.known_copies.contains(c))
            .collect();
        if new.is_empty() {
            return st;
        }
        let mut restored = false;
        if let Some(good) = &self.last_good {
            let merged = task.update_state(now, |fresh| Ok(merge_known_agents(fresh, good)));
            restored = matches!(merged, Ok(true));
        }
        for c in new {
            report(task, &c, "found set aside by another command", restored, now);
            self.known_copies.insert(c);
        }
        task.state().unwrap_or(st)
    }
}

/// Put back into `fresh` the agents (and the PM's restart times) it lost when a corrupt
/// state was replaced by an empty one; what `fresh` already knows wins. Pure; whether it
/// changed anything.
pub fn merge_known_agents(fresh: &mut PmState, good: &PmState) -> bool {
    let mut changed = false;
    for (name, a) in &good.agents {
        if !fresh.agents.contains_key(name) {
            fresh.agents.insert(name.clone(), a.clone());
            changed = true;
        }
    }
    if fresh.pm_restarts.is_empty() && !good.pm_restarts.is_empty() {
        fresh.pm_restarts = good.pm_restarts.clone();
        changed = true;
    }
    changed
}

/// The event, the warning and the escalation for one set-aside copy.
fn report(task: &Task, copy: &Path, detail: &str, restored: bool, now: DateTime<Utc>) {
    let then = if restored {
        "the supervisor put back the last good state it had read and goes on"
    } else {
        "a fresh state was started"
    };
    tracing::warn!(task = %task.name, copy = %copy.display(), detail, restored, "pm_state.json was corrupt and was set aside");
    if let Err(e) = crate::store::events::append(
        task,
        EventKind::StateSetAside,
        None,
        serde_json::json!({"copy": copy, "detail": detail, "restored": restored}),
        now,
    ) {
        tracing::warn!(task = %task.name, error = %e, "cannot append to events.jsonl");
    }
    let reason = format!(
        "pm_state.json was corrupt ({detail}) and was set aside as {}; {then}. Look at the copy, then delete it",
        copy.display()
    );
    if let Err(e) = crate::app::escalation::raise(task, &reason, now) {
        tracing::error!(task = %task.name, error = %e, "cannot call a human about the corrupt state");
    }
}

/// Log and escalate a newer version's state once; the file is never written.
fn too_new(task: &Task, found: u64, now: DateTime<Utc>) {
    let reason = format!(
        "pm_state.json was written by a newer agent-orchestrator (schema {found}, this one reads up to {}); it is left untouched and only deaths are watched: upgrade the daemon (`task daemon`)",
        state::STATE_VERSION
    );
    tracing::warn!(task = %task.name, found, "pm_state.json is from a newer version; not rewriting it");
    // Not recorded in the state (that would rewrite it): the event, the log and the notify command.
    if let Err(e) = crate::app::escalation::announce(task, &reason, now) {
        tracing::error!(task = %task.name, error = %e, "cannot call a human about the newer state");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_folder_is_listed_for_copies_once_a_state_this_process_did_not_write_is_read() {
        let d = tempfile::tempdir().unwrap();
        let task = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        let now = chrono::Utc::now();
        crate::store::task::create_or_repair(&task, now).unwrap();
        let mut g = Guard::new(&task);
        let copy = |n: u32| task.dir().join(persist::set_aside_name(now, n));
        // Only this process writes the state: a copy made by hand waits for the minute's listing.
        std::fs::write(copy(1), b"{").unwrap();
        task.update_state(now, |st| {
            st.phase = crate::core::model::Phase::Developing;
            Ok(())
        })
        .unwrap();
        g.look(&task, now).unwrap();
        assert!(!g.known_copies.contains(&copy(1)), "listed without a cause");
        // Another process set a corrupt state aside and wrote a fresh one: the next look lists.
        std::fs::write(copy(2), b"{").unwrap();
        std::fs::write(task.state_path(), serde_json::to_vec(&PmState::default()).unwrap()).unwrap();
        g.look(&task, now).unwrap();
        assert!(g.known_copies.contains(&copy(1)) && g.known_copies.contains(&copy(2)));
        let reported = std::fs::read_to_string(task.dir().join("events.jsonl")).unwrap();
        assert_eq!(reported.matches("state_set_aside").count(), 2, "{reported}");
    }

    #[test]
    fn known_agents_come_back_into_a_fresh_state_without_overriding_it() {
        let mut good = PmState::default();
        good.agents.entry("pm".into()).or_default().status = "running".into();
        good.agents.entry("dev".into()).or_default().status = "running".into();
        good.pm_restarts.push("2026-11-23T09:00:00Z".parse().unwrap());
        let mut fresh = PmState::default();
        fresh.agents.entry("dev".into()).or_default().status = "dead".into();
        assert!(merge_known_agents(&mut fresh, &good));
        assert_eq!(fresh.agents["pm"].status, "running".into());
        assert_eq!(
            fresh.agents["dev"].status,
            "dead".into(),
            "what the fresh state knows wins"
        );
        assert_eq!(fresh.pm_restarts.len(), 1);
        assert!(!merge_known_agents(&mut fresh, &good), "nothing more to put back");
    }
}
