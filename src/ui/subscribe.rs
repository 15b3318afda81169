//! The UI's side of the daemon's `Subscribe`: a thread reading the stream of changes
//! and passing each on as a [`Change`]. Without a daemon there is no stream, and the
//! file watches alone keep the screen fresh.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::Sender;

use crate::core::wire::{Envelope, PROTOCOL_VERSION, Request, Response};

use super::source::Change;

/// Subscribe when a daemon answers; whether it did. The thread ends when the daemon
/// hangs up or the UI's receiver is gone.
pub fn start(tx: Sender<Change>) -> bool {
    let Ok(mut s) = UnixStream::connect(crate::store::paths::socket_path()) else {
        return false;
    };
    let mut line = serde_json::to_vec(&Envelope {
        v: PROTOCOL_VERSION,
        body: Request::Subscribe,
    })
    .expect("serialises");
    line.push(b'\n');
    if s.write_all(&line).is_err() {
        return false;
    }
    let mut r = BufReader::new(s);
    let mut first = String::new();
    let subscribed = r.read_line(&mut first).is_ok()
        && matches!(
            serde_json::from_str::<Envelope<Response>>(&first).map(|e| e.body),
            Ok(Response::Tasks { .. })
        );
    if !subscribed {
        tracing::debug!(answer = %first.trim(), "the daemon did not take the subscription");
        return false;
    }
    std::thread::spawn(move || {
        for l in r.lines() {
            let Ok(l) = l else { break };
            let Ok(env) = serde_json::from_str::<Envelope<Response>>(&l) else {
                continue;
            };
            let c = match env.body {
                Response::Changed { task, .. } if task.is_empty() => Change::Tasks,
                Response::Changed { project, task } => Change::Named { project, task },
                _ => continue,
            };
            if tx.send(c).is_err() {
                break;
            }
        }
        tracing::debug!("the daemon's change stream ended; file watches go on");
    });
    true
}
