//! The demo runtime: a scripted agent built into the binary.
//!
//! It behaves like a real terminal agent as far as the supervisor can tell:
//! it draws an input line (`demo> `), takes bracketed pastes, submits on
//! Enter, shows `demo: working…` while busy — and it follows the protocol with
//! the real commands: it reads its preamble, writes artifacts, and finishes
//! with `task handoff`. As PM it runs a fixed plan (explore → plan → dev →
//! review, one rejection then approval, then COMPLETE) using `task handoff`
//! and `task spawn`, advancing one step per check-in it receives.
//!
//! Every submitted message is appended to `scratchpad/<agent>/inbox.jsonl`,
//! which is how tests prove a message arrived literally and exactly once.

mod terminal;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Serialize;

use terminal::{Input, Terminal, readable_within};

use crate::core::error::{Error, Result};
use crate::core::handoff::{self, Status};
use crate::store::handoffs;

/// Environment the demo agent runs in (set by `task start` / `task spawn`).
#[derive(Debug, Clone)]
struct Env {
    task: String,
    task_dir: PathBuf,
    agent: String,
    pause: Duration,
    bin: PathBuf,
}

fn env() -> Result<Env> {
    let get = |k: &str| {
        std::env::var(k).map_err(|_| {
            Error::BadInput(format!(
                "demo-agent needs ${k}; it is started by `task start`/`task spawn`"
            ))
        })
    };
    let pause_ms = std::env::var("AO_DEMO_PAUSE_MS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1500);
    Ok(Env {
        task: get("TASK_NAME")?,
        task_dir: PathBuf::from(get("TASK_DIR")?),
        agent: get("TASK_AGENT")?,
        pause: Duration::from_millis(pause_ms),
        bin: std::env::current_exe().map_err(|e| Error::io("find own binary", "task", e))?,
    })
}

#[derive(Serialize)]
struct InboxEntry<'a> {
    n: usize,
    bytes: usize,
    text: &'a str,
}

fn say(line: &str) {
    print!("\r\x1b[2K{line}\r\n");
    let _ = std::io::stdout().flush();
}

fn prompt(input: &Input) {
    let expanded = std::env::var_os("AO_DEMO_SHOW_PASTE").is_some();
    print!("\r\x1b[2Kdemo> {}", input.display(expanded));
    let _ = std::io::stdout().flush();
}

fn run_task(env: &Env, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let mut c = Command::new(&env.bin);
    c.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    c.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = c.spawn().map_err(|e| Error::io("run", &env.bin, e))?;
    if let (Some(text), Some(mut si)) = (stdin, child.stdin.take()) {
        let _ = si.write_all(text.as_bytes());
    }
    let out = child.wait_with_output().map_err(|e| Error::io("run", &env.bin, e))?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        say(&format!("demo: `task {}` failed: {err}", args.first().unwrap_or(&"")));
        return Err(Error::BadInput(err));
    }
    Ok(stdout)
}

fn handoff_cmd(env: &Env, status: Status, target: Option<&str>, next: Option<&str>, body: &str) -> Result<String> {
    let mut args = vec![
        "handoff",
        env.task.as_str(),
        "--from",
        env.agent.as_str(),
        "--status",
        status.as_str(),
    ];
    if let Some(t) = target {
        args.extend(["--target", t]);
    }
    if let Some(n) = next {
        args.extend(["--next", n]);
    }
    args.extend(["--body-file", "-"]);
    let path = run_task(env, &args, Some(body))?;
    say(&format!(
        "demo: wrote {}",
        Path::new(&path)
            .file_name()
            .map(|f| f.to_string_lossy())
            .unwrap_or_default()
    ));
    Ok(path)
}

fn count_handoffs(env: &Env, agent: &str) -> usize {
    handoffs::list(&env.task_dir.join("handoffs"))
        .map(|(n, _)| n.iter().filter(|n| n.agent == agent).count())
        .unwrap_or(0)
}

