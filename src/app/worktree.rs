//! Agents in their own git worktrees (docs/worktrees.md): the task branch made from the
//! commit the task started at, a worktree and branch per isolated agent at its spawn, and
//! at its terminal handoff its work committed and merged into the task branch — or, on a
//! conflict, the merge aborted and the PM told. The names and records are
//! [`crate::core::worktree`]'s, the git commands [`crate::io::git`]'s.
//!
//! The user's own checkout is never written: worktrees are added beside it, the task
//! branch is moved with compare-and-swap, merges are computed in the object store.
//! Every step is safe to run twice, so a crash anywhere is settled by running it again.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::core::checkin::signals::{Signal, SignalKind};
use crate::core::error::{Error, Result};
use crate::core::handoff::Loaded;
use crate::core::worktree::{self as wt, AgentWorktree, Isolation, IsolationAsked, Stage, TaskGit};
use crate::io::git::Git;
use crate::store::task::Task;

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

/// Where an isolated agent works: its folder and the record kept of it.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The agent's working folder (inside its worktree).
    pub cwd: PathBuf,
    /// What the state keeps.
    pub worktree: AgentWorktree,
    /// The task branch, for its preamble.
    pub task_branch: String,
    /// Files a conflict left to resolve (an agent sent back to its branch).
    pub conflict: Option<Vec<String>>,
}

impl Placement {
    /// What its context bundle says of it.
    pub fn note(&self) -> crate::core::worktree::WorktreeNote {
        crate::core::worktree::WorktreeNote {
            path: self.worktree.path.display().to_string(),
            cwd: self.cwd.display().to_string(),
            branch: self.worktree.branch.clone(),
            base: self.worktree.base.clone(),
            task_branch: self.task_branch.clone(),
            conflict: self.conflict.clone(),
        }
    }

    /// The agent's preamble block.
    pub fn preamble_block(&self) -> String {
        crate::core::preamble::worktree_block(
            &self.worktree.path.display().to_string(),
            self.worktree.branch.as_deref(),
            wt::short(&self.worktree.base),
            &self.task_branch,
            self.conflict.as_deref(),
        )
    }
}

/// Refuse what would make a worktree from the wrong place; returns the repository's top folder.
async fn check_repo(task: &Task, agent: &str, git: &Git, cwd: &Path) -> Result<PathBuf> {
    let Some(repo) = git.toplevel().await? else {
        return Err(Error::BadInput(format!(
            "agent '{agent}' of task '{}' is to work in its own git worktree, but {} is not in a git repository; run `git init` and commit there, or drop the worktree setting (task.md `worktree:`, the roster's `isolation`, `--worktree`)",
            task.name,
            cwd.display()
        )));
    };
    if let Some(op) = git.operation_in_progress().await? {
        return Err(Error::BadInput(format!(
            "{} has {op} in progress; finish or abort it before agents get worktrees (a worktree made now could start from the wrong commit)",
            repo.display()
        )));
    }
    Ok(repo)
}

