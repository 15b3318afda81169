//! Git worktrees per agent (docs/worktrees.md): which agents get one, what their branches
//! are called, what the state remembers of them, and how git's answers are read. Pure: the
//! git commands are [`crate::io::git`]'s, the steps [`crate::app::worktree`]'s.
//!
//! The task has one branch, `task/<task>`, created from the commit the task started at;
//! an isolated agent works on `agents/<task>/<agent>-<n>`, branched from the task branch's
//! head at its spawn, and its work is merged back at its terminal handoff. Read-only roles
//! may get a detached worktree at the task branch's head instead.

use std::path::PathBuf;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How an agent shares the code with the rest of the team.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// The task's working folder, as every agent had before worktrees.
    #[default]
    Shared,
    /// Its own worktree on its own branch, merged into the task branch at its terminal handoff.
    Worktree,
    /// A detached worktree at the task branch's head: for roles that only read (a review).
    Detached,
}

impl Isolation {
    /// As written in rosters, task.md and `--worktree`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Shared => "shared",
            Isolation::Worktree => "worktree",
            Isolation::Detached => "detached",
        }
    }

    /// Read a setting: `worktree`/`true`/`yes`/`on`, `detached`, `shared`/`false`/`no`/`off`.
    pub fn parse(s: &str) -> std::result::Result<Isolation, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "worktree" | "true" | "yes" | "on" => Ok(Isolation::Worktree),
            "detached" => Ok(Isolation::Detached),
            "shared" | "false" | "no" | "off" | "none" => Ok(Isolation::Shared),
            other => Err(format!(
                "{other:?} is not an isolation: use worktree (or true), detached, or shared (or false)"
            )),
        }
    }
}

/// Where an agent's isolation can be asked for, strongest first.
#[derive(Debug, Clone, Copy, Default)]
pub struct IsolationAsked<'a> {
    /// `task spawn --worktree[=detached]`.
    pub flag: Option<Isolation>,
    /// task.md `worktree-<agent>:`.
    pub agent_setting: Option<&'a str>,
    /// The roster member's `isolation`.
    pub roster: Option<Isolation>,
    /// task.md `worktree:` (for every spoke).
    pub task_setting: Option<&'a str>,
    /// The roster member only reads (`read_only = true`): a task-wide `worktree: true` gives it
    /// a detached worktree rather than a branch of its own.
    pub read_only: bool,
}

/// The isolation an agent gets: the flag, else `worktree-<agent>:`, else the roster, else
/// task.md's `worktree:` (read-only roles detached), else shared. Opt-in at every level, so a
/// task that never asks works in one folder as before.
pub fn choose(asked: IsolationAsked<'_>) -> std::result::Result<Isolation, String> {
    if let Some(f) = asked.flag {
        return Ok(f);
    }
    if let Some(s) = asked.agent_setting {
        return Isolation::parse(s).map_err(|e| format!("worktree-<agent>: {e}"));
    }
    if let Some(r) = asked.roster {
        return Ok(r);
    }
    match asked.task_setting.map(Isolation::parse).transpose() {
        Err(e) => Err(format!("worktree: {e}")),
        Ok(Some(Isolation::Worktree)) if asked.read_only => Ok(Isolation::Detached),
        Ok(Some(i)) => Ok(i),
        Ok(None) => Ok(Isolation::Shared),
    }
}

/// The task's branch.
pub fn task_branch(task: &str) -> String {
    format!("task/{task}")
}

/// Agent `agent`'s `n`th branch of the task. Not under `task/<task>/`: git keeps a branch
/// as a file, so `task/<task>` and `task/<task>/…` cannot both exist.
pub fn agent_branch(task: &str, agent: &str, n: u32) -> String {
    format!("agents/{task}/{agent}-{n}")
}

/// The folder name of an agent's `n`th worktree (under the task's worktree root).
pub fn worktree_dir(agent: &str, n: u32) -> String {
    format!("{agent}-{n}")
}

/// What the state keeps of the task's git side: recorded at `task start` (the commit) and at
/// the first isolated spawn (the branch), then advanced by every merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskGit {
    /// The repository's top folder (the user's own checkout; never changed by us).
    pub repo: PathBuf,
    /// The commit the task started at: the task branch's base.
    pub start_commit: String,
    /// The task branch, once created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The task branch's head as this supervisor last set it: a branch found elsewhere that
    /// does not descend from it was rewritten under us, and nothing is merged into it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
}

