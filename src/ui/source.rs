//! Where `task ui` gets its data, cheaply: each task's status is read once at start and
//! then only when a file watch says that task changed (pm_state.json, events.jsonl,
//! handoffs/); panes are listed with one `tmux list-panes` when a pane process ended
//! (seen in /proc), when a task changed and every 5 s, and only when some agent has a
//! local pane. Nothing re-reads every task folder in a loop.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

use notify::{RecursiveMode, Watcher};

use crate::app::session::Ctx;
use crate::core::error::{Error, Result};
use crate::core::model::PaneState;
use crate::core::names::TaskName;
use crate::core::wire::{Request, Response};
use crate::io::tmux::find_pane;
use crate::store::task::Task;

use super::model::TaskView;

/// How much of events.jsonl is read: its tail, enough for a screen of events.
const EVENTS_TAIL: u64 = 32 * 1024;

/// Which tasks the UI shows.
#[derive(Debug, Clone)]
pub enum Scope {
    /// Every task of this project folder.
    Project(PathBuf),
    /// Every task the daemon supervises, across projects.
    All,
}

/// Something the source noticed, for the event loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Task `i` changed on disk.
    Task(usize),
    /// The set of tasks may have changed (a folder appeared in tasks/, the daemon
    /// registered or dropped one).
    Tasks,
    /// The daemon says this task changed (by project folder and name).
    Named { project: String, task: String },
}

/// Where one agent's pane is recorded.
#[derive(Debug, Clone)]
struct PaneRecord {
    agent: String,
    pane: String,
    server: Option<String>,
    /// The pane's process when last listed alive: checked with `kill(pid, 0)` between
    /// listings, so a death shows at once without running tmux.
    pid: Option<u32>,
}

/// The tasks, their views, and the watches that keep them fresh.
pub struct Source {
    /// The tasks shown, in order.
    pub tasks: Vec<Task>,
    /// Their views, same order.
    pub views: Vec<TaskView>,
    panes: Vec<Vec<PaneRecord>>,
    scope: Scope,
    ctx: Ctx,
    rt: tokio::runtime::Runtime,
    watcher: notify::RecommendedWatcher,
    watched: std::sync::Arc<Watched>,
}

/// The tasks in scope.
fn discover(scope: &Scope) -> Result<Vec<Task>> {
    match scope {
        Scope::Project(root) => {
            let mut names: Vec<TaskName> = match std::fs::read_dir(root.join("tasks")) {
                Ok(rd) => rd
                    .filter_map(|e| e.ok())
                    .filter(|e| e.path().join("task.md").is_file())
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect(),
                Err(_) => Vec::new(),
            };
            names.sort();
            names.into_iter().map(|n| Task::new(root, n)).collect()
        }
        Scope::All => match crate::io::control::request(&Request::Tasks)? {
            Some(Response::Tasks { tasks }) => Ok(tasks
                .into_iter()
                .filter_map(|s| Task::new(Path::new(&s.project), s.task.parse().ok()?).ok())
                .filter(|t| t.exists())
                .collect()),
            _ => Err(Error::Environment(
                "--all shows the tasks the daemon supervises, and no daemon answers; start one with `task daemon` (or use --project DIR)".into(),
            )),
        },
    }
}

/// Read the last [`EVENTS_TAIL`] bytes of a task's events.jsonl (a torn first line is skipped).
fn events_tail(t: &Task) -> Vec<crate::store::events::Event> {
    let p = crate::store::events::path(t);
    let Ok(mut f) = std::fs::File::open(&p) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let from = len.saturating_sub(EVENTS_TAIL);
    if f.seek(SeekFrom::Start(from)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    crate::store::events::parse(&String::from_utf8_lossy(&buf))
}

/// Whether a change to `p` can change the screen: not a lock or temp file (dot files:
/// the daemon takes `.state.lock` every few seconds), and in a task folder only the
/// files the UI reads.
fn shown(p: &Path) -> bool {
    let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    if name.starts_with('.') {
        return false;
    }
    let in_handoffs = p.parent().and_then(|d| d.file_name()).is_some_and(|d| d == "handoffs");
    in_handoffs || p.is_dir() || matches!(name, "pm_state.json" | "events.jsonl" | "task.md" | "handoffs")
}

/// Whether process `pid` has ended (gone, or a zombie).
fn ended(pid: u32) -> bool {
    if Path::new("/proc/self/stat").exists() {
        return match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => matches!(
                stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()),
                Some("Z" | "X")
            ),
        };
    }
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid as i32, 0) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Whether a watch event is a change: written, created, removed, renamed — not an open
/// or a read, which `task status` and the daemon do all the time.
fn changes(e: &notify::Event) -> bool {
    use notify::EventKind;
    use notify::event::{AccessKind, AccessMode};
    match e.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) | EventKind::Other => false,
        _ => true,
    }
}

