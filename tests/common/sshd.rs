//! A real sshd on a loopback address (127.0.0.1 unless asked) with throwaway host and client keys, for remote
//! tests and the remote benchmark (included by path from src/bin/ao-bench/remote.rs).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::wait_for;

/// A private sshd, killed by PID on drop.
pub struct Sshd {
    child: Child,
    /// The client config: `Host aoremote` with the key, port and known_hosts.
    pub config: PathBuf,
    sshd_config: PathBuf,
    /// The address and port it listens on.
    pub addr: String,
    pub port: u16,
    /// What [`Sshd::freeze`] stopped.
    frozen: std::sync::Mutex<Vec<i32>>,
}

impl Sshd {
    /// Start one under `dir` (keys, configs) on a free port of 127.0.0.1.
    pub fn start(dir: &Path) -> Sshd {
        Sshd::start_on(dir, "127.0.0.1")
    }

    /// Start one listening on `addr` (a loopback address: 127.0.0.0/8 is all the
    /// machine's own, so each test host can have one of its own).
    pub fn start_on(dir: &Path, addr: &str) -> Sshd {
        Sshd::start_with(dir, addr, false)
    }

    /// A host of a test fleet: on `addr`, and with a home folder of its own (`dir`/home, as
    /// a separate machine has), so its sessions do not run this machine's shell rc files.
    pub fn start_host(dir: &Path, addr: &str) -> Sshd {
        Sshd::start_with(dir, addr, true)
    }

    fn start_with(dir: &Path, addr: &str, own_home: bool) -> Sshd {
        let d = dir.join("sshd");
        std::fs::create_dir_all(&d).unwrap();
        for (name, _) in [("host_key", ()), ("id", ())] {
            let st = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(name))
                .status()
                .expect("ssh-keygen (openssh-client) is needed");
            assert!(st.success());
        }
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).unwrap();
        let port = TcpListener::bind((addr, 0)).unwrap().local_addr().unwrap().port();
        let user = String::from_utf8(Command::new("id").arg("-un").output().unwrap().stdout).unwrap();
        let user = user.trim();
        std::fs::write(
            d.join("sshd_config"),
            format!(
                "Port {port}\nListenAddress {addr}\nHostKey {hk}\nAuthorizedKeysFile {ak}\nPidFile {pid}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nSubsystem sftp internal-sftp\nLogLevel ERROR\n{home}",
                hk = d.join("host_key").display(),
                ak = d.join("authorized_keys").display(),
                pid = d.join("sshd.pid").display(),
                home = if own_home {
                    let h = dir.join("home");
                    std::fs::create_dir_all(&h).unwrap();
                    format!("SetEnv HOME={}\n", h.display())
                } else {
                    String::new()
                },
            ),
        )
        .unwrap();
        if unsafe { libc::geteuid() } == 0 {
            let _ = std::fs::create_dir_all("/run/sshd");
        }
        let child = spawn_sshd(&d.join("sshd_config"));
        let config = d.join("ssh_config");
        std::fs::write(
            &config,
            format!(
                "Host aoremote\n  HostName {addr}\n  Port {port}\n  User {user}\n  IdentityFile {id}\n  IdentitiesOnly yes\n  UserKnownHostsFile {kh}\n  StrictHostKeyChecking accept-new\n",
                id = d.join("id").display(),
                kh = d.join("known_hosts").display(),
            ),
        )
        .unwrap();
        wait_for("sshd to listen", 10, || {
            std::net::TcpStream::connect((addr, port)).ok().map(|_| ())
        });
        Sshd {
            addr: addr.to_string(),
            child,
            config,
            sshd_config: d.join("sshd_config"),
            port,
            frozen: Default::default(),
        }
    }

    /// Take the host down: the listener and every connection it serves.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = Command::new("pkill")
            .args(["-f", &format!("sshd.*{}", self.sshd_config.display())])
            .status();
        let (addr, port) = (self.addr.clone(), self.port);
        wait_for("sshd to go away", 10, || {
            std::net::TcpStream::connect((addr.as_str(), port))
                .is_err()
                .then_some(())
        });
    }

    /// The listener and every process under it (its connections and the commands they
    /// run); the tmux server a session started has left the tree and is not among them.
    fn tree(&self) -> Vec<i32> {
        let mut parent_of = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
        let mut tree = vec![self.child.id() as i32];
        let mut i = 0;
        while i < tree.len() {
            let p = tree[i];
            tree.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
            i += 1;
        }
        tree
    }

    /// The host falls silent as a partitioned one does: its sshd processes stopped
    /// (SIGSTOP), connections open but unanswered; [`Sshd::thaw`] heals it (and so does
    /// dropping it).
    pub fn freeze(&self) {
        // Only sshd itself: the commands its sessions run (a login shell's rc files, with
        // their locks) finish as they would on a host whose network went away.
        let tree: Vec<i32> = self
            .tree()
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim_end().starts_with("sshd"))
            })
            .collect();
        for pid in &tree {
            // SAFETY: signalling processes of this test's own sshd.
            unsafe {
                libc::kill(*pid, libc::SIGSTOP);
            }
        }
        self.frozen.lock().unwrap().extend(tree);
    }

    /// Undo [`Sshd::freeze`]: exactly the processes it stopped go on.
    pub fn thaw(&self) {
        for pid in std::mem::take(&mut *self.frozen.lock().unwrap()) {
            // SAFETY: as in freeze.
            unsafe {
                libc::kill(pid, libc::SIGCONT);
            }
        }
    }

    /// Bring it back on the same port.
    pub fn restart(&mut self) {
        self.child = spawn_sshd(&self.sshd_config);
        let (addr, port) = (self.addr.clone(), self.port);
        wait_for("sshd to listen again", 10, || {
            std::net::TcpStream::connect((addr.as_str(), port)).ok().map(|_| ())
        });
    }
}

fn spawn_sshd(config: &Path) -> Child {
    let sshd = ["/usr/sbin/sshd", "/usr/bin/sshd"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("sshd (openssh-server) is needed");
    Command::new(sshd)
        .args(["-D", "-e", "-f"])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.thaw();
        self.stop();
    }
}
