//! Drawing `task ui`: the view model onto a ratatui frame, nothing else. Pure (no I/O,
//! the time passed in), so tests draw into ratatui's TestBackend and read the buffer.

use chrono::{DateTime, Local, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, List, ListItem, ListState, Paragraph};

use super::keys::{Focus, HELP, Mode, UiState};
use super::model::{self, Need, Row, TaskView, Why};

/// Colours or none: `NO_COLOR` set (to anything) means none, only bold and reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    /// Whether colours are used.
    pub color: bool,
}

impl Theme {
    /// From the environment: colour unless `NO_COLOR` is set and not empty (no-color.org).
    pub fn from_env() -> Theme {
        Theme {
            color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        }
    }

    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    fn why(self, w: Why) -> Style {
        match w {
            Why::Dialog | Why::Permit | Why::Escalation | Why::Dead => self.fg(Color::Red).add_modifier(Modifier::BOLD),
            Why::Blocked | Why::Unreachable => self.fg(Color::Yellow),
            Why::StaleLane | Why::Paused => self.fg(Color::Cyan),
        }
    }
}

/// Everything one frame shows.
pub struct View<'a> {
    /// The tasks, in list order.
    pub tasks: &'a [TaskView],
    /// "Needs you", most urgent first.
    pub needs: &'a [Need],
    /// The Tasks and agents rows (filtered).
    pub rows: &'a [Row],
    /// Where the data comes from, for the title line (`daemon`, `file watches`).
    pub source: &'a str,
    /// Now, for every "since" and "idle".
    pub now: DateTime<Utc>,
}

impl View<'_> {
    /// The task the Events list shows: the selected Needs-you item's, or the selected row's.
    pub fn selected_task(&self, ui: &UiState) -> Option<usize> {
        let from_row = || {
            self.rows.get(ui.cursor[1]).map(|r| match r {
                Row::Task(i) | Row::Agent(i, _) => *i,
            })
        };
        match ui.focus {
            Focus::Needs => self
                .needs
                .get(ui.cursor[0])
                .and_then(|n| self.tasks.iter().position(|t| t.status.task == n.task))
                .or_else(from_row),
            _ => from_row(),
        }
    }

    /// The agent an action applies to: the Needs-you item's, or the selected agent row's
    /// (a task row means its PM).
    pub fn selected_agent(&self, ui: &UiState) -> Option<(usize, String)> {
        match ui.focus {
            Focus::Needs => {
                let n = self.needs.get(ui.cursor[0])?;
                let i = self.tasks.iter().position(|t| t.status.task == n.task)?;
                Some((i, n.agent.clone().unwrap_or_else(|| "pm".into())))
            }
            _ => match self.rows.get(ui.cursor[1])? {
                Row::Task(i) => Some((*i, "pm".into())),
                Row::Agent(i, j) => Some((*i, self.tasks[*i].status.agents[*j].name.clone())),
            },
        }
    }

    /// The lengths of the three lists, for the cursor.
    pub fn lens(&self, ui: &UiState) -> [usize; 3] {
        let ev = self
            .selected_task(ui)
            .map_or(0, |i| model::events(&self.tasks[i], &ui.filter).len());
        [self.needs.len(), self.rows.len(), ev]
    }
}

/// Fit `s` into `w` columns: cut with `…`, or pad with spaces.
fn fit(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n <= w {
        format!("{s:<w$}")
    } else if w == 0 {
        String::new()
    } else {
        let mut out: String = s.chars().take(w - 1).collect();
        out.push('…');
        out
    }
}

fn block(title: &str, focused: bool, theme: Theme) -> Block<'static> {
    let style = if focused {
        theme.fg(Color::White).add_modifier(Modifier::BOLD)
    } else {
        Style::default()
    };
    Block::default()
        .borders(Borders::TOP)
        .title(Span::styled(format!(" {title} "), style))
}

/// Draw one frame.
pub fn draw(f: &mut Frame, v: &View, ui: &UiState, theme: Theme) {
    let area = f.area();
    let needs_h = (v.needs.len().clamp(1, 6) + 1) as u16;
    let events_h = if area.height >= 20 { 6 } else { 4 };
    let [title, needs, tasks, events, bottom] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(needs_h),
        Constraint::Min(3),
        Constraint::Length(events_h),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_title(f, title, v, theme);
    draw_needs(f, needs, v, ui, theme);
    draw_tasks(f, tasks, v, ui, theme);
    draw_events(f, events, v, ui, theme);
    draw_bottom(f, bottom, ui, theme);
    if ui.mode == Mode::Help {
        draw_help(f, area, theme);
    }
}

