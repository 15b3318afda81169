//! The `task` command line: argument parsing and one function per verb.
//!
//! Human output goes to stdout, diagnostics to stderr; `--json` output is the
//! documented, versioned shape in docs/json.md. Exit codes are those of
//! [`crate::error`].

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::agents;
use crate::clock;
use crate::error::{self, Error};
use crate::handoff::{self, Status};
use crate::names::{AgentName, TaskName};
use crate::scribe;
use crate::status;
use crate::task::{self, Task};

const AFTER_HELP: &str = "\
Names: task and agent names are 1-63 characters of lower-case a-z, 0-9, '-' and '_',
starting with a letter or digit. Upper case is refused, not folded.

Exit codes:
  0  success
  1  the work failed (I/O, tmux, a runtime)
  2  bad input: a refused name, a bad flag, a malformed task.md or body
  3  not found: no such task (or session)
  4  pm_state.json is corrupt or from a newer version
  5  a message or check-in was not confirmed delivered (it will be retried)
  6  the protocol refused a spawn or send; the message starts with its reason code
     (SPAWN_REJECT_ACTIVE_LANE, SPAWN_REJECT_DUPLICATE, SPAWN_REJECT_SPOKE_CALLER)

Environment:
  TASK_NAME, TASK_DIR   set in every agent's session; `task` finds the task from them
  AO_TMUX_SOCKET        tmux server: a name (-L, default agent-orchestrator) or a socket path (-S)
  AO_SESSION_PREFIX     session names are <prefix>-<task>-<agent> (default ao)
  SOURCE_DATE_EPOCH     fixes the clock (reproducible progress.md in tests)
  RUST_LOG              log filter for diagnostics on stderr";

