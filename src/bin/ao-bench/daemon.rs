//! `ao-bench daemon`: handoff written → check-in confirmed in the PM pane, beside
//! `inotifywait` + `tmux send-keys`; then an idle daemon with N tasks (CPU, RSS). Its
//! `Env` (a private project, tmux socket and daemon) is shared with `ao-bench remote`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::{Stats, arg, header, ms, row, runtime_has, stats, task_bin};

pub(crate) struct Env {
    _dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
    pub(crate) project: PathBuf,
    pub(crate) sock: PathBuf,
}

impl Env {
    pub(crate) fn new() -> Env {
        let dir = tempfile::Builder::new().prefix("aod").tempdir_in("/tmp").unwrap();
        let root = dir.path().to_path_buf();
        let project = root.join("p");
        std::fs::create_dir_all(&project).unwrap();
        Env {
            sock: root.join("tmux.sock"),
            _dir: dir,
            root,
            project,
        }
    }
    pub(crate) fn task(&self, args: &[&str]) -> Command {
        let mut c = Command::new(task_bin());
        c.args(args)
            .current_dir(&self.project)
            .env("AO_TMUX_SOCKET", &self.sock)
            .env("AO_SESSION_PREFIX", "aod")
            .env("AO_DEMO_IDLE", "1")
            .env("XDG_RUNTIME_DIR", self.root.join("run"))
            .env("XDG_STATE_HOME", self.root.join("state"))
            .env("XDG_CONFIG_HOME", self.root.join("config"))
            .env_remove("TMUX")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }
    pub(crate) fn daemon_pid(&self) -> Option<u32> {
        self.ping()?["pid"].as_u64().map(|p| p as u32)
    }
    /// The daemon's answer to a ping: its pid, version and what its memos hold.
    /// The agents' tmux server, whose work for the daemon (captures, pastes) is counted beside it.
    pub(crate) fn tmux_server_pid(&self) -> Option<u32> {
        let o = Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(["display", "-p", "#{pid}"])
            .output()
            .ok()?;
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    }

    pub(crate) fn ping(&self) -> Option<serde_json::Value> {
        use std::io::{BufRead, BufReader, Write};
        let mut s =
            std::os::unix::net::UnixStream::connect(self.root.join("run/agent-orchestrator/daemon.sock")).ok()?;
        s.write_all(b"{\"v\":1,\"cmd\":\"ping\"}\n").ok()?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).ok()?;
        serde_json::from_str(&line).ok()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon_pid() {
            unsafe {
                libc::kill(pid as i32, libc::SIGKILL);
            }
        }
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .arg("kill-server")
            .output();
        kill_leftovers(&self.root);
    }
}

#[path = "../../../tests/common/leftovers.rs"]
mod leftovers;
use leftovers::kill_leftovers;

pub(crate) fn lines_in(p: &Path) -> usize {
    std::fs::read_to_string(p).map(|s| s.lines().count()).unwrap_or(0)
}

pub(crate) fn cpu_secs(pid: u32) -> f64 {
    stat_secs(pid, 11)
}

/// CPU seconds of `pid`'s children, which [`cpu_secs`] does not count: those it has
/// waited for (cutime + cstime: the one-shot tmux clients) and those still running (the
/// daemon's tmux control client).
pub(crate) fn children_cpu_secs(pid: u32) -> f64 {
    let live: f64 = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|c| parent_of(*c) == Some(pid))
        .map(|c| cpu_secs(c) + stat_secs(c, 13))
        .sum();
    stat_secs(pid, 13) + live
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.split_whitespace().nth(1)?.parse().ok()
}

/// Fields `at` and `at + 1` of /proc/<pid>/stat after the command name, in seconds.
fn stat_secs(pid: u32, at: usize) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(at).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(at + 1).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

pub(crate) fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// A COMPLETE handoff from `agent` (step `i`), written as `task handoff` writes it; its file name.
pub(crate) fn write_handoff_from(dir: &Path, agent: &str, i: usize) -> String {
    let from: agent_orchestrator::core::names::AgentName = agent.parse().unwrap();
    let body = format!("## Completed Work\nstep {i}\n");
    let p = agent_orchestrator::store::handoffs::write(
        dir,
        &agent_orchestrator::core::handoff::NewHandoff {
            from: &from,
            status: agent_orchestrator::core::handoff::Status::Complete,
            target: None,
            next: None,
            body: &body,
            now: chrono::Local::now(),
        },
    )
    .unwrap();
    p.file_name().unwrap().to_string_lossy().into_owned()
}

pub(crate) fn write_handoff(dir: &Path, i: usize) {
    write_handoff_from(dir, "dev", i);
}

/// The spoke handoffs each check-in in the PM's inbox lists (`- dev-….md: …` lines).
fn told_per_checkin(inbox: &Path) -> Vec<usize> {
    std::fs::read_to_string(inbox)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            v["text"]
                .as_str()
                .unwrap_or("")
                .lines()
                .filter(|l| l.starts_with("- dev-"))
                .count()
        })
        .collect()
}

