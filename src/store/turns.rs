//! The last thing each agent's client said about its turn ([`crate::core::turn`]), one
//! file per agent in the task folder (`turns/<agent>.json`), written by the agent's hook
//! and read by whoever looks at the agents. Replaced by a rename, without fsync: a report
//! lost to a power cut is one the screen still shows, and the next hook writes another.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::core::error::Result;
use crate::core::turn::Report;
use crate::store::fsutil;
use crate::store::task::Task;

fn dir(task: &Task) -> PathBuf {
    task.dir().join("turns")
}

/// Keep `r` as `agent`'s last report, unless the one kept is newer (the hooks run in the
/// background, and two of one short turn may finish out of order). Returns whether kept.
pub fn write(task: &Task, agent: &str, r: &Report) -> Result<bool> {
    crate::core::names::validate("agent", agent)?;
    fsutil::create_dir_all(&dir(task))?;
    let path = dir(task).join(format!("{agent}.json"));
    let kept = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice::<Report>(&b).ok());
    if kept.is_some_and(|k| k.at > r.at) {
        return Ok(false);
    }
    fsutil::replace(&path, &serde_json::to_vec_pretty(r).expect("a report serialises"))?;
    Ok(true)
}

/// Every agent's last report; a file that cannot be read is left out (and logged).
pub fn all(task: &Task) -> BTreeMap<String, Report> {
    let mut out = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir(task)) else {
        return out;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(agent) = name.strip_suffix(".json") else {
            continue;
        };
        match std::fs::read(e.path()).map(|b| serde_json::from_slice::<Report>(&b)) {
            Ok(Ok(r)) => {
                out.insert(agent.to_string(), r);
            }
            Ok(Err(err)) => tracing::warn!(path = %e.path().display(), error = %err, "unreadable turn report; ignored"),
            Err(err) => tracing::warn!(path = %e.path().display(), error = %err, "unreadable turn report; ignored"),
        }
    }
    out
}
