//! Runtimes: how an agent is launched, and what its screen looks like.
//!
//! A runtime is an argv template (never a shell string) plus the screen
//! patterns verified delivery needs. The built-ins — `claude`, `codex`, `gemini`, `kiro`, `demo`
//! — live in templates/runtimes/*.toml; users add profiles, or override a
//! built-in, in `$XDG_CONFIG_HOME/agent-orchestrator/config.toml` under
//! `[runtimes.<name>]` with the same fields.
//!
//! Placeholders, each replaced inside one argv element: `{agent}`, `{task}`,
//! `{session}`, `{session_id}`, `{prompt}` (the first prompt, as one argument),
//! `{prompt_file}` (the saved preamble), `{task_bin}` (this `task` binary),
//! `{task_dir}` (the task folder, which an agent must be able to write in),
//! `{permission_mode}` (the profile's `permission_mode`, or task.md's) and
//! `{settings}` (the agent's own allow rules as Claude Code settings JSON).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::core::error::{Error, Result};
use crate::core::screen::{PatternSpec, Patterns};

const BUILTIN: [(&str, &str); 5] = [
    ("claude", include_str!("../../templates/runtimes/claude.toml")),
    ("codex", include_str!("../../templates/runtimes/codex.toml")),
    ("gemini", include_str!("../../templates/runtimes/gemini.toml")),
    ("kiro", include_str!("../../templates/runtimes/kiro.toml")),
    ("demo", include_str!("../../templates/runtimes/demo.toml")),
];

/// A runtime profile as written in TOML.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// One line for `--help` and errors.
    #[serde(default)]
    pub description: String,
    /// The argv template.
    pub argv: Vec<String>,
    /// How to install the program, for the "not found" error.
    #[serde(default)]
    pub install: String,
    /// Prompts longer than this many bytes are not passed as an argument;
    /// the agent is told to read the saved file instead.
    #[serde(default = "default_max_prompt")]
    pub max_prompt_arg: usize,
    /// The short first prompt used instead of a long one; `{prompt_file}` is replaced.
    #[serde(default = "default_file_prompt")]
    pub file_prompt: String,
    /// Seconds to wait for the input prompt before a message is given up.
    #[serde(default = "default_ready_secs")]
    pub ready_timeout_secs: u64,
    /// The argv that resumes a conversation (`{session_id}` is the one recorded at start);
    /// used when the daemon restarts a dead PM. Absent: the PM starts afresh.
    #[serde(default)]
    pub resume_argv: Option<Vec<String>>,
    /// tmux keys that clear the input area, used to recover from an interrupted delivery.
    #[serde(default)]
    pub clear_keys: Vec<String>,
    /// Enter presses that submit a pasted message (default 1).
    #[serde(default = "default_enters")]
    pub submit_enters: u32,
    /// tmux keys that close the menu `patterns.usage_limit_menu` describes (Claude Code:
    /// `Escape`, its cancel), pressed only while that menu is on screen.
    #[serde(default)]
    pub usage_limit_menu_keys: Vec<String>,
    /// The permission mode agents start in (`{permission_mode}`; Claude Code's
    /// `--permission-mode`). task.md's `permission_mode:` overrides it.
    #[serde(default)]
    pub permission_mode: Option<String>,
    /// Screen patterns.
    #[serde(default)]
    pub patterns: PatternSpec,
}

fn default_enters() -> u32 {
    1
}

fn default_max_prompt() -> usize {
    // tmux passes a command to its server in one message of at most 16 KiB.
    8 * 1024
}
fn default_file_prompt() -> String {
    "Read the file {prompt_file} now and follow the instructions in it exactly.".into()
}
fn default_ready_secs() -> u64 {
    60
}

/// A resolved runtime, ready to build command lines.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// Its name (`claude`, `kiro`, `demo` or a profile name).
    pub name: String,
    /// The profile.
    pub profile: Profile,
    /// Compiled screen patterns.
    pub patterns: Patterns,
}

/// Values for the placeholders.
#[derive(Debug, Clone)]
pub struct Vars<'a> {
    pub agent: &'a str,
    pub task: &'a str,
    pub session: &'a str,
    pub session_id: &'a str,
    pub prompt: &'a str,
    pub prompt_file: &'a Path,
    pub task_bin: &'a Path,
    pub task_dir: &'a str,
    pub permission_mode: &'a str,
    pub settings: &'a str,
    /// Codex's sandbox ([`crate::core::sandbox::CodexSandbox`]).
    pub codex: &'a crate::core::sandbox::CodexSandbox,
}

