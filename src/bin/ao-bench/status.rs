//! `ao-bench status` (and `generate`): `task status` and `task progress` on a generated
//! task, beside `cat` of the same files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{arg, header, row, stats, task_bin, time_cmd};

const STATUSES: [&str; 4] = ["COMPLETE", "NEEDS_REVIEW", "BLOCKED", "COMPLETE"];
const AGENTS: [&str; 6] = ["explore", "plan", "architect", "dev", "test", "review"];

/// Write a task with `handoffs` handoffs (alternating PM instructions and agent reports) and `artifacts` artifacts.
pub(crate) fn generate(project: &Path, handoffs: usize, artifacts: usize) -> PathBuf {
    let dir = project.join("tasks/bench");
    let run = Command::new(task_bin())
        .args(["new", "bench", "--project"])
        .arg(project)
        .output()
        .expect("task new");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let start = chrono::NaiveDate::from_ymd_opt(2025, 1, 1)
        .unwrap()
        .and_hms_opt(0, 0, 0)
        .unwrap();
    for i in 0..handoffs {
        let t = start + chrono::Duration::seconds(i as i64 * 61);
        let stamp = t.format("%Y%m%d-%H%M%S");
        let agent = AGENTS[(i / 2) % AGENTS.len()];
        let (name, text) = if i % 2 == 0 {
            (
                format!("pm-{stamp}.md"),
                format!(
                    "# Handoff: pm\n**Timestamp:** {t}\n**Target:** {agent}\n**Status:** IN_PROGRESS\n\n## Instructions\nStep {i}: continue the work on module {m}.\n\n## Context\nSee artifacts/design/.\n\n## Skills to Load\n- dds-testing\n\n## Success Criteria\nTests pass.\n",
                    m = i % 17
                ),
            )
        } else {
            (
                format!("{agent}-{stamp}.md"),
                format!(
                    "# Handoff: {agent}\n**Timestamp:** {t}\n**Target:** pm\n**Status:** {s}\n**Recommended Next:** review\n\n## Completed Work\nFinished step {i} of module {m}; {pad}\n\n## Artifacts Generated\n- artifacts/code/file-{i}.cpp\n\n## Blockers\n{b}\n\n## Gates Honored\n- build: PASS\n",
                    s = STATUSES[i % 4],
                    m = i % 17,
                    pad = "details ".repeat(20),
                    b = if STATUSES[i % 4] == "BLOCKED" {
                        "Board offline."
                    } else {
                        "None"
                    }
                ),
            )
        };
        std::fs::write(dir.join("handoffs").join(name), text).unwrap();
    }
    let kinds = ["analysis", "design", "code", "tests", "reviews"];
    for i in 0..artifacts {
        let kind = kinds[i % kinds.len()];
        std::fs::write(
            dir.join("artifacts").join(kind).join(format!("artifact-{i}.md")),
            format!("# Artifact {i}\n{}\n", "x".repeat(200)),
        )
        .unwrap();
    }
    dir
}

pub(crate) fn bench_status(args: &[String]) {
    let handoffs = arg(args, "--handoffs", 10_000);
    let artifacts = arg(args, "--artifacts", 2_000);
    let runs = arg(args, "--runs", 15);
    let tmp = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let dir = generate(tmp.path(), handoffs, artifacts);
    eprintln!(
        "generated {handoffs} handoffs and {artifacts} artifacts in {:.1?}",
        t.elapsed()
    );
    let floor = stats(
        (0..runs)
            .map(|_| {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg("find \"$1\"/handoffs \"$1\"/artifacts -type f -exec cat {} + >/dev/null")
                    .arg("sh")
                    .arg(&dir);
                time_cmd(c)
            })
            .collect(),
    );
    let status = stats(
        (0..runs)
            .map(|_| {
                let mut c = Command::new(task_bin());
                c.args(["status", "bench", "--project"]).arg(tmp.path());
                time_cmd(c)
            })
            .collect(),
    );
    let json = stats(
        (0..runs)
            .map(|_| {
                let mut c = Command::new(task_bin());
                c.args(["status", "bench", "--json", "--project"]).arg(tmp.path());
                time_cmd(c)
            })
            .collect(),
    );
    let progress = stats(
        (0..runs)
            .map(|_| {
                let mut c = Command::new(task_bin());
                c.args(["progress", "bench", "--project"]).arg(tmp.path());
                time_cmd(c)
            })
            .collect(),
    );
    println!("\n{handoffs} handoffs, {artifacts} artifacts, {runs} runs each\n");
    header();
    row("floor: cat every handoff+artifact", &floor, &floor, "-");
    row("task status", &status, &floor, "< 100 ms");
    row("task status --json", &json, &floor, "< 100 ms");
    row("task progress (all handoffs new)", &progress, &floor, "< 500 ms");
}
