//! The daemon process: lock, socket, and the supervisor loop that owns the set of
//! actors (connections and the file watcher talk to it by message). Each actor keeps
//! its own task's check-in schedule, from the time saved in pm_state.json.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::core::error::{Error, Result};
use crate::core::names::TaskName;
use crate::io::tmux::Tmux;
use crate::store::task::Task;

use super::actor::{self, Msg};
use super::watcher::{Seen, Watcher};
use crate::core::wire::{
    Envelope, MAX_REQUEST, PROTOCOL_VERSION, Request, Response, StopRequest, Supervised, WebRequest,
};
use crate::store::registry;

/// Reconcile scan interval (events are only hints; network filesystems give none).
const RECONCILE_EVERY: Duration = Duration::from_secs(5);

enum Control {
    /// A request, with the process that sent it (peer credentials) when known.
    Request(Request, Option<u32>, oneshot::Sender<Response>),
    /// A subscriber: the tasks now, and every change from here on.
    Subscribe(oneshot::Sender<(Vec<Supervised>, super::subscribe::Changes)>),
    /// What the file watcher saw.
    Seen(Seen),
    /// Stop supervising a task (a stop let through by its gate); answered once done.
    Unsupervise(Supervised, oneshot::Sender<()>),
    /// Stop the daemon (a shutdown let through by its gate), answering first.
    Shutdown(oneshot::Sender<Response>),
    /// Serve the web page or say where it is (a request let through by its gate).
    Web(WebRequest, oneshot::Sender<Response>),
}

struct Entry {
    handle: actor::Handle,
    join: tokio::task::JoinHandle<()>,
    handoffs: PathBuf,
    /// Whether its handoffs/ is watched; when not (the watch failed, the folder was removed
    /// or moved away) the reconcile tick tries again, and the 5 s scan covers the folder.
    watched: bool,
}

fn key(s: &Supervised) -> String {
    format!("{}\u{0}{}", s.project, s.task)
}

fn task_of(s: &Supervised) -> Result<Task> {
    let name: TaskName = s.task.parse()?;
    let t = Task::new(Path::new(&s.project), name)?;
    t.require()?;
    Ok(t)
}

/// The registry of supervised tasks: one actor per task, its handoffs/ watched, the
/// list saved so a restarted daemon picks every task up again.
struct Supervisor {
    entries: BTreeMap<String, Entry>,
    registered: Vec<Supervised>,
    watcher: Watcher,
    tmux: Tmux,
    /// Changes for subscribers (`task ui`).
    changes: super::subscribe::Hub,
    /// The supervisor loop's own queue, for work that finishes apart from it.
    ctl: mpsc::Sender<Control>,
    /// The web page, when served (`task web`, `[web] listen`).
    web: Option<crate::web::Server>,
}

