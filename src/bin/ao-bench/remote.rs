//! `ao-bench remote`: remote agents over a loopback sshd.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::daemon::Env;
use crate::{arg, header, ms, row, stats};

#[path = "../../../tests/common/sshd.rs"]
pub(crate) mod sshd;
#[path = "../../../tests/common/wait.rs"]
mod wait;

pub(crate) use wait::wait_for;

/// Remote agents: a handoff written on the (loopback sshd) host → in the local ledger under
/// the daemon; and a pull of a 1,000-file tree with one change beside plain rsync over the
/// same master.
pub(crate) fn bench_remote(args: &[String]) {
    let n = arg(args, "--handoffs", 50);
    let runs = arg(args, "--runs", 10);
    // The baseline first, in the same run: every pull a new session on the host (rsync).
    let mut series = Vec::new();
    for with in [Some("rsync"), None] {
        let e = Env::new();
        let mut sshd = sshd::Sshd::start(&e.root);
        let rig = Rig {
            e: &e,
            ssh_config: sshd.config.clone(),
            rdir: e.root.join("remote"),
            rsock: e.root.join("rtmux.sock"),
            pull_with: with,
        };
        rig.start_with_a_remote_dev();
        series.push((with, rig.handoff_latencies(n)));
        assert!(rig.task(&["shutdown"]).status().unwrap().success());
        if with.is_none() {
            rig.bench_pull(runs);
        }
        sshd.stop();
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&rig.rsock)
            .arg("kill-server")
            .output();
    }
    report_handoffs(n, series);
}

/// The bench's world: the task `r` here, its dev on the loopback host.
struct Rig<'a> {
    e: &'a Env,
    ssh_config: std::path::PathBuf,
    /// The remote agent's working folder (on the loopback host).
    rdir: std::path::PathBuf,
    /// The remote tmux server's socket.
    rsock: std::path::PathBuf,
    /// `AO_PULL_WITH` for the daemon (`rsync`: no kept SFTP channel).
    pull_with: Option<&'static str>,
}

