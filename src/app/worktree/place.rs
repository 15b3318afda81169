//! Placing an isolated agent: the checks that keep a worktree from starting at the wrong
//! commit, the task branch, and the agent's worktree here or in a remote host's clone.

use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use super::{rewritten, ssh_git};
use crate::core::error::{Error, Result};
use crate::core::worktree::{self as wt, AgentWorktree, Isolation, Stage, TaskGit};
use crate::io::git::Git;
use crate::store::task::Task;

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
    let recorded = match st.git.clone() {
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
