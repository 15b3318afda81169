//! `task doctor`'s verdicts: one line per thing the supervisor depends on — ok, warning or
//! problem — each with the command that fixes it. The checks that read the machine live
//! in [`crate::app::doctor`]; judging what they found, and printing it, is pure.

use serde::Serialize;

/// How a check came out. A problem stops tasks from running as they should; a warning
/// narrows what works (no Claude Code: the demo runtime still runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Works.
    Ok,
    /// Works with less, or needs a look.
    Warning,
    /// Does not work.
    Problem,
}

impl Level {
    /// The word printed in the first column.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warning => "warning",
            Level::Problem => "problem",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`tmux`, `runtime claude`, `remote dev@host`…).
    pub name: String,
    /// The verdict.
    pub level: Level,
    /// What was found, in a few words.
    pub detail: String,
    /// The command (or step) that fixes it; none when ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// An ok line.
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level: Level::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    /// A warning with its fix.
    pub fn warning(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level: Level::Warning,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// A problem with its fix.
    pub fn problem(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level: Level::Problem,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The oldest tmux the driver is tested against: 3.0 brought the `#{pane_dead_signal}`
/// and bracketed `paste-buffer -p` behaviour that delivery relies on.
pub const TMUX_MIN: (u32, u32) = (3, 0);

/// `tmux -V`'s output (`tmux 3.3a`, `tmux next-3.4`, `tmux master`) judged against
/// [`TMUX_MIN`]; a version that cannot be read is a warning, not a refusal.
pub fn tmux_version(output: &str) -> Check {
    let v = output.trim();
    let Some((major, minor)) = parse_version(v) else {
        return Check::warning(
            "tmux",
            format!("version not recognised: {v:?}"),
            "check that `tmux -V` prints a version such as `tmux 3.3a`",
        );
    };
    if (major, minor) < TMUX_MIN {
        return Check::problem(
            "tmux",
            format!("{v} is older than {}.{}", TMUX_MIN.0, TMUX_MIN.1),
            "install tmux 3.0 or newer (apt-get install tmux)",
        );
    }
    Check::ok("tmux", v)
}

/// The oldest git whose `merge-tree --write-tree` merges without a checkout.
pub const GIT_MIN: (u32, u32) = (2, 38);

/// `git --version`'s output (`None`: git is not installed) judged for agents' worktrees;
/// `wanted` when a task of the project asks for them (then a missing or old git is a problem).
pub fn git_version(output: Option<&str>, wanted: bool) -> Check {
    let name = "git (worktrees)";
    let bad = |detail: String, fix: &str| match wanted {
        true => Check::problem(name, detail, fix),
        false => Check::warning(name, format!("{detail}; no task here asks for worktrees"), fix),
    };
    let Some(v) = output.map(str::trim) else {
        return bad("git is not on PATH".into(), "apt-get install git");
    };
    match parse_version(v) {
        Some(mv) if mv >= GIT_MIN => Check::ok(name, v),
        Some(_) => bad(
            format!(
                "{v} is older than {}.{}: merges need `git merge-tree --write-tree`",
                GIT_MIN.0, GIT_MIN.1
            ),
            "install git 2.38 or newer",
        ),
        None => bad(
            format!("version not recognised: {v:?}"),
            "check that `git --version` prints a version",
        ),
    }
}

/// Major and minor of the first `N.M` in `s`.
fn parse_version(s: &str) -> Option<(u32, u32)> {
    let start = s.find(|c: char| c.is_ascii_digit())?;
    let mut parts = s[start..].split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().and_then(|m| m.parse().ok()).unwrap_or(0);
    Some((major, minor))
}

/// The daemon's answer to a ping judged against this binary's version.
pub fn daemon(answer: Option<(u32, &str)>, socket: &str, ours: &str) -> Check {
    match answer {
        None => Check::warning(
            "daemon",
            format!("none answering on {socket}; check-ins run from cron or by hand"),
            "task daemon (or task service install)",
        ),
        Some((pid, v)) if v == ours => Check::ok("daemon", format!("pid {pid}, version {v}, on {socket}")),
        Some((pid, v)) => Check::warning(
            "daemon",
            format!("pid {pid} runs version {v}, this binary is {ours}"),
            "task daemon stop && task daemon (agents keep running)",
        ),
    }
}

/// Claude Code's project settings: the protocol's commands allowed or not. `missing` is
/// what a merge would add (empty: all there); `Err` is a settings file that cannot be read.
pub fn claude_permissions(path: &str, missing: Result<Vec<String>, String>) -> Check {
    let name = "claude permissions";
    match missing {
        Ok(m) if m.is_empty() => Check::ok(name, format!("{path} allows the protocol's commands")),
        Ok(m) => Check::warning(
            name,
            format!(
                "{path} does not allow {}; agents will stop at a permission prompt",
                m.join(", ")
            ),
            "task setup-agents",
        ),
        Err(e) => Check::problem(
            name,
            format!("{path}: {e}"),
            format!("fix or remove {path}, then task setup-agents"),
        ),
    }
}

/// Whether every check passed well enough to run tasks (no problem).
pub fn healthy(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.level != Level::Problem)
}

/// The human report: a line per check, the fix under anything not ok, a summary last.
pub fn render(checks: &[Check]) -> String {
    let width = checks.iter().map(|c| c.name.chars().count()).max().unwrap_or(0);
    let mut out = String::new();
    for c in checks {
        out.push_str(&format!("{:<7}  {:<width$}  {}\n", c.level.as_str(), c.name, c.detail));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("{:<7}  {:<width$}  fix: {fix}\n", "", ""));
        }
    }
    let count = |l: Level| checks.iter().filter(|c| c.level == l).count();
    out.push_str(&format!(
        "\n{} ok, {} warning(s), {} problem(s)\n",
        count(Level::Ok),
        count(Level::Warning),
        count(Level::Problem)
    ));
    out
}

