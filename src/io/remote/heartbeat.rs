//! A host's heartbeat: one long-lived `cat` over its master, sent a line every
//! [`BEAT`] and expected to echo it within [`ANSWER_WITHIN`]. What it finds is the
//! process's word on the host ([`crate::io::health`]): every other command to the host ends
//! the moment a beat goes unanswered, instead of waiting out ssh's keepalive or rsync's
//! timeout. A round trip through the host's sshd, not a look at the local master: a
//! stopped or partitioned host keeps its TCP connection and its master looks alive.
//!
//! The channel also keeps the master in use, so it does not idle out between commands;
//! when the process dies, `cat` reads end-of-file and the master ends after its idle time.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

use super::{Host, key};
use crate::core::model::RemoteSpec;
use crate::io::health;

/// How often a beat is sent.
const BEAT: Duration = Duration::from_secs(2);
/// How long an echo may take before the host counts as silent.
const ANSWER_WITHIN: Duration = Duration::from_secs(6);
/// The first echo also waits for the remote shell to start (rc files can take seconds).
const FIRST_ANSWER_WITHIN: Duration = Duration::from_secs(20);

/// Keep a heartbeat on `spec`'s host for as long as someone asks (every few seconds) and a
/// little after; starts one on the first ask. Needs a tokio runtime (the daemon's).
pub fn keep(spec: &RemoteSpec) {
    let k = key(spec);
    if health::watch(&k) {
        tokio::spawn(run(spec.clone(), k));
    }
}

async fn run(spec: RemoteSpec, k: String) {
    tracing::debug!(host = %spec.destination(), "heartbeat on");
    loop {
        beat_while_it_answers(&spec, &k).await;
        if !health::still_watched(&k) {
            break;
        }
        health::record(&k, false);
        tokio::time::sleep(BEAT).await;
    }
    tracing::debug!(host = %spec.destination(), "heartbeat off (no agents there)");
}

/// One echo channel, beaten until it misses (or nobody watches any more).
async fn beat_while_it_answers(spec: &RemoteSpec, k: &str) {
    let Ok(host) = Host::connect(spec).await else { return };
    let prefix = host.ssh_prefix();
    let mut c = Command::new(&prefix[0]);
    c.args(&prefix[1..])
        .arg("exec cat")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    let Ok(mut child) = c.spawn() else { return };
    let (Some(mut to), Some(from)) = (child.stdin.take(), child.stdout.take()) else {
        return;
    };
    let mut lines = BufReader::new(from).lines();
    let mut wait = FIRST_ANSWER_WITHIN;
    loop {
        let started = std::time::Instant::now();
        if to.write_all(b"beat\n").await.is_err() {
            return;
        }
        match tokio::time::timeout(wait, lines.next_line()).await {
            Ok(Ok(Some(_))) => health::record(k, true),
            _ => {
                tracing::warn!(host = %spec.destination(), waited = ?started.elapsed(), "heartbeat missed");
                return;
            }
        }
        wait = ANSWER_WITHIN;
        tokio::time::sleep(BEAT).await;
        if !health::still_watched(k) {
            return;
        }
    }
}