/// Bursts of ten handoffs written 10 ms apart (100 ms in all): how many check-ins each
/// costs, and the last file's latency to the check-in that tells it.
fn bursts(inbox: &Path, handoffs: &Path, runs: usize) {
    if runs == 0 {
        return;
    }
    let (mut checkins, mut last, mut spans) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..runs {
        // Quiet first: the previous burst's check-ins all in.
        std::thread::sleep(Duration::from_millis(300));
        let before = told_per_checkin(inbox).len();
        // Each write starts on its 10 ms mark (a crash-safe write takes milliseconds of
        // its own: sleeping 10 ms after each stretched a burst past its 100 ms).
        let t_first = Instant::now();
        let mut t_last = t_first;
        for i in 0..10 {
            let mark = t_first + Duration::from_millis(10 * i as u64);
            std::thread::sleep(mark.saturating_duration_since(Instant::now()));
            t_last = Instant::now();
            write_handoff(handoffs, 10_000 + r * 10 + i);
        }
        spans.push(t_first.elapsed());
        loop {
            let told = told_per_checkin(inbox);
            if told[before.min(told.len())..].iter().sum::<usize>() >= 10 {
                last.push(t_last.elapsed());
                checkins.push(told.len() - before);
                break;
            }
            assert!(t_last.elapsed() < Duration::from_secs(30), "burst {r} timed out");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let max = last.iter().max().copied().unwrap_or_default();
    let s = stats(last);
    let span = spans.iter().max().copied().unwrap_or_default();
    let j = judge(&checkins, &spans);
    let verdict = match j.most {
        Some(most) => format!(
            "most {most} over the {} bursts written within {}; target ≤ 2",
            j.judged,
            ms(BURST_SPAN_MAX)
        ),
        None => format!("no burst was written within {}: not judged", ms(BURST_SPAN_MAX)),
    };
    let stretched = match j.stretched {
        0 => String::new(),
        k => format!(
            "; {k} stretched past {} by the writer itself, not judged",
            ms(BURST_SPAN_MAX)
        ),
    };
    println!(
        "\n{runs} bursts of 10 handoffs in 100 ms (the longest took {}): check-ins per burst {checkins:?} ({verdict}{stretched}); last file → its check-in p50 {}, max {} (target < 300 ms)",
        ms(span),
        ms(s.p50),
        ms(max)
    );
}

/// The longest a burst's ten writes may take and still be the "ten in 100 ms" the target
/// speaks of. Each write starts on its 10 ms mark, so a burst takes ~95–105 ms; one the
/// writer itself stretched (a machine still settling after a soak took 263 ms for ten
/// files) spreads its files over more than one check-in's span, and its count says
/// nothing of coalescing.
const BURST_SPAN_MAX: Duration = Duration::from_millis(120);

/// What the bursts say against the target.
#[derive(Debug, PartialEq, Eq)]
struct BurstVerdict {
    /// The most check-ins a judged burst cost (`None`: no burst was judged).
    most: Option<usize>,
    /// Bursts written within [`BURST_SPAN_MAX`].
    judged: usize,
    /// Bursts the writer stretched past it: reported, not judged.
    stretched: usize,
}

/// Judge the bursts (check-ins each, and how long each took to write). Pure.
fn judge(checkins: &[usize], spans: &[Duration]) -> BurstVerdict {
    let kept: Vec<usize> = checkins
        .iter()
        .zip(spans)
        .filter(|(_, span)| **span <= BURST_SPAN_MAX)
        .map(|(c, _)| *c)
        .collect();
    BurstVerdict {
        most: kept.iter().max().copied(),
        judged: kept.len(),
        stretched: checkins.len().min(spans.len()) - kept.len(),
    }
}

pub(crate) fn bench_daemon(args: &[String]) {
    let n = arg(args, "--handoffs", 100);
    let floor = floor(n);
    lone_handoffs(n, floor.as_ref(), arg(args, "--bursts", 10));
    // `--idle-secs 0`: the check-in figures only (a quick before/after of one change).
    let idle_secs = arg(args, "--idle-secs", 60);
    if idle_secs > 0 {
        idle(arg(args, "--tasks", 50), idle_secs);
    }
}

/// The floor: inotifywait + tmux send-keys in a shell loop, into a pane that appends what
/// it reads; `None` (and said why) without inotifywait.
fn floor(n: usize) -> Option<Stats> {
    if !runtime_has("inotifywait") {
        eprintln!("inotifywait not installed (apt-get install inotify-tools): no floor for the latency figure");
        return None;
    }
    let e = Env::new();
    let dir = e.root.join("floor");
    std::fs::create_dir_all(&dir).unwrap();
    let out = e.root.join("floor.out");
    let tmux = |a: &[&str]| {
        Command::new("tmux")
            .arg("-S")
            .arg(&e.sock)
            .args(a)
            .env_remove("TMUX")
            .output()
            .unwrap()
    };
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "floor",
        "--",
        "sh",
        "-c",
        &format!("cat >> {}", out.display()),
    ]);
    let script = format!(
        "inotifywait -q -m -e close_write -e moved_to --format %f {} | while read f; do tmux -S {} send-keys -t =floor: -l \"$f\"; tmux -S {} send-keys -t =floor: Enter; done",
        dir.display(),
        e.sock.display(),
        e.sock.display()
    );
    let mut watcher = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let mut v = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        write_handoff(&dir, i);
        while lines_in(&out) < i + 1 {
            std::thread::sleep(Duration::from_millis(1));
            assert!(t.elapsed() < Duration::from_secs(20), "floor timed out");
        }
        v.push(t.elapsed());
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    let _ = Command::new("pkill")
        .args([
            "-f",
            &format!(
                "inotifywait -q -m -e close_write -e moved_to --format %f {}",
                dir.display()
            ),
        ])
        .status();
    Some(stats(v))
}

