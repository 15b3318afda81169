//! `task ui` end to end: the real binary in a pane of its own private tmux server (never
//! the default one), beside a demo task on the world's server; keys go in with
//! send-keys, the screen comes back with capture-pane.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::*;

/// The UI's own tmux server (a second private socket), ended by PID on drop.
struct UiPane {
    sock: PathBuf,
}

impl UiPane {
    /// `task ui <args>` in a 100x30 pane, with the world's environment.
    fn start(w: &World, args: &[&str]) -> UiPane {
        UiPane::start_with(w, args, &[])
    }

    /// [`UiPane::start`] with more environment.
    fn start_with(w: &World, args: &[&str], env: &[(&str, &str)]) -> UiPane {
        let sock = w.dir.path().join("ui.sock");
        let mut c = w.task();
        c.envs(env.iter().copied());
        // sh keeps the pane (and what the UI printed) when the UI exits.
        let mut argv: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            "\"$@\"; echo \"task ui exited $?\"; sleep 600".into(),
            "sh".into(),
            "env".into(),
        ];
        // env wants its -u NAME before NAME=VALUE.
        let mut set = Vec::new();
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => set.push(format!("{}={}", k.to_string_lossy(), v.to_string_lossy())),
                None => argv.extend(["-u".into(), k.to_string_lossy().into_owned()]),
            }
        }
        argv.extend(["-u".into(), "TMUX".into()]);
        argv.extend(set);
        argv.push(bin().display().to_string());
        argv.push("ui".into());
        argv.extend(args.iter().map(|a| a.to_string()));
        if !args.contains(&"--all") {
            argv.extend(["--project".into(), w.project.display().to_string()]);
        }
        let o = Command::new("tmux")
            .arg("-S")
            .arg(&sock)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "ui",
                "-x",
                "100",
                "-y",
                "30",
            ])
            .args(&argv)
            .env_remove("TMUX")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let ui = UiPane { sock };
        ui.wait("the UI's title", 20, |s| s.contains("task ui ·"));
        ui
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "ui"]).stdout).into_owned()
    }

    fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", "ui", k]);
        }
    }

    fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "ui", "-l", text]);
    }

    /// Wait until the screen satisfies `f`; how long it took.
    fn wait(&self, what: &str, secs: u64, f: impl Fn(&str) -> bool) -> Duration {
        let t0 = Instant::now();
        wait_until(
            what,
            Duration::from_secs(secs),
            Duration::from_millis(20),
            || f(&self.screen()).then_some(()),
            || self.screen(),
        );
        t0.elapsed()
    }

    /// The line under "Needs you" naming `who` with `word`.
    fn needs_row(&self, word: &str, who: &str) -> bool {
        let s = self.screen();
        let mut in_needs = false;
        for l in s.lines() {
            if l.contains("Needs you") {
                in_needs = true;
            } else if l.contains("Tasks and agents") {
                return false;
            } else if in_needs && l.contains(word) && l.contains(who) {
                return true;
            }
        }
        false
    }
}

