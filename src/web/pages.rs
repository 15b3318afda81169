//! The pages: what each shows, computed from a [`Shown`] by plain functions, and filled
//! into the templates of `templates/web/` (minijinja, escaping every value by default: an
//! agent's text is data on the page; only the markdown renderer's inert HTML is marked
//! safe).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use minijinja::Environment;
use minijinja::value::{Serde, Value};
use serde::Serialize;
use serde_json::json;

use crate::app::settings::task_path;
use crate::ui::model::{self, TaskView};

use super::board::Shown;

/// The templates, loaded once.
pub struct Pages {
    env: Environment<'static>,
}

impl Default for Pages {
    fn default() -> Self {
        Self::new()
    }
}

impl Pages {
    /// Every page's template, HTML-escaped by default (by the `.html` names).
    pub fn new() -> Pages {
        let mut env = Environment::new();
        for (name, text) in [
            ("base.html", include_str!("../../templates/web/base.html")),
            ("login.html", include_str!("../../templates/web/login.html")),
            ("_needs.html", include_str!("../../templates/web/_needs.html")),
            ("home.html", include_str!("../../templates/web/home.html")),
            ("task.html", include_str!("../../templates/web/task.html")),
            ("handoff.html", include_str!("../../templates/web/handoff.html")),
        ] {
            env.add_template(name, text).expect("the shipped templates parse");
        }
        Pages { env }
    }

    /// `name` filled with `ctx`; a template error is a bug, said on the page.
    pub fn render(&self, name: &str, ctx: impl Serialize) -> String {
        match self
            .env
            .get_template(name)
            .and_then(|t| t.render(Value::from(Serde(ctx))))
        {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(template = name, error = %e, "a page did not render");
                format!(
                    "<!doctype html><p>This page could not be shown ({})</p>",
                    html_escape(&e.to_string())
                )
            }
        }
    }
}

/// Text as HTML, for the one message built outside a template.
pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// What every page's frame shows.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Frame {
    /// A session is signed in.
    pub signed_in: bool,
    /// Its short name.
    pub session: String,
    /// Its CSRF token, for the forms.
    pub csrf: String,
    /// Actions are off.
    pub read_only: bool,
    /// Whether the forms are shown (signed in, not read-only).
    pub actions: bool,
    /// The outcome of the last action, shown once.
    pub note: Option<String>,
    /// Where a form's action comes back to.
    pub back: String,
}

/// One Needs-you item as the page shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct NeedItem {
    /// The short word: dialog, permit, escalated, dead, blocked …
    pub why: String,
    pub task: String,
    pub agent: Option<String>,
    pub text: String,
    /// "3m ago".
    pub since: String,
    /// The task's page.
    pub link: String,
    /// A permission request's id.
    pub permit: Option<String>,
    /// Its identity for "seen".
    pub key: String,
}

/// The terminal's key hints that end some Needs-you texts (`task ui`'s keys); the page has
/// buttons instead.
const KEY_HINTS: [&str; 2] = ["; a allow, d deny", "; Enter to look, or restart it"];

fn without_key_hints(text: &str) -> String {
    KEY_HINTS
        .iter()
        .find_map(|h| text.strip_suffix(h))
        .unwrap_or(text)
        .to_string()
}

/// Needs-you across `shown` (or of task `only`), leaving out what was marked seen.
pub fn needs(shown: &Shown, seen: &BTreeSet<String>, only: Option<usize>, now: DateTime<Utc>) -> Vec<NeedItem> {
    model::needs(&shown.views, seen)
        .into_iter()
        .filter_map(|n| {
            let i = shown.views.iter().position(|v| v.status.task == n.task)?;
            if only.is_some_and(|o| o != i) {
                return None;
            }
            let link = task_path(&shown.tasks[i].project.display().to_string(), &n.task);
            Some(NeedItem {
                why: n.why.word().to_string(),
                key: n.key(),
                since: model::since(n.since, now),
                permit: n.permit.map(|(_, id)| id),
                task: n.task,
                agent: n.agent,
                text: without_key_hints(&n.text),
                link,
            })
        })
        .collect()
}

/// A task's one-line facts.
#[derive(Debug, Clone, Serialize)]
pub struct TaskItem {
    pub name: String,
    pub title: Option<String>,
    pub phase: String,
    pub link: String,
    pub agents: usize,
    pub running: usize,
    pub cost: String,
    pub last: String,
    pub next: String,
    pub handoffs: usize,
    pub unprocessed: usize,
}

fn cost_word(v: &TaskView) -> String {
    match &v.status.cost {
        Some(c) => match c.usd {
            Some(usd) => format!("${usd:.2}"),
            None => format!("{} tokens", c.total_tokens),
        },
        None => "cost unknown".into(),
    }
}

fn when(t: Option<DateTime<Utc>>) -> String {
    t.map(crate::core::clock::local_time).unwrap_or_else(|| "-".into())
}