/// The task branch, created from the commit the task started at if it does not exist yet,
/// and checked: a branch rewritten under us (its recorded head no longer in its history) or
/// deleted is refused. Returns its name and head.
async fn task_branch(task: &Task, repo: &Path, now: DateTime<Utc>) -> Result<(String, String)> {
    let git = Git::at(repo);
    let st = task.state()?;
    let recorded = match st.git {
        Some(g) if g.repo == repo => g,
        Some(g) => {
            return Err(Error::BadInput(format!(
                "task '{}' started in the git repository {}, not {}; its agents' worktrees belong to the first",
                task.name,
                g.repo.display(),
                repo.display()
            )));
        }
        None => {
            // A task started before its folder was a repository (or by an older build).
            let head = git.commit_of("HEAD").await?.ok_or_else(|| {
                Error::BadInput(format!(
                    "{} has no commit yet; commit once before agents get worktrees",
                    repo.display()
                ))
            })?;
            tracing::warn!(task = %task.name, commit = %head, "no start commit recorded; the task branch starts at the current HEAD");
            TaskGit {
                repo: repo.to_path_buf(),
                start_commit: head,
                branch: None,
                head: None,
            }
        }
    };
    let name = wt::task_branch(task.name.as_str());
    let current = git.commit_of(&format!("refs/heads/{name}")).await?;
    let head = match (&recorded.branch, current) {
        (None, None) => {
            git.create_branch(&name, &recorded.start_commit).await?;
            recorded.start_commit.clone()
        }
        (None, Some(other)) => {
            return Err(Error::BadInput(format!(
                "a branch {name} exists already ({}) and task '{}' did not make it; delete it (`git branch -D {name}`) or use another task name",
                wt::short(&other),
                task.name
            )));
        }
        (Some(_), None) => {
            return Err(Error::BadInput(format!(
                "the task branch {name} was deleted; restore it (`git branch {name} {}`) to go on",
                recorded.head.as_deref().unwrap_or(&recorded.start_commit)
            )));
        }
        (Some(_), Some(cur)) => {
            let ours = recorded.head.as_deref().unwrap_or(&recorded.start_commit);
            if !git.is_ancestor(ours, &cur).await? {
                return Err(rewritten(&name, ours, &cur));
            }
            cur
        }
    };
    task.update_state(now, |st| {
        let g = st.git.get_or_insert_with(|| recorded.clone());
        g.branch = Some(name.clone());
        g.head = Some(head.clone());
        Ok(())
    })?;
    Ok((name, head))
}

fn rewritten(name: &str, ours: &str, cur: &str) -> Error {
    Error::BadInput(format!(
        "the task branch {name} was rewritten: it is at {} and no longer contains {}, the last commit the supervisor put there; nothing is merged into it until it does (`git branch -f {name} {ours}` restores it)",
        wt::short(cur),
        wt::short(ours)
    ))
}

/// Give `agent` its worktree for a spawn (nothing for a shared agent). An agent whose last
/// worktree is still open (its merge conflicted, or it ended without a terminal handoff)
/// gets the same one back, with its branch and work; otherwise a new one is made from the
/// task branch's head.
pub async fn place(
    task: &Task,
    agent: &str,
    isolation: Isolation,
    cwd: &Path,
    now: DateTime<Utc>,
) -> Result<Option<Placement>> {
    if isolation == Isolation::Shared {
        return Ok(None);
    }
    let repo = check_repo(task, agent, &Git::at(cwd), cwd).await?;
    let (task_branch, head) = task_branch(task, &repo, now).await?;
    let rel = cwd.strip_prefix(&repo).unwrap_or(Path::new("")).to_path_buf();
    let site = Site {
        host: crate::core::model::AgentHost::Local,
        git: Git::at(&repo),
        repo,
        root: worktree_root(task)?,
        rel,
    };
    let mut p = place_at(task, agent, isolation, &site, &task_branch, &head, now).await?;
    if p.conflict.is_none() && p.worktree.placed.is_empty() {
        let placed = place_agent_files(cwd, &p.cwd, &site.rel, agent);
        if !placed.is_empty() {
            p.worktree.placed = placed;
            save(task, agent, &p.worktree, None, now)?;
        }
    }
    Ok(Some(p))
}

/// [`place_remote`] from the agent's remote spec: connected, its folder resolved and checked.
pub async fn place_on(
    task: &Task,
    agent: &str,
    isolation: Isolation,
    spec: &crate::core::model::RemoteSpec,
    now: DateTime<Utc>,
) -> Result<Option<Placement>> {
    if isolation == Isolation::Shared {
        return Ok(None);
    }
    let host = crate::io::remote::Host::connect(spec).await?;
    let cwd = host.cwd().await?;
    if host.output(&["test", "-d", &cwd], None).await?.0 != 0 {
        return Err(Error::BadInput(format!(
            "the remote working folder {cwd} does not exist on {}; create it there (a clone of the repository) or fix cwd: in {}",
            spec.destination(),
            task.task_md().display()
        )));
    }
    place_remote(task, agent, isolation, &host, &cwd, now).await.map(Some)
}

