//! The daemon inside the test's own process, as pueue's tests run theirs: nothing of it is
//! read from this process's test variables (its hooks are a value handed to it), and it
//! supervises a task to a delivered check-in like the real-process daemon the other tests
//! start. One test in this binary: it sets the process's environment to the world's.

mod common;

use std::path::{Path, PathBuf};

use agent_orchestrator::io::hooks::{Hooks, Point};
use common::*;

#[test]
fn a_daemon_in_this_process_takes_its_hooks_as_a_value_and_delivers_a_checkin() {
    let w = World::new();
    // The world's variables (tmux socket, runtime folder, session prefix) for the daemon.
    for (k, v) in w.task().get_envs() {
        // SAFETY: before any other thread of this binary's only test exists.
        unsafe {
            match v {
                Some(v) => std::env::set_var(k, v),
                None => std::env::remove_var(k),
            }
        }
    }
    // Its hooks, installed: agents run the real `task`, and a pause at the daemon's start
    // that no variable names.
    let gate = w.dir.path().join("daemon-start");
    let hooks = Hooks {
        task_bin: Some(PathBuf::from(env!("CARGO_BIN_EXE_task"))),
        pauses: [(Point::DaemonStart, gate.clone())].into(),
        ..Default::default()
    };
    agent_orchestrator::io::hooks::install(hooks).expect("nothing asked for the hooks yet");
    assert!(std::env::var_os("AO_TEST_PAUSE_DAEMON_START").is_none());
    let daemon = std::thread::spawn(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
            .block_on(agent_orchestrator::daemon::run())
            .map_err(|e| e.to_string())
    });
    let reached = PathBuf::from(format!("{}.reached", gate.display()));
    wait_for("the in-process daemon at its installed pause", 20, || {
        reached.exists().then_some(())
    });
    std::fs::write(&gate, "").unwrap();
    let pid = wait_for("the in-process daemon to answer", 20, || w.daemon_pid());
    assert_eq!(pid as u32, std::process::id(), "the daemon answering is this process");

    // `task start` finds it on the socket and puts the task under it.
    w.start_idle_pm("t1").new_task("").run();
    let h = w.handoff("t1", "dev", "COMPLETE").write();
    let name = Path::new(&h).file_name().unwrap().to_string_lossy().into_owned();
    let inbox = wait_for("the check-in in the PM pane", 20, || {
        let i = w.inbox("t1", "pm");
        (!i.is_empty()).then_some(i)
    });
    assert!(inbox[0].contains(&name), "{}", inbox[0]);
    wait_for("the handoff in the ledger", 20, || {
        w.state("t1")["ledger"].get(&name).map(|_| ())
    });

    assert!(run(w.task().args(["shutdown"])).status.success());
    let ended = daemon.join().expect("the daemon's thread");
    assert_eq!(ended, Ok(()), "the daemon ended cleanly on shutdown");
    assert_eq!(w.daemon_pid(), None);
}
