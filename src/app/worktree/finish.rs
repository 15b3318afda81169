//! Finishing an agent's worktree at its terminal handoff: commit, merge into the task
//! branch (or record the conflict), remove; and the outcomes the PM has not heard yet.

use std::path::Path;

use chrono::{DateTime, Utc};

use super::{rewritten, ssh_git};
use crate::core::checkin::signals::{Signal, SignalKind};
use crate::core::error::{Error, Result};
use crate::core::worktree::{self as wt, AgentWorktree, Stage};
use crate::io::git::Git;
use crate::store::handoffs::Ready;
use crate::store::task::Task;

/// Finish the worktrees whose agent has ended its turn (its terminal handoff, `ready`), and
/// those a crash left half-finished; then the outcomes the PM has not heard yet, as signals
/// for this check-in. A problem is logged and kept on the record, never fatal to the check-in.
pub async fn settle(task: &Task, ready: Ready<'_>, now: DateTime<Utc>) -> Vec<Signal> {
    let Ok(st) = task.state() else { return Vec::new() };
    if st.agents.values().all(|a| a.worktree.is_none()) {
        return Vec::new();
    }
    let listing = crate::store::handoffs::listing(&task.handoffs()).ok();
    for (agent, a) in &st.agents {
        let Some(w) = &a.worktree else { continue };
        let handoff = match &w.stage {
            Stage::Working | Stage::Failed { .. } => crate::app::lanes::terminal_since(
                task,
                listing.as_ref().map(|l| l.names.as_slice()),
                agent,
                w.created_at,
                ready,
            ),
            Stage::Finishing { .. } => None,
            Stage::Merged { .. } | Stage::Closed => {
                // A removal a crash interrupted (looked for here only: a remote one is not
                // worth a connection every check-in).
                if w.host.is_local() && w.path.exists() {
                    remove(w).await;
                }
                continue;
            }
            Stage::Conflict { .. } => continue,
        };
        let file = match (&w.stage, handoff) {
            (Stage::Finishing { handoff }, _) => handoff.clone(),
            (_, Some(l)) => l.file.clone(),
            (_, None) => continue,
        };
        if let Err(e) = finish(task, agent, &file, now).await {
            tracing::warn!(task = %task.name, agent, error = %e, "an agent's worktree could not be finished");
            let _ = update(task, agent, now, |w| {
                w.stage = Stage::Failed { error: e.to_string() };
                w.announced = false;
            });
        }
    }
    signals(task)
}

/// The outcomes not yet told, as signals (marked told when the check-in is recorded).
fn signals(task: &Task) -> Vec<Signal> {
    let Ok(st) = task.state() else { return Vec::new() };
    let task_branch = wt::task_branch(task.name.as_str());
    st.agents
        .iter()
        .filter_map(|(agent, a)| {
            let w = a.worktree.as_ref().filter(|w| !w.announced)?;
            let (bad, text) = wt::outcome_text(agent, w, &task_branch)?;
            Some(Signal {
                kind: if bad {
                    SignalKind::MergeConflict
                } else {
                    SignalKind::Merged
                },
                agent: agent.clone(),
                file: None,
                text,
            })
        })
        .collect()
}

fn update(
    task: &Task,
    agent: &str,
    now: DateTime<Utc>,
    f: impl FnOnce(&mut AgentWorktree),
) -> Result<Option<AgentWorktree>> {
    task.update_state(now, |st| {
        Ok(st.agents.get_mut(agent).and_then(|a| a.worktree.as_mut()).map(|w| {
            f(w);
            w.clone()
        }))
    })
}

