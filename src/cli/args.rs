//! The `task` command line's arguments: the clap `Cli` and one `Command` variant per verb,
//! with the help text users read (`task --help`, `task <verb> --help`).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::app::agents;
use crate::core::handoff::Status;
use crate::core::names::{AgentName, TaskName};

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
     (SPAWN_REJECT_ACTIVE_LANE, SPAWN_REJECT_DUPLICATE, SPAWN_REJECT_SPOKE_CALLER,
     SPAWN_REJECT_BUDGET)

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

// `--project`, shared by most verbs. Deliberately no doc comment: clap gives a
// verb without its own doc comment the doc of a struct it flattens, which is how
// `setup-agents` once showed this line as its description in `task --help`.
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
    /// A used-up task.md budget refuses it (SPAWN_REJECT_BUDGET) unless --over-budget.
    /// Refusals exit 6. The agent's context bundle is deployed to active_agents/<agent>/.
    /// With --worktree the agent works in its own git worktree on branch agents/<task>/<agent>-<n>,
    /// merged into task/<task> at its final handoff (a conflict is reported to the PM).
    /// --worktree=detached gives a read-only worktree at task/<task>'s head (for a review).
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
        /// Start even though a task.md budget is used up (for a human who decided to spend more;
        /// from an agent, the PM included, it counts for nothing).
        #[arg(long)]
        over_budget: bool,
        /// Give the agent its own git worktree: `worktree` (the default when given bare), `detached`
        /// (read only, at the task branch's head) or `shared` (the task's folder, overriding task.md).
        #[arg(long, value_name = "KIND", num_args = 0..=1, default_missing_value = "worktree", value_parser = parse_isolation)]
        worktree: Option<crate::core::worktree::Isolation>,
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
    /// Answer a permission request an agent is waiting on (the check-in and `task status` name
    /// it: p-…): allow or deny, once. The PM answers for its own task's agents; a human for
    /// any. `--always` also allows that exact command for that agent from now on.
    Permit {
        /// The task.
        task: TaskName,
        /// The request's id (p- and 8 hex digits).
        id: String,
        /// The answer.
        #[arg(value_enum)]
        decision: PermitDecision,
        /// With allow: the same command is allowed for that agent from now on, unasked.
        #[arg(long)]
        always: bool,
        /// Why, told to the agent (with a denial, what to do instead).
        #[arg(long, value_name = "TEXT", allow_hyphen_values = true)]
        reason: Option<String>,
        #[command(flatten)]
        project: ProjectArg,
        /// Print the decision that stands as JSON.
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
    /// Replace the PM's conversation by a fresh one now, its first prompt built from the task
    /// folder (phase, decisions.md, lanes, every agent's last handoff, what waits, progress.md).
    /// The daemon does this by itself when the PM's context passes `rotate_at:` (task.md,
    /// default 60%) or every `rotate_every:` check-ins. The old conversation is kept and its
    /// cost still counted. Refused to spokes.
    Rotate {
        /// The task.
        task: TaskName,
        /// The agent whose conversation to replace; only the PM for now.
        #[arg(default_value = "pm")]
        agent: AgentName,
        #[command(flatten)]
        project: ProjectArg,
        /// Print what was done as JSON.
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
    /// For a human or the hub: a spoke is refused (SPAWN_REJECT_SPOKE_CALLER, exit 6).
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
    /// A live dashboard: who needs you first (dialogs, escalations, BLOCKED handoffs, dead agents), then tasks, agents and events; act without attaching.
    #[command(after_help = crate::cli::commands::ui::AFTER_HELP)]
    Ui {
        #[command(flatten)]
        project: ProjectArg,
        /// Every task the running daemon supervises, across projects (instead of one project).
        #[arg(long, conflicts_with = "project")]
        all: bool,
        /// Look only: message, check-in and stop keys are off (a second screen, a shared terminal).
        #[arg(long)]
        read_only: bool,
    },
    /// The team on a phone: have the daemon serve the web page (who needs you, answer it)
    /// and print its address with a one-time login code.
    #[command(after_help = crate::cli::commands::web::AFTER_HELP)]
    Web {
        /// Where to listen, host:port (default: config.toml's [web] listen, else 127.0.0.1:8470).
        #[arg(long, value_name = "ADDR", conflicts_with_all = ["url", "revoke"])]
        listen: Option<String>,
        /// Serve a non-loopback address over plain HTTP (anyone on that network can read it).
        #[arg(long, conflicts_with_all = ["url", "revoke"])]
        insecure_listen: bool,
        /// Look only: no answers, messages, check-ins or stops from the page.
        #[arg(long, conflicts_with_all = ["url", "revoke"])]
        read_only: bool,
        /// Only print the address with a new login code (the page must be served already).
        #[arg(long, conflicts_with = "revoke")]
        url: bool,
        /// End every web session and drop unused login codes (a new secret is made).
        #[arg(long)]
        revoke: bool,
        /// Print {"url", "login_url", "read_only", "code_expires_in_secs"} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The fleet: every host of config.toml's [hosts.<name>] with whether it answers, its
    /// slots used and free, load, memory, tmux/rsync/git, labels and the agents on it.
    /// `check [NAME]`: what `task doctor` looks at, for each host (exit 1 on a problem).
    Hosts {
        /// `check`: ssh, tmux, rsync, git and a writable root on each host (or NAME).
        #[command(subcommand)]
        action: Option<HostsAction>,
        /// Print the hosts as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Post one webhook message (the JSON on stdin); what an escalation starts, so a message
    /// outlives a short-lived `task` process.
    #[command(hide = true)]
    WebhookPost,
    /// Run the supervisor daemon in the foreground (what the systemd unit runs); --stop asks a running one to stop.
    Daemon {
        /// Stop the running daemon instead (agents keep running).
        #[arg(long)]
        stop: bool,
    },
    /// Stop the running daemon cleanly (agents keep running). Not for a spoke of a task it
    /// supervises (SPAWN_REJECT_SPOKE_CALLER, exit 6).
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
    /// Check everything tasks depend on: tmux and the dedicated server, each runtime's program and version, Claude Code's permissions for the protocol's commands, the daemon, the systemd unit and lingering, cron, every remote host of the project's tasks (ssh, rsync), the notify command. One line each: ok, warning or problem, with the command that fixes it. Exits 1 when any problem is found; changes nothing.
    Doctor {
        #[command(flatten)]
        project: ProjectArg,
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Runtime profiles (claude, kiro, demo, or your own in the config file): `task runtime check <runtime>` proves one against the real program.
    Runtime {
        #[command(subcommand)]
        action: RuntimeAction,
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
    /// A Claude Code hook of an agent the supervisor started (set in its `--settings`): reads
    /// the hook's JSON on stdin and answers on stdout. `permission-request`: the broker;
    /// `prompt-submit`, `stop`, `stop-failure`, `notification`: the agent's turn.
    #[command(hide = true)]
    Hook {
        /// The hook event: permission-request, prompt-submit, stop, stop-failure, notification.
        event: String,
    },
    /// The built-in scripted agent of the demo runtime (started by `task start --runtime demo`).
    #[command(hide = true)]
    DemoAgent {
        /// The preamble file to read.
        #[arg(long, value_name = "FILE")]
        prompt_file: PathBuf,
    },
    /// Write the default agent definitions (pm, explore, plan, architect, dev, test, review, scribe) that are missing; never overwrites.
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

/// `task runtime` actions.
#[derive(Debug, Subcommand)]
pub enum RuntimeAction {
    /// Start the runtime's program in a scratch tmux session in the project, wait for its ready pattern, deliver a probe message with verified delivery and see it submitted; each step is reported, with the screen and the fix when a pattern did not match. Exit 0 only when every step passed. This is how to add a CLI we have never seen: write its profile, then check it.
    Check {
        /// The runtime: a built-in one (claude, kiro, demo) or [runtimes.<name>] in the config file.
        runtime: String,
        #[command(flatten)]
        project: ProjectArg,
        /// Print the steps as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `task hosts` actions.
#[derive(Debug, Clone, PartialEq, Eq, clap::Subcommand)]
pub enum HostsAction {
    /// Check each host (or NAME) as `task doctor` would: ssh, tmux, rsync, git, a writable root.
    Check {
        /// One host's name.
        name: Option<String>,
        /// Print the checks as JSON.
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

/// `--status`: one of the four words, case-insensitive, nothing else.
fn parse_status(s: &str) -> Result<Status, String> {
    Status::from_word(s)
        .filter(|st| s.trim().eq_ignore_ascii_case(st.as_str()))
        .ok_or_else(|| format!("{s:?} is not one of COMPLETE, BLOCKED, NEEDS_REVIEW, IN_PROGRESS"))
}

fn parse_isolation(s: &str) -> Result<crate::core::worktree::Isolation, String> {
    crate::core::worktree::Isolation::parse(s)
}

/// `task permit`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PermitDecision {
    /// Let the agent go on.
    Allow,
    /// Refuse; the agent is told (with --reason, why).
    Deny,
}
