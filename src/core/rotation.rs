//! PM rotation: a PM conversation only grows (every check-in is appended to it), so when
//! its context passes `rotate_at:` — or every `rotate_every:` check-ins — the supervisor
//! replaces it, at a quiet moment, by a fresh conversation whose first prompt is the PM
//! preamble followed by a resume block built from files only (task.md's phase, the
//! decisions log, the lanes, each agent's last handoff, what waits on the PM or a human,
//! progress.md). What the protocol keeps on disk is what the new PM knows, so nothing the
//! old one knew only in its head is relied on: that is what `decisions.md` is for.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Default `rotate_at:`: the share of the model's context window past which the PM is
/// replaced. Well before the client's own compaction (near the window's end), which loses
/// detail the supervisor never sees.
pub const ROTATE_AT: u64 = 60;

/// The resume block's template (after the PM preamble).
pub const RESUME_TEMPLATE: &str = include_str!("../../templates/pm-resume.md");

/// Each part of the resume block is cut to this many characters (its end kept: the latest
/// decisions and progress matter most), so the first prompt stays a prompt.
pub const PART_MAX: usize = 6000;

/// task.md's rotation settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Rotate past this percentage of the context window (`rotate_at: 60%`); None: `off`.
    pub at_percent: Option<u64>,
    /// Rotate after this many check-ins of one conversation (`rotate_every: 20`).
    pub every: Option<u32>,
}

impl Policy {
    /// From task.md's settings (`get`), checked: a bad value is an error naming it.
    pub fn parse(get: impl Fn(&str) -> Option<String>) -> Result<Policy, String> {
        let at_percent = match get("rotate_at").as_deref().map(str::trim) {
            None => Some(ROTATE_AT),
            Some("off") => None,
            Some(v) => {
                let n: u64 = v
                    .trim_end_matches('%')
                    .trim()
                    .parse()
                    .map_err(|_| format!("rotate_at: {v:?} is not a percentage (e.g. 60%) or off"))?;
                if !(10..=95).contains(&n) {
                    return Err(format!("rotate_at: {v:?} is outside 10%-95%"));
                }
                Some(n)
            }
        };
        let every = match get("rotate_every").as_deref().map(str::trim) {
            None | Some("off") => None,
            Some(v) => Some(
                v.parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("rotate_every: {v:?} is not a number of check-ins (1 or more) or off"))?,
            ),
        };
        Ok(Policy { at_percent, every })
    }
}

/// Why a rotation is due.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "trigger", rename_all = "snake_case")]
pub enum Why {
    /// The context passed `rotate_at:`.
    Context { percent: u64, tokens: u64 },
    /// `rotate_every:` check-ins were delivered to this conversation.
    Every { checkins: u32 },
    /// `task rotate`.
    Asked { by: String },
}

impl Why {
    /// As the resume block and the log say it.
    pub fn describe(&self) -> String {
        match self {
            Why::Context { percent, tokens } => format!("its context was {percent}% full, {tokens} tokens"),
            Why::Every { checkins } => format!("it had {checkins} check-ins, the task's rotate_every"),
            Why::Asked { by } => format!("{by} asked for it with `task rotate`"),
        }
    }
}

/// Whether the PM's conversation is due for a rotation. Pure. `percent`/`tokens`: its
/// current conversation's fill, when known; `checkins`: those delivered to it.
pub fn due(p: &Policy, fill: Option<(u64, u64)>, checkins: u32) -> Option<Why> {
    if let (Some(at), Some((percent, tokens))) = (p.at_percent, fill) {
        if percent >= at {
            return Some(Why::Context { percent, tokens });
        }
    }
    match p.every {
        Some(n) if checkins >= n => Some(Why::Every { checkins }),
        _ => None,
    }
}

/// The end of `text`, cut at a line start to at most `max` characters, saying so.
pub fn tail(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(none yet)".into();
    }
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let skip: usize = text.chars().take(n - max).map(char::len_utf8).sum();
    let rest = &text[skip..];
    let rest = rest.find('\n').map_or(rest, |i| &rest[i + 1..]);
    format!("(earlier part left out; the whole file is on disk)\n{rest}")
}

/// What the resume block is made of, each already rendered as lines.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    pub task_started: String,
    pub why: String,
    pub phase: String,
    pub decisions_path: String,
    pub decisions: String,
    pub lanes: Vec<String>,
    pub last_handoffs: Vec<String>,
    pub waiting: Vec<String>,
    pub progress_path: String,
    pub progress: String,
}

fn lines(v: &[String]) -> String {
    if v.is_empty() {
        "- none".into()
    } else {
        v.iter().map(|l| format!("- {l}")).collect::<Vec<_>>().join("\n")
    }
}

/// The resume block. Pure.
pub fn resume_block(p: &Parts) -> String {
    crate::core::preamble::fill(
        RESUME_TEMPLATE,
        &[
            ("task_started", &p.task_started),
            ("why", &p.why),
            ("phase", &p.phase),
            ("decisions_path", &p.decisions_path),
            ("decisions", &tail(&p.decisions, PART_MAX)),
            ("lanes", &lines(&p.lanes)),
            ("last_handoffs", &lines(&p.last_handoffs)),
            ("waiting", &lines(&p.waiting)),
            ("progress_path", &p.progress_path),
            ("progress", &tail(&p.progress, PART_MAX)),
        ],
    )
}

