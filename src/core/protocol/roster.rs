//! Rosters: which agents a task has, which are hubs and which spokes, what phase
//! an instruction to each puts the task in, and the handoff table that says
//! whom each spoke may recommend next.
//!
//! The roster is data, not code, so a team can bring its own (docs/protocol.md#roles-and-rosters):
//! `default` and `hub-and-spoke` are built in, and any other is a
//! TOML file in `$XDG_CONFIG_HOME/agent-orchestrator/rosters/<name>.toml` (same
//! shape as `templates/rosters/*.toml`). task.md chooses with `roster: <name>`.
//! The supervisor's PM session always plays the roster's primary hub, so
//! recommendations naming that hub (e.g. "Coordinator") mean the PM.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::core::error::{Error, Result};
use crate::core::model::Phase;

/// The built-in rosters, embedded at build time.
pub const BUILTIN: [(&str, &str); 2] = [
    ("default", include_str!("../../../templates/rosters/default.toml")),
    (
        "hub-and-spoke",
        include_str!("../../../templates/rosters/hub-and-spoke.toml"),
    ),
];

/// What an agent may do in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// May start and message agents; receives the check-ins.
    Hub,
    /// Works, then recommends the next agent through a handoff.
    Spoke,
}

impl Role {
    /// As written in TASK_ROLE and pm_state.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Hub => "hub",
            Role::Spoke => "spoke",
        }
    }
}

/// One agent of a roster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Member {
    /// Hub or spoke.
    pub role: Role,
    /// The phase an instruction to this agent puts the task in.
    #[serde(default)]
    pub phase: Option<Phase>,
    /// One line for the PM's preamble.
    #[serde(default)]
    pub description: String,
    /// Whom it may recommend next (the hub and "none" are always allowed).
    #[serde(default)]
    pub next: Vec<String>,
    /// A handoff without `## Gates Honored` is flagged (docs/protocol.md#structured-results).
    #[serde(default)]
    pub requires_gates: bool,
    /// A spoke that may nevertheless spawn (the Revisionist exception; docs/protocol.md#roles-and-rosters).
    #[serde(default)]
    pub may_spawn: bool,
    /// Its own git worktree (`"worktree"`), a detached one (`"detached"`) or the shared
    /// folder (`"shared"`); unset: what task.md's `worktree:` says (docs/worktrees.md).
    #[serde(default)]
    pub isolation: Option<crate::core::worktree::Isolation>,
    /// It only reads the code (explore, review): when task.md turns worktrees on for every
    /// spoke, it gets a detached worktree at the task branch's head rather than a branch.
    #[serde(default)]
    pub read_only: bool,
    /// It must run on this machine (a test agent with the devices, say): never placed on
    /// a remote host, whatever task.md's `remote_agents:` or `hosts:` say.
    #[serde(default, alias = "local-only")]
    pub local_only: bool,
}

/// A roster, as loaded and checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Roster {
    /// Its name (what task.md's `roster:` says).
    pub name: String,
    /// One line for humans.
    #[serde(default)]
    pub description: String,
    /// The hub the supervisor's PM session plays.
    pub primary_hub: String,
    /// Agents by name.
    pub agents: BTreeMap<String, Member>,
}

/// Whether a recommendation follows the roster's handoff table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routing {
    /// Allowed (or nothing was recommended).
    Allowed,
    /// The table does not list it after this agent; carries what it does list.
    Disallowed {
        /// The agents the table allows after the source.
        allowed: Vec<String>,
    },
    /// Not an agent of this roster at all.
    Unknown,
}

/// The built-in rosters, parsed once per process (they never change): every check-in
/// asks for one.
static PARSED: std::sync::LazyLock<Vec<Roster>> = std::sync::LazyLock::new(|| {
    BUILTIN
        .iter()
        .map(|(n, text)| Roster::parse(text, &format!("built-in '{n}'")).expect("built-in rosters are valid"))
        .collect()
});

