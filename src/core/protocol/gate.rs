//! The spawn gate: only a hub (the PM) or a human may start or message agents.
//!
//! Seed 002 lists a gate that was written into prompts and never enforced; here
//! `task spawn` and `task send` check who is calling before anything happens. A
//! caller is known by what its pane was started with (TASK_AGENT / TASK_ROLE)
//! and, should a spoke clear those, by the tmux pane it runs in ($TMUX and
//! $TMUX_PANE against the panes the supervisor recorded).

use super::roster::Roster;
use crate::core::model::PmState;

pub use super::lane::Reason;

/// What the caller asks the gate for: the verbs only a hub (or a human) may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// `task spawn` (and `task prepare`, which shows what a spawn would use).
    Spawn,
    /// `task send`.
    Send,
    /// `task rotate` (the PM's conversation replaced).
    Rotate,
    /// `task stop` (every session of the task ended, supervision too).
    Stop,
    /// `task shutdown` (the daemon stops supervising every task).
    Shutdown,
}

impl Verb {
    /// The command's word, as in `task <verb>`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Spawn => "spawn",
            Verb::Send => "send",
            Verb::Rotate => "rotate",
            Verb::Stop => "stop",
            Verb::Shutdown => "shutdown",
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is calling, as the environment says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    /// TASK_AGENT of the calling pane, if any.
    pub agent: Option<String>,
    /// TASK_ROLE of the calling pane, if any.
    pub role: Option<String>,
    /// $TMUX_PANE when $TMUX names the supervisor's tmux server.
    pub pane: Option<String>,
}

impl Caller {
    /// Read from environment variables (`env`, this process's in use: kept a parameter so
    /// the rule is pure); `server_socket` is the supervisor's tmux socket path.
    pub fn from_vars(env: impl Fn(&str) -> Option<String>, server_socket: &std::path::Path) -> Caller {
        let var = |k: &str| env(k).filter(|v| !v.is_empty());
        // $TMUX is "<socket path>,<server pid>,<session index>".
        let on_our_server = var("TMUX")
            .and_then(|t| t.split(',').next().map(std::path::PathBuf::from))
            .is_some_and(|p| p == server_socket);
        Caller {
            agent: var("TASK_AGENT"),
            role: var("TASK_ROLE"),
            pane: var("TMUX_PANE").filter(|_| on_our_server),
        }
    }
}

/// The agent whose recorded pane the caller runs in, if any.
fn pane_owner<'a>(caller: &Caller, state: &'a PmState) -> Option<(&'a String, &'a crate::core::model::AgentState)> {
    let pane = caller.pane.as_ref()?;
    state
        .agents
        .iter()
        .find(|(_, a)| a.pane.as_ref() == Some(pane) && a.host.is_local())
}

/// Whether the caller is one of the task's agents (by the environment it started with, or
/// by the pane it runs in). Going over a used-up budget is a human's decision: an agent's
/// `--over-budget` is not one.
pub fn is_agent(caller: &Caller, state: &PmState) -> bool {
    caller.agent.is_some() || caller.role.is_some() || pane_owner(caller, state).is_some()
}

