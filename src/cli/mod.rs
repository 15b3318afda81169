//! The `task` command line: arguments ([`args`]), dispatch to one file per verb
//! ([`commands`]), shared output helpers, and the exit code.
//!
//! Human output goes to stdout, diagnostics to stderr; `--json` output is the
//! documented, versioned shape in docs/json.md. Exit codes are those of
//! [`crate::core::error`]. A verb parses nothing and decides nothing itself: it calls the
//! application layer ([`crate::app`]) and renders what comes back.

mod args;
mod commands;
mod output;

use anyhow::Context as _;
use clap::Parser;
use std::ops::ControlFlow::{self, Break, Continue};

use crate::app::{start::Mode, verbs::send::What};
use crate::core::error::{self, Error, Exit};
use crate::core::wire::Refusal;

pub use args::{Cli, Command, ProjectArg, RuntimeAction, ServiceAction};

/// Parse arguments, run, print errors; returns the process exit code.
pub fn main() -> i32 {
    crate::io::signals::unblock_all();
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
    crate::io::logging::init(cli.verbose);
    match run(cli) {
        Ok(()) => error::EXIT_OK,
        Err(e) => {
            let code = e
                .chain()
                .find_map(|c| c.downcast_ref::<Exit>().map(|x| x.code))
                .or_else(|| {
                    e.chain()
                        .find_map(|c| c.downcast_ref::<Refusal>())
                        .map(|_| error::EXIT_REFUSED)
                })
                .or_else(|| e.chain().find_map(|c| c.downcast_ref::<Error>()).map(Error::exit_code))
                .unwrap_or(error::EXIT_FAILURE);
            eprintln!("error: {e:#}");
            code
        }
    }
}

/// Run one parsed command: the commands that make and read tasks, the verbs that act on a
/// task's agents, then the supervisor's own.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    let cmd = match tasks(cli.command) {
        Break(done) => return done,
        Continue(cmd) => cmd,
    };
    let cmd = match agents(cmd) {
        Break(done) => return done,
        Continue(cmd) => cmd,
    };
    supervisor(cmd)
}

/// Making, starting and reading tasks; `Continue` passes on a command served elsewhere.
fn tasks(cmd: Command) -> ControlFlow<anyhow::Result<()>, Command> {
    match cmd {
        Command::New { name, project, json } => Break(commands::new::run(&name, project.as_deref(), json)),
        Command::Handoff {
            task,
            from,
            status,
            target,
            next,
            body_file,
            project,
            json,
        } => Break({
            let header = commands::handoff::Header {
                from: &from,
                status,
                target: target.as_ref(),
                next: next.as_ref(),
            };
            commands::handoff::run(project.project.as_deref(), &task, header, body_file.as_deref(), json)
        }),
        Command::Status { task, project, json } => {
            Break(commands::status::run(project.project.as_deref(), task.as_ref(), json))
        }
        Command::List { project, json } => Break(commands::list::run(project.project.as_deref(), json)),
        Command::Progress { task, project } => Break(commands::progress::run(project.project.as_deref(), &task)),
        Command::SetupAgents {
            project,
            runtime,
            roster,
            json,
        } => Break(commands::setup_agents::run(
            project.project.as_deref(),
            runtime,
            &roster,
            json,
        )),
        Command::Start {
            name,
            project,
            runtime,
            no_daemon,
            no_cron,
            json,
        } => Break(block_on(commands::start::run(
            &name,
            project.as_deref(),
            runtime.as_deref(),
            Mode { no_daemon, no_cron },
            json,
        ))),
        Command::Log {
            task,
            project,
            follow,
            json,
            lineage,
        } => Break(commands::log::run(
            project.project.as_deref(),
            &task,
            follow,
            json,
            lineage,
        )),
        Command::Ui {
            project,
            all,
            read_only,
        } => Break(commands::ui::run(project.project.as_deref(), all, read_only)),
        other => Continue(other),
    }
}

