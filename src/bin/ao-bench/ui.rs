//! `ao-bench ui`: `task ui` left alone with N tasks (each with an idle demo PM), in a
//! pane of its own private tmux server: its CPU (with the tmux calls it waits for) and
//! the agents' tmux server's beside a floor (the same server with the daemon alone, just
//! before), against the target of under 1 % of a core.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::arg;
use crate::daemon::{Env, cpu_secs, rss_kib};

/// CPU seconds of the children `pid` has waited for (the `tmux list-panes` it runs).
fn children_cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(13).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(14).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn tmux(sock: &std::path::Path, args: &[&str]) -> String {
    let o = Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .args(args)
        .env_remove("TMUX")
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

pub(crate) fn bench_ui(args: &[String]) {
    let tasks = arg(args, "--tasks", 20);
    let idle_secs = arg(args, "--idle-secs", 30);
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
    // Floor: the agents' tmux server with the daemon alone, for as long.
    let server: u32 = tmux(&e.sock, &["display-message", "-p", "#{pid}"]).parse().unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let (f0, ft) = (cpu_secs(server), Instant::now());
    std::thread::sleep(Duration::from_secs(idle_secs as u64));
    let floor = 100.0 * (cpu_secs(server) - f0) / ft.elapsed().as_secs_f64();
    // The UI in its own tmux server, with the environment `task` gets here.
    let ui_sock = e.root.join("ui.sock");
    let c = e.task(&[]);
    let mut argv: Vec<String> = vec!["env".into(), "-u".into(), "TMUX".into()];
    argv.extend(
        c.get_envs()
            .filter_map(|(k, v)| Some(format!("{}={}", k.to_string_lossy(), v?.to_string_lossy()))),
    );
    argv.extend([
        crate::task_bin().display().to_string(),
        "ui".into(),
        "--project".into(),
        e.project.display().to_string(),
    ]);
    let ok = Command::new("tmux")
        .arg("-S")
        .arg(&ui_sock)
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
        .status()
        .unwrap()
        .success();
    assert!(ok, "could not start task ui in tmux");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !tmux(&ui_sock, &["capture-pane", "-p", "-t", "ui"]).contains(&format!("{tasks} tasks")) {
        assert!(Instant::now() < deadline, "task ui did not show {tasks} tasks");
        std::thread::sleep(Duration::from_millis(100));
    }
    let pid: u32 = tmux(&ui_sock, &["display-message", "-p", "-t", "ui", "#{pane_pid}"])
        .parse()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let (u0, c0, s0) = (cpu_secs(pid), children_cpu_secs(pid), cpu_secs(server));
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(idle_secs as u64));
    let wall = t0.elapsed().as_secs_f64();
    let (own, kids, srv) = (cpu_secs(pid) - u0, children_cpu_secs(pid) - c0, cpu_secs(server) - s0);
    let pct = |s: f64| 100.0 * s / wall;
    println!("task ui idle, {tasks} tasks with an idle demo PM each, {wall:.0} s:");
    println!(
        "  task ui itself   {own:.2} CPU s ({:.2} % of a core), RSS {} MiB",
        pct(own),
        rss_kib(pid) / 1024
    );
    println!("  its tmux calls   {kids:.2} CPU s ({:.2} % of a core)", pct(kids));
    println!("  total            {:.2} % of a core  (target < 1 %)", pct(own + kids));
    println!(
        "  agents' tmux server meanwhile: {:.2} % of a core (floor, the daemon alone: {floor:.2} %)",
        pct(srv)
    );
    let _ = tmux(&ui_sock, &["kill-server"]);
}
