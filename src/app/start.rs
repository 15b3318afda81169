//! Start a task: its PM in tmux, its first scheduled check-in saved, and the task handed
//! to whoever checks it in — the daemon (started when none runs), or cron.

use std::path::Path;

use chrono::{DateTime, Utc};

use crate::app::session::{self, Ctx};
use crate::core::clock;
use crate::core::error::Error;
use crate::core::names::TaskName;
use crate::core::wire::{Request, Response};
use crate::io::control;
use crate::io::schedule::Schedule;
use crate::store::task::{self, Task};

use super::dispatch::supervised;

/// Who checks a started task in.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mode {
    /// Cron mode: no daemon; check-ins come from a crontab line (or `task watch`).
    pub no_daemon: bool,
    /// In cron mode, install no crontab line either.
    pub no_cron: bool,
}

/// What `task start` did.
pub(crate) struct Started {
    /// The PM's session, pane, runtime and preamble.
    pub started: crate::core::report::Started,
    /// When the first scheduled check-in is due (`None`: no usable schedule).
    pub next_checkin: Option<DateTime<Utc>>,
    /// Set when this start launched the daemon: what was started, and its log.
    pub daemon_note: Option<String>,
    /// In cron mode, the crontab line for the task (installed or to add by hand).
    pub cron_line: Option<String>,
    /// In cron mode, whether the line was installed ("installed") or what to do with it.
    pub cron_note: Option<String>,
    /// The tmux flags (`-L name` or `-S path`) that reach the agents' server.
    pub tmux_flags: String,
    /// Each roster agent's sandbox, as a spawn now would give it.
    pub sandboxes: Vec<(String, crate::core::sandbox::State)>,
}

/// Start the PM of task `name` (creating the task if needed) and schedule its check-ins.
/// Warnings (agents that bypass permission prompts, an unusable schedule) go to `warn`
/// as they arise.
pub(crate) async fn start(
    name: &TaskName,
    project: Option<&Path>,
    runtime: Option<&str>,
    mode: Mode,
    warn: &mut dyn FnMut(String),
) -> anyhow::Result<Started> {
    let Mode { no_daemon, no_cron } = mode;
    let project = task::find_project(project, name)?;
    if !project.is_dir() {
        return Err(Error::BadInput(format!("project folder {} does not exist", project.display())).into());
    }
    let t = Task::new(&project, name.clone())?;
    let ctx = Ctx::from_env()?;
    // A sandbox that is required and cannot be had stops the start before anything runs.
    let sandboxes = session::sandboxes(&t, runtime)?;
    let started = session::start(&ctx, &t, runtime, clock::now()).await?;
    if let Some(w) = session::permission_warning(&t, &started.runtime) {
        warn(w);
    }
    // The first scheduled check-in, saved before the daemon (or cron) takes the task, so
    // the schedule runs from this start and survives any restart of the daemon.
    let setting = t.spec().ok().and_then(|s| s.setting("checkin").map(str::to_string));
    let sched = match (no_daemon, no_cron) {
        (false, _) => Schedule::parse(setting.as_deref()),
        (true, false) if crate::io::cron::available() => Schedule::crontab(setting.as_deref()),
        // `--no-cron`, or no crontab: nothing here schedules check-ins (`task watch`, or
        // the line the user adds by hand, may).
        (true, _) => Err(String::new()),
    };
    let now = clock::now();
    let next_checkin = sched.as_ref().ok().and_then(|s| s.next_after(now));
    if let (false, Err(e)) = (no_daemon, &sched) {
        warn(format!(
            "{e} in {}; scheduled check-ins are off until it is fixed (handoffs still wake the PM)",
            t.task_md().display()
        ));
    }
    crate::app::checkin::save_next_checkin(&t, next_checkin, now)?;
    let mut cron_line = None;
    let mut cron_note = None;
    let mut daemon_note = None;
    if !no_daemon {
        daemon_note = register(&t)?;
    } else if !no_cron {
        let spec = t.spec()?;
        let sched = crate::io::cron::schedule(spec.setting("checkin")).map_err(Error::BadInput)?;
        let line = crate::io::cron::line(
            &sched,
            &ctx.task_bin,
            &t.project,
            name.as_str(),
            &t.dir().join(".checkin.log"),
        );
        if crate::io::cron::available() {
            crate::io::cron::install(&line, &crate::io::cron::marker(&t.project, name.as_str()))?;
            cron_note = Some("installed".to_string());
        } else {
            cron_note = Some("crontab is not installed; add this line with `crontab -e`".to_string());
        }
        cron_line = Some(line);
    }
    Ok(Started {
        started,
        next_checkin,
        daemon_note,
        cron_line,
        cron_note,
        tmux_flags: ctx.tmux.socket().flags(),
        sandboxes,
    })
}

/// Put the task under the daemon, starting one in the background when none runs (then
/// say so, with its log).
fn register(t: &Task) -> anyhow::Result<Option<String>> {
    let mut note = None;
    if !control::running() {
        let log = control::spawn_background()?;
        note = Some(format!(
            "started the supervisor daemon in the background (log: {})",
            log.display()
        ));
    }
    let s = supervised(t);
    match control::request(&Request::Register {
        project: s.project,
        task: s.task,
    })? {
        Some(Response::Ok) => Ok(note),
        // The daemon's exit code says whose fault it was (bad input, or its environment).
        Some(Response::Error { message, code }) => {
            Err(crate::core::error::Exit::new(code, format!("the daemon refused the task: {message}")).into())
        }
        other => Err(Error::Environment(format!(
            "unexpected answer from the daemon: {other:?}; is it the same version? (`task shutdown`, then retry)"
        ))
        .into()),
    }
}