/// Commit what the agent left, merge its branch, record the outcome, remove a merged
/// worktree. Each step can be run again after a crash with the same result.
async fn finish(task: &Task, agent: &str, handoff_file: &str, now: DateTime<Utc>) -> Result<()> {
    let Some(w) = update(task, agent, now, |w| {
        w.stage = Stage::Finishing {
            handoff: handoff_file.to_string(),
        }
    })?
    else {
        return Ok(());
    };
    let here = git_for(&w, &w.path).await?;
    let there = here.exists(&w.path).await?;
    let Some(branch) = w.branch.clone() else {
        // Detached (read only): nothing to merge; kept when something was changed there.
        let dirty = match there {
            true => !here.run(&["status", "--porcelain"]).await?.trim().is_empty(),
            false => false,
        };
        if dirty {
            tracing::warn!(task = %task.name, agent, path = %w.path.display(), "a read-only worktree has changes; it is kept");
        } else if there {
            remove(&w).await;
        }
        update(task, agent, now, |w| {
            w.stage = Stage::Closed;
            w.announced = true;
        })?;
        return Ok(());
    };
    let local_repo = task
        .state()?
        .git
        .as_ref()
        .map(|g| g.repo.clone())
        .ok_or_else(|| Error::BadInput(format!("task '{}' has no git repository recorded", task.name)))?;
    if there {
        let summary = crate::core::handoff::HandoffName::parse(handoff_file)
            .and_then(|n| crate::store::handoffs::load(&task.handoffs(), &n).ok()?.ok())
            .map(|l| l.handoff.summary())
            .unwrap_or_default();
        let msg = wt::commit_message(agent, task.name.as_str(), &summary, handoff_file);
        let git = here.clone().with_env(identity(agent, task, &local_repo).await);
        if let Some(c) = git.commit_all(&msg, &w.placed).await? {
            tracing::info!(task = %task.name, agent, commit = %c, "committed the agent's remaining work");
        }
    }
    // A remote agent's branch comes here, where the task branch lives.
    if let Some(spec) = w.host.remote() {
        let host = crate::io::remote::Host::connect(spec).await?;
        ssh_git(&local_repo, &host)
            .fetch_branch(&host.git_url(&w.repo.to_string_lossy()), &branch)
            .await?;
    }
    crate::io::hooks::pause(crate::io::hooks::Point::WorktreeBeforeMerge).await;
    let stage = merge(task, &branch, &w).await?;
    let merged = matches!(stage, Stage::Merged { .. });
    if let Stage::Merged { commit, .. } = &stage {
        task.update_state(now, |st| {
            if let Some(g) = st.git.as_mut() {
                g.head = Some(commit.clone());
            }
            Ok(())
        })?;
    }
    let w = update(task, agent, now, |w| {
        w.stage = stage;
        w.announced = false;
    })?;
    if let (true, Some(w)) = (merged, w) {
        remove(&w).await;
    }
    Ok(())
}