fn write_artifact(env: &Env, rel: &str, text: &str) -> Result<()> {
    let p = env.task_dir.join(rel);
    if let Some(d) = p.parent() {
        crate::store::fsutil::create_dir_all(d)?;
    }
    crate::store::fsutil::atomic_write(&p, text.as_bytes())
}

/// The spoke's scripted work: one artifact and one handoff.
fn spoke_work(env: &Env, instructions: &str) -> Result<()> {
    say("demo: working…");
    std::thread::sleep(env.pause);
    let n = count_handoffs(env, &env.agent) + 1;
    let gist = handoff::one_line(instructions, 80);
    let (status, next, rel, extra): (Status, Option<&str>, String, String) = match env.agent.as_str() {
        "explore" => (
            Status::Complete,
            Some("plan"),
            "artifacts/analysis/demo-analysis.md".into(),
            String::new(),
        ),
        "plan" => (
            Status::Complete,
            Some("dev"),
            "artifacts/design/demo-plan.md".into(),
            String::new(),
        ),
        "architect" => (
            Status::Complete,
            Some("dev"),
            "artifacts/design/demo-architecture.md".into(),
            String::new(),
        ),
        "dev" => (
            Status::NeedsReview,
            Some("review"),
            format!("artifacts/code/demo-change-{n}.md"),
            String::new(),
        ),
        "test" => (
            Status::Complete,
            Some("review"),
            "artifacts/tests/demo-results.md".into(),
            String::new(),
        ),
        "review" => {
            if n == 1 {
                (
                    Status::Complete,
                    Some("dev"),
                    format!("artifacts/reviews/demo-review-{n}.md"),
                    "**Verdict:** REJECTED\n".into(),
                )
            } else {
                (
                    Status::Complete,
                    None,
                    format!("artifacts/reviews/demo-review-{n}.md"),
                    "**Verdict:** APPROVED\n".into(),
                )
            }
        }
        _ => (
            Status::Complete,
            None,
            format!("scratchpad/{}/demo-notes-{n}.md", env.agent),
            String::new(),
        ),
    };
    write_artifact(
        env,
        &rel,
        &format!("# {} output {n}\n\nDemo work for: {gist}\n", env.agent),
    )?;
    // In its own git worktree the demo changes real files, as a coding agent would.
    let changed = change_real_files(env, n);
    let verdict_note = if extra.contains("REJECTED") {
        "Rejected: the change lacks a test for the failure case. Add it and resubmit."
    } else if extra.contains("APPROVED") {
        "Approved: the change and its test meet the success criteria."
    } else {
        "Done as instructed."
    };
    let body = format!(
        "{extra}\n## Completed Work\n{verdict_note} ({} pass {n}: {gist}){changed}\n\n## Artifacts Generated\n- {rel}\n\n## Blockers\nNone\n\n## Gates Honored\n- demo-self-check: PASS\n",
        env.agent
    );
    handoff_cmd(env, status, None, next, &body)?;
    Ok(())
}

/// Whether this agent works in a linked git worktree (its `.git` is a file naming one).
fn in_worktree() -> bool {
    let Ok(mut dir) = std::env::current_dir() else {
        return false;
    };
    loop {
        let git = dir.join(".git");
        if git.is_file() {
            return std::fs::read_to_string(&git).is_ok_and(|t| t.contains("/worktrees/"));
        }
        if git.exists() || !dir.pop() {
            return false;
        }
    }
}

/// In a worktree, dev and test change real files (`demo-work/<agent>.md`, one line per
/// pass), and a reader lists what it finds there; elsewhere nothing is touched. Returns a
/// sentence for the handoff.
fn change_real_files(env: &Env, n: usize) -> String {
    if !in_worktree() {
        return String::new();
    }
    let dir = Path::new("demo-work");
    match env.agent.as_str() {
        "dev" | "test" => {
            let f = dir.join(format!("{}.md", env.agent));
            let line = format!("- {} pass {n}\n", env.agent);
            let r = std::fs::create_dir_all(dir).and_then(|_| {
                let mut h = std::fs::OpenOptions::new().create(true).append(true).open(&f)?;
                h.write_all(line.as_bytes())
            });
            match r {
                Ok(()) => format!(" Changed {} in its worktree.", f.display()),
                Err(e) => format!(" Could not change {}: {e}.", f.display()),
            }
        }
        _ => {
            let mut found: Vec<String> = std::fs::read_dir(dir)
                .map(|d| {
                    d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                        .collect()
                })
                .unwrap_or_default();
            found.sort();
            format!(" Read demo-work/: [{}].", found.join(", "))
        }
    }
}