/// Decide whether `caller` may spawn or message agents of a task. Pure.
/// Who may is the roster's business (hubs, and spokes with its exception);
/// an agent the roster does not know counts as a spoke. Returns the reason and,
/// for a refusal, the advice to print.
pub fn decide(caller: &Caller, state: &PmState, roster: &Roster, verb: Verb) -> (Reason, Option<String>) {
    let by_env = match (caller.agent.as_deref(), caller.role.as_deref()) {
        (Some(a), _) if !roster.may_spawn(a) => Some(a.to_string()),
        (None, Some("spoke")) => Some("a spoke".to_string()),
        _ => None,
    };
    let by_pane = pane_owner(caller, state)
        .filter(|(n, _)| !roster.may_spawn(n))
        .map(|(n, _)| n.clone());
    match by_env.or(by_pane) {
        None => (Reason::SpawnOk, None),
        Some(spoke) => (
            Reason::SpawnRejectSpokeCaller,
            Some(format!(
                "{}: `task {verb}` is for the hub; {spoke} is a spoke. Finish with a handoff that names who should act next (`task handoff … --next <agent>`) and the PM will decide",
                Reason::SpawnRejectSpokeCaller.code()
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with(agent: &str, role: &str, pane: &str) -> PmState {
        let mut st = PmState::default();
        let a = st.agents.entry(agent.into()).or_default();
        a.role = role.into();
        a.pane = Some(pane.into());
        a.host = crate::core::model::AgentHost::Local;
        st
    }

    #[test]
    fn hubs_and_humans_pass_spokes_are_refused() {
        let st = state_with("dev", "spoke", "%3");
        let roster = Roster::builtin("default").unwrap();
        let c = |agent: Option<&str>, role: Option<&str>, pane: Option<&str>| Caller {
            agent: agent.map(str::to_string),
            role: role.map(str::to_string),
            pane: pane.map(str::to_string),
        };
        assert_eq!(
            decide(&c(None, None, None), &st, &roster, Verb::Spawn).0,
            Reason::SpawnOk,
            "a human"
        );
        assert_eq!(
            decide(&c(Some("pm"), Some("hub"), None), &st, &roster, Verb::Spawn).0,
            Reason::SpawnOk
        );
        assert_eq!(
            decide(&c(Some("pm"), None, None), &st, &roster, Verb::Spawn).0,
            Reason::SpawnOk
        );
        let (r, advice) = decide(&c(Some("dev"), Some("spoke"), None), &st, &roster, Verb::Spawn);
        assert_eq!(r, Reason::SpawnRejectSpokeCaller);
        assert!(advice.unwrap().contains("--next"));
        assert_eq!(
            decide(&c(Some("dev"), None, None), &st, &roster, Verb::Send).0,
            Reason::SpawnRejectSpokeCaller
        );
        // A spoke that cleared its environment is still known by its pane.
        assert_eq!(
            decide(&c(None, None, Some("%3")), &st, &roster, Verb::Spawn).0,
            Reason::SpawnRejectSpokeCaller
        );
        assert_eq!(
            decide(&c(None, None, Some("%4")), &st, &roster, Verb::Spawn).0,
            Reason::SpawnOk
        );
        // Stopping the whole task is the hub's or a human's call too.
        assert_eq!(
            decide(&c(Some("dev"), None, None), &st, &roster, Verb::Stop).0,
            Reason::SpawnRejectSpokeCaller
        );
        assert_eq!(
            decide(&c(Some("pm"), None, None), &st, &roster, Verb::Stop).0,
            Reason::SpawnOk
        );
    }

    #[test]
    fn only_a_caller_that_is_no_agent_counts_as_a_human() {
        let st = state_with("dev", "spoke", "%3");
        let c = |agent: Option<&str>, role: Option<&str>, pane: Option<&str>| Caller {
            agent: agent.map(str::to_string),
            role: role.map(str::to_string),
            pane: pane.map(str::to_string),
        };
        assert!(!is_agent(&c(None, None, None), &st));
        assert!(
            !is_agent(&c(None, None, Some("%9")), &st),
            "a human's own pane on the server"
        );
        assert!(is_agent(&c(Some("pm"), None, None), &st), "the PM");
        assert!(is_agent(&c(None, Some("hub"), None), &st));
        assert!(
            is_agent(&c(None, None, Some("%3")), &st),
            "a spoke that cleared its environment"
        );
    }
}

#[cfg(test)]
mod roster_tests {
    use super::*;

    #[test]
    fn the_roster_decides_who_may_spawn() {
        let st = PmState::default();
        let r = Roster::builtin("hub-and-spoke").unwrap();
        let c = |agent: &str| Caller {
            agent: Some(agent.into()),
            role: None,
            pane: None,
        };
        assert_eq!(
            decide(&c("analyst"), &st, &r, Verb::Spawn).0,
            Reason::SpawnOk,
            "a second hub"
        );
        assert_eq!(
            decide(&c("revisionist"), &st, &r, Verb::Spawn).0,
            Reason::SpawnOk,
            "the exception"
        );
        assert_eq!(
            decide(&c("worker"), &st, &r, Verb::Spawn).0,
            Reason::SpawnRejectSpokeCaller
        );
    }
}
