//! `task runtime check <runtime>`: prove a runtime profile against the real program
//! before a task depends on it. Start the program in a scratch session (in the project,
//! so its trust and settings are the ones tasks get), wait for the profile's ready
//! pattern, deliver a probe with verified delivery, and see it submitted. Every step is
//! reported; a step that fails shows what the screen held, since a pattern that does not
//! match is the usual cause and the screen is what to write the pattern from.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::app::context::Ctx;
use crate::core::doctor::Check;
use crate::core::report::Outcome;
use crate::core::screen::{Screen, assess};
use crate::io::{delivery, runtime};
use crate::store::task::{Task, create_or_repair};

/// The first prompt the program gets: nothing to do, answer one word.
const FIRST_PROMPT: &str = include_str!("../../templates/runtime-check.md");
/// The message delivered once the program is ready.
const PROBE: &str = include_str!("../../templates/runtime-check-probe.md");

/// The steps, and the screen of the first one that failed.
#[derive(Debug)]
pub struct RuntimeCheck {
    /// One line per step, in order; steps after a failure are not run.
    pub steps: Vec<Check>,
    /// The pane as the failing step left it (its last lines).
    pub screen: Option<String>,
}

/// Check runtime `name`, started in `cwd` (the project).
pub async fn check(ctx: &Ctx, name: &str, cwd: &Path) -> RuntimeCheck {
    let mut out = RuntimeCheck {
        steps: Vec::new(),
        screen: None,
    };
    let rt = match runtime::resolve(name) {
        Ok(rt) => rt,
        Err(e) => {
            out.steps.push(Check::problem(
                "profile",
                e.to_string(),
                "add or fix [runtimes.<name>] in the config file",
            ));
            return out;
        }
    };
    out.steps
        .push(Check::ok("profile", format!("{name}: {}", rt.profile.description)));
    if let Err(e) = rt.ensure_installed(&ctx.task_bin) {
        let fix = if rt.profile.install.is_empty() {
            "install the program, or set argv in the profile".to_string()
        } else {
            rt.profile.install.clone()
        };
        out.steps.push(Check::problem("program", e.to_string(), fix));
        return out;
    }
    out.steps.push(Check::ok(
        "program",
        rt.profile.argv[0].replace("{task_bin}", &ctx.task_bin.to_string_lossy()),
    ));

    // A scratch task folder (TASK_DIR, the saved preamble), gone when the check ends. It is
    // made inside the project, where the project's trust covers it: Claude Code 2.1.332
    // asks at start whether to trust an --add-dir folder outside it ("Adding a new
    // directory"), which no task meets (tasks/ is in the project). The system's temp
    // folder serves a project that cannot be written.
    let scratch = match tempfile::Builder::new()
        .prefix(".ao-runtime-check-")
        .tempdir_in(cwd)
        .or_else(|_| tempfile::tempdir())
    {
        Ok(d) => d,
        Err(e) => {
            out.steps.push(Check::problem(
                "start",
                format!("no scratch folder: {e}"),
                "check TMPDIR",
            ));
            return out;
        }
    };
    let task_name = format!("runtime-check-{}", std::process::id());
    let started = async {
        let task = Task::new(scratch.path(), task_name.parse()?)?;
        create_or_repair(&task, crate::core::clock::now())?;
        crate::app::session::start_agent(
            ctx,
            &task,
            "pm",
            "hub",
            &rt,
            FIRST_PROMPT,
            cwd,
            crate::core::clock::now(),
            crate::app::session::Begin::New,
        )
        .await
    }
    .await;
    let started = match started {
        Ok(s) => s,
        Err(e) => {
            out.steps.push(Check::problem(
                "start",
                e.to_string(),
                "run the argv of the profile by hand in a terminal",
            ));
            return out;
        }
    };
    out.steps.push(Check::ok(
        "start",
        format!("{} in tmux session {}", started.argv.join(" "), started.session),
    ));
    steps_in_pane(ctx, &rt, &started.pane, &mut out).await;
    let _ = ctx.tmux.kill_session(&started.session).await;
    let _ = ctx.tmux.end_if_empty().await;
    out
}