/// Whether the task runs its agents in worktrees (task.md `worktree: true`): the PM then
/// runs dev and test at the same time.
fn parallel(env: &Env) -> bool {
    std::fs::read(env.task_dir.join("task.md"))
        .ok()
        .and_then(|b| crate::core::model::taskmd::decode(b, &env.task_dir.join("task.md")).ok())
        .and_then(|spec| spec.setting("worktree").map(crate::core::worktree::Isolation::parse))
        .is_some_and(|i| i == Ok(crate::core::worktree::Isolation::Worktree))
}

/// The parallel plan: explore → plan → dev and test at once → review (when both are
/// merged) → dev again on a rejection → review → COMPLETE. Decided by counting, per
/// agent, the PM's instructions and the agent's terminal reports, so the order in which
/// two agents working at once finish does not matter.
fn pm_step_parallel(env: &Env) -> Result<bool> {
    let dir = env.task_dir.join("handoffs");
    let (names, _) = handoffs::list(&dir)?;
    let loaded: Vec<_> = names
        .iter()
        .filter_map(|n| handoffs::load(&dir, n).ok()?.ok())
        .collect();
    let told = |a: &str| {
        loaded
            .iter()
            .filter(|l| l.agent() == "pm" && l.handoff.target.as_deref() == Some(a))
            .count()
    };
    let reported = |a: &str| {
        loaded
            .iter()
            .filter(|l| l.agent() == a && l.handoff.status.is_terminal())
            .count()
    };
    let done = |a: &str| told(a) > 0 && reported(a) >= told(a);
    let last_review = loaded.iter().rev().find(|l| l.agent() == "review");
    if !done("explore") {
        return Ok(false);
    }
    if told("plan") == 0 {
        pm_instruct(
            env,
            "plan",
            "Design the test strategy from the analysis in artifacts/analysis/.",
        )?;
        return Ok(false);
    }
    if !done("plan") {
        return Ok(false);
    }
    if told("dev") == 0 {
        pm_instruct(env, "dev", "Implement the change from the plan in artifacts/design/.")?;
        pm_instruct(
            env,
            "test",
            "Write the tests from the plan in artifacts/design/, at the same time as dev.",
        )?;
        return Ok(false);
    }
    if !done("dev") || !done("test") {
        return Ok(false);
    }
    if told("review") < told("dev") {
        pm_instruct(
            env,
            "review",
            "Review the merged work of dev and test on the task branch.",
        )?;
        return Ok(false);
    }
    if !done("review") {
        return Ok(false);
    }
    match last_review {
        Some(l) if l.handoff.is_rejection() => {
            pm_instruct(
                env,
                "dev",
                &format!(
                    "The review rejected the work ({}). Address its feedback: {}",
                    l.file,
                    l.handoff.summary()
                ),
            )?;
            Ok(false)
        }
        _ => {
            handoff_cmd(
                env,
                Status::Complete,
                None,
                None,
                "## Completed Work\nAll success criteria met: dev and test worked in parallel worktrees, both merged, and the review approved.\n",
            )?;
            say("demo: task complete");
            Ok(true)
        }
    }
}

