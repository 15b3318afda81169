//! Real agent CLIs in a test world (Claude Code; Codex CLI and Gemini CLI likewise): the pinned binary, a throwaway HOME that says only
//! what a logged-in user's would (onboarding done, the folder trusted, a subscription
//! token), and the scripted model server behind it. Shared by tests/claude.rs and the
//! Claude Code benchmark.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::model::{ModelServer, ROUTE};
use super::*;

pub const TASK: &str = "dds-writer-pool";

/// The pinned Claude Code: `AO_TEST_CLAUDE`, else the copy scripts/test installs.
pub fn claude_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("AO_TEST_CLAUDE") {
        return PathBuf::from(p);
    }
    let version = std::fs::read_to_string(repo().join("tests/claude-code.version")).unwrap();
    let p = repo()
        .join(format!("target/claude-code-{}", version.trim()))
        .join("node_modules/.bin/claude");
    assert!(
        p.exists(),
        "Claude Code {} is not installed at {}: run scripts/test (it installs it), or set AO_TEST_CLAUDE=/path/to/claude",
        version.trim(),
        p.display()
    );
    p
}

/// A pinned npm program for the tests: `$env`, else the copy scripts/test installs into
/// `target/<dir>-<version from tests/<version_file>>/node_modules/.bin/<bin>`.
pub fn npm_bin(env: &str, version_file: &str, dir: &str, bin: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let version = std::fs::read_to_string(repo().join("tests").join(version_file)).unwrap();
    let p = repo()
        .join(format!("target/{dir}-{}", version.trim()))
        .join("node_modules/.bin")
        .join(bin);
    assert!(
        p.exists(),
        "{bin} {} is not installed at {}: run scripts/test (it installs it), or set {env}=/path/to/{bin}",
        version.trim(),
        p.display()
    );
    p
}

/// The pinned Codex CLI: `AO_TEST_CODEX`, else the copy scripts/test installs.
pub fn codex_bin() -> PathBuf {
    npm_bin("AO_TEST_CODEX", "codex.version", "codex", "codex")
}

/// The pinned Gemini CLI: `AO_TEST_GEMINI`, else the copy scripts/test installs.
pub fn gemini_bin() -> PathBuf {
    npm_bin("AO_TEST_GEMINI", "gemini.version", "gemini-cli", "gemini")
}

/// A world whose agents are real agent CLIs (Claude Code unless told otherwise) talking
/// to the scripted model.
pub struct Cc {
    pub w: World,
    pub model: ModelServer,
    pub home: PathBuf,
    pub path: String,
    /// The runtime `task setup-agents` and `task start` are given.
    pub runtime: String,
}

impl Cc {
    pub fn new() -> Cc {
        Cc::with_runtime("claude")
    }

    /// A world for one runtime (`claude`, `codex` or `gemini`).
    pub fn with_runtime(runtime: &str) -> Cc {
        Cc::with_programs(runtime, &[runtime])
    }

    /// A world started with `runtime`, where each of `programs` is installed and set up.
    pub fn with_programs(runtime: &str, programs: &[&str]) -> Cc {
        let w = World::new();
        let model = ModelServer::start();
        let home = w.dir.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut path = format!("{}", w.bin_dir.display());
        for p in programs {
            let bin = match *p {
                "claude" => {
                    // What a user who has logged in once and trusted the project has in ~/.claude.json.
                    let cfg = serde_json::json!({
                        "hasCompletedOnboarding": true,
                        "projects": { w.project.to_string_lossy(): { "hasTrustDialogAccepted": true } },
                    });
                    std::fs::write(home.join(".claude.json"), cfg.to_string()).unwrap();
                    claude_bin()
                }
                "codex" => {
                    // A provider at the scripted server (the key comes from OPENAI_API_KEY),
                    // the project trusted, no update check.
                    let dir = home.join(".codex");
                    std::fs::create_dir_all(&dir).unwrap();
                    let cfg = format!(
                        "model = \"gpt-scripted\"\nmodel_provider = \"scripted\"\ncheck_for_update_on_startup = false\n\n[model_providers.scripted]\nname = \"Scripted\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"OPENAI_API_KEY\"\n\n[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
                        model.url(),
                        w.project.display()
                    );
                    std::fs::write(dir.join("config.toml"), cfg).unwrap();
                    codex_bin()
                }
                "gemini" => {
                    // An API-key login, a fixed model (no routing call), no update check;
                    // folder trust off, as for a user who trusts their projects.
                    let dir = home.join(".gemini");
                    std::fs::create_dir_all(&dir).unwrap();
                    let cfg = serde_json::json!({
                        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
                        "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
                        "privacy": {"usageStatisticsEnabled": false},
                        "model": {"name": "gemini-2.5-flash"},
                    });
                    std::fs::write(dir.join("settings.json"), cfg.to_string()).unwrap();
                    gemini_bin()
                }
                other => panic!("no test setup for {other}"),
            };
            path.push(':');
            path.push_str(&bin.parent().unwrap().display().to_string());
        }
        path.push(':');
        path.push_str(&std::env::var("PATH").unwrap_or_default());
        Cc {
            w,
            model,
            home,
            path,
            runtime: runtime.to_string(),
        }
    }

