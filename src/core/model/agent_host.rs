//! Where an agent runs, as a value. pm_state.json keeps the string forms (`local`, or
//! the remote `cwd:` spec the agent was started with, e.g. `alice@build:/srv/dds`), so
//! files written by any build still load; everything that needs the host reads it from
//! here instead of re-parsing the string.

use serde::{Deserialize, Serialize};

use super::taskmd::{CwdSpec, RemoteSpec, parse_cwd};

/// An agent's host in pm_state.json.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum AgentHost {
    /// This machine's tmux server.
    #[default]
    Local,
    /// A remote host, reached over ssh.
    Remote(RemoteSpec),
    /// A value this build cannot read (kept verbatim; treated as nowhere reachable).
    Unreadable(String),
}

impl AgentHost {
    /// The remote host, when the agent runs on one.
    pub fn remote(&self) -> Option<&RemoteSpec> {
        match self {
            AgentHost::Remote(r) => Some(r),
            _ => None,
        }
    }

    /// Whether the agent runs on this machine.
    pub fn is_local(&self) -> bool {
        matches!(self, AgentHost::Local)
    }
}

impl From<String> for AgentHost {
    fn from(s: String) -> Self {
        match s.as_str() {
            "" | "local" => AgentHost::Local,
            v => match parse_cwd(v) {
                Ok(CwdSpec::Remote(r)) => AgentHost::Remote(r),
                _ => AgentHost::Unreadable(s),
            },
        }
    }
}

impl From<AgentHost> for String {
    fn from(h: AgentHost) -> Self {
        h.to_string()
    }
}

impl std::fmt::Display for AgentHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AgentHost::Local => f.write_str("local"),
            AgentHost::Remote(r) => write!(f, "{r}"),
            AgentHost::Unreadable(s) => f.write_str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_forms_round_trip() {
        for s in [
            "local",
            "alice@build-host:/srv/dds",
            "build:2222:/srv/x",
            "aoremote:/tmp/remote dev's work",
        ] {
            let h = AgentHost::from(s.to_string());
            assert_eq!(serde_json::to_value(&h).unwrap(), serde_json::json!(s), "{h:?}");
        }
        assert_eq!(
            AgentHost::from(String::new()),
            AgentHost::Local,
            "an old file's empty field"
        );
        let r = AgentHost::from("alice@build-host:/srv/dds".to_string());
        assert_eq!(
            r.remote().map(|r| r.destination()),
            Some("alice@build-host".to_string())
        );
        assert!(!r.is_local());
        let odd = AgentHost::from("/not/a/host".to_string());
        assert!(matches!(odd, AgentHost::Unreadable(_)) && odd.remote().is_none() && !odd.is_local());
        assert_eq!(odd.to_string(), "/not/a/host", "kept verbatim");
    }
}