/// A supervisor for teams of AI coding agents in tmux.
#[derive(Debug, Parser)]
#[command(name = "task", version, about, long_about = None, after_help = AFTER_HELP)]
pub struct Cli {
    /// More diagnostics on stderr (-v info, -vv debug).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

/// `--project` shared by most verbs.
#[derive(Debug, clap::Args)]
pub struct ProjectArg {
    /// The project folder holding tasks/ (default: found from $TASK_DIR, or the current folder and its parents).
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

/// The verbs.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create tasks/<name>/ (task.md, pm_state.json, progress.md, handoffs/, artifacts/, scratchpad/); re-running repairs missing parts and never overwrites task.md or state.
    New {
        /// The task name (see "Names" below).
        name: TaskName,
        /// The project folder (default: the current folder).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// Print what was created as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a well-formed handoff atomically and print its path. The body (markdown sections such as '## Completed Work') comes from --body-file, or stdin with '--body-file -'.
    Handoff {
        /// The task.
        task: TaskName,
        /// The agent writing it.
        #[arg(long, value_name = "AGENT")]
        from: AgentName,
        /// COMPLETE, BLOCKED, NEEDS_REVIEW or IN_PROGRESS (case-insensitive).
        #[arg(long, value_parser = parse_status, value_name = "STATUS")]
        status: Status,
        /// Who it is for (default: pm, unless written by pm).
        #[arg(long, value_name = "AGENT")]
        target: Option<AgentName>,
        /// The agent recommended to run next.
        #[arg(long, value_name = "AGENT")]
        next: Option<AgentName>,
        /// File with the body; '-' reads stdin.
        #[arg(long, value_name = "FILE")]
        body_file: Option<PathBuf>,
        #[command(flatten)]
        project: ProjectArg,
        /// Print {"path": …} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a task's phase, agents, check-ins, blockers and counts (all tasks of the project when no name is given).
    Status {
        /// The task (default: every task in the project).
        task: Option<TaskName>,
        #[command(flatten)]
        project: ProjectArg,
        /// Machine-readable output (see docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// List the project's tasks.
    List {
        #[command(flatten)]
        project: ProjectArg,
        /// Machine-readable output (see docs/json.md).
        #[arg(long)]
        json: bool,
    },
    /// Regenerate progress.md (the built-in scribe) and print its path; does not mark handoffs as checked in.
    Progress {
        /// The task.
        task: TaskName,
        #[command(flatten)]
        project: ProjectArg,
    },
    /// Write the default agent definitions (pm, explore, plan, architect, dev, test, review, scribe) that are missing; never overwrites.
    /// Start the task's PM in tmux (creating the task if needed) and, in cron mode, install its check-in crontab line.
    Start {
        /// The task.
        name: TaskName,
        /// The project folder (default: the current folder, or where the task is found).
        #[arg(long, value_name = "DIR")]
        project: Option<PathBuf>,
        /// claude, kiro, demo, or a profile from the config file (default: task.md `runtime:`, else claude).
        #[arg(long, value_name = "RUNTIME")]
        runtime: Option<String>,
        /// Cron mode: no supervisor daemon; check-ins come from the crontab line (or `task watch`).
        #[arg(long)]
        no_daemon: bool,
        /// In cron mode, do not install the crontab line either.
        #[arg(long)]
        no_cron: bool,
        /// Print what was started as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Start an agent in its own tmux session with the spawn preamble followed by the PM's handoff.
    ///
    /// Only a hub (the PM) or a human may spawn; a spoke is refused (SPAWN_REJECT_SPOKE_CALLER).
    /// One agent of each type runs per task: the spawn takes the agent's lane, which comes free
    /// on its terminal handoff, its pane dying, `task stop`, or after `lane_stale` (10m) without
    /// a sign of life. A busy lane refuses (SPAWN_REJECT_ACTIVE_LANE) unless --queue holds the
    /// spawn until it frees (SPAWN_QUEUED, later SPAWN_DEQUEUED); the same spawn again while it
    /// runs is SPAWN_REJECT_DUPLICATE; a reclaimed silent lane is SPAWN_RECOVERED_STALE.
    /// Refusals exit 6. The agent's context bundle is deployed to active_agents/<agent>/.
    Spawn {
        /// The task.
        task: TaskName,
        /// The agent to start: one of the task's roster (default: explore, plan, architect, dev, test, review, scribe).
        agent: AgentName,
        /// The PM's handoff with the agent's instructions (path, or a name in handoffs/).
        #[arg(long, value_name = "FILE")]
        handoff: PathBuf,
        /// Override the task's runtime.
        #[arg(long, value_name = "RUNTIME")]
        runtime: Option<String>,
        #[command(flatten)]
        project: ProjectArg,
        /// Render everything the spawn would use (session, command line, preamble) and start nothing.
        #[arg(long, conflicts_with = "queue")]
        prepare: bool,
        /// When the agent's lane is busy, wait in it (one spawn per lane) and start as soon as it frees.
        #[arg(long)]
        queue: bool,
        /// Print what was started as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Type a message into a running agent and confirm it was submitted (exit 5 when not confirmed).
    Send {
        /// The task.
        task: TaskName,
        /// The agent.
        agent: AgentName,
        /// The message text (may start with '-').
        #[arg(long, value_name = "TEXT", group = "what", allow_hyphen_values = true)]
        message: Option<String>,
        /// Send the contents of a file.
        #[arg(long, value_name = "FILE", group = "what")]
        file: Option<PathBuf>,
        /// Send a pointer to a handoff file ("Read your instructions in …").
        #[arg(long, value_name = "FILE", group = "what")]
        handoff: Option<PathBuf>,
        #[command(flatten)]
        project: ProjectArg,
        /// Print the delivery report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// One check-in (for cron): refresh progress.md, compute signals, message the PM; handoffs are marked seen only once the PM got it (exit 5 when not delivered).
    Checkin {
        /// The task.
        task: TaskName,
        #[command(flatten)]
        project: ProjectArg,
        /// Print the check-in report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run check-ins in the foreground: at once when a handoff lands, and on the task's schedule; exits when the task is COMPLETE or BLOCKED.
    Watch {
        /// The task.
        task: TaskName,
        #[command(flatten)]
        project: ProjectArg,
        /// How often to look for new handoffs, in milliseconds.
        #[arg(long, default_value_t = 500, value_name = "MS")]
        poll_ms: u64,
        /// Give up after this many seconds (0: never).
        #[arg(long, default_value_t = 0, value_name = "SECS")]
        timeout: u64,
    },
    /// End the task's agent sessions (PM included) and remove its crontab line; every file is kept.
    Stop {
        /// The task.
        task: TaskName,
        #[command(flatten)]
        project: ProjectArg,
        /// Print what was stopped as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Attach your terminal to an agent's tmux session (the PM by default).
    Attach {
        /// The task.
        task: TaskName,
        /// The agent (default: pm).
        agent: Option<AgentName>,
        #[command(flatten)]
        project: ProjectArg,
    },
    /// Run the supervisor daemon in the foreground (what the systemd unit runs); --stop asks a running one to stop.
    Daemon {
        /// Stop the running daemon instead (agents keep running).
        #[arg(long)]
        stop: bool,
    },
    /// Stop the running daemon cleanly (agents keep running).
    Shutdown,
    /// Install, remove or inspect the systemd user unit that runs the daemon.
    Service {
        /// install | uninstall | status
        #[arg(value_enum)]
        action: ServiceAction,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show a task's event log (check-ins, spawns, deaths…) from events.jsonl.
    Log {
        /// The task.
        task: TaskName,
        #[command(flatten)]
        project: ProjectArg,
        /// Keep printing new events as they are appended.
        #[arg(long, short)]
        follow: bool,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// The handoff chain instead (who handed to whom, with status and recommended next),
        /// from pm_state.json's lineage.
        #[arg(long, conflicts_with = "follow")]
        lineage: bool,
    },
    /// The built-in scripted agent of the demo runtime (started by `task start --runtime demo`).
    #[command(hide = true)]
    DemoAgent {
        /// The preamble file to read.
        #[arg(long, value_name = "FILE")]
        prompt_file: PathBuf,
    },
    SetupAgents {
        #[command(flatten)]
        project: ProjectArg,
        /// Which runtime's files to write.
        #[arg(long, value_enum, default_value = "both")]
        runtime: agents::Which,
        /// The roster whose agents to write: `default`, `hub-and-spoke`, or one in the config folder.
        #[arg(long, value_name = "ROSTER", default_value = "default")]
        roster: String,
        /// Print what was added and kept as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `task service` actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServiceAction {
    /// Write ~/.config/systemd/user/agent-orchestrator.service and `systemctl --user enable --now` it.
    Install,
    /// Disable and remove it (agents keep running).
    Uninstall,
    /// Show whether it is installed and running.
    Status,
}

fn parse_status(s: &str) -> Result<Status, String> {
    Status::from_word(s)
        .filter(|st| s.trim().eq_ignore_ascii_case(st.as_str()))
        .ok_or_else(|| format!("{s:?} is not one of COMPLETE, BLOCKED, NEEDS_REVIEW, IN_PROGRESS"))
}

/// Parse arguments, run, print errors; returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() {
                error::EXIT_BAD_INPUT
            } else {
                error::EXIT_OK
            };
            let _ = e.print();
            return code;
        }
    };
    crate::logging::init(cli.verbose);
    match run(cli) {
        Ok(()) => error::EXIT_OK,
        Err(e) => {
            let code = e
                .chain()
                .find_map(|c| c.downcast_ref::<Exit>().map(|x| x.0))
                .or_else(|| e.chain().find_map(|c| c.downcast_ref::<Error>()).map(Error::exit_code))
                .unwrap_or(error::EXIT_FAILURE);
            eprintln!("error: {e:#}");
            code
        }
    }
}

fn print_json(v: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, v)?;
    writeln!(out)?;
    Ok(())
}

fn locate(project: &ProjectArg, name: &TaskName) -> anyhow::Result<Task> {
    let p = task::find_project(project.project.as_deref(), name)?;
    let t = Task::new(&p, name.clone())?;
    t.require()?;
    Ok(t)
}

/// Run one parsed command.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::New { name, project, json } => cmd_new(&name, project.as_deref(), json),
        Command::Handoff {
            task,
            from,
            status,
            target,
            next,
            body_file,
            project,
            json,
        } => cmd_handoff(
            &project,
            &task,
            &from,
            status,
            target.as_ref(),
            next.as_ref(),
            body_file.as_deref(),
            json,
        ),
        Command::Status { task, project, json } => cmd_status(&project, task.as_ref(), json),
        Command::List { project, json } => cmd_list(&project, json),
        Command::Progress { task, project } => cmd_progress(&project, &task),
        Command::SetupAgents {
            project,
            runtime,
            roster,
            json,
        } => cmd_setup_agents(&project, runtime, &roster, json),
        Command::Start {
            name,
            project,
            runtime,
            no_daemon,
            no_cron,
            json,
        } => block_on(cmd_start(
            &name,
            project.as_deref(),
            runtime.as_deref(),
            no_daemon,
            no_cron,
            json,
        )),
        Command::Daemon { stop: false } => cmd_daemon(),
        Command::Daemon { stop: true } | Command::Shutdown => cmd_shutdown(),
        Command::Service { action, json } => {
            let r = match action {
                ServiceAction::Install => {
                    crate::service::install(&std::env::current_exe().context("finding own binary")?)?
                }
                ServiceAction::Uninstall => crate::service::uninstall()?,
                ServiceAction::Status => crate::service::status()?,
            };
            if json {
                print_json(&r)
            } else {
                for n in &r.notes {
                    println!("{n}");
                }
                Ok(())
            }
        }
        Command::Log {
            task,
            project,
            follow,
            json,
            lineage,
        } => {
            if lineage {
                let t = locate(&project, &task)?;
                let st = t.state()?;
                if json {
                    print_json(&st.lineage)
                } else {
                    print!("{}", crate::scribe::render_lineage(&st.lineage));
                    Ok(())
                }
            } else {
                cmd_log(&project, &task, follow, json)
            }
        }
        Command::Spawn {
            task,
            agent,
            handoff,
            runtime,
            project,
            prepare,
            json,
            ..
        } if prepare => block_on(cmd_prepare(&project, &task, &agent, &handoff, runtime.as_deref(), json)),
        Command::Spawn {
            task,
            agent,
            handoff,
            runtime,
            project,
            queue,
            json,
            ..
        } => block_on(cmd_spawn(
            &project,
            &task,
            &agent,
            &handoff,
            runtime.as_deref(),
            queue,
            json,
        )),
        Command::Send {
            task,
            agent,
            message,
            file,
            handoff,
            project,
            json,
        } => block_on(cmd_send(&project, &task, &agent, message, file, handoff, json)),
        Command::Checkin { task, project, json } => block_on(cmd_checkin(&project, &task, json)),
        Command::Watch {
            task,
            project,
            poll_ms,
            timeout,
        } => block_on(cmd_watch(&project, &task, poll_ms, timeout)),
        Command::Stop { task, project, json } => block_on(cmd_stop(&project, &task, json)),
        Command::Attach { task, agent, project } => cmd_attach(&project, &task, agent.as_ref()),
        Command::DemoAgent { prompt_file } => Ok(crate::demo::main(&prompt_file)?),
    }
}

fn cmd_new(name: &TaskName, project: Option<&Path>, json: bool) -> anyhow::Result<()> {
    let project = match project {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().context("reading the current folder")?,
    };
    if !project.is_dir() {
        return Err(Error::BadInput(format!(
            "project folder {} does not exist; create it first or pass --project DIR",
            project.display()
        ))
        .into());
    }
    let t = Task::new(&project, name.clone())?;
    let report = task::create_or_repair(&t, clock::now())?;
    if let Some(aside) = &report.state_set_aside {
        eprintln!(
            "warning: {} was corrupt; it was moved to {} and a fresh state was written (handoffs will be checked in again)",
            t.state_path().display(),
            aside.display()
        );
    }
    if json {
        return print_json(&serde_json::json!({
            "task": name.as_str(),
            "dir": t.dir(),
            "created": report.created,
            "state_set_aside": report.state_set_aside,
        }));
    }
    if report.created.is_empty() {
        println!("Task '{name}' is complete at {}; nothing to repair.", t.dir().display());
    } else if report.created.iter().any(|c| c == ".") {
        println!("Created task '{name}' at {}", t.dir().display());
        println!(
            "Next: describe the goal in {}, then run `task start {name}`.",
            t.task_md().display()
        );
    } else {
        println!(
            "Repaired task '{name}' at {}: added {}",
            t.dir().display(),
            report.created.join(", ")
        );
    }
    Ok(())
}

fn read_body(path: Option<&Path>) -> anyhow::Result<String> {
    let Some(path) = path else { return Ok(String::new()) };
    let mut bytes = Vec::new();
    let cap = handoff::SIZE_CAP;
    if path == Path::new("-") {
        std::io::stdin()
            .lock()
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .context("reading the handoff body from stdin")?;
    } else {
        let f = std::fs::File::open(path).map_err(|e| Error::io("open the body file", path, e))?;
        f.take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read the body file", path, e))?;
    }
    if bytes.len() as u64 > cap {
        return Err(Error::BadInput(format!(
            "the handoff body is over the {cap} byte cap; put large content in artifacts/ and list it under '## Artifacts Generated'"
        ))
        .into());
    }
    let body = String::from_utf8(bytes).map_err(|e| {
        Error::BadInput(format!(
            "the handoff body is not valid UTF-8 (first bad byte at offset {}); nothing was written",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let body = body.strip_prefix('\u{feff}').unwrap_or(&body).replace("\r\n", "\n");
    if body.contains('\0') {
        return Err(Error::BadInput("the handoff body contains NUL bytes; nothing was written".into()).into());
    }
    Ok(body)
}

#[allow(clippy::too_many_arguments)]
fn cmd_handoff(
    project: &ProjectArg,
    name: &TaskName,
    from: &AgentName,
    status: Status,
    target: Option<&AgentName>,
    next: Option<&AgentName>,
    body_file: Option<&Path>,
    json: bool,
) -> anyhow::Result<()> {
    let body = read_body(body_file)?;
    let t = locate(project, name)?;
    fsutil_dir(&t.handoffs())?;
    let h = handoff::NewHandoff {
        from,
        status,
        target,
        next,
        body: &body,
        now: clock::now().with_timezone(&chrono::Local),
    };
    for w in handoff::parse(&handoff::render(&h))
        .warnings
        .iter()
        .filter(|w| w.contains("twice"))
    {
        eprintln!("warning: the body repeats a header line: {w}");
    }
    let path = handoff::write(&t.handoffs(), &h)?;
    if json {
        return print_json(&serde_json::json!({ "path": path }));
    }
    println!("{}", path.display());
    Ok(())
}

fn fsutil_dir(dir: &Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        crate::fsutil::create_dir_all(dir)?;
    }
    Ok(())
}

fn cmd_status(project: &ProjectArg, name: Option<&TaskName>, json: bool) -> anyhow::Result<()> {
    let tasks = match name {
        Some(n) => vec![locate(project, n)?],
        None => {
            let root = task::find_project_root(project.project.as_deref())?;
            let ts = task::list_tasks(&root)?;
            if ts.is_empty() && !json {
                println!(
                    "No tasks in {}/tasks. Create one with `task new <name>`.",
                    root.display()
                );
                return Ok(());
            }
            ts
        }
    };
    let mut all = Vec::new();
    for t in &tasks {
        let mut s = status::task_status(t)?;
        add_liveness(t, &mut s);
        all.push(s);
    }
    if json {
        let v = match name {
            Some(_) => serde_json::json!({ "schema": status::JSON_SCHEMA, "task": all.pop() }),
            None => serde_json::json!({ "schema": status::JSON_SCHEMA, "tasks": all }),
        };
        return print_json(&v);
    }
    let text: Vec<String> = all.iter().map(status::render).collect();
    print!("{}", text.join("\n"));
    Ok(())
}

fn cmd_list(project: &ProjectArg, json: bool) -> anyhow::Result<()> {
    let root = task::find_project_root(project.project.as_deref())?;
    let rows = status::list(&root)?;
    if json {
        return print_json(&serde_json::json!({
            "schema": status::JSON_SCHEMA,
            "project": root,
            "tasks": rows,
        }));
    }
    print!("{}", status::render_list(&root, &rows));
    Ok(())
}

fn cmd_progress(project: &ProjectArg, name: &TaskName) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let st = t.state()?;
    let (names, skipped) = handoff::list(&t.handoffs())?;
    for s in &skipped {
        eprintln!("warning: skipped handoffs/{}: {}", s.file, s.reason);
    }
    let recent = scribe::unprocessed(&t, &st, &names)?;
    let open: Vec<String> = st.escalations.iter().map(|e| e.reason.clone()).collect();
    scribe::write_progress(&t, &st, &names, &recent, &open, clock::now())?;
    println!("{}", t.progress_path().display());
    Ok(())
}

fn cmd_setup_agents(project: &ProjectArg, which: agents::Which, roster: &str, json: bool) -> anyhow::Result<()> {
    let root = match &project.project {
        Some(p) => p.clone(),
        None => std::env::current_dir().context("reading the current folder")?,
    };
    let roster = crate::protocol::roster::Roster::load(roster)?;
    let report = agents::setup(&root, which, &roster)?;
    if json {
        return print_json(&report);
    }
    for a in &report.added {
        println!("added  {a}");
    }
    for k in &report.kept {
        println!("kept   {k} (already exists)");
    }
    Ok(())
}

/// Exit code when a message or check-in was not confirmed delivered.
pub const EXIT_UNDELIVERED: i32 = 5;

/// An error that carries its own exit code (delivery outcomes).
#[derive(Debug)]
struct Exit(i32, String);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.1)
    }
}

impl std::error::Error for Exit {}

fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(async {
            let r = f.await;
            // No ssh master outlives a CLI command.
            crate::remote::close_all().await;
            r
        })
}

fn add_liveness(t: &Task, s: &mut status::TaskStatus) {
    let Ok(st) = t.state() else { return };
    if !st.agents.values().any(|a| a.pane.is_some()) {
        return;
    }
    let Ok(ctx) = crate::session::Ctx::from_env() else {
        return;
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let Ok(live) = rt.block_on(crate::session::liveness(&ctx, &st, clock::now())) else {
        return;
    };
    for l in live {
        if let Some(row) = s.agents.iter_mut().find(|r| r.name == l.agent) {
            row.pane = Some(l.pane.clone());
            row.exit_status = l.exit_status;
            row.exit_signal = l.exit_signal;
            row.idle_secs = l.idle_secs;
            row.waiting_for_human = l.waiting_for_human;
        }
        if let Some(lane) = s.lanes.iter_mut().find(|r| r.agent == l.agent) {
            lane.refresh(l.idle_secs.filter(|_| l.pane == "alive"));
        }
    }
}

fn cmd_daemon() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(crate::daemon::run())?;
    Ok(())
}

fn cmd_shutdown() -> anyhow::Result<()> {
    use crate::daemon::{client, protocol::Request};
    if !client::running() {
        println!("No daemon is running.");
        return Ok(());
    }
    // The answer may be cut short by the daemon exiting; what counts is that it stops.
    let _ = client::request(&Request::Shutdown);
    {
        {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while client::running() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            if client::running() {
                return Err(Error::BadInput("the daemon did not stop within 10 s".into()).into());
            }
            println!("Daemon stopped; agents keep running.");
        }
    }
    Ok(())
}

fn cmd_log(project: &ProjectArg, name: &TaskName, follow: bool, json: bool) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let path = crate::events::path(&t);
    let mut shown = 0usize;
    loop {
        let all = crate::events::read(&path)?;
        for e in all.iter().skip(shown) {
            if json {
                println!("{}", serde_json::to_string(e)?);
            } else {
                println!("{}", crate::events::render(e));
            }
        }
        shown = all.len();
        if !follow {
            return Ok(());
        }
        std::io::stdout().flush()?;
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

fn supervised(t: &Task) -> crate::daemon::protocol::Supervised {
    crate::daemon::protocol::Supervised {
        project: t.project.display().to_string(),
        task: t.name.to_string(),
    }
}

async fn cmd_start(
    name: &TaskName,
    project: Option<&Path>,
    runtime: Option<&str>,
    no_daemon: bool,
    no_cron: bool,
    json: bool,
) -> anyhow::Result<()> {
    let project = task::find_project(project, name)?;
    if !project.is_dir() {
        return Err(Error::BadInput(format!("project folder {} does not exist", project.display())).into());
    }
    let t = Task::new(&project, name.clone())?;
    let ctx = crate::session::Ctx::from_env()?;
    let started = crate::session::start(&ctx, &t, runtime, clock::now()).await?;
    let mut cron_line = None;
    let mut cron_note = None;
    let mut daemon_note = None;
    if !no_daemon {
        use crate::daemon::{
            client,
            protocol::{Request, Response},
        };
        if !client::running() {
            let log = client::spawn_background()?;
            daemon_note = Some(format!(
                "started the supervisor daemon in the background (log: {})",
                log.display()
            ));
        }
        let s = supervised(&t);
        match client::request(&Request::Register {
            project: s.project,
            task: s.task,
        })? {
            Some(Response::Ok) => {}
            Some(Response::Error { message, .. }) => {
                return Err(Error::BadInput(format!("the daemon refused the task: {message}")).into());
            }
            other => return Err(Error::BadInput(format!("unexpected answer from the daemon: {other:?}")).into()),
        }
    } else if !no_cron {
        let spec = t.spec()?;
        let sched = crate::cron::schedule(spec.setting("checkin")).map_err(Error::BadInput)?;
        let line = crate::cron::line(
            &sched,
            &ctx.task_bin,
            &t.project,
            name.as_str(),
            &t.dir().join(".checkin.log"),
        );
        if crate::cron::available() {
            crate::cron::install(&line, &crate::cron::marker(&t.project, name.as_str()))?;
            cron_note = Some("installed".to_string());
        } else {
            cron_note = Some("crontab is not installed; add this line with `crontab -e`".to_string());
        }
        cron_line = Some(line);
    }
    if json {
        return print_json(
            &serde_json::json!({ "started": started, "cron_line": cron_line, "cron": cron_note, "daemon": !no_daemon }),
        );
    }
    println!(
        "Started the PM of task '{name}' ({} runtime) in tmux session {} (pane {}).",
        started.runtime, started.session, started.pane
    );
    println!("Preamble saved to {}", started.preamble.display());
    if let Some(n) = &daemon_note {
        println!("Supervisor: {n}.");
    }
    match (&cron_line, cron_note.as_deref()) {
        _ if !no_daemon => println!("Check-ins: the daemon checks in at once on every handoff, and on schedule."),
        (Some(_), Some("installed")) => {
            println!("Check-ins: crontab line installed (`crontab -l` shows it; `task stop {name}` removes it).")
        }
        (Some(l), Some(note)) => println!("Check-ins: {note}:\n  {l}"),
        _ => println!(
            "Check-ins: no crontab line; run `task watch {name}` or `task checkin {name}` from your scheduler."
        ),
    }
    println!(
        "Watch it: task status {name}   |   task attach {name}   (tmux {} ls)",
        ctx.tmux.socket().flags()
    );
    Ok(())
}

async fn cmd_spawn(
    project: &ProjectArg,
    name: &TaskName,
    agent: &AgentName,
    handoff: &Path,
    runtime: Option<&str>,
    queue: bool,
    json: bool,
) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let ctx = crate::session::Ctx::from_env()?;
    let r = async {
        gate(&t, &ctx, agent.as_str(), "spawn")?;
        let handoff = crate::session::find_handoff(&t, handoff)?;
        let s = supervised(&t);
        let req = crate::daemon::protocol::Request::Spawn {
            project: s.project,
            task: s.task,
            agent: agent.to_string(),
            handoff: handoff.display().to_string(),
            runtime: runtime.map(str::to_string),
            queue,
            tmux: ctx.id(),
        };
        Ok::<_, anyhow::Error>(match via_daemon(&req)? {
            Some(v) => v,
            None => {
                let mode = if queue {
                    crate::session::SpawnMode::Queue
                } else {
                    crate::session::SpawnMode::Start
                };
                serde_json::to_value(
                    crate::session::spawn_with(&ctx, &t, agent, &handoff, runtime, mode, clock::now()).await?,
                )?
            }
        })
    }
    .await;
    let report = match r {
        Ok(v) => v,
        Err(e) => {
            // A refusal is an answer scripts read: with --json it goes to stdout with its code.
            let msg = format!("{e:#}");
            if let (true, Some(reason)) = (json, crate::protocol::lane::Reason::from_message(&msg)) {
                print_json(&serde_json::json!({"reason": reason, "agent": agent.as_str(), "error": msg}))?;
            }
            return Err(e);
        }
    };
    if json {
        return print_json(&report);
    }
    let reason = report["reason"].as_str().unwrap_or("SPAWN_OK");
    if reason == "SPAWN_QUEUED" {
        println!(
            "SPAWN_QUEUED: {agent}'s lane is busy ({}); this spawn starts as soon as it frees (watch with `task status {name}`)",
            report["waiting_for"].as_str().unwrap_or("held")
        );
    } else {
        println!(
            "{reason}: started {agent} for task '{name}' in tmux session {} (pane {}); preamble saved to {}",
            report["session"].as_str().unwrap_or("?"),
            report["pane"].as_str().unwrap_or("?"),
            report["preamble"].as_str().unwrap_or("?")
        );
    }
    for n in report["notes"].as_array().into_iter().flatten() {
        println!("note: {}", n.as_str().unwrap_or_default());
    }
    Ok(())
}

async fn cmd_prepare(
    project: &ProjectArg,
    name: &TaskName,
    agent: &AgentName,
    handoff: &Path,
    runtime: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let ctx = crate::session::Ctx::from_env()?;
    gate(&t, &ctx, agent.as_str(), "spawn")?;
    let p = crate::session::prepare(&ctx, &t, agent, handoff, runtime, clock::now()).await?;
    if json {
        return print_json(&p);
    }
    println!("PREPARED ONLY: nothing was started (run the same command without --prepare to start it).");
    println!(
        "Agent:    {} ({} runtime) in tmux session {}",
        p.agent, p.runtime, p.session
    );
    println!("Host:     {}", p.host);
    println!("Cwd:      {}", p.cwd);
    println!("Command:  {}", crate::remote::shell_join(&p.argv));
    println!("--- preamble ({} bytes) ---", p.preamble.len());
    print!("{}", p.preamble);
    let present: Vec<&str> = p.bundle["manifest"]["sources"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter(|(_, r)| r["present"] == true)
                .map(|(k, _)| k.as_str())
                .collect()
        })
        .unwrap_or_default();
    println!(
        "--- context bundle (would go to active_agents/{}/; sources present: {}) ---",
        p.agent,
        if present.is_empty() {
            "none".to_string()
        } else {
            present.join(", ")
        }
    );
    println!("{}", serde_json::to_string_pretty(&p.bundle["bundle"])?);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn cmd_send(
    project: &ProjectArg,
    name: &TaskName,
    agent: &AgentName,
    message: Option<String>,
    file: Option<PathBuf>,
    handoff: Option<PathBuf>,
    json: bool,
) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let text = match (message, file, handoff) {
        (Some(m), _, _) => m,
        (None, Some(f), _) => {
            let bytes = std::fs::read(&f).map_err(|e| Error::io("read", &f, e))?;
            String::from_utf8(bytes)
                .map_err(|_| Error::BadInput(format!("{} is not valid UTF-8; nothing was sent", f.display())))?
        }
        (None, None, Some(h)) => {
            let p = crate::session::find_handoff(&t, &h)?;
            format!("New instructions from the PM: read {} and follow them.", p.display())
        }
        (None, None, None) => {
            return Err(
                Error::BadInput("say what to send: --message TEXT, --file FILE or --handoff FILE".into()).into(),
            );
        }
    };
    let ctx = crate::session::Ctx::from_env()?;
    gate(&t, &ctx, agent.as_str(), "send")?;
    let s = supervised(&t);
    let req = crate::daemon::protocol::Request::Send {
        project: s.project,
        task: s.task,
        agent: agent.to_string(),
        text: text.clone(),
        tmux: ctx.id(),
    };
    let report: crate::delivery::Report = match via_daemon(&req)? {
        Some(v) => serde_json::from_value(v).context("reading the daemon's delivery report")?,
        None => crate::session::send(&ctx, &t, agent.as_str(), &text).await?,
    };
    if json {
        print_json(&report)?;
    } else {
        println!(
            "{}: {} ({} bytes, {} Enter)",
            format!("{:?}", report.outcome).to_lowercase(),
            report.reason,
            report.bytes,
            report.enters
        );
    }
    if report.outcome != crate::delivery::Outcome::Delivered {
        return Err(Exit(
            EXIT_UNDELIVERED,
            format!("message to {agent} not confirmed: {}", report.reason),
        )
        .into());
    }
    Ok(())
}

async fn cmd_checkin(project: &ProjectArg, name: &TaskName, json: bool) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let ctx = crate::session::Ctx::from_env()?;
    // Through the daemon when it supervises the task (its actor serialises check-ins); else here.
    let via_daemon = {
        use crate::daemon::{
            client,
            protocol::{Request, Response},
        };
        let s = supervised(&t);
        match client::request(&Request::Checkin {
            project: s.project,
            task: s.task,
        }) {
            Ok(Some(Response::Checkin { report })) => Some(report),
            _ => None,
        }
    };
    if let Some(v) = via_daemon {
        if json {
            print_json(&v)?;
        } else {
            println!(
                "{name}: check-in by the daemon: {} new handoff(s); delivery {}",
                v["new_handoffs"].as_array().map_or(0, |a| a.len()),
                v["delivery"]["outcome"].as_str().unwrap_or("none")
            );
        }
        let delivered = v["delivery"].is_null() || v["delivery"]["outcome"] == "delivered";
        return if delivered {
            Ok(())
        } else {
            Err(Exit(
                EXIT_UNDELIVERED,
                format!(
                    "check-in not delivered ({}); the handoffs stay new",
                    v["delivery"]["reason"].as_str().unwrap_or("?")
                ),
            )
            .into())
        };
    }
    let report = crate::checkin::run(&t, &ctx.tmux, clock::now(), crate::checkin::Trigger::Manual, Vec::new()).await?;
    if json {
        print_json(&report)?;
    } else {
        print_checkin(&report);
    }
    match &report.delivery {
        None => Ok(()),
        Some(d) if d.outcome == crate::delivery::Outcome::Delivered => Ok(()),
        Some(d) => Err(Exit(
            EXIT_UNDELIVERED,
            format!(
                "check-in not delivered ({}); the handoffs stay new for the next check-in",
                d.reason
            ),
        )
        .into()),
    }
}

