//! What the page shows, kept fresh without looking for the page's sake: one thread owns
//! `task ui`'s [`Source`] over every supervised task and reads a task again only when the
//! daemon announces a change of it (handoffs, the task set) or its folder's watch does
//! (state, events); a dead pane is noticed by a look at /proc every [`WAKE`] and confirmed
//! by one `tmux list-panes`. Each change is published as a new [`Shown`], which pages
//! read and the event streams wait on; an open page with nothing happening costs the
//! daemon one /proc look per local agent per wake.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::store::task::Task;
use crate::ui::model::TaskView;
use crate::ui::source::{Change, Scope, Source};

/// How often the thread wakes to look at /proc when nothing was announced.
const WAKE: Duration = Duration::from_millis(250);
/// How often panes are listed anyway (idle times, stale lanes).
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// One published picture of the supervised tasks.
#[derive(Debug, Clone, Default)]
pub struct Shown {
    /// The tasks, in the order of `views`.
    pub tasks: Vec<Task>,
    /// Each task's status and newest events.
    pub views: Vec<TaskView>,
    /// Why the tasks could not be listed, when they could not.
    pub problem: Option<String>,
    /// Counts up with each publication.
    pub version: u64,
}

impl Shown {
    /// The task at `/t/<pid>/<name>`.
    pub fn find(&self, pid: &str, name: &str) -> Option<usize> {
        self.tasks.iter().position(|t| {
            t.name.as_str() == name && crate::app::settings::project_id(&t.project.display().to_string()) == pid
        })
    }
}

/// The board: the latest picture, the items marked seen, and the thread keeping it.
pub struct Board {
    shown: watch::Sender<Arc<Shown>>,
    /// Keys of Needs-you items a person marked seen (until they change).
    pub seen: Mutex<BTreeSet<String>>,
    changes: Sender<Change>,
    stop: Arc<AtomicBool>,
}

impl Board {
    /// Start the thread; it lists the tasks from the daemon (this process) at once.
    pub fn start() -> Arc<Board> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (shown, _) = watch::channel(Arc::new(Shown::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let b = Arc::new(Board {
            shown,
            seen: Mutex::new(BTreeSet::new()),
            changes: tx.clone(),
            stop: stop.clone(),
        });
        let publish = b.shown.clone();
        std::thread::Builder::new()
            .name("web-board".into())
            .spawn(move || run(tx, rx, publish, stop))
            .expect("a thread starts");
        b
    }

    /// The latest picture.
    pub fn now(&self) -> Arc<Shown> {
        self.shown.borrow().clone()
    }

    /// The latest picture once there is one: a page asked for right after the start waits
    /// (up to 5 s) for the first listing rather than show no task.
    pub async fn ready(&self) -> Arc<Shown> {
        let mut rx = self.shown.subscribe();
        let _ = tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|s| s.version > 0)).await;
        self.now()
    }

    /// A receiver told of each new picture (for event streams).
    pub fn follow(&self) -> watch::Receiver<Arc<Shown>> {
        self.shown.subscribe()
    }

    /// Something changed that the page shows: from the daemon's stream, or an action.
    pub fn changed(&self, c: Change) {
        let _ = self.changes.send(c);
    }

    /// End the thread (within a wake).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        self.stop();
    }
}

fn publish(tx: &watch::Sender<Arc<Shown>>, src: Option<&Source>, problem: Option<String>) {
    let version = tx.borrow().version + 1;
    let (tasks, views) = src.map(|s| (s.tasks.clone(), s.views.clone())).unwrap_or_default();
    tx.send_replace(Arc::new(Shown {
        tasks,
        views,
        problem,
        version,
    }));
}

fn run(tx: Sender<Change>, rx: Receiver<Change>, out: watch::Sender<Arc<Shown>>, stop: Arc<AtomicBool>) {
    let mut src: Option<Source> = None;
    let mut last_look = Instant::now();
    let mut retry = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let Some(s) = src.as_mut() else {
            if Instant::now() >= retry {
                match Source::open(Scope::All, tx.clone()) {
                    Ok(s) => {
                        publish(&out, Some(&s), None);
                        src = Some(s);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the web page cannot list the supervised tasks; trying again in 2 s");
                        publish(&out, None, Some(e.to_string()));
                        retry = Instant::now() + Duration::from_secs(2);
                    }
                }
            }
            std::thread::sleep(WAKE);
            continue;
        };
        let mut dirty = BTreeSet::new();
        let mut rescan = false;
        match rx.recv_timeout(WAKE) {
            Ok(c) => {
                let mut note = |c: Change| match c {
                    Change::Task(i) => {
                        dirty.insert(i);
                    }
                    Change::Tasks => rescan = true,
                    Change::Named { project, task } => dirty.extend(s.index_of(&project, &task)),
                };
                note(c);
                while let Ok(c) = rx.try_recv() {
                    note(c);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let mut changed = false;
        if rescan {
            if let Err(e) = s.rescan() {
                tracing::warn!(error = %e, "the web page cannot list the supervised tasks again");
            }
            changed = true;
        } else if !dirty.is_empty() {
            for i in dirty {
                s.reload(i);
            }
            s.look_at_panes();
            changed = true;
        }
        if last_look.elapsed() >= LOOK_EVERY || s.a_pane_ended() {
            last_look = Instant::now();
            changed |= s.look_at_panes();
        }
        if changed {
            publish(&out, Some(s), None);
        }
    }
    tracing::debug!("the web board stops");
}
