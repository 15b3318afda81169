//! Drawing into ratatui's TestBackend: each kind of row on screen, 80x24 and narrower,
//! NO_COLOR, the help and the input lines.

use std::collections::BTreeSet;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Color;

use super::*;
use crate::ui::model::tests::{everything, t0};

fn draw_at(w: u16, h: u16, tasks: &[TaskView], ui: &UiState, theme: Theme) -> Buffer {
    let needs = model::needs(tasks, &BTreeSet::new());
    let rows = model::rows(tasks, &ui.filter);
    let v = View {
        tasks,
        needs: &needs,
        rows: &rows,
        source: "file watches",
        now: t0(),
    };
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    term.draw(|f| draw(f, &v, ui, theme)).unwrap();
    term.backend().buffer().clone()
}

fn text(b: &Buffer) -> Vec<String> {
    (0..b.area.height)
        .map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect::<String>())
        .collect()
}

const COLOR: Theme = Theme { color: true };
const PLAIN: Theme = Theme { color: false };

#[test]
fn needs_you_comes_first_with_every_kind_of_row_at_80x24() {
    let b = draw_at(80, 24, &everything(), &UiState::default(), COLOR);
    let lines = text(&b);
    assert!(lines[0].starts_with("task ui · 2 tasks · 7 need you"), "{}", lines[0]);
    assert!(lines[1].contains("Needs you"), "{}", lines[1]);
    let needs: Vec<&String> = lines[2..8].iter().collect();
    for (i, (word, who)) in [
        ("dialog", "t1/dev"),
        ("escalated", "t1/-"),
        ("dead", "t1/review"),
        ("blocked", "t1/explore"),
        ("unreachable", "t1/architect"),
        ("stale", "t1/plan"),
    ]
    .iter()
    .enumerate()
    {
        assert!(
            needs[i].contains(word) && needs[i].contains(who),
            "row {i}: {}",
            needs[i]
        );
    }
    assert!(needs[0].trim_end().ends_with("4m"), "since at the end: {}", needs[0]);
    assert!(lines.iter().any(|l| l.contains("Tasks and agents")));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("t1 · PLANNING · check-in 3m ago · next in 7m")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("review") && l.contains("dead")),
        "{lines:#?}"
    );
    assert!(lines[23].contains("m:message"), "{}", lines[23]);
    // Every line fits: nothing is drawn past the edge.
    assert!(lines.iter().all(|l| l.chars().count() == 80));
    // The selected row is reversed, the dialog red.
    let dialog_cell = &b[(2, 2)];
    assert_eq!(dialog_cell.fg, Color::Red);
    assert!(b[(20, 2)].modifier.contains(ratatui::style::Modifier::REVERSED));
}

#[test]
fn no_color_draws_without_colours_but_keeps_the_cursor() {
    let b = draw_at(80, 24, &everything(), &UiState::default(), PLAIN);
    for y in 0..24 {
        for x in 0..80 {
            let c = &b[(x, y)];
            assert!(
                matches!(c.fg, Color::Reset) && matches!(c.bg, Color::Reset),
                "colour at {x},{y}: {:?}/{:?}",
                c.fg,
                c.bg
            );
        }
    }
    assert!(b[(20, 2)].modifier.contains(ratatui::style::Modifier::REVERSED));
}

#[test]
fn narrow_terminals_cut_columns_not_rows() {
    for w in [40u16, 60] {
        let b = draw_at(w, 24, &everything(), &UiState::default(), COLOR);
        let lines = text(&b);
        assert!(lines.iter().all(|l| l.chars().count() == w as usize));
        assert!(
            lines[2].contains("dialog") && lines[2].contains("t1/dev"),
            "{w}: {}",
            lines[2]
        );
        assert!(lines.iter().any(|l| l.contains("review")), "{w}: {lines:#?}");
    }
    // A short terminal still shows the title, Needs you and the key line.
    let lines = text(&draw_at(80, 14, &everything(), &UiState::default(), COLOR));
    assert!(lines[1].contains("Needs you") && lines[13].contains("q"), "{lines:#?}");
}

