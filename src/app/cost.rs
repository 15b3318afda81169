//! What the team costs, gathered: each agent's Claude Code transcripts read since the
//! last look (`store::usage`), priced (`io::prices`), judged against task.md's budgets,
//! beside the supervisor's own deliveries from events.jsonl. Called by `task status`,
//! every check-in and every spawn, so each sees fresh figures; reading is incremental,
//! so calling it often is cheap.
//!
//! Remote agents' transcripts are read on their host over its SSH master
//! ([`read_remote`], the same offsets). Usage is "unknown", never a guess, for runtimes
//! other than Claude Code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};

use crate::core::cost::budget::{self, Spent};
use crate::core::cost::price::Prices;
use crate::core::cost::usage::{self, ByModel};
use crate::core::cost::view::{AgentCost, ContextFill, CostView};
use crate::core::error::Result;
use crate::core::model::{AgentState, PmState};
use crate::store::events::Kind as EventKind;
use crate::store::task::Task;
use crate::store::usage::{self as usage_file, UsageFile};

/// Where Claude Code keeps its transcripts: `$CLAUDE_CONFIG_DIR/projects`, else
/// `~/.claude/projects`.
pub fn claude_projects() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("CLAUDE_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d).join("projects"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude/projects"))
}

/// The transcript of session `id` of an agent working in `cwd`.
pub fn transcript_path(projects: &Path, cwd: &Path, id: &str) -> PathBuf {
    projects
        .join(crate::app::checkin::intent::claude_slug(cwd))
        .join(format!("{id}.jsonl"))
}

/// Whether `a`'s usage (and so its context fill) can be read here: a question rotation
/// asks at every check-in, answered without reading usage.json or any transcript.
pub fn usage_readable(a: &AgentState) -> bool {
    unknown_why(a).is_none() && a.host.remote().is_none()
}

/// Why `a`'s usage cannot be read, or `None` when it can (locally or on its host).
fn unknown_why(a: &AgentState) -> Option<String> {
    match a.runtime.as_deref() {
        Some("claude") => None,
        Some(r) => Some(format!("the {r} runtime keeps no usage record we read")),
        None => Some("runtime not recorded".into()),
    }
}

/// A compaction read from an agent's transcript for the first time.
pub type Compacted = (String, crate::core::cost::usage::Compaction);

/// Read every local Claude Code agent's new transcript lines into `file`; returns whether
/// anything moved (so the caller saves only then), and the compactions newly read.
pub fn read_transcripts(state: &PmState, cwd: &Path, projects: &Path, file: &mut UsageFile) -> (bool, Vec<Compacted>) {
    let mut moved = false;
    let mut compacted = Vec::new();
    for (name, a) in &state.agents {
        if unknown_why(a).is_some() || a.host.remote().is_some() {
            continue;
        }
        let sessions = a.past_sessions.iter().chain(a.session_id.iter());
        for id in sessions {
            let t = file
                .agents
                .entry(name.clone())
                .or_default()
                .entry(id.clone())
                .or_default();
            let before = t.offset;
            let compactions = t.compactions;
            let p = transcript_path(projects, cwd, id);
            match usage_file::read_new(&p, t) {
                Ok(warnings) => {
                    for w in warnings {
                        tracing::warn!(agent = %name, warning = %w, "transcript line not counted");
                    }
                }
                Err(e) => {
                    tracing::warn!(agent = %name, error = %e, "cannot read the agent's transcript; its usage stays as last read")
                }
            }
            moved |= t.offset != before;
            if t.compactions > compactions {
                if let Some(c) = &t.last_compaction {
                    compacted.push((name.clone(), c.clone()));
                }
            }
        }
    }
    (moved, compacted)
}

/// The first read of a remote transcript moves this much per ssh round trip.
const REMOTE_CHUNK: usize = 4 << 20;

