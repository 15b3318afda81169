//! task.md: the human's requirements and the `## Agent Config` settings.
//!
//! The title, `## Goal` and `## Success Criteria` are read for display and
//! prompts; every other section is kept verbatim. `## Agent Config` holds
//! `key: value` lines (a `#` at line start, or after whitespace, starts a
//! comment) and is parsed strictly: a line that is not a setting, or a bad
//! `cwd:`, is an error naming the file and line, because a silently ignored
//! `cwd:` would run agents in the wrong place.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::core::error::{Error, Result};

/// Where agents work: the local project (or a local path), or a remote host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CwdSpec {
    /// A local folder; relative paths are relative to the project folder.
    Local { path: PathBuf },
    /// `[user@]host[:port]:/path`; `host` may be an `~/.ssh/config` alias.
    Remote(RemoteSpec),
}

/// A remote working directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct RemoteSpec {
    /// The login user, when given.
    pub user: Option<String>,
    /// Host name, address or ssh-config alias.
    pub host: String,
    /// SSH port, when given.
    pub port: Option<u16>,
    /// Absolute remote path (or one starting with `~`).
    pub path: String,
}

impl RemoteSpec {
    /// `user@host` or `host`, the destination ssh takes.
    pub fn destination(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

impl fmt::Display for RemoteSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.destination())?;
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        write!(f, ":{}", self.path)
    }
}

fn valid_host_part(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Parse a `cwd:` value. Local unless it looks like `[user@]host:…` (the part
/// before the first `:` has no `/` and does not start with `.` or `~`).
pub fn parse_cwd(value: &str) -> std::result::Result<CwdSpec, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("cwd is empty".into());
    }
    if v.chars().any(|c| c.is_control()) {
        return Err("cwd contains control characters".into());
    }
    if v.starts_with('-') {
        return Err(format!(
            "cwd {v:?} starts with '-', which ssh and rsync would take as an option; refused"
        ));
    }
    let remote_prefix = v
        .split_once(':')
        .filter(|(pre, _)| !pre.contains('/') && !pre.starts_with('.') && !pre.starts_with('~'));
    let Some((userhost, rest)) = remote_prefix else {
        return Ok(CwdSpec::Local { path: PathBuf::from(v) });
    };
    let (user, host) = match userhost.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, userhost),
    };
    if let Some(u) = user {
        if !valid_host_part(u) {
            return Err(format!(
                "remote user {u:?} is not allowed: use letters, digits, '.', '_' and '-', not starting with '-'"
            ));
        }
    }
    if !valid_host_part(host) {
        return Err(format!(
            "remote host {host:?} is not allowed: use a host name, address or ssh-config alias of letters, digits, '.', '_' and '-', not starting with '-'"
        ));
    }
    let (port, path) = match rest.split_once(':') {
        Some((p, path)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            let port: u16 = p
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("port {p:?} is not between 1 and 65535"))?;
            (Some(port), path)
        }
        _ => (None, rest),
    };
    if !(path.starts_with('/') || path.starts_with('~')) {
        return Err(format!(
            "remote path {path:?} must be absolute (start with '/' or '~'): write [user@]host[:port]:/path"
        ));
    }
    Ok(CwdSpec::Remote(RemoteSpec {
        user: user.map(str::to_string),
        host: host.to_string(),
        port,
        path: path.to_string(),
    }))
}

/// One `key: value` setting with the line it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Setting {
    /// The value, comment stripped.
    pub value: String,
    /// 1-based line number in task.md.
    pub line: usize,
}

/// The parsed task.md.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TaskSpec {
    /// From `# Task: <title>` or the first `# ` heading.
    pub title: Option<String>,
    /// `## Goal`.
    pub goal: Option<String>,
    /// `## Success Criteria`.
    pub success_criteria: Option<String>,
    /// `cwd:` from Agent Config.
    pub cwd: Option<CwdSpec>,
    /// Every Agent Config setting, including `cwd`, keyed by lower-case key.
    pub settings: BTreeMap<String, Setting>,
    /// All other `## ` sections, kept verbatim in order.
    pub other_sections: Vec<(String, String)>,
}

