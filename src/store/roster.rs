//! Finding a roster: built in, or the user's own in the config folder; and the one a
//! task chose in task.md.

use std::borrow::Cow;
use std::path::PathBuf;

use crate::core::error::{Error, Result};
use crate::core::protocol::roster::{BUILTIN, Roster};
use crate::store::task::Task;

/// Where custom rosters live.
pub fn custom_dir() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("agent-orchestrator").join("rosters"))
}

/// A roster by name: built in, else `<config>/agent-orchestrator/rosters/<name>.toml`.
pub fn load(name: &str) -> Result<Roster> {
    crate::core::names::validate("roster", name)?;
    if let Some(r) = Roster::builtin(name) {
        return Ok(r);
    }
    let Some(path) = custom_dir().map(|d| d.join(format!("{name}.toml"))) else {
        return Err(Error::BadInput(format!(
            "unknown roster '{name}' and no config folder to look for it in"
        )));
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::BadInput(format!(
                "unknown roster '{name}': the built-in ones are {}, and {} does not exist; fix `roster:` in task.md or create that file",
                BUILTIN.map(|(n, _)| n).join(", "),
                path.display()
            )));
        }
        Err(e) => return Err(Error::io("read roster", &path, e)),
    };
    let r = Roster::parse(&text, &path.display().to_string())?;
    if r.name != name {
        return Err(Error::BadInput(format!(
            "roster {} calls itself '{}'; its name must match the file name '{name}'",
            path.display(),
            r.name
        )));
    }
    Ok(r)
}

/// The roster a task chose in task.md (`roster:`), else the default one.
pub fn for_task(task: &Task) -> Result<Cow<'static, Roster>> {
    match task.spec().ok().and_then(|s| s.setting("roster").map(str::to_string)) {
        Some(name) => match Roster::builtin_shared(&name) {
            Some(r) => Ok(Cow::Borrowed(r)),
            None => load(&name).map(Cow::Owned),
        },
        None => Ok(Cow::Borrowed(
            Roster::builtin_shared("default").expect("default roster"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_unsafe_names_are_refused() {
        assert!(load("no-such-roster-here").is_err());
        assert!(load("../etc").is_err());
    }
}
