//! Helpers shared by the end-to-end tests: run the built `task` binary in a
//! clean environment, copy the worked example, snapshot folders byte for byte.

#![allow(dead_code)]

pub mod claude;
pub mod driver;
pub mod fleet;
mod flow;
pub mod git;
mod leftovers;
pub mod longhaul;
pub mod model;
pub mod sshd;
mod wait;
pub mod web;

use leftovers::kill_leftovers;
pub use wait::{wait_for, wait_until};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The steps `task runtime check` reports when every one passes, in order.
pub const RUNTIME_CHECK_STEPS: [&str; 7] = [
    "profile",
    "program",
    "start",
    "ready",
    "deliver",
    "submitted",
    "answered",
];

/// The built binary.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_task"))
}

/// A `task` command with a predictable environment: UTC, no TASK_* from an enclosing agent.
pub fn task(cwd: &Path) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(cwd)
        .env("TZ", "UTC")
        .env_remove("TASK_NAME")
        .env_remove("TASK_DIR")
        .env_remove("TASK_AGENT")
        .env_remove("TASK_ROLE")
        .env_remove("SOURCE_DATE_EPOCH")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    c
}

/// Run and capture.
pub fn run(c: &mut Command) -> Output {
    c.output().expect("run task")
}

/// Run with `input` on stdin.
pub fn run_with_stdin(c: &mut Command, input: &[u8]) -> Output {
    use std::io::Write;
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn task");
    // The command may exit before reading (refused arguments): a broken pipe is fine.
    let _ = child.stdin.take().unwrap().write_all(input);
    child.wait_with_output().unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert success, showing stderr otherwise.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
    stdout(o)
}

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// Copy tasks.example/<name> to `<project>/tasks/<name>`, with every file's mtime set to
/// `2025-11-27 12:00 UTC` so rendered times are reproducible.
pub fn copy_example(project: &Path, name: &str) -> PathBuf {
    let dest = project.join("tasks").join(name);
    copy_dir(&repo().join("tasks.example").join(name), &dest);
    set_mtimes(&dest, 1_764_244_800);
    dest
}

