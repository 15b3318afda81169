//! Which agents run their shell commands inside Claude Code's sandbox, and what the
//! sandbox lets them touch.
//!
//! An agent that stops at "Do you want to proceed?" for `make test` stalls the task until
//! a human wakes up; `bypassPermissions` instead lets it run anything, anywhere. Claude
//! Code's own sandbox (bubblewrap and a network proxy on Linux) sits between the two: every
//! Bash command runs without a prompt, and the operating system confines its writes to
//! the agent's folders and its network to the domains the task names. Roles that build and
//! test get it by default; what each agent gets is decided here from task.md, and
//! [`claude_settings`] says it in Claude Code's settings.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The roles that run commands (build, test, lint) and get the sandbox unless told otherwise.
pub const DEFAULT_ON: [&str; 4] = ["dev", "test", "review", "architect"];

/// Folders and files under the user's home that a sandboxed command may not read: keys and
/// tokens an agent never needs to build or test. task.md `sandbox_deny_read:` adds more.
pub const SECRETS: [&str; 13] = [
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".gnupg",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
];

/// task.md `sandbox:` / `sandbox-<agent>:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Sandboxed where the machine supports it; started without (and said so) where not.
    On,
    /// Not sandboxed: its commands ask as before.
    Off,
    /// Sandboxed, or not started at all.
    Required,
}

impl Mode {
    /// Read a setting's value.
    pub fn parse(value: &str) -> Result<Mode, String> {
        match value.trim().to_ascii_lowercase().as_str() {
            "on" | "yes" | "true" => Ok(Mode::On),
            "off" | "no" | "false" => Ok(Mode::Off),
            "required" => Ok(Mode::Required),
            other => Err(format!("sandbox: {other:?} is not one of on, off, required")),
        }
    }
}

/// What one agent's sandbox is, before the machine is asked whether it can have one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// On, off or required.
    pub mode: Mode,
    /// Folders it may write beyond its working folder, as task.md wrote them (`~/` allowed).
    pub write: Vec<String>,
    /// Paths it may not read, beyond [`SECRETS`], as task.md wrote them.
    pub deny_read: Vec<String>,
    /// Domains its commands may reach; none by default.
    pub domains: Vec<String>,
}

/// A comma-separated list setting (`network: docs.rs, crates.io`); `none` is empty.
fn list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty() && !s.eq_ignore_ascii_case("none"))
        .map(str::to_string)
        .collect()
}

/// The policy for `agent` from task.md's settings (`setting` looks one up): `sandbox-<agent>:`
/// over `sandbox:` over the role's default ([`DEFAULT_ON`]); `sandbox_write:`,
/// `sandbox_deny_read:` and `network:` as lists.
pub fn policy(agent: &str, setting: impl Fn(&str) -> Option<String>) -> Result<Policy, String> {
    let mode = match setting(&format!("sandbox-{agent}")).or_else(|| setting("sandbox")) {
        Some(v) => Mode::parse(&v)?,
        None if DEFAULT_ON.contains(&agent) => Mode::On,
        None => Mode::Off,
    };
    Ok(Policy {
        mode,
        write: list(setting("sandbox_write").as_deref()),
        deny_read: list(setting("sandbox_deny_read").as_deref()),
        domains: list(setting("network").as_deref()),
    })
}

/// `~/x` as a path under `home`; anything else as written.
fn expand(p: &str, home: &Path) -> String {
    match p.strip_prefix("~/") {
        Some(rest) => home.join(rest).display().to_string(),
        None if p == "~" => home.display().to_string(),
        None => p.to_string(),
    }
}

/// Claude Code's `sandbox` settings for a policy that is on. Claude Code lets a sandboxed
/// command write its working folder and the folders given with `--add-dir` (the task
/// folder); `p.write` adds to that, and `read_only` are folders inside those that stay
/// read-only (the project's other tasks). `home` expands `~/`. Commands may not leave the
/// sandbox (`allowUnsandboxedCommands: false`): a command that fails inside it fails,
/// rather than falling back to a prompt nobody answers.
pub fn claude_settings(p: &Policy, read_only: &[PathBuf], home: &Path) -> Value {
    let write: Vec<String> = p.write.iter().map(|w| expand(w, home)).collect();
    let deny_write: Vec<String> = read_only.iter().map(|w| w.display().to_string()).collect();
    let mut deny: Vec<String> = SECRETS.iter().map(|s| home.join(s).display().to_string()).collect();
    deny.extend(p.deny_read.iter().map(|d| expand(d, home)));
    json!({
        "enabled": true,
        "autoAllowBashIfSandboxed": true,
        "allowUnsandboxedCommands": false,
        "failIfUnavailable": p.mode == Mode::Required,
        "filesystem": {"allowWrite": write, "denyWrite": deny_write, "denyRead": deny},
        "network": {"allowedDomains": p.domains},
    })
}

