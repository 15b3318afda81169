//! `task ui`: the live dashboard (see [`crate::ui`]).

use std::io::IsTerminal;
use std::path::Path;

use crate::core::error::Error;
use crate::store::task;
use crate::ui::{self, Options, Scope};

/// The `task ui --help` epilogue: what the screen shows and every key.
pub(crate) const AFTER_HELP: &str = "\
The screen, top to bottom:
  Needs you         most urgent first: a dialog waiting on an agent's screen, a permission
                    request no rule answered (a/d answer it), escalations, dead agents, BLOCKED handoffs, unreachable hosts, stale lanes, paused
                    agents (with their resume time). Each row: why, task/agent, what, since.
  Tasks and agents  every task (phase, last and next check-in) and its agents (state,
                    last handoff status, idle time, lane, recommended next, host)
  Events            the selected task's events.jsonl, newest first

Keys:
  Tab / Shift-Tab   move between the three lists; j k or arrows move the cursor
  Enter             attach to the agent (inside the agents' tmux: switch-client; otherwise
                    the UI steps aside and comes back when you detach); on an event that
                    names a handoff: open it in $PAGER
  m                 message the agent (verified delivery, the outcome is shown)
  c                 check in the task now        x   stop the agent (asks first)
  p                 progress.md in $PAGER        s   mark a Needs-you item seen
  a / d             allow / deny the selected permission request (you decide, once)
  /                 filter by task/agent name    ?   all keys        q   quit

Updates come from file watches on each task folder (pm_state.json, events.jsonl,
handoffs/) and a look at each agent's process in /proc (a death shows at once); tmux is listed
only when something changed and every 5 s. Nothing re-reads task folders in a loop.
NO_COLOR=1 draws without colours.

Examples:
  task ui                     the tasks of the project here
  task ui --all --read-only   every supervised task, on a second screen";

/// Run the dashboard for the project found from `project`, or every supervised task.
pub(crate) fn run(project: Option<&Path>, all: bool, read_only: bool) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Error::BadInput(
            "task ui needs a terminal (stdin and stdout); for scripts use `task status --json` or `task log`".into(),
        )
        .into());
    }
    let scope = if all {
        Scope::All
    } else {
        Scope::Project(task::find_project_root(project)?)
    };
    Ok(ui::run(Options { scope, read_only })?)
}