    /// Every answer names `model`, whose context window is `window` tokens (as a user's
    /// config.toml would say), so context fills are known at a size a test can reach.
    pub fn with_window(&self, model: &str, window: u64) {
        let cfg = self.w.dir.path().join("config/agent-orchestrator");
        std::fs::create_dir_all(&cfg).unwrap();
        std::fs::write(
            cfg.join("config.toml"),
            format!("[context_windows]\n\"{model}\" = {window}\n"),
        )
        .unwrap();
        self.model.answer_as(model);
    }

    /// `task` with the user's environment: Claude Code's login and the model's address.
    pub fn task(&self, args: &[&str]) -> Command {
        let mut c = self.w.task();
        c.env("PATH", &self.path)
            .env("HOME", &self.home)
            .env("ANTHROPIC_BASE_URL", self.model.url())
            .env("CLAUDE_CODE_OAUTH_TOKEN", "sk-ant-oat01-scripted-test-token")
            .env_remove("ANTHROPIC_API_KEY")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("OPENAI_API_KEY", "sk-scripted-test-key")
            .env("GEMINI_API_KEY", "scripted-test-key")
            .env("GOOGLE_GEMINI_BASE_URL", self.model.url())
            .env_remove("CODEX_HOME")
            .env_remove("GOOGLE_API_KEY")
            .args(args);
        c
    }

    pub fn ok(&self, args: &[&str]) -> String {
        ok(&run(&mut self.task(args)))
    }

    /// The example task's goal in a new task, set up as a new user would, and started.
    pub fn start_example(&self) {
        self.start_example_with("");
    }

    /// The same, with `config` lines added to task.md's Agent Config (its last section).
    pub fn start_example_with(&self, config: &str) {
        self.ok(&["new", TASK]);
        let md = std::fs::read_to_string(repo().join("tasks.example").join(TASK).join("task.md")).unwrap();
        // A setting given here replaces the example's own (task.md refuses one set twice).
        let keys: Vec<&str> = config
            .lines()
            .filter_map(|l| l.split_once(':').map(|(k, _)| k))
            .collect();
        let md: String = md
            .lines()
            .filter(|l| !keys.iter().any(|k| l.starts_with(&format!("{k}:"))))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(self.task_dir().join("task.md"), format!("{md}{config}")).unwrap();
        if self.runtime == "claude" {
            let out = self.ok(&["setup-agents", "--runtime", "claude"]);
            assert!(out.contains("Bash(task handoff:*)"), "{out}");
        } else {
            self.ok(&["setup-agents", "--runtime", &self.runtime]);
        }
        self.ok(&["start", TASK, "--runtime", &self.runtime]);
    }

    pub fn state(&self) -> serde_json::Value {
        self.w.state(TASK)
    }

    pub fn task_dir(&self) -> PathBuf {
        self.w.project.join("tasks").join(TASK)
    }

    pub fn phase(&self) -> String {
        self.state()["phase"].as_str().unwrap_or_default().to_string()
    }

    /// Wait for the phase, showing the panes and the model's log when it never comes.
    pub fn wait_phase(&self, phase: &str, secs: u64) {
        wait_until(
            &format!("phase {phase}"),
            Duration::from_secs(secs),
            Duration::from_millis(200),
            || (self.phase() == phase).then_some(()),
            || format!("(phase {})\n{}", self.phase(), self.dump()),
        );
    }