impl Drop for UiPane {
    fn drop(&mut self) {
        let o = self.tmux(&["display-message", "-p", "#{pid}"]);
        let pid: Option<i32> = String::from_utf8_lossy(&o.stdout).trim().parse().ok();
        let _ = self.tmux(&["kill-server"]);
        if let Some(pid) = pid {
            // SAFETY: signalling the tmux server this test started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// Select `agent` in Tasks and agents: filter on its name, then its row under the task.
fn select_agent(ui: &UiPane, agent: &str) {
    ui.keys(&["/"]);
    ui.type_text(agent);
    ui.keys(&["Enter", "Tab", "j"]);
    ui.wait("the agent selected", 5, |s| {
        s.lines()
            .any(|l| l.starts_with(&format!(">   {agent} ")) || l.starts_with(&format!(">  {agent} ")))
    });
}

#[test]
fn a_blocked_handoff_and_a_dead_agent_appear_under_needs_you_within_a_second() {
    let w = World::new();
    let pane = w.new_task_with_idle_demo("t1", "dev");
    w.wait_demo_prompt(&pane);
    // $PAGER names and shows the file until a key is pressed.
    let pager = "sh -c 'echo PAGER-SHOWS \"$0\"; cat \"$0\"; read x'";
    let ui = UiPane::start_with(&w, &["--read-only"], &[("PAGER", pager)]);
    ui.wait("dev in the task list", 10, |s| {
        s.contains("dev") && s.contains("nothing needs you")
    });

    w.handoff("t1", "dev", "BLOCKED")
        .body("## Blockers\nneeds database credentials\n")
        .write();
    let took = ui.wait("the BLOCKED handoff under Needs you", 5, |_| {
        ui.needs_row("blocked", "t1/dev")
    });
    assert!(
        ui.screen().contains("BLOCKED: needs database credentials"),
        "{}",
        ui.screen()
    );
    assert!(took < Duration::from_secs(1), "a blocked handoff took {took:?} to show");

    let o = w.tmux(&["display-message", "-p", "-t", &pane, "#{pane_pid}"]);
    let pid: i32 = String::from_utf8_lossy(&o.stdout).trim().parse().unwrap();
    // SAFETY: killing the demo agent this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let took = ui.wait("the dead agent under Needs you", 5, |_| ui.needs_row("dead", "t1/dev"));
    assert!(took < Duration::from_secs(1), "a dead agent took {took:?} to show");
    // The dead agent comes first: it is more urgent than a blocked handoff.
    let s = ui.screen();
    let first = s.lines().skip_while(|l| !l.contains("Needs you")).nth(1).unwrap_or("");
    assert!(first.contains("dead") && first.contains("t1/dev"), "{s}");

    // --read-only: the action keys are refused and say why.
    ui.keys(&["x"]);
    ui.wait("the read-only note", 5, |s| s.contains("read-only: actions are off"));

    // A task created while the UI runs shows up.
    w.new_task("t2", "");
    ui.wait("the new task", 5, |s| s.contains("2 tasks") && s.contains("t2 ·"));

    // p: progress.md in $PAGER, and back to the UI when the pager ends (looking is allowed).
    ui.keys(&["p"]);
    ui.wait("progress.md in the pager", 5, |s| {
        s.contains("PAGER-SHOWS") && s.contains("# Task Progress:") && !s.contains("task ui ·")
    });
    let screen = ui.screen();
    let shown = screen.lines().find(|l| l.contains("PAGER-SHOWS")).unwrap_or("");
    // A copy taken at the key press, not the file the daemon writes into its spare.
    assert!(
        shown.contains("progress-") && !shown.contains("/tasks/"),
        "the pager is given a copy: {shown}"
    );
    ui.keys(&["Enter"]);
    ui.wait("the UI back from the pager", 5, |s| {
        s.contains("task ui ·") && s.contains("closed ") && s.contains("progress.md")
    });
    ui.keys(&["q"]);
}

#[test]
fn m_delivers_enter_attaches_and_returns_and_x_stops_the_agent() {
    let w = World::new();
    let pane = w.new_task_with_idle_demo("t1", "dev");
    w.wait_demo_prompt(&pane);
    let ui = UiPane::start(&w, &[]);
    select_agent(&ui, "dev");

    // m: the message goes through verified delivery; the outcome is on the bottom line.
    ui.keys(&["m"]);
    ui.type_text("hello from task ui");
    ui.wait("the message line", 5, |s| s.contains("message: hello from task ui_"));
    ui.keys(&["Enter"]);
    ui.wait("the delivery outcome", 30, |s| s.contains("delivered to t1/dev"));
    wait_for("the demo agent's pane to show it received the message", 10, || {
        w.capture(&pane).contains("received message #1").then_some(())
    });
    assert_eq!(w.inbox("t1", "dev"), vec!["hello from task ui".to_string()]);

    // Enter: the UI steps aside for `tmux attach`, and comes back on detach.
    ui.keys(&["Enter"]);
    ui.wait("the agent's session in the UI's pane", 10, |s| {
        s.contains("demo>") && !s.contains("task ui ·")
    });
    let o = w.tmux(&["detach-client", "-s", "aot-t1-dev"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    ui.wait("the UI back after detaching", 10, |s| {
        s.contains("task ui ·") && s.contains("back from t1/dev")
    });

    // x: asks, then stops only that agent.
    ui.keys(&["x"]);
    ui.wait("the confirmation", 5, |s| s.contains("stop this agent? y to stop"));
    ui.keys(&["y"]);
    ui.wait("the stop outcome", 15, |s| s.contains("stopped t1/dev"));
    assert!(!w.sessions().iter().any(|s| s == "aot-t1-dev"), "{:?}", w.sessions());
    assert_eq!(w.state("t1")["agents"]["dev"]["status"], "stopped");
    ui.wait("the agent shown stopped", 5, |s| {
        s.lines().any(|l| l.contains("dev") && l.contains("stopped"))
    });
    ui.keys(&["q"]);
}

#[test]
fn with_a_daemon_the_ui_subscribes_and_all_follows_tasks_as_they_are_started() {
    use std::io::{BufRead, BufReader, Write};
    let w = World::new();
    let daemon = w.start_daemon(None);

    // The raw stream: the tasks at once, then a line per change.
    let mut s = std::os::unix::net::UnixStream::connect(w.daemon_socket()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"{\"v\":1,\"cmd\":\"subscribe\"}\n").unwrap();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["tasks"].as_array().map(Vec::len)),
        (Some("tasks"), Some(0)),
        "{line}"
    );

    let ui = UiPane::start(&w, &["--all"]);
    ui.wait("the daemon named as the source", 10, |s| {
        s.contains("0 tasks") && s.contains("daemon")
    });
    w.new_task("t2", "");
    ok(&run(w.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "t2",
        "--runtime",
        "demo",
    ])));
    line.clear();
    r.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (v["kind"].as_str(), v["task"].as_str()),
        (Some("changed"), Some("")),
        "{line}"
    );
    ui.wait("the new task in the UI", 5, |s| {
        s.contains("1 task ·") && s.contains("t2 ·")
    });
    ui.keys(&["q"]);
    w.kill_daemon(Some(daemon));
}

