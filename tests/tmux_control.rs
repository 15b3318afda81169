//! The tmux control-mode client (the daemon's hot path) against a real tmux server on a
//! private socket: it answers exactly what one-shot clients print, and it survives the
//! server being killed and started again without keeping any server alive or starting one.

mod common;

use agent_orchestrator::io::tmux::{Socket, Tmux};
use common::driver::{rt, spec};
use common::*;

/// A one-shot handle and a control-mode handle on the world's server.
fn handles(w: &World) -> (Tmux, Tmux) {
    let plain = Tmux::new(Socket::Path(w.sock.clone())).unwrap();
    (plain.clone(), plain.with_control())
}

fn server_pid(w: &World) -> Option<i32> {
    String::from_utf8_lossy(&w.tmux(&["display-message", "-p", "#{pid}"]).stdout)
        .trim()
        .parse()
        .ok()
}

/// A screen with colours (kept as escapes by a capture with -e, dropped without), UTF-8, a
/// tab, a backslash, a control character, lines that look like control-mode guards, and a
/// long line that -J joins.
const SCREEN: &str = r"printf '\033[31mred\033[0m ünï \\x \t tab \001 end\n%%end 1 2 1\n%%error 1 2 1\n%%begin 1 2 1\n%%exit\n'; printf 'x%.0s' $(seq 1 300); echo; exec sleep 60";

#[test]
fn captures_and_listings_through_control_mode_equal_one_shot_ones() {
    let w = World::new();
    let (plain, ctl) = handles(&w);
    let r = rt();
    let pane = r
        .block_on(plain.new_session(&spec("t", w.dir.path(), &["sh", "-c", SCREEN])))
        .unwrap();
    r.block_on(plain.new_session(&spec("u", w.dir.path(), &["sleep", "60"])))
        .unwrap();
    wait_for("the screen drawn", 10, || {
        w.capture(&pane).contains("xxxxx").then_some(())
    });

    let one_shot = r.block_on(plain.capture(&pane)).unwrap();
    let controlled = r.block_on(ctl.capture(&pane)).unwrap();
    assert_eq!(controlled, one_shot);
    assert!(controlled.contains("%end 1 2 1\n%error 1 2 1\n"), "{controlled}");
    assert_eq!(
        r.block_on(ctl.list_panes()).unwrap(),
        r.block_on(plain.list_panes()).unwrap()
    );
    assert_eq!(
        r.block_on(ctl.server_id(&pane)).unwrap(),
        r.block_on(plain.server_id(&pane)).unwrap()
    );
    assert!(ctl.control_answers() >= 3, "answered {}", ctl.control_answers());
    assert_eq!(plain.control_answers(), 0);

    // The agents' windows keep their size with a control client attached.
    let size = w.tmux(&[
        "list-windows",
        "-a",
        "-F",
        "#{session_name} #{window_width}x#{window_height}",
    ]);
    let size = String::from_utf8_lossy(&size.stdout).into_owned();
    assert!(size.contains("t 200x50\n") && size.contains("u 200x50\n"), "{size}");

    // An error reads as a one-shot client's does.
    let gone = format!("{}", r.block_on(ctl.capture("%99")).unwrap_err());
    let gone_plain = format!("{}", r.block_on(plain.capture("%99")).unwrap_err());
    assert_eq!(gone, gone_plain);
    // Delivery's first look: the pane alive and its screen, in one exchange.
    let before = ctl.control_answers();
    let (look, screen) = r.block_on(ctl.pane_and_capture(&pane)).unwrap();
    assert_eq!(look.map(|p| p.pane_id), Some(pane.clone()));
    assert_eq!(screen.as_deref(), Some(one_shot.as_str()));
    assert_eq!(ctl.control_answers(), before + 2);
    // Without a control client the screen is left to the caller; a pane gone has neither.
    let (look, screen) = r.block_on(plain.pane_and_capture(&pane)).unwrap();
    assert!(look.is_some() && screen.is_none());
    let (look, screen) = r.block_on(ctl.pane_and_capture("%99")).unwrap();
    assert!(look.is_none() && screen.is_none());
    // A key press goes through it too.
    let before = ctl.control_answers();
    r.block_on(ctl.send_key(&pane, "Enter")).unwrap();
    assert_eq!(ctl.control_answers(), before + 1);
}