impl Supervisor {
    /// Supervise `s` (already supervised: nothing to do).
    fn add(&mut self, s: &Supervised) -> Result<()> {
        if self.entries.contains_key(&key(s)) {
            return Ok(());
        }
        let t = task_of(s)?;
        let handoffs = t.handoffs();
        let watched = match self.watcher.watch(&handoffs) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(task = %s.task, error = %e, "the reconcile scan covers this folder, and the watch is tried again every 5 s");
                false
            }
        };
        let (handle, join) = actor::spawn(t, self.tmux.clone());
        self.entries.insert(
            key(s),
            Entry {
                handle,
                join,
                handoffs,
                watched,
            },
        );
        Ok(())
    }

    /// A watched handoffs/ was removed or moved away: stop the watch that is left (it
    /// follows a moved folder) and have the task look at once; [`Supervisor::rewatch`]
    /// watches the path again when a folder is back there.
    fn lost(&mut self, dir: &Path) {
        let mut any = false;
        for e in self.entries.values_mut().filter(|e| e.handoffs == dir && e.watched) {
            e.watched = false;
            let _ = e.handle.tx.try_send(Msg::Hint);
            any = true;
        }
        if any {
            self.watcher.unwatch(dir);
            tracing::warn!(dir = %dir.display(), "a task's handoffs folder was removed or moved away; it is watched again when it is back (the 5 s scan covers it meanwhile)");
        }
    }

    /// Watch again every handoffs/ that is not watched, and have its task scan once the
    /// watch is live: a file that landed before the watch is found by that scan, one after
    /// it by an event, so none waits for the schedule.
    fn rewatch(&mut self) {
        for e in self.entries.values_mut().filter(|e| !e.watched && e.handoffs.is_dir()) {
            if self.watcher.watch(&e.handoffs).is_ok() {
                e.watched = true;
                let _ = e.handle.tx.try_send(Msg::Hint);
                tracing::warn!(dir = %e.handoffs.display(), "watching the task's handoffs folder again");
            }
        }
    }

    /// Stop supervising `s`: its actor ends, its folder is no longer watched.
    fn remove(&mut self, s: &Supervised) {
        self.changes.tasks_changed();
        if let Some(e) = self.entries.remove(&key(s)) {
            self.watcher.unwatch(&e.handoffs);
            e.join.abort();
        }
        self.registered.retain(|x| x != s);
    }

    /// Tell every actor to look again.
    fn hint_all(&self) {
        for e in self.entries.values() {
            let _ = e.handle.tx.try_send(Msg::Hint);
        }
    }

    /// Tell the task watching `dir` that `file` was closed after writing or renamed in.
    /// Folders are told apart by their bytes: both are the task's own path joined the same
    /// way, and `Path`'s component-wise equality across every task, several times per
    /// handoff, showed in the soak's profile.
    fn final_in(&self, dir: &Path, file: &str, how: crate::store::handoffs::How) {
        let dir = dir.as_os_str();
        for (k, e) in self.entries.iter().filter(|(_, e)| e.handoffs.as_os_str() == dir) {
            let _ = e.handle.tx.try_send(Msg::Final(file.to_string(), how));
            self.changes.task_changed(k);
        }
    }

    fn save(&self) -> Result<()> {
        registry::save(&self.registered)
    }

    /// Register `s` and save the list.
    fn register(&mut self, s: Supervised) -> Response {
        if let Err(e) = self.add(&s) {
            return Response::error(&e);
        }
        if !self.registered.contains(&s) {
            self.registered.push(s);
            self.changes.tasks_changed();
        }
        match self.save() {
            Ok(()) => Response::Ok,
            Err(e) => Response::error(&e),
        }
    }

    /// Ask the task's actor for a check-in now; the answer comes from a separate task so
    /// the supervisor loop keeps serving.
    async fn checkin(&self, s: &Supervised, reply: oneshot::Sender<Response>) {
        let Some(e) = self.entries.get(&key(s)) else {
            let _ = reply.send(Response::failure(format!(
                "task '{}' is not supervised by the daemon",
                s.task
            )));
            return;
        };
        let (tx, rx) = oneshot::channel();
        let _ = e.handle.tx.send(Msg::CheckinNow(tx)).await;
        tokio::spawn(async move {
            let resp = rx
                .await
                .unwrap_or_else(|_| Response::failure("the task's actor stopped"));
            let _ = reply.send(resp);
        });
    }

    /// Ask the task's actor to rotate its PM, for the caller behind `peer`: a spoke is
    /// refused by the gate (rotating is the hub's or a human's call), as it would be in
    /// the CLI. The gate and the wait run apart from the supervisor loop.
    async fn rotate(&self, s: &Supervised, peer: Option<u32>, reply: oneshot::Sender<Response>) {
        let Some(e) = self.entries.get(&key(s)) else {
            let _ = reply.send(Response::failure(format!(
                "task '{}' is not supervised by the daemon",
                s.task
            )));
            return;
        };
        let tx = e.handle.tx.clone();
        let s = s.clone();
        tokio::spawn(async move {
            let resp = match crate::app::verbs::rotate::caller(&s, peer).await {
                Err(e) => Response::error(&e),
                Ok(by) => {
                    let (otx, orx) = oneshot::channel();
                    let _ = tx.send(Msg::RotateNow(by, otx)).await;
                    orx.await
                        .unwrap_or_else(|_| Response::failure("the task's actor stopped"))
                }
            };
            let _ = reply.send(resp);
        });
    }

    /// Run a verb (spawn, send) apart from the supervisor loop: a spawn or a send can
    /// wait seconds for an agent's input area, and the PM being checked in may be the
    /// caller (its check-in must not wait on its own spawn).
    fn verb(&mut self, req: Request, peer: Option<u32>, reply: oneshot::Sender<Response>) {
        // A spawned agent may be remote: its task's actor starts watching and pulling at once.
        let spawned = match (&req, req.supervised()) {
            (Request::Spawn(_), Some(s)) => self.entries.get(&key(&s)).map(|e| e.handle.tx.clone()),
            _ => None,
        };
        tokio::spawn(async move {
            let response = crate::app::verbs::answer(req, peer).await;
            if let Some(tx) = spawned {
                let _ = tx.try_send(Msg::Spawned);
            }
            let _ = reply.send(response);
        });
    }

    /// Stop the daemon for the caller behind `peer`, unless it is a spoke of a task the
    /// daemon supervises (the gate of each, apart from the supervisor loop).
    /// `task web` for the caller behind `peer`: its gate apart from the loop (a human's
    /// only), then [`Supervisor::serve_web`] back in it.
    fn web_request(&self, r: WebRequest, peer: Option<u32>, reply: oneshot::Sender<Response>) {
        let ctl = self.ctl.clone();
        let tasks = self.registered.clone();
        tokio::spawn(async move {
            match crate::app::verbs::web::permit(&tasks, peer).await {
                Ok(()) => {
                    let _ = ctl.send(Control::Web(r, reply)).await;
                }
                Err(e) => {
                    let _ = reply.send(Response::error(&e));
                }
            }
        });
    }

    /// Serve the web page as `r` asks (the request's choices, else those it is served
    /// with, else config.toml's, else loopback), or say where it is.
    async fn serve_web(&mut self, r: WebRequest) -> Response {
        let config = match crate::app::settings::web() {
            Ok(c) => c,
            Err(e) => return Response::error(&e),
        };
        let running = self.web.as_ref();
        let want = crate::web::Options {
            listen: r
                .listen
                .clone()
                .or_else(|| running.map(|w| w.addr.to_string()))
                .or(config.listen.clone())
                .unwrap_or_else(|| crate::web::DEFAULT_LISTEN.to_string()),
            read_only: r.read_only.or(running.map(|w| w.read_only)).unwrap_or(config.read_only),
            insecure_listen: r.insecure_listen || config.insecure_listen,
            tls: match config.tls() {
                Ok(t) => t,
                Err(e) => return Response::error(&e),
            },
        };
        let same = running.is_some_and(|w| w.addr.to_string() == want.listen && w.read_only == want.read_only);
        if same || !r.start {
            return Response::Web {
                url: running.map(crate::web::Server::url),
                read_only: running.is_some_and(|w| w.read_only),
            };
        }
        // A bad address is refused before the page served now is touched; the old page
        // goes first when the new one wants its port.
        if let Err(e) = crate::web::resolve(&want).await {
            return Response::error(&e);
        }
        let same_port = running.is_some_and(|w| want.listen.rsplit(':').next() == Some(&w.addr.port().to_string()));
        if same_port {
            self.web = None;
        }
        match crate::web::start(&want, self.changes.subscribe()).await {
            Ok(w) => {
                let answer = Response::Web {
                    url: Some(w.url()),
                    read_only: w.read_only,
                };
                self.web = Some(w);
                answer
            }
            Err(e) => Response::error(&e),
        }
    }

    fn shutdown(&self, peer: Option<u32>, reply: oneshot::Sender<Response>) {
        let ctl = self.ctl.clone();
        let tasks = self.registered.clone();
        tokio::spawn(async move {
            match crate::app::verbs::shutdown::permit(&tasks, peer).await {
                Ok(()) => {
                    let _ = ctl.send(Control::Shutdown(reply)).await;
                }
                Err(e) => {
                    let _ = reply.send(Response::error(&e));
                }
            }
        });
    }

    /// Stop a task for the caller behind `peer`, apart from the supervisor loop: the gate
    /// first (a spoke may not stop its task), then supervision ends (back in the loop, as
    /// [`Control::Unsupervise`]), then the sessions.
    fn stop(&self, req: StopRequest, peer: Option<u32>, reply: oneshot::Sender<Response>) {
        let ctl = self.ctl.clone();
        let s = Supervised {
            project: req.project.clone(),
            task: req.task.to_string(),
        };
        tokio::spawn(async move {
            let unsupervise = async {
                let (tx, rx) = oneshot::channel();
                if ctl.send(Control::Unsupervise(s, tx)).await.is_ok() {
                    let _ = rx.await;
                }
            };
            let response = crate::app::verbs::stop::answer(req, peer, unsupervise)
                .await
                .map(|stopped| Response::Stopped { stopped });
            let _ = reply.send(response.unwrap_or_else(|e| Response::error(&e)));
        });
    }
}

