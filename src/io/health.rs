//! Whether each remote host answers, as this process's heartbeat found it last
//! ([`crate::io::remote::heartbeat`]). One authority, so nothing else has to find out the
//! slow way: a stopped or partitioned host keeps its TCP connection, and every command
//! sent to it would wait for ssh's own keepalive (15 s) or rsync's timeout (30 s) while
//! holding up whoever sent it — a task's actor, its check-ins, its other hosts' handoffs.
//! With a heartbeat on the host, every command to it ([`until_silent`]) ends the moment it
//! is found silent, and a new one is refused at once until it answers again.
//!
//! Keyed by the host's connection key (destination and port). Only a process that beats
//! (the daemon, for hosts with running agents) knows anything; elsewhere every host is
//! presumed to answer and commands keep their own bounds.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio::sync::watch;

use crate::core::error::{Error, Result};

/// How long a heartbeat keeps going after the last ask to watch the host: a host whose
/// agents have all ended stops being beaten soon after.
const WATCHED_FOR: Duration = Duration::from_secs(60);

/// One host: since when it has been silent (None: it answers, or nothing is known), and
/// whether a heartbeat runs for it.
struct Entry {
    silent: watch::Sender<Option<DateTime<Utc>>>,
    watched_at: Instant,
    beating: bool,
    /// Whether a beat has been recorded since the heartbeat started.
    known: bool,
}

impl Entry {
    fn new() -> Entry {
        Entry {
            silent: watch::channel(None).0,
            watched_at: Instant::now(),
            beating: false,
            known: false,
        }
    }
}

#[derive(Default)]
struct Health {
    hosts: Mutex<HashMap<String, Entry>>,
    /// Told when a host falls silent or answers again.
    changed: tokio::sync::Notify,
}

impl crate::store::memo::Memo for Health {
    const NAME: &'static str = "host health";
    fn entries(&self) -> usize {
        self.hosts.lock().map_or(0, |h| h.len())
    }
}

fn with<T>(key: &str, f: impl FnOnce(&mut Entry) -> T) -> T {
    let mut hosts = crate::store::memo::get::<Health>()
        .hosts
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(hosts.entry(key.to_string()).or_insert_with(Entry::new))
}

/// Someone wants to know about `key` from now on; true when no heartbeat runs for it yet
/// (the caller starts one, and it is counted as running from here).
pub fn watch(key: &str) -> bool {
    with(key, |e| {
        e.watched_at = Instant::now();
        !std::mem::replace(&mut e.beating, true)
    })
}

/// For the heartbeat: whether to go on. False (and the heartbeat counted as stopped) once
/// nobody asked for `WATCHED_FOR`; what it found is forgotten then.
pub fn still_watched(key: &str) -> bool {
    with(key, |e| {
        let on = e.watched_at.elapsed() < WATCHED_FOR;
        if !on {
            e.beating = false;
            e.known = false;
            e.silent.send_replace(None);
            let _ = std::fs::remove_file(known_path(key));
        }
        on
    })
}

/// For the heartbeat: what one beat found. A change (and the first answer) is also written
/// where other processes read it ([`last_known`]): `task hosts` shows it.
pub fn record(key: &str, answered: bool) {
    let now = crate::core::clock::now();
    let changed = with(key, |e| {
        let first = std::mem::replace(&mut e.known, true);
        e.silent.send_if_modified(|s| match (answered, s.is_some()) {
            (true, true) => {
                *s = None;
                true
            }
            (false, false) => {
                *s = Some(now);
                true
            }
            _ => false,
        }) || !first
    });
    if changed {
        crate::store::memo::get::<Health>().changed.notify_waiters();
        let k = Known {
            answering: answered,
            since: now,
            pid: std::process::id(),
        };
        if let Ok(bytes) = serde_json::to_vec(&k) {
            let _ = crate::store::fsutil::create_dir_all(&known_dir())
                .and_then(|()| crate::store::fsutil::atomic_write(&known_path(key), &bytes));
        }
    }
}

