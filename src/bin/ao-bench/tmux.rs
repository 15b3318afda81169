//! `ao-bench tmux`: spawn and send latency beside raw `tmux new-session` / `tmux send-keys`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::{arg, header, row, stats, task_bin};

fn tmux(sock: &Path, args: &[&str]) -> std::process::Output {
    Command::new("tmux")
        .arg("-S")
        .arg(sock)
        .args(args)
        .env_remove("TMUX")
        .output()
        .expect("tmux")
}

fn capture(sock: &Path, target: &str) -> String {
    String::from_utf8_lossy(&tmux(sock, &["capture-pane", "-p", "-J", "-t", target]).stdout).into_owned()
}

fn poll_until(sock: &Path, target: &str, mut f: impl FnMut(&str) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let screen = capture(sock, target);
        if f(&screen) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting on {target}; screen:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub(crate) fn bench_tmux(args: &[String]) {
    let runs = arg(args, "--runs", 10);
    let tmp = tempfile::Builder::new().prefix("aob").tempdir_in("/tmp").unwrap();
    let sock = tmp.path().join("tmux.sock");
    let project = tmp.path().join("p");
    std::fs::create_dir_all(&project).unwrap();
    let task = |a: &[&str]| {
        let mut c = Command::new(task_bin());
        c.args(a)
            .current_dir(&project)
            .env("AO_TMUX_SOCKET", &sock)
            .env("AO_SESSION_PREFIX", "aob")
            .env("AO_DEMO_IDLE", "1")
            .env_remove("TMUX");
        c
    };
    assert!(task(&["new", "b"]).status().unwrap().success());
    // Keep a server alive so neither side pays for starting it.
    tmux(&sock, &["new-session", "-d", "-s", "keepalive", "--", "sleep", "3600"]);
    let h = String::from_utf8(
        task(&[
            "handoff",
            "b",
            "--from",
            "pm",
            "--target",
            "x",
            "--status",
            "IN_PROGRESS",
        ])
        .output()
        .unwrap()
        .stdout,
    )
    .unwrap();
    let h = h.trim().to_string();

    let mut spawn = Vec::new();
    let mut raw_spawn = Vec::new();
    let mut send = Vec::new();
    let mut raw_send = Vec::new();
    for i in 0..runs {
        let agent = format!("a{i}");
        let t = Instant::now();
        let o = task(&["spawn", "b", &agent, "--handoff", &h, "--runtime", "demo"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let target = format!("=aob-b-{agent}:");
        poll_until(&sock, &target, |s| s.contains("demo> "));
        spawn.push(t.elapsed());

        let t = Instant::now();
        let o = task(&[
            "send",
            "b",
            &agent,
            "--message",
            "benchmark message with some words in it",
        ])
        .output()
        .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        send.push(t.elapsed());

        let name = format!("raw{i}");
        let t = Instant::now();
        tmux(
            &sock,
            &[
                "new-session",
                "-d",
                "-s",
                &name,
                "--",
                "sh",
                "-c",
                "printf 'raw> '; cat",
            ],
        );
        let rt = format!("={name}:");
        poll_until(&sock, &rt, |s| s.contains("raw> "));
        raw_spawn.push(t.elapsed());

        let t = Instant::now();
        tmux(
            &sock,
            &["send-keys", "-t", &rt, "-l", "benchmark message with some words in it"],
        );
        tmux(&sock, &["send-keys", "-t", &rt, "Enter"]);
        poll_until(&sock, &rt, |s| s.matches("benchmark message").count() >= 2);
        raw_send.push(t.elapsed());
    }
    tmux(&sock, &["kill-server"]);
    let (spawn, raw_spawn, send, raw_send) = (stats(spawn), stats(raw_spawn), stats(send), stats(raw_send));
    println!("\n{runs} runs each\n");
    header();
    row("floor: tmux new-session → prompt", &raw_spawn, &raw_spawn, "-");
    row("task spawn → agent prompt", &spawn, &raw_spawn, "-");
    row("floor: tmux send-keys → echoed", &raw_send, &raw_send, "-");
    row("task send → confirmed submitted", &send, &raw_send, "-");
}