/// The PM's next step, decided from the handoff files (what a real PM reads).
fn pm_step(env: &Env) -> Result<bool> {
    if parallel(env) {
        return pm_step_parallel(env);
    }
    let dir = env.task_dir.join("handoffs");
    let (names, _) = handoffs::list(&dir)?;
    // The latest report after the PM's latest instruction.
    let last_pm = names.iter().rposition(|n| n.agent == "pm");
    let reports: Vec<_> = names.iter().skip(last_pm.map(|i| i + 1).unwrap_or(0)).collect();
    let Some(last) = reports.last() else {
        say("demo: nothing to act on yet");
        return Ok(false);
    };
    let Ok(l) = handoffs::load(&dir, last)? else {
        return Ok(false);
    };
    let h = &l.handoff;
    if !h.status.is_terminal() {
        return Ok(false);
    }
    let next: Option<(&str, String)> = match (l.agent(), h.status) {
        ("explore", Status::Complete) => Some((
            "plan",
            "Design the test strategy from the analysis in artifacts/analysis/.".into(),
        )),
        ("plan", Status::Complete) => Some(("dev", "Implement test 1 from the plan in artifacts/design/.".into())),
        ("dev", _) => Some((
            "review",
            format!("Review the change in the latest artifacts/code/ file ({}).", l.file),
        )),
        ("review", _) if h.is_rejection() => Some((
            "dev",
            format!(
                "The review rejected the work ({}). Address its feedback: {}",
                l.file,
                h.summary()
            ),
        )),
        ("review", _) => None,
        (_, Status::Blocked) => {
            handoff_cmd(
                env,
                Status::Blocked,
                None,
                None,
                &format!("## Blockers\n{} is blocked; a human must look.\n", l.agent()),
            )?;
            return Ok(true);
        }
        _ => None,
    };
    match next {
        Some((agent, instructions)) => {
            pm_instruct(env, agent, &instructions)?;
            Ok(false)
        }
        None => {
            handoff_cmd(
                env,
                Status::Complete,
                None,
                None,
                "## Completed Work\nAll success criteria met: the review approved the change.\n",
            )?;
            say("demo: task complete");
            Ok(true)
        }
    }
}

fn pm_instruct(env: &Env, agent: &str, instructions: &str) -> Result<()> {
    say("demo: working…");
    std::thread::sleep(env.pause / 3);
    let body = format!(
        "## Instructions\n{instructions}\n\n## Context\nDemo run of task {}.\n\n## Skills to Load\n- none\n\n## Success Criteria\nA handoff with an artifact.\n",
        env.task
    );
    let path = handoff_cmd(env, Status::InProgress, Some(agent), None, &body)?;
    run_task(
        env,
        &["spawn", env.task.as_str(), agent, "--handoff", path.as_str()],
        None,
    )?;
    say(&format!("demo: spawned {agent}"));
    Ok(())
}

/// The PM's `## Instructions` inside the preamble (falling back to everything after "Your Instructions").
fn instructions_of(preamble: &str) -> &str {
    let yours = preamble.split("## Your Instructions").nth(1).unwrap_or(preamble);
    yours.split("## Instructions").nth(1).unwrap_or(yours)
}