/// A sandbox the supervisor knows how to turn on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxKind {
    /// Claude Code's, through `--settings`.
    Claude,
    /// Codex CLI's, through `--sandbox` and `-c` overrides.
    Codex,
}

impl SandboxKind {
    /// The programs it needs on PATH.
    pub fn tools(self) -> &'static [&'static str] {
        match self {
            SandboxKind::Claude => crate::io::sandbox::CLAUDE_TOOLS,
            SandboxKind::Codex => crate::io::sandbox::CODEX_TOOLS,
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct ConfigFile {
    #[serde(default)]
    runtimes: BTreeMap<String, Profile>,
}

fn user_profiles() -> Result<BTreeMap<String, Profile>> {
    let Some((path, text)) = crate::io::config::text()? else {
        return Ok(BTreeMap::new());
    };
    let cfg: ConfigFile = toml::from_str(&text).map_err(|e| crate::io::config::not_toml(&path, &e))?;
    Ok(cfg.runtimes)
}

/// The names of every known runtime (built-in and configured).
pub fn names() -> Vec<String> {
    let mut v: Vec<String> = BUILTIN.iter().map(|(n, _)| n.to_string()).collect();
    if let Ok(u) = user_profiles() {
        for k in u.into_keys() {
            if !v.contains(&k) {
                v.push(k);
            }
        }
    }
    v
}

/// A built-in runtime as shipped, ignoring the user's config (for tests of the shipped patterns).
#[cfg(test)]
pub fn resolve_builtin(name: &str) -> Option<Runtime> {
    let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
    let profile: Profile = toml::from_str(text).expect("built-in runtime profiles parse");
    let patterns = profile.patterns.compile().expect("built-in patterns compile");
    Some(Runtime {
        name: name.to_string(),
        profile,
        patterns,
    })
}

/// Every runtime by name, resolved (or why it cannot be): the built-ins, each replaced by
/// the user's profile of the same name, and the user's own.
type Resolved = BTreeMap<String, std::result::Result<std::sync::Arc<Runtime>, String>>;

/// The runtimes resolved with the user's config file, per version of that file (a
/// process memo: [`crate::store::memo`]).
#[derive(Default)]
struct WithUser(crate::store::parsed::Cache<std::sync::Arc<Resolved>>);

impl crate::store::memo::Memo for WithUser {
    const NAME: &'static str = "runtime config";
    fn entries(&self) -> usize {
        self.0.len()
    }
}

fn resolve_all(user: BTreeMap<String, Profile>) -> Resolved {
    let mut all = Resolved::new();
    for (name, text) in BUILTIN {
        let profile = toml::from_str(text).expect("built-in runtime profiles parse");
        all.insert(name.to_string(), build(name, profile));
    }
    for (name, profile) in user {
        let built = build(&name, profile);
        all.insert(name, built);
    }
    all
}

fn build(name: &str, profile: Profile) -> std::result::Result<std::sync::Arc<Runtime>, String> {
    if profile.argv.is_empty() {
        return Err(format!("runtime {name:?} has an empty argv"));
    }
    let patterns = profile
        .patterns
        .compile()
        .map_err(|e| format!("runtime {name:?}: {e}"))?;
    Ok(std::sync::Arc::new(Runtime {
        name: name.to_string(),
        profile,
        patterns,
    }))
}

/// [`resolve`] once per name for one look at a team: the config's file is checked once,
/// not once per agent (a team's agents mostly share their runtime).
#[derive(Default)]
pub struct Resolver(Vec<(String, std::sync::Arc<Runtime>)>);

impl Resolver {
    /// The runtime `name` resolves to, as [`resolve`] gave it the first time it was asked.
    pub fn get(&mut self, name: &str) -> Result<std::sync::Arc<Runtime>> {
        if let Some((_, rt)) = self.0.iter().find(|(n, _)| n == name) {
            return Ok(rt.clone());
        }
        let rt = resolve(name)?;
        self.0.push((name.to_string(), rt.clone()));
        Ok(rt)
    }
}

/// Resolve a runtime by name: the user's config wins over a built-in of the same name.
/// Parsed and compiled once per version of the config file (the daemon asks for the
/// agents' screen patterns on every tick: parsing the profiles and compiling their
/// patterns each time was the biggest part of an idle daemon's work). Shared, not copied:
/// a profile is dozens of strings, and the daemon asks for every agent on every look.
pub fn resolve(name: &str) -> Result<std::sync::Arc<Runtime>> {
    static BUILT_IN: std::sync::LazyLock<Resolved> = std::sync::LazyLock::new(|| resolve_all(BTreeMap::new()));
    let with_user = match crate::io::config::path() {
        Some(path) => crate::store::memo::get::<WithUser>().0.get(
            &path,
            |e| Error::io("read", &path, e),
            |bytes| {
                let text = std::str::from_utf8(bytes)
                    .map_err(|e| Error::BadInput(format!("{}: not UTF-8 ({e})", path.display())))?;
                let cfg: ConfigFile = toml::from_str(text).map_err(|e| crate::io::config::not_toml(&path, &e))?;
                Ok(std::sync::Arc::new(resolve_all(cfg.runtimes)))
            },
        )?,
        None => None,
    };
    let all = with_user.as_deref().unwrap_or(&BUILT_IN);
    match all.get(name) {
        Some(Ok(rt)) => Ok(rt.clone()),
        Some(Err(e)) => Err(Error::BadInput(e.clone())),
        None => Err(Error::BadInput(format!(
            "unknown runtime {name:?}; choose one of {} or add [runtimes.{name}] to {}",
            names().join(", "),
            crate::io::config::path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "the config file".into())
        ))),
    }
}

fn substitute(template: &str, v: &Vars<'_>, prompt: &str) -> String {
    template
        .replace("{agent}", v.agent)
        .replace("{task}", v.task)
        .replace("{session_id}", v.session_id)
        .replace("{session}", v.session)
        .replace("{prompt_file}", &v.prompt_file.to_string_lossy())
        .replace("{task_bin}", &v.task_bin.to_string_lossy())
        .replace("{task_dir}", v.task_dir)
        .replace("{permission_mode}", v.permission_mode)
        .replace("{settings}", v.settings)
        .replace("{sandbox_mode}", v.codex.mode)
        .replace("{writable_roots}", &v.codex.writable_roots)
        .replace("{network_access}", v.codex.network_access)
        .replace("{prompt}", prompt)
}

impl Runtime {
    /// The first prompt: the preamble itself when short enough, else an instruction to read the file.
    pub fn first_prompt<'a>(&self, preamble: &'a str, prompt_file: &Path) -> std::borrow::Cow<'a, str> {
        if preamble.len() <= self.profile.max_prompt_arg {
            preamble.into()
        } else {
            self.profile
                .file_prompt
                .replace("{prompt_file}", &prompt_file.to_string_lossy())
                .into()
        }
    }

    /// Error (naming the program, how to install it, and the alternatives) unless the program is on PATH.
    pub fn ensure_installed(&self, task_bin: &Path) -> Result<()> {
        let program = self.profile.argv[0].replace("{task_bin}", &task_bin.to_string_lossy());
        self.check_program(&program)
    }

    fn check_program(&self, program: &str) -> Result<()> {
        if crate::io::program::which(program).is_none() {
            let how = if self.profile.install.is_empty() {
                String::new()
            } else {
                format!(" Install it with: {}.", self.profile.install)
            };
            return Err(Error::BadInput(format!(
                "runtime '{}'{} needs the program '{}', which is not on PATH.{how} Or choose another runtime with --runtime ({}).",
                self.name,
                if self.profile.description.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", self.profile.description)
                },
                program,
                names().join(", ")
            )));
        }
        Ok(())
    }

    /// The permission mode agents of `task` start in: task.md's `permission_mode:`, else
    /// the profile's, else Claude Code's own `default`. Checked before anything starts.
    pub fn permission_mode(&self, spec: &crate::core::model::TaskSpec) -> Result<String> {
        let mode = spec
            .setting("permission_mode")
            .map(str::to_string)
            .or_else(|| self.profile.permission_mode.clone())
            .unwrap_or_else(|| "default".into());
        if self.uses_permission_mode() {
            crate::io::permissions::check_mode(&mode).map_err(|e| {
                Error::BadInput(format!(
                    "runtime '{}': {e} (permission_mode: in task.md or the runtime profile)",
                    self.name
                ))
            })?;
        }
        Ok(mode)
    }

    /// Which sandbox the supervisor can turn on for this runtime, by what its argv
    /// carries: Claude Code's (`{settings}`), Codex's (`{sandbox_mode}`), or none.
    pub fn sandbox_kind(&self) -> Option<SandboxKind> {
        let has = |p: &str| self.profile.argv.iter().any(|a| a.contains(p));
        if has("{settings}") {
            Some(SandboxKind::Claude)
        } else if has("{sandbox_mode}") {
            Some(SandboxKind::Codex)
        } else {
            None
        }
    }

    /// Whether this runtime's command line carries a permission mode at all.
    pub fn uses_permission_mode(&self) -> bool {
        let all = self
            .profile
            .argv
            .iter()
            .chain(self.profile.resume_argv.iter().flatten());
        all.into_iter().any(|a| a.contains("{permission_mode}"))
    }

    /// Build the argv; errors before anything starts when the program is missing.
    pub fn argv(&self, v: &Vars<'_>) -> Result<Vec<String>> {
        let prompt = self.first_prompt(v.prompt, v.prompt_file);
        let argv: Vec<String> = self.profile.argv.iter().map(|a| substitute(a, v, &prompt)).collect();
        self.check_program(&argv[0])?;
        Ok(argv)
    }

    /// Delivery timing for this runtime.
    pub fn delivery_options(&self) -> crate::io::delivery::Options {
        crate::io::delivery::Options {
            ready_timeout: std::time::Duration::from_secs(self.profile.ready_timeout_secs),
            // A queued message is taken when the running turn ends: as long a wait as for
            // a busy agent to become ready.
            queued_timeout: std::time::Duration::from_secs(self.profile.ready_timeout_secs),
            submit_enters: self.profile.submit_enters,
            clear_keys: self.profile.clear_keys.clone(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_compile() {
        for (name, text) in BUILTIN {
            let p: Profile = toml::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
            p.patterns.compile().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!p.patterns.ready.is_empty(), "{name} knows when it is ready");
        }
    }

    #[test]
    fn placeholders_fill_whole_arguments_and_long_prompts_go_to_a_file() {
        let rt = Runtime {
            name: "x".into(),
            profile: Profile {
                description: String::new(),
                argv: vec!["/bin/sh".into(), "--agent={agent}".into(), "{prompt}".into()],
                install: String::new(),
                max_prompt_arg: 10,
                file_prompt: default_file_prompt(),
                ready_timeout_secs: 1,
                submit_enters: 1,
                clear_keys: Vec::new(),
                usage_limit_menu_keys: Vec::new(),
                resume_argv: None,
                permission_mode: None,
                patterns: PatternSpec::default(),
            },
            patterns: PatternSpec::default().compile().unwrap(),
        };
        let v = Vars {
            agent: "dev",
            task: "t",
            session: "ao-t-dev",
            session_id: "u",
            prompt: "a;$(x)",
            prompt_file: Path::new("/p/pre amble.md"),
            task_bin: Path::new("/bin/task"),
            task_dir: "/p/tasks/t",
            permission_mode: "default",
            settings: "{}",
            codex: &crate::core::sandbox::codex_sandbox(None, "/p/tasks/t", Path::new("/home/u")),
        };
        assert_eq!(rt.argv(&v).unwrap(), vec!["/bin/sh", "--agent=dev", "a;$(x)"]);
        let long = "y".repeat(11);
        let v2 = Vars {
            prompt: &long,
            ..v.clone()
        };
        assert_eq!(
            rt.argv(&v2).unwrap()[2],
            "Read the file /p/pre amble.md now and follow the instructions in it exactly."
        );
        let missing = Runtime {
            profile: Profile {
                argv: vec!["no-such-agent-binary".into()],
                install: "npm i x".into(),
                ..rt.profile.clone()
            },
            ..rt
        };
        let e = missing.argv(&v).unwrap_err().to_string();
        assert!(
            e.contains("no-such-agent-binary") && e.contains("npm i x") && e.contains("--runtime"),
            "{e}"
        );
    }
}
