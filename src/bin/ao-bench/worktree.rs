//! `ao-bench worktree [--files N] [--runs N]`: agents in their own git worktrees, in a
//! repository of N files (default 10,000). Per run, dev and test are spawned with
//! `--worktree`, each changes its own files, and each hands off: dev's branch is merged by
//! a fast-forward, test's by a merge commit. Timed: the spawn (worktree made, agent started)
//! beside a shared spawn and a raw `git worktree add`; the check-in that merges, beside a
//! check-in of a handoff with nothing to merge and the same git commands run raw.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{arg, header, row, stats, task_bin};

fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@example.invalid"])
        .args(args)
        .output()
        .expect("git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Write out what the page cache holds, so a timed step does not pay for the last one's files.
fn flush_disk() {
    let _ = Command::new("sync").status();
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// A repository of `files` files in folders of 100, committed.
fn make_repo(dir: &Path, files: usize) {
    git(dir, &["init", "-q", "-b", "main"]);
    for i in 0..files {
        let d = dir.join("src").join(format!("m{:03}", i / 100));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join(format!("f{i:05}.rs")),
            format!("// file {i}\npub fn f{i}() -> u32 {{ {i} }}\n"),
        )
        .unwrap();
    }
    git(dir, &["add", "src"]);
    git(dir, &["commit", "-q", "-m", "a repository of many files"]);
}

/// The bench's project: a task `b` on a private tmux server, driven through `task`.
struct Bench {
    tmp: tempfile::TempDir,
    sock: std::path::PathBuf,
    project: std::path::PathBuf,
}

impl Bench {
    fn task(&self, a: &[&str]) -> Command {
        let mut c = Command::new(task_bin());
        c.args(a)
            .current_dir(&self.project)
            .env("AO_TMUX_SOCKET", &self.sock)
            .env("AO_SESSION_PREFIX", "aobw")
            .env("AO_DEMO_IDLE", "1")
            .env("XDG_RUNTIME_DIR", self.tmp.path().join("run"))
            .env("XDG_STATE_HOME", self.tmp.path().join("state"))
            .env("XDG_CONFIG_HOME", self.tmp.path().join("config"))
            .env_remove("TMUX");
        c
    }

    fn ok(&self, a: &[&str]) -> String {
        let mut c = self.task(a);
        let o = c.output().expect("task");
        assert!(o.status.success(), "{c:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    fn handoff(&self, from: &str, target: Option<&str>, status: &str) -> String {
        let mut a = vec!["handoff", "b", "--from", from, "--status", status];
        if let Some(t) = target {
            a.extend(["--target", t]);
        }
        self.ok(&a)
    }

    fn spawn(&self, agent: &str, h: &str, kind: &str) {
        let flag = format!("--worktree={kind}");
        self.ok(&["spawn", "b", agent, "--handoff", h, "--runtime", "demo", &flag]);
    }

    fn state(&self) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.project.join("tasks/b/pm_state.json")).unwrap()).unwrap()
    }

    fn worktree_of(&self, agent: &str) -> std::path::PathBuf {
        self.state()["agents"][agent]["worktree"]["path"]
            .as_str()
            .expect("a worktree")
            .into()
    }
}

/// Every timed step's samples, with the floors measured beside them.
#[derive(Default)]
struct Samples {
    spawn_wt: Vec<Duration>,
    spawn_shared: Vec<Duration>,
    raw_add: Vec<Duration>,
    ff: Vec<Duration>,
    merge: Vec<Duration>,
    plain: Vec<Duration>,
    raw_merge: Vec<Duration>,
}