impl TaskSpec {
    /// A setting's value.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings.get(key).map(|s| s.value.as_str())
    }

    /// `budget:` and `budget-<role>:` (checked when parsed, so never an error here).
    pub fn budgets(&self) -> crate::core::cost::budget::Budgets {
        crate::core::cost::budget::Budgets::from_settings(
            self.settings.iter().map(|(k, v)| (k.as_str(), v.value.as_str())),
        )
        .unwrap_or_default()
    }
}

fn strip_comment(line: &str) -> &str {
    let b = line.as_bytes();
    for i in 0..b.len() {
        if b[i] == b'#' && (i == 0 || b[i - 1] == b' ' || b[i - 1] == b'\t') {
            return line[..i].trim_end();
        }
    }
    line.trim_end()
}

/// A `## ` section as lines: (heading, its line number, (line number, text) of each body line).
type RawSection<'a> = (String, usize, Vec<(usize, &'a str)>);

/// Parse task.md text; `path` only names the file in errors.
pub fn parse(text: &str, path: &Path) -> Result<TaskSpec> {
    let err = |line: usize, msg: String| Error::TaskMd {
        path: path.to_path_buf(),
        line,
        msg,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut spec = TaskSpec::default();
    let (title, sections) = split_sections(text);
    spec.title = title;
    for (heading, hline, lines) in sections {
        let body = || {
            lines
                .iter()
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n")
                .trim()
                .to_string()
        };
        match heading.to_ascii_lowercase().as_str() {
            "goal" => spec.goal = Some(body()),
            "success criteria" => spec.success_criteria = Some(body()),
            "agent config" | "agent configuration" => {
                agent_config(&mut spec, hline, &lines).map_err(|(line, msg)| err(line, msg))?
            }
            _ => spec.other_sections.push((heading, body())),
        }
    }
    Ok(spec)
}

/// The title (the first `# ` heading before any section, without a `Task:` prefix) and the
/// `## ` sections, split outside code fences.
fn split_sections(text: &str) -> (Option<String>, Vec<RawSection<'_>>) {
    let mut title: Option<String> = None;
    let mut current: Option<RawSection<'_>> = None;
    let mut sections: Vec<RawSection<'_>> = Vec::new();
    let mut fence: Option<&str> = None;
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
            }
        } else if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(&t[..3]);
        } else if let Some(h) = line.strip_prefix("## ") {
            if let Some(c) = current.take() {
                sections.push(c);
            }
            current = Some((h.trim().to_string(), lineno, Vec::new()));
            continue;
        } else if let Some(h) = line.strip_prefix("# ") {
            if title.is_none() && current.is_none() {
                let h = h.trim();
                let t = match h.split_once(':') {
                    Some((k, v)) if k.trim().eq_ignore_ascii_case("task") => v.trim(),
                    _ => h,
                };
                title = Some(t.to_string()).filter(|t| !t.is_empty());
                continue;
            }
        }
        if let Some(c) = current.as_mut() {
            c.2.push((lineno, line));
        }
    }
    if let Some(c) = current.take() {
        sections.push(c);
    }
    (title, sections)
}

/// A task.md error before the file is named: (line, message).
type LineError = (usize, String);