/// A host's heartbeat as the daemon last wrote it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Known {
    /// Whether the host answered its last beat.
    pub answering: bool,
    /// Since when (the last change).
    pub since: DateTime<Utc>,
    /// The process that beats it.
    pub pid: u32,
}

fn known_dir() -> std::path::PathBuf {
    crate::store::paths::runtime_dir().join("hosts")
}

fn known_path(key: &str) -> std::path::PathBuf {
    known_dir().join(format!("{}.json", key.replace('/', "_")))
}

/// What the process that beats `key` (the daemon) found last; None when nothing beats it
/// (no agents there, or that process has ended).
pub fn last_known(key: &str) -> Option<Known> {
    let k: Known = serde_json::from_slice(&std::fs::read(known_path(key)).ok()?).ok()?;
    std::path::Path::new(&format!("/proc/{}", k.pid)).exists().then_some(k)
}

/// Resolves when some host falls silent or answers again (a waiter registered before the
/// change is woken; one that was busy meets it at its next look anyway).
pub async fn changed() {
    crate::store::memo::get::<Health>().changed.notified().await;
}

/// Since when `key` has not answered its heartbeat; None when it answers or nobody beats it.
pub fn silent_since(key: &str) -> Option<DateTime<Utc>> {
    with(key, |e| *e.silent.borrow())
}

/// Run `work` on host `key` (`what` names it for the error), ended the moment the host is
/// found silent, or refused at once when it already is.
pub async fn until_silent<T>(key: &str, what: &str, work: impl Future<Output = Result<T>>) -> Result<T> {
    race(key, work)
        .await
        .unwrap_or_else(|since| Err(Error::Remote(silent_error(what, since))))
}

/// What a command refused or ended by silence says.
pub fn silent_error(what: &str, since: DateTime<Utc>) -> String {
    format!(
        "{what}: the host has not answered its heartbeat since {}; it is retried when it answers",
        crate::core::clock::local_time(since)
    )
}

/// `work`'s output, or since when the host has been silent if it was found so first.
pub async fn race<F: Future>(key: &str, work: F) -> std::result::Result<F::Output, DateTime<Utc>> {
    let mut rx = with(key, |e| e.silent.subscribe());
    if let Some(since) = *rx.borrow_and_update() {
        return Err(since);
    }
    tokio::select! {
        r = work => Ok(r),
        since = async {
            loop {
                if rx.changed().await.is_err() {
                    return std::future::pending().await;
                }
                if let Some(s) = *rx.borrow_and_update() {
                    return s;
                }
            }
        } => Err(since),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_on_a_silent_host_ends_when_it_falls_silent_and_is_refused_until_it_answers() {
        let k = "health-test-1:22";
        assert!(watch(k), "first watcher starts the heartbeat");
        assert!(!watch(k), "one heartbeat per host");
        let slow = tokio::spawn(until_silent(k, "list panes", async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        }));
        tokio::time::sleep(Duration::from_millis(20)).await;
        record(k, false);
        let r = tokio::time::timeout(Duration::from_secs(2), slow)
            .await
            .expect("ended at once");
        assert!(r.unwrap().unwrap_err().to_string().contains("heartbeat"));
        let since = silent_since(k).expect("silent");
        record(k, false);
        assert_eq!(silent_since(k), Some(since), "silent since the first miss");
        assert!(until_silent(k, "x", async { Ok(()) }).await.is_err(), "refused at once");
        record(k, true);
        assert_eq!(silent_since(k), None);
        assert!(until_silent(k, "x", async { Ok(()) }).await.is_ok());
    }

    #[tokio::test]
    async fn an_unknown_host_is_presumed_to_answer() {
        assert_eq!(silent_since("health-test-2:22"), None);
        assert_eq!(until_silent("health-test-2:22", "x", async { Ok(7) }).await.unwrap(), 7);
    }
}