fn draw_title(f: &mut Frame, r: Rect, v: &View, theme: Theme) {
    let clock = v.now.with_timezone(&Local).format("%H:%M:%S").to_string();
    let left = format!(
        "task ui · {} task{} · {} need{} you · {}",
        v.tasks.len(),
        if v.tasks.len() == 1 { "" } else { "s" },
        v.needs.len(),
        if v.needs.len() == 1 { "s" } else { "" },
        v.source
    );
    let w = r.width as usize;
    let text = if left.chars().count() + clock.len() < w {
        format!("{left}{}{clock}", " ".repeat(w - left.chars().count() - clock.len()))
    } else {
        fit(&left, w)
    };
    f.render_widget(
        Paragraph::new(text).style(theme.fg(Color::Black).add_modifier(Modifier::REVERSED)),
        r,
    );
}

fn list(f: &mut Frame, r: Rect, items: Vec<ListItem>, selected: Option<usize>, focused: bool, b: Block) {
    let mut st = ListState::default();
    st.select(if focused { selected } else { None });
    let l = List::new(items)
        .block(b)
        .highlight_symbol("> ")
        .highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    f.render_stateful_widget(l, r, &mut st);
}

/// Columns left for a list's text: the selection marker `> ` takes two.
fn list_width(r: Rect) -> usize {
    (r.width as usize).saturating_sub(2)
}

fn draw_needs(f: &mut Frame, r: Rect, v: &View, ui: &UiState, theme: Theme) {
    let w = list_width(r);
    let focused = ui.focus == Focus::Needs;
    let items: Vec<ListItem> = if v.needs.is_empty() {
        vec![ListItem::new("  nothing needs you")]
    } else {
        v.needs
            .iter()
            .map(|n| {
                let who = format!("{}/{}", n.task, n.agent.as_deref().unwrap_or("-"));
                let since = model::since(n.since, v.now);
                let fixed = 12 + 1 + 20 + 1 + 5 + 1;
                let text_w = w.saturating_sub(fixed);
                let (who_w, text_w) = if w < 60 {
                    (14, w.saturating_sub(12 + 1 + 14 + 1))
                } else {
                    (20, text_w)
                };
                let mut spans = vec![
                    Span::styled(fit(&format!(" {}", n.why.word()), 12), theme.why(n.why)),
                    Span::raw(" "),
                    Span::raw(fit(&who, who_w)),
                    Span::raw(" "),
                    Span::raw(fit(&n.text, text_w)),
                ];
                if w >= 58 {
                    spans.push(Span::raw(" "));
                    spans.push(Span::raw(format!("{since:>5}")));
                }
                ListItem::new(Line::from(spans))
            })
            .collect()
    };
    let sel = (!v.needs.is_empty()).then_some(ui.cursor[0]);
    let title = if v.needs.is_empty() {
        "Needs you".to_string()
    } else {
        format!("Needs you ({})", v.needs.len())
    };
    list(f, r, items, sel, focused, block(&title, focused, theme));
}