/// The `## Agent Config` section (heading on line `hline`) into `spec.settings` (and `cwd`):
/// one `key: value` per line, lists and comments allowed, fenced lines passed over.
fn agent_config(spec: &mut TaskSpec, hline: usize, lines: &[(usize, &str)]) -> std::result::Result<(), LineError> {
    let mut in_fence = false;
    for &(lineno, line) in lines {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let t = strip_comment(t);
        let t = t.strip_prefix("- ").unwrap_or(t).trim();
        if t.is_empty() {
            continue;
        }
        let (key, value) = setting(t, hline).map_err(|m| (lineno, m))?;
        if let Some(prev) = spec.settings.get(&key) {
            return Err((
                lineno,
                format!(
                    "in '## Agent Config': '{key}' is set twice (first on line {}); keep one and comment out the other with '#'",
                    prev.line
                ),
            ));
        }
        check_value(&key, &value).map_err(|m| (lineno, m))?;
        if key == "cwd" {
            spec.cwd = Some(parse_cwd(&value).map_err(|m| (lineno, m))?);
        }
        spec.settings.insert(key, Setting { value, line: lineno });
    }
    Ok(())
}

/// One `key: value` line of the section headed on line `hline`: the key lowercased, bold
/// marks taken off both.
fn setting(t: &str, hline: usize) -> std::result::Result<(String, String), String> {
    let Some((k, v)) = t.split_once(':') else {
        return Err(format!(
            "in '## Agent Config' (line {hline}): expected 'key: value', found {:?}",
            crate::core::handoff::one_line(t, 60)
        ));
    };
    let key = k.trim().trim_matches('*').trim().to_ascii_lowercase();
    let value = v.trim().trim_start_matches('*').trim().to_string();
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
        return Err(format!(
            "in '## Agent Config': {key:?} is not a setting name (letters, digits, '_' and '-')"
        ));
    }
    if value.is_empty() {
        return Err(format!("in '## Agent Config': '{key}' has no value"));
    }
    Ok((key, value))
}

/// The settings whose values have a form (budgets, allow/deny lists, sandbox modes) are
/// checked when task.md is read, so a bad one is an error naming its line, not a surprise later.
fn check_value(key: &str, value: &str) -> std::result::Result<(), String> {
    if key == "budget" || key.starts_with("budget-") || key.starts_with("budget_") {
        crate::core::cost::budget::parse_limit(value)?;
    }
    if ["allow", "deny"].contains(&key) || key.starts_with("allow-") || key.starts_with("deny-") {
        crate::core::rules::parse_list(value).map_err(|m| format!("{key}: {m}"))?;
    }
    if key == "sandbox" || key.starts_with("sandbox-") {
        crate::core::sandbox::Mode::parse(value)?;
    }
    Ok(())
}