pub(crate) fn bench_worktree(args: &[String]) {
    let files = arg(args, "--files", 10_000);
    let runs = arg(args, "--runs", 5);
    let tmp = tempfile::Builder::new().prefix("aobw").tempdir_in("/tmp").unwrap();
    let b = Bench {
        sock: tmp.path().join("tmux.sock"),
        project: tmp.path().join("p"),
        tmp,
    };
    std::fs::create_dir_all(&b.project).unwrap();
    let t0 = Instant::now();
    make_repo(&b.project, files);
    eprintln!(
        "repository of {files} files made in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    b.ok(&["new", "b"]);
    b.ok(&["start", "b", "--runtime", "demo", "--no-daemon", "--no-cron"]);
    let mut s = Samples::default();
    for i in 0..runs {
        one_run(&b, i, &mut s);
    }
    let log = git(&b.project, &["log", "--oneline", "task/b"]);
    eprintln!("task/b holds {} commits after {runs} runs", log.lines().count());
    let _ = b.task(&["stop", "b"]).output();
    let _ = Command::new("tmux").arg("-S").arg(&b.sock).arg("kill-server").output();
    report(files, runs, s);
}

/// One run: dev and test spawned in worktrees and explore in the shared folder (a raw
/// `git worktree add` beside), each worktree agent's change merged by a check-in, and the
/// same git work done raw.
fn one_run(b: &Bench, i: usize, s: &mut Samples) {
    // 10,000 new files keep the disk busy for whatever comes next, so the disk is
    // flushed before each timed step and the raw add goes first in every other run.
    let raw = b.tmp.path().join(format!("raw-{i}"));
    let raw_branch = format!("raw/{i}");
    let raw_worktree = || {
        flush_disk();
        timed(|| {
            drop(git(
                &b.project,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &raw_branch,
                    &raw.to_string_lossy(),
                    "main",
                ],
            ))
        })
    };
    if i % 2 == 0 {
        s.raw_add.push(raw_worktree());
    }
    let hd = b.handoff("pm", Some("dev"), "IN_PROGRESS");
    flush_disk();
    s.spawn_wt.push(timed(|| b.spawn("dev", &hd, "worktree")));
    if i % 2 == 1 {
        s.raw_add.push(raw_worktree());
    }
    let ht = b.handoff("pm", Some("test"), "IN_PROGRESS");
    b.spawn("test", &ht, "worktree");
    let he = b.handoff("pm", Some("explore"), "IN_PROGRESS");
    flush_disk();
    s.spawn_shared.push(timed(|| b.spawn("explore", &he, "shared")));
    // Work: each changes one file and adds one.
    for (agent, n) in [("dev", 1), ("test", 2)] {
        let w = b.worktree_of(agent);
        std::fs::write(
            w.join(format!("src/m000/f0000{n}.rs")),
            format!("// changed by {agent} {i}\n"),
        )
        .unwrap();
        std::fs::write(w.join(format!("src/{agent}-{i}.rs")), "// new\n").unwrap();
    }
    std::fs::write(raw.join("src/m001/f00100.rs"), "// raw change\n").unwrap();
    // Check-ins: one with nothing to merge, then dev's (fast-forward), then test's (merge commit).
    b.handoff("explore", None, "COMPLETE");
    s.plain.push(timed(|| drop(b.ok(&["checkin", "b"]))));
    b.handoff("dev", None, "COMPLETE");
    s.ff.push(timed(|| drop(b.ok(&["checkin", "b"]))));
    b.handoff("test", None, "COMPLETE");
    s.merge.push(timed(|| drop(b.ok(&["checkin", "b"]))));
    s.raw_merge.push(timed(|| raw_merge(&b.project, &raw, i)));
    let st = b.state();
    for agent in ["dev", "test"] {
        assert_eq!(
            st["agents"][agent]["worktree"]["stage"], "merged",
            "{agent}: {}",
            st["agents"][agent]
        );
    }
}

/// The git work of a worktree check-in, raw: commit, merge in the object store, move the
/// branch, remove the worktree.
fn raw_merge(project: &Path, raw: &Path, i: usize) {
    git(raw, &["add", "--all"]);
    git(raw, &["commit", "-q", "-m", "raw"]);
    let head = git(project, &["rev-parse", &format!("raw/{i}")]);
    let tree = git(project, &["merge-tree", "--write-tree", "main", &head]);
    let c = git(
        project,
        &[
            "commit-tree",
            tree.lines().next().unwrap(),
            "-p",
            "main",
            "-p",
            &head,
            "-m",
            "m",
        ],
    );
    git(project, &["update-ref", &format!("refs/heads/raw/{i}-merged"), &c]);
    git(project, &["worktree", "remove", "--force", &raw.to_string_lossy()]);
}

fn report(files: usize, runs: usize, s: Samples) {
    println!("\nworktrees in a repository of {files} files ({runs} runs; floors measured in the same run)\n");
    header();
    let (raw_add, plain, raw_merge) = (stats(s.raw_add), stats(s.plain), stats(s.raw_merge));
    row("spawn --worktree", &stats(s.spawn_wt), &raw_add, "-");
    row("spawn, shared folder", &stats(s.spawn_shared), &raw_add, "-");
    row("floor: git worktree add", &raw_add, &raw_add, "-");
    row("check-in, merge by fast-forward", &stats(s.ff), &plain, "-");
    row("check-in, merge commit", &stats(s.merge), &plain, "-");
    row("check-in, nothing to merge", &plain, &plain, "-");
    row("floor: the git commands raw", &raw_merge, &plain, "-");
}