/// The models the project's agents used that the price table lacks: money and context
/// fills for them show as unknown (and a PM on such a model is never rotated by its fill).
pub fn models(no_price: &[String], no_window: &[String]) -> Check {
    if no_price.is_empty() && no_window.is_empty() {
        return Check::ok("models", "every model in use has a price and a context window");
    }
    let mut detail = Vec::new();
    if !no_price.is_empty() {
        detail.push(format!("no price for {} (money shows as unknown)", no_price.join(", ")));
    }
    if !no_window.is_empty() {
        detail.push(format!(
            "no context window for {} (fills unknown; the PM is not rotated by its fill)",
            no_window.join(", ")
        ));
    }
    let example = no_price.first().or(no_window.first()).cloned().unwrap_or_default();
    Check::warning(
        "models",
        detail.join("; "),
        format!(
            "add [prices.\"{example}\"] (input, output, cache_write, cache_read in USD per million tokens) and [context_windows] \"{example}\" = <tokens> to ~/.config/agent-orchestrator/config.toml"
        ),
    )
}

#[cfg(test)]
mod tests {

    #[test]
    fn git_is_judged_for_worktrees() {
        assert_eq!(git_version(Some("git version 2.47.3\n"), true).level, Level::Ok);
        assert_eq!(git_version(Some("git version 2.34.1"), true).level, Level::Problem);
        assert_eq!(git_version(Some("git version 2.34.1"), false).level, Level::Warning);
        assert_eq!(git_version(None, true).level, Level::Problem);
        assert!(git_version(None, false).detail.contains("no task here asks"));
    }

    use super::*;

    #[test]
    fn tmux_versions_are_judged() {
        assert_eq!(tmux_version("tmux 3.3a\n").level, Level::Ok);
        assert_eq!(tmux_version("tmux next-3.5").level, Level::Ok);
        assert_eq!(tmux_version("tmux 2.9a").level, Level::Problem);
        let odd = tmux_version("tmux master");
        assert_eq!(odd.level, Level::Warning);
        assert!(odd.fix.is_some());
    }

    #[test]
    fn the_daemon_is_judged_by_its_answer_and_version() {
        assert_eq!(daemon(None, "/s", "0.1.0").level, Level::Warning);
        assert_eq!(daemon(Some((7, "0.1.0")), "/s", "0.1.0").level, Level::Ok);
        let old = daemon(Some((7, "0.0.9")), "/s", "0.1.0");
        assert_eq!(old.level, Level::Warning);
        assert!(
            old.detail.contains("0.0.9") && old.detail.contains("0.1.0"),
            "{}",
            old.detail
        );
    }

    #[test]
    fn claude_permissions_name_what_is_missing() {
        assert_eq!(claude_permissions("s.json", Ok(vec![])).level, Level::Ok);
        let w = claude_permissions("s.json", Ok(vec!["Bash(task handoff:*)".into()]));
        assert_eq!(w.level, Level::Warning);
        assert!(w.detail.contains("Bash(task handoff:*)"));
        assert_eq!(w.fix.as_deref(), Some("task setup-agents"));
        assert_eq!(
            claude_permissions("s.json", Err("not JSON".into())).level,
            Level::Problem
        );
    }

    #[test]
    fn the_report_gives_a_line_each_fixes_and_a_count() {
        let checks = vec![
            Check::ok("tmux", "tmux 3.3a"),
            Check::problem(
                "runtime claude",
                "claude not found",
                "npm install -g @anthropic-ai/claude-code",
            ),
        ];
        let r = render(&checks);
        assert!(r.starts_with("ok       tmux            tmux 3.3a\n"), "{r}");
        assert!(r.contains("problem  runtime claude  claude not found\n"), "{r}");
        assert!(r.contains("fix: npm install -g @anthropic-ai/claude-code"), "{r}");
        assert!(r.ends_with("1 ok, 0 warning(s), 1 problem(s)\n"), "{r}");
        assert!(!healthy(&checks));
        assert!(healthy(&checks[..1]));
    }
}
