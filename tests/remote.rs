//! Remote agents over SSH, against a real sshd on 127.0.0.1 with a throwaway
//! host key and client key; the "remote" folder is another temp dir and the
//! remote tmux runs on its own socket.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::git::{git, init_repo};
use common::sshd::Sshd;
use common::*;
use serde_json::Value;

struct Remote {
    w: World,
    sshd: Sshd,
    rdir: PathBuf,
    rsock: PathBuf,
}

impl Remote {
    fn new(cwd_line: Option<&str>) -> Remote {
        let w = World::new();
        let sshd = Sshd::start(w.dir.path());
        let rdir = w.dir.path().join("remote-work");
        Remote::with(w, sshd, rdir, cwd_line)
    }

    /// dev's folder given as `~/work` on a host with a home of its own.
    fn in_home() -> Remote {
        let w = World::new();
        let sshd = Sshd::start_host(w.dir.path(), "127.0.0.1");
        let rdir = w.dir.path().join("home/work");
        Remote::with(w, sshd, rdir, Some("aoremote:~/work"))
    }

    fn with(w: World, sshd: Sshd, rdir: PathBuf, cwd_line: Option<&str>) -> Remote {
        std::fs::create_dir_all(&rdir).unwrap();
        let rsock = w.dir.path().join("remote-tmux.sock");
        ok(&run(w.task().args(["new", "t1"])));
        let cwd = cwd_line
            .map(str::to_string)
            .unwrap_or_else(|| format!("aoremote:{}", rdir.display()));
        std::fs::write(
            w.project.join("tasks/t1/task.md"),
            format!("# Task: remote\n\n## Goal\nTry it.\n\n## Agent Config\ncwd: {cwd}\n"),
        )
        .unwrap();
        Remote { w, sshd, rdir, rsock }
    }

    fn task(&self) -> Command {
        let mut c = self.w.task();
        c.env("AO_SSH_CONFIG", &self.sshd.config)
            .env("AO_REMOTE_TMUX_SOCKET", &self.rsock);
        c
    }

    fn rtmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.rsock)
            .args(args)
            .output()
            .unwrap()
    }

    /// A PM handoff, then dev spawned on the remote host as a quiet demo agent.
    /// Start t1's PM (an idle demo agent, no daemon, no cron) and wait for its prompt.
    fn start_idle_pm(&self) {
        ok(&run(self.task().env("AO_DEMO_IDLE", "1").args([
            "start",
            "t1",
            "--runtime",
            "demo",
            "--no-daemon",
            "--no-cron",
        ])));
        self.w.wait_demo_prompt(&self.w.pane("t1", "pm"));
    }

    /// A handoff from the PM telling a spoke to wait; its path.
    fn wait_handoff(&self) -> String {
        let h = ok(&run_with_stdin(
            self.task().args([
                "handoff",
                "t1",
                "--from",
                "pm",
                "--status",
                "IN_PROGRESS",
                "--body-file",
                "-",
            ]),
            b"## Instructions\nWait.\n",
        ));
        h.trim().to_string()
    }

    fn spawn_idle_dev(&self) {
        let h = self.wait_handoff();
        ok(&run(self.task().env("AO_DEMO_IDLE", "1").args([
            "spawn",
            "t1",
            "dev",
            "--handoff",
            &h,
            "--runtime",
            "demo",
        ])));
    }

    /// t1 started under the daemon with the periodic pull an hour apart (only the remote
    /// watch brings handoffs home), and dev spawned on the host; the daemon's pid.
    fn start_watched(&self) -> i32 {
        ok(&run(self
            .task()
            .env("AO_DEMO_IDLE", "1")
            .env("AO_TEST_PULL_EVERY_SECS", "3600")
            .env("RUST_LOG", "agent_orchestrator=debug")
            .args(["start", "t1", "--runtime", "demo", "--no-cron"])));
        let daemon = self.w.daemon_pid().expect("the daemon supervises t1");
        self.spawn_idle_dev();
        daemon
    }

    /// A handoff written on the host as an agent writes one (a dot temp file, then a
    /// rename), then awaited in the local ledger.
    fn hand_off_remotely(&self, name: &str, within_secs: u64) {
        let rhandoffs = self.rdir.join("tasks/t1/handoffs");
        let tmp = rhandoffs.join(".dev.tmp");
        std::fs::write(
            &tmp,
            "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nA step.\n",
        )
        .unwrap();
        std::fs::rename(&tmp, rhandoffs.join(name)).unwrap();
        wait_for(&format!("{name} in the ledger"), within_secs, || {
            self.w.state("t1")["ledger"].get(name).map(|_| ())
        });
    }

    /// ssh processes still using this world's control sockets.
    fn masters(&self) -> usize {
        let needle = self.w.dir.path().join("run").display().to_string();
        let o = Command::new("pgrep")
            .args(["-f", &format!("ssh.*{needle}")])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).lines().count()
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        let _ = self.rtmux(&["kill-server"]);
    }
}