fn print_checkin(r: &crate::checkin::CheckinReport) {
    match &r.delivery {
        None if r.skipped => println!("{}: scheduled check-in skipped: nothing new, no signal.", r.task),
        None => println!("{}: another check-in is running; this one stood down.", r.task),
        Some(d) => {
            let what = if r.new_handoffs.is_empty() {
                "nothing new".to_string()
            } else {
                format!("{} new handoff(s): {}", r.new_handoffs.len(), r.new_handoffs.join(", "))
            };
            println!(
                "{}: {what}; {} signal(s); phase {}; check-in {}: {}",
                r.task,
                r.signals.len(),
                r.phase,
                format!("{:?}", d.outcome).to_lowercase(),
                d.reason
            );
        }
    }
}

async fn cmd_watch(project: &ProjectArg, name: &TaskName, poll_ms: u64, timeout: u64) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let ctx = crate::session::Ctx::from_env()?;
    let every = t
        .spec()
        .ok()
        .and_then(|s| s.setting("checkin").and_then(crate::checkin::parse_duration))
        .unwrap_or(std::time::Duration::from_secs(600));
    let started = std::time::Instant::now();
    let mut last_checkin = std::time::Instant::now();
    println!(
        "Watching task '{name}': a check-in on every new handoff, and every {}s.",
        every.as_secs()
    );
    loop {
        let st = t.state()?;
        if matches!(st.phase, task::Phase::Complete | task::Phase::Blocked) {
            println!("Task '{name}' is {}.", st.phase);
            return if st.phase == task::Phase::Complete {
                Ok(())
            } else {
                Err(Exit(
                    error::EXIT_FAILURE,
                    format!("task '{name}' is BLOCKED; see `task status {name}`"),
                )
                .into())
            };
        }
        let (names, _) = handoff::list(&t.handoffs())?;
        let (cands, _) = st.ledger.scan(&t.handoffs(), &names)?;
        let due = last_checkin.elapsed() >= every;
        if !cands.is_empty() || due {
            let r =
                crate::checkin::run(&t, &ctx.tmux, clock::now(), crate::checkin::Trigger::Manual, Vec::new()).await?;
            print_checkin(&r);
            last_checkin = std::time::Instant::now();
            if r.delivery
                .as_ref()
                .is_some_and(|d| d.outcome != crate::delivery::Outcome::Delivered)
            {
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        }
        if timeout > 0 && started.elapsed().as_secs() >= timeout {
            return Err(Exit(
                error::EXIT_FAILURE,
                format!("gave up after {timeout}s; the task is {}", st.phase),
            )
            .into());
        }
        tokio::time::sleep(std::time::Duration::from_millis(poll_ms)).await;
    }
}