/// A paste sets its buffer through the control client (no tmux process per delivery), and
/// what arrives is the text exactly: line breaks, tabs, quotes, `$`, `~`, `#{…}`, `;`, UTF-8.
#[test]
fn a_paste_through_control_mode_arrives_as_the_text_exactly() {
    let w = World::new();
    let (plain, ctl) = handles(&w);
    let r = rt();
    let out = w.dir.path().join("pasted");
    let cat = format!("cat > {}", out.display());
    let pane = r
        .block_on(plain.new_session(&spec("t", w.dir.path(), &["sh", "-c", &cat])))
        .unwrap();
    let text = "~/first $HOME ${X} \\ \"q\" 'x' #{pane_id} ; ünï\n~second\tline \\n\n";
    let before = ctl.control_answers();
    r.block_on(ctl.paste(&pane, "ao-test", text)).unwrap();
    assert_eq!(
        ctl.control_answers(),
        before + 2,
        "set-buffer and paste-buffer answered"
    );
    wait_for("the paste written out", 10, || {
        (std::fs::read_to_string(&out).unwrap_or_default() == text).then_some(())
    });
    // And a one-shot paste of the same text arrives the same.
    r.block_on(plain.paste(&pane, "ao-test", text)).unwrap();
    wait_for("the second paste written out", 10, || {
        (std::fs::read_to_string(&out).unwrap_or_default() == format!("{text}{text}")).then_some(())
    });
}

#[test]
fn a_killed_and_restarted_server_is_reconnected_and_none_is_started_or_kept() {
    let w = World::new();
    let (plain, ctl) = handles(&w);
    let r = rt();
    // No server: nothing is started, the listing is empty as ever.
    assert!(r.block_on(ctl.list_panes()).unwrap().is_empty());
    assert!(
        !r.block_on(plain.server_running()),
        "the control client started a server"
    );

    let first = r
        .block_on(plain.new_session(&spec("a", w.dir.path(), &["sleep", "60"])))
        .unwrap();
    // Right after the failed attach the client waits a moment before trying again: the
    // pane shows once it has.
    let panes = wait_for("the control client to list the new pane", 10, || {
        let panes = r.block_on(ctl.list_panes()).unwrap();
        (!panes.is_empty() && ctl.control_answers() >= 1).then_some(panes)
    });
    assert_eq!(
        panes.iter().map(|p| p.pane_id.as_str()).collect::<Vec<_>>(),
        [first.as_str()]
    );
    let answered = ctl.control_answers();
    assert!(answered >= 1);

    // The server killed outright: the client sees EOF; the listing says no pane.
    let pid = server_pid(&w).unwrap();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    wait_for("the server gone", 10, || {
        (!r.block_on(plain.server_running())).then_some(())
    });
    assert!(r.block_on(ctl.list_panes()).unwrap().is_empty());
    assert!(
        !r.block_on(plain.server_running()),
        "the control client started a server"
    );

    // A new server: the control client attaches to it and answers again.
    let _ = std::fs::remove_file(&w.sock);
    let second = r
        .block_on(plain.new_session(&spec("b", w.dir.path(), &["sleep", "60"])))
        .unwrap();
    wait_for("the control client back", 10, || {
        let panes = r.block_on(ctl.list_panes()).unwrap();
        (ctl.control_answers() > answered && panes.len() == 1).then_some(panes)
    });
    let panes = r.block_on(ctl.list_panes()).unwrap();
    assert_eq!(panes, r.block_on(plain.list_panes()).unwrap());
    assert_eq!(panes[0].pane_id, second);
    assert_ne!(server_pid(&w), Some(pid));

    // The client sits in a session of its own, which no listing shows: agents' sessions
    // ending (a PM restarted) never make it let go and attach again.
    let sessions = String::from_utf8_lossy(&w.tmux(&["list-sessions", "-F", "#{session_name}"]).stdout).into_owned();
    assert_eq!(sessions, "_ao-control\nb\n");
    let connects = ctl.control_connects();
    let _third = w.tmux(&["new-session", "-d", "-s", "c", "sleep", "60"]);
    r.block_on(plain.kill_session("b")).unwrap();
    let panes = r.block_on(ctl.list_panes()).unwrap();
    assert_eq!(panes, r.block_on(plain.list_panes()).unwrap());
    assert_eq!(panes.len(), 1);
    assert_eq!(ctl.control_connects(), connects, "the control client was replaced");

    // The last session gone: the server ends as it would without the control client.
    r.block_on(plain.kill_session("c")).unwrap();
    assert!(r.block_on(plain.end_if_empty()).unwrap());
    wait_for("the server to end", 10, || {
        (!r.block_on(plain.server_running())).then_some(())
    });
    assert!(r.block_on(ctl.list_panes()).unwrap().is_empty());
}