/// Read the new transcript lines of every remote Claude Code agent on its host, over the
/// host's SSH master, into usage.json. An unreachable host keeps the figures last read
/// (logged): they are what was spent at least, never a guess.
pub async fn read_remote(task: &Task, state: &PmState) {
    let remote: Vec<(&String, &AgentState)> = state
        .agents
        .iter()
        .filter(|(_, a)| a.host.remote().is_some() && unknown_why(a).is_none())
        .collect();
    if remote.is_empty() {
        return;
    }
    let mut file = usage_file::load(task);
    let mut moved = false;
    for (name, a) in remote {
        let Some(spec) = a.host.remote() else { continue };
        let read = async {
            let host = crate::io::remote::Host::connect(spec).await?;
            let slug = crate::app::checkin::intent::claude_slug(Path::new(&host.cwd().await?));
            for id in a.past_sessions.iter().chain(a.session_id.iter()) {
                let t = file
                    .agents
                    .entry(name.clone())
                    .or_default()
                    .entry(id.clone())
                    .or_default();
                loop {
                    let Some(p) = crate::io::remote::transcript::read(&host, &slug, id, t.offset, REMOTE_CHUNK).await?
                    else {
                        break;
                    };
                    if p.size < t.offset {
                        tracing::warn!(agent = %name, "the remote transcript shrank (replaced?); counting it again");
                        *t = Default::default();
                        moved = true;
                        continue;
                    }
                    let fed = t.feed(&p.bytes);
                    for w in fed.warnings {
                        tracing::warn!(agent = %name, warning = %w, "remote transcript line not counted");
                    }
                    moved |= fed.consumed > 0;
                    if fed.consumed == 0 || t.offset >= p.size {
                        break;
                    }
                }
            }
            Ok::<(), crate::core::error::Error>(())
        };
        if let Err(e) = read.await {
            tracing::warn!(agent = %name, error = %e, "cannot read the remote agent's transcript; its usage stays as last read");
        }
    }
    if moved {
        if let Err(e) = usage_file::save(task, &file) {
            tracing::warn!(task = %task.name, error = %e, "cannot save usage.json");
        }
    }
}

/// One agent's figures from what was read.
fn agent_cost(name: &str, a: &AgentState, file: &UsageFile, prices: &Prices) -> AgentCost {
    let why = unknown_why(a);
    let mut by_model = ByModel::new();
    let (mut answers, mut skipped, mut compactions) = (0, 0, 0);
    for t in file.agents.get(name).map(|m| m.values()).into_iter().flatten() {
        usage::merge(&mut by_model, &t.by_model);
        answers += t.messages;
        skipped += t.skipped;
        compactions += t.compactions;
    }
    let tokens = usage::sum(&by_model);
    // The current conversation's latest answer says how full its context is.
    let context = a
        .session_id
        .as_ref()
        .and_then(|id| file.agents.get(name)?.get(id)?.recent.last())
        .filter(|_| why.is_none())
        .map(|(_, model, t)| crate::core::cost::view::ContextFill::of(model, t, prices.window_of(model)));
    AgentCost {
        agent: name.to_string(),
        known: why.is_none(),
        unknown_why: why.clone(),
        total_tokens: tokens.total(),
        tokens,
        usd: if why.is_none() { prices.cost(&by_model) } else { None },
        by_model,
        answers,
        skipped_lines: skipped,
        context,
        compactions,
    }
}

/// How far events.jsonl may be read past what usage.json saved before it is saved again:
/// every check-in appends a few events, and rewriting usage.json for each was a tenth of
/// the daemon's CPU under load; reading 16 KiB of events again costs far less.
const EVENTS_SAVE_EVERY: u64 = 16 * 1024;

/// usage.json with what the transcripts added since it was saved, and whether they moved
/// (then it is saved here). A compaction read on the way is an event.
fn refresh(task: &Task, state: &PmState, now: DateTime<Utc>) -> (UsageFile, bool) {
    let mut file = usage_file::load(task);
    let cwd = crate::app::session::local_cwd(task).unwrap_or_else(|_| task.project.clone());
    let (moved, compacted) = match claude_projects() {
        Some(projects) => read_transcripts(state, &cwd, &projects, &mut file),
        None => (false, Vec::new()),
    };
    for (agent, c) in compacted {
        tracing::warn!(task = %task.name, %agent, trigger = %c.trigger, pre_tokens = ?c.pre_tokens, "the agent's client compacted its conversation");
        let _ = crate::store::events::append(
            task,
            EventKind::Compacted,
            Some(&agent),
            serde_json::json!({"trigger": c.trigger, "pre_tokens": c.pre_tokens}),
            now,
        );
    }
    if moved {
        if let Err(e) = usage_file::save(task, &file) {
            tracing::warn!(task = %task.name, error = %e, "cannot save usage.json; the next look reads the transcripts again");
        }
    }
    (file, moved)
}

/// How full each agent's current conversation is, by agent (those known): what rotation
/// asks every few seconds, without the event log and the money that [`gather`] adds.
pub fn context_fills(task: &Task, state: &PmState, now: DateTime<Utc>) -> BTreeMap<String, ContextFill> {
    let (file, _) = refresh(task, state, now);
    let prices = crate::io::prices::load();
    state
        .agents
        .iter()
        .filter_map(|(n, a)| Some((n.clone(), agent_cost(n, a, &file, &prices).context?)))
        .collect()
}

