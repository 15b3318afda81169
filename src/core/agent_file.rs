//! The agent files (docs/protocol.md#spawn-preamble): the built-in definitions of the
//! default roster's agents, and a generic one for any other roster's, in Claude Code's
//! format (YAML frontmatter then the system prompt). Written out by `task setup-agents`
//! and carried in an agent's context bundle.

/// The default roster's agent files, embedded at build time.
pub const DEFAULT_AGENTS: [(&str, &str); 8] = [
    ("pm", include_str!("../../templates/agents/pm.md")),
    ("explore", include_str!("../../templates/agents/explore.md")),
    ("plan", include_str!("../../templates/agents/plan.md")),
    ("architect", include_str!("../../templates/agents/architect.md")),
    ("dev", include_str!("../../templates/agents/dev.md")),
    ("test", include_str!("../../templates/agents/test.md")),
    ("review", include_str!("../../templates/agents/review.md")),
    ("scribe", include_str!("../../templates/agents/scribe.md")),
];

/// The agent file for an agent that has no built-in one.
pub const GENERIC_AGENT: &str = include_str!("../../templates/agent-generic.md");

/// The built-in definition of `agent`, else a generic one naming its role and
/// description in the roster (so every roster's agents can be set up and spawned).
pub fn definition(agent: &str, roster: &crate::core::protocol::roster::Roster) -> String {
    if let Some((_, text)) = DEFAULT_AGENTS.iter().find(|(n, _)| *n == agent) {
        return text.to_string();
    }
    let member = roster.member(agent);
    crate::core::preamble::fill(
        GENERIC_AGENT,
        &[
            ("agent", agent),
            ("role", roster.role_of(agent).as_str()),
            ("roster", &roster.name),
            (
                "description",
                member
                    .map(|m| m.description.as_str())
                    .filter(|d| !d.is_empty())
                    .unwrap_or("an agent of this task's team"),
            ),
        ],
    )
}
