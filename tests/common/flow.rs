//! The steps most tests begin with: `task new` (with an Agent Config), the PM's
//! handoff, `task spawn` of an idle demo agent, reading events.jsonl.

use std::process::Output;

use serde_json::Value;

use super::{World, ok, run, run_with_stdin, wait_for};

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
