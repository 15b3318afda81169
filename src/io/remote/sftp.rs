//! SFTP over a host's master: the pull's fallback when rsync is missing on either end, and
//! a channel kept open per host for the pulls the remote watch asks for.
//!
//! Every rsync, like every remote command, is a new session on the host, and sshd starts
//! the user's shell for each: on a real account that shell reads its rc files first (on
//! this machine's root, pyenv's init: 130–190 ms of a remote handoff's 270 ms p50). A
//! channel kept open pays that once; a handoff's pull over it is a few round trips. Files
//! over [`KEPT_MAX`] are left to rsync, which streams and sends only what changed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use openssh::Session;
use openssh_sftp_client::{Sftp, SftpOptions};

use super::Host;
use crate::core::error::{Error, Result};

/// The largest file a pull over the kept channel copies (read whole, in memory); a larger
/// one is left for rsync's pull right after.
pub const KEPT_MAX: u64 = 8 << 20;
/// After a host refused the channel (no SFTP subsystem), ask again this much later.
const REFUSED_FOR: Duration = Duration::from_secs(300);
/// A channel no pull used for this long is closed, so that the master, once its task's
/// watch is gone too, ends by itself. A task with remote agents pulls every 2 s.
const KEPT_IDLE: Duration = Duration::from_secs(6);

/// One host's kept channel, or when it was refused.
enum Channel {
    /// Open on this master (a new master means a new channel), last asked for at `used`.
    Open {
        master: Arc<Session>,
        sftp: Arc<Sftp>,
        used: Instant,
    },
    Refused(Instant),
}

/// The kept channels, by host key (a process memo: [`crate::store::memo`]).
#[derive(Default)]
struct Channels(std::sync::Mutex<HashMap<String, Channel>>);

impl crate::store::memo::Memo for Channels {
    const NAME: &'static str = "kept SFTP channels";
    fn entries(&self) -> usize {
        self.0.lock().map_or(0, |c| c.len())
    }
}

fn channels() -> &'static std::sync::Mutex<HashMap<String, Channel>> {
    &crate::store::memo::get::<Channels>().0
}

/// What an SFTP copy did.
#[derive(Debug, Default)]
pub struct Copied {
    /// The handoffs it brought (names in `handoffs/`), in place and whole.
    pub arrived: Vec<String>,
    /// Files that differ but are over the size limit: not copied.
    pub left: usize,
}

impl Host {
    /// The fallback pull when rsync is missing on either end: a channel of its own,
    /// closed after. Same rules as rsync's pull: a file is copied when its size or mtime
    /// (seconds) differs, written to a temp file outside the watched folders, given the
    /// remote mtime, fsynced and renamed into place; only regular files, dot names
    /// skipped, nothing deleted.
    pub async fn pull_sftp(&self, remote_task_dir: &str, local_task_dir: &Path) -> Result<Vec<String>> {
        let sftp = Sftp::from_clonable_session(self.session.clone(), SftpOptions::default())
            .await
            .map_err(|e| self.sftp_error("start", &e))?;
        let copied = copy(self, &sftp, remote_task_dir, local_task_dir, None).await;
        sftp.close().await.map_err(|e| self.sftp_error("close", &e))?;
        Ok(copied?.arrived)
    }

    /// A pull over the host's kept channel (opened on first use): `None` when the host
    /// has none to offer (refused lately), or it failed (then it is dropped, and the next
    /// use opens another). The caller then pulls with rsync, as it also must when
    /// [`Copied::left`] is not 0.
    pub(super) async fn pull_kept(&self, remote_task_dir: &str, local_task_dir: &Path) -> Option<Copied> {
        let sftp = self.kept_channel().await?;
        match copy(self, &sftp, remote_task_dir, local_task_dir, Some(KEPT_MAX)).await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::debug!(host = %self.spec.destination(), error = %e, "the kept SFTP channel failed; rsync pulls");
                let mut c = channels().lock().expect("not poisoned");
                if matches!(c.get(&self.key()), Some(Channel::Open { sftp: s, .. }) if Arc::ptr_eq(s, &sftp)) {
                    c.remove(&self.key());
                }
                None
            }
        }
    }

    async fn kept_channel(&self) -> Option<Arc<Sftp>> {
        match channels().lock().expect("not poisoned").get_mut(&self.key()) {
            Some(Channel::Open { master, sftp, used }) if Arc::ptr_eq(master, &self.session) => {
                *used = Instant::now();
                return Some(sftp.clone());
            }
            Some(Channel::Refused(at)) if at.elapsed() < REFUSED_FOR => return None,
            _ => {}
        }
        // Requests go out as they are made: a pull is a handful, latency is the point.
        let opts = SftpOptions::new().flush_interval(Duration::ZERO);
        let opened = Sftp::from_clonable_session(self.session.clone(), opts).await;
        let mut c = channels().lock().expect("not poisoned");
        match opened {
            Ok(s) => {
                let s = Arc::new(s);
                tracing::debug!(host = %self.spec.destination(), "kept SFTP channel open");
                // Opened only inside the host's pull turn, so no other was opened meanwhile;
                // one replaced here ends with its last pull (its idle sweep stops at once).
                c.insert(
                    self.key(),
                    Channel::Open {
                        master: self.session.clone(),
                        sftp: s.clone(),
                        used: Instant::now(),
                    },
                );
                drop_when_idle(self.key(), Arc::downgrade(&s));
                Some(s)
            }
            Err(e) => {
                tracing::debug!(host = %self.spec.destination(), error = %e, "no SFTP channel; rsync pulls");
                c.insert(self.key(), Channel::Refused(Instant::now()));
                None
            }
        }
    }

    fn sftp_error(&self, what: &str, e: &dyn std::fmt::Display) -> Error {
        Error::Remote(format!("SFTP {what} on {} failed: {e}", self.spec.destination()))
    }
}