/// Codex CLI's own sandbox for a policy, as the values of its command line
/// (`--sandbox {sandbox_mode} -c sandbox_workspace_write.writable_roots={writable_roots}
/// -c sandbox_workspace_write.network_access={network_access}`). On: `workspace-write`,
/// its working folder writable as always, plus the task folder and task.md's
/// `sandbox_write:`; the network on only when task.md names domains (Codex cannot allow
/// some domains and not others). Off (`None`): no sandbox, as the profile ran before.
/// Codex's sandbox does not hide reads (the secrets list) nor keep other tasks' folders
/// read-only inside the working folder: README's runtime table says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexSandbox {
    /// `workspace-write` or `danger-full-access`.
    pub mode: &'static str,
    /// A TOML array of paths.
    pub writable_roots: String,
    /// `true` or `false`.
    pub network_access: &'static str,
}

/// See [`CodexSandbox`]. Pure.
pub fn codex_sandbox(p: Option<&Policy>, task_dir: &str, home: &Path) -> CodexSandbox {
    let Some(p) = p else {
        return CodexSandbox {
            mode: "danger-full-access",
            writable_roots: "[]".into(),
            network_access: "true",
        };
    };
    let roots: Vec<String> = std::iter::once(task_dir.to_string())
        .chain(p.write.iter().map(|w| expand(w, home)))
        .collect();
    CodexSandbox {
        mode: "workspace-write",
        // TOML basic strings take JSON's escapes: a path with a quote stays one string.
        writable_roots: serde_json::to_string(&roots).unwrap_or_else(|_| "[]".into()),
        network_access: if p.domains.is_empty() { "false" } else { "true" },
    }
}

/// One agent's sandbox as it was started: for the spawn event, `task start` and status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Commands run inside the sandbox.
    On,
    /// Not asked for.
    Off,
    /// Asked for (`on`) but the machine cannot give it; why.
    Unavailable(String),
    /// The runtime has no sandbox the supervisor can turn on.
    Unsupported,
}

impl State {
    /// The word for events and `--json`.
    pub fn as_str(&self) -> &'static str {
        match self {
            State::On => "on",
            State::Off => "off",
            State::Unavailable(_) => "unavailable",
            State::Unsupported => "unsupported",
        }
    }

    /// Why a sandbox asked for is not on.
    pub fn why(&self) -> Option<String> {
        match self {
            State::Unavailable(why) => Some(why.clone()),
            _ => None,
        }
    }
}