/// [`place`] for an agent on a remote host: its worktree is made in the host's clone (the
/// folder task.md's remote `cwd:` names), from the task branch, which lives here and is sent
/// there first over the ssh master.
async fn place_remote(
    task: &Task,
    agent: &str,
    isolation: Isolation,
    host: &crate::io::remote::Host,
    cwd: &str,
    now: DateTime<Utc>,
) -> Result<Placement> {
    let local = check_repo(task, agent, &Git::at(&task.project), &task.project).await?;
    let (task_branch, head) = task_branch(task, &local, now).await?;
    let there = Git::on(host, Path::new(cwd));
    let repo = check_repo(task, agent, &there, Path::new(cwd)).await?;
    let url = host.git_url(&repo.to_string_lossy());
    ssh_git(&local, host)
        .push(&url, &head, &task_branch)
        .await
        .map_err(|e| {
            Error::Remote(format!(
                "cannot send {task_branch} to {} ({e}); the agent's worktree there is made from it",
                host.spec.destination()
            ))
        })?;
    let root = format!("{cwd}/tasks/{}/worktrees", task.name);
    host.run("create the worktree folder", &["mkdir", "-p", "--", &root], None)
        .await?;
    host.put(&format!("{root}/.gitignore"), b"*\n").await?;
    let site = Site {
        host: crate::core::model::AgentHost::Remote(host.spec.clone()),
        git: Git::on(host, &repo),
        rel: Path::new(cwd)
            .strip_prefix(&repo)
            .unwrap_or(Path::new(""))
            .to_path_buf(),
        repo,
        root: root.into(),
    };
    place_at(task, agent, isolation, &site, &task_branch, &head, now).await
}

/// Where worktrees are made: the host, git in the repository there, and the folder for them.
struct Site {
    host: crate::core::model::AgentHost,
    git: Git,
    repo: PathBuf,
    root: PathBuf,
    /// The task's working folder, relative to the repository.
    rel: PathBuf,
}

/// git run with the ssh master of `host` (to push to it or fetch from it).
fn ssh_git(repo: &Path, host: &crate::io::remote::Host) -> Git {
    Git::at(repo).with_env(vec![("GIT_SSH_COMMAND".into(), host.git_ssh_command())])
}

async fn place_at(
    task: &Task,
    agent: &str,
    isolation: Isolation,
    site: &Site,
    task_branch: &str,
    head: &str,
    now: DateTime<Utc>,
) -> Result<Placement> {
    let st = task.state()?;
    let a = st.agents.get(agent);
    if let Some(old) = a
        .and_then(|a| a.worktree.clone())
        .filter(|w| w.isolation == isolation && w.host == site.host)
    {
        let open = matches!(
            old.stage,
            Stage::Working | Stage::Conflict { .. } | Stage::Failed { .. }
        );
        if let (true, Some(branch)) = (open, old.branch.as_deref()) {
            let conflict = match &old.stage {
                Stage::Conflict { files, .. } => Some(files.clone()),
                _ => None,
            };
            if !site.git.exists(&old.path).await? {
                site.git.add_worktree_existing(&old.path, branch).await?;
            }
            let mut w = old.clone();
            w.stage = Stage::Working;
            w.announced = false;
            w.created_at = now;
            save(task, agent, &w, None, now)?;
            return Ok(Placement {
                cwd: w.path.join(&old.cwd),
                worktree: w,
                task_branch: task_branch.to_string(),
                conflict,
            });
        }
    }
    let n = a.map_or(0, |a| a.worktrees_made) + 1;
    let path = site.root.join(wt::worktree_dir(agent, n));
    let branch = match isolation {
        Isolation::Worktree => {
            let b = wt::agent_branch(task.name.as_str(), agent, n);
            site.git.add_worktree(&path, &b, head).await?;
            Some(b)
        }
        _ => {
            site.git.add_detached(&path, head).await?;
            None
        }
    };
    let w = AgentWorktree {
        isolation,
        host: site.host.clone(),
        repo: site.repo.clone(),
        path: path.clone(),
        cwd: site.rel.clone(),
        branch,
        base: head.to_string(),
        created_at: now,
        stage: Stage::Working,
        announced: false,
        placed: Vec::new(),
    };
    save(task, agent, &w, Some(n), now)?;
    tracing::info!(task = %task.name, agent, host = %site.host, path = %path.display(), branch = ?w.branch, "worktree made");
    Ok(Placement {
        cwd: path.join(&site.rel),
        worktree: w,
        task_branch: task_branch.to_string(),
        conflict: None,
    })
}

