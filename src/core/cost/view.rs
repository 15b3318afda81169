//! What the team has cost, as `task status`, `--json`, progress.md and the check-in show
//! it (pure): per agent and task totals in tokens, money where every price is known, the
//! budgets' standing, and the supervisor's own spend ([`super::supervisor`]).

use std::fmt::Write as _;

use serde::Serialize;

use super::budget::{self, Level, Standing};
use super::usage::{ByModel, Tokens};

/// One agent's usage.
#[derive(Debug, Clone, Serialize)]
pub struct AgentCost {
    /// The agent (its role).
    pub agent: String,
    /// Whether its usage can be read (Claude Code on this machine); `false` means "unknown".
    pub known: bool,
    /// Why it is unknown.
    pub unknown_why: Option<String>,
    /// Tokens by kind, summed over its sessions.
    pub tokens: Tokens,
    /// Every kind summed.
    pub total_tokens: u64,
    /// Tokens by model.
    pub by_model: ByModel,
    /// Answers counted.
    pub answers: u64,
    /// USD at the configured prices (`null` when a model has no price, or unknown).
    pub usd: Option<f64>,
    /// Transcript lines skipped as malformed.
    pub skipped_lines: u64,
    /// How full its current conversation's context is, after its latest answer; `None`
    /// when its usage is unknown or it has not answered yet.
    pub context: Option<ContextFill>,
    /// Times its client compacted a conversation of its by itself (over its sessions).
    pub compactions: u64,
}

/// " (compacted 2×)" when the client compacted the agent's conversations by itself.
fn compacted(n: u64) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" (compacted {n}×)")
    }
}

/// How full an agent's context is: what its latest answer was given and gave (its input,
/// cache reads and writes, and output: all of it is in the next request), against the
/// model's window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextFill {
    /// The model of that answer.
    pub model: String,
    /// Tokens in the conversation.
    pub tokens: u64,
    /// The model's context window, when the table knows it.
    pub window: Option<u64>,
    /// `tokens` as a percentage of `window`.
    pub percent: Option<u64>,
}

impl ContextFill {
    /// The fill after an answer of `model` that used `t`, with `window` the model's. Pure.
    pub fn of(model: &str, t: &Tokens, window: Option<u64>) -> ContextFill {
        let tokens = t.total();
        ContextFill {
            model: model.to_string(),
            tokens,
            window,
            percent: window.filter(|w| *w > 0).map(|w| tokens * 100 / w),
        }
    }

    /// "context 45% of 200.0k", or the tokens when the window is unknown.
    pub fn text(&self) -> String {
        match (self.percent, self.window) {
            (Some(p), Some(w)) => format!("context {p}% of {}", budget::tokens(w)),
            _ => format!(
                "context {} ({}: window unknown)",
                budget::tokens(self.tokens),
                self.model
            ),
        }
    }
}

pub use super::supervisor::SupervisorSpend;

/// The whole picture for one task.
#[derive(Debug, Clone, Serialize)]
pub struct CostView {
    /// Per agent.
    pub agents: Vec<AgentCost>,
    /// The known agents' tokens summed.
    pub tokens: Tokens,
    /// Every kind summed.
    pub total_tokens: u64,
    /// USD for the known agents (`null` when any of their models has no price).
    pub usd: Option<f64>,
    /// Agents whose usage is unknown (not in the totals).
    pub unknown: Vec<String>,
    /// The date of the price table.
    pub prices_as_of: Option<String>,
    /// Each budget's standing.
    pub budgets: Vec<Standing>,
    /// The supervisor's own spend.
    pub supervisor: SupervisorSpend,
}

impl CostView {
    /// Build the totals from the agents.
    pub fn new(agents: Vec<AgentCost>, prices_as_of: Option<String>, supervisor: SupervisorSpend) -> CostView {
        let mut tokens = Tokens::default();
        let mut usd = Some(0.0);
        let mut unknown = Vec::new();
        for a in &agents {
            if a.known {
                tokens.add(&a.tokens);
                usd = usd.zip(a.usd).map(|(x, y)| x + y);
            } else {
                unknown.push(a.agent.clone());
            }
        }
        CostView {
            total_tokens: tokens.total(),
            agents,
            tokens,
            usd,
            unknown,
            prices_as_of,
            budgets: Vec::new(),
            supervisor,
        }
    }

    /// What one agent role spent, for its budget.
    pub fn spent_by(&self, agent: &str) -> budget::Spent {
        self.agents
            .iter()
            .find(|a| a.agent == agent && a.known)
            .map(|a| budget::Spent {
                tokens: a.total_tokens,
                usd: a.usd,
            })
            .unwrap_or_default()
    }

    /// What the task spent.
    pub fn spent(&self) -> budget::Spent {
        budget::Spent {
            tokens: self.total_tokens,
            usd: self.usd,
        }
    }
}

