//! What a spoke's handoff means for the hub beyond its status: its structured result
//! (`Cycle Result:`, `## Gates Honored`, `## Next Action`), its limit flags
//! (docs/protocol.md#structured-results), and whether its recommendation follows the roster's
//! handoff table. Pure: the check-in turns findings into signals.
//!
//! Seed 003's rules, as applied: a FAIL gate, or a result that says FAIL or
//! BLOCKED while the status says otherwise, is treated as BLOCKED; a handoff
//! with neither status nor result is already BLOCKED by the parser; a missing
//! `## Gates Honored` is a governance warning (logged, work allowed) and only
//! for agents whose roster entry has `requires_gates`.

use crate::core::handoff::{GateResult, Loaded, Status};

use super::roster::{Roster, Routing};

/// One thing the hub should know about a handoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// A gate in `## Gates Honored` failed: treat as BLOCKED.
    GateFailed {
        /// The gate.
        gate: String,
    },
    /// `Cycle Result:` says FAIL/BLOCKED but the status does not: treat as BLOCKED.
    ResultFailed {
        /// The result as written.
        result: String,
    },
    /// The roster requires `## Gates Honored` and it is missing: a warning.
    MissingGates,
    /// `budget_exceeded: true`.
    BudgetExceeded,
    /// `scope_escalation: true`.
    ScopeEscalation,
    /// The recommendation is not in the roster's handoff table for this agent.
    Disallowed {
        /// Whom it recommended.
        recommended: String,
        /// Whom the table allows.
        allowed: Vec<String>,
    },
    /// The recommendation names no agent of the roster.
    UnknownAgent {
        /// Whom it recommended.
        recommended: String,
    },
}

impl Finding {
    /// What the hub reads.
    pub fn text(&self, agent: &str, roster: &Roster) -> String {
        match self {
            Finding::GateFailed { gate } => format!("gate '{gate}' FAILED; treat the work as blocked"),
            Finding::ResultFailed { result } => {
                format!("Cycle Result is {result} although the status is not BLOCKED; treat the work as blocked")
            }
            Finding::MissingGates => format!(
                "no '## Gates Honored' section, which roster '{}' requires of {agent}: governance not confirmed (warning)",
                roster.name
            ),
            Finding::BudgetExceeded => {
                format!("{agent} exceeded its budget: split the work or give it a larger one")
            }
            Finding::ScopeEscalation => {
                format!("{agent} needs changes outside its scope: widen the scope or hand the work to another agent")
            }
            Finding::Disallowed { recommended, allowed } => format!(
                "{agent} recommends {recommended}, which roster '{}' does not allow after {agent} (allowed: {}); decide yourself",
                roster.name,
                if allowed.is_empty() {
                    "nobody, it is final".to_string()
                } else {
                    allowed.join(", ")
                }
            ),
            Finding::UnknownAgent { recommended } => format!(
                "{agent} recommends '{recommended}', which is not an agent of roster '{}'",
                roster.name
            ),
        }
    }
}

/// Assess a spoke's handoff. The PM's own handoffs are instructions, not results.
pub fn assess(l: &Loaded, roster: &Roster) -> Vec<Finding> {
    let h = &l.handoff;
    let agent = l.agent();
    let mut out = Vec::new();
    if roster.canonical(agent) == "pm" {
        return out;
    }
    for g in h.sections.gates_honored.iter().flatten() {
        if g.result == GateResult::Fail {
            out.push(Finding::GateFailed { gate: g.name.clone() });
        }
    }
    if let Some(r) = h.cycle_result.as_deref() {
        if (r == "FAIL" || r == "BLOCKED") && h.status != Status::Blocked {
            out.push(Finding::ResultFailed { result: r.to_string() });
        }
    }
    if h.sections.gates_honored.is_none() && roster.requires_gates(agent) {
        out.push(Finding::MissingGates);
    }
    if h.budget_exceeded {
        out.push(Finding::BudgetExceeded);
    }
    if h.scope_escalation {
        out.push(Finding::ScopeEscalation);
    }
    if let Some(rec) = h.recommended_next.as_deref() {
        match roster.route(agent, Some(rec)) {
            Routing::Allowed => {}
            Routing::Disallowed { allowed } => out.push(Finding::Disallowed {
                recommended: roster.canonical(rec),
                allowed,
            }),
            Routing::Unknown => out.push(Finding::UnknownAgent {
                recommended: rec.to_string(),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(file: &str, text: &str) -> Loaded {
        Loaded::from_text(file, text)
    }

    #[test]
    fn seed_003_rules() {
        let r = Roster::builtin("hub-and-spoke").unwrap();
        let pass = loaded(
            "executor-20251127-110000.md",
            "# Handoff: executor\nCycle Result: PASS\n**Recommended Next:** Reviewer\n\n## Gates Honored\n- tests: PASS\n\n## Next Action\nreview\n",
        );
        assert_eq!(assess(&pass, &r), vec![]);
        let fail = loaded(
            "executor-20251127-110000.md",
            "# Handoff: executor\n**Status:** COMPLETE\nCycle Result: FAIL\n\n## Gates Honored\n- build: FAIL\n",
        );
        let f = assess(&fail, &r);
        assert!(f.contains(&Finding::GateFailed { gate: "build".into() }), "{f:?}");
        assert!(f.contains(&Finding::ResultFailed { result: "FAIL".into() }), "{f:?}");
        assert!(
            f.iter()
                .all(|x| x.text("executor", &r).contains("treat the work as blocked"))
        );
        let bare = loaded(
            "executor-20251127-110000.md",
            "# Handoff: executor\n**Status:** COMPLETE\n",
        );
        assert_eq!(assess(&bare, &r), vec![Finding::MissingGates]);
        assert!(
            !Finding::MissingGates.text("executor", &r).contains("blocked"),
            "a warning, per docs/protocol.md#structured-results"
        );
        let researcher = loaded(
            "researcher-20251127-110000.md",
            "# Handoff: researcher\n**Status:** COMPLETE\n",
        );
        assert_eq!(assess(&researcher, &r), vec![], "gates not required of it");
    }

    #[test]
    fn limit_flags_and_routing() {
        let r = Roster::builtin("hub-and-spoke").unwrap();
        let w = loaded(
            "worker-20251127-110000.md",
            "# Handoff: worker\n**Status:** BLOCKED\n\n## Blockers\nout of steps\n\nbudget_exceeded: true\n- **Scope Escalation:** yes\n",
        );
        assert_eq!(assess(&w, &r), vec![Finding::BudgetExceeded, Finding::ScopeEscalation]);
        let off = loaded(
            "worker-20251127-110000.md",
            "# Handoff: worker\n**Status:** COMPLETE\n\nbudget_exceeded: false\n",
        );
        assert_eq!(assess(&off, &r), vec![]);
        let bad = loaded(
            "reviewer-20251127-110000.md",
            "# Handoff: reviewer\n**Status:** COMPLETE\n**Recommended Next:** archivist\n",
        );
        let f = assess(&bad, &r);
        assert!(
            matches!(&f[..], [Finding::Disallowed { recommended, .. }] if recommended == "archivist"),
            "{f:?}"
        );
        assert!(f[0].text("reviewer", &r).contains("tester, revisionist"));
        let pm = loaded(
            "pm-20251127-110000.md",
            "# Handoff: pm\n**Status:** IN_PROGRESS\n**Target:** executor\n",
        );
        assert_eq!(assess(&pm, &r), vec![]);
    }
}