impl Roster {
    /// Parse and check a roster's TOML; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Roster> {
        let mut r: Roster = toml::from_str(text)
            .map_err(|e| Error::BadInput(format!("roster {origin} is not valid: {}", e.message())))?;
        let bad = |msg: String| Error::BadInput(format!("roster {origin}: {msg}"));
        crate::core::names::validate("roster", &r.name)?;
        r.primary_hub = r.primary_hub.to_ascii_lowercase();
        let mut agents = BTreeMap::new();
        for (name, mut m) in std::mem::take(&mut r.agents) {
            let name = name.to_ascii_lowercase();
            crate::core::names::validate("agent", &name)?;
            m.next = m.next.iter().map(|n| n.to_ascii_lowercase()).collect();
            agents.insert(name, m);
        }
        r.agents = agents;
        match r.agents.get(&r.primary_hub) {
            Some(m) if m.role == Role::Hub => {}
            Some(_) => return Err(bad(format!("primary_hub '{}' is not a hub", r.primary_hub))),
            None => return Err(bad(format!("primary_hub '{}' is not one of its agents", r.primary_hub))),
        }
        for (name, m) in &r.agents {
            for n in &m.next {
                if n != "none" && n != "pm" && !r.agents.contains_key(n) {
                    return Err(bad(format!(
                        "{name}'s next names '{n}', which is not one of its agents"
                    )));
                }
            }
        }
        Ok(r)
    }

    /// A built-in roster by name.
    pub fn builtin(name: &str) -> Option<Roster> {
        Roster::builtin_shared(name).cloned()
    }

    /// [`Roster::builtin`] without the copy: what a check-in reads every time.
    pub fn builtin_shared(name: &str) -> Option<&'static Roster> {
        let i = BUILTIN.iter().position(|(n, _)| *n == name)?;
        Some(&PARSED[i])
    }

    /// The name the supervisor uses: lower-case, the primary hub as "pm".
    pub fn canonical(&self, name: &str) -> String {
        let n = name.trim().to_ascii_lowercase();
        if n == self.primary_hub { "pm".into() } else { n }
    }

    /// The member behind a name (the PM is the primary hub).
    pub fn member(&self, agent: &str) -> Option<&Member> {
        let n = self.canonical(agent);
        let key = if n == "pm" {
            self.primary_hub.as_str()
        } else {
            n.as_str()
        };
        self.agents.get(key)
    }

    /// Hub or spoke; the PM is always a hub and an agent the roster does not know a spoke.
    pub fn role_of(&self, agent: &str) -> Role {
        if self.canonical(agent) == "pm" {
            return Role::Hub;
        }
        self.member(agent).map(|m| m.role).unwrap_or(Role::Spoke)
    }

    /// Whether the agent may start or message agents: hubs, and spokes with the exception.
    pub fn may_spawn(&self, agent: &str) -> bool {
        self.role_of(agent) == Role::Hub || self.member(agent).is_some_and(|m| m.may_spawn)
    }

    /// The phase an instruction to `agent` puts the task in.
    pub fn phase_for(&self, agent: &str) -> Option<Phase> {
        self.member(agent).and_then(|m| m.phase)
    }

    /// Whether a handoff from `agent` lacking `## Gates Honored` is to be flagged.
    pub fn requires_gates(&self, agent: &str) -> bool {
        self.member(agent).is_some_and(|m| m.requires_gates)
    }

    /// Check `from`'s recommendation against the handoff table. Hubs may recommend anyone.
    pub fn route(&self, from: &str, recommended: Option<&str>) -> Routing {
        let Some(rec) = recommended.map(|r| self.canonical(r)).filter(|r| !r.is_empty()) else {
            return Routing::Allowed;
        };
        if rec == "pm" || rec == "none" {
            return Routing::Allowed;
        }
        if self.member(&rec).is_none() {
            return Routing::Unknown;
        }
        match self.member(from) {
            Some(m) if m.role == Role::Spoke || !m.next.is_empty() => {
                if m.next.contains(&rec) {
                    Routing::Allowed
                } else {
                    Routing::Disallowed {
                        allowed: m.next.clone(),
                    }
                }
            }
            _ => Routing::Allowed,
        }
    }

    /// The roster as the PM's preamble shows it: hubs, spokes and the handoff table.
    pub fn describe(&self) -> String {
        let mut out = format!("Roster '{}': {}\n", self.name, self.description);
        for (name, m) in &self.agents {
            let shown = if *name == self.primary_hub {
                format!("{name} (you, the PM)")
            } else {
                name.clone()
            };
            let mut line = format!("- {shown}: {}", m.role.as_str());
            if m.may_spawn {
                line.push_str(" (may spawn)");
            }
            if !m.description.is_empty() {
                line.push_str(&format!(" — {}", m.description));
            }
            if m.role == Role::Spoke || !m.next.is_empty() {
                let next = if m.next.is_empty() {
                    "nobody (final)".to_string()
                } else {
                    m.next.join(", ")
                };
                line.push_str(&format!("; may recommend: {next}"));
            }
            out.push_str(&line);
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_parse_and_say_who_is_a_hub() {
        let d = Roster::builtin("default").unwrap();
        assert_eq!(d.role_of("pm"), Role::Hub);
        for s in ["explore", "plan", "architect", "dev", "test", "review", "scribe"] {
            assert_eq!(d.role_of(s), Role::Spoke, "{s}");
            assert!(!d.may_spawn(s));
        }
        assert_eq!(d.phase_for("dev"), Some(Phase::Developing));
        let s = Roster::builtin("hub-and-spoke").unwrap();
        for h in ["coordinator", "Analyst", "runner", "TDDDriver", "pm"] {
            assert_eq!(s.role_of(h), Role::Hub, "{h}");
        }
        for sp in [
            "executor",
            "reviewer",
            "tester",
            "archivist",
            "brainstorm",
            "researcher",
            "architect",
            "worker",
            "cognition",
            "revisionist",
        ] {
            assert_eq!(s.role_of(sp), Role::Spoke, "{sp}");
        }
        assert!(s.may_spawn("Revisionist"), "the Revisionist exception");
        assert!(!s.may_spawn("worker"));
        assert_eq!(s.canonical("Coordinator"), "pm");
    }

    #[test]
    fn the_handoff_table_routes() {
        let s = Roster::builtin("hub-and-spoke").unwrap();
        assert_eq!(s.route("executor", Some("Reviewer")), Routing::Allowed);
        assert_eq!(s.route("executor", Some("Coordinator")), Routing::Allowed);
        assert_eq!(s.route("executor", None), Routing::Allowed);
        assert_eq!(
            s.route("executor", Some("archivist")),
            Routing::Disallowed {
                allowed: vec!["reviewer".into(), "revisionist".into()]
            }
        );
        assert_eq!(s.route("executor", Some("nobody-here")), Routing::Unknown);
        assert_eq!(
            s.route("coordinator", Some("archivist")),
            Routing::Allowed,
            "the hub decides"
        );
        let d = Roster::builtin("default").unwrap();
        assert_eq!(d.route("dev", Some("review")), Routing::Allowed);
        assert!(matches!(d.route("dev", Some("scribe")), Routing::Disallowed { .. }));
        assert!(d.describe().contains("dev: spoke"));
    }

    #[test]
    fn bad_rosters_are_refused_with_the_reason() {
        let e = Roster::parse(
            "name = \"x\"\nprimary_hub = \"boss\"\n[agents.a]\nrole = \"spoke\"\n",
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("primary_hub 'boss'"), "{e}");
        let e = Roster::parse(
            "name = \"x\"\nprimary_hub = \"h\"\n[agents.h]\nrole = \"hub\"\n[agents.a]\nrole = \"spoke\"\nnext = [\"ghost\"]\n",
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("ghost"), "{e}");
        let e = Roster::parse("name = \"x\"\nprimary_hub = \"h\"\n[agents.h]\nrole = \"king\"\n", "t").unwrap_err();
        assert!(e.to_string().contains("roster t"), "{e}");
        let e = Roster::parse(
            "name = \"x\"\nprimary_hub = \"h\"\n[agents.h]\nrole = \"hub\"\n[agents.\"../x\"]\nrole = \"spoke\"\n",
            "t",
        )
        .unwrap_err();
        assert!(e.to_string().contains("agent"), "{e}");
    }
}