/// `task demo-agent --prompt-file F`: run the scripted agent in this terminal.
pub fn main(prompt_file: &Path) -> Result<()> {
    let env = env()?;
    let preamble = std::fs::read_to_string(prompt_file).map_err(|e| Error::io("read preamble", prompt_file, e))?;
    let inbox_path = env.task_dir.join("scratchpad").join(&env.agent).join("inbox.jsonl");
    crate::store::fsutil::create_dir_all(inbox_path.parent().unwrap_or(Path::new(".")))?;
    let _term = Terminal::enter();
    say(&format!(
        "demo: {} agent for task {} (read {} bytes of preamble)",
        env.agent,
        env.task,
        preamble.len()
    ));
    // AO_DEMO_IDLE=1: only read and record messages (tests use it for a quiet agent). A
    // first prompt that never mentions handoffs (`task runtime check`'s) gives nothing to do.
    let idle = std::env::var_os("AO_DEMO_IDLE").is_some() || !preamble.contains("handoff");
    let mut done = idle;
    if idle {
        // Echo the first prompt as the real programs do in their history (`task runtime
        // check` waits for it before typing).
        say(&format!("> {}", preamble.lines().next().unwrap_or_default()));
        say("demo: idle mode; recording messages only");
    } else if env.agent == "pm" {
        pm_instruct(
            &env,
            "explore",
            "Analyse the code base and the task; list the modules involved.",
        )?;
    } else {
        let _ = spoke_work(&env, instructions_of(&preamble));
    }
    let mut input = Input::with_late(
        std::env::var("AO_DEMO_LATE_PASTE_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .map(Duration::from_millis),
    );
    // The line late-paste mode draws every 150 ms: a working agent's spinner, or with
    // AO_DEMO_LATE_PASTE_IDLE an idle agent's screen that moves all the same (Claude Code
    // just started, its first turn beginning to draw).
    let ticker = if std::env::var_os("AO_DEMO_LATE_PASTE_IDLE").is_some() {
        "demo: tick"
    } else {
        "demo: working…"
    };
    let mut received = 0usize;
    prompt(&input);
    let mut buf = [0u8; 4096];
    let mut stdin = std::io::stdin().lock();
    let mut ticks = 0u64;
    loop {
        // Late-paste mode: a screen that keeps moving, as Claude Code's does while it works.
        if input.late.is_some() && !readable_within(Duration::from_millis(150)) {
            ticks += 1;
            input.release(std::time::Instant::now());
            say(&format!("{ticker} ({ticks})"));
            prompt(&input);
            continue;
        }
        let n = match stdin.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::io("read", "stdin", e)),
        };
        let mut msgs = Vec::new();
        input.feed(&buf[..n], &mut msgs);
        for m in msgs {
            received += 1;
            let entry = serde_json::to_string(&InboxEntry {
                n: received,
                bytes: m.len(),
                text: &m,
            })
            .unwrap_or_default();
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&inbox_path)
                .map_err(|e| Error::io("open", &inbox_path, e))?;
            f.write_all(format!("{entry}\n").as_bytes())
                .map_err(|e| Error::io("append", &inbox_path, e))?;
            say(&format!("demo: received message #{received} ({} bytes)", m.len()));
            if env.agent == "pm" && !done && m.starts_with("Check-in for task") {
                done = pm_step(&env).unwrap_or(false);
            }
        }
        input.release(std::time::Instant::now());
        prompt(&input);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_paste_then_enter_is_one_message() {
        let mut i = Input::default();
        let mut out = Vec::new();
        i.feed(b"\x1b[200~line one\rline; two $(x)\x1b[201~", &mut out);
        assert!(out.is_empty());
        assert_eq!(i.display(false), "[pasted 23 chars]");
        assert_eq!(i.display(true), "line one⏎line; two $(x)");
        i.feed(b"\r", &mut out);
        assert_eq!(out, vec!["line one\nline; two $(x)".to_string()]);
        i.feed(b"\r", &mut out);
        assert_eq!(out.len(), 1, "an empty Enter submits nothing");
    }

    #[test]
    fn a_late_paste_lets_an_enter_meet_an_empty_input_and_then_shows() {
        let mut i = Input::with_late(Some(Duration::from_millis(50)));
        let mut out = Vec::new();
        i.feed(b"typed \x1b[200~pasted text\x1b[201~\r", &mut out);
        assert_eq!(out, vec!["typed ".to_string()], "Enter took only what was in the input");
        assert!(!i.release(std::time::Instant::now()), "not yet");
        assert!(i.release(std::time::Instant::now() + Duration::from_millis(60)));
        assert_eq!(i.display(true), "pasted text");
        i.feed(b"\r", &mut out);
        assert_eq!(out[1], "pasted text");
    }

    #[test]
    fn split_escape_sequences_and_typing() {
        let mut i = Input::default();
        let mut out = Vec::new();
        i.feed(b"\x1b[20", &mut out);
        i.feed(b"0~ab", &mut out);
        i.feed(b"\x1b[201", &mut out);
        i.feed(b"~c\x7f", &mut out);
        let e = "é".as_bytes();
        i.feed(&e[..1], &mut out);
        i.feed(&e[1..], &mut out);
        i.feed(b"\x1b[200~", &mut out);
        let k = "日本".as_bytes();
        i.feed(&k[..2], &mut out);
        i.feed(&k[2..], &mut out);
        i.feed(b"\x1b[201~\r", &mut out);
        assert_eq!(out, vec!["abé日本".to_string()]);
    }
}