#[test]
fn a_server_left_with_only_the_control_session_exits_at_the_next_look() {
    let w = World::new();
    let (_plain, ctl) = handles(&w);
    let r = rt();
    // A server with tmux's default exit-empty on, which exits when its last session ends.
    assert!(
        w.tmux(&["new-session", "-d", "-s", "only", "sleep", "60"])
            .status
            .success()
    );
    let pid = server_pid(&w).unwrap();
    assert_eq!(r.block_on(ctl.list_panes()).unwrap().len(), 1);
    assert!(ctl.control_answers() >= 1);
    assert!(w.tmux(&["kill-session", "-t", "only"]).status.success());
    // Only the control client's own session is left: the next look ends it, and with it
    // the server (tmux's exit-empty), as if no control client had been there.
    assert!(r.block_on(ctl.list_panes()).unwrap().is_empty());
    wait_for("the server to exit", 10, || {
        (unsafe { libc::kill(pid, 0) } != 0).then_some(())
    });
    assert!(r.block_on(ctl.list_panes()).unwrap().is_empty());
}

#[test]
fn a_shared_listing_serves_only_while_every_expected_pane_is_in_it_alive() {
    let w = World::new();
    let (plain, _) = handles(&w);
    let r = rt();
    let a = r
        .block_on(plain.new_session(&spec("a", w.dir.path(), &["sleep", "60"])))
        .unwrap();
    let asked = std::time::Instant::now();
    assert_eq!(r.block_on(plain.list_panes()).unwrap().len(), 1);
    // A session made behind the handle's back: a look expecting only `a` may be served
    // the listing just made, one expecting the new pane never is.
    let b = String::from_utf8_lossy(
        &w.tmux(&["new-session", "-d", "-P", "-F", "#{pane_id}", "-s", "b", "sleep", "60"])
            .stdout,
    )
    .trim()
    .to_string();
    let served = r.block_on(plain.list_panes_expecting(&[(&a, None)])).unwrap();
    if asked.elapsed() < agent_orchestrator::io::tmux::RECENT {
        assert_eq!(served.len(), 1, "a recent listing was not shared");
    }
    let fresh = r
        .block_on(plain.list_panes_expecting(&[(&a, None), (&b, None)]))
        .unwrap();
    assert_eq!(fresh.len(), 2);
    // A clone shares it.
    let clone = plain.clone();
    assert_eq!(r.block_on(clone.list_panes_expecting(&[(&b, None)])).unwrap().len(), 2);

    // An expected pane that died is seen dead within RECENT, never reported gone early.
    let pid: i32 = String::from_utf8_lossy(&w.tmux(&["display-message", "-p", "-t", &b, "#{pane_pid}"]).stdout)
        .trim()
        .parse()
        .unwrap();
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let seen = wait_for("the dead pane seen through the shared listing", 5, || {
        let panes = r
            .block_on(plain.list_panes_expecting(&[(&a, None), (&b, None)]))
            .unwrap();
        panes.iter().find(|p| p.pane_id == b && p.dead).cloned()
    });
    assert_eq!(seen.pane_id, b);
}
