//! The two preambles, each built in one place: the PM's (for a start and a restart) and
//! a spoke's (for a local spawn, a remote spawn and `--prepare`). What differs between a
//! local and a remote spoke is data ([`Place`]), so the three renderings cannot drift.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::core::error::Result;
use crate::core::handoff;
use crate::core::protocol::roster::Roster;
use crate::store::fsutil;
use crate::store::task::Task;

/// The PM's preamble: the check-in cadence from task.md and the roster it coordinates.
pub(super) fn pm_preamble(task: &Task, now: DateTime<Utc>) -> Result<String> {
    let spec = task.spec()?;
    Ok(crate::core::preamble::pm(
        task.name.as_str(),
        &crate::core::clock::local_time(now),
        &task.dir().display().to_string(),
        "task",
        spec.setting("checkin").unwrap_or("10m"),
        spec.setting("no_progress").unwrap_or("30m"),
        &crate::store::roster::for_task(task)?.describe(),
    ))
}

/// Where a spoke works, as its preamble names it.
pub(super) enum Place<'a> {
    /// On this machine, in this folder (its own worktree's when it has one, with the
    /// preamble block that says so); the task folder is the local one.
    Local { cwd: &'a Path, worktree: Option<&'a str> },
    /// On `destination` (the ssh host), in `cwd` there (its worktree's, with its block, when
    /// it has one); the task folder is `<root>/tasks/<task>`, root being task.md's remote folder.
    Remote {
        destination: &'a str,
        cwd: &'a str,
        root: &'a str,
        worktree: Option<&'a str>,
    },
}

impl Place<'_> {
    /// The agent's working folder, as it sees it.
    pub(super) fn cwd(&self) -> String {
        match self {
            Place::Local { cwd, .. } => cwd.display().to_string(),
            Place::Remote { cwd, .. } => cwd.to_string(),
        }
    }

    /// The task folder, as the agent sees it.
    pub(super) fn task_dir(&self, task: &Task) -> String {
        match self {
            Place::Local { .. } => task.dir().display().to_string(),
            Place::Remote { root, .. } => format!("{root}/tasks/{}", task.name),
        }
    }

    /// The PM's handoff, as the agent finds it: relative to the local task folder, or the
    /// copy pushed to the remote one's handoffs/.
    fn handoff_file(&self, task: &Task, path: &Path) -> String {
        match self {
            Place::Local { .. } => path
                .strip_prefix(task.dir())
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| path.display().to_string()),
            Place::Remote { .. } => format!("handoffs/{}", handoff_file_name(path)),
        }
    }
}

/// The handoff's file name, the name its copy on a remote host gets.
pub(super) fn handoff_file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "handoff.md".into())
}

/// A spoke's preamble: who it is, where it works, and the PM's handoff with its scope.
pub(super) fn spoke_preamble(
    task: &Task,
    agent: &str,
    roster: &Roster,
    place: &Place<'_>,
    handoff_path: &Path,
    handoff_text: &str,
    now: DateTime<Utc>,
) -> String {
    let scope = handoff::parse(handoff_text).sections.scope;
    let cwd = place.cwd();
    crate::core::preamble::agent(&crate::core::preamble::AgentPreamble {
        agent,
        role: roster.role_of(agent).as_str(),
        task: task.name.as_str(),
        spawned: &crate::core::clock::local_time(now),
        cwd: &cwd,
        task_dir: &place.task_dir(task),
        task_bin: "task",
        handoff_file: &place.handoff_file(task, handoff_path),
        handoff: handoff_text,
        scope: scope.as_deref(),
        requires_gates: roster.requires_gates(agent),
        worktree: match place {
            Place::Local { worktree, .. } | Place::Remote { worktree, .. } => worktree.map(str::to_string),
        },
        remote: match place {
            Place::Local { .. } => None,
            Place::Remote { destination, root, .. } => Some((destination, root)),
        },
    })
}

/// Keep the exact preamble an agent was sent in its scratchpad (the runtime may read it
/// from there); a second start within the same second gets its own file.
pub(super) fn save_preamble(task: &Task, agent: &str, text: &str, now: DateTime<Utc>) -> Result<PathBuf> {
    let dir = task.scratchpad().join(agent);
    fsutil::create_dir_all(&dir)?;
    let stamp = stamp(now);
    let mut path = dir.join(preamble_file_name(now));
    let mut n = 2;
    while !fsutil::atomic_create(&path, text.as_bytes())? {
        path = dir.join(format!("preamble-{stamp}-{n}.md"));
        n += 1;
    }
    Ok(path)
}

/// The name a preamble saved at `now` gets (a second one that second gets `-2`, …), shared
/// with `--prepare` so the argv it shows names the file a spawn would save.
pub(super) fn preamble_file_name(now: DateTime<Utc>) -> String {
    format!("preamble-{}.md", stamp(now))
}

fn stamp(now: DateTime<Utc>) -> String {
    now.with_timezone(&chrono::Local).format("%Y%m%d-%H%M%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_decides_the_folders_and_the_handoff_a_spoke_is_told() {
        let t = Task::new(Path::new("/proj"), "t1".parse().unwrap()).unwrap();
        let roster = Roster::builtin("default").unwrap();
        let handoff = t.handoffs().join("20260101-000000-pm-to-dev.md");
        let now = Utc::now();
        let local = Place::Local {
            cwd: Path::new("/proj/src"),
            worktree: None,
        };
        let remote = Place::Remote {
            destination: "me@box",
            cwd: "/srv/p",
            root: "/srv/p",
            worktree: None,
        };
        assert_eq!(local.task_dir(&t), "/proj/tasks/t1");
        assert_eq!(remote.task_dir(&t), "/srv/p/tasks/t1");
        assert_eq!(
            local.handoff_file(&t, &handoff),
            "handoffs/20260101-000000-pm-to-dev.md"
        );
        assert_eq!(
            remote.handoff_file(&t, &handoff),
            "handoffs/20260101-000000-pm-to-dev.md"
        );
        assert_eq!(local.handoff_file(&t, Path::new("/elsewhere/h.md")), "/elsewhere/h.md");
        let here = spoke_preamble(&t, "dev", &roster, &local, &handoff, "## Task\nGo.\n", now);
        let there = spoke_preamble(&t, "dev", &roster, &remote, &handoff, "## Task\nGo.\n", now);
        assert!(here.contains("/proj/tasks/t1") && !here.contains("me@box"), "{here}");
        assert!(there.contains("/srv/p/tasks/t1") && there.contains("me@box"), "{there}");
    }
}