#[test]
fn nothing_needs_you_says_so() {
    let tasks = vec![crate::ui::model::tests::task(
        "quiet",
        vec![crate::ui::model::tests::agent("pm", "running")],
    )];
    let lines = text(&draw_at(80, 24, &tasks, &UiState::default(), COLOR));
    assert!(lines[0].contains("0 need you"));
    assert!(lines[2].contains("nothing needs you"), "{}", lines[2]);
}

#[test]
fn help_message_and_confirm_lines() {
    let mut ui = UiState {
        mode: Mode::Help,
        ..Default::default()
    };
    let lines = text(&draw_at(80, 24, &everything(), &ui, COLOR));
    assert!(lines.iter().any(|l| l.contains("Keys")));
    for (k, _) in HELP {
        assert!(lines.iter().any(|l| l.contains(k)), "{k} missing: {lines:#?}");
    }
    ui.mode = Mode::Message("hello dev".into());
    let lines = text(&draw_at(80, 24, &everything(), &ui, COLOR));
    assert!(lines[23].starts_with("message: hello dev_"), "{}", lines[23]);
    ui.mode = Mode::ConfirmStop;
    let lines = text(&draw_at(80, 24, &everything(), &ui, COLOR));
    assert!(lines[23].starts_with("stop this agent? y"), "{}", lines[23]);
}

#[test]
fn the_selection_decides_the_agent_acted_on() {
    let tasks = everything();
    let needs = model::needs(&tasks, &BTreeSet::new());
    let rows = model::rows(&tasks, "");
    let v = View {
        tasks: &tasks,
        needs: &needs,
        rows: &rows,
        source: "",
        now: t0(),
    };
    let mut ui = UiState::default();
    assert_eq!(v.selected_agent(&ui), Some((0, "dev".into())));
    ui.cursor[0] = 1; // the escalation: the PM
    assert_eq!(v.selected_agent(&ui), Some((0, "pm".into())));
    ui.focus = Focus::Tasks;
    ui.cursor[1] = 3;
    assert_eq!(v.selected_agent(&ui), Some((0, "review".into())));
    ui.cursor[1] = 7;
    assert_eq!(v.selected_agent(&ui), Some((1, "pm".into())));
}

#[test]
fn a_task_line_carries_what_the_team_has_cost() {
    use crate::core::cost::usage::Tokens;
    use crate::core::cost::view::{AgentCost, CostView};
    let mut tasks = everything();
    let dev = AgentCost {
        agent: "dev".into(),
        known: true,
        unknown_why: None,
        tokens: Tokens {
            input: 12_000,
            output: 3_000,
            cache_creation: 0,
            cache_read: 0,
        },
        total_tokens: 15_000,
        by_model: Default::default(),
        answers: 4,
        usd: Some(0.42),
        skipped_lines: 0,
        context: None,
        compactions: 0,
    };
    let mut dev = dev;
    dev.context = Some(crate::core::cost::view::ContextFill::of(
        "claude-sonnet-5",
        &Tokens {
            input: 90_000,
            output: 0,
            cache_creation: 0,
            cache_read: 0,
        },
        Some(200_000),
    ));
    dev.compactions = 1;
    tasks[0].status.cost = Some(CostView::new(vec![dev], None, Default::default()));
    let lines = text(&draw_at(100, 24, &tasks, &UiState::default(), COLOR));
    assert!(
        lines
            .iter()
            .any(|l| l.contains("t1 · PLANNING") && l.contains("15.0k tokens ($0.42)")),
        "{lines:#?}"
    );
    // Each agent's row says how full its context is; unknown fills say so.
    assert!(
        lines.iter().any(|l| l.contains("  dev") && l.contains("ctx 45%+c")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| !l.contains("  dev") && l.contains("ctx -")),
        "{lines:#?}"
    );
}
