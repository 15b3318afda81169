//! The steps most tests begin with: `task new` (with an Agent Config), the PM's
//! handoff, `task spawn` of an idle demo agent, reading events.jsonl.

use std::process::Output;

use serde_json::Value;

use super::{World, ok, run, run_with_stdin, wait_for};

/// `task start` of a task whose PM is an idle demo agent, built up and then run; see
/// [`World::start_idle_pm`].
pub struct StartCmd<'a> {
    w: &'a World,
    task: String,
    new: Option<String>,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

impl StartCmd<'_> {
    /// `task new` first, with `config` as task.md's Agent Config (may be empty).
    pub fn new_task(mut self, config: &str) -> Self {
        self.new = Some(config.into());
        self
    }

    /// An environment variable for `task start` (and so for the daemon it starts).
    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// One more argument (`--no-daemon`, `--no-cron`).
    pub fn arg(mut self, a: &str) -> Self {
        self.args.push(a.into());
        self
    }

    /// Start it, wait for the PM's prompt; the PM's pane and what `task start` printed.
    pub fn run(self) -> (String, String) {
        if let Some(config) = &self.new {
            self.w.new_task(&self.task, config);
        }
        let mut c = self.w.task();
        c.env("AO_DEMO_IDLE", "1")
            .args(["start", &self.task, "--runtime", "demo"]);
        c.args(&self.args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        let out = ok(&run(&mut c));
        let pane = self.w.pane(&self.task, "pm");
        self.w.wait_demo_prompt(&pane);
        (pane, out)
    }
}

/// `task handoff`, built up and then written; see [`World::handoff`].
pub struct HandoffCmd<'a> {
    w: &'a World,
    args: Vec<String>,
    body: Option<Vec<u8>>,
}

impl HandoffCmd<'_> {
    /// `--target`.
    pub fn target(mut self, agent: &str) -> Self {
        self.args.extend(["--target".into(), agent.into()]);
        self
    }

    /// `--next`.
    pub fn next(mut self, agent: &str) -> Self {
        self.args.extend(["--next".into(), agent.into()]);
        self
    }

    /// `--body-file -` with this body on stdin.
    pub fn body(mut self, body: impl AsRef<[u8]>) -> Self {
        self.body = Some(body.as_ref().to_vec());
        self
    }

    /// Run it; its output.
    pub fn output(self) -> Output {
        let mut c = self.w.task();
        c.args(&self.args);
        match self.body {
            Some(b) => run_with_stdin(c.args(["--body-file", "-"]), &b),
            None => run(&mut c),
        }
    }

    /// Write it (it must succeed); the path printed.
    pub fn write(self) -> String {
        ok(&self.output()).trim().to_string()
    }
}

impl World {
    /// `task new <task>`; a non-empty `config` becomes task.md's `## Agent Config`.
    pub fn new_task(&self, task: &str, config: &str) {
        ok(&run(self.task().args(["new", task])));
        if !config.is_empty() {
            self.write_config(task, config);
        }
    }

    /// Replace task.md with a title and `## Agent Config` holding `config`.
    pub fn write_config(&self, task: &str, config: &str) {
        let p = self.project.join("tasks").join(task).join("task.md");
        std::fs::write(&p, format!("# Task: {task}\n\n## Agent Config\n{config}\n")).unwrap();
    }

    /// `task handoff <task> --from <from> --status <status>`, to be completed and written.
    pub fn handoff<'a>(&'a self, task: &str, from: &str, status: &str) -> HandoffCmd<'a> {
        HandoffCmd {
            w: self,
            args: ["handoff", task, "--from", from, "--status", status]
                .map(String::from)
                .to_vec(),
            body: None,
        }
    }

    /// `task spawn <task> <agent> --handoff <handoff> --runtime <runtime>` (it must
    /// succeed); what it printed.
    pub fn spawn(&self, task: &str, agent: &str, handoff: &str, runtime: &str) -> String {
        ok(&run(self.task().args([
            "spawn",
            task,
            agent,
            "--handoff",
            handoff,
            "--runtime",
            runtime,
        ])))
    }

    /// [`World::spawn`] of a demo agent that stays idle at its prompt.
    pub fn spawn_idle_demo(&self, task: &str, agent: &str, handoff: &str) -> String {
        ok(&run(self.task().env("AO_DEMO_IDLE", "1").args([
            "spawn",
            task,
            agent,
            "--handoff",
            handoff,
            "--runtime",
            "demo",
        ])))
    }

    /// `task start <task>` with an idle demo PM; `.run()` starts it (see [`StartCmd`]).
    pub fn start_idle_pm(&self, task: &str) -> StartCmd<'_> {
        StartCmd {
            w: self,
            task: task.into(),
            new: None,
            env: Vec::new(),
            args: Vec::new(),
        }
    }

    /// `task hook permission-request` as Claude Code runs it for `agent` of `task`, asking
    /// to run `command` (given as the hook's JSON on stdin). A request no rule decides waits
    /// for its answer, so the hook comes back running; its answer is on its stdout.
    pub fn permission_hook(&self, task: &str, agent: &str, command: &str) -> std::process::Child {
        use std::io::Write;
        let req = serde_json::json!({"tool_name": "Bash", "tool_input": {"command": command}});
        let mut hook = self
            .task()
            .args(["hook", "permission-request"])
            .env("TASK_NAME", task)
            .env("TASK_DIR", self.project.join("tasks").join(task))
            .env("TASK_AGENT", agent)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        hook.stdin
            .take()
            .unwrap()
            .write_all(&serde_json::to_vec(&req).unwrap())
            .unwrap();
        hook
    }

    /// The usual opening: `task new <task>`, the PM's IN_PROGRESS handoff to `agent` (no
    /// body), and `agent` spawned as an idle demo agent; its pane.
    pub fn new_task_with_idle_demo(&self, task: &str, agent: &str) -> String {
        self.new_task(task, "");
        let h = self.handoff(task, "pm", "IN_PROGRESS").target(agent).write();
        self.spawn_idle_demo(task, agent, &h);
        self.pane(task, agent)
    }

    /// The pane recorded for `agent`.
    pub fn pane(&self, task: &str, agent: &str) -> String {
        self.state(task)["agents"][agent]["pane"]
            .as_str()
            .unwrap_or_else(|| panic!("no pane recorded for {agent}"))
            .to_string()
    }

    /// Wait until the demo agent in `pane` shows its prompt.
    pub fn wait_demo_prompt(&self, pane: &str) {
        wait_for("the demo prompt", 20, || {
            self.capture(pane).contains("demo> ").then_some(())
        });
    }

    /// events.jsonl of a task, parsed.
    pub fn events(&self, task: &str) -> Vec<Value> {
        std::fs::read_to_string(self.project.join("tasks").join(task).join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The events of one kind.
    pub fn events_of(&self, task: &str, kind: &str) -> Vec<Value> {
        self.events(task).into_iter().filter(|e| e["kind"] == kind).collect()
    }
}
