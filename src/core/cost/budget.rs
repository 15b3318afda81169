//! Budgets from task.md's Agent Config and the decisions they make (pure):
//! `budget: 2M tokens` or `budget: $25` for the whole task, `budget-<role>: …` for every
//! run of one agent role. At [`WARN_PERCENT`] the PM is warned once; at 100 % a human is
//! called once and new spawns are refused (`SPAWN_REJECT_BUDGET`) unless a human passes
//! `--over-budget`. Running agents are never killed: work in flight is worth more than
//! the tokens a wrap-up costs.

use std::collections::BTreeMap;

use serde::Serialize;

/// The share of a budget at which the PM is warned.
pub const WARN_PERCENT: u64 = 80;

/// A limit in tokens (every kind counted) or in US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "unit", content = "limit", rename_all = "lowercase")]
pub enum Limit {
    /// Tokens of every kind.
    Tokens(u64),
    /// US dollars at the configured prices.
    Usd(f64),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Tokens(n) => write!(f, "{} tokens", tokens(*n)),
            Limit::Usd(d) => write!(f, "${d:.2}"),
        }
    }
}

/// Parse a budget value: `2000000`, `2M tokens`, `500k`, `$25`, `25 usd`.
pub fn parse_limit(value: &str) -> Result<Limit, String> {
    let v = value.trim();
    let bad = || format!("budget {v:?} is neither tokens nor dollars: write e.g. '2M tokens', '500k tokens' or '$25'");
    let lower = v.to_ascii_lowercase();
    let money = lower
        .strip_prefix('$')
        .map(str::trim)
        .or_else(|| lower.strip_suffix("usd").map(str::trim));
    if let Some(m) = money {
        let d: f64 = m.parse().map_err(|_| bad())?;
        if !(d.is_finite() && d > 0.0) {
            return Err(bad());
        }
        return Ok(Limit::Usd(d));
    }
    let n = lower.strip_suffix("tokens").unwrap_or(&lower).trim();
    let (digits, mult) = match n.chars().last() {
        Some('k') => (&n[..n.len() - 1], 1_000.0),
        Some('m') => (&n[..n.len() - 1], 1_000_000.0),
        Some('g' | 'b') => (&n[..n.len() - 1], 1_000_000_000.0),
        _ => (n, 1.0),
    };
    let x: f64 = digits.trim().replace('_', "").parse().map_err(|_| bad())?;
    let t = (x * mult).round();
    if !(t.is_finite() && t >= 1.0) {
        return Err(bad());
    }
    Ok(Limit::Tokens(t as u64))
}

/// The task's budgets.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Budgets {
    /// For the whole task (every agent, every run).
    pub task: Option<Limit>,
    /// Per agent role.
    pub roles: BTreeMap<String, Limit>,
}

impl Budgets {
    /// The budgets among task.md's settings (`budget`, `budget-<role>`); the first bad
    /// one is an error with its key.
    pub fn from_settings<'a>(settings: impl Iterator<Item = (&'a str, &'a str)>) -> Result<Budgets, (String, String)> {
        let mut b = Budgets::default();
        for (k, v) in settings {
            if k == "budget" {
                b.task = Some(parse_limit(v).map_err(|e| (k.to_string(), e))?);
            } else if let Some(role) = k.strip_prefix("budget-").or_else(|| k.strip_prefix("budget_")) {
                b.roles
                    .insert(role.to_string(), parse_limit(v).map_err(|e| (k.to_string(), e))?);
            }
        }
        Ok(b)
    }

    /// Whether any budget is set.
    pub fn any(&self) -> bool {
        self.task.is_some() || !self.roles.is_empty()
    }
}

/// What was spent: tokens always; dollars when every model used has a price.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    /// Tokens of every kind.
    pub tokens: u64,
    /// Dollars, when known.
    pub usd: Option<f64>,
}

/// Where spending stands against one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Under the warning share.
    Ok,
    /// At or past the warning share.
    Warning,
    /// At or past the limit.
    Exceeded,
    /// A dollar limit with spending whose price is unknown: cannot be judged.
    Unknown,
}

/// Spending against one budget.
#[derive(Debug, Clone, Serialize)]
pub struct Standing {
    /// `task`, or the role.
    pub scope: String,
    /// The limit.
    pub limit: Limit,
    /// Whole percent used (None when unknown).
    pub percent: Option<u64>,
    /// What that means.
    pub level: Level,
}