async fn cmd_stop(project: &ProjectArg, name: &TaskName, json: bool) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let ctx = crate::session::Ctx::from_env()?;
    let s = supervised(&t);
    let req = crate::daemon::protocol::Request::Stop {
        project: s.project,
        task: s.task,
        tmux: ctx.id(),
    };
    let stopped: crate::session::Stopped = match via_daemon(&req)? {
        Some(v) => serde_json::from_value(v).context("reading the daemon's report")?,
        None => crate::session::stop(&ctx, &t, clock::now()).await?,
    };
    let cron_removed = if crate::cron::available() {
        crate::cron::uninstall(&crate::cron::marker(&t.project, name.as_str()))?
    } else {
        false
    };
    if json {
        return print_json(&serde_json::json!({ "stopped": stopped, "cron_removed": cron_removed }));
    }
    if stopped.ended.is_empty() {
        println!("Task '{name}' had no running sessions; nothing to stop. Files are untouched.");
    } else {
        println!(
            "Stopped {} session(s) of task '{name}': {}. Files are kept.",
            stopped.ended.len(),
            stopped.ended.join(", ")
        );
    }
    if cron_removed {
        println!("Removed its crontab line.");
    }
    Ok(())
}

/// The spawn gate: a spoke may neither start nor message agents (refused with a reason
/// code, recorded in events.jsonl); a hub or a human may.
fn gate(t: &Task, ctx: &crate::session::Ctx, agent: &str, verb: &str) -> anyhow::Result<()> {
    use crate::protocol::gate;
    let st = t.state()?;
    let caller = gate::Caller::from_env(&ctx.tmux.socket().path());
    let roster = crate::protocol::roster::Roster::for_task(t)?;
    let (reason, advice) = gate::decide(&caller, &st, &roster, verb);
    let Some(advice) = advice else { return Ok(()) };
    if verb == "spawn" {
        // `task status` shows the last outcome per lane, refusals included.
        let now = clock::now();
        let _l = t.lock_state()?;
        let mut st = t.state_for_update(now)?;
        st.lanes.entry(agent.to_string()).or_default().last_reason = Some(reason);
        t.save_state(&st)?;
    }
    let _ = crate::events::append(
        t,
        "spawn_refused",
        Some(agent),
        serde_json::json!({"reason": reason, "verb": verb, "caller": caller.agent}),
        clock::now(),
    );
    Err(Exit(crate::error::EXIT_REFUSED, advice).into())
}