impl Rig<'_> {
    /// A `task` command that reaches the loopback host.
    fn task(&self, a: &[&str]) -> Command {
        let mut c = self.e.task(a);
        c.env("AO_SSH_CONFIG", &self.ssh_config)
            .env("AO_REMOTE_TMUX_SOCKET", &self.rsock);
        match self.pull_with {
            Some(w) => c.env("AO_PULL_WITH", w),
            None => c.env_remove("AO_PULL_WITH"),
        };
        c
    }

    /// Task `r` started on the demo runtime, with its dev spawned on the host.
    fn start_with_a_remote_dev(&self) {
        std::fs::create_dir_all(&self.rdir).unwrap();
        assert!(self.task(&["new", "r"]).status().unwrap().success());
        std::fs::write(
            self.e.project.join("tasks/r/task.md"),
            format!("# Task: r\n\n## Agent Config\ncwd: aoremote:{}\n", self.rdir.display()),
        )
        .unwrap();
        assert!(
            self.task(&["start", "r", "--runtime", "demo"])
                .status()
                .unwrap()
                .success()
        );
        let h = self.e.project.join("tasks/r/handoffs/pm-20250101-000000.md");
        std::fs::write(&h, "# Handoff: pm\n**Status:** IN_PROGRESS\n\n## Instructions\nWait.\n").unwrap();
        assert!(
            self.task(&["spawn", "r", "dev", "--handoff", h.to_str().unwrap()])
                .status()
                .unwrap()
                .success(),
            "remote spawn failed"
        );
    }

    /// `n` handoffs renamed in on the host, one at a time: each one's time until the local
    /// ledger records it.
    fn handoff_latencies(&self, n: usize) -> Vec<Duration> {
        let rhandoffs = self.rdir.join("tasks/r/handoffs");
        let state = self.e.project.join("tasks/r/pm_state.json");
        let in_ledger = |name: &str| {
            agent_orchestrator::store::task::persist::load(&state, "r").is_ok_and(|st| st.ledger.get(name).is_some())
        };
        let mut v = Vec::new();
        for i in 0..n {
            // A valid time of day in the name (seconds past 59 are not a handoff's name).
            let name = format!("dev-20250102-{:02}{:02}{:02}.md", i / 3600, i / 60 % 60, i % 60);
            let tmp = rhandoffs.join(format!(".{name}.tmp"));
            let t = Instant::now();
            std::fs::write(
                &tmp,
                format!("# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\nstep {i}\n"),
            )
            .unwrap();
            std::fs::rename(&tmp, rhandoffs.join(&name)).unwrap();
            while !in_ledger(&name) {
                std::thread::sleep(Duration::from_millis(5));
                assert!(
                    t.elapsed() < Duration::from_secs(60),
                    "handoff {i} never reached the ledger"
                );
            }
            v.push(t.elapsed());
        }
        v
    }

    /// Pull: 1,000 files, one changed, ours (Host::pull) beside plain rsync on the same
    /// master, `runs` times each.
    fn bench_pull(&self, runs: usize) {
        let arts = self.rdir.join("tasks/r/artifacts/analysis");
        for i in 0..1000 {
            std::fs::write(arts.join(format!("f{i:04}.md")), format!("file {i}\n")).unwrap();
        }
        // SAFETY: set before the runtime below starts any thread; read by the remote module.
        unsafe {
            std::env::set_var("AO_SSH_CONFIG", &self.ssh_config);
            std::env::set_var("XDG_RUNTIME_DIR", self.e.root.join("run"));
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let spec =
            match agent_orchestrator::core::model::taskmd::parse_cwd(&format!("aoremote:{}", self.rdir.display()))
                .unwrap()
            {
                agent_orchestrator::core::model::CwdSpec::Remote(r) => r,
                _ => unreachable!(),
            };
        let host = rt
            .block_on(agent_orchestrator::io::remote::Host::connect(&spec))
            .unwrap();
        let local = self.e.project.join("tasks/r");
        let plain_dst = self.e.root.join("plain");
        std::fs::create_dir_all(&plain_dst).unwrap();
        let prefix = host.ssh_prefix();
        let ssh = agent_orchestrator::core::shell::shell_join(&prefix[..prefix.len() - 2]);
        let remote_task = format!("{}/tasks/r", self.rdir.display());
        let plain = || {
            let t = Instant::now();
            let st = Command::new("rsync")
                .args(["-a", "-s", "-e", &ssh, "--"])
                .arg(format!("aoremote:{remote_task}/artifacts/"))
                .arg(format!("{}/", plain_dst.display()))
                .status()
                .unwrap();
            assert!(st.success());
            t.elapsed()
        };
        // What every remote command and every rsync pays before its first byte: a session on
        // the host, which runs the user's shell (and its rc files) for the command.
        let session = || {
            let t = Instant::now();
            let st = Command::new(&prefix[0])
                .args(&prefix[1..])
                .arg("true")
                .status()
                .unwrap();
            assert!(st.success());
            t.elapsed()
        };
        let ours = |with: Option<&str>| {
            // SAFETY: the runtime is current-thread: no other thread reads the environment.
            unsafe {
                match with {
                    Some(w) => std::env::set_var("AO_PULL_WITH", w),
                    None => std::env::remove_var("AO_PULL_WITH"),
                }
            }
            let t = Instant::now();
            rt.block_on(host.pull(&remote_task, &local)).unwrap();
            t.elapsed()
        };
        plain();
        ours(Some("rsync"));
        ours(None);
        let (mut pv, mut ov, mut kv, mut sv) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for i in 0..runs {
            sv.push(session());
            std::fs::write(arts.join("f0500.md"), format!("changed {i}\n")).unwrap();
            pv.push(plain());
            std::fs::write(arts.join("f0501.md"), format!("changed {i}\n")).unwrap();
            ov.push(ours(Some("rsync")));
            std::fs::write(arts.join("f0502.md"), format!("changed {i}\n")).unwrap();
            kv.push(ours(None));
        }
        let (pf, of, kf, sf) = (stats(pv), stats(ov), stats(kv), stats(sv));
        println!("\nPull of a 1,000-file tree with one file changed ({runs} runs)\n");
        header();
        row("a remote session: `ssh host true` over the same master", &sf, &pf, "-");
        row(
            "floor: plain rsync -a of artifacts/ over the same master",
            &pf,
            &pf,
            "-",
        );
        row(
            "task's pull with rsync (handoffs/ and artifacts/, temp + partial dirs)",
            &of,
            &pf,
            "-",
        );
        row("task's pull over the kept SFTP channel (the default)", &kf, &pf, "-");
        drop(host);
        rt.block_on(agent_orchestrator::io::remote::close_all());
    }
}

/// The handoff latencies as the benchmarks document's table rows: the baseline (every
/// pull a new session) and the default, with the ratio of their p50s.
fn report_handoffs(n: usize, series: Vec<(Option<&str>, Vec<Duration>)>) {
    println!("\n{n} remote handoffs, one at a time (the remote watch pulls at once; the 2 s pull is the fallback)\n");
    println!("| measurement | p50 | p90 | p99 | p50 ratio | target |\n|---|---|---|---|---|---|");
    let mut base = None;
    for (with, v) in series {
        let mut sorted = v.clone();
        sorted.sort();
        let p99 = sorted[((sorted.len() as f64 - 1.0) * 0.99).round() as usize];
        let latency = stats(v);
        let b = *base.get_or_insert(latency.p50);
        let how = match with {
            Some(w) => format!("pulls with {w} (AO_PULL_WITH={w}: a new session each)"),
            None => "pulls over the kept SFTP channel (default)".into(),
        };
        println!(
            "| remote handoff written → in the local ledger, {how} | {} | {} | {} | {:.2} | p50 < 0.25 s |",
            ms(latency.p50),
            ms(latency.p90),
            ms(p99),
            latency.p50.as_secs_f64() / b.as_secs_f64()
        );
    }
}