/// The daemon: a real check-in per handoff, confirmed in the PM pane, `n` of them one at a
/// time against the floor; then `bursts` bursts.
fn lone_handoffs(n: usize, floor: Option<&Stats>, bursts_of: usize) {
    let e = Env::new();
    assert!(e.task(&["start", "b", "--runtime", "demo"]).status().unwrap().success());
    let inbox = e.project.join("tasks/b/scratchpad/pm/inbox.jsonl");
    let handoffs = e.project.join("tasks/b/handoffs");
    std::thread::sleep(Duration::from_millis(500));
    let daemon = e.daemon_pid().expect("task start left a daemon running");
    let server = e.tmux_server_pid().expect("the tmux server runs");
    let (d0, s0) = (cpu_secs(daemon), cpu_secs(server));
    let mut v = Vec::new();
    for i in 0..n {
        // Each handoff on its own: one written within 150 ms of the last check-in's start
        // is part of a burst and coalesced (measured below), not what a lone handoff costs.
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        write_handoff(&handoffs, i);
        while lines_in(&inbox) < i + 1 {
            std::thread::sleep(Duration::from_millis(1));
            assert!(t.elapsed() < Duration::from_secs(30), "check-in {i} timed out");
        }
        v.push(t.elapsed());
    }
    // Per check-in, the 200 ms between them included (an idle task costs ~0.02 ms of it).
    // Dearer than the soak's (its last line): one task checking in every ~230 ms finds its
    // files' spares not yet rested (store::spare::REST) and writes each as a new file.
    let per = |secs: f64| secs * 1000.0 / n.max(1) as f64;
    let (daemon_ms, server_ms) = (per(cpu_secs(daemon) - d0), per(cpu_secs(server) - s0));
    let mut sorted = v.clone();
    sorted.sort();
    let p99 = sorted[((sorted.len() as f64 - 1.0) * 0.99).round() as usize];
    let latency = stats(v);
    println!("\n{n} handoffs, one at a time (200 ms apart)\n");
    header();
    if let Some(f) = floor {
        row("floor: inotifywait + tmux send-keys", f, f, "-");
        row("handoff → check-in in the PM pane", &latency, f, "p50 < 60 ms");
    } else {
        row("handoff → check-in in the PM pane", &latency, &latency, "p50 < 60 ms");
    }
    println!("p99: {}  (target < 150 ms)", ms(p99));
    println!("CPU per check-in: daemon {daemon_ms:.2} ms, tmux server {server_ms:.2} ms");
    bursts(&inbox, &handoffs, bursts_of);
}

/// Idle: `tasks` tasks, each with an idle demo PM, for `idle_secs`.
fn idle(tasks: usize, idle_secs: usize) {
    let e = Env::new();
    for i in 0..tasks {
        let name = format!("t{i}");
        assert!(
            e.task(&["start", &name, "--runtime", "demo"])
                .status()
                .unwrap()
                .success()
        );
    }
    let pid = e.daemon_pid().expect("daemon");
    std::thread::sleep(Duration::from_secs(5));
    let (c0, k0) = (cpu_secs(pid), children_cpu_secs(pid));
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(idle_secs as u64));
    let (used, kids) = (cpu_secs(pid) - c0, children_cpu_secs(pid) - k0);
    let wall = t0.elapsed().as_secs_f64();
    println!(
        "\nidle daemon, {tasks} tasks, {wall:.0} s: {used:.2} CPU s ({:.2} % of a core), RSS {} MiB  (targets < 0.5 %, < 30 MiB); its tmux clients: {:.2} %",
        100.0 * used / wall,
        rss_kib(pid) / 1024,
        100.0 * kids / wall
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_the_writer_stretched_is_reported_not_judged() {
        let ms = Duration::from_millis;
        let v = judge(&[2, 3, 2], &[ms(101), ms(263), ms(118)]);
        assert_eq!(
            v,
            BurstVerdict {
                most: Some(2),
                judged: 2,
                stretched: 1
            }
        );
        // A burst within the span that cost three check-ins counts against the target.
        assert_eq!(judge(&[2, 3], &[ms(100), ms(105)]).most, Some(3));
        // Nothing within the span: no verdict rather than a pass.
        let none = judge(&[3], &[ms(300)]);
        assert_eq!((none.most, none.judged, none.stretched), (None, 0, 1));
    }
}