/// The status shown for a task whose folder cannot be read: its name and the problem.
fn unreadable(t: &Task, problem: String) -> crate::core::status::TaskStatus {
    crate::core::status::TaskStatus {
        task: t.name.to_string(),
        title: None,
        dir: t.dir().display().to_string(),
        phase: Default::default(),
        last_checkin: None,
        next_checkin: None,
        agents: Vec::new(),
        blockers: Vec::new(),
        handoffs: 0,
        handoffs_unprocessed: 0,
        handoffs_skipped: 0,
        artifacts: 0,
        escalations: Vec::new(),
        permissions: Vec::new(),
        roster: "?".into(),
        lanes: Vec::new(),
        problems: vec![problem],
        watcher: None,
        rotation: None,
        cost: None,
        git: None,
    }
}

/// One task's view and pane records, read from its folder.
fn load(t: &Task) -> (TaskView, Vec<PaneRecord>) {
    let status = crate::app::status::task_status(t).unwrap_or_else(|e| {
        tracing::warn!(task = %t.name, error = %e, "cannot read the task's status");
        unreadable(t, e.to_string())
    });
    let panes = t
        .state()
        .map(|st| {
            st.agents
                .iter()
                .filter(|(_, a)| a.host.is_local())
                .filter_map(|(name, a)| {
                    Some(PaneRecord {
                        agent: name.clone(),
                        pane: a.pane.clone()?,
                        server: a.tmux_server.clone(),
                        pid: None,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let view = TaskView {
        status,
        events: events_tail(t),
    };
    (view, panes)
}

impl Source {
    /// Find the tasks, read each once, and watch their folders; changes are sent to `tx`.
    pub fn open(scope: Scope, tx: Sender<Change>) -> Result<Source> {
        let ctx = Ctx::from_env()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("start a runtime", "task ui", e))?;
        let watched = std::sync::Arc::new(Watched::default());
        let w2 = watched.clone();
        let watcher = crate::io::watch::watcher(move |res: notify::Result<notify::Event>| {
            // Reads (ours, the daemon's) are not changes: reacting to them would loop.
            if let Ok(ev) = res
                .as_ref()
                .map_err(|_| ())
                .and_then(|e| changes(e).then_some(e).ok_or(()))
            {
                for p in &ev.paths {
                    let _ = w2.with_path(p, &tx);
                }
            }
        })
        .map_err(|e| Error::Environment(format!("cannot watch task folders: {e}")))?;
        let mut s = Source {
            tasks: Vec::new(),
            views: Vec::new(),
            panes: Vec::new(),
            scope,
            ctx,
            rt,
            watcher,
            watched,
        };
        s.rescan()?;
        Ok(s)
    }

    /// Find the tasks again and (re)watch them; read every task once.
    pub fn rescan(&mut self) -> Result<()> {
        for t in &self.tasks {
            let _ = self.watcher.unwatch(&t.dir());
            let _ = self.watcher.unwatch(&t.handoffs());
        }
        self.tasks = discover(&self.scope)?;
        let mut map = BTreeMap::new();
        if let Scope::Project(root) = &self.scope {
            let tasks_dir = root.join("tasks");
            if self.watcher.watch(&tasks_dir, RecursiveMode::NonRecursive).is_ok() {
                map.insert(tasks_dir.clone(), Change::Tasks);
            }
            // A folder `task new` is still filling: its task.md appearing is a new task.
            let unborn = std::fs::read_dir(&tasks_dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path());
            for d in unborn.filter(|d| d.is_dir() && !d.join("task.md").is_file()) {
                if self.watcher.watch(&d, RecursiveMode::NonRecursive).is_ok() {
                    map.insert(d, Change::Tasks);
                }
            }
        }
        for (i, t) in self.tasks.iter().enumerate() {
            for d in [t.dir(), t.handoffs()] {
                match self.watcher.watch(&d, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        map.insert(d, Change::Task(i));
                    }
                    Err(e) => tracing::warn!(dir = %d.display(), error = %e, "not watched; press a key to refresh"),
                }
            }
        }
        self.watched.set(map);
        let loaded: Vec<_> = self.tasks.iter().map(load).collect();
        (self.views, self.panes) = loaded.into_iter().unzip();
        self.look_at_panes();
        Ok(())
    }

    /// The index of the task named by the daemon.
    pub fn index_of(&self, project: &str, task: &str) -> Option<usize> {
        self.tasks
            .iter()
            .position(|t| t.name.as_str() == task && t.project == Path::new(project))
    }

    /// Read task `i` again (a watch said it changed).
    pub fn reload(&mut self, i: usize) {
        if let Some(t) = self.tasks.get(i) {
            tracing::debug!(task = %t.name, "reading the task again");
            let (v, p) = load(t);
            self.views[i] = v;
            self.panes[i] = p;
        }
    }

    /// One `tmux list-panes` for every local agent: alive, dead or gone, and idle time.
    /// Returns whether anything shown changed. No agent with a pane: no tmux call.
    pub fn look_at_panes(&mut self) -> bool {
        if self.panes.iter().all(Vec::is_empty) {
            return false;
        }
        tracing::debug!("listing panes");
        let Ok(panes) = self.rt.block_on(self.ctx.tmux.list_panes()) else {
            return false;
        };
        let now = crate::core::clock::now().timestamp();
        let mut changed = false;
        for (view, recs) in self.views.iter_mut().zip(self.panes.iter_mut()) {
            for r in recs {
                let p = find_pane(&panes, &r.pane, r.server.as_deref());
                r.pid = p.filter(|p| !p.dead).and_then(|p| p.pid);
                let Some(row) = view.status.agents.iter_mut().find(|a| a.name == r.agent) else {
                    continue;
                };
                let before = (row.pane, row.exit_status, row.exit_signal, row.idle_secs);
                row.pane = Some(match p {
                    None => PaneState::Gone,
                    Some(p) if p.dead => PaneState::Dead,
                    Some(_) => PaneState::Alive,
                });
                row.exit_status = p.filter(|p| p.dead).and_then(|p| p.dead_status);
                row.exit_signal = p.filter(|p| p.dead).and_then(|p| p.dead_signal);
                row.idle_secs = p
                    .filter(|p| p.activity > 0 && !p.dead)
                    .map(|p| (now - p.activity).max(0));
                if let Some(lane) = view.status.lanes.iter_mut().find(|l| l.agent == r.agent) {
                    lane.refresh(row.idle_secs.filter(|_| row.pane == Some(PaneState::Alive)));
                }
                changed |= before != (row.pane, row.exit_status, row.exit_signal, row.idle_secs);
            }
        }
        changed
    }

    /// Whether a pane process seen alive at the last listing has ended since: a look at
    /// its /proc entry per local agent (gone, or a zombie tmux has not reaped yet), no
    /// process started. Without /proc (not Linux) `kill(pid, 0)` says whether it exists.
    pub fn a_pane_ended(&self) -> bool {
        self.panes.iter().flatten().filter_map(|r| r.pid).any(ended)
    }

    /// Count idle times on by `secs` between listings (the pane's activity is only
    /// re-read every few seconds).
    pub fn age(&mut self, secs: i64) {
        for v in &mut self.views {
            for a in &mut v.status.agents {
                if let Some(i) = a.idle_secs.as_mut() {
                    *i += secs;
                }
            }
        }
    }

    /// The context agent actions use (the same tmux server and prefix as `task`).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// Run a future on the UI's runtime (actions reuse the async app code paths).
    pub fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }
}

/// Which watched folder means which change; shared with the watcher's thread.
#[derive(Default)]
struct Watched(std::sync::Mutex<BTreeMap<PathBuf, Change>>);

impl Watched {
    fn set(&self, m: BTreeMap<PathBuf, Change>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = m;
    }

    /// Send the change `p` means: its folder's, or its parent folder's.
    fn with_path(&self, p: &Path, tx: &Sender<Change>) -> Option<()> {
        if !shown(p) {
            return None;
        }
        let m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let c = m.get(p.parent()?).or_else(|| m.get(p))?;
        tx.send(c.clone()).ok()
    }
}