#[test]
fn a_remote_agent_is_spawned_its_handoff_pulled_and_checked_in_then_stopped() {
    let r = Remote::new(None);
    let w = &r.w;
    r.start_idle_pm();
    let h = ok(&run_with_stdin(
        r.task().args([
            "handoff",
            "t1",
            "--from",
            "pm",
            "--status",
            "IN_PROGRESS",
            "--target",
            "dev",
            "--body-file",
            "-",
        ]),
        b"## Instructions\nFix the pool; quote 'this' and $(that).\n",
    ));
    let h = h.trim();
    let hname = Path::new(h).file_name().unwrap().to_str().unwrap().to_string();

    // Spawn dev: it runs on the remote host, in the remote tmux, in the remote folder.
    let v: Value = serde_json::from_str(&ok(&run(r.task().args([
        "spawn",
        "t1",
        "dev",
        "--handoff",
        h,
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["session"], "aot-t1-dev");
    assert!(
        r.rtmux(&["has-session", "-t", "=aot-t1-dev"]).status.success(),
        "no session on the remote tmux"
    );
    assert!(
        !w.sessions().iter().any(|s| s == "aot-t1-dev"),
        "dev must not run locally"
    );
    let rtask = r.rdir.join("tasks/t1");
    assert_eq!(
        std::fs::read_to_string(rtask.join("handoffs").join(&hname)).unwrap(),
        std::fs::read_to_string(h).unwrap(),
        "the PM's handoff was pushed as is"
    );
    let preamble = std::fs::read_dir(rtask.join("scratchpad/dev"))
        .unwrap()
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("preamble-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .expect("the preamble is on the remote");
    assert!(
        preamble.contains("Remote Setup") && preamble.contains("quote 'this' and $(that)"),
        "{preamble}"
    );
    // The context bundle went along, the same bytes as the supervisor's copy.
    assert_eq!(
        std::fs::read(rtask.join("active_agents/dev/context/context-bundle.json")).unwrap(),
        std::fs::read(w.project.join("tasks/t1/active_agents/dev/context/context-bundle.json")).unwrap()
    );
    assert!(rtask.join("active_agents/dev/manifest.json").is_file());
    let st = w.state("t1");
    assert!(
        st["agents"]["dev"]["host"].as_str().unwrap().starts_with("aoremote:"),
        "{st}"
    );
    // The pane is recorded with the host's tmux server, whose next life reuses pane ids.
    let server = String::from_utf8_lossy(&r.rtmux(&["display-message", "-p", "#{pid}.#{start_time}"]).stdout)
        .trim()
        .to_string();
    assert!(server.contains('.'), "{server}");
    assert_eq!(st["agents"]["dev"]["tmux_server"], server.as_str(), "{st}");

    // The demo agent there finishes with a handoff; a check-in pulls it and tells the PM.
    let remote_handoff = wait_for("dev's handoff on the remote", 30, || {
        std::fs::read_dir(rtask.join("handoffs"))
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .find(|n| n.starts_with("dev-"))
    });
    let o = run(r.task().args(["-vv", "checkin", "t1", "--json"]));
    let report: Value = serde_json::from_str(&ok(&o)).unwrap();
    assert!(
        report["new_handoffs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == remote_handoff.as_str()),
        "{report}\n{}",
        stderr(&o)
    );
    assert!(w.project.join("tasks/t1/handoffs").join(&remote_handoff).is_file());
    assert!(w.state("t1")["ledger"].get(&remote_handoff).is_some());
    assert!(w.inbox("t1", "pm").iter().any(|m| m.contains("dev")));
    assert!(
        std::fs::read_dir(w.project.join("tasks/t1/handoffs"))
            .unwrap()
            .all(|e| !e.unwrap().file_name().to_string_lossy().starts_with('.')),
        "no partial or temp file is visible in handoffs/"
    );

    // `task send` to the remote agent: the same verified delivery, text taken literally.
    let v: Value = serde_json::from_str(&ok(&run(r.task().args([
        "send",
        "t1",
        "dev",
        "--message",
        "hi; $(touch /tmp/ao-pwned) 'q'",
        "--json",
    ]))))
    .unwrap();
    assert_eq!(v["outcome"], "delivered", "{v}");
    let rinbox = std::fs::read_to_string(rtask.join("scratchpad/dev/inbox.jsonl")).unwrap();
    assert!(rinbox.contains("hi; $(touch /tmp/ao-pwned) 'q'"), "{rinbox}");
    assert!(!Path::new("/tmp/ao-pwned").exists());
    let st: Value = serde_json::from_str(&ok(&run(r.task().args(["status", "t1", "--json"])))).unwrap();
    let dev = st["task"]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "dev")
        .unwrap()
        .clone();
    assert_eq!(dev["pane"], "alive", "{dev}");

    // The host goes down: status says so (quickly), the PM is unaffected; it comes back.
    let mut r = r;
    r.sshd.stop();
    let t0 = std::time::Instant::now();
    ok(&run(r.task().args(["checkin", "t1"])));
    let st: Value = serde_json::from_str(&ok(&run(r.task().args(["status", "t1", "--json"])))).unwrap();
    assert!(t0.elapsed() < std::time::Duration::from_secs(15), "{:?}", t0.elapsed());
    let agents = st["task"]["agents"].as_array().unwrap().clone();
    let dev = agents.iter().find(|a| a["name"] == "dev").unwrap();
    let pm = agents.iter().find(|a| a["name"] == "pm").unwrap();
    assert_eq!(dev["pane"], "unreachable", "{dev}");
    assert!(dev["unreachable_since"].is_string(), "{dev}");
    assert_eq!(pm["pane"], "alive", "{pm}");
    let human = ok(&run(r.task().args(["status", "t1"])));
    assert!(
        human.contains("dev@aoremote") && human.contains("unreachable since"),
        "{human}"
    );
    r.sshd.restart();
    ok(&run(r.task().args(["checkin", "t1"])));
    assert!(r.w.state("t1")["agents"]["dev"].get("unreachable_since").is_none());

    // `task attach` to the remote agent: ssh -t to the host's tmux, shown in a local pane.
    let w = &r.w;
    let mut envs = vec![];
    for (k, v) in [
        ("AO_SSH_CONFIG", r.sshd.config.display().to_string()),
        ("AO_REMOTE_TMUX_SOCKET", r.rsock.display().to_string()),
        ("AO_TMUX_SOCKET", w.sock.display().to_string()),
        ("AO_TMUX_GUARD_DIR", w.dir.path().display().to_string()),
        ("AO_SESSION_PREFIX", "aot".to_string()),
        ("XDG_RUNTIME_DIR", w.dir.path().join("run").display().to_string()),
        ("TERM", "xterm".to_string()),
    ] {
        envs.push(format!("{k}={v}"));
    }
    let mut cmd: Vec<String> = vec![
        "new-session".into(),
        "-d".into(),
        "-s".into(),
        "viewer".into(),
        "-x".into(),
        "120".into(),
        "-y".into(),
        "30".into(),
        "env".into(),
    ];
    cmd.extend(envs);
    cmd.extend([
        bin().display().to_string(),
        "attach".into(),
        "t1".into(),
        "dev".into(),
        "--project".into(),
        w.project.display().to_string(),
    ]);
    let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    assert!(w.tmux(&args).status.success());
    let t0 = std::time::Instant::now();
    loop {
        let screen = String::from_utf8_lossy(&w.tmux(&["capture-pane", "-p", "-t", "=viewer:"]).stdout).into_owned();
        if screen.contains("demo: received message #1") && screen.contains("demo: working…") {
            break;
        }
        assert!(
            t0.elapsed().as_secs() < 20,
            "the viewer never showed the remote agent:\n{screen}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let _ = w.tmux(&["kill-session", "-t", "=viewer"]);

    // Stop ends the remote session too, and no ssh master is left behind.
    let v: Value = serde_json::from_str(&ok(&run(r.task().args(["stop", "t1", "--json"])))).unwrap();
    assert!(
        v["stopped"]["ended"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "aot-t1-dev@aoremote"),
        "{v}"
    );
    assert!(!r.rtmux(&["has-session", "-t", "=aot-t1-dev"]).status.success());
    wait_for("ssh masters to end", 10, || (r.masters() == 0).then_some(()));
}

/// The pids of `parent`'s children named `comm`.
fn children_named(parent: u32, comm: &str) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            // `pid (comm) state ppid …`: the comm may hold spaces, so read after its `)`.
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some((head, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let ppid = rest.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok());
            head.ends_with(&format!("({comm}")) && ppid == Some(parent)
        })
        .collect()
}

#[test]
fn a_stop_waiting_on_a_silent_host_holds_up_nothing_else_and_ends_an_agent_started_meanwhile() {
    let r = Remote::new(None);
    let w = &r.w;
    r.start_idle_pm();
    r.spawn_idle_dev();
    // From now on the task's spokes start here.
    std::fs::write(
        w.project.join("tasks/t1/task.md"),
        "# Task: remote\n\n## Goal\nTry it.\n",
    )
    .unwrap();
    let mut daemon = r
        .task()
        .args(["daemon", "-vv"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = wait_for("the daemon", 10, || w.daemon_pid()) as u32;

    // The host falls silent: the stop (served by the daemon) waits on its handshake.
    r.sshd.freeze();
    let mut stop = r
        .task()
        .args(["stop", "t1", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the daemon to dial the silent host", 20, || {
        (!children_named(pid, "ssh").is_empty()).then_some(())
    });
    // Meanwhile a request of the same task that records under the state's lock is answered
    // (the daemon runs on one thread: a stop holding the lock while it waited froze it).
    let h = r.wait_handoff();
    let mut spawn = r
        .task()
        .env("AO_DEMO_IDLE", "1")
        .args([
            "spawn",
            "t1",
            "qa",
            "--handoff",
            h.trim(),
            "--runtime",
            "demo",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let spawned = wait_for("the spawn to be answered", 30, || spawn.try_wait().unwrap());
    assert!(
        stop.try_wait().unwrap().is_none(),
        "the spawn was answered only once the stop had finished"
    );
    let mut err = String::new();
    std::io::Read::read_to_string(spawn.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(spawned.success(), "spawn during a stop: {err}");
    assert!(w.state("t1")["agents"]["qa"]["session"].is_string());

    // The stop gives up on the silent host, and ends the agent started meanwhile too.
    let stopped = wait_for("the stop to finish", 60, || stop.try_wait().unwrap());
    let mut out = String::new();
    std::io::Read::read_to_string(stop.stdout.as_mut().unwrap(), &mut out).unwrap();
    assert!(stopped.success(), "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let has = |key: &str, s: &str| v["stopped"][key].as_array().unwrap().iter().any(|x| x == s);
    assert!(has("unreachable", "aot-t1-dev@aoremote"), "{v}");
    assert!(has("ended", "aot-t1-pm") && has("ended", "aot-t1-qa"), "{v}");
    assert!(!w.tmux(&["has-session", "-t", "=aot-t1-qa"]).status.success());
    let st = w.state("t1");
    assert_eq!(st["agents"]["qa"]["status"], "stopped", "{st}");
    assert_ne!(
        st["agents"]["dev"]["status"], "stopped",
        "the silent host's agent may still run: {st}"
    );
    r.sshd.thaw();
    let _ = ok(&run(r.task().arg("shutdown")));
    let _ = daemon.wait();
}

#[test]
fn an_unreachable_host_is_a_clear_error_and_nothing_is_recorded() {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let r = Remote::new(Some(&format!("127.0.0.1:{port}:/srv/nowhere")));
    let w = &r.w;
    let h = ok(&run_with_stdin(
        r.task().args([
            "handoff",
            "t1",
            "--from",
            "pm",
            "--status",
            "IN_PROGRESS",
            "--body-file",
            "-",
        ]),
        b"## Instructions\nGo.\n",
    ));
    let o = run(r
        .task()
        .args(["spawn", "t1", "dev", "--handoff", h.trim(), "--runtime", "demo"]));
    assert_eq!(
        o.status.code(),
        Some(1),
        "an unreachable host is a failure, not bad input: {}",
        stderr(&o)
    );
    assert!(stderr(&o).contains("cannot reach 127.0.0.1"), "{}", stderr(&o));
    assert!(
        w.state("t1")["agents"].get("dev").is_none(),
        "nothing recorded as running"
    );
}

#[test]
fn the_demo_task_runs_end_to_end_with_dev_on_the_remote_host_under_the_daemon() {
    let r = Remote::new(None);
    let w = &r.w;
    // A remote folder whose name needs quoting: spaces and a quote.
    let rdir = w.dir.path().join("remote dev's work");
    std::fs::create_dir_all(&rdir).unwrap();
    copy_example(&w.project, "dds-writer-pool");
    let tdir = w.project.join("tasks/dds-writer-pool");
    std::fs::remove_dir_all(tdir.join("handoffs")).unwrap();
    let md = std::fs::read_to_string(tdir.join("task.md")).unwrap();
    let md = md.replace(
        "# cwd: user@build-host:/srv/dds-module    # uncomment to run dev/architect on the build host",
        &format!("cwd: aoremote:{}", rdir.display()),
    );
    assert!(md.contains("cwd: aoremote:"));
    std::fs::write(tdir.join("task.md"), md).unwrap();

    let out = ok(&run(r.task().args(["start", "dds-writer-pool", "--runtime", "demo"])));
    assert!(out.contains("daemon"), "{out}");
    wait_until(
        "COMPLETE",
        std::time::Duration::from_secs(120),
        std::time::Duration::from_millis(200),
        || (w.state("dds-writer-pool")["phase"] == "COMPLETE").then_some(()),
        || {
            format!(
                "--- events\n{}\n--- daemon log\n{}",
                std::fs::read_to_string(tdir.join("events.jsonl")).unwrap_or_default(),
                std::fs::read_to_string(w.dir.path().join("state/agent-orchestrator/daemon.log")).unwrap_or_default()
            )
        },
    );
    let (names, _) = agent_orchestrator::store::handoffs::list(&tdir.join("handoffs")).unwrap();
    let seq: Vec<&str> = names.iter().map(|n| n.agent.as_str()).collect();
    assert_eq!(
        seq,
        vec![
            "pm", "explore", "pm", "plan", "pm", "dev", "pm", "review", "pm", "dev", "pm", "review", "pm"
        ]
    );
    // Both dev passes ran on the remote host and wrote there; the review read their pulled artifacts.
    let remote_devs = std::fs::read_dir(rdir.join("tasks/dds-writer-pool/handoffs"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("dev-"))
        .count();
    assert_eq!(remote_devs, 2);
    assert!(
        rdir.join("tasks/dds-writer-pool/artifacts/code/demo-change-2.md")
            .is_file()
    );
    assert!(
        tdir.join("artifacts/code/demo-change-2.md").is_file(),
        "artifacts are pulled"
    );
    assert!(
        !w.sessions().iter().any(|s| s.ends_with("-dev")),
        "dev never ran locally"
    );
    let log = std::fs::read_to_string(tdir.join("events.jsonl")).unwrap();
    let remote_spawns = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["kind"] == "spawn" && e["data"]["host"] == "aoremote")
        .count();
    assert_eq!(remote_spawns, 2, "{log}");

    // A kill -9 of the daemon leaves no ssh master behind for long (they end when idle).
    let pid = w.daemon_pid().expect("the daemon runs");
    assert!(r.masters() > 0, "the daemon holds a master to the host");
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    wait_for("the daemon's ssh master to end", 30, || {
        (r.masters() == 0).then_some(())
    });
}

#[test]
fn hostile_remote_specs_are_refused_or_taken_literally() {
    let r = Remote::new(None);
    let w = &r.w;
    let d = w.dir.path();
    let h = ok(&run_with_stdin(
        r.task().args([
            "handoff",
            "t1",
            "--from",
            "pm",
            "--status",
            "IN_PROGRESS",
            "--body-file",
            "-",
        ]),
        b"## Instructions\nGo.\n",
    ));
    let md = |cwd: &str| {
        std::fs::write(
            w.project.join("tasks/t1/task.md"),
            format!("# Task: remote\n\n## Agent Config\ncwd: {cwd}\n"),
        )
        .unwrap();
    };
    let spawn = || {
        run(r
            .task()
            .args(["spawn", "t1", "dev", "--handoff", h.trim(), "--runtime", "demo"]))
    };
    let pwned = d.join("pwned");

    // Shell syntax in the path is a (missing) folder name, never a command, here or there.
    for cwd in [
        format!("aoremote:{}/x; touch {}", d.display(), pwned.display()),
        format!("aoremote:{}/$(touch {})", d.display(), pwned.display()),
        format!("aoremote:{}/`touch {}`", d.display(), pwned.display()),
    ] {
        md(&cwd);
        let o = spawn();
        assert_eq!(o.status.code(), Some(2), "{cwd}: {}", stderr(&o));
        assert!(stderr(&o).contains("does not exist"), "{cwd}: {}", stderr(&o));
        assert!(!pwned.exists(), "{cwd} ran a command");
    }
    // Option injection into ssh is refused when task.md is read.
    for cwd in [
        format!("-oProxyCommand=touch {}:/x", pwned.display()),
        "aoremote:-oProxyCommand=x".to_string(),
        "a;b@aoremote:/x".to_string(),
        "aoremote$(id):/x".to_string(),
    ] {
        md(&cwd);
        let o = spawn();
        assert_ne!(o.status.code(), Some(0), "{cwd} was accepted");
        assert!(!pwned.exists(), "{cwd} ran a command");
    }
    assert!(
        w.state("t1")["agents"].get("dev").is_none(),
        "nothing recorded as running"
    );

    // A folder whose name has spaces, quotes and a semicolon works.
    let odd = d.join("it's a; \"dir\"");
    std::fs::create_dir_all(&odd).unwrap();
    md(&format!("aoremote:{}", odd.display()));
    ok(&spawn());
    assert!(odd.join("tasks/t1/task.md").is_file());
    assert!(r.rtmux(&["has-session", "-t", "=aot-t1-dev"]).status.success());
    assert!(!pwned.exists());
}

/// Give a file the mtime 2001-01-01 (as rsync would keep an old one).
fn set_mtime_2001(p: &Path) {
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(978_307_200))
        .unwrap();
}

/// The names whose inode or mtime differs between two [`inodes`] listings (or are new).
fn replaced<'a>(
    before: &std::collections::BTreeMap<String, (u64, i64)>,
    after: &'a std::collections::BTreeMap<String, (u64, i64)>,
) -> Vec<&'a String> {
    after
        .iter()
        .filter(|(n, v)| before.get(*n) != Some(v))
        .map(|(n, _)| n)
        .collect()
}

fn inodes(dir: &Path) -> std::collections::BTreeMap<String, (u64, i64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            (e.file_name().to_string_lossy().into_owned(), (m.ino(), m.mtime()))
        })
        .collect()
}

#[test]
fn pulls_copy_exactly_what_changed_never_show_partial_files_and_survive_a_dying_host() {
    let mut r = Remote::new(None);
    r.spawn_idle_dev();
    let rsrc = r.rdir.join("tasks/t1/artifacts/analysis");
    let local = r.w.project.join("tasks/t1/artifacts/analysis");
    for i in 0..1000 {
        std::fs::write(rsrc.join(format!("f{i:04}.md")), format!("file {i}\n")).unwrap();
    }
    let pull = |r: &Remote| run(r.task().args(["checkin", "t1"]));
    pull(&r); // no PM: the check-in is not delivered, but the pull ran first
    let before = inodes(&local);
    assert_eq!(before.len(), 1000);
    assert_eq!(
        inodes(&rsrc).get("f0007.md").unwrap().1,
        before.get("f0007.md").unwrap().1,
        "mtimes kept"
    );

    // One changed, one added, one added with a 2001 mtime: exactly those are transferred.
    std::fs::write(rsrc.join("f0500.md"), "file 500, changed\n").unwrap();
    std::fs::write(rsrc.join("new.md"), "new\n").unwrap();
    std::fs::write(rsrc.join("old.md"), "old\n").unwrap();
    set_mtime_2001(&rsrc.join("old.md"));

    // A watcher on the local folders sees only final names, never a temp or partial file.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let s2 = seen.clone();
    use notify::Watcher;
    let mut watcher = notify::recommended_watcher(move |ev: notify::Result<notify::Event>| {
        if let Ok(ev) = ev {
            for p in ev.paths {
                s2.lock()
                    .unwrap()
                    .push(p.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
    })
    .unwrap();
    watcher.watch(&local, notify::RecursiveMode::Recursive).unwrap();
    watcher
        .watch(&r.w.project.join("tasks/t1/handoffs"), notify::RecursiveMode::Recursive)
        .unwrap();
    pull(&r);
    let after = inodes(&local);
    let changed = replaced(&before, &after);
    assert_eq!(changed, vec!["f0500.md", "new.md", "old.md"]);
    assert_eq!(after.get("old.md").unwrap().1, 978_307_200);
    assert_eq!(
        std::fs::read_to_string(local.join("f0500.md")).unwrap(),
        "file 500, changed\n"
    );

    // The host dies mid-pull of a big file: nothing partial appears; the next pull completes it.
    let big: Vec<u8> = (0..96u32 * 1024 * 1024)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(rsrc.join("big.bin"), &big).unwrap();
    let mut child = r
        .task()
        .args(["checkin", "t1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let partial = r.w.project.join("tasks/t1/.pull-partial");
    wait_for("the big file to be under way", 30, || {
        walk_sizes(&partial)
            .into_iter()
            .any(|(n, sz)| n.contains("big.bin") && sz > 0)
            .then_some(())
    });
    r.sshd.stop();
    let _ = child.wait();
    // Either the transfer was cut (nothing visible) or it had just finished (all of it).
    if let Ok(got) = std::fs::read(local.join("big.bin")) {
        assert!(
            got == big,
            "a partial file became visible ({} of {} bytes)",
            got.len(),
            big.len()
        );
    }
    r.sshd.restart();
    pull(&r);
    assert_eq!(
        std::fs::read(local.join("big.bin")).unwrap(),
        big,
        "the next pull completes it"
    );
    drop(watcher);
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|n| !n.starts_with('.') && !n.contains("~tmp~")),
        "a watcher saw a temp name: {:?}",
        seen.iter()
            .filter(|n| n.starts_with('.') || n.contains("~tmp~"))
            .collect::<Vec<_>>()
    );
}

fn walk_sizes(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk_sizes(&p));
            } else if let Ok(m) = e.metadata() {
                out.push((e.file_name().to_string_lossy().into_owned(), m.len()));
            }
        }
    }
    out
}

#[test]
fn without_rsync_pulls_fall_back_to_sftp_with_the_same_rules() {
    let r = Remote::new(None);
    r.spawn_idle_dev();
    let rtask = r.rdir.join("tasks/t1");
    let rsrc = rtask.join("artifacts/analysis");
    let local = r.w.project.join("tasks/t1/artifacts/analysis");
    for i in 0..50 {
        std::fs::write(rsrc.join(format!("f{i:02}.md")), format!("file {i}\n")).unwrap();
    }
    std::fs::write(
        rtask.join("handoffs/dev-20251127-100000.md"),
        "# Handoff: dev\n**Status:** COMPLETE\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", rsrc.join("link.md")).unwrap();
    let pull = |r: &Remote| run(r.task().env("AO_PULL_WITH", "sftp").args(["checkin", "t1"]));
    pull(&r);
    let before = inodes(&local);
    assert_eq!(before.len(), 50, "{before:?}");
    assert!(!local.join("link.md").exists(), "symlinks are never followed");
    assert!(r.w.project.join("tasks/t1/handoffs/dev-20251127-100000.md").is_file());
    assert_eq!(
        inodes(&rsrc).get("f07.md").unwrap().1,
        before.get("f07.md").unwrap().1,
        "mtimes kept"
    );

    std::fs::write(rsrc.join("f25.md"), "file 25, changed\n").unwrap();
    std::fs::write(rsrc.join("old.md"), "old\n").unwrap();
    set_mtime_2001(&rsrc.join("old.md"));
    pull(&r);
    let after = inodes(&local);
    let changed = replaced(&before, &after);
    assert_eq!(changed, vec!["f25.md", "old.md"]);
    assert_eq!(after.get("old.md").unwrap().1, 978_307_200);
    assert!(
        std::fs::read_dir(&local)
            .unwrap()
            .all(|e| !e.unwrap().file_name().to_string_lossy().starts_with('.')),
        "no temp file left in a watched folder"
    );
}

/// The remote watch pulls the moment a remote handoff is renamed into place: with the
/// periodic pull an hour apart, only the watch can bring it home.
#[test]
fn a_remote_handoff_comes_home_by_the_watch_not_the_periodic_pull() {
    let r = Remote::new(None);
    r.start_watched();
    let rhandoffs = r.rdir.join("tasks/t1/handoffs");
    // The watch runs on the host (its script names the remote folder) within a liveness tick.
    let needle = rhandoffs.display().to_string();
    wait_for("the remote watch", 20, || {
        let o = Command::new("pgrep")
            .args(["-f", &format!("d={needle}")])
            .output()
            .unwrap();
        (!o.stdout.is_empty()).then_some(())
    });
    r.hand_off_remotely("dev-20991231-235959.md", 15);
    // Stopping the task ends the watch on the host.
    ok(&run(r.task().args(["stop", "t1"])));
    wait_for("the remote watch to end", 20, || {
        let o = Command::new("pgrep")
            .args(["-f", &format!("d={needle}")])
            .output()
            .unwrap();
        o.stdout.is_empty().then_some(())
    });
}

/// The daemon's pulls go over one SFTP channel kept open per host (no new session on the
/// host per pull): a killed channel costs nothing but a pull with rsync, the next pull opens
/// another, and a stopped task leaves no channel behind.
#[test]
fn remote_handoffs_come_home_over_a_kept_channel_and_its_death_loses_nothing() {
    let r = Remote::new(None);
    let w = &r.w;
    let daemon = r.start_watched();
    // The daemon's ssh clients for the SFTP subsystem.
    let channels = || -> Vec<u32> {
        children_named(daemon as u32, "ssh")
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"sftp"))
            })
            .collect()
    };
    let send = |name: &str| r.hand_off_remotely(name, 20);
    send("dev-20991231-235901.md");
    let first = wait_for("the kept SFTP channel", 10, || {
        let c = channels();
        (c.len() == 1).then_some(c[0])
    });
    // Killed under the daemon: the next handoff still comes home (rsync pulls it).
    unsafe {
        libc::kill(first as i32, libc::SIGKILL);
    }
    wait_for("the channel's client to be gone", 10, || {
        (!channels().contains(&first)).then_some(())
    });
    send("dev-20991231-235902.md");
    assert!(
        w.daemon_log().contains("the kept SFTP channel failed; rsync pulls"),
        "the failed channel was noticed and rsync pulled"
    );
    // The one after opens a new channel and comes home over it.
    send("dev-20991231-235903.md");
    let second = wait_for("a new kept channel", 10, || {
        let c = channels();
        (c.len() == 1 && c[0] != first).then_some(c[0])
    });
    send("dev-20991231-235904.md");
    assert_eq!(channels(), vec![second], "the channel is kept across pulls");
    // A stopped task pulls no more: its channel is closed when idle (the master ends once
    // the host's heartbeat, kept a minute after its last agent, lets it idle).
    ok(&run(r.task().args(["stop", "t1"])));
    wait_for("the idle channel to close", 20, || channels().is_empty().then_some(()));
}

/// A `~` in the host's path is asked of the host once per master, not at every pull: each
/// ask is a session on the host (its login shell), what the kept channel took off a pull.
#[test]
fn a_home_relative_remote_folder_is_resolved_once_and_its_handoffs_come_home() {
    let r = Remote::in_home();
    r.start_watched();
    for n in 1..=4 {
        r.hand_off_remotely(&format!("dev-20991231-23590{n}.md"), 20);
    }
    let log = r.w.daemon_log();
    let asked = log.matches("asked the host for its home folder").count();
    assert!(
        (1..=2).contains(&asked),
        "the home folder asked once per master, not per pull ({asked} times)"
    );
    assert!(
        log.contains(&r.rdir.parent().unwrap().display().to_string()),
        "the host's own home was found"
    );
    ok(&run(r.task().args(["stop", "t1"])));
}

/// Issue 31: a handoff written on the host while its watch connects or reconnects (after
/// the connection's pull, before the watch is live) still comes home by the watch.
#[test]
fn a_remote_handoff_written_while_the_watch_connects_comes_home_by_the_watch() {
    let r = Remote::new(None);
    let w = &r.w;
    let gate = w.dir.path().join("remote-watch");
    let reached = w.dir.path().join("remote-watch.reached");
    ok(&run(r
        .task()
        .env("AO_DEMO_IDLE", "1")
        .env("AO_TEST_PULL_EVERY_SECS", "3600")
        .env("AO_TEST_PAUSE_REMOTE_WATCH", &gate)
        .env("RUST_LOG", "agent_orchestrator=debug")
        .args(["start", "t1", "--runtime", "demo", "--no-cron"])));
    // Whether every pull the watch asked for has been made: a pull began and ended after
    // its last ask (so a file written now can only come home by a later one).
    let asked_pulls_done = || {
        let log = w.daemon_log();
        let lines: Vec<&str> = log.lines().collect();
        let last_ask = lines
            .iter()
            .rposition(|l| l.contains("remote watch") && l.contains("pull=true"));
        let Some(ask) = last_ask else { return Some(()) };
        let began = lines[ask..].iter().position(|l| l.contains("pulling remote hosts"))? + ask;
        lines[began..]
            .iter()
            .any(|l| l.contains("pulled remote hosts"))
            .then_some(())
    };
    r.spawn_idle_dev();
    let rhandoffs = r.rdir.join("tasks/t1/handoffs");
    let needle = format!("d={}", rhandoffs.display());
    for name in ["dev-20991231-235901.md", "dev-20991231-235902.md"] {
        wait_for("the remote watch between its connection and its watch", 20, || {
            reached.exists().then_some(())
        });
        wait_for("the pulls the watch asked for so far", 20, asked_pulls_done);
        let tmp = rhandoffs.join(".dev.tmp");
        std::fs::write(
            &tmp,
            "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nWhile the watch connected.\n",
        )
        .unwrap();
        std::fs::rename(&tmp, rhandoffs.join(name)).unwrap();
        std::fs::write(&gate, "").unwrap();
        wait_for(&format!("{name} in the ledger"), 15, || {
            w.state("t1")["ledger"].get(name).map(|_| ())
        });
        // The connection drops (its ssh and the remote script killed): the watch
        // reconnects after 2 s and stops in the same window again.
        std::fs::remove_file(&gate).unwrap();
        std::fs::remove_file(&reached).unwrap();
        let o = Command::new("pkill").args(["-KILL", "-f", &needle]).output().unwrap();
        assert!(o.status.success(), "the watch was running");
    }
    ok(&run(r.task().args(["stop", "t1"])));
    // A watch stopped in the hook goes on and ends at its first heartbeat with no reader.
    std::fs::write(&gate, "").unwrap();
}

#[test]
fn doctor_names_each_host_and_command_with_its_fix_and_fails_on_a_problem() {
    let r = Remote::new(None);
    // A second task on a host where nothing listens, and a notify command that does not exist.
    ok(&run(r.w.task().args(["new", "t2"])));
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    std::fs::write(
        r.w.project.join("tasks/t2/task.md"),
        format!("# Task: gone\n\n## Agent Config\ncwd: 127.0.0.1:{closed}:/nowhere\n"),
    )
    .unwrap();
    let cfg = r.w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        "notify = [\"no-such-notifier-ao\", \"{task}\"]\n",
    )
    .unwrap();

    let o = run(r.task().arg("doctor"));
    let out = stdout(&o);
    assert_eq!(
        o.status.code(),
        Some(1),
        "a problem fails the doctor\n{out}\n{}",
        stderr(&o)
    );
    let line = |start: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1).is_some_and(|_| l.contains(start)))
            .unwrap_or_else(|| panic!("no line for {start}:\n{out}"))
            .to_string()
    };
    assert!(line("tmux ").starts_with("ok"), "{out}");
    assert!(
        line("remote aoremote").starts_with("ok") && line("remote aoremote").contains("rsync present"),
        "{out}"
    );
    assert!(
        line(&format!("remote 127.0.0.1:{closed}")).starts_with("problem"),
        "{out}"
    );
    assert!(
        line("notify").starts_with("problem") && line("notify").contains("no-such-notifier-ao"),
        "{out}"
    );
    assert!(out.contains("fix: install no-such-notifier-ao"), "{out}");
    assert!(
        out.contains("claude permissions") && out.contains("fix: task setup-agents"),
        "{out}"
    );

    // The same, for scripts; and once the settings are written, that line is ok.
    ok(&run(r.task().args(["setup-agents", "--runtime", "claude"])));
    let o = run(r.task().args(["doctor", "--json"]));
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["healthy"], false);
    let level = |name: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"].as_str().is_some_and(|n| n.starts_with(name)))
            .map(|c| c["level"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("no check {name}: {v}"))
    };
    assert_eq!(level("claude permissions"), "ok", "{v}");
    assert_eq!(level("remote aoremote"), "ok", "{v}");
    assert_eq!(level("notify"), "problem", "{v}");
    assert_eq!(level("runtime demo"), "ok", "{v}");
}