/// Refresh the usage of `task` (reading only what is new) and gather the whole picture.
/// Never fails on a transcript: an unreadable one keeps its last figures, with a warning.
/// usage.json is written when a transcript moved, or events.jsonl grew by
/// [`EVENTS_SAVE_EVERY`] since it was saved (so `task status` on a quiet task writes
/// nothing, and a check-in rarely does).
pub fn gather(task: &Task, state: &PmState, now: DateTime<Utc>) -> Result<CostView> {
    let (mut file, _) = refresh(task, state, now);
    let saved_events = file.events.offset;
    let prices = crate::io::prices::load();
    let agents: Vec<AgentCost> = state
        .agents
        .iter()
        .map(|(n, a)| agent_cost(n, a, &file, &prices))
        .collect();
    let log = crate::store::events::path(task);
    if let Err(e) = usage_file::read_events(&log, &mut file.events) {
        tracing::warn!(task = %task.name, error = %e, "cannot read events.jsonl; the supervisor's spend is as last counted");
    }
    let pm_now = agents
        .iter()
        .find(|a| a.agent == "pm" && a.known)
        .map(|a| a.total_tokens);
    let spend = file.events.spend(now, pm_now);
    let mut v = CostView::new(agents, prices.as_of.clone(), spend);
    let budgets = task.spec().map(|s| s.budgets()).unwrap_or_default();
    let roles: BTreeMap<String, Spent> = budgets.roles.keys().map(|r| (r.clone(), v.spent_by(r))).collect();
    v.budgets = budget::standings(&budgets, v.spent(), &roles);
    // An offset that went back (events.jsonl replaced) is saved too.
    if file.events.offset.abs_diff(saved_events) >= EVENTS_SAVE_EVERY || file.events.offset < saved_events {
        if let Err(e) = usage_file::save(task, &file) {
            tracing::warn!(task = %task.name, error = %e, "cannot save usage.json; the next look reads the transcripts again");
        }
    }
    Ok(v)
}

/// The message a running agent gets when a budget covering it is used up.
const WRAP_UP_TEMPLATE: &str = include_str!("../../templates/budget-wrap-up.md");

/// Tell every running agent a used-up budget covers (every spoke for the task's budget,
/// the role's agent for a role's) to wrap up and hand off — once per run of that agent
/// (its session id), with verified delivery. They are not stopped: what they have done
/// so far is worth more than the tokens a handoff costs. Failures are logged and tried
/// again at the next check-in.
pub async fn tell_wrap_up(
    task: &Task,
    tmux: &crate::io::tmux::Tmux,
    standings: &[budget::Standing],
    now: DateTime<Utc>,
) {
    let used_up: Vec<&budget::Standing> = standings
        .iter()
        .filter(|b| b.level == budget::Level::Exceeded)
        .collect();
    if used_up.is_empty() {
        return;
    }
    let Ok(state) = task.state() else { return };
    let Ok(ctx) = crate::app::session::Ctx::from_env() else {
        return;
    };
    let ctx = crate::app::session::Ctx {
        tmux: tmux.clone(),
        ..ctx
    };
    for (name, a) in &state.agents {
        let covering = used_up
            .iter()
            .find(|b| b.scope == *name || (b.scope == "task" && name != "pm"));
        let Some(b) = covering else { continue };
        if a.status != crate::core::model::AgentStatus::Running || a.pane.is_none() {
            continue;
        }
        let key = format!("budget_wrapup:{name}:{}", a.session_id.as_deref().unwrap_or("-"));
        if state.reminders.contains_key(&key) {
            continue;
        }
        let text = crate::core::preamble::fill(
            WRAP_UP_TEMPLATE,
            &[
                ("scope", &b.scope),
                ("task", task.name.as_str()),
                ("limit", &b.limit.to_string()),
            ],
        );
        let text = text.trim_end();
        let r = crate::app::session::send_with(&ctx, task, name, text, Some(std::time::Duration::from_secs(15)), false)
            .await;
        let (outcome, why_not) = match &r {
            Ok(rep) => (serde_json::json!(rep.outcome), rep.reason.clone()),
            Err(e) => (serde_json::json!(format!("failed: {e}")), e.to_string()),
        };
        let delivered = matches!(&r, Ok(rep) if rep.outcome == crate::core::report::Outcome::Delivered);
        let _ = crate::store::events::append(
            task,
            EventKind::SupervisorMessage,
            Some(name),
            serde_json::json!({"why": "budget_wrap_up", "scope": b.scope, "bytes": text.len(), "outcome": outcome, "detail": why_not}),
            now,
        );
        if delivered {
            let saved = task.update_state(now, |st| {
                st.reminders.insert(key.clone(), now);
                Ok(())
            });
            if let Err(e) = saved {
                tracing::warn!(agent = %name, error = %e, "told to wrap up, but that could not be saved; it may be told again");
            }
        } else {
            tracing::warn!(agent = %name, outcome = %outcome, "the budget wrap-up message was not delivered; trying again at the next check-in");
        }
    }
}

