//! Agents in their own git worktrees (issue 17): a real git repository, the real daemon,
//! real tmux, idle demo agents whose work the test writes into their worktrees as a coding
//! agent would. The user's own checkout is compared byte for byte before and after.

mod common;

use std::path::{Path, PathBuf};

use common::git::{git, git_ok, init_repo};
use common::*;
use serde_json::Value;

/// The project as a git repository with one commit (src/a.txt), on branch `main`.
fn repo(w: &World) -> String {
    std::fs::write(w.project.join("notes.txt"), "the user's own uncommitted file\n").unwrap();
    init_repo(&w.project, "line one\nline two\n")
}

/// HEAD, its branch, the index's bytes, the user's files.
type Checkout = (String, String, Vec<u8>, Vec<(String, Vec<u8>)>);

/// Everything of the user's checkout a supervisor must not change: HEAD, its branch, the
/// index's bytes, and the user's files (committed and not).
fn checkout(w: &World) -> Checkout {
    let mut files: Vec<(String, Vec<u8>)> = snapshot(&w.project.join("src")).into_iter().collect();
    files.push(("notes.txt".into(), std::fs::read(w.project.join("notes.txt")).unwrap()));
    (
        git(&w.project, &["rev-parse", "HEAD"]),
        git(&w.project, &["symbolic-ref", "HEAD"]),
        std::fs::read(w.project.join(".git/index")).unwrap(),
        files,
    )
}

fn worktree(w: &World, agent: &str) -> Value {
    w.state("t1")["agents"][agent]["worktree"].clone()
}

fn wt_path(w: &World, agent: &str) -> PathBuf {
    PathBuf::from(worktree(w, agent)["path"].as_str().expect("a worktree path"))
}

fn stage_of(w: &World, agent: &str) -> String {
    worktree(w, agent)["stage"].as_str().unwrap_or("").to_string()
}

fn wait_stage(w: &World, agent: &str, stage: &str) -> Value {
    wait_for(&format!("{agent}'s worktree to be {stage}"), 30, || {
        (stage_of(w, agent) == stage).then(|| worktree(w, agent))
    })
}

/// The PM hands `agent` its work and it is spawned (an idle demo agent) in its worktree.
fn spawn(w: &World, agent: &str) -> PathBuf {
    let h = w.handoff("t1", "pm", "IN_PROGRESS").target(agent).write();
    w.spawn_idle_demo("t1", agent, &h);
    wt_path(w, agent)
}

/// `task spawn t1 <agent>` of an idle demo agent with the PM's new handoff and `extra`
/// arguments, whatever its exit.
fn try_spawn(w: &World, agent: &str, extra: &[&str]) -> std::process::Output {
    let h = w.handoff("t1", "pm", "IN_PROGRESS").target(agent).write();
    let mut args = vec!["spawn", "t1", agent, "--handoff", &h, "--runtime", "demo"];
    args.extend(extra);
    run(w.task().env("AO_DEMO_IDLE", "1").args(&args))
}

fn pm_heard(w: &World, needle: &str) -> usize {
    w.inbox("t1", "pm").iter().filter(|m| m.contains(needle)).count()
}