/// Where an isolated agent's work stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "stage")]
pub enum Stage {
    /// The agent is working in it.
    #[default]
    Working,
    /// Its terminal handoff was seen; commit and merge are under way (a restart finishes them).
    Finishing {
        /// The handoff that ended its turn.
        handoff: String,
    },
    /// Merged into the task branch (or nothing to merge); the worktree is removed.
    Merged {
        /// The task branch's head after the merge.
        commit: String,
        /// Whether the task branch simply moved forward to the agent's commit.
        fast_forward: bool,
        /// Whether the agent's branch had anything the task branch lacked.
        changed: bool,
    },
    /// The merge conflicted: aborted, the task branch untouched, the worktree kept for whoever
    /// resolves it (the agent again when it is spawned next).
    Conflict {
        /// The files both sides changed.
        files: Vec<String>,
        /// The task branch's head the merge was tried against.
        task_head: String,
    },
    /// A read-only (detached) worktree whose agent is done; removed.
    Closed,
    /// Something other than a conflict stopped the finish (the cause); retried at the next check-in.
    Failed {
        /// What went wrong, for the PM and `task status`.
        error: String,
    },
}

/// One agent's worktree, as the state remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentWorktree {
    /// Worktree or detached.
    pub isolation: Isolation,
    /// The host it is on: a remote agent's worktree is in the host's clone, and its branch
    /// is fetched here over the ssh master to be merged.
    #[serde(default, skip_serializing_if = "crate::core::model::AgentHost::is_local")]
    pub host: crate::core::model::AgentHost,
    /// The repository it belongs to (on its host).
    #[serde(default)]
    pub repo: PathBuf,
    /// Its folder (on its host).
    pub path: PathBuf,
    /// The agent's working folder inside it (the task's cwd, relative to the repository).
    pub cwd: PathBuf,
    /// Its branch (`None` when detached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit it was created at.
    pub base: String,
    /// When it was created: only handoffs from then on end its turn.
    pub created_at: DateTime<Utc>,
    /// Where its work stands.
    #[serde(flatten)]
    pub stage: Stage,
    /// Whether the PM has been told the outcome.
    #[serde(default)]
    pub announced: bool,
    /// Files the supervisor put there that are not the agent's work (its agent definitions):
    /// never committed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placed: Vec<String>,
}

impl AgentWorktree {
    /// One word for `task status`.
    pub fn stage_word(&self) -> &'static str {
        match self.stage {
            Stage::Working => "working",
            Stage::Finishing { .. } => "merging",
            Stage::Merged { .. } => "merged",
            Stage::Conflict { .. } => "conflict",
            Stage::Closed => "closed",
            Stage::Failed { .. } => "failed",
        }
    }
}

/// What an agent's context bundle says of its worktree (`worktree` in context-bundle.json).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorktreeNote {
    /// The worktree's folder (on the agent's host).
    pub path: String,
    /// Where the agent works in it.
    pub cwd: String,
    /// Its branch (`None`: detached, read only).
    pub branch: Option<String>,
    /// The commit it was made from.
    pub base: String,
    /// The branch its work is merged into.
    pub task_branch: String,
    /// Files an earlier merge conflicted on, to resolve first.
    pub conflict: Option<Vec<String>>,
}

/// The commit message of the work an agent left uncommitted: the handoff's summary first,
/// then where it came from.
pub fn commit_message(agent: &str, task: &str, summary: &str, handoff_file: &str) -> String {
    let first = summary.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let first: String = first.chars().take(72).collect();
    let title = if first.is_empty() {
        format!("{agent}: work of task {task}")
    } else {
        format!("{agent}: {first}")
    };
    format!("{title}\n\n{summary}\n\nHandoff: {handoff_file}\nTask: {task}\n")
}

/// The message of a merge commit on the task branch.
pub fn merge_message(agent_branch: &str, task_branch: &str) -> String {
    format!("Merge {agent_branch} into {task_branch}\n")
}

/// `git merge-tree --write-tree --name-only --no-messages`'s output: the tree, then (on a
/// conflict) the conflicted files, one per line.
pub fn parse_merge_tree(out: &str) -> (String, Vec<String>) {
    let mut lines = out.lines();
    let tree = lines.next().unwrap_or("").trim().to_string();
    let mut files: Vec<String> = lines.take_while(|l| !l.is_empty()).map(str::to_string).collect();
    files.dedup();
    (tree, files)
}

/// `git worktree list --porcelain`: every checked-out branch (`refs/heads/…`) with its folder.
pub fn checked_out(porcelain: &str) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut path = None;
    for l in porcelain.lines() {
        if let Some(p) = l.strip_prefix("worktree ") {
            path = Some(PathBuf::from(p));
        } else if let (Some(b), Some(p)) = (l.strip_prefix("branch "), &path) {
            out.push((p.clone(), b.trim_start_matches("refs/heads/").to_string()));
        }
    }
    out
}