    /// What every pane shows and what the model saw, for failure messages.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        for s in self.w.sessions() {
            out.push_str(&format!("=== {s}\n{}\n", self.w.capture(&format!("={s}:"))));
        }
        for s in self.model.seen().iter().filter(|s| s.main) {
            out.push_str(&format!(
                "--- {:?} new_turn={} {}\n    {}\n",
                s.agent,
                s.new_turn,
                s.answer,
                if s.new_turn { &s.said } else { &s.last_user }
                    .trim()
                    .chars()
                    .take(200)
                    .collect::<String>()
                    .replace('\n', " | ")
            ));
        }
        out.push_str(&format!(
            "--- events\n{}",
            std::fs::read_to_string(self.task_dir().join("events.jsonl")).unwrap_or_default()
        ));
        out
    }

    /// Have the notify command append each reason to a file of the world's; returns it.
    pub fn notify_to_file(&self) -> PathBuf {
        let cfg = self.w.dir.path().join("config/agent-orchestrator");
        std::fs::create_dir_all(&cfg).unwrap();
        let out = self.w.dir.path().join("NOTIFIED");
        std::fs::write(
            cfg.join("config.toml"),
            format!(
                "notify = [\"sh\", \"-c\", \"echo \\\"$0\\\" >> {}\", \"{{reason}}\"]\n",
                out.display()
            ),
        )
        .unwrap();
        out
    }

    /// The first tool result `agent`'s model was given that contains `text`.
    pub fn tool_output(&self, agent: &str, text: &str) -> Option<String> {
        self.model
            .seen()
            .into_iter()
            .find(|s| s.agent.as_deref() == Some(agent) && !s.new_turn && s.last_user.contains(text))
            .map(|s| s.last_user)
    }

    /// The spokes' handoffs on disk, by file name.
    pub fn spoke_handoffs(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.task_dir().join("handoffs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| ROUTE.iter().any(|r| n.starts_with(&format!("{r}-"))))
            .collect();
        v.sort();
        v
    }

    /// The first `kind` event of the task, waited for (the panes and the model's log
    /// shown when it never comes).
    pub fn wait_event(&self, kind: &str, secs: u64) -> serde_json::Value {
        wait_until(
            &format!("a {kind} event"),
            Duration::from_secs(secs),
            Duration::from_millis(100),
            || events(&self.task_dir(), kind).into_iter().next(),
            || self.dump(),
        )
    }

    /// The messages (as JSON text) of `agent`'s first request to its model whose
    /// conversation holds `text`: how a conversation began.
    pub fn first_request_with(&self, agent: &str, text: &str) -> String {
        self.model
            .seen()
            .into_iter()
            .filter(|s| s.main && s.agent.as_deref() == Some(agent))
            .map(|s| serde_json::to_string(&s.messages).unwrap())
            .find(|m| m.contains(text))
            .unwrap_or_else(|| panic!("no request of {agent} holds {text:?}\n{}", self.dump()))
    }

    /// In how many check-ins the handoff `file` was told: check-ins the PM's model was given,
    /// over all its conversations, as a turn of their own or put into a running turn.
    pub fn checkins_telling(&self, file: &str) -> usize {
        self.model
            .given("pm")
            .into_iter()
            .filter(|p| p.contains(file) && p.contains("Check-in for task"))
            .count()
    }

    /// Every spoke handoff, however many, reached the PM in exactly one check-in.
    pub fn assert_every_handoff_told_once(&self) {
        for f in &self.spoke_handoffs() {
            let n = self.checkins_telling(f);
            assert_eq!(n, 1, "{f} reached the PM {n} times\n{}", self.dump());
        }
    }

    /// Every spoke handoff reached the PM in a check-in (a turn of the PM's conversations)
    /// exactly once, one handoff per step of the route. A rotated PM's first prompt lists
    /// the last handoffs too: that is its memory, not a check-in.
    pub fn assert_each_handoff_told_once(&self) {
        let files = self.spoke_handoffs();
        assert_eq!(
            files.len(),
            ROUTE.len(),
            "one handoff per spoke: {files:?}\n{}",
            self.dump()
        );
        self.assert_every_handoff_told_once();
    }
}

impl Drop for Cc {
    fn drop(&mut self) {
        let _ = run(&mut self.task(&["stop", TASK]));
    }
}

/// The pid of the program in a session's pane. Waited for: a session being replaced (the
/// PM rotated or restarted under the same name) has no pane for a moment.
pub fn pane_pid(w: &World, session: &str) -> i32 {
    super::wait_for(&format!("a pane pid in session {session}"), 30, || {
        let o = w.tmux(&["display-message", "-p", "-t", &format!("={session}:"), "#{pane_pid}"]);
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    })
}

pub fn events(dir: &Path, kind: &str) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["kind"] == kind)
        .collect()
}

impl Cc {
    /// `task runtime check <runtime>` in this world passes every step, the probe reaches the
    /// model as a message of its own, and the scratch session is gone afterwards.
    pub fn assert_runtime_check_passes(&self) {
        self.ok(&["setup-agents", "--runtime", &self.runtime]);
        let o = run(&mut self.task(&["runtime", "check", &self.runtime, "--json"]));
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
        assert_eq!(o.status.code(), Some(0), "{v}\n{}\n{}", stderr(&o), self.dump());
        assert_eq!(v["passed"], true, "{v}");
        let steps: Vec<&str> = v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap())
            .collect();
        assert_eq!(steps, RUNTIME_CHECK_STEPS, "{v}");
        assert!(
            self.model
                .seen()
                .iter()
                .any(|s| s.main && s.said.contains("the probe message")),
            "{}",
            self.dump()
        );
        assert!(
            self.w.sessions().is_empty(),
            "the scratch session is gone: {:?}",
            self.w.sessions()
        );
    }

    /// The example task, started on this world's runtime everywhere, completes: every spoke's
    /// handoff told to the PM once, every agent on that runtime, and every tool call came
    /// back with `task`'s answer rather than a refusal. `instructions` is the file
    /// `setup-agents` writes for a runtime without agent files.
    pub fn assert_example_completes_everywhere(&self, instructions: &str) {
        self.start_example();
        assert!(
            self.w.project.join(instructions).exists(),
            "setup-agents wrote {instructions}"
        );
        self.wait_phase("COMPLETE", 300);
        self.assert_each_handoff_told_once();
        let st = self.state();
        for a in super::model::ROUTE.iter().chain(["pm"].iter()) {
            assert_eq!(st["agents"][a]["runtime"], self.runtime.as_str(), "{a}");
        }
        for s in self.model.seen().iter().filter(|s| s.main && !s.new_turn) {
            assert!(
                !s.last_user.contains("command not found") && !s.last_user.contains("rejected"),
                "{}",
                s.last_user
            );
        }
    }
}