/// Merge the agent's branch into the task branch: fast-forward when the task branch has not
/// moved, else a merge commit made in the object store; a conflict leaves it untouched.
async fn merge(task: &Task, branch: &str, w: &AgentWorktree) -> Result<Stage> {
    let st = task.state()?;
    let g = st
        .git
        .clone()
        .ok_or_else(|| Error::BadInput(format!("task '{}' has no task branch recorded", task.name)))?;
    let git = Git::at(&g.repo);
    let name = g.branch.clone().unwrap_or_else(|| wt::task_branch(task.name.as_str()));
    let task_head = git
        .commit_of(&format!("refs/heads/{name}"))
        .await?
        .ok_or_else(|| Error::BadInput(format!("the task branch {name} was deleted")))?;
    let ours = g.head.as_deref().unwrap_or(&g.start_commit);
    if !git.is_ancestor(ours, &task_head).await? {
        return Err(rewritten(&name, ours, &task_head));
    }
    let agent_head = git
        .commit_of(&format!("refs/heads/{branch}"))
        .await?
        .ok_or_else(|| Error::BadInput(format!("the agent's branch {branch} was deleted")))?;
    let changed = agent_head != w.base;
    if git.is_ancestor(&agent_head, &task_head).await? {
        // Nothing new, or merged already (a crash after the merge, before its record).
        return Ok(Stage::Merged {
            commit: task_head,
            fast_forward: false,
            changed,
        });
    }
    if let Some((path, _)) = wt::checked_out(&git.worktree_list().await?)
        .into_iter()
        .find(|(_, b)| *b == name)
    {
        return Err(Error::BadInput(format!(
            "the task branch {name} is checked out in {}; moving it would change that checkout under its owner: switch it to another branch to let the merge go on",
            path.display()
        )));
    }
    let why = format!("agent-orchestrator: merge {branch}");
    if git.is_ancestor(&task_head, &agent_head).await? {
        git.move_branch(&name, &agent_head, &task_head, &why).await?;
        return Ok(Stage::Merged {
            commit: agent_head,
            fast_forward: true,
            changed: true,
        });
    }
    match git.merge_tree(&task_head, &agent_head).await? {
        Ok(tree) => {
            let commit = git
                .with_env(identity("agent-orchestrator", task, &g.repo).await)
                .commit_tree(&tree, &[&task_head, &agent_head], &wt::merge_message(branch, &name))
                .await?;
            Git::at(&g.repo).move_branch(&name, &commit, &task_head, &why).await?;
            Ok(Stage::Merged {
                commit,
                fast_forward: false,
                changed: true,
            })
        }
        Err(files) => Ok(Stage::Conflict { files, task_head }),
    }
}

/// The author of a commit made for `agent` is the agent; the committer is the user's git
/// identity, or the supervisor's when the repository has none (a commit must not fail for it).
async fn identity(agent: &str, task: &Task, dir: &Path) -> Vec<(String, String)> {
    let email = format!("{agent}@agent-orchestrator.invalid");
    let mut env = vec![
        ("GIT_AUTHOR_NAME".to_string(), format!("{agent} (task {})", task.name)),
        ("GIT_AUTHOR_EMAIL".to_string(), email.clone()),
    ];
    if Git::at(dir).user_email().await.map_or(true, |e| e.is_empty()) {
        env.push(("GIT_COMMITTER_NAME".into(), "agent-orchestrator".into()));
        env.push((
            "GIT_COMMITTER_EMAIL".into(),
            "supervisor@agent-orchestrator.invalid".into(),
        ));
    }
    env
}

/// git where `w` is (here, or on its host over the master), run in `dir` there.
async fn git_for(w: &AgentWorktree, dir: &Path) -> Result<Git> {
    match w.host.remote() {
        None => Ok(Git::at(dir)),
        Some(spec) => Ok(Git::on(&crate::io::remote::Host::connect(spec).await?, dir)),
    }
}

async fn remove(w: &AgentWorktree) {
    let removed = async { git_for(w, &w.repo).await?.remove_worktree(&w.path).await }.await;
    if let Err(e) = removed {
        tracing::warn!(path = %w.path.display(), host = %w.host, error = %e, "cannot remove a finished worktree");
    }
}

/// Once the task is complete, the agents' branches go when the task branch holds all their
/// commits; a branch with anything the task branch lacks (a conflict never resolved) is kept.
pub async fn drop_merged_branches(task: &Task) {
    let Ok(st) = task.state() else { return };
    let Some(g) = st.git.clone() else { return };
    let Some(head) = g.head else { return };
    let git = Git::at(&g.repo);
    let prefix = format!("refs/heads/agents/{}/", task.name);
    let Ok(list) = git
        .run(&["for-each-ref", "--format=%(objectname) %(refname)", &prefix])
        .await
    else {
        return;
    };
    for line in list.lines() {
        let Some((commit, r)) = line.split_once(' ') else {
            continue;
        };
        if git.is_ancestor(commit, &head).await.unwrap_or(false) {
            if let Err(e) = git.run(&["update-ref", "-d", r, commit]).await {
                tracing::warn!(branch = %r, error = %e, "cannot delete a merged agent branch");
            }
        }
    }
}