fn money(usd: Option<f64>) -> String {
    usd.map(|u| format!(" (${u:.2})")).unwrap_or_default()
}

fn standing_text(s: &Standing) -> String {
    let who = if s.scope == "task" {
        "task".to_string()
    } else {
        format!("{} role", s.scope)
    };
    match (s.level, s.percent) {
        (Level::Unknown, _) | (_, None) => format!("{who} budget {}: not judged (a model has no price)", s.limit),
        (Level::Exceeded, Some(p)) => format!("{who} budget {}: {p}% used, new spawns refused", s.limit),
        (_, Some(p)) => format!("{who} budget {}: {p}% used", s.limit),
    }
}

/// The `Cost:` block of `task status`.
pub fn render_status(v: &CostView) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Cost:          {} tokens{}{}",
        budget::tokens(v.total_tokens),
        money(v.usd),
        match (&v.usd, &v.prices_as_of) {
            (Some(_), Some(d)) => format!(", prices of {d}"),
            (None, _) if v.total_tokens > 0 => ", money unknown (a model has no price)".into(),
            _ => String::new(),
        }
    );
    for a in &v.agents {
        if a.known {
            let t = &a.tokens;
            let _ = writeln!(
                out,
                "  {:<12} {:>8} tokens{:<10} in {} · out {} · cache +{}/{} read{}{}",
                a.agent,
                budget::tokens(a.total_tokens),
                money(a.usd),
                budget::tokens(t.input),
                budget::tokens(t.output),
                budget::tokens(t.cache_creation),
                budget::tokens(t.cache_read),
                a.context
                    .as_ref()
                    .map(|c| format!(" · {}{}", c.text(), compacted(a.compactions)))
                    .unwrap_or_default(),
                if a.skipped_lines > 0 {
                    format!(" ({} bad lines)", a.skipped_lines)
                } else {
                    String::new()
                }
            );
        } else {
            let why = a.unknown_why.as_deref().unwrap_or("no usage record");
            let _ = writeln!(
                out,
                "  {:<12} unknown ({})",
                a.agent,
                crate::core::handoff::one_line(why, 70)
            );
        }
    }
    for s in &v.budgets {
        let _ = writeln!(out, "  Budget: {}", standing_text(s));
    }
    let s = &v.supervisor;
    let _ = writeln!(
        out,
        "Supervisor:    {} check-ins + {} messages delivered: {} bytes ≈ {} tokens to the PM",
        s.checkins_delivered,
        s.messages_delivered,
        s.checkin_bytes + s.message_bytes,
        budget::tokens(s.estimated_tokens),
    );
    let _ = writeln!(
        out,
        "               {} quiet check-ins skipped{}{}",
        s.skipped_quiet,
        s.checkins_per_hour
            .map(|h| format!("; {h:.1} delivered per hour"))
            .unwrap_or_default(),
        s.pm_tokens_per_checkin
            .map(|t| format!("; the PM spends ~{} tokens per check-in", budget::tokens(t)))
            .unwrap_or_default(),
    );
    if let Some(t) = &s.pm_context_trend {
        let _ = writeln!(
            out,
            "               the PM's context per check-in: {} early, {} lately (×{:.1})",
            budget::tokens(t.first),
            budget::tokens(t.last),
            t.ratio
        );
    }
    out
}

/// The task's total in a few words for a one-line view (`task ui`): tokens, money when
/// every model has a price; none before anything was spent.
pub fn short(v: &CostView) -> Option<String> {
    (v.total_tokens > 0).then(|| format!("{} tokens{}", budget::tokens(v.total_tokens), money(v.usd)))
}

/// One short line for the PM's check-in (empty when nothing is known yet).
pub fn checkin_line(v: &CostView) -> String {
    if v.total_tokens == 0 && v.budgets.is_empty() {
        return String::new();
    }
    let mut l = format!("Cost so far: {} tokens{}", budget::tokens(v.total_tokens), money(v.usd));
    // How full each conversation is, where the window is known: the PM sees who is near it.
    let fills: Vec<String> = v
        .agents
        .iter()
        .filter_map(|a| {
            Some(format!(
                "{} {}%{}",
                a.agent,
                a.context.as_ref()?.percent?,
                compacted(a.compactions)
            ))
        })
        .collect();
    if !fills.is_empty() {
        let _ = write!(l, "; context: {}", fills.join(", "));
    }
    let worst = v
        .budgets
        .iter()
        .filter(|s| s.percent.is_some())
        .max_by_key(|s| s.percent);
    if let Some(s) = worst {
        let _ = write!(l, "; {}", standing_text(s));
    }
    l.push('.');
    l
}