#[test]
fn two_agents_work_in_parallel_worktrees_and_both_are_merged() {
    let w = World::new();
    let start = repo(&w);
    let before = checkout(&w);
    w.start_idle_pm("t1").new_task("worktree: true").run();
    assert_eq!(w.state("t1")["git"]["start_commit"], start.as_str());

    let dev = spawn(&w, "dev");
    let test = spawn(&w, "test");
    assert_ne!(dev, test);
    assert_eq!(worktree(&w, "dev")["branch"], "agents/t1/dev-1");
    assert_eq!(worktree(&w, "test")["branch"], "agents/t1/test-1");
    assert_eq!(worktree(&w, "dev")["base"], start.as_str());
    // Each agent's pane works in its own worktree.
    let cwd = |agent: &str| {
        String::from_utf8_lossy(
            &w.tmux(&[
                "display-message",
                "-p",
                "-t",
                &w.pane("t1", agent),
                "#{pane_current_path}",
            ])
            .stdout,
        )
        .trim()
        .to_string()
    };
    assert_eq!(Path::new(&cwd("dev")), dev);
    assert_eq!(Path::new(&cwd("test")), test);
    // Its context bundle points there too.
    let bundle: Value = serde_json::from_slice(
        &std::fs::read(w.project.join("tasks/t1/active_agents/dev/context/context-bundle.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(bundle["worktree"]["path"], dev.to_str().unwrap());
    assert_eq!(bundle["worktree"]["branch"], "agents/t1/dev-1");
    assert_eq!(bundle["worktree"]["task_branch"], "task/t1");
    let status = ok(&run(w.task().args(["status", "t1"])));
    assert!(
        status.contains("Worktrees:") && status.contains("agents/t1/dev-1") && status.contains("task/t1"),
        "{status}"
    );

    // dev commits one change itself and leaves another; test leaves its work uncommitted.
    std::fs::write(dev.join("src/dev.txt"), "dev's code\n").unwrap();
    git(&dev, &["add", "src/dev.txt"]);
    git(&dev, &["commit", "-q", "-m", "dev: its own commit"]);
    std::fs::write(dev.join("src/dev2.txt"), "dev's second file\n").unwrap();
    std::fs::create_dir_all(test.join("tests")).unwrap();
    std::fs::write(test.join("tests/t.txt"), "test's test\n").unwrap();
    assert!(!test.join("src/dev.txt").exists(), "test does not see dev's files");

    w.handoff("t1", "dev", "COMPLETE")
        .body("## Completed Work\nAdded dev.txt and dev2.txt.\n")
        .write();
    w.handoff("t1", "test", "COMPLETE")
        .body("## Completed Work\nAdded the test.\n")
        .write();
    let d = wait_stage(&w, "dev", "merged");
    let t = wait_stage(&w, "test", "merged");
    wait_for("merged worktrees removed", 20, || {
        (!dev.exists() && !test.exists()).then_some(())
    });

    let head = git(&w.project, &["rev-parse", "task/t1"]);
    assert_eq!(w.state("t1")["git"]["head"], head.as_str());
    assert!(head == d["commit"].as_str().unwrap() || head == t["commit"].as_str().unwrap());
    for f in ["src/dev.txt", "src/dev2.txt", "tests/t.txt", "src/a.txt"] {
        git(&w.project, &["cat-file", "-e", &format!("task/t1:{f}")]);
    }
    let log = git(&w.project, &["log", "--format=%s", "task/t1"]);
    assert!(log.contains("dev: its own commit"), "{log}");
    assert!(log.contains("dev: Added dev.txt and dev2.txt."), "{log}");
    assert!(log.contains("test: Added the test."), "{log}");
    // Each agent's work is in the task branch once.
    assert_eq!(log.matches("dev: its own commit").count(), 1, "{log}");
    wait_for("the PM told of both merges", 20, || {
        (pm_heard(&w, "merged: dev") == 1 && pm_heard(&w, "merged: test") == 1).then_some(())
    });

    // A review works read-only at the merged commit.
    let review = spawn(&w, "review");
    let r = worktree(&w, "review");
    assert_eq!(r["isolation"], "detached");
    assert_eq!(r["base"], head.as_str());
    assert_eq!(git(&review, &["rev-parse", "HEAD"]), head);
    assert!(!git_ok(&review, &["symbolic-ref", "-q", "HEAD"]), "detached");
    assert!(review.join("src/dev.txt").is_file() && review.join("tests/t.txt").is_file());
    w.handoff("t1", "review", "COMPLETE").write();
    wait_stage(&w, "review", "closed");
    wait_for("the review's worktree removed", 20, || (!review.exists()).then_some(()));

    assert_eq!(checkout(&w), before, "the user's checkout is untouched");
    assert_eq!(git(&w.project, &["rev-parse", "main"]), start);
    // `task stop` keeps the task branch.
    ok(&run(w.task().args(["stop", "t1"])));
    assert_eq!(git(&w.project, &["rev-parse", "task/t1"]), head);
}

#[test]
fn a_conflict_is_reported_the_task_branch_is_untouched_and_the_agent_resolves_it() {
    let w = World::new();
    repo(&w);
    let before = checkout(&w);
    w.start_idle_pm("t1").new_task("worktree: true").run();
    let dev = spawn(&w, "dev");
    let test = spawn(&w, "test");
    std::fs::write(dev.join("src/a.txt"), "line one by dev\nline two\n").unwrap();
    std::fs::write(test.join("src/a.txt"), "line one by test\nline two\n").unwrap();

    w.handoff("t1", "dev", "COMPLETE").write();
    let d = wait_stage(&w, "dev", "merged");
    let after_dev = git(&w.project, &["rev-parse", "task/t1"]);
    assert_eq!(d["commit"], after_dev.as_str());

    w.handoff("t1", "test", "COMPLETE").write();
    let c = wait_stage(&w, "test", "conflict");
    assert_eq!(c["files"], serde_json::json!(["src/a.txt"]));
    assert_eq!(c["task_head"], after_dev.as_str());
    assert_eq!(
        git(&w.project, &["rev-parse", "task/t1"]),
        after_dev,
        "task branch unchanged"
    );
    assert!(test.is_dir(), "the conflicted worktree is kept");
    wait_for("the PM told of the conflict", 20, || {
        w.inbox("t1", "pm")
            .iter()
            .find(|m| m.contains("merge conflict: test") && m.contains("src/a.txt"))
            .cloned()
    });
    let status = ok(&run(w.task().args(["status", "t1", "--json"])));
    assert!(status.contains("\"stage\": \"conflict\""), "{status}");

    // Sent back: the same worktree and branch, and its preamble names what to resolve.
    let again = spawn(&w, "test");
    assert_eq!(again, test);
    assert_eq!(worktree(&w, "test")["branch"], "agents/t1/test-1");
    let preamble = std::fs::read_dir(w.project.join("tasks/t1/scratchpad/test"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            p.file_name()?.to_str()?.starts_with("preamble-").then_some(p)
        })
        .map(|p| std::fs::read_to_string(p).unwrap())
        .find(|t| t.contains("conflicted with task/t1"))
        .expect("a preamble naming the conflict");
    assert!(
        preamble.contains("src/a.txt") && preamble.contains("git merge task/t1"),
        "{preamble}"
    );
    // The agent resolves it as told.
    assert!(!git_ok(
        &test,
        &["-c", "user.name=t", "-c", "user.email=t@x", "merge", "-q", "task/t1"]
    ));
    std::fs::write(test.join("src/a.txt"), "line one by dev and test\nline two\n").unwrap();
    git(&test, &["commit", "-q", "-am", "test: resolve"]);
    w.handoff("t1", "test", "COMPLETE").write();
    let m = wait_stage(&w, "test", "merged");
    assert_eq!(m["fast_forward"], true);
    assert_eq!(
        git(&w.project, &["show", "task/t1:src/a.txt"]),
        "line one by dev and test\nline two"
    );
    assert_eq!(checkout(&w), before, "the user's checkout is untouched");
}

#[test]
fn a_kill_between_commit_and_merge_loses_nothing_and_merges_once() {
    let w = World::new();
    let start = repo(&w);
    let gate = w.dir.path().join("before-merge");
    w.start_idle_pm("t1")
        .new_task("worktree: true")
        .env("AO_TEST_PAUSE_WORKTREE_BEFORE_MERGE", gate.to_str().unwrap())
        .run();
    let dev = spawn(&w, "dev");
    std::fs::write(dev.join("src/dev.txt"), "dev's code\n").unwrap();
    w.handoff("t1", "dev", "COMPLETE")
        .body("## Completed Work\nAdded dev.txt.\n")
        .write();
    wait_for("the daemon between commit and merge", 20, || {
        Path::new(&format!("{}.reached", gate.display())).exists().then_some(())
    });
    // Committed on the agent's branch, not merged yet.
    let branch_log = git(&w.project, &["log", "--format=%s", "agents/t1/dev-1"]);
    assert!(branch_log.contains("dev: Added dev.txt."), "{branch_log}");
    assert_eq!(git(&w.project, &["rev-parse", "task/t1"]), start);
    assert_eq!(stage_of(&w, "dev"), "finishing");
    w.kill_daemon(None);

    let mut d = w.start_daemon(None);
    wait_stage(&w, "dev", "merged");
    let log = git(&w.project, &["log", "--format=%s", "task/t1"]);
    assert_eq!(log.matches("dev: Added dev.txt.").count(), 1, "{log}");
    assert_eq!(git(&w.project, &["rev-list", "--count", "task/t1"]), "2", "{log}");
    wait_for("the PM told of the merge", 20, || {
        (pm_heard(&w, "merged: dev") == 1).then_some(())
    });
    assert!(!dev.exists());
    let _ = run(w.task().args(["shutdown"]));
    let _ = d.wait();
}

#[test]
fn worktrees_are_refused_where_they_would_start_from_the_wrong_place() {
    // Not a git repository: refused, and the lane is not left held.
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let o = try_spawn(&w, "dev", &["--worktree"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is not in a git repository"), "{}", stderr(&o));
    assert!(try_spawn(&w, "dev", &[]).status.success(), "the lane was given back");
    assert!(w.state("t1")["agents"]["dev"]["worktree"].is_null());

    // A rebase in progress in the user's checkout.
    let w = World::new();
    repo(&w);
    w.start_idle_pm("t1").new_task("worktree: true").run();
    std::fs::create_dir_all(w.project.join(".git/rebase-merge")).unwrap();
    let o = try_spawn(&w, "dev", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("a rebase in progress"), "{}", stderr(&o));
    std::fs::remove_dir(w.project.join(".git/rebase-merge")).unwrap();

    // A task branch rewritten under the supervisor: nothing more is branched from it.
    let dev = spawn(&w, "dev");
    std::fs::write(dev.join("src/dev.txt"), "x\n").unwrap();
    w.handoff("t1", "dev", "COMPLETE").write();
    wait_stage(&w, "dev", "merged");
    let start = w.state("t1")["git"]["start_commit"].as_str().unwrap().to_string();
    git(&w.project, &["update-ref", "refs/heads/task/t1", &start]);
    let o = try_spawn(&w, "dev", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("was rewritten"), "{}", stderr(&o));
}

#[test]
fn the_demo_runs_dev_and_test_at_once_and_merges_both() {
    let w = World::new();
    repo(&w);
    // As scripts/demo sets it up: task.md and the artifacts, no handoffs.
    let dir = copy_example(&w.project, "dds-writer-pool");
    std::fs::remove_dir_all(dir.join("handoffs")).unwrap();
    let md = dir.join("task.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, format!("{text}worktree: true\n")).unwrap();
    ok(&run(w.task().env("AO_DEMO_PAUSE_MS", "800").args([
        "start",
        "dds-writer-pool",
        "--runtime",
        "demo",
    ])));
    wait_for("the demo task COMPLETE", 120, || {
        let st: Value = serde_json::from_slice(&std::fs::read(dir.join("pm_state.json")).ok()?).ok()?;
        (st["phase"] == "COMPLETE").then_some(())
    });
    // dev and test were at work at the same time: test started before dev handed off.
    let events = w.events("dds-writer-pool");
    let at = |kind: &str, agent: &str| {
        events
            .iter()
            .position(|e| e["kind"] == kind && e["agent"] == agent)
            .unwrap_or_else(|| panic!("no {kind} of {agent}"))
    };
    let dev_done = events
        .iter()
        .position(|e| e["kind"] == "lane_released" && e["agent"] == "dev")
        .expect("dev's lane released");
    assert!(at("spawn", "test") < dev_done, "test started after dev finished");
    // Both agents' files are on the task branch, with a merge commit joining them.
    let branch = "task/dds-writer-pool";
    for f in ["demo-work/dev.md", "demo-work/test.md"] {
        git(&w.project, &["cat-file", "-e", &format!("{branch}:{f}")]);
    }
    assert_eq!(
        git(&w.project, &["show", &format!("{branch}:demo-work/dev.md")]),
        "- dev pass 1\n- dev pass 2",
        "dev's second pass (after the rejection) built on its first"
    );
    let merges = git(&w.project, &["log", "--merges", "--format=%s", branch]);
    assert!(merges.contains("Merge agents/dds-writer-pool/"), "{merges}");
    // The merged agents' branches are gone once the task is COMPLETE; no worktree is left.
    wait_for("the agent branches deleted", 20, || {
        git(&w.project, &["branch", "--list", "agents/*"])
            .is_empty()
            .then_some(())
    });
    assert_eq!(git(&w.project, &["worktree", "list"]).lines().count(), 1);
    let inbox = w.inbox("dds-writer-pool", "pm").join("\n");
    assert!(
        inbox.contains("merged: dev") && inbox.contains("merged: test"),
        "{inbox}"
    );
    assert!(!inbox.contains("merge conflict"), "{inbox}");
    let _ = run(w.task().args(["stop", "dds-writer-pool"]));
}