/// Decide the state from the policy, whether the runtime can be sandboxed, and what the
/// machine said (`Err(why)`: bubblewrap or socat missing, or a sandbox that does not run).
/// `Err` when the policy requires a sandbox that cannot be had: nothing may start.
pub fn decide(p: &Policy, runtime: &str, runtime_supports: bool, machine: Result<(), String>) -> Result<State, String> {
    match (p.mode, runtime_supports, machine) {
        (Mode::Off, _, _) => Ok(State::Off),
        (Mode::On, false, _) => Ok(State::Unsupported),
        (Mode::Required, false, _) => Err(format!(
            "sandbox: required, but runtime '{runtime}' has no sandbox the supervisor can turn on (Claude Code and Codex have); \
             set sandbox: on or off for it in task.md's Agent Config"
        )),
        (_, true, Ok(())) => Ok(State::On),
        (Mode::On, true, Err(why)) => Ok(State::Unavailable(why)),
        (Mode::Required, true, Err(why)) => Err(format!(
            "sandbox: required, but this machine cannot sandbox commands: {why}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn roles_that_run_commands_are_sandboxed_unless_task_md_says_otherwise() {
        assert_eq!(policy("dev", settings(&[])).unwrap().mode, Mode::On);
        assert_eq!(policy("review", settings(&[])).unwrap().mode, Mode::On);
        assert_eq!(policy("pm", settings(&[])).unwrap().mode, Mode::Off);
        assert_eq!(policy("explore", settings(&[])).unwrap().mode, Mode::Off);
        let s = settings(&[("sandbox", "off"), ("sandbox-review", "required")]);
        assert_eq!(policy("dev", &s).unwrap().mode, Mode::Off);
        assert_eq!(policy("review", &s).unwrap().mode, Mode::Required);
        assert_eq!(policy("pm", settings(&[("sandbox", "on")])).unwrap().mode, Mode::On);
        let e = policy("dev", settings(&[("sandbox", "maybe")])).unwrap_err();
        assert!(e.contains("\"maybe\"") && e.contains("on, off, required"), "{e}");
    }

    #[test]
    fn codex_gets_workspace_write_with_the_task_folder_and_network_only_for_domains() {
        let home = Path::new("/home/u");
        let off = codex_sandbox(None, "/p/tasks/t", home);
        assert_eq!((off.mode, off.network_access), ("danger-full-access", "true"));
        let p = policy("dev", settings(&[("sandbox_write", "~/.cargo/registry, /opt/c\"x")])).unwrap();
        let on = codex_sandbox(Some(&p), "/p/tasks/t", home);
        assert_eq!(on.mode, "workspace-write");
        assert_eq!(on.network_access, "false");
        assert_eq!(
            on.writable_roots,
            r#"["/p/tasks/t","/home/u/.cargo/registry","/opt/c\"x"]"#
        );
        let v: toml::Value = toml::from_str(&format!("r = {}", on.writable_roots)).unwrap();
        assert_eq!(v["r"][2].as_str(), Some("/opt/c\"x"), "the array is TOML too");
        let p = policy("dev", settings(&[("network", "crates.io")])).unwrap();
        assert_eq!(codex_sandbox(Some(&p), "/t", home).network_access, "true");
    }

    #[test]
    fn lists_are_read_and_none_is_empty() {
        let s = settings(&[
            ("network", "docs.rs, crates.io ,"),
            ("sandbox_write", "~/.cargo/registry"),
            ("sandbox_deny_read", "none"),
        ]);
        let p = policy("dev", &s).unwrap();
        assert_eq!(p.domains, vec!["docs.rs", "crates.io"]);
        assert_eq!(p.write, vec!["~/.cargo/registry"]);
        assert!(p.deny_read.is_empty());
    }

    #[test]
    fn the_settings_confine_writes_hide_secrets_and_keep_commands_inside() {
        let p = policy(
            "dev",
            settings(&[
                ("sandbox_write", "~/.cargo/registry, /opt/cache"),
                ("sandbox_deny_read", "~/work/.env"),
            ]),
        )
        .unwrap();
        let v = claude_settings(&p, &[PathBuf::from("/p/tasks/other")], Path::new("/home/u"));
        assert_eq!(v["enabled"], true);
        assert_eq!(v["autoAllowBashIfSandboxed"], true);
        assert_eq!(v["allowUnsandboxedCommands"], false);
        assert_eq!(v["failIfUnavailable"], false);
        assert_eq!(
            v["filesystem"]["allowWrite"],
            json!(["/home/u/.cargo/registry", "/opt/cache"])
        );
        assert_eq!(v["filesystem"]["denyWrite"], json!(["/p/tasks/other"]));
        let deny: Vec<&str> = v["filesystem"]["denyRead"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_str().unwrap())
            .collect();
        assert!(
            deny.contains(&"/home/u/.ssh") && deny.contains(&"/home/u/.aws"),
            "{deny:?}"
        );
        assert_eq!(deny.last(), Some(&"/home/u/work/.env"));
        assert_eq!(v["network"]["allowedDomains"], json!([]));
        let req = Policy {
            mode: Mode::Required,
            ..p
        };
        assert_eq!(claude_settings(&req, &[], Path::new("/h"))["failIfUnavailable"], true);
    }

    #[test]
    fn a_required_sandbox_that_cannot_be_had_stops_the_start() {
        let p = |mode| Policy {
            mode,
            write: vec![],
            deny_read: vec![],
            domains: vec![],
        };
        assert_eq!(decide(&p(Mode::On), "claude", true, Ok(())), Ok(State::On));
        assert_eq!(decide(&p(Mode::Off), "claude", true, Err("x".into())), Ok(State::Off));
        assert_eq!(
            decide(&p(Mode::On), "claude", true, Err("no bwrap".into())),
            Ok(State::Unavailable("no bwrap".into()))
        );
        assert_eq!(decide(&p(Mode::On), "kiro", false, Ok(())), Ok(State::Unsupported));
        let e = decide(&p(Mode::Required), "claude", true, Err("no bwrap".into())).unwrap_err();
        assert!(e.contains("no bwrap"), "{e}");
        let e = decide(&p(Mode::Required), "kiro", false, Ok(())).unwrap_err();
        assert!(e.contains("'kiro'"), "{e}");
    }
}