/// The verbs that act on a task's agents; `Continue` passes on a command served elsewhere.
fn agents(cmd: Command) -> ControlFlow<anyhow::Result<()>, Command> {
    match cmd {
        Command::Spawn {
            task,
            agent,
            handoff,
            runtime,
            project,
            prepare: true,
            json,
            ..
        } => Break(block_on(commands::prepare::run(
            project.project.as_deref(),
            &task,
            &agent,
            &handoff,
            runtime.as_deref(),
            json,
        ))),
        Command::Spawn {
            task,
            agent,
            handoff,
            runtime,
            project,
            queue,
            over_budget,
            worktree,
            json,
            ..
        } => Break({
            let args = commands::spawn::Args {
                over_budget,
                agent: &agent,
                handoff: &handoff,
                flags: crate::core::protocol::lane::SpawnFlags {
                    runtime,
                    isolation: worktree,
                },
                queue,
            };
            block_on(commands::spawn::run(project.project.as_deref(), &task, args, json))
        }),
        Command::Send {
            task,
            agent,
            message,
            file,
            handoff,
            project,
            json,
        } => Break({
            let what = match (message, file, handoff) {
                (Some(m), _, _) => Some(What::Message(m)),
                (None, Some(f), _) => Some(What::File(f)),
                (None, None, Some(h)) => Some(What::Handoff(h)),
                (None, None, None) => None,
            };
            block_on(commands::send::run(
                project.project.as_deref(),
                &task,
                &agent,
                what,
                json,
            ))
        }),
        Command::Rotate {
            task,
            agent,
            project,
            json,
        } => Break(block_on(commands::rotate::run(
            project.project.as_deref(),
            &task,
            &agent,
            json,
        ))),
        Command::Checkin { task, project, json } => Break(block_on(commands::checkin::run(
            project.project.as_deref(),
            &task,
            json,
        ))),
        Command::Watch {
            task,
            project,
            poll_ms,
            timeout,
        } => Break(block_on(commands::watch::run(
            project.project.as_deref(),
            &task,
            poll_ms,
            timeout,
        ))),
        Command::Stop { task, project, json } => {
            Break(block_on(commands::stop::run(project.project.as_deref(), &task, json)))
        }
        Command::Attach { task, agent, project } => {
            Break(commands::attach::run(project.project.as_deref(), &task, agent.as_ref()))
        }
        other => Continue(other),
    }
}

/// The supervisor itself: its daemon and service, checks, and the hooks agents call.
fn supervisor(cmd: Command) -> anyhow::Result<()> {
    match cmd {
        Command::Daemon { stop: false } => commands::daemon::run(),
        Command::Daemon { stop: true } | Command::Shutdown => commands::daemon::shutdown(),
        Command::Service { action, json } => commands::service::run(action, json),
        Command::Web {
            listen,
            insecure_listen,
            read_only,
            url,
            revoke,
            json,
        } => commands::web::run(commands::web::Asked {
            listen,
            insecure_listen,
            read_only,
            url,
            revoke,
            json,
        }),
        Command::WebhookPost => commands::web::webhook_post(),
        Command::Hosts { action: None, json } => block_on(commands::hosts::list(json)),
        Command::Hosts {
            action: Some(args::HostsAction::Check { name, json }),
            ..
        } => block_on(commands::hosts::check(name.as_deref(), json)),
        Command::Runtime {
            action: RuntimeAction::Check { runtime, project, json },
        } => block_on(commands::runtime::check(&runtime, project.project.as_deref(), json)),
        Command::Doctor { project, json } => block_on(commands::doctor::run(project.project.as_deref(), json)),
        Command::DemoAgent { prompt_file } => Ok(crate::runtimes::demo::main(&prompt_file)?),
        Command::Hook { event } => block_on(commands::hook::run(&event)),
        Command::Permit {
            task,
            id,
            decision,
            always,
            reason,
            project,
            json,
        } => commands::permit::run(
            project.project.as_deref(),
            &task,
            &id,
            decision == args::PermitDecision::Allow,
            always,
            reason,
            json,
        ),
        other => anyhow::bail!("internal: no handler for {other:?}"),
    }
}

/// Run an async verb on a one-thread runtime; every ssh master it opened is closed
/// before the command returns, whatever the outcome.
fn block_on<F: std::future::Future<Output = anyhow::Result<()>>>(f: F) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(async {
            let r = f.await;
            // No ssh master outlives a CLI command.
            crate::io::remote::close_all().await;
            r
        })
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
            crate::core::preamble::PM_TEMPLATE,
            crate::core::preamble::AGENT_TEMPLATE,
            crate::core::preamble::SCOPE_TEMPLATE,
            crate::core::preamble::CHECKIN_TEMPLATE,
            crate::core::preamble::REMOTE_TEMPLATE,
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