/// `<task>/worktrees/`, ignored by the repository around it (the task folder is usually
/// inside the user's checkout, and a worktree in it is no file of the user's).
fn worktree_root(task: &Task) -> Result<PathBuf> {
    let root = task.dir().join("worktrees");
    crate::store::fsutil::create_dir_all(&root)?;
    let ignore = root.join(".gitignore");
    if !ignore.exists() {
        crate::store::fsutil::atomic_write(&ignore, b"*\n")?;
    }
    Ok(root)
}

/// The agent definitions a runtime reads from its working folder, copied from the user's
/// folder when the commit the worktree was made from lacks them (they are often written by
/// `task setup-agents` and never committed). Returned relative to the worktree's top so the
/// commit of the agent's work leaves them out.
fn place_agent_files(from: &Path, to: &Path, rel: &Path, agent: &str) -> Vec<String> {
    let mut placed = Vec::new();
    for f in [
        format!(".claude/agents/{agent}.md"),
        "AGENTS.md".into(),
        "GEMINI.md".into(),
    ] {
        let (src, dst) = (from.join(&f), to.join(&f));
        if !src.is_file() || dst.exists() {
            continue;
        }
        let copied = dst
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|_| std::fs::copy(&src, &dst).map(drop));
        match copied {
            Ok(()) => placed.push(rel.join(&f).display().to_string()),
            Err(e) => {
                tracing::warn!(file = %src.display(), error = %e, "cannot copy an agent definition into the worktree")
            }
        }
    }
    placed
}

fn save(task: &Task, agent: &str, w: &AgentWorktree, made: Option<u32>, now: DateTime<Utc>) -> Result<()> {
    task.update_state(now, |st| {
        let a = st.agents.entry(agent.to_string()).or_default();
        a.worktree = Some(w.clone());
        if let Some(n) = made {
            a.worktrees_made = n;
        }
        Ok(())
    })
}

/// Finish the worktrees whose agent has ended its turn (its terminal handoff, `ready`), and
/// those a crash left half-finished; then the outcomes the PM has not heard yet, as signals
/// for this check-in. A problem is logged and kept on the record, never fatal to the check-in.
pub async fn settle(task: &Task, ready: &(dyn Fn(&Loaded) -> bool + Sync), now: DateTime<Utc>) -> Vec<Signal> {
    let Ok(st) = task.state() else { return Vec::new() };
    if st.agents.values().all(|a| a.worktree.is_none()) {
        return Vec::new();
    }
    let names = crate::store::handoffs::list(&task.handoffs()).ok().map(|(n, _)| n);
    for (agent, a) in &st.agents {
        let Some(w) = &a.worktree else { continue };
        let handoff = match &w.stage {
            Stage::Working | Stage::Failed { .. } => {
                crate::app::lanes::terminal_since(task, names.as_deref(), agent, w.created_at, ready)
            }
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
        .map(|g| g.repo)
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
    crate::app::checkin::hooks::pause("WORKTREE_BEFORE_MERGE").await;
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
    let Some(g) = st.git else { return };
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
