//! `Subscribe`: a connection kept open that streams what changed, so `task ui` follows
//! the supervised tasks without asking again and again. The daemon sends what it learns
//! anyway (a handoff final, a task registered or dropped); a subscriber that falls
//! behind is told to look at everything once instead of being sent a backlog.

use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;
use tokio::sync::{broadcast, oneshot};

use crate::core::wire::{Envelope, PROTOCOL_VERSION, Response, Supervised};

/// Changes a subscriber receives.
pub(super) type Changes = broadcast::Receiver<Response>;

/// How many changes a slow subscriber may be behind before it is told to rescan.
const BACKLOG: usize = 256;

/// The daemon's side: where changes are announced (no subscriber: nothing is kept).
pub(super) struct Hub(broadcast::Sender<Response>);

impl Hub {
    pub(super) fn new() -> Hub {
        Hub(broadcast::channel(BACKLOG).0)
    }

    /// A new subscriber's stream.
    pub(super) fn subscribe(&self) -> Changes {
        self.0.subscribe()
    }

    /// The set of supervised tasks changed.
    pub(super) fn tasks_changed(&self) {
        let _ = self.0.send(Response::Changed {
            project: String::new(),
            task: String::new(),
        });
    }

    /// Something of the task under the supervisor's key `k` (`project\0task`) changed.
    pub(super) fn task_changed(&self, k: &str) {
        let (project, task) = k.split_once('\u{0}').unwrap_or((k, ""));
        let _ = self.0.send(Response::Changed {
            project: project.into(),
            task: task.into(),
        });
    }
}

async fn write(wr: &mut OwnedWriteHalf, r: Response) -> std::io::Result<()> {
    let mut out = serde_json::to_vec(&Envelope {
        v: PROTOCOL_VERSION,
        body: r,
    })
    .expect("serialises");
    out.push(b'\n');
    wr.write_all(&out).await
}

/// Serve one subscriber until it hangs up (a write fails) or the daemon stops. `ask`
/// hands the supervisor loop the channel for the tasks now and the stream of changes.
pub(super) async fn serve(
    mut wr: OwnedWriteHalf,
    ask: impl FnOnce(oneshot::Sender<(Vec<Supervised>, Changes)>) -> bool,
) {
    let (tx, rx) = oneshot::channel();
    if !ask(tx) {
        let _ = write(
            &mut wr,
            Response::failure("the daemon is busy or stopping; subscribe again"),
        )
        .await;
        return;
    }
    let Ok((tasks, mut changes)) = rx.await else { return };
    if write(&mut wr, Response::Tasks { tasks }).await.is_err() {
        return;
    }
    loop {
        let r = match changes.recv().await {
            Ok(r) => r,
            Err(broadcast::error::RecvError::Lagged(_)) => Response::Changed {
                project: String::new(),
                task: String::new(),
            },
            Err(broadcast::error::RecvError::Closed) => return,
        };
        if write(&mut wr, r).await.is_err() {
            return;
        }
    }
}
