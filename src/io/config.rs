//! config.toml, the user's settings file (`$XDG_CONFIG_HOME/agent-orchestrator/config.toml`):
//! where it is and its text. Each table belongs to the module that uses it — `[runtimes.*]`
//! to `io::runtime`, `[prices]` to `io::prices`, `[web]`, `[webhook]` and `[hosts]` to
//! `app::settings`, `notify` to `app::escalation` — and every one of them finds the file and
//! reads it here, so a missing file, an unreadable one and one that is not TOML are told
//! the same way wherever they are met.

use std::path::PathBuf;

use crate::core::error::{Error, Result};

/// Where config.toml is (`None` without a config folder: no HOME, no XDG_CONFIG_HOME).
pub fn path() -> Option<PathBuf> {
    dirs::config_dir().map(|d| d.join("agent-orchestrator").join("config.toml"))
}

/// config.toml's path and text; `None` when there is no file.
pub fn text() -> Result<Option<(PathBuf, String)>> {
    let Some(p) = path() else {
        return Ok(None);
    };
    match std::fs::read_to_string(&p) {
        Ok(text) => Ok(Some((p, text))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", &p, e)),
    }
}

/// config.toml parsed as TOML, with its path; `None` when there is no file. An error
/// names the file and the place in it.
pub fn value() -> Result<Option<(PathBuf, toml::Value)>> {
    let Some((p, text)) = text()? else {
        return Ok(None);
    };
    let v = toml::from_str(&text).map_err(|e| not_toml(&p, &e))?;
    Ok(Some((p, v)))
}

/// The error for a file that is not TOML: its path and the parser's words.
pub fn not_toml(path: &std::path::Path, e: &toml::de::Error) -> Error {
    Error::BadInput(format!("{}: {}", path.display(), e.to_string().trim()))
}