/// The facts of task `i`.
pub fn task_item(shown: &Shown, i: usize) -> TaskItem {
    let v = &shown.views[i];
    let s = &v.status;
    TaskItem {
        name: s.task.clone(),
        title: s.title.clone(),
        phase: s.phase.to_string(),
        link: task_path(&shown.tasks[i].project.display().to_string(), &s.task),
        agents: s.agents.len(),
        running: s
            .agents
            .iter()
            .filter(|a| a.state == "running" && !pane_lost(a.pane))
            .count(),
        cost: cost_word(v),
        last: when(s.last_checkin),
        next: when(s.next_checkin),
        handoffs: s.handoffs,
        unprocessed: s.handoffs_unprocessed,
    }
}

/// Whether a pane that should run is dead or gone.
fn pane_lost(p: Option<crate::core::model::PaneState>) -> bool {
    matches!(
        p,
        Some(crate::core::model::PaneState::Dead | crate::core::model::PaneState::Gone)
    )
}

/// One agent's row on its task's page.
#[derive(Debug, Clone, Serialize)]
pub struct AgentItem {
    pub name: String,
    pub state: String,
    pub host: String,
    pub idle: Option<String>,
    pub handoff: Option<String>,
    pub handoff_time: Option<String>,
    pub last_status: Option<String>,
    /// A local agent the page may stop.
    pub stoppable: bool,
}

/// The agents of task `i`; an agent whose pane died reads `dead`.
pub fn agents(shown: &Shown, i: usize) -> Vec<AgentItem> {
    shown.views[i]
        .status
        .agents
        .iter()
        .map(|a| {
            let dead = pane_lost(a.pane) && a.state == "running";
            AgentItem {
                name: a.name.clone(),
                state: if dead { "dead".into() } else { a.state.clone() },
                host: a.host.clone(),
                idle: a.idle_secs.map(crate::core::clock::ago),
                handoff: a.last_handoff.clone(),
                handoff_time: a.last_handoff_time.clone(),
                last_status: a.last_status.map(|s| s.to_string()),
                stoppable: a.state == "running" && a.host == "local",
            }
        })
        .collect()
}

/// One event line.
#[derive(Debug, Clone, Serialize)]
pub struct EventItem {
    pub time: String,
    pub kind: String,
    pub agent: Option<String>,
    pub handoff: Option<String>,
    pub data: String,
}

/// Task `i`'s newest events first.
pub fn events(shown: &Shown, i: usize) -> Vec<EventItem> {
    model::events(&shown.views[i], "")
        .into_iter()
        .take(100)
        .map(|e| {
            let mut data = if e.data.is_null() {
                String::new()
            } else {
                e.data.to_string()
            };
            if data.len() > 300 {
                let mut end = 300;
                while !data.is_char_boundary(end) {
                    end -= 1;
                }
                data.truncate(end);
                data.push('…');
            }
            EventItem {
                time: crate::core::clock::local_time(e.time),
                kind: e.kind.clone(),
                agent: e.agent.clone(),
                handoff: model::event_handoff(e),
                data,
            }
        })
        .collect()
}

/// The frame's values with the page's own.
fn with_frame(frame: &Frame, page: serde_json::Value) -> serde_json::Value {
    let mut v = serde_json::to_value(frame).expect("the frame serialises");
    if let (Some(m), serde_json::Value::Object(p)) = (v.as_object_mut(), page) {
        m.extend(p);
    }
    v
}

/// The home page: Needs you, then every task.
pub fn home(shown: &Shown, seen: &BTreeSet<String>, frame: &Frame, now: DateTime<Utc>) -> serde_json::Value {
    let tasks: Vec<TaskItem> = (0..shown.views.len()).map(|i| task_item(shown, i)).collect();
    with_frame(
        frame,
        json!({
            "needs": needs(shown, seen, None, now),
            "tasks": tasks,
            "version": shown.version,
            "problem": shown.problem,
        }),
    )
}

/// Task `i`'s page, with its progress.md rendered (`progress`, inert HTML).
pub fn task(
    shown: &Shown,
    i: usize,
    seen: &BTreeSet<String>,
    frame: &Frame,
    progress: String,
    now: DateTime<Utc>,
) -> serde_json::Value {
    let t = task_item(shown, i);
    with_frame(
        frame,
        json!({
            "link": t.link.clone(),
            "t": t,
            "needs": needs(shown, seen, Some(i), now),
            "agents": agents(shown, i),
            "events": events(shown, i),
            "progress": progress,
            "version": shown.version,
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_terminals_key_hints_are_left_to_the_terminal() {
        assert_eq!(
            without_key_hints("pane died (signal 9); Enter to look, or restart it"),
            "pane died (signal 9)"
        );
        assert_eq!(
            without_key_hints("wants to run \"x\" (no rule); a allow, d deny"),
            "wants to run \"x\" (no rule)"
        );
        assert_eq!(without_key_hints("BLOCKED: no disk"), "BLOCKED: no disk");
    }

    #[test]
    fn every_template_parses_and_escapes() {
        let p = Pages::new();
        let html = p.render("login.html", json!({"code": "<b>x</b>", "problem": "\"><script>"}));
        assert!(
            html.contains("&lt;b&gt;x&lt;&#x2f;b&gt;") && html.contains("&quot;&gt;&lt;script&gt;"),
            "{html}"
        );
        assert!(!html.contains("\"><script>"), "{html}");
    }
}