/// Ready, delivered, submitted: each a step, stopping at the first that fails.
async fn steps_in_pane(ctx: &Ctx, rt: &runtime::Runtime, pane: &str, out: &mut RuntimeCheck) {
    let timeout = Duration::from_secs(rt.profile.ready_timeout_secs);
    let deadline = Instant::now() + timeout;
    let mut screen = String::new();
    let mut last = Screen::Unknown;
    // The first prompt is a turn of its own: an input line drawn before that turn starts
    // is not ready yet (Gemini CLI draws its input seconds before it takes the prompt from
    // its argv; a probe typed then was lost). Ready counts once the program has taken the
    // first prompt and is seen ready on two looks in a row, after a moment to start.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (mut ready_looks, mut first) = (0, FirstPrompt::default());
    while Instant::now() < deadline {
        screen = ctx.tmux.capture(pane).await.unwrap_or_default();
        last = assess(&screen, &rt.patterns);
        // Gemini CLI keeps its empty input line while it works: busy beats ready here.
        let busy = rt.patterns.is_busy(&screen);
        first.look(&screen, &last, busy);
        let idle = last == Screen::Ready && !busy;
        ready_looks = if idle && first.taken() { ready_looks + 1 } else { 0 };
        if ready_looks >= 2 || matches!(last, Screen::Dialog(_)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    match last {
        Screen::Ready => out
            .steps
            .push(Check::ok("ready", "the input area matched patterns.ready")),
        Screen::Dialog(line) => {
            out.steps.push(Check::problem(
                "ready",
                format!("a dialog is showing: {line:?}"),
                "answer it once by hand in this folder (e.g. trust it), then check again",
            ));
            out.screen = Some(tail(&screen));
            return;
        }
        other => {
            out.steps.push(Check::problem(
                "ready",
                format!(
                    "not ready after {} s (the screen reads as {other:?})",
                    timeout.as_secs()
                ),
                format!(
                    "make patterns.ready of [runtimes.{}] match the empty input line shown below",
                    rt.name
                ),
            ));
            out.screen = Some(tail(&screen));
            return;
        }
    }
    match delivery::deliver(&ctx.tmux, pane, PROBE.trim(), &rt.patterns, &rt.delivery_options()).await {
        Ok(r) if r.outcome == Outcome::Delivered => {
            out.steps.push(Check::ok(
                "deliver",
                format!("{} bytes pasted once, {} Enter", r.bytes, r.enters),
            ));
            out.steps
                .push(Check::ok("submitted", "the input area no longer holds the probe"));
            answered(ctx, rt, pane, timeout, out).await;
        }
        Ok(r) => {
            let pasted = r.outcome == Outcome::Unconfirmed;
            out.steps.push(if pasted {
                Check::ok("deliver", format!("{} bytes pasted, {} Enter", r.bytes, r.enters))
            } else {
                Check::problem("deliver", r.reason.clone(), "see the screen below")
            });
            if pasted {
                out.steps.push(Check::problem(
                    "submitted",
                    r.reason,
                    format!(
                        "check submit_enters and patterns.pending / paste_marker of [runtimes.{}] against the screen below",
                        rt.name
                    ),
                ));
            }
            out.screen = Some(tail(&ctx.tmux.capture(pane).await.unwrap_or_default()));
        }
        Err(e) => {
            out.steps.push(Check::problem(
                "deliver",
                e.to_string(),
                "check the tmux server (task doctor)",
            ));
        }
    }
}

/// The program took the probe and came back to its input: ready on two looks half a
/// second apart, after giving it a moment to start working. A program that never comes
/// back would leave every later message of a task waiting.
async fn answered(ctx: &Ctx, rt: &runtime::Runtime, pane: &str, timeout: Duration, out: &mut RuntimeCheck) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let deadline = Instant::now() + timeout;
    let mut ready_looks = 0;
    let mut screen = String::new();
    while Instant::now() < deadline {
        screen = ctx.tmux.capture(pane).await.unwrap_or_default();
        ready_looks = if assess(&screen, &rt.patterns) == Screen::Ready {
            ready_looks + 1
        } else {
            0
        };
        if ready_looks >= 2 {
            out.steps
                .push(Check::ok("answered", "back at its input after the probe"));
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    out.steps.push(Check::problem(
        "answered",
        format!("not back at its input {} s after the probe", timeout.as_secs()),
        format!(
            "check patterns.busy and patterns.ready of [runtimes.{}] against the screen below",
            rt.name
        ),
    ));
    out.screen = Some(tail(&screen));
}

/// How long a program that shows neither its first prompt nor a busy sign must look ready
/// before it counts as having taken the prompt (a custom runtime that draws neither).
const NO_ECHO_GRACE: Duration = Duration::from_secs(8);

/// Whether the program has taken its first prompt, from the looks so far: the prompt
/// echoed on screen (Claude Code, Codex, Gemini and the demo show it in their history), a
/// busy look, or ready for [`NO_ECHO_GRACE`].
#[derive(Debug, Default)]
struct FirstPrompt {
    echoed: bool,
    busy: bool,
    ready_since: Option<Instant>,
}

impl FirstPrompt {
    fn look(&mut self, screen: &str, seen: &Screen, busy: bool) {
        self.echoed |= screen.contains(first_prompt_echo());
        self.busy |= busy;
        match seen {
            Screen::Ready => {
                self.ready_since.get_or_insert_with(Instant::now);
            }
            _ => self.ready_since = None,
        }
    }

    fn taken(&self) -> bool {
        self.echoed || self.busy || self.ready_since.is_some_and(|t| t.elapsed() >= NO_ECHO_GRACE)
    }
}

/// The start of the first prompt as a program echoes it (short enough not to wrap).
fn first_prompt_echo() -> &'static str {
    let line = FIRST_PROMPT.lines().next().unwrap_or_default();
    &line[..line.char_indices().nth(28).map_or(line.len(), |(i, _)| i)]
}

/// The last 15 non-blank lines of a screen.
fn tail(screen: &str) -> String {
    let lines: Vec<&str> = screen.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_prompt_counts_taken_when_echoed_or_busy_never_from_an_early_input_line() {
        assert_eq!(first_prompt_echo(), "This is `task runtime check`");
        let early = " *   Type your message or @path/to/file\n";
        let mut f = FirstPrompt::default();
        f.look(early, &Screen::Ready, false);
        assert!(!f.taken(), "an input line drawn before the prompt is taken");
        f.look(&format!(" > {}\n{early}", FIRST_PROMPT.trim()), &Screen::Ready, false);
        assert!(f.taken());
        let mut f = FirstPrompt::default();
        f.look("Thinking... (esc to cancel, 0s)", &Screen::Unknown, true);
        assert!(f.taken(), "a busy look means the prompt was taken");
        let mut f = FirstPrompt {
            ready_since: Some(Instant::now() - NO_ECHO_GRACE),
            ..FirstPrompt::default()
        };
        assert!(f.taken(), "a program that shows neither counts after the grace");
        f.look("", &Screen::Unknown, false);
        assert!(!f.taken(), "the grace restarts when the input is not ready");
    }
}
