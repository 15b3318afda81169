//! An agent's place in the team, as a value. pm_state.json keeps the words (`hub`,
//! `spoke`); an empty field (an old file, a run not yet recorded) is `Unset`, and a word
//! another build or a custom roster wrote is kept as it was.

use serde::{Deserialize, Serialize};

/// An agent's role in pm_state.json.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum AgentRole {
    /// Not recorded yet.
    #[default]
    Unset,
    /// The PM: plans and delegates.
    Hub,
    /// Does one step and hands off.
    Spoke,
    /// A word written by another build or roster, kept verbatim.
    Other(String),
}

impl AgentRole {
    /// The word stored and printed.
    pub fn as_str(&self) -> &str {
        match self {
            AgentRole::Unset => "",
            AgentRole::Hub => "hub",
            AgentRole::Spoke => "spoke",
            AgentRole::Other(s) => s,
        }
    }

    /// The role an agent gets when nothing else said: the PM is the hub.
    pub fn of_agent(agent: &str) -> AgentRole {
        if agent == "pm" {
            AgentRole::Hub
        } else {
            AgentRole::Spoke
        }
    }
}

impl From<&str> for AgentRole {
    fn from(s: &str) -> Self {
        match s {
            "" => AgentRole::Unset,
            "hub" => AgentRole::Hub,
            "spoke" => AgentRole::Spoke,
            other => AgentRole::Other(other.to_string()),
        }
    }
}

super::stored_as_word!(AgentRole);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_round_trips_and_unknown_words_are_kept() {
        for w in ["", "hub", "spoke", "reviewer_v9"] {
            let r = AgentRole::from(w);
            assert_eq!(serde_json::to_value(&r).unwrap(), serde_json::json!(w));
            assert_eq!(serde_json::from_value::<AgentRole>(serde_json::json!(w)).unwrap(), r);
        }
        assert_eq!(AgentRole::from("reviewer_v9"), AgentRole::Other("reviewer_v9".into()));
        assert_eq!(
            (AgentRole::of_agent("pm"), AgentRole::of_agent("dev")),
            (AgentRole::Hub, AgentRole::Spoke)
        );
    }
}
