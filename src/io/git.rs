//! Git, run as a program with argv only and `-C <folder>` (never through a local shell,
//! never in a folder other than the one named), for the agents' worktrees
//! ([`crate::app::worktree`]) — here, or on a remote host over its ssh master, where every
//! word is quoted for the remote shell.
//! Nothing here runs a command that writes the user's own index or working tree: worktrees
//! are added and removed, refs are moved with compare-and-swap, merges are computed with
//! `git merge-tree` in the object store.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::core::error::{Error, Result};

/// What a finished git command said.
#[derive(Debug, Clone)]
pub struct Output {
    /// Its exit code (-1 when killed by a signal).
    pub code: i32,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error, trimmed.
    pub stderr: String,
}

/// Git in one folder, on this machine or on a remote host.
#[derive(Clone)]
pub struct Git {
    dir: PathBuf,
    env: Vec<(String, String)>,
    via: Option<crate::io::remote::Host>,
}

impl Git {
    /// Git run in `dir` (`git -C dir …`).
    pub fn at(dir: &Path) -> Git {
        Git {
            dir: dir.to_path_buf(),
            env: Vec::new(),
            via: None,
        }
    }

    /// Git run in `dir` on `host`, over its master.
    pub fn on(host: &crate::io::remote::Host, dir: &Path) -> Git {
        Git {
            dir: dir.to_path_buf(),
            env: Vec::new(),
            via: Some(host.clone()),
        }
    }

    /// Whether `path` exists where this git runs.
    pub async fn exists(&self, path: &Path) -> Result<bool> {
        match &self.via {
            None => Ok(path.exists()),
            Some(h) => {
                let p = path.to_string_lossy();
                Ok(h.output(&["test", "-e", &p], None).await?.0 == 0)
            }
        }
    }

    /// The same, with extra environment (a commit's author and committer).
    pub fn with_env(mut self, env: Vec<(String, String)>) -> Git {
        self.env = env;
        self
    }