fn draw_tasks(f: &mut Frame, r: Rect, v: &View, ui: &UiState, theme: Theme) {
    let w = list_width(r);
    let narrow = w < 70;
    let focused = ui.focus == Focus::Tasks;
    let items: Vec<ListItem> = v
        .rows
        .iter()
        .map(|row| match row {
            Row::Task(i) => {
                let s = &v.tasks[*i].status;
                let next = s
                    .next_checkin
                    .map(|t| format!("next in {}", model::ago(t.signed_duration_since(v.now).num_seconds())))
                    .unwrap_or_else(|| "no schedule".into());
                let last = match s.last_checkin {
                    Some(t) => format!("check-in {} ago", model::since(Some(t), v.now)),
                    None => "never checked in".into(),
                };
                let mut text = format!("{} · {} · {last} · {next}", s.task, s.phase);
                if let Some(c) = s.cost.as_ref().and_then(crate::core::cost::view::short) {
                    text.push_str(&format!(" · {c}"));
                }
                ListItem::new(Line::from(Span::styled(
                    fit(&text, w),
                    Style::default().add_modifier(Modifier::BOLD),
                )))
            }
            Row::Agent(i, j) => {
                let s = &v.tasks[*i].status;
                let a = &s.agents[*j];
                let state = match a.pane {
                    Some(p) if a.state == "running" && p != crate::core::model::PaneState::Alive => p.to_string(),
                    _ => a.state.clone(),
                };
                let idle = a.idle_secs.map(model::ago).unwrap_or_else(|| "-".into());
                let last = a
                    .last_status
                    .map(|s| s.as_str().to_string())
                    .unwrap_or_else(|| "-".into());
                let next = a.recommended_next.clone().unwrap_or_else(|| "-".into());
                let lane = model::lane_word(s, &a.name);
                let state_style = match state.as_str() {
                    "running" => theme.fg(Color::Green),
                    "dead" | "gone" | "blocked" => theme.fg(Color::Red),
                    _ => Style::default(),
                };
                let mut spans = vec![
                    Span::raw(fit(&format!("  {}", a.name), 12)),
                    Span::styled(fit(&state, 9), state_style),
                    Span::raw(fit(&last, 12)),
                    Span::raw(fit(&idle, 5)),
                    Span::raw(fit(&lane, 12)),
                ];
                if !narrow {
                    spans.push(Span::raw(fit(&format!("next:{next}"), 12)));
                    spans.push(Span::raw(fit(&model::fill_word(s, &a.name), 10)));
                    spans.push(Span::raw(fit(&a.host, w.saturating_sub(72))));
                }
                ListItem::new(Line::from(spans))
            }
        })
        .collect();
    let title = if ui.filter.is_empty() {
        "Tasks and agents".to_string()
    } else {
        format!("Tasks and agents (filter: {})", ui.filter)
    };
    let sel = (!v.rows.is_empty()).then_some(ui.cursor[1]);
    list(f, r, items, sel, focused, block(&title, focused, theme));
}

fn draw_events(f: &mut Frame, r: Rect, v: &View, ui: &UiState, theme: Theme) {
    let w = list_width(r);
    let focused = ui.focus == Focus::Events;
    let (title, items) = match v.selected_task(ui) {
        Some(i) => {
            let t = &v.tasks[i];
            let items: Vec<ListItem> = model::events(t, &ui.filter)
                .into_iter()
                .map(|e| {
                    let mut s = format!("{} {}", e.time.with_timezone(&Local).format("%H:%M:%S"), e.kind);
                    if let Some(a) = &e.agent {
                        s.push_str(&format!(" {a}"));
                    }
                    if let serde_json::Value::Object(m) = &e.data {
                        for (k, v) in m {
                            match v {
                                serde_json::Value::String(x) => s.push_str(&format!(" {k}={x}")),
                                other => s.push_str(&format!(" {k}={other}")),
                            }
                        }
                    }
                    ListItem::new(fit(&s, w))
                })
                .collect();
            (format!("Events of {}", t.status.task), items)
        }
        None => ("Events".to_string(), Vec::new()),
    };
    let sel = (!items.is_empty()).then_some(ui.cursor[2]);
    list(f, r, items, sel, focused, block(&title, focused, theme));
}

fn draw_bottom(f: &mut Frame, r: Rect, ui: &UiState, theme: Theme) {
    let w = r.width as usize;
    let text = match &ui.mode {
        Mode::Filter => format!("/{}_", ui.filter),
        Mode::Message(m) => format!("message: {m}_   (Enter sends, Esc cancels)"),
        Mode::ConfirmStop => "stop this agent? y to stop, any other key keeps it".to_string(),
        _ => match &ui.note {
            Some(n) => n.clone(),
            None if ui.read_only => "read-only · Tab j/k Enter p / ? q".to_string(),
            None => "Tab j/k Enter:attach m:message c:check-in x:stop p:progress /:filter ?:help q".to_string(),
        },
    };
    let style = match ui.mode {
        Mode::ConfirmStop => theme.fg(Color::Red).add_modifier(Modifier::BOLD),
        _ => Style::default(),
    };
    f.render_widget(Paragraph::new(fit(&text, w)).style(style), r);
}

fn draw_help(f: &mut Frame, area: Rect, theme: Theme) {
    let h = (HELP.len() as u16 + 3).min(area.height);
    let w = area.width.min(78);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(fit(k, 16), theme.fg(Color::Yellow)),
                Span::raw(*what),
            ])
        })
        .chain(std::iter::once(Line::from("any key closes this")))
        .collect();
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" Keys ")),
        r,
    );
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