/// Drop `key`'s channel once no pull has used it for [`KEPT_IDLE`] (a pull under way keeps
/// its own handle: the channel closes when that is done).
fn drop_when_idle(key: String, kept: std::sync::Weak<Sftp>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(KEPT_IDLE / 2).await;
            let mut c = channels().lock().expect("not poisoned");
            match c.get(&key) {
                Some(Channel::Open { sftp, used, .. }) if std::ptr::eq(Arc::as_ptr(sftp), kept.as_ptr()) => {
                    if used.elapsed() >= KEPT_IDLE {
                        tracing::debug!(host = %key, "kept SFTP channel idle; closed");
                        c.remove(&key);
                        return;
                    }
                }
                _ => return,
            }
        }
    });
}

/// Close every kept channel: their masters can then be closed ([`super::close_all`]).
pub(super) async fn close_kept() {
    let open: Vec<Arc<Sftp>> = channels()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .drain()
        .filter_map(|(_, c)| match c {
            Channel::Open { sftp, .. } => Some(sftp),
            Channel::Refused(_) => None,
        })
        .collect();
    for s in open {
        if let Ok(s) = Arc::try_unwrap(s) {
            let _ = s.close().await;
        }
    }
}

/// Copy the remote `handoffs/` and `artifacts/` (recursively) of a task into the local
/// task folder over `sftp`, by the rules of [`Host::pull_sftp`]; files over `max` bytes
/// are counted, not copied.
async fn copy(
    host: &Host,
    sftp: &Sftp,
    remote_task_dir: &str,
    local_task_dir: &Path,
    max: Option<u64>,
) -> Result<Copied> {
    let tmp_dir = local_task_dir.join(".pull-partial").join("tmp");
    crate::store::fsutil::create_dir_all(&tmp_dir)?;
    let mut fs = sftp.fs();
    let handoffs = local_task_dir.join("handoffs");
    let mut out = Copied::default();
    let mut stack: Vec<(String, PathBuf)> = ["handoffs", "artifacts"]
        .iter()
        .map(|sub| (format!("{remote_task_dir}/{sub}"), local_task_dir.join(sub)))
        .collect();
    while let Some((rdir, ldir)) = stack.pop() {
        let dir = match fs.open_dir(&rdir).await {
            Ok(d) => d,
            Err(e) if answered(&e) => {
                tracing::debug!(dir = %rdir, error = %e, "no such remote folder");
                continue;
            }
            Err(e) => return Err(host.sftp_error(&format!("open {rdir}"), &e)),
        };
        let entries: Vec<_> = dir.read_dir().collect().await;
        crate::store::fsutil::create_dir_all(&ldir)?;
        for entry in entries {
            let entry = entry.map_err(|e| host.sftp_error("list", &e))?;
            let name = entry.filename().to_string_lossy().into_owned();
            if name.starts_with('.') || name.contains('/') {
                continue;
            }
            let (rpath, lpath) = (format!("{rdir}/{name}"), ldir.join(&name));
            let ft = entry.file_type();
            if ft.is_some_and(|t| t.is_dir()) {
                stack.push((rpath, lpath));
                continue;
            }
            if !ft.is_some_and(|t| t.is_file()) {
                continue; // symlinks, FIFOs…: never followed, never copied
            }
            let meta = entry.metadata();
            let mtime = meta.modified().map(|t| t.as_system_time());
            if let Ok(local) = std::fs::symlink_metadata(&lpath) {
                let secs = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).ok().map(|d| d.as_secs());
                let same_time = mtime.is_some_and(|m| local.modified().ok().and_then(secs) == secs(m));
                if local.is_file() && Some(local.len()) == meta.len() && same_time {
                    continue;
                }
            }
            if max.is_some_and(|m| meta.len().is_none_or(|l| l > m)) {
                out.left += 1;
                continue;
            }
            let bytes = match fs.read(&rpath).await {
                Ok(b) => b,
                // Gone or unreadable since the listing: rsync's pull says which.
                Err(e) if answered(&e) && max.is_some() => {
                    out.left += 1;
                    continue;
                }
                Err(e) => return Err(host.sftp_error(&format!("read {rpath}"), &e)),
            };
            let tmp = tmp_dir.join(format!("{name}.{}", std::process::id()));
            {
                use std::io::Write;
                let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
                f.write_all(&bytes).map_err(|e| Error::io("write", &tmp, e))?;
                if let Some(m) = mtime {
                    f.set_modified(m).map_err(|e| Error::io("set the mtime of", &tmp, e))?;
                }
                f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
            }
            std::fs::rename(&tmp, &lpath).map_err(|e| Error::io("rename into", &lpath, e))?;
            if ldir == handoffs {
                out.arrived.push(name);
            }
        }
    }
    Ok(out)
}

/// Whether `e` is the server's answer about a path (no such file, permission denied…),
/// rather than the channel failing.
fn answered(e: &openssh_sftp_client::Error) -> bool {
    matches!(e, openssh_sftp_client::Error::SftpError(..))
}
