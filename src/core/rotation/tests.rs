use super::*;

fn policy(pairs: &[(&str, &str)]) -> Result<Policy, String> {
    Policy::parse(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
}

#[test]
fn settings_parse_with_defaults_and_clear_errors() {
    assert_eq!(
        policy(&[]).unwrap(),
        Policy {
            at_percent: Some(60),
            every: None
        }
    );
    assert_eq!(policy(&[("rotate_at", "75%")]).unwrap().at_percent, Some(75));
    assert_eq!(policy(&[("rotate_at", "off")]).unwrap().at_percent, None);
    assert_eq!(policy(&[("rotate_every", "20")]).unwrap().every, Some(20));
    assert!(policy(&[("rotate_at", "lots")]).unwrap_err().contains("rotate_at"));
    assert!(policy(&[("rotate_at", "100%")]).unwrap_err().contains("outside"));
    assert!(policy(&[("rotate_every", "0")]).unwrap_err().contains("rotate_every"));
}

#[test]
fn due_by_fill_or_by_count() {
    let p = policy(&[("rotate_every", "5")]).unwrap();
    assert_eq!(due(&p, None, 0), None);
    assert_eq!(due(&p, Some((59, 118_000)), 4), None);
    assert_eq!(
        due(&p, Some((60, 120_000)), 0),
        Some(Why::Context {
            percent: 60,
            tokens: 120_000
        })
    );
    assert_eq!(due(&p, None, 5), Some(Why::Every { checkins: 5 }));
    let off = policy(&[("rotate_at", "off")]).unwrap();
    assert_eq!(due(&off, Some((99, 1)), 100), None);
}

#[test]
fn long_parts_keep_their_end() {
    assert_eq!(tail("  ", 10), "(none yet)");
    assert_eq!(tail("a\nb", 10), "a\nb");
    let text = (0..100).map(|i| format!("line {i}")).collect::<Vec<_>>().join("\n");
    let t = tail(&text, 30);
    assert!(t.starts_with("(earlier part left out"), "{t}");
    assert!(t.ends_with("line 99"), "{t}");
    assert!(!t.contains("line 1\n"), "{t}");
    // Multi-byte text is cut on a character boundary.
    let t = tail(&"é".repeat(50), 10);
    assert!(t.ends_with('é'));
}

#[test]
fn the_resume_preamble_replaces_the_first_instruction() {
    let pm = "# Agent: pm\nYou are the PM.\n\nBegin now: read task.md and write the first handoff.\n";
    let block = resume_block(&Parts {
        task_started: "09:00".into(),
        why: Why::Every { checkins: 3 }.describe(),
        phase: "DEVELOPING".into(),
        decisions_path: "/t/scratchpad/pm/decisions.md".into(),
        decisions: "- chose serde".into(),
        lanes: vec![lane_line("dev", None, Some("pm-1.md")).unwrap()],
        last_handoffs: vec!["dev: dev-1.md IN_PROGRESS".into()],
        waiting: vec![],
        progress_path: "/t/progress.md".into(),
        progress: String::new(),
    });
    let text = resume_preamble(pm, &block);
    assert!(!text.contains("Begin now"), "{text}");
    assert!(text.starts_with("# Agent: pm"));
    for want in [
        "Phase: DEVELOPING",
        "- chose serde",
        "- dev: not running; a spawn is queued with pm-1.md",
        "- dev: dev-1.md IN_PROGRESS",
        "### Waiting on you or a human\n- none",
        "(none yet)",
        "it had 3 check-ins",
        "Continue where the previous PM left off",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    assert_eq!(lane_line("x", None, None), None);
}

#[test]
fn a_spoke_is_asked_then_continued_from_its_checkpoint_or_what_it_said() {
    let t0: DateTime<Utc> = "2026-11-27T10:00:00Z".parse().unwrap();
    let g = CHECKPOINT_GRACE;
    let later = |s: i64| t0 + chrono::Duration::seconds(s);
    assert_eq!(
        spoke_step(Some(60), Some(59), None, true, None, g, t0),
        SpokeStep::Nothing
    );
    assert_eq!(
        spoke_step(Some(60), Some(61), None, true, None, g, t0),
        SpokeStep::Ask { percent: 61 }
    );
    assert_eq!(spoke_step(None, Some(99), None, true, None, g, t0), SpokeStep::Nothing);
    assert_eq!(
        spoke_step(Some(60), Some(99), None, false, None, g, t0),
        SpokeStep::Nothing
    );
    assert_eq!(
        spoke_step(Some(60), Some(99), Some(t0), true, None, g, later(60)),
        SpokeStep::Nothing
    );
    assert_eq!(
        spoke_step(Some(60), Some(99), Some(t0), true, Some("dev-1.md"), g, later(60)),
        SpokeStep::FromCheckpoint {
            file: "dev-1.md".into()
        }
    );
    assert_eq!(
        spoke_step(Some(60), Some(99), Some(t0), true, None, g, later(600)),
        SpokeStep::FromTranscript
    );
    assert_eq!(
        spoke_step(Some(60), Some(99), Some(t0), false, None, g, later(600)),
        SpokeStep::Forget
    );
}

#[test]
fn the_checkpoint_request_and_what_a_fresh_spoke_continues_from() {
    let m = checkpoint_message("t1", "dev", "task", 62);
    assert!(m.starts_with("Your conversation's context is 62% full."), "{m}");
    assert!(m.contains("task handoff t1 --from dev --status IN_PROGRESS"), "{m}");
    let b = continue_block(Some(("dev-2.md", "## Completed Work\nhalf\n")), None);
    assert!(b.contains("(dev-2.md)") && b.contains("## Completed Work\nhalf"), "{b}");
    let jsonl = [
        r#"{"type":"user","message":{"content":"go"}}"#,
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"I read writer.rs."}]}}"#,
        r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]}}"#,
        "not json",
        r#"{"type":"assistant","message":{"content":[{"type":"text","text":"The pool leaks on error."}]}}"#,
    ]
    .join("\n");
    assert_eq!(
        assistant_tail(&jsonl, 1000),
        "I read writer.rs.\n\nThe pool leaks on error."
    );
    let b = continue_block(None, Some(&assistant_tail(&jsonl, 1000)));
    assert!(b.contains("The pool leaks on error."), "{b}");
    assert!(continue_block(None, None).contains("Check the files"));
}
