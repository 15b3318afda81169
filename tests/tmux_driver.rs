//! The tmux driver against a real tmux server on a private socket: each known trap has a test.

mod common;

use agent_orchestrator::io::tmux::{Socket, Tmux};
use common::driver::{rt, spec};
use common::*;

#[test]
fn semicolons_dashes_and_env_arrive_literally() {
    let w = World::new();
    let tmux = Tmux::new(Socket::Path(w.sock.clone())).unwrap();
    let out = w.dir.path().join("out.txt");
    let script = format!("printf '%s|' \"$@\" \"$X\" > {}; sleep 30", out.display());
    let mut s = spec(
        "t",
        w.dir.path(),
        &["sh", "-c", &script, "sh", "-n", "a;", ";", "--", "b c"],
    );
    s.env.push(("X".into(), "v;".into()));
    let pane = rt().block_on(tmux.new_session(&s)).unwrap();
    assert!(pane.starts_with('%'), "{pane}");
    let got = wait_for("the script output", 10, || {
        std::fs::read_to_string(&out).ok().filter(|s| s.ends_with('|'))
    });
    assert_eq!(got, "-n|a;|;|--|b c|v;|");
}

#[test]
fn exact_names_never_prefix_match() {
    let w = World::new();
    let tmux = Tmux::new(Socket::Path(w.sock.clone())).unwrap();
    let r = rt();
    r.block_on(tmux.new_session(&spec("t10", w.dir.path(), &["sleep", "60"])))
        .unwrap();
    assert!(!r.block_on(tmux.has_session("t1")).unwrap(), "t1 must not match t10");
    assert!(!r.block_on(tmux.kill_session("t1")).unwrap());
    assert!(
        r.block_on(tmux.has_session("t10")).unwrap(),
        "t10 survives a kill of t1"
    );
    // Plain tmux shows the trap we avoid.
    assert!(
        w.tmux(&["has-session", "-t", "t1"]).status.success(),
        "tmux itself prefix-matches"
    );
}

#[test]
fn missing_cwd_is_refused_before_tmux() {
    let w = World::new();
    let tmux = Tmux::new(Socket::Path(w.sock.clone())).unwrap();
    let missing = w.dir.path().join("nope");
    let e = rt()
        .block_on(tmux.new_session(&spec("x", &missing, &["sleep", "60"])))
        .unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(w.sessions().is_empty());
}

#[test]
fn dead_panes_are_kept_with_their_exit_status() {
    let w = World::new();
    let tmux = Tmux::new(Socket::Path(w.sock.clone())).unwrap();
    let r = rt();
    let pane = r
        .block_on(tmux.new_session(&spec("d", w.dir.path(), &["sh", "-c", "exit 7"])))
        .unwrap();
    // tmux may see the pty close (dead) a moment before it reaps the child (status).
    let info = wait_for("the pane to die with its status", 30, || {
        r.block_on(tmux.pane(&pane))
            .unwrap()
            .filter(|p| p.dead && (p.dead_status.is_some() || p.dead_signal.is_some()))
    });
    assert_eq!(info.dead_status, Some(7));
    assert!(r.block_on(tmux.has_session("d")).unwrap(), "the session is kept");
}

/// A caller can hand us SIGCHLD blocked (some CI runners and supervisors do); a tmux
/// server born with that mask never reaps its panes, so no exit status ever arrives.
#[test]
fn a_caller_with_sigchld_blocked_still_gets_exit_statuses() {
    let w = World::new();
    let tmux = Tmux::new(Socket::Path(w.sock.clone())).unwrap();
    let r = rt();
    // SAFETY: masks of this test's own thread, restored right after the call.
    let old = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        old
    };
    let pane = r.block_on(tmux.new_session(&spec("b", w.dir.path(), &["sh", "-c", "exit 9"])));
    unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    let pane = pane.unwrap();
    let info = wait_for("the pane to die with its status", 15, || {
        r.block_on(tmux.pane(&pane))
            .unwrap()
            .filter(|p| p.dead && p.dead_status.is_some())
    });
    assert_eq!(info.dead_status, Some(9));
}

#[test]
fn guard_refuses_other_servers() {
    let w = World::new();
    let o = run(w.task().env("AO_TMUX_SOCKET", "default").args(["new", "t1"]));
    ok(&o);
    let o = run(w.task().env("AO_TMUX_SOCKET", "default").args(["attach", "t1"]));
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("refusing to use tmux server '-L default'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_program_that_ignores_sighup_is_gone_when_its_session_is_killed() {
    let w = World::new();
    let tmux = Tmux::new(Socket::Path(w.sock.clone())).unwrap();
    let pidfile = w.dir.path().join("pid");
    // As Gemini CLI's node does: SIGHUP ignored (kept across exec), so tmux's hangup alone
    // would leave it running.
    let script = format!("echo $$ > {}; trap '' HUP; exec sleep 300", pidfile.display());
    let rt = rt();
    rt.block_on(tmux.new_session(&spec("stubborn", w.dir.path(), &["sh", "-c", &script])))
        .unwrap();
    let pid: i32 = wait_for("the pid file", 10, || {
        std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    });
    // SAFETY: signal 0 only asks whether the process exists.
    let alive = |p: i32| unsafe { libc::kill(p, 0) } == 0 && !is_zombie(p);
    assert!(alive(pid));
    assert!(rt.block_on(tmux.kill_session("stubborn")).unwrap());
    wait_for("the stubborn program to end", 10, || (!alive(pid)).then_some(()));
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.rsplit_once(')').is_some_and(|(_, r)| r.trim_start().starts_with('Z')))
}
