//! progress.md on disk: gather what the scribe renders (the latest handoff of each agent,
//! the artifacts, what the ledger has not seen) and write it atomically. The rendering
//! itself is [`crate::core::scribe`]'s, pure.

use chrono::{DateTime, Utc};

use crate::core::error::Result;
use crate::core::handoff::{HandoffName, Loaded};
use crate::core::model::PmState;
use crate::core::scribe::{Artifact, Input, render};
use crate::store::handoffs::{self, Listing};
use crate::store::task::{self, Task};
use std::sync::Arc;

/// The latest readable handoff of each agent, in timeline order. Reads one file per agent
/// (falling back to an older one when the newest breaks the file rules).
pub fn latest_by_agent(dir: &std::path::Path, names: &[HandoffName]) -> Result<Vec<Loaded>> {
    latest_by_agent_reusing(dir, names, &[], None)
}

/// [`latest_by_agent`], taking a handoff from `parsed` (already read, e.g. a check-in's new
/// ones) rather than reading its file again; `agents`, when known, is how many agents
/// `names` holds (a [`Listing`]'s count), and the search ends once each has its handoff
/// rather than walking the task's whole history back at every check-in.
pub fn latest_by_agent_reusing(
    dir: &std::path::Path,
    names: &[HandoffName],
    parsed: &[Loaded],
    agents: Option<usize>,
) -> Result<Vec<Loaded>> {
    let mut done: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for n in names.iter().rev() {
        if agents.is_some_and(|a| done.len() >= a) {
            break;
        }
        if done.contains(&n.agent.as_str()) {
            continue;
        }
        if let Some(l) = parsed.iter().find(|l| l.name == *n) {
            done.push(&n.agent);
            out.push(l.clone());
        } else if let Ok(l) = handoffs::load(dir, n)? {
            done.push(&n.agent);
            out.push(l);
        }
    }
    out.reverse();
    Ok(out)
}

/// Handoffs not yet in the ledger (read-only: the ledger is not updated).
pub fn unprocessed(task: &Task, state: &PmState, listing: &Arc<Listing>) -> Result<Vec<Loaded>> {
    let found = crate::store::handoffs::scan_listing(&state.ledger, &task.handoffs(), listing)?;
    Ok(found.cands.iter().map(|c| c.loaded.clone()).collect())
}

/// Regenerate progress.md with `recent` as the activity since the last check-in; returns the text.
pub fn write_progress(
    task: &Task,
    state: &PmState,
    names: &[HandoffName],
    recent: &[Loaded],
    escalations: &[String],
    now: DateTime<Utc>,
) -> Result<String> {
    let latest = latest_by_agent(&task.handoffs(), names)?;
    let artifacts = task::list_artifacts(task)?;
    write_gathered(task, state, &latest, &artifacts, recent, escalations, None, now)
}

/// The `## Cost` section of a progress.md (up to the next `## ` heading), as it was
/// rendered into it. Pure.
pub fn cost_section(text: &str) -> Option<String> {
    let start = text
        .find("\n## Cost\n")
        .map(|i| i + 1)
        .or(text.starts_with("## Cost\n").then_some(0))?;
    let rest = &text[start..];
    let end = rest[1..].find("\n## ").map_or(rest.len(), |i| i + 2);
    Some(format!("{}\n", rest[..end].trim_end()))
}

/// Write progress.md from what was already gathered (a check-in's snapshot); returns the
/// text. `cost` is the `## Cost` section; without one (usage not gathered, or a rewrite
/// between check-ins) the section progress.md already has is kept.
#[allow(clippy::too_many_arguments)]
pub fn write_gathered(
    task: &Task,
    state: &PmState,
    latest: &[Loaded],
    artifacts: &[Artifact],
    recent: &[Loaded],
    escalations: &[String],
    cost: Option<&str>,
    now: DateTime<Utc>,
) -> Result<String> {
    let cost = match cost {
        Some(c) => Some(c.to_string()),
        None => std::fs::read_to_string(task.progress_path())
            .ok()
            .and_then(|t| cost_section(&t)),
    };
    let text = render(&Input {
        task: task.name.as_str(),
        now,
        last_checkin: state.last_checkin,
        phase: state.phase,
        recent,
        latest,
        artifacts,
        escalations,
        cost: cost.as_deref(),
    });
    // Rebuilt from the state at every check-in: no fsync, and no new inode (the spare).
    crate::store::spare::replace(&task.progress_path(), text.as_bytes())?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::handoff;

    #[test]
    fn the_cost_section_is_read_back_as_it_was_rendered() {
        let block = "## Cost\n- Task: 1.2k tokens, $0.01\n- pm: 1.2k tokens\n";
        let text = format!("# Progress\n\n## Needs a Human\nNone\n\n{block}\n## Artifacts Generated\nNone yet.\n");
        assert_eq!(cost_section(&text).as_deref(), Some(block));
        assert_eq!(
            cost_section(&format!("# P\n\n{block}")).as_deref(),
            Some(block),
            "last section"
        );
        assert_eq!(cost_section("# P\n\n## Artifacts Generated\nNone yet.\n"), None);
    }

    #[test]
    fn a_handoff_already_parsed_is_not_read_again() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("dev-20261123-085800.md"),
            "# Handoff: dev\n**Status:** IN_PROGRESS\n",
        )
        .unwrap();
        let (names, _) = handoffs::list(d.path()).unwrap();
        // A parse the caller already holds (its file need not be there any more).
        let parsed = Loaded::from_text("review-20261123-085900.md", "# Handoff: review\n**Status:** COMPLETE\n");
        let mut all = names.clone();
        all.push(parsed.name.clone());
        let latest = latest_by_agent_reusing(d.path(), &all, std::slice::from_ref(&parsed), None).unwrap();
        let files: Vec<&str> = latest.iter().map(|l| l.file.as_str()).collect();
        assert_eq!(files, ["dev-20261123-085800.md", "review-20261123-085900.md"]);
        assert_eq!(latest[1].handoff.status, handoff::Status::Complete);
        // Without it, the missing file is simply not there.
        assert_eq!(latest_by_agent(d.path(), &all).unwrap().len(), 1);
    }

    #[test]
    fn the_search_ends_once_every_agent_of_the_listing_has_its_handoff() {
        let d = tempfile::tempdir().unwrap();
        for (file, agent) in [
            ("dev-20261123-085800.md", "dev"),
            ("qa-20261123-085830.md", "qa"),
            ("dev-20261123-085900.md", "dev"),
        ] {
            std::fs::write(
                d.path().join(file),
                format!("# Handoff: {agent}\n**Status:** IN_PROGRESS\n"),
            )
            .unwrap();
        }
        let listing = handoffs::listing(d.path()).unwrap();
        assert_eq!(listing.agents.len(), 2, "dev and qa");
        let files = |v: Vec<Loaded>| v.into_iter().map(|l| l.file).collect::<Vec<_>>();
        let all = ["qa-20261123-085830.md", "dev-20261123-085900.md"];
        assert_eq!(
            files(latest_by_agent_reusing(d.path(), &listing.names, &[], None).unwrap()),
            all
        );
        assert_eq!(
            files(latest_by_agent_reusing(d.path(), &listing.names, &[], Some(listing.agents.len())).unwrap()),
            all
        );
        assert_eq!(
            files(latest_by_agent_reusing(d.path(), &listing.names, &[], Some(1)).unwrap()),
            ["dev-20261123-085900.md"],
            "the search stops at the count it is given"
        );
    }
}