/// Judge `spent` against `limit` for `scope`.
pub fn standing(scope: &str, limit: Limit, spent: Spent) -> Standing {
    let ratio = match limit {
        Limit::Tokens(n) => Some(spent.tokens as f64 / n as f64),
        Limit::Usd(d) => spent.usd.map(|u| u / d),
    };
    let percent = ratio.map(|r| (r * 100.0).floor() as u64);
    let level = match percent {
        None => Level::Unknown,
        Some(p) if p >= 100 => Level::Exceeded,
        Some(p) if p >= WARN_PERCENT => Level::Warning,
        Some(_) => Level::Ok,
    };
    Standing {
        scope: scope.to_string(),
        limit,
        percent,
        level,
    }
}

/// Every budget judged: the task's against `task`, each role's against `roles[role]`.
pub fn standings(b: &Budgets, task: Spent, roles: &BTreeMap<String, Spent>) -> Vec<Standing> {
    let mut out = Vec::new();
    if let Some(l) = b.task {
        out.push(standing("task", l, task));
    }
    for (role, l) in &b.roles {
        out.push(standing(role, *l, roles.get(role).copied().unwrap_or_default()));
    }
    out
}

/// The budget that refuses a spawn of `role`: the task's, or the role's own, when exceeded.
pub fn refuses<'a>(all: &'a [Standing], role: &str) -> Option<&'a Standing> {
    all.iter()
        .find(|s| s.level == Level::Exceeded && (s.scope == "task" || s.scope == role))
}

/// A token count for people: `1234`, `12.3k`, `4.56M`.
pub fn tokens(n: u64) -> String {
    match n {
        n if n < 10_000 => n.to_string(),
        n if n < 1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        n => format!("{:.2}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse_in_tokens_or_dollars() {
        assert_eq!(parse_limit("2M tokens"), Ok(Limit::Tokens(2_000_000)));
        assert_eq!(parse_limit("500k"), Ok(Limit::Tokens(500_000)));
        assert_eq!(parse_limit("1500"), Ok(Limit::Tokens(1500)));
        assert_eq!(parse_limit("1.5m tokens"), Ok(Limit::Tokens(1_500_000)));
        assert_eq!(parse_limit("$25"), Ok(Limit::Usd(25.0)));
        assert_eq!(parse_limit("12.5 USD"), Ok(Limit::Usd(12.5)));
        for bad in ["", "lots", "$", "-5", "$-1", "0", "tokens"] {
            assert!(parse_limit(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn settings_give_task_and_role_budgets() {
        let b = Budgets::from_settings([("budget", "1M"), ("budget-dev", "$3"), ("runtime", "claude")].into_iter())
            .unwrap();
        assert_eq!(b.task, Some(Limit::Tokens(1_000_000)));
        assert_eq!(b.roles["dev"], Limit::Usd(3.0));
        let e = Budgets::from_settings([("budget-dev", "much")].into_iter()).unwrap_err();
        assert_eq!(e.0, "budget-dev");
    }

    #[test]
    fn warnings_at_80_percent_refusals_at_100_and_unknown_money_is_not_judged() {
        let s = |tokens, usd| Spent { tokens, usd };
        assert_eq!(standing("task", Limit::Tokens(1000), s(799, None)).level, Level::Ok);
        assert_eq!(
            standing("task", Limit::Tokens(1000), s(800, None)).level,
            Level::Warning
        );
        assert_eq!(
            standing("task", Limit::Tokens(1000), s(1000, None)).level,
            Level::Exceeded
        );
        assert_eq!(
            standing("task", Limit::Usd(2.0), s(10, Some(1.7))).level,
            Level::Warning
        );
        assert_eq!(standing("task", Limit::Usd(2.0), s(10, None)).level, Level::Unknown);
        let b = Budgets {
            task: Some(Limit::Tokens(10_000)),
            roles: [("dev".to_string(), Limit::Tokens(100))].into(),
        };
        let roles = [("dev".to_string(), s(150, None))].into();
        let all = standings(&b, s(2000, None), &roles);
        assert_eq!(refuses(&all, "dev").map(|s| s.scope.as_str()), Some("dev"));
        assert!(refuses(&all, "review").is_none(), "another role still has room");
        let all = standings(&b, s(10_000, None), &roles);
        assert_eq!(refuses(&all, "review").map(|s| s.scope.as_str()), Some("task"));
    }
}