/// Ask the daemon to run a verb; `Ok(None)` when no daemon is running (the caller runs it
/// in this process: the same library call, so both modes behave alike).
fn via_daemon(req: &crate::daemon::protocol::Request) -> anyhow::Result<Option<serde_json::Value>> {
    use crate::daemon::{client, protocol::Response};
    match client::request(req)? {
        None => Ok(None),
        Some(Response::Done { report }) => Ok(Some(report)),
        Some(Response::Error { message, code }) => Err(Exit(code, message).into()),
        Some(other) => Err(Error::BadInput(format!(
            "unexpected answer from the daemon: {other:?}; is it the same version? (`task shutdown`, then retry)"
        ))
        .into()),
    }
}

fn cmd_attach(project: &ProjectArg, name: &TaskName, agent: Option<&AgentName>) -> anyhow::Result<()> {
    let t = locate(project, name)?;
    let agent = agent.map(|a| a.as_str()).unwrap_or("pm");
    let ctx = crate::session::Ctx::from_env()?;
    let session = ctx.session_name(&t, agent);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let host = t
        .state()
        .ok()
        .and_then(|st| st.agents.get(agent).map(|a| a.host.clone()));
    if let Some(Ok(crate::task::CwdSpec::Remote(r))) = host.as_deref().map(crate::task::taskmd::parse_cwd) {
        // `ssh -t <host> tmux … attach`, every word quoted for the remote shell.
        let tmux = rt.block_on(crate::remote::Host::connect(&r))?.tmux()?;
        if !rt.block_on(tmux.has_session(&session))? {
            return Err(Error::NotRunning(format!(
                "agent '{agent}' of task '{name}' is not running on {} (no tmux session {session} there)",
                r.destination()
            ))
            .into());
        }
        return Err(crate::remote::attach_exec(&r, &tmux, &session).into());
    }
    if !rt.block_on(ctx.tmux.has_session(&session))? {
        return Err(Error::NotRunning(format!(
            "agent '{agent}' of task '{name}' is not running (no tmux session {session} on server {}); start it with `task start {name}`",
            ctx.tmux.socket().flags()
        ))
        .into());
    }
    Err(ctx.tmux.attach_exec(&session).into())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Seed 002's fifth failure: instructions told agents to use an action the tool did not
    /// have. Every `task <verb> --flag` our preambles and check-ins teach must parse.
    #[test]
    fn every_command_the_templates_teach_exists() {
        let cmd = super::Cli::command();
        let templates = [
            crate::preamble::PM_TEMPLATE,
            crate::preamble::AGENT_TEMPLATE,
            crate::preamble::SCOPE_TEMPLATE,
            crate::preamble::CHECKIN_TEMPLATE,
            crate::preamble::REMOTE_TEMPLATE,
        ];
        let mut seen = 0;
        for t in templates {
            for line in t.lines() {
                let Some(at) = line.find("{task_bin} ") else { continue };
                let words: Vec<&str> = line[at + "{task_bin} ".len()..]
                    .split(|c: char| c.is_whitespace() || c == '`')
                    .filter(|w| !w.is_empty())
                    .collect();
                let verb = words[0];
                let sub = cmd
                    .find_subcommand(verb)
                    .unwrap_or_else(|| panic!("a template teaches `task {verb}`, which does not exist: {line}"));
                for flag in words.iter().filter(|w| w.starts_with("--")) {
                    let long = flag.trim_start_matches("--");
                    assert!(
                        sub.get_arguments().any(|a| a.get_long() == Some(long)),
                        "a template teaches `task {verb} {flag}`, which `task {verb}` does not take: {line}"
                    );
                }
                seen += 1;
            }
        }
        assert!(seen >= 4, "the templates name the commands they teach ({seen} found)");
    }
}
