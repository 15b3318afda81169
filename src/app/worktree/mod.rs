//! Agents in their own git worktrees (docs/worktrees.md): the task branch made from the
//! commit the task started at, a worktree and branch per isolated agent at its spawn, and
//! at its terminal handoff its work committed and merged into the task branch — or, on a
//! conflict, the merge aborted and the PM told. The names and records are
//! [`crate::core::worktree`]'s, the git commands [`crate::io::git`]'s.
//!
//! The user's own checkout is never written: worktrees are added beside it, the task
//! branch is moved with compare-and-swap, merges are computed in the object store.
//! Every step is safe to run twice, so a crash anywhere is settled by running it again.

use std::path::Path;

use chrono::{DateTime, Utc};

use crate::core::error::{Error, Result};
use crate::core::worktree::{self as wt, Isolation, IsolationAsked, TaskGit};
use crate::io::git::Git;
use crate::store::task::Task;

mod finish;
mod place;

pub use finish::{drop_merged_branches, settle};
pub use place::{Placement, place, place_on};

/// The isolation `agent` gets at a spawn (see [`wt::choose`]); a bad setting names itself.
pub fn isolation_for(task: &Task, agent: &str, flag: Option<Isolation>) -> Result<Isolation> {
    let spec = task.spec()?;
    let roster = crate::store::roster::for_task(task)?;
    let member = roster.member(agent);
    let agent_key = format!("worktree-{agent}");
    wt::choose(IsolationAsked {
        flag,
        agent_setting: spec.setting(&agent_key),
        roster: member.and_then(|m| m.isolation),
        task_setting: spec.setting("worktree"),
        read_only: member.is_some_and(|m| m.read_only),
    })
    .map_err(|e| Error::BadInput(format!("{}: {e}", task.task_md().display())))
}

/// Remember the commit the task starts at, when its working folder is in a git repository:
/// the task branch is made from it later, whatever the checkout has moved to by then.
/// Kept once recorded (a restart does not move it); outside a repository nothing is kept.
pub async fn record_start(task: &Task, cwd: &Path, now: DateTime<Utc>) -> Result<()> {
    if task.state()?.git.is_some() {
        return Ok(());
    }
    let git = Git::at(cwd);
    let Ok(Some(repo)) = git.toplevel().await else {
        return Ok(());
    };
    let Some(commit) = git.commit_of("HEAD").await? else {
        return Ok(()); // a repository without a commit yet
    };
    task.update_state(now, |st| {
        st.git.get_or_insert(TaskGit {
            repo,
            start_commit: commit,
            branch: None,
            head: None,
        });
        Ok(())
    })
}

fn rewritten(name: &str, ours: &str, cur: &str) -> Error {
    Error::BadInput(format!(
        "the task branch {name} was rewritten: it is at {} and no longer contains {}, the last commit the supervisor put there; nothing is merged into it until it does (`git branch -f {name} {ours}` restores it)",
        wt::short(cur),
        wt::short(ours)
    ))
}

/// git run with the ssh master of `host` (to push to it or fetch from it).
fn ssh_git(repo: &Path, host: &crate::io::remote::Host) -> Git {
    Git::at(repo).with_env(vec![("GIT_SSH_COMMAND".into(), host.git_ssh_command())])
}