#[test]
fn inside_the_agents_tmux_enter_switches_the_client_and_the_ui_keeps_running() {
    let w = World::new();
    let pane = w.new_task_with_idle_demo("t1", "dev");
    w.wait_demo_prompt(&pane);
    // The UI in a session of the agents' own server, with a real client attached to it
    // (script gives the client a terminal).
    let c = w.task();
    let mut argv = vec!["env".to_string()];
    argv.extend(
        c.get_envs()
            .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy()))),
    );
    argv.extend([
        bin().display().to_string(),
        "ui".into(),
        "--project".into(),
        w.project.display().to_string(),
    ]);
    let mut new = vec!["new-session", "-d", "-s", "ui", "-x", "100", "-y", "30"];
    new.extend(argv.iter().map(String::as_str));
    assert!(w.tmux(&new).status.success());
    let attach = format!("tmux -S {} attach-session -t ui", w.sock.display());
    let mut client = Command::new("script")
        .args(["-qfc", &attach, "/dev/null"])
        .env_remove("TMUX")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client_session = || {
        String::from_utf8_lossy(&w.tmux(&["list-clients", "-F", "#{client_session}"]).stdout)
            .trim()
            .to_string()
    };
    wait_for("the client on the UI's session", 10, || {
        (client_session() == "ui").then_some(())
    });
    let screen = || w.capture("ui");
    wait_for("the UI", 10, || screen().contains("dev").then_some(()));
    for k in ["/", "d", "e", "v", "Enter", "Tab", "j", "Enter"] {
        w.tmux(&["send-keys", "-t", "ui", k]);
    }
    wait_for("the client switched to the agent", 10, || {
        (client_session() == "aot-t1-dev").then_some(())
    });
    wait_for("the UI still running, saying how to come back", 10, || {
        screen().contains("switched to t1/dev").then_some(())
    });
    w.tmux(&["switch-client", "-t", "ui"]);
    wait_for("the client back on the UI", 10, || {
        (client_session() == "ui").then_some(())
    });
    // SAFETY: ending the script process this test started.
    unsafe {
        libc::kill(client.id() as i32, libc::SIGKILL);
    }
    let _ = client.wait();
}

#[test]
fn without_a_terminal_task_ui_says_what_to_use_instead() {
    let w = World::new();
    let o = run(w.task().arg("ui"));
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("task ui needs a terminal"), "{}", stderr(&o));
    assert!(stderr(&o).contains("task status --json"), "{}", stderr(&o));
}

/// A permission request no rule answered shows under Needs you at once, with the command
/// escaped; `a` answers it as a human, the waiting hook goes on with the answer, and the
/// row goes.
#[test]
fn a_permission_request_shows_under_needs_you_and_a_allows_it() {
    let w = World::new();
    w.start_idle_pm("t1")
        .new_task("permit_timeout: 60s\npermit_deadline: 120s")
        .run();
    let ui = UiPane::start(&w, &[]);
    ui.wait("the task", 10, |s| s.contains("nothing needs you"));
    let hook = w.permission_hook("t1", "dev", "pip install -e .\necho \"$(id)\"");
    ui.wait("the request under Needs you", 10, |_| ui.needs_row("permit", "t1/dev"));
    let s = ui.screen();
    assert!(s.contains(r#"wants to run "pip install -e .\necho \"$(id)\"""#), "{s}");
    ui.keys(&["a"]);
    ui.wait("the answer on the bottom line", 10, |s| s.contains(": allow (by you)"));
    let out = hook.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "allow", "{v}");
    let decided = w.events_of("t1", "permission_decision");
    assert_eq!(decided.len(), 1, "{decided:?}");
    assert_eq!(decided[0]["data"]["by"], "human");
    ui.wait("the row gone", 10, |s| s.contains("nothing needs you"));
    ui.keys(&["q"]);
}
