//! The daemon process: lock, socket, watcher, schedules, and the supervisor
//! loop that owns the set of actors (connections talk to it by message).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio_cron_scheduler::{Job, JobScheduler};

use crate::error::{Error, Result};
use crate::names::TaskName;
use crate::task::Task;
use crate::tmux::Tmux;

use super::actor::{self, Msg};
use super::protocol::{Envelope, MAX_REQUEST, PROTOCOL_VERSION, Request, Response, Supervised};
use super::registry;

/// Reconcile scan interval (events are only hints; network filesystems give none).
const RECONCILE_EVERY: Duration = Duration::from_secs(5);

enum Control {
    Request(Request, oneshot::Sender<Response>),
    /// A file in a watched handoffs/ folder was closed after writing or renamed into place.
    Final(PathBuf, String),
    HintAll,
}

struct Entry {
    handle: actor::Handle,
    join: tokio::task::JoinHandle<()>,
    job: Option<uuid::Uuid>,
    handoffs: PathBuf,
}

/// Only a close after writing or a rename into place says a file is complete;
/// creation and each write are not worth a look (the reconcile scan covers the rest).
fn is_final(kind: &notify::EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    matches!(
        kind,
        notify::EventKind::Access(AccessKind::Close(AccessMode::Write))
            | notify::EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both | RenameMode::Any))
    )
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

/// The schedule job for a task: `checkin: Nm/Nh` as a repeated job, a cron expression as a cron job.
fn schedule_job(task: &Task, tx: mpsc::Sender<Msg>) -> Option<Job> {
    let setting = task.spec().ok().and_then(|s| s.setting("checkin").map(str::to_string));
    let send = move |tx: mpsc::Sender<Msg>| {
        Box::pin(async move {
            let _ = tx.send(Msg::Schedule).await;
        }) as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
    };
    let job = match setting.as_deref() {
        Some(s) if s.split_whitespace().count() == 5 => {
            let tx = tx.clone();
            Job::new_async(format!("0 {s}").as_str(), move |_, _| send(tx.clone()))
        }
        other => {
            let every = other
                .and_then(crate::checkin::parse_duration)
                .unwrap_or(Duration::from_secs(600));
            let tx = tx.clone();
            Job::new_repeated_async(every, move |_, _| send(tx.clone()))
        }
    };
    match job {
        Ok(j) => Some(j),
        Err(e) => {
            tracing::warn!(task = %task.name, error = ?e, "bad check-in schedule; scheduled check-ins are off for this task");
            None
        }
    }
}