/// The `## Cost` section of progress.md.
pub fn render_progress(v: &CostView) -> String {
    let mut out = String::from("## Cost\n");
    let _ = writeln!(out, "- Task: {} tokens{}", budget::tokens(v.total_tokens), money(v.usd));
    for a in &v.agents {
        if a.known {
            let _ = writeln!(
                out,
                "- {}: {} tokens{}{}",
                a.agent,
                budget::tokens(a.total_tokens),
                money(a.usd),
                a.context
                    .as_ref()
                    .map(|c| format!(", {}{}", c.text(), compacted(a.compactions)))
                    .unwrap_or_default()
            );
        } else {
            let _ = writeln!(out, "- {}: unknown", a.agent);
        }
    }
    for s in &v.budgets {
        let _ = writeln!(out, "- Budget: {}", standing_text(s));
    }
    let _ = writeln!(
        out,
        "- Supervisor: {} check-ins delivered, ≈ {} tokens",
        v.supervisor.checkins_delivered,
        budget::tokens(v.supervisor.estimated_tokens)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(name: &str, known: bool, total: u64, usd: Option<f64>) -> AgentCost {
        AgentCost {
            agent: name.into(),
            known,
            unknown_why: (!known).then(|| "kiro keeps no usage record".into()),
            tokens: Tokens {
                input: total,
                ..Default::default()
            },
            total_tokens: total,
            by_model: ByModel::new(),
            answers: 1,
            usd,
            skipped_lines: 0,
            context: None,
            compactions: 0,
        }
    }

    #[test]
    fn totals_leave_unknown_agents_out_and_money_needs_every_price() {
        let v = CostView::new(
            vec![
                agent("pm", true, 100, Some(1.0)),
                agent("dev", true, 50, Some(0.5)),
                agent("k", false, 0, None),
            ],
            Some("2025-11-01".into()),
            SupervisorSpend::default(),
        );
        assert_eq!(v.total_tokens, 150);
        assert_eq!(v.usd, Some(1.5));
        assert_eq!(v.unknown, ["k"]);
        let text = render_status(&v);
        assert!(text.contains("150 tokens ($1.50), prices of 2025-11-01"), "{text}");
        for line in text.lines() {
            assert!(line.chars().count() <= 100, "over 100 columns: {line:?}");
        }
        assert!(
            text.contains("k            unknown (kiro keeps no usage record)"),
            "{text}"
        );
        let v = CostView::new(vec![agent("pm", true, 100, None)], None, SupervisorSpend::default());
        assert_eq!(v.usd, None);
        assert!(render_status(&v).contains("money unknown"));
        assert_eq!(checkin_line(&v), "Cost so far: 100 tokens.");
    }

    #[test]
    fn context_fill_is_the_latest_answer_against_the_window_and_never_guessed() {
        let t = Tokens {
            input: 2_000,
            output: 1_000,
            cache_creation: 7_000,
            cache_read: 80_000,
        };
        let c = ContextFill::of("claude-sonnet-4-5", &t, Some(200_000));
        assert_eq!((c.tokens, c.percent), (90_000, Some(45)));
        assert_eq!(c.text(), "context 45% of 200.0k");
        let u = ContextFill::of("gpt-scripted", &t, None);
        assert_eq!(u.percent, None);
        assert_eq!(u.text(), "context 90.0k (gpt-scripted: window unknown)");
        let mut pm = agent("pm", true, 90_000, Some(1.0));
        pm.context = Some(c);
        let text = render_status(&CostView::new(vec![pm], None, SupervisorSpend::default()));
        let line = text.lines().find(|l| l.trim_start().starts_with("pm")).unwrap();
        assert!(line.ends_with("· context 45% of 200.0k"), "{line}");
        assert!(line.chars().count() <= 100, "{line}");
        // The check-in's cost line names the fills it knows; progress.md each agent's.
        let mut dev = agent("dev", true, 10, None);
        dev.context = Some(u);
        let mut pm = agent("pm", true, 90_000, Some(1.0));
        pm.context = Some(ContextFill::of("claude-sonnet-4-5", &t, Some(200_000)));
        let mut v = CostView::new(vec![pm, dev], None, SupervisorSpend::default());
        assert_eq!(checkin_line(&v), "Cost so far: 90.0k tokens; context: pm 45%.");
        v.agents[0].compactions = 2;
        assert_eq!(
            checkin_line(&v),
            "Cost so far: 90.0k tokens; context: pm 45% (compacted 2×)."
        );
        let progress = render_progress(&v);
        assert!(
            progress.contains("- pm: 90.0k tokens ($1.00), context 45% of 200.0k"),
            "{progress}"
        );
        assert!(
            progress.contains("- dev: 10 tokens, context 90.0k (gpt-scripted: window unknown)"),
            "{progress}"
        );
    }
}
