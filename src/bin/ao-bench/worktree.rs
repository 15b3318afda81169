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

pub(crate) fn bench_worktree(args: &[String]) {
    let files = arg(args, "--files", 10_000);
    let runs = arg(args, "--runs", 5);
    let tmp = tempfile::Builder::new().prefix("aobw").tempdir_in("/tmp").unwrap();
    let sock = tmp.path().join("tmux.sock");
    let project = tmp.path().join("p");
    std::fs::create_dir_all(&project).unwrap();
    let t0 = Instant::now();
    make_repo(&project, files);
    eprintln!(
        "repository of {files} files made in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let task = |a: &[&str]| {
        let mut c = Command::new(task_bin());
        c.args(a)
            .current_dir(&project)
            .env("AO_TMUX_SOCKET", &sock)
            .env("AO_SESSION_PREFIX", "aobw")
            .env("AO_DEMO_IDLE", "1")
            .env("XDG_RUNTIME_DIR", tmp.path().join("run"))
            .env("XDG_STATE_HOME", tmp.path().join("state"))
            .env("XDG_CONFIG_HOME", tmp.path().join("config"))
            .env_remove("TMUX");
        c
    };
    let ok = |mut c: Command| {
        let o = c.output().expect("task");
        assert!(o.status.success(), "{c:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    ok(task(&["new", "b"]));
    ok(task(&["start", "b", "--runtime", "demo", "--no-daemon", "--no-cron"]));
    let handoff = |from: &str, target: Option<&str>, status: &str| {
        let mut a = vec!["handoff", "b", "--from", from, "--status", status];
        if let Some(t) = target {
            a.extend(["--target", t]);
        }
        ok(task(&a))
    };
    let spawn = |agent: &str, h: &str, kind: &str| {
        let flag = format!("--worktree={kind}");
        ok(task(&["spawn", "b", agent, "--handoff", h, "--runtime", "demo", &flag]));
    };
    let wt_of = |agent: &str| -> std::path::PathBuf {
        let st: serde_json::Value =
            serde_json::from_slice(&std::fs::read(project.join("tasks/b/pm_state.json")).unwrap()).unwrap();
        st["agents"][agent]["worktree"]["path"]
            .as_str()
            .expect("a worktree")
            .into()
    };
    let (mut spawn_wt, mut spawn_shared, mut raw_add) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ff, mut merge, mut plain, mut raw_merge) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        // Spawns: dev and test in worktrees, explore shared; raw `git worktree add` beside.
        // 10,000 new files keep the disk busy for whatever comes next, so the disk is
        // flushed before each timed step and the raw add goes first in every other run.
        let raw = tmp.path().join(format!("raw-{i}"));
        let raw_branch = format!("raw/{i}");
        let raw_worktree = || {
            flush_disk();
            timed(|| {
                drop(git(
                    &project,
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
            raw_add.push(raw_worktree());
        }
        let hd = handoff("pm", Some("dev"), "IN_PROGRESS");
        flush_disk();
        spawn_wt.push(timed(|| spawn("dev", &hd, "worktree")));
        if i % 2 == 1 {
            raw_add.push(raw_worktree());
        }
        let ht = handoff("pm", Some("test"), "IN_PROGRESS");
        spawn("test", &ht, "worktree");
        let he = handoff("pm", Some("explore"), "IN_PROGRESS");
        flush_disk();
        spawn_shared.push(timed(|| spawn("explore", &he, "shared")));
        // Work: each changes one file and adds one.
        for (agent, n) in [("dev", 1), ("test", 2)] {
            let w = wt_of(agent);
            std::fs::write(
                w.join(format!("src/m000/f0000{n}.rs")),
                format!("// changed by {agent} {i}\n"),
            )
            .unwrap();
            std::fs::write(w.join(format!("src/{agent}-{i}.rs")), "// new\n").unwrap();
        }
        std::fs::write(raw.join("src/m001/f00100.rs"), "// raw change\n").unwrap();
        // Check-ins: one with nothing to merge, then dev's (fast-forward), then test's (merge commit).
        handoff("explore", None, "COMPLETE");
        plain.push(timed(|| drop(ok(task(&["checkin", "b"])))));
        handoff("dev", None, "COMPLETE");
        ff.push(timed(|| drop(ok(task(&["checkin", "b"])))));
        handoff("test", None, "COMPLETE");
        merge.push(timed(|| drop(ok(task(&["checkin", "b"])))));
        // The same git work, raw: commit, merge in the object store, move the branch, remove.
        raw_merge.push(timed(|| {
            git(&raw, &["add", "--all"]);
            git(&raw, &["commit", "-q", "-m", "raw"]);
            let head = git(&project, &["rev-parse", &format!("raw/{i}")]);
            let tree = git(&project, &["merge-tree", "--write-tree", "main", &head]);
            let c = git(
                &project,
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
            git(&project, &["update-ref", &format!("refs/heads/raw/{i}-merged"), &c]);
            git(&project, &["worktree", "remove", "--force", &raw.to_string_lossy()]);
        }));
        let st: serde_json::Value =
            serde_json::from_slice(&std::fs::read(project.join("tasks/b/pm_state.json")).unwrap()).unwrap();
        for agent in ["dev", "test"] {
            assert_eq!(
                st["agents"][agent]["worktree"]["stage"], "merged",
                "{agent}: {}",
                st["agents"][agent]
            );
        }
    }
    let log = git(&project, &["log", "--oneline", "task/b"]);
    eprintln!("task/b holds {} commits after {runs} runs", log.lines().count());
    let _ = task(&["stop", "b"]).output();
    let _ = Command::new("tmux").arg("-S").arg(&sock).arg("kill-server").output();

    println!("\nworktrees in a repository of {files} files ({runs} runs; floors measured in the same run)\n");
    header();
    let (raw_add, plain, raw_merge) = (stats(raw_add), stats(plain), stats(raw_merge));
    row("spawn --worktree", &stats(spawn_wt), &raw_add, "-");
    row("spawn, shared folder", &stats(spawn_shared), &raw_add, "-");
    row("floor: git worktree add", &raw_add, &raw_add, "-");
    row("check-in, merge by fast-forward", &stats(ff), &plain, "-");
    row("check-in, merge commit", &stats(merge), &plain, "-");
    row("check-in, nothing to merge", &plain, &plain, "-");
    row("floor: the git commands raw", &raw_merge, &plain, "-");
}