    /// Run `git args…`, whatever its exit code.
    pub async fn output(&self, args: &[&str]) -> Result<Output> {
        if let Some(h) = &self.via {
            let dir = self.dir.to_string_lossy();
            let vars: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let mut words = vec!["env", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C"];
            words.extend(vars.iter().map(String::as_str));
            words.extend(["git", "-C", &dir]);
            words.extend(args);
            let (code, stdout, stderr) = h.output(&words, None).await?;
            return Ok(Output {
                code,
                stdout,
                stderr: stderr.trim().to_string(),
            });
        }
        let mut c = tokio::process::Command::new("git");
        c.arg("-C").arg(&self.dir).args(args);
        // Git settings from a caller's environment (a hook, a script) would point it at
        // another repository; a prompt would hang a daemon.
        for k in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_COMMON_DIR",
            "GIT_OBJECT_DIRECTORY",
        ] {
            c.env_remove(k);
        }
        c.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let out = c.output().await.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::Environment(
                "git is not installed (or not on PATH); install it (e.g. `apt-get install git`) to give agents worktrees".into(),
            ),
            _ => Error::io("run git in", &self.dir, e),
        })?;
        Ok(Output {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }

    /// Run `git args…` and return its output; a non-zero exit is an error naming the command.
    pub async fn run(&self, args: &[&str]) -> Result<String> {
        let o = self.output(args).await?;
        if o.code != 0 {
            return Err(Error::Environment(format!(
                "`git {}` in {} failed: {}",
                args.join(" "),
                self.dir.display(),
                if o.stderr.is_empty() {
                    format!("exit {}", o.code)
                } else {
                    o.stderr
                }
            )));
        }
        Ok(o.stdout)
    }

    /// The repository's top folder, or `None` when `dir` is not in a git working tree.
    pub async fn toplevel(&self) -> Result<Option<PathBuf>> {
        let o = self.output(&["rev-parse", "--show-toplevel"]).await?;
        Ok((o.code == 0).then(|| PathBuf::from(o.stdout.trim())))
    }

    /// The commit `rev` names, or `None` when it names none.
    pub async fn commit_of(&self, rev: &str) -> Result<Option<String>> {
        let spec = format!("{rev}^{{commit}}");
        let o = self.output(&["rev-parse", "--verify", "--quiet", &spec]).await?;
        Ok((o.code == 0).then(|| o.stdout.trim().to_string()))
    }

    /// Whether `a` is an ancestor of (or equal to) `b`.
    pub async fn is_ancestor(&self, a: &str, b: &str) -> Result<bool> {
        let o = self.output(&["merge-base", "--is-ancestor", a, b]).await?;
        match o.code {
            0 => Ok(true),
            1 => Ok(false),
            _ => Err(Error::Environment(format!(
                "git cannot compare {a} and {b} in {}: {}",
                self.dir.display(),
                o.stderr
            ))),
        }
    }

    /// The operation the user has in progress in this checkout (a rebase, a merge, …), if any:
    /// a worktree made from a checkout in that state would start from the wrong commit.
    pub async fn operation_in_progress(&self) -> Result<Option<&'static str>> {
        for (marker, what) in [
            ("rebase-merge", "a rebase"),
            ("rebase-apply", "a rebase"),
            ("MERGE_HEAD", "a merge"),
            ("CHERRY_PICK_HEAD", "a cherry-pick"),
            ("REVERT_HEAD", "a revert"),
            ("BISECT_LOG", "a bisect"),
        ] {
            let p = self.run(&["rev-parse", "--git-path", marker]).await?;
            let p = PathBuf::from(p.trim());
            let p = if p.is_absolute() { p } else { self.dir.join(p) };
            if self.exists(&p).await? {
                return Ok(Some(what));
            }
        }
        Ok(None)
    }

    /// Create branch `name` at `commit`, failing if it exists (compare-and-swap on "absent").
    pub async fn create_branch(&self, name: &str, commit: &str) -> Result<()> {
        let r = format!("refs/heads/{name}");
        self.run(&["update-ref", &r, commit, ""]).await.map(drop)
    }

    /// Move branch `name` from `old` to `new`, failing if someone moved it meanwhile.
    pub async fn move_branch(&self, name: &str, new: &str, old: &str, why: &str) -> Result<()> {
        let r = format!("refs/heads/{name}");
        self.run(&["update-ref", "-m", why, &r, new, old]).await.map(drop)
    }

    /// `git worktree list --porcelain`.
    pub async fn worktree_list(&self) -> Result<String> {
        self.run(&["worktree", "list", "--porcelain"]).await
    }

    /// Add a worktree at `path` on a new branch `branch` made from `from`.
    pub async fn add_worktree(&self, path: &Path, branch: &str, from: &str) -> Result<()> {
        let p = path.to_string_lossy();
        self.run(&["worktree", "add", "--quiet", "-b", branch, &p, from])
            .await
            .map(drop)
    }

    /// Add a worktree at `path` on an existing branch.
    pub async fn add_worktree_existing(&self, path: &Path, branch: &str) -> Result<()> {
        let p = path.to_string_lossy();
        self.run(&["worktree", "add", "--quiet", &p, branch]).await.map(drop)
    }

    /// Add a detached worktree at `path` at `commit`.
    pub async fn add_detached(&self, path: &Path, commit: &str) -> Result<()> {
        let p = path.to_string_lossy();
        self.run(&["worktree", "add", "--quiet", "--detach", &p, commit])
            .await
            .map(drop)
    }

    /// Remove the worktree at `path` (its branch stays). Everything in it was committed first.
    pub async fn remove_worktree(&self, path: &Path) -> Result<()> {
        let p = path.to_string_lossy();
        self.run(&["worktree", "remove", "--force", &p]).await.map(drop)
    }

    /// Stage everything in this worktree except `keep_out` and commit it with `message`;
    /// `None` when there was nothing to commit. Hooks are not run (this is the supervisor's
    /// bookkeeping of work already done) and nothing is signed (no prompt can be answered).
    pub async fn commit_all(&self, message: &str, keep_out: &[String]) -> Result<Option<String>> {
        let mut add = vec!["add", "--all", "--", "."];
        let excludes: Vec<String> = keep_out.iter().map(|p| format!(":(exclude,literal){p}")).collect();
        add.extend(excludes.iter().map(String::as_str));
        self.run(&add).await?;
        let staged = self.output(&["diff", "--cached", "--quiet"]).await?;
        if staged.code == 0 {
            return Ok(None);
        }
        self.run(&[
            "-c",
            "commit.gpgsign=false",
            "commit",
            "--quiet",
            "--no-verify",
            "-m",
            message,
        ])
        .await?;
        self.commit_of("HEAD").await
    }

    /// Merge `theirs` into `ours` in the object store: `Ok(tree)` when clean, `Err(files)` on a
    /// conflict. Needs git 2.38 or newer.
    pub async fn merge_tree(&self, ours: &str, theirs: &str) -> Result<std::result::Result<String, Vec<String>>> {
        let o = self
            .output(&[
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--no-messages",
                ours,
                theirs,
            ])
            .await?;
        let (tree, files) = crate::core::worktree::parse_merge_tree(&o.stdout);
        match o.code {
            0 => Ok(Ok(tree)),
            1 => Ok(Err(files)),
            _ => Err(Error::Environment(format!(
                "git cannot merge {theirs} into {ours} in {}: {} (worktrees need git 2.38 or newer: `git --version`)",
                self.dir.display(),
                o.stderr
            ))),
        }
    }

    /// A commit of `tree` with `parents`, made without touching any checkout.
    pub async fn commit_tree(&self, tree: &str, parents: &[&str], message: &str) -> Result<String> {
        let mut args = vec!["-c", "commit.gpgsign=false", "commit-tree", tree];
        for p in parents {
            args.extend(["-p", p]);
        }
        args.extend(["-m", message]);
        Ok(self.run(&args).await?.trim().to_string())
    }

    /// Send `commit` to the repository at `url` as branch `branch` (a fast-forward only).
    pub async fn push(&self, url: &str, commit: &str, branch: &str) -> Result<()> {
        let refspec = format!("{commit}:refs/heads/{branch}");
        self.run(&["push", "--quiet", url, &refspec]).await.map(drop)
    }

    /// Copy branch `branch` of the repository at `url` here, replacing this copy of it.
    pub async fn fetch_branch(&self, url: &str, branch: &str) -> Result<()> {
        let refspec = format!("+refs/heads/{branch}:refs/heads/{branch}");
        self.run(&["fetch", "--quiet", "--no-tags", url, &refspec])
            .await
            .map(drop)
    }

    /// The configured `user.email` (empty when none).
    pub async fn user_email(&self) -> Result<String> {
        let o = self.output(&["config", "user.email"]).await?;
        Ok(o.stdout.trim().to_string())
    }
}