/// The PM preamble with its opening instruction ("Begin now: … the first handoff")
/// replaced by the resume block. Pure.
pub fn resume_preamble(pm_preamble: &str, block: &str) -> String {
    let body = match pm_preamble.rfind("\nBegin now:") {
        Some(i) => &pm_preamble[..i],
        None => pm_preamble,
    };
    format!("{}\n{}", body.trim_end(), block)
}

/// What a rotation did, for the event, the log and `task rotate`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Rotated {
    pub task: String,
    /// The conversation replaced.
    pub old_session: Option<String>,
    /// The new one.
    pub new_session: Option<String>,
    #[serde(flatten)]
    pub why: Why,
    /// The size of the new PM's first prompt, in bytes.
    pub preamble_bytes: usize,
    /// The tmux session the new PM runs in.
    pub session: String,
}

/// The message that asks a spoke for a checkpoint handoff.
pub const CHECKPOINT_TEMPLATE: &str = include_str!("../../templates/checkpoint.md");

/// How long a spoke asked for a checkpoint has to write it (task.md `checkpoint_grace:`)
/// before it is restarted from what it last said.
pub const CHECKPOINT_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// The checkpoint request for `agent` of `task`. Pure.
pub fn checkpoint_message(task: &str, agent: &str, task_bin: &str, percent: u64) -> String {
    crate::core::preamble::fill(
        CHECKPOINT_TEMPLATE,
        &[
            ("task", task),
            ("agent", agent),
            ("task_bin", task_bin),
            ("percent", &percent.to_string()),
        ],
    )
    .trim_end()
    .to_string()
}

/// Where a spoke whose context filled up stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpokeStep {
    /// Nothing to do.
    Nothing,
    /// Its fill passed `rotate_at:`: ask it for a checkpoint.
    Ask { percent: u64 },
    /// It wrote its checkpoint (this handoff): continue in a fresh session from it.
    FromCheckpoint { file: String },
    /// The grace passed with no checkpoint: continue from what it last said.
    FromTranscript,
    /// It finished (or was stopped) since it was asked: forget the request.
    Forget,
}

/// What a spoke's rotation does next. Pure. `asked`: when it was asked for a checkpoint;
/// `holds_lane`: it still works on its PM handoff; `checkpoint`: its newest handoff if
/// IN_PROGRESS and written after it was asked.
pub fn spoke_step(
    at_percent: Option<u64>,
    fill: Option<u64>,
    asked: Option<DateTime<Utc>>,
    holds_lane: bool,
    checkpoint: Option<&str>,
    grace: std::time::Duration,
    now: DateTime<Utc>,
) -> SpokeStep {
    match asked {
        None => match (at_percent, fill) {
            (Some(at), Some(p)) if holds_lane && p >= at => SpokeStep::Ask { percent: p },
            _ => SpokeStep::Nothing,
        },
        Some(_) if !holds_lane => SpokeStep::Forget,
        Some(_) if checkpoint.is_some() => SpokeStep::FromCheckpoint {
            file: checkpoint.unwrap_or_default().to_string(),
        },
        Some(t) if now - t >= chrono::Duration::from_std(grace).unwrap_or_default() => SpokeStep::FromTranscript,
        Some(_) => SpokeStep::Nothing,
    }
}

/// What a spoke last said, from its Claude Code transcript (JSONL): the text of its last
/// assistant messages, oldest first, at most `max` characters. Pure.
pub fn assistant_tail(jsonl: &str, max: usize) -> String {
    let mut said: Vec<String> = Vec::new();
    for line in jsonl.lines().rev() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["type"] != "assistant" {
            continue;
        }
        let text: Vec<&str> = v["message"]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == "text")
            .filter_map(|c| c["text"].as_str())
            .collect();
        if text.is_empty() {
            continue;
        }
        said.push(text.join("\n"));
        if said.iter().map(|s| s.chars().count()).sum::<usize>() >= max {
            break;
        }
    }
    said.reverse();
    tail(&said.join("\n\n"), max)
}

/// What a fresh session of a spoke continues from, after its original instructions.
pub fn continue_block(checkpoint: Option<(&str, &str)>, said: Option<&str>) -> String {
    match (checkpoint, said) {
        (Some((file, body)), _) => format!(
            "## Continue from your checkpoint\nYour previous session filled its context and wrote this checkpoint ({file}). Continue from it: do not redo what it says is done.\n\n{}\n",
            body.trim()
        ),
        (None, Some(said)) => format!(
            "## Continue where your previous session stopped\nYour previous session filled its context before writing a checkpoint. The last things it said:\n\n{}\n\nCheck the files before redoing anything.\n",
            said.trim()
        ),
        (None, None) => "## Continue where your previous session stopped\nYour previous session filled its context before writing a checkpoint. Check the files for what is done before redoing anything.\n".into(),
    }
}

/// One line for an agent's lane: who holds it since when, and what is queued.
pub fn lane_line(agent: &str, holder: Option<(&DateTime<Utc>, &str)>, queued: Option<&str>) -> Option<String> {
    let mut s = match holder {
        Some((since, handoff)) => format!(
            "{agent}: running since {} on {handoff}",
            crate::core::clock::local_time(*since)
        ),
        None if queued.is_some() => format!("{agent}: not running"),
        None => return None,
    };
    if let Some(q) = queued {
        s.push_str(&format!("; a spawn is queued with {q}"));
    }
    Some(s)
}

#[cfg(test)]
mod tests;