/// Set every regular file's mtime under `dir`.
pub fn set_mtimes(dir: &Path, secs: u64) {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    for (rel, _) in snapshot(dir) {
        let p = dir.join(rel);
        if p.is_file() {
            std::fs::File::options()
                .write(true)
                .open(&p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
    }
}

/// Every entry under `dir` with its content (files), link target (symlinks) or "<dir>".
pub fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else { return };
        for e in rd {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes(),
                );
            } else if ft.is_dir() {
                out.insert(rel.clone(), b"<dir>".to_vec());
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    walk(dir, dir, &mut out);
    out
}

/// A private world for tmux tests: a temp project, a private tmux socket (never
/// the user's server — the guard env makes any other server an error), a fake
/// `crontab` on PATH writing to a file, and cleanup of the tmux server by PID.
pub struct World {
    pub dir: tempfile::TempDir,
    pub project: PathBuf,
    pub sock: PathBuf,
    pub bin_dir: PathBuf,
}

impl World {
    pub fn new() -> World {
        let dir = tempfile::Builder::new().prefix("ao").tempdir_in("/tmp").unwrap();
        let project = dir.path().join("proj");
        std::fs::create_dir_all(&project).unwrap();
        let sock = dir.path().join("tmux.sock");
        let bin_dir = dir.path().join("bin");
        std::fs::create_dir_all(&bin_dir).unwrap();
        let shim = bin_dir.join("crontab");
        std::fs::write(
            &shim,
            "#!/bin/sh\nf=\"$CRONTAB_FILE\"\ncase \"$1\" in\n  -l) if [ -f \"$f\" ]; then cat \"$f\"; else echo \"no crontab for test\" >&2; exit 1; fi ;;\n  -) cat > \"$f\" ;;\n  *) exit 2 ;;\nesac\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        World {
            dir,
            project,
            sock,
            bin_dir,
        }
    }

    pub fn crontab_file(&self) -> PathBuf {
        self.dir.path().join("crontab.txt")
    }

    /// `task` in this world (project as cwd).
    pub fn task(&self) -> Command {
        let mut c = task(&self.project);
        let path = format!(
            "{}:{}",
            self.bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        c.env("AO_TMUX_SOCKET", &self.sock)
            .env("AO_TMUX_GUARD_DIR", self.dir.path())
            .env("AO_SESSION_PREFIX", "aot")
            .env("AO_DEMO_PAUSE_MS", "100")
            .env("CRONTAB_FILE", self.crontab_file())
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("XDG_RUNTIME_DIR", self.dir.path().join("run"))
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("PATH", path)
            .env_remove("TMUX");
        c
    }

    /// Plain tmux on the private socket.
    pub fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .env_remove("TMUX")
            .output()
            .unwrap()
    }

    pub fn capture(&self, pane: &str) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-J", "-t", pane]).stdout).into_owned()
    }

    /// The agents' sessions (not the daemon's control-client session, `_ao-control`).
    pub fn sessions(&self) -> Vec<String> {
        let o = self.tmux(&["list-sessions", "-F", "#{session_name}"]);
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|s| *s != "_ao-control")
            .map(str::to_string)
            .collect()
    }

    /// The task's state as one document, its ledger and lineage read from their logs (the
    /// file as it is when this build cannot read it: a newer version's, a corrupt one).
    pub fn state(&self, task: &str) -> serde_json::Value {
        use agent_orchestrator::store::task::persist;
        let path = self.project.join("tasks").join(task).join("pm_state.json");
        match persist::load(&path, task) {
            Ok(st) => persist::whole_json(&st),
            Err(_) => serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap(),
        }
    }

    /// The messages a demo agent recorded.
    pub fn inbox(&self, task: &str, agent: &str) -> Vec<String> {
        let p = self
            .project
            .join("tasks")
            .join(task)
            .join("scratchpad")
            .join(agent)
            .join("inbox.jsonl");
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["text"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    fn server_pid(&self) -> Option<i32> {
        let o = self.tmux(&["display-message", "-p", "#{pid}"]);
        String::from_utf8_lossy(&o.stdout).trim().parse().ok()
    }
}

impl World {
    /// The daemon's log (tracing to a file under the World's state dir).
    pub fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state/agent-orchestrator/daemon.log")).unwrap_or_default()
    }

    /// The daemon's socket in this world.
    pub fn daemon_socket(&self) -> PathBuf {
        self.dir.path().join("run/agent-orchestrator/daemon.sock")
    }

    /// kill -9 this world's daemon (when one answers), reap `child` if the test started it,
    /// and return once the socket no longer answers.
    pub fn kill_daemon(&self, child: Option<std::process::Child>) {
        if let Some(pid) = self.daemon_pid() {
            // SAFETY: signalling the daemon this test started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if let Some(mut c) = child {
            let _ = c.wait();
        }
        wait::wait_for("the daemon to die", 10, || self.daemon_pid().is_none().then_some(()));
    }

    /// Start `task daemon` in the foreground of a child (verbose, its log to `log` when
    /// given) and return it once it answers.
    pub fn start_daemon(&self, log: Option<&Path>) -> std::process::Child {
        let stderr = match log {
            Some(p) => std::process::Stdio::from(std::fs::File::create(p).unwrap()),
            None => std::process::Stdio::null(),
        };
        let child = self
            .task()
            .args(["daemon", "-vv"])
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap();
        wait::wait_for("the new daemon", 10, || self.daemon_pid());
        child
    }

    /// PID of this world's daemon, asked over its socket.
    pub fn daemon_pid(&self) -> Option<i32> {
        use std::io::{BufRead, BufReader, Write};
        let mut s = std::os::unix::net::UnixStream::connect(self.daemon_socket()).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
        s.write_all(b"{\"v\":1,\"cmd\":\"ping\"}\n").ok()?;
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).ok()?;
        serde_json::from_str::<serde_json::Value>(&line).ok()?["pid"]
            .as_i64()
            .map(|p| p as i32)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        if let Some(pid) = self.daemon_pid() {
            // SAFETY: signalling the daemon this test started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        if let Some(pid) = self.server_pid() {
            let _ = self.tmux(&["kill-server"]);
            // SAFETY: signalling a tmux server this test started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
        kill_leftovers(self.dir.path());
        // A failure's world (daemon log, events, screens' files) kept for reading after.
        if std::thread::panicking() && std::env::var_os("AO_TEST_KEEP").is_some() {
            self.dir.disable_cleanup(true);
            eprintln!("AO_TEST_KEEP: kept {}", self.dir.path().display());
        }
    }
}
