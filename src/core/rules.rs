//! task.md's permission rules: what an agent may do without asking (`allow:`), and what it
//! is refused without anyone being asked (`deny:`), in Claude Code's own rule syntax
//! (`Bash(cargo test:*)`, `WebFetch(domain:docs.rs)`, `Read`). Claude Code applies them
//! itself, deny winning, and the broker applies them to what Claude Code cannot analyse;
//! with the broker's waits for what no rule decides (`permit_timeout:`, `permit_deadline:`).

use std::time::Duration;

/// Default wait for the PM before a human is called (task.md `permit_timeout:`).
pub const PERMIT_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Default wait for anyone before a request is denied (task.md `permit_deadline:`).
pub const PERMIT_DEADLINE: Duration = Duration::from_secs(30 * 60);
/// What the hook's timeout adds to the deadline: the deadline must decide first.
pub const HOOK_MARGIN: Duration = Duration::from_secs(60);

/// The broker's waits for a request no rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `permit_timeout:`: the PM's time to answer before a human is called.
    pub human_after: Duration,
    /// `permit_deadline:`: anyone's, before it is denied.
    pub deadline: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            human_after: PERMIT_TIMEOUT,
            deadline: PERMIT_DEADLINE,
        }
    }
}

impl Timing {
    /// From task.md's Agent Config; a missing or unreadable value is the default, and the
    /// human is never called after the deadline.
    pub fn of(spec: &crate::core::model::TaskSpec) -> Timing {
        let get = |k: &str, d: Duration| {
            spec.setting(k)
                .and_then(crate::core::clock::parse_duration)
                .unwrap_or(d)
        };
        let deadline = get("permit_deadline", PERMIT_DEADLINE);
        Timing {
            human_after: get("permit_timeout", PERMIT_TIMEOUT).min(deadline),
            deadline,
        }
    }

    /// The hook's timeout in the agent's settings, in seconds.
    pub fn hook_timeout_secs(&self) -> u64 {
        (self.deadline + HOOK_MARGIN).as_secs()
    }
}

/// One agent's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Allowed without a prompt.
    pub allow: Vec<String>,
    /// Refused without a prompt.
    pub deny: Vec<String>,
}

/// Split a rule list on the commas between rules (a comma inside a rule's parentheses, as in
/// `Bash(git log --format=%h,%s:*)`, stays in its rule), and check each rule's shape:
/// a tool name, optionally followed by its specifier in parentheses.
pub fn parse_list(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut cur = String::new();
    for c in value.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    let rules: Vec<String> = out
        .into_iter()
        .map(|r| r.trim().to_string())
        .filter(|r| !r.is_empty())
        .collect();
    for r in &rules {
        check(r)?;
    }
    Ok(rules)
}

fn check(rule: &str) -> Result<(), String> {
    let (tool, spec) = match rule.find('(') {
        Some(i) => (&rule[..i], Some(&rule[i..])),
        None => (rule, None),
    };
    let tool_ok = tool.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && tool.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let spec_ok = spec.is_none_or(|s| s.len() > 2 && s.ends_with(')'));
    if tool_ok && spec_ok {
        Ok(())
    } else {
        Err(format!(
            "{rule:?} is not a permission rule; write a tool name with an optional specifier, as Claude Code does: Bash(cargo test:*), WebFetch(domain:docs.rs), Read"
        ))
    }
}

/// The rules for `agent` from task.md's settings (`setting` looks one up): `allow:` and
/// `deny:` for every agent, then `allow-<agent>:` and `deny-<agent>:` for this one.
pub fn for_agent(agent: &str, setting: impl Fn(&str) -> Option<String>) -> Result<Rules, String> {
    let mut rules = Rules::default();
    for (key, into) in [("allow", &mut rules.allow), ("deny", &mut rules.deny)] {
        for k in [key.to_string(), format!("{key}-{agent}")] {
            if let Some(v) = setting(&k) {
                into.extend(parse_list(&v).map_err(|e| format!("{k}: {e}"))?);
            }
        }
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_split_between_rules_not_inside_them() {
        assert_eq!(
            parse_list("Bash(cargo test:*), WebFetch(domain:docs.rs),Read").unwrap(),
            vec!["Bash(cargo test:*)", "WebFetch(domain:docs.rs)", "Read"]
        );
        assert_eq!(
            parse_list("Bash(git log --format=%h,%s:*)").unwrap(),
            vec!["Bash(git log --format=%h,%s:*)"]
        );
        assert!(parse_list(" , ").unwrap().is_empty());
    }

    #[test]
    fn a_malformed_rule_says_what_a_rule_looks_like() {
        for bad in ["cargo test", "Bash(cargo test", "Bash()", "$(x)", "Bash(x);rm"] {
            let e = parse_list(bad).unwrap_err();
            assert!(e.contains("Bash(cargo test:*)"), "{bad}: {e}");
        }
    }

    #[test]
    fn an_agent_gets_the_task_wide_rules_and_its_own() {
        let s = |k: &str| match k {
            "allow" => Some("Bash(make test:*)".to_string()),
            "allow-dev" => Some("Bash(cargo build:*)".to_string()),
            "deny-review" => Some("Bash(git push:*)".to_string()),
            _ => None,
        };
        let dev = for_agent("dev", s).unwrap();
        assert_eq!(dev.allow, vec!["Bash(make test:*)", "Bash(cargo build:*)"]);
        assert!(dev.deny.is_empty());
        assert_eq!(for_agent("review", s).unwrap().deny, vec!["Bash(git push:*)"]);
        let e = for_agent("dev", |k| (k == "deny").then(|| "nonsense here".to_string())).unwrap_err();
        assert!(e.starts_with("deny: "), "{e}");
    }
}