async fn handle_conn(stream: UnixStream, ctl: mpsc::Sender<Control>) {
    let uid = unsafe { libc::getuid() };
    let peer = match stream.peer_cred() {
        Ok(c) if c.uid() == uid => c.pid().and_then(|p| u32::try_from(p).ok()),
        _ => {
            tracing::warn!("refused a connection from another user");
            return;
        }
    };
    let (rd, mut wr) = stream.into_split();
    let mut reader = BufReader::new(rd.take(MAX_REQUEST as u64 + 1));
    let mut line = Vec::new();
    let resp = match reader.read_until(b'\n', &mut line).await {
        Err(e) => Response::failure(format!("reading the request failed: {e}")),
        Ok(_) if line.len() > MAX_REQUEST => {
            Response::failure(format!("request longer than {MAX_REQUEST} bytes; refused"))
        }
        Ok(_) => match serde_json::from_slice::<Envelope<Request>>(&line) {
            // A name that is not a name (`../pm`) is refused here, as bad input.
            Err(e) => Response::Error {
                message: format!("malformed request: {e}"),
                code: crate::core::error::EXIT_BAD_INPUT,
            },
            Ok(env) if env.v != PROTOCOL_VERSION => Response::failure(format!(
                "protocol version {} is not {PROTOCOL_VERSION}; use the same `task` binary as the daemon",
                env.v
            )),
            Ok(env) if env.body == Request::Subscribe => {
                return super::subscribe::serve(wr, |tx| ctl.try_send(Control::Subscribe(tx)).is_ok()).await;
            }
            Ok(env) => {
                let (tx, mut rx) = oneshot::channel();
                if ctl.send(Control::Request(env.body, peer, tx)).await.is_err() {
                    Response::failure("the daemon is shutting down")
                } else {
                    // A verb can take minutes; a blank line now and then says it is still
                    // at work (the client gives up only on silence).
                    let mut alive = tokio::time::interval(crate::core::wire::KEEPALIVE);
                    alive.tick().await;
                    loop {
                        tokio::select! {
                            r = &mut rx => break r.unwrap_or(Response::failure("no answer")),
                            _ = alive.tick() => {
                                if wr.write_all(b"\n").await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
            }
        },
    };
    let mut out = serde_json::to_vec(&Envelope {
        v: PROTOCOL_VERSION,
        body: resp,
    })
    .expect("serialises");
    out.push(b'\n');
    let _ = wr.write_all(&out).await;
}

fn prepare_dir(dir: &Path) -> Result<()> {
    crate::store::fsutil::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| Error::io("restrict", dir, e))
}

/// The per-user lock: a predecessor killed a moment ago may still hold it while it exits,
/// so it is tried again briefly; a daemon that answers is another one running.
async fn take_lock() -> Result<crate::store::task::lock::Lock> {
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    loop {
        if let Some(l) = crate::store::task::lock::Lock::try_acquire(&crate::store::paths::lock_path())? {
            return Ok(l);
        }
        if crate::io::control::running() || std::time::Instant::now() >= deadline {
            return Err(Error::Environment(format!(
                "a daemon is already running for this user (socket {}); stop it with `task shutdown`",
                crate::store::paths::socket_path().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The control socket, 0600, replacing a stale one (never one that answers).
fn bind_socket(sock: &Path) -> Result<UnixListener> {
    if sock.exists() {
        if std::os::unix::net::UnixStream::connect(sock).is_ok() {
            return Err(Error::Environment(format!(
                "{} answers but its lock is free; refusing to replace it",
                sock.display()
            )));
        }
        std::fs::remove_file(sock).map_err(|e| Error::io("remove stale socket", sock, e))?;
        tracing::info!(socket = %sock.display(), "replaced a stale socket");
    }
    let listener = UnixListener::bind(sock).map_err(|e| Error::io("listen on", sock, e))?;
    std::fs::set_permissions(sock, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io("restrict", sock, e))?;
    Ok(listener)
}

/// Each connection served apart, its requests passed to the supervisor loop.
fn accept_connections(listener: UnixListener, tx: mpsc::Sender<Control>) {
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(handle_conn(stream, tx.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
}

impl Supervisor {
    /// Every registered task supervised again (one that cannot be is dropped, logged), and
    /// the web page when config.toml's `[web] listen` asks for it (a page that cannot be
    /// served is logged; the supervision goes on without it).
    async fn resume(&mut self) {
        for s in registry::load() {
            match self.add(&s) {
                Ok(()) => self.registered.push(s),
                Err(e) => {
                    tracing::warn!(project = %s.project, task = %s.task, error = %e, "dropping a registered task that cannot be supervised");
                }
            }
        }
        if let Err(e) = self.save() {
            tracing::warn!(error = %e, "cannot save the registry");
        }
        match crate::app::settings::web() {
            Ok(w) if w.listen.is_some() => {
                let r = WebRequest {
                    start: true,
                    ..Default::default()
                };
                if let Response::Error { message, .. } = self.serve_web(r).await {
                    tracing::error!(error = %message, "the web page is not served");
                }
            }
            Ok(_) => {}
            Err(e) => tracing::error!(error = %e, "the web page is not served: config.toml does not read"),
        }
    }

    /// One message to the loop; `Break` when the daemon is to stop.
    async fn on_control(&mut self, c: Control) -> std::ops::ControlFlow<()> {
        match c {
            Control::Seen(Seen::Rescan) => self.hint_all(),
            Control::Seen(Seen::Lost(dir)) => self.lost(&dir),
            Control::Seen(Seen::Final(dir, name, how)) => self.final_in(&dir, &name, how),
            Control::Unsupervise(s, done) => {
                self.remove(&s);
                if let Err(e) = self.save() {
                    tracing::warn!(error = %e, "cannot save the registry");
                }
                let _ = done.send(());
            }
            Control::Shutdown(reply) => {
                let _ = reply.send(Response::Ok);
                // Let the connection task write the answer before the runtime ends.
                tokio::time::sleep(Duration::from_millis(100)).await;
                return std::ops::ControlFlow::Break(());
            }
            Control::Web(r, reply) => {
                let _ = reply.send(self.serve_web(r).await);
            }
            Control::Subscribe(reply) => {
                let _ = reply.send((self.registered.clone(), self.changes.subscribe()));
            }
            Control::Request(req, peer, reply) => self.on_request(req, peer, reply).await,
        }
        std::ops::ControlFlow::Continue(())
    }

    /// One request from a connection, answered here or by the work it starts.
    async fn on_request(&mut self, req: Request, peer: Option<u32>, reply: oneshot::Sender<Response>) {
        match req {
            Request::Ping => {
                let _ = reply.send(Response::Pong {
                    pid: std::process::id(),
                    version: env!("CARGO_PKG_VERSION").into(),
                    memos: crate::store::memo::census()
                        .into_iter()
                        .map(|(n, k)| (n.to_string(), k))
                        .collect(),
                });
            }
            Request::Tasks => {
                let _ = reply.send(Response::Tasks {
                    tasks: self.registered.clone(),
                });
            }
            Request::Register { project, task } => {
                let _ = reply.send(self.register(Supervised { project, task }));
            }
            Request::Checkin { project, task } => self.checkin(&Supervised { project, task }, reply).await,
            Request::Rotate { project, task } => self.rotate(&Supervised { project, task }, peer, reply).await,
            req @ (Request::Spawn(_) | Request::Send(_)) => self.verb(req, peer, reply),
            Request::Stop(r) => self.stop(r, peer, reply),
            Request::Subscribe => {
                let _ = reply.send(Response::failure("subscribe is served on its own connection"));
            }
            Request::Shutdown => self.shutdown(peer, reply),
            Request::Web(r) => self.web_request(r, peer, reply),
        }
    }

    /// The daemon goes; the agents keep running. Actors are aborted, then every ssh master
    /// is ended once they have let go of it.
    async fn finish(self, sock: &Path) {
        tracing::info!("daemon stopping; agents keep running");
        let _ = std::fs::remove_file(sock);
        for e in self.entries.values() {
            e.join.abort();
        }
        drop(self);
        tokio::time::sleep(Duration::from_millis(50)).await;
        crate::io::remote::close_all().await;
    }
}

/// Test hook: the loop stops at the first event seen until `release` exists (so the
/// watcher's events pile up in the queue and overflow it), then looks at every task.
async fn hold_for_hook(sup: &Supervisor, release: &Path) {
    tracing::info!(release = %release.display(), "test hook: the supervisor pauses");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !release.exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sup.hint_all();
}

/// Run the daemon in the foreground until `task shutdown`, SIGTERM or SIGINT: the lock and
/// the socket, the tasks supervised again, then the loop that owns them.
pub async fn run() -> Result<()> {
    prepare_dir(&crate::store::paths::runtime_dir())?;
    let _lock = take_lock().await?;
    let sock = crate::store::paths::socket_path();
    let listener = bind_socket(&sock)?;

    // The daemon's looks at the panes go through one long-lived tmux control client rather
    // than a tmux process each (io::tmux::control; AO_TMUX_CONTROL=off turns it off). The
    // CLI keeps one-shot clients.
    crate::io::tmux::use_control_mode();
    let tmux = Tmux::from_env()?;
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Control>(256);

    // Test hook: a handoff written here lands before any watch, so no event announces it.
    crate::io::hooks::pause(crate::io::hooks::Point::DaemonStart).await;
    // The watcher first, so nothing lands between the startup scan and the watch.
    let wtx = ctl_tx.clone();
    let watcher = Watcher::start(move |seen| wtx.try_send(Control::Seen(seen)).is_ok())?;
    let mut sup = Supervisor {
        entries: BTreeMap::new(),
        registered: Vec::new(),
        watcher,
        tmux,
        changes: super::subscribe::Hub::new(),
        ctl: ctl_tx.clone(),
        web: None,
    };
    sup.resume().await;
    tracing::info!(pid = std::process::id(), tasks = sup.entries.len(), socket = %sock.display(), "daemon ready");
    accept_connections(listener, ctl_tx.clone());

    let mut reconcile = tokio::time::interval(RECONCILE_EVERY);
    let mut pause = crate::io::hooks::get()
        .gate(crate::io::hooks::Point::Supervisor)
        .map(Path::to_path_buf);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Error::io("install SIGTERM handler", "daemon", e))?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = reconcile.tick() => {
                sup.watcher.flush();
                sup.rewatch();
                sup.hint_all();
            }
            c = ctl_rx.recv() => match c {
                None => break,
                Some(Control::Seen(_)) if pause.is_some() => {
                    hold_for_hook(&sup, &pause.take().unwrap_or_default()).await;
                }
                Some(c) => {
                    if sup.on_control(c).await.is_break() {
                        break;
                    }
                }
            },
        }
    }
    sup.finish(&sock).await;
    Ok(())
}