#[test]
fn a_remote_agent_works_in_a_worktree_of_the_hosts_clone_and_its_work_is_merged_here() {
    let r = Remote::new(None);
    let w = &r.w;
    // The project is a repository; the host's folder is a clone of it.
    let start = init_repo(&w.project, "one\n");
    git(
        &w.project,
        &["clone", "-q", &w.project.to_string_lossy(), &r.rdir.to_string_lossy()],
    );
    let md = w.project.join("tasks/t1/task.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, format!("{text}worktree: true\n")).unwrap();
    ok(&run(r.task().env("AO_DEMO_IDLE", "1").args([
        "start",
        "t1",
        "--runtime",
        "demo",
        "--no-cron",
    ])));
    r.spawn_idle_dev();

    let wt = w.state("t1")["agents"]["dev"]["worktree"].clone();
    let path = PathBuf::from(wt["path"].as_str().expect("a worktree"));
    assert!(wt["host"].as_str().unwrap().starts_with("aoremote"), "{wt}");
    assert_eq!(path, r.rdir.join("tasks/t1/worktrees/dev-1"));
    assert_eq!(
        git(&r.rdir, &["rev-parse", "task/t1"]),
        start,
        "the task branch was sent to the host"
    );
    assert_eq!(git(&path, &["rev-parse", "--abbrev-ref", "HEAD"]), "agents/t1/dev-1");
    let pane_cwd = String::from_utf8_lossy(
        &r.rtmux(&[
            "display-message",
            "-p",
            "-t",
            &w.pane("t1", "dev"),
            "#{pane_current_path}",
        ])
        .stdout,
    )
    .trim()
    .to_string();
    assert_eq!(Path::new(&pane_cwd), path);

    // The agent's work on the host, then its handoff there.
    std::fs::write(path.join("src/remote.txt"), "made on the host\n").unwrap();
    let rhandoffs = r.rdir.join("tasks/t1/handoffs");
    let tmp = rhandoffs.join(".dev.tmp");
    std::fs::write(
        &tmp,
        "# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nAdded remote.txt on the host.\n",
    )
    .unwrap();
    std::fs::rename(&tmp, rhandoffs.join("dev-20991231-235959.md")).unwrap();
    wait_for("dev's remote work merged here", 30, || {
        (w.state("t1")["agents"]["dev"]["worktree"]["stage"] == "merged").then_some(())
    });
    assert_eq!(git(&w.project, &["show", "task/t1:src/remote.txt"]), "made on the host");
    let log = git(&w.project, &["log", "--format=%s", "task/t1"]);
    assert!(log.contains("dev: Added remote.txt on the host."), "{log}");
    wait_for("the host's worktree removed", 20, || (!path.exists()).then_some(()));
    assert_eq!(
        git(&w.project, &["rev-parse", "HEAD"]),
        start,
        "the local checkout is untouched"
    );
    assert_eq!(
        git(&r.rdir, &["rev-parse", "HEAD"]),
        start,
        "the host's checkout is untouched"
    );
    ok(&run(r.task().args(["stop", "t1"])));
}