/// Why a spawn of `agent` would be refused for its budget now (usage as last read; no
/// remote reads, so the daemon's tick stays cheap), or `None`.
pub fn refusal(task: &Task, agent: &str, now: DateTime<Utc>) -> Option<String> {
    let budgets = task.spec().ok()?.budgets();
    if !budgets.any() {
        return None;
    }
    let v = gather(task, &*task.state().ok()?, now).ok()?;
    budget::refuses(&v.budgets, agent).map(crate::core::checkin::signals::budget_escalation)
}

/// Refuse a spawn of `agent` when a budget covering it is used up
/// (`SPAWN_REJECT_BUDGET`, exit 6): the refusal is recorded where people look (the lane's
/// last outcome, a `spawn_refused` event) and a human is called once per budget.
pub async fn check_spawn(task: &Task, agent: &str) -> crate::core::error::Result<()> {
    use crate::core::protocol::reason::{Reason, Refusal};
    let now = crate::core::clock::now();
    let state = task.state()?;
    read_remote(task, &state).await;
    let v = gather(task, &state, now)?;
    let Some(b) = budget::refuses(&v.budgets, agent) else {
        return Ok(());
    };
    let reason = crate::core::checkin::signals::budget_escalation(b);
    if let Err(e) = crate::app::escalation::raise(task, &reason, now) {
        tracing::warn!(task = %task.name, error = %e, "cannot record the budget escalation");
    }
    task.update_state(now, |st| {
        st.lanes.entry(agent.to_string()).or_default().last_reason = Some(Reason::SpawnRejectBudget);
        Ok(())
    })?;
    let _ = crate::store::events::append(
        task,
        EventKind::SpawnRefused,
        Some(agent),
        serde_json::json!({"reason": Reason::SpawnRejectBudget, "verb": "spawn", "scope": b.scope}),
        now,
    );
    Err(crate::core::error::Error::Refused(Refusal::new(
        Reason::SpawnRejectBudget,
        &format!(
            "the {} budget of task '{}' ({}) is {}% used; nothing new is started. Raise `budget{}:` in task.md, or (a human) run `task spawn {} {agent} --handoff FILE --over-budget`",
            b.scope,
            task.name,
            b.limit,
            b.percent.unwrap_or(100),
            if b.scope == "task" {
                String::new()
            } else {
                format!("-{}", b.scope)
            },
            task.name
        ),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &str, out: u64) -> String {
        format!(
            "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"m\",\"usage\":{{\"input_tokens\":10,\"output_tokens\":{out}}}}}}}\n"
        )
    }

    #[test]
    fn every_session_of_an_agent_counts_and_unreadable_agents_are_unknown() {
        let d = tempfile::tempdir().unwrap();
        let (projects, cwd) = (d.path().join("projects"), Path::new("/work/proj"));
        let dir = projects.join("-work-proj");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("s-old.jsonl"), answer("a", 1)).unwrap();
        std::fs::write(dir.join("s-new.jsonl"), answer("b", 2) + &answer("c", 3)).unwrap();
        let mut st = PmState::default();
        st.agents.insert(
            "dev".into(),
            AgentState {
                runtime: Some("claude".into()),
                session_id: Some("s-new".into()),
                past_sessions: vec!["s-old".into()],
                ..Default::default()
            },
        );
        st.agents.insert(
            "review".into(),
            AgentState {
                runtime: Some("kiro".into()),
                session_id: Some("s-old".into()),
                ..Default::default()
            },
        );
        let mut file = UsageFile::default();
        assert!(read_transcripts(&st, cwd, &projects, &mut file).0);
        assert!(
            !read_transcripts(&st, cwd, &projects, &mut file).0,
            "nothing new the second time"
        );
        let prices = Prices::default();
        let dev = agent_cost("dev", &st.agents["dev"], &file, &prices);
        assert_eq!((dev.answers, dev.tokens.output, dev.total_tokens), (3, 6, 36));
        assert_eq!(dev.usd, None, "no price for model m");
        let review = agent_cost("review", &st.agents["review"], &file, &prices);
        assert!(!review.known && review.total_tokens == 0, "{review:?}");
        assert!(review.unknown_why.unwrap().contains("kiro"));
        assert!(
            !file.agents.contains_key("review"),
            "a Kiro agent's files are never read"
        );
    }
}