/// What the PM is told of a finished worktree; `None` for outcomes it need not hear of.
pub fn outcome_text(agent: &str, w: &AgentWorktree, task_branch: &str) -> Option<(bool, String)> {
    let branch = w.branch.as_deref().unwrap_or("(detached)");
    match &w.stage {
        Stage::Merged {
            commit,
            fast_forward,
            changed,
        } => Some((
            false,
            if *changed {
                format!(
                    "{agent}'s work ({branch}) merged into {task_branch}{} at {}",
                    if *fast_forward { " (fast-forward)" } else { "" },
                    short(commit)
                )
            } else {
                format!("{agent} changed no files; {task_branch} stays at {}", short(commit))
            },
        )),
        Stage::Conflict { files, task_head } => Some((
            true,
            format!(
                "merging {branch} into {task_branch} conflicts in {}; the merge was aborted and {task_branch} is unchanged at {}. {agent}'s worktree is kept at {}: spawn {agent} again to merge {task_branch} into its branch and resolve, or hand the conflict to another agent",
                files.join(", "),
                short(task_head),
                w.path.display()
            ),
        )),
        Stage::Failed { error } => Some((
            true,
            format!("{agent}'s work on {branch} could not be merged: {error}; it is retried at the next check-in"),
        )),
        _ => None,
    }
}

/// A commit id cut to the length people read.
pub fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked() -> IsolationAsked<'static> {
        IsolationAsked::default()
    }

    #[test]
    fn isolation_is_opt_in_and_the_strongest_ask_wins() {
        assert_eq!(choose(asked()), Ok(Isolation::Shared));
        let task_wide = IsolationAsked {
            task_setting: Some("true"),
            ..asked()
        };
        assert_eq!(choose(task_wide), Ok(Isolation::Worktree));
        assert_eq!(
            choose(IsolationAsked {
                read_only: true,
                ..task_wide
            }),
            Ok(Isolation::Detached)
        );
        assert_eq!(
            choose(IsolationAsked {
                roster: Some(Isolation::Shared),
                ..task_wide
            }),
            Ok(Isolation::Shared)
        );
        assert_eq!(
            choose(IsolationAsked {
                agent_setting: Some("detached"),
                roster: Some(Isolation::Worktree),
                ..task_wide
            }),
            Ok(Isolation::Detached)
        );
        assert_eq!(
            choose(IsolationAsked {
                flag: Some(Isolation::Worktree),
                agent_setting: Some("false"),
                ..asked()
            }),
            Ok(Isolation::Worktree)
        );
        assert!(
            choose(IsolationAsked {
                task_setting: Some("sometimes"),
                ..asked()
            })
            .unwrap_err()
            .contains("worktree:")
        );
    }

    #[test]
    fn names() {
        assert_eq!(task_branch("t1"), "task/t1");
        assert_eq!(agent_branch("t1", "dev", 2), "agents/t1/dev-2");
        assert_eq!(worktree_dir("dev", 2), "dev-2");
    }

    #[test]
    fn merge_tree_output_is_read() {
        let (tree, files) = parse_merge_tree("4b825dc642cb6eb9a060e54bf8d69288fbee4904\n");
        assert_eq!(tree, "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
        assert!(files.is_empty());
        let (_, files) = parse_merge_tree("abc\nsrc/a.rs\nsrc/a.rs\nb.txt\n\nAuto-merging x\n");
        assert_eq!(files, vec!["src/a.rs", "b.txt"]);
    }

    #[test]
    fn checked_out_branches_are_listed() {
        let p = "worktree /r\nHEAD 1\nbranch refs/heads/main\n\nworktree /r/t/dev-1\nHEAD 2\nbranch refs/heads/task/t/dev-1\n\nworktree /x\nHEAD 3\ndetached\n";
        assert_eq!(
            checked_out(p),
            vec![
                (PathBuf::from("/r"), "main".to_string()),
                (PathBuf::from("/r/t/dev-1"), "task/t/dev-1".to_string())
            ]
        );
    }

    #[test]
    fn commit_message_leads_with_the_summary() {
        let m = commit_message("dev", "t1", "\nAdded the pool test.\nMore.", "x.md");
        assert!(m.starts_with("dev: Added the pool test.\n\n"));
        assert!(m.contains("Handoff: x.md"));
        assert!(commit_message("dev", "t1", "", "x.md").starts_with("dev: work of task t1\n"));
    }

    #[test]
    fn outcomes_for_the_pm() {
        let mut w = AgentWorktree {
            isolation: Isolation::Worktree,
            host: Default::default(),
            repo: "/p".into(),
            path: "/p/tasks/t/worktrees/dev-1".into(),
            cwd: ".".into(),
            branch: Some("task/t/dev-1".into()),
            base: "b".into(),
            created_at: chrono::DateTime::UNIX_EPOCH,
            stage: Stage::Conflict {
                files: vec!["a.txt".into()],
                task_head: "0123456789abcdef".into(),
            },
            announced: false,
            placed: vec![],
        };
        let (bad, text) = outcome_text("dev", &w, "task/t").unwrap();
        assert!(bad && text.contains("conflicts in a.txt") && text.contains("unchanged at 0123456789ab"));
        w.stage = Stage::Working;
        assert!(outcome_text("dev", &w, "task/t").is_none());
    }

    #[test]
    fn stage_round_trips_in_json() {
        let s = Stage::Merged {
            commit: "c".into(),
            fast_forward: true,
            changed: true,
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["stage"], "merged");
        assert_eq!(serde_json::from_value::<Stage>(v).unwrap(), s);
    }
}