async fn handle_conn(stream: UnixStream, ctl: mpsc::Sender<Control>) {
    let uid = unsafe { libc::getuid() };
    match stream.peer_cred() {
        Ok(c) if c.uid() == uid => {}
        _ => {
            tracing::warn!("refused a connection from another user");
            return;
        }
    }
    let (rd, mut wr) = stream.into_split();
    let mut reader = BufReader::new(rd.take(MAX_REQUEST as u64 + 1));
    let mut line = Vec::new();
    let resp = match reader.read_until(b'\n', &mut line).await {
        Err(e) => Response::failure(format!("reading the request failed: {e}")),
        Ok(_) if line.len() > MAX_REQUEST => {
            Response::failure(format!("request longer than {MAX_REQUEST} bytes; refused"))
        }
        Ok(_) => match serde_json::from_slice::<Envelope<Request>>(&line) {
            Err(e) => Response::failure(format!("malformed request: {e}")),
            Ok(env) if env.v != PROTOCOL_VERSION => Response::failure(format!(
                "protocol version {} is not {PROTOCOL_VERSION}; use the same `task` binary as the daemon",
                env.v
            )),
            Ok(env) => {
                let (tx, rx) = oneshot::channel();
                if ctl.send(Control::Request(env.body, tx)).await.is_err() {
                    Response::failure("the daemon is shutting down")
                } else {
                    rx.await.unwrap_or(Response::failure("no answer"))
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
    crate::fsutil::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| Error::io("restrict", dir, e))
}

/// Run the daemon in the foreground until `task shutdown`, SIGTERM or SIGINT.
pub async fn run() -> Result<()> {
    let dir = super::runtime_dir();
    prepare_dir(&dir)?;
    // A predecessor killed a moment ago may still hold the lock while it exits: retry briefly.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let _lock = loop {
        if let Some(l) = crate::task::lock::Lock::try_acquire(&super::lock_path())? {
            break l;
        }
        if super::client::running() || std::time::Instant::now() >= deadline {
            return Err(Error::BadInput(format!(
                "a daemon is already running for this user (socket {}); stop it with `task shutdown`",
                super::socket_path().display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let sock = super::socket_path();
    if sock.exists() {
        if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
            return Err(Error::BadInput(format!(
                "{} answers but its lock is free; refusing to replace it",
                sock.display()
            )));
        }
        std::fs::remove_file(&sock).map_err(|e| Error::io("remove stale socket", &sock, e))?;
        tracing::info!(socket = %sock.display(), "replaced a stale socket");
    }
    let listener = UnixListener::bind(&sock).map_err(|e| Error::io("listen on", &sock, e))?;
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io("restrict", &sock, e))?;

    let tmux = Tmux::from_env()?;
    let (ctl_tx, mut ctl_rx) = mpsc::channel::<Control>(256);

    // The watcher first, so nothing lands between the startup scan and the watch.
    let wtx = ctl_tx.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
        Ok(ev) if ev.need_rescan() => {
            let _ = wtx.try_send(Control::HintAll);
        }
        Ok(ev) if is_final(&ev.kind) => {
            for p in ev.paths {
                let name = p.file_name().and_then(|n| n.to_str()).map(str::to_string);
                if let (Some(name), Some(parent)) = (name, p.parent()) {
                    if !name.starts_with('.') && name.ends_with(".md") {
                        let _ = wtx.try_send(Control::Final(parent.to_path_buf(), name));
                    }
                }
            }
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(error = %e, "file watcher error; relying on the reconcile scan");
            let _ = wtx.try_send(Control::HintAll);
        }
    })
    .map_err(|e| {
        Error::BadInput(format!(
            "cannot start the file watcher: {e} (raise fs.inotify.max_user_instances?)"
        ))
    })?;

    let sched = JobScheduler::new()
        .await
        .map_err(|e| Error::BadInput(format!("cannot start the scheduler: {e:?}")))?;
    sched
        .start()
        .await
        .map_err(|e| Error::BadInput(format!("cannot start the scheduler: {e:?}")))?;

    let mut entries: BTreeMap<String, Entry> = BTreeMap::new();
    let mut registered = registry::load();

    let add = |s: &Supervised,
               entries: &mut BTreeMap<String, Entry>,
               watcher: &mut notify::RecommendedWatcher|
     -> Result<()> {
        if entries.contains_key(&key(s)) {
            return Ok(());
        }
        let t = task_of(s)?;
        let handoffs = t.handoffs();
        if let Err(e) = watcher.watch(&handoffs, RecursiveMode::NonRecursive) {
            tracing::warn!(dir = %handoffs.display(), error = %e, "cannot watch; the reconcile scan still covers it");
        }
        let (handle, join) = actor::spawn(t, tmux.clone());
        entries.insert(
            key(s),
            Entry {
                handle,
                join,
                job: None,
                handoffs,
            },
        );
        Ok(())
    };
    registered.retain(|s| match add(s, &mut entries, &mut watcher) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(project = %s.project, task = %s.task, error = %e, "dropping a registered task that cannot be supervised");
            false
        }
    });
    for (k, e) in entries.iter_mut() {
        if let Ok(s) = registered
            .iter()
            .find(|s| key(s) == *k)
            .ok_or(())
            .and_then(|s| task_of(s).map_err(|_| ()))
        {
            if let Some(job) = schedule_job(&s, e.handle.tx.clone()) {
                e.job = sched.add(job).await.ok();
            }
        }
    }
    let _ = registry::save(&registered);
    tracing::info!(pid = std::process::id(), tasks = entries.len(), socket = %sock.display(), "daemon ready");

    let accept_tx = ctl_tx.clone();
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    tokio::spawn(handle_conn(stream, accept_tx.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });

    let mut reconcile = tokio::time::interval(RECONCILE_EVERY);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Error::io("install SIGTERM handler", "daemon", e))?;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = reconcile.tick() => {
                for e in entries.values() {
                    let _ = e.handle.tx.try_send(Msg::Hint);
                }
            }
            c = ctl_rx.recv() => match c {
                None => break,
                Some(Control::HintAll) => {
                    for e in entries.values() {
                        let _ = e.handle.tx.try_send(Msg::Hint);
                    }
                }
                Some(Control::Final(dir, name)) => {
                    for e in entries.values().filter(|e| e.handoffs == dir) {
                        let _ = e.handle.tx.try_send(Msg::Final(name.clone()));
                    }
                }
                Some(Control::Request(req, reply)) => {
                    let resp = match req {
                        Request::Ping => Response::Pong { pid: std::process::id(), version: env!("CARGO_PKG_VERSION").into() },
                        Request::Tasks => Response::Tasks { tasks: registered.clone() },
                        Request::Register { project, task } => {
                            let s = Supervised { project, task };
                            match add(&s, &mut entries, &mut watcher) {
                                Ok(()) => {
                                    if let (Some(e), Ok(t)) = (entries.get_mut(&key(&s)), task_of(&s)) {
                                        if e.job.is_none() {
                                            if let Some(job) = schedule_job(&t, e.handle.tx.clone()) {
                                                e.job = sched.add(job).await.ok();
                                            }
                                        }
                                    }
                                    if !registered.contains(&s) {
                                        registered.push(s);
                                    }
                                    match registry::save(&registered) {
                                        Ok(()) => Response::Ok,
                                        Err(e) => Response::error(&e),
                                    }
                                }
                                Err(e) => Response::error(&e),
                            }
                        }
                        Request::Unregister { project, task } => {
                            let s = Supervised { project, task };
                            if let Some(e) = entries.remove(&key(&s)) {
                                if let Some(j) = e.job {
                                    let _ = sched.remove(&j).await;
                                }
                                let _ = watcher.unwatch(&e.handoffs);
                                e.join.abort();
                            }
                            registered.retain(|x| x != &s);
                            match registry::save(&registered) {
                                Ok(()) => Response::Ok,
                                Err(e) => Response::error(&e),
                            }
                        }
                        Request::Checkin { project, task } => {
                            let s = Supervised { project, task };
                            match entries.get(&key(&s)) {
                                None => Response::failure(format!("task '{}' is not supervised by the daemon", s.task)),
                                Some(e) => {
                                    let (tx, rx) = oneshot::channel();
                                    let _ = e.handle.tx.send(Msg::CheckinNow(tx)).await;
                                    // Answer from a separate task so the supervisor loop keeps serving.
                                    tokio::spawn(async move {
                                        let resp = match rx.await {
                                            Ok(Ok(report)) => Response::Checkin { report },
                                            Ok(Err(message)) => Response::failure(message),
                                            Err(_) => Response::failure("the task's actor stopped"),
                                        };
                                        let _ = reply.send(resp);
                                    });
                                    continue;
                                }
                            }
                        }
                        Request::Spawn { .. } | Request::Send { .. } | Request::Stop { .. } => {
                            // Run apart from the supervisor loop: a spawn or a send can wait
                            // seconds for an agent's input area, and the PM being checked in
                            // may be the caller (its check-in must not wait on its own spawn).
                            let stop_of = match &req {
                                Request::Stop { project, task, .. } => Some(Supervised { project: project.clone(), task: task.clone() }),
                                _ => None,
                            };
                            if let Some(s) = &stop_of {
                                if let Some(e) = entries.remove(&key(s)) {
                                    if let Some(j) = e.job {
                                        let _ = sched.remove(&j).await;
                                    }
                                    let _ = watcher.unwatch(&e.handoffs);
                                    e.join.abort();
                                }
                                registered.retain(|x| x != s);
                                if let Err(e) = registry::save(&registered) {
                                    tracing::warn!(error = %e, "cannot save the registry");
                                }
                            }
                            tokio::spawn(async move {
                                let _ = reply.send(super::verbs::run(req).await);
                            });
                            continue;
                        }
                        Request::Shutdown => {
                            let _ = reply.send(Response::Ok);
                            // Let the connection task write the answer before the runtime ends.
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            break;
                        }
                    };
                    let _ = reply.send(resp);
                }
            }
        }
    }
    tracing::info!("daemon stopping; agents keep running");
    let _ = std::fs::remove_file(&sock);
    for e in entries.values() {
        e.join.abort();
    }
    drop(watcher);
    // Aborted actors may still hold a master briefly; give them a moment, then end them all.
    tokio::time::sleep(Duration::from_millis(50)).await;
    crate::remote::close_all().await;
    Ok(())
}