/// Parse the bytes of the task.md at `path` (named in errors): not UTF-8 is an error
/// naming the line where the text stops being valid.
pub fn decode(bytes: Vec<u8>, path: &Path) -> Result<TaskSpec> {
    let text = String::from_utf8(bytes).map_err(|e| Error::TaskMd {
        path: path.to_path_buf(),
        line: 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count(),
        msg: "not valid UTF-8; save task.md as UTF-8".into(),
    })?;
    parse(&text, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<TaskSpec> {
        parse(s, Path::new("tasks/t/task.md"))
    }

    #[test]
    fn seed_example_parses() {
        let t = p("# Task: Optimize DDS writer pool\n\n## Goal\nFix WriterPool exhaustion.\n\n## Agent Config\ncwd: /path/to/dds-module          # Local path for dev/architect\n# OR\n# cwd: user@remote:/path/to/repo    # Remote\n\n## Success Criteria\n- Reproduction test triggers crash\n\n## Notes\nkeep me\n").unwrap();
        assert_eq!(t.title.as_deref(), Some("Optimize DDS writer pool"));
        assert_eq!(t.goal.as_deref(), Some("Fix WriterPool exhaustion."));
        assert_eq!(
            t.cwd,
            Some(CwdSpec::Local {
                path: "/path/to/dds-module".into()
            })
        );
        assert_eq!(
            t.success_criteria.as_deref(),
            Some("- Reproduction test triggers crash")
        );
        assert_eq!(t.other_sections, vec![("Notes".to_string(), "keep me".to_string())]);
    }

    #[test]
    fn settings_and_unknown_keys() {
        let t = p("# T\n## Agent Config\ncheckin: 10m\nruntime: demo\nroster: seed001\n").unwrap();
        assert_eq!(t.setting("checkin"), Some("10m"));
        assert_eq!(t.setting("runtime"), Some("demo"));
        assert_eq!(t.setting("roster"), Some("seed001"));
        assert_eq!(t.settings["runtime"].line, 4);
        assert!(t.title.as_deref() == Some("T"));
    }

    #[test]
    fn malformed_config_names_the_line() {
        let e = p("# T\n\n## Agent Config\ncwd: /x\nthis is not a setting\n").unwrap_err();
        assert_eq!(e.to_string().split(": ").next().unwrap(), "tasks/t/task.md:5");
        let e = p("# T\n## Agent Config\ncwd: /x\ncwd: /y\n").unwrap_err();
        assert!(e.to_string().contains(":4:") && e.to_string().contains("twice"), "{e}");
        let e = p("# T\n## Agent Config\ncwd: -oProxyCommand=x:/p\n").unwrap_err();
        assert!(e.to_string().contains(":3:") && e.to_string().contains("'-'"), "{e}");
        let e = p("# T\n## Agent Config\ncheckin:\n").unwrap_err();
        assert!(e.to_string().contains("no value"), "{e}");
    }

    #[test]
    fn budgets_are_read_and_a_bad_one_names_its_line() {
        let t = p("# T\n## Agent Config\nbudget: 2M tokens\nbudget-dev: $5\n").unwrap();
        let b = t.budgets();
        assert_eq!(b.task, Some(crate::core::cost::budget::Limit::Tokens(2_000_000)));
        assert_eq!(b.roles["dev"], crate::core::cost::budget::Limit::Usd(5.0));
        let e = p("# T\n## Agent Config\nbudget: plenty\n").unwrap_err();
        assert!(
            e.to_string().contains(":3:") && e.to_string().contains("'2M tokens'"),
            "{e}"
        );
    }

    #[test]
    fn code_fences_are_ignored() {
        let t = p("# T\n## Goal\n```\n## Agent Config\ncwd: evil\n```\n").unwrap();
        assert_eq!(t.cwd, None);
        assert!(t.goal.unwrap().contains("cwd: evil"));
    }

    #[test]
    fn cwd_forms() {
        let r = |s: &str| parse_cwd(s);
        assert_eq!(
            r("user@host:/srv/repo").unwrap(),
            CwdSpec::Remote(RemoteSpec {
                user: Some("user".into()),
                host: "host".into(),
                port: None,
                path: "/srv/repo".into()
            })
        );
        assert_eq!(
            r("u@h.example:2222:/srv/my repo").unwrap(),
            CwdSpec::Remote(RemoteSpec {
                user: Some("u".into()),
                host: "h.example".into(),
                port: Some(2222),
                path: "/srv/my repo".into()
            })
        );
        assert_eq!(
            r("buildbox:~/repo").unwrap(),
            CwdSpec::Remote(RemoteSpec {
                user: None,
                host: "buildbox".into(),
                port: None,
                path: "~/repo".into()
            })
        );
        assert_eq!(r("./rel").unwrap(), CwdSpec::Local { path: "./rel".into() });
        assert_eq!(r("/a:b/c").unwrap(), CwdSpec::Local { path: "/a:b/c".into() });
        for bad in [
            "-oProxyCommand=touch:/x",
            "user@-host:/x",
            "-user@host:/x",
            "us er@host:/x",
            "user@ho;st:/x",
            "user@host:relative",
            "user@host:99999:/x",
            "user@$(id):/x",
            "a\nb",
            "",
        ] {
            assert!(r(bad).is_err(), "{bad:?} must be refused");
        }
        // Shell metacharacters in the path are kept literally (quoted later), never refused silently.
        assert!(matches!(r("user@host:/tmp/x; touch /tmp/p"), Ok(CwdSpec::Remote(_))));
    }
}
