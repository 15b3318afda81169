//! `task spawn --prepare`: a spawn rendered, nothing started.

use std::path::Path;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::preamble::{Place, preamble_file_name, spoke_preamble};
use super::spawn::{BundlePlan, read_spawn_handoff};
use super::{Ctx, Launch, choose_runtime, local_cwd, remote_for};
use crate::core::error::Result;
use crate::core::handoff;
use crate::core::names::AgentName;
use crate::store::task::Task;

/// What `task spawn --prepare` renders: everything a spawn would use, nothing started.
#[derive(Debug, Clone, Serialize)]
pub struct Prepared {
    /// Always true: says in the JSON that this is a rendering, not a start.
    pub prepared_only: bool,
    /// The agent.
    pub agent: String,
    /// The tmux session it would get.
    pub session: String,
    /// `local` or the remote spec.
    pub host: String,
    /// Where it would work.
    pub cwd: String,
    /// The runtime.
    pub runtime: String,
    /// The command line it would run (the prompt file is the one a spawn would save).
    pub argv: Vec<String>,
    /// The exact preamble it would be sent.
    pub preamble: String,
    /// The context bundle it would get: `{"manifest": …, "bundle": …}` (nothing is consumed).
    pub bundle: serde_json::Value,
}

/// Render a spawn without starting anything: no session, no state, no files.
/// Prepare and spawn are two verbs so that one is never mistaken for the other.
pub async fn prepare(
    ctx: &Ctx,
    task: &Task,
    agent: &AgentName,
    handoff_arg: &Path,
    runtime_flag: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Prepared> {
    task.require()?;
    let spec = task.spec()?;
    let remote = remote_for(&spec, agent);
    let (path, contents) = read_spawn_handoff(task, handoff_arg)?;
    let handoff_text = handoff::decode(&contents.bytes, &mut Vec::new());
    let rt = choose_runtime(task, agent.as_str(), runtime_flag)?;
    let roster = crate::store::roster::for_task(task)?;
    let role = roster.role_of(agent.as_str()).as_str();
    // Without connecting: the remote cwd is the one task.md names.
    let (local, destination);
    let place = match &remote {
        Some(r) => {
            destination = r.destination();
            Place::Remote {
                destination: &destination,
                cwd: &r.path,
                root: &r.path,
                worktree: None,
            }
        }
        None => {
            local = local_cwd(task)?;
            Place::Local {
                cwd: &local,
                worktree: None,
            }
        }
    };
    let (cwd, task_dir) = (place.cwd(), place.task_dir(task));
    let host = remote.as_ref().map_or_else(|| "local".to_string(), |r| r.to_string());
    let text = spoke_preamble(task, agent.as_str(), &roster, &place, &path, &handoff_text, now);
    let session = ctx.session_name(task, agent.as_str());
    let prompt_file = Path::new(&task_dir)
        .join("scratchpad")
        .join(agent.as_str())
        .join(preamble_file_name(now));
    let argv = Launch {
        task,
        agent: agent.as_str(),
        session: &session,
        session_id: "<new uuid>",
        task_dir: &task_dir,
        remote: remote.is_some(),
    }
    .argv(ctx, &rt, &text, &prompt_file)?
    .argv;
    let plan = BundlePlan::new(task, agent.as_str(), &roster, &path, &handoff_text);
    let assembled = crate::store::bundle::assemble(&plan.input(task, agent.as_str(), role, now));
    Ok(Prepared {
        bundle: serde_json::json!({"manifest": assembled.manifest, "bundle": assembled.bundle}),
        prepared_only: true,
        agent: agent.to_string(),
        session,
        host,
        cwd,
        runtime: rt.name.clone(),
        argv,
        preamble: text,
    })
}
