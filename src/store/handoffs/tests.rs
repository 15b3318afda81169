//! The handoff table: every example in the seeds plus malformed inputs → the typed result.

use super::*;
use crate::core::handoff::*;

const SEED_PM: &str = "# Handoff: pm
**Timestamp:** 2025-11-27 15:30:00 PST
**Target:** dev
**Status:** IN_PROGRESS

## Instructions
Implement the writer pool fix.

## Context
Explore found 3 modules.

## Skills to Load
- dds-testing
- device-access

## Success Criteria
All tests pass.
";

const SEED_AGENT_TEMPLATE: &str = "# Handoff: dev
**Timestamp:** 2025-11-27 15:45:00 PST
**Status:** COMPLETE | BLOCKED | NEEDS_REVIEW

## Completed Work
[What was accomplished]

## Artifacts Generated
- artifacts/path/to/file1.py
- artifacts/path/to/file2.md

## Blockers (if BLOCKED)
[What prevented progress]

## Skill Gaps (if BLOCKED)
[What skill/context is missing]
";

const SEED_003_RESULT: &str = "Cycle Result: PASS

## Summary
- Work ID: WORK-081
- Phases completed: PLAN, DO, CHECK, DONE, CHAIN

## Gates Honored (A5 Governance Enforcement)
- preflight-checker: PASS
- design-review-validation: FAIL
- docs-check: SKIPPED
- deliverables-verified: 3/4 complete

## Outcome
Implemented the pattern.

## Artifacts
- .claude/agents/implementation-cycle-agent.md (created)
- `.claude/agents/README.md` (updated)

## Next Action
Work closed. Suggest: investigation-cycle

## Blockers
None
";

fn dev_complete() -> String {
    "# Handoff: dev\n**Timestamp:** 2025-11-27 11:30:00 UTC\n**Target:** pm\n**Status:** NEEDS_REVIEW\n**Recommended Next:** review\n\n## Completed Work\nImplemented test 1.\n\n## Artifacts Generated\n- artifacts/code/repro_test.cpp\n\n## Blockers\nNone\n\n## Gates Honored\n- build: PASS\n".into()
}

#[test]
fn seed_pm_instructions() {
    let h = parse(SEED_PM);
    assert_eq!(h.title_agent.as_deref(), Some("pm"));
    assert_eq!(h.timestamp.as_deref(), Some("2025-11-27 15:30:00 PST"));
    assert_eq!(h.target.as_deref(), Some("dev"));
    assert_eq!(h.status, Status::InProgress);
    assert_eq!(
        h.sections.instructions.as_deref(),
        Some("Implement the writer pool fix.")
    );
    assert_eq!(h.sections.context.as_deref(), Some("Explore found 3 modules."));
    assert_eq!(
        h.sections.skills_to_load,
        Some(vec!["dds-testing".to_string(), "device-access".to_string()])
    );
    assert_eq!(h.sections.success_criteria.as_deref(), Some("All tests pass."));
    assert_eq!(h.sections.completed_work, None);
    assert!(h.warnings.is_empty(), "{:?}", h.warnings);
}

#[test]
fn seed_agent_template_is_ambiguous_so_blocked() {
    let h = parse(SEED_AGENT_TEMPLATE);
    assert_eq!(h.status, Status::Blocked);
    assert!(
        h.warnings.iter().any(|w| w.contains("several values")),
        "{:?}",
        h.warnings
    );
    assert_eq!(
        h.sections.artifacts_generated,
        Some(vec![
            "artifacts/path/to/file1.py".into(),
            "artifacts/path/to/file2.md".into()
        ])
    );
    assert_eq!(h.sections.blockers.as_deref(), Some("[What prevented progress]"));
    assert_eq!(
        h.sections.skill_gaps.as_deref(),
        Some("[What skill/context is missing]")
    );
}

#[test]
fn seed_003_structured_result() {
    let h = parse(SEED_003_RESULT);
    assert_eq!(h.cycle_result.as_deref(), Some("PASS"));
    assert_eq!(h.status, Status::Complete);
    let gates = h.sections.gates_honored.clone().unwrap();
    assert_eq!(gates.len(), 4);
    assert_eq!(
        gates[0],
        Gate {
            name: "preflight-checker".into(),
            result: GateResult::Pass
        }
    );
    assert_eq!(gates[1].result, GateResult::Fail);
    assert_eq!(gates[2].result, GateResult::Skipped);
    assert_eq!(gates[3].result, GateResult::Other("3/4 complete".into()));
    assert_eq!(
        h.sections.artifacts_generated,
        Some(vec![
            ".claude/agents/implementation-cycle-agent.md".into(),
            ".claude/agents/README.md".into()
        ])
    );
    assert!(h.sections.next_action.as_deref().unwrap().starts_with("Work closed."));
    assert_eq!(h.blockers(), None, "'None' is no blocker");
    assert!(h.sections.summary.is_some() && h.sections.outcome.is_some());
    assert!(
        h.warnings.iter().any(|w| w.contains("title")),
        "no '# Handoff' title is noted"
    );
}

#[test]
fn seed_003_missing_result_is_blocked() {
    let h = parse("## Summary\nDid things.\n");
    assert_eq!(h.status, Status::Blocked);
    assert!(h.warnings.iter().any(|w| w.contains("no status")));
}

#[test]
fn well_formed_agent_handoff() {
    let h = parse(&dev_complete());
    assert_eq!(h.status, Status::NeedsReview);
    assert_eq!(h.recommended_next.as_deref(), Some("review"));
    assert_eq!(h.target.as_deref(), Some("pm"));
    assert_eq!(
        h.sections.artifacts_generated,
        Some(vec!["artifacts/code/repro_test.cpp".into()])
    );
    assert_eq!(h.sections.gates_honored.as_ref().unwrap()[0].result, GateResult::Pass);
    assert_eq!(h.summary(), "Implemented test 1.");
    assert!(h.warnings.is_empty(), "{:?}", h.warnings);
}

#[test]
fn missing_status_is_blocked_with_warning() {
    let h = parse("# Handoff: dev\n\n## Completed Work\nStuff\n");
    assert_eq!(h.status, Status::Blocked);
    assert_eq!(h.warnings, vec!["no status; treated as BLOCKED".to_string()]);
}

#[test]
fn lower_case_status_is_accepted_with_warning() {
    let h = parse("# Handoff: dev\n**Status:** complete\n");
    assert_eq!(h.status, Status::Complete);
    assert!(h.warnings.iter().any(|w| w.contains("accepted")));
    let h = parse("# Handoff: dev\n**Status:** Needs Review\n");
    assert_eq!(h.status, Status::NeedsReview);
}

#[test]
fn unknown_status_is_blocked() {
    let h = parse("# Handoff: dev\n**Status:** FINISHED-ISH\n");
    assert_eq!(h.status, Status::Blocked);
    assert_eq!(h.status_written.as_deref(), Some("FINISHED-ISH"));
    assert!(h.warnings.iter().any(|w| w.contains("unknown status")));
}

#[test]
fn status_in_code_block_does_not_count() {
    let text = "# Handoff: dev\n\n```\n**Status:** COMPLETE\n## Blockers\nfake\n```\n\n    **Status:** COMPLETE\n";
    let h = parse(text);
    assert_eq!(h.status, Status::Blocked);
    assert_eq!(h.sections.blockers, None, "a heading inside a fence is not a section");
}

#[test]
fn duplicated_headers_first_wins() {
    let h = parse("# Handoff: dev\n**Status:** COMPLETE\n**Status:** BLOCKED\n\n## Blockers\nA\n\n## Blockers\nB\n");
    assert_eq!(h.status, Status::Complete);
    assert_eq!(h.sections.blockers.as_deref(), Some("A"));
    assert_eq!(
        h.warnings.iter().filter(|w| w.contains("twice")).count(),
        2,
        "{:?}",
        h.warnings
    );
}

#[test]
fn crlf_and_bom() {
    let text = format!("\u{feff}{}", dev_complete().replace('\n', "\r\n"));
    let h = parse_bytes(text.as_bytes(), false);
    let clean = parse(&dev_complete());
    assert_eq!(h, clean, "CRLF + BOM parse exactly like LF");
}

#[test]
fn binary_junk_never_panics() {
    let mut bytes: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    bytes.extend_from_slice(b"\n**Status:** COMPLETE\n");
    let h = parse_bytes(&bytes, false);
    assert!(h.warnings.iter().any(|w| w.contains("UTF-8")));
    let h = parse_bytes(&[0xff, 0xfe, 0x00, 0x80], false);
    assert_eq!(h.status, Status::Blocked);
}

#[test]
fn oversized_file_parsed_from_head() {
    let d = tempfile::tempdir().unwrap();
    let mut text = dev_complete();
    text.push_str("\n## Context\n");
    while text.len() < 5 * 1024 * 1024 {
        text.push_str("filler line of context text for the size cap test\n");
    }
    let name = HandoffName::parse("dev-20251127-113000.md").unwrap();
    std::fs::write(d.path().join(name.file_name()), &text).unwrap();
    let l = load(d.path(), &name).unwrap().unwrap();
    assert_eq!(l.size, text.len() as u64);
    assert_eq!(l.handoff.status, Status::NeedsReview);
    assert!(
        l.handoff.warnings.iter().any(|w| w.contains("cap")),
        "{:?}",
        l.handoff.warnings
    );
    assert!(l.handoff.sections.context.as_ref().unwrap().len() <= SIZE_CAP as usize);
}

#[test]
fn title_mismatch_is_noted_and_file_name_wins() {
    let d = tempfile::tempdir().unwrap();
    let name = HandoffName::parse("dev-20251127-113000.md").unwrap();
    std::fs::write(
        d.path().join(name.file_name()),
        "# Handoff: review\n**Status:** COMPLETE\n",
    )
    .unwrap();
    let l = load(d.path(), &name).unwrap().unwrap();
    assert_eq!(l.agent(), "dev");
    assert!(l.handoff.warnings.iter().any(|w| w.contains("title names agent")));
}

#[test]
fn review_verdict() {
    let h = parse("# Handoff: review\n**Status:** COMPLETE\n**Verdict:** REJECTED — missing tests\n");
    assert!(h.is_rejection());
    assert_eq!(h.verdict.as_deref(), Some("REJECTED"));
    assert!(!parse("# Handoff: review\n**Status:** COMPLETE\n**Verdict:** APPROVED\n").is_rejection());
}

#[test]
fn written_handoffs_parse_back() {
    let d = tempfile::tempdir().unwrap();
    let from: crate::core::names::AgentName = "dev".parse().unwrap();
    let next: crate::core::names::AgentName = "review".parse().unwrap();
    let now = chrono::DateTime::parse_from_rfc3339("2025-11-27T11:30:00Z")
        .unwrap()
        .with_timezone(&chrono::Local);
    let h = NewHandoff {
        from: &from,
        status: Status::NeedsReview,
        target: None,
        next: Some(&next),
        body: "## Completed Work\nDone.\n",
        now,
    };
    let p1 = write(d.path(), &h).unwrap();
    let p2 = write(d.path(), &h).unwrap();
    let p3 = write(d.path(), &h).unwrap();
    let stamp = now.format("%Y%m%d-%H%M%S").to_string();
    assert_eq!(p1.file_name().unwrap().to_str().unwrap(), format!("dev-{stamp}.md"));
    assert_eq!(p2.file_name().unwrap().to_str().unwrap(), format!("dev-{stamp}-2.md"));
    assert_eq!(p3.file_name().unwrap().to_str().unwrap(), format!("dev-{stamp}-3.md"));
    let (names, skipped) = list(d.path()).unwrap();
    assert!(skipped.is_empty());
    assert_eq!(names.iter().map(|n| n.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    let l = load(d.path(), &names[0]).unwrap().unwrap();
    assert_eq!(l.handoff.status, Status::NeedsReview);
    assert_eq!(l.handoff.target.as_deref(), Some("pm"));
    assert_eq!(l.handoff.recommended_next.as_deref(), Some("review"));
    assert_eq!(l.handoff.sections.completed_work.as_deref(), Some("Done."));
    assert!(l.handoff.warnings.is_empty(), "{:?}", l.handoff.warnings);
}

mod ledger_semantics {
    use super::*;
    use std::fs;
    use std::time::{Duration, SystemTime};

    fn scan_names(dir: &std::path::Path, ledger: &Ledger) -> Vec<(String, Seen)> {
        let (names, _) = list(dir).unwrap();
        let (c, _) = scan(ledger, dir, &names).unwrap();
        c.into_iter().map(|c| (c.loaded.file, c.seen)).collect()
    }

    fn process(dir: &std::path::Path, ledger: &mut Ledger) -> Vec<(String, Seen)> {
        let (names, _) = list(dir).unwrap();
        let (c, _) = scan(ledger, dir, &names).unwrap();
        for x in &c {
            ledger.record_candidate(x, "2025-11-27T12:00:00Z");
        }
        c.into_iter().map(|c| (c.loaded.file, c.seen)).collect()
    }

    #[test]
    fn old_mtime_is_seen_exactly_once() {
        let d = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::default();
        let p = d.path().join("dev-20200101-000000.md");
        fs::write(&p, dev_complete()).unwrap();
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(
            process(d.path(), &mut ledger),
            vec![("dev-20200101-000000.md".into(), Seen::New)]
        );
        assert!(process(d.path(), &mut ledger).is_empty(), "never twice");
    }

    #[test]
    fn unchanged_never_twice_touched_not_new_rewritten_once() {
        let d = tempfile::tempdir().unwrap();
        let mut ledger = Ledger::default();
        let p = d.path().join("dev-20251127-113000.md");
        fs::write(&p, dev_complete()).unwrap();
        assert_eq!(process(d.path(), &mut ledger).len(), 1);
        assert!(process(d.path(), &mut ledger).is_empty());

        // Touch only: metadata moves, content identical → not new.
        let later = SystemTime::now() + Duration::from_secs(60);
        fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(later)
            .unwrap();
        assert!(scan_names(d.path(), &ledger).is_empty());

        // Rewritten with new content → seen once more, then not again.
        fs::write(&p, dev_complete().replace("test 1", "test 2")).unwrap();
        assert_eq!(
            process(d.path(), &mut ledger),
            vec![("dev-20251127-113000.md".into(), Seen::Changed)]
        );
        assert!(process(d.path(), &mut ledger).is_empty());
    }

    #[test]
    fn symlinks_fifos_and_bad_names_are_skipped_not_read() {
        let d = tempfile::tempdir().unwrap();
        let secret = d.path().join("id_rsa");
        fs::write(&secret, "PRIVATE KEY").unwrap();
        let hd = d.path().join("handoffs");
        fs::create_dir(&hd).unwrap();
        std::os::unix::fs::symlink(&secret, hd.join("dev-20251127-113000.md")).unwrap();
        let fifo = hd.join("dev-20251127-113001.md");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        fs::write(hd.join("notes.md"), "x").unwrap();
        fs::write(hd.join(".dev-20251127-113002.md.tmp"), "x").unwrap();
        fs::write(hd.join("dev-20251127-113003.md"), dev_complete()).unwrap();

        let (names, skipped_names) = list(&hd).unwrap();
        assert_eq!(skipped_names.len(), 1, "notes.md has a bad name; dot files are ignored");
        let (c, skipped) = scan(&Ledger::default(), &hd, &names).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].loaded.file, "dev-20251127-113003.md");
        let reasons: Vec<_> = skipped.iter().map(|s| (s.file.as_str(), s.reason.as_str())).collect();
        assert_eq!(
            reasons,
            vec![
                ("dev-20251127-113000.md", "it is a symbolic link"),
                ("dev-20251127-113001.md", "it is not a regular file"),
            ]
        );
    }
}

mod kept_listing_and_scan {
    use super::*;
    use std::time::Duration;

    /// Let the folder's last change settle, so a listing read next may be kept.
    fn settle() {
        std::thread::sleep(crate::store::parsed::SETTLED + Duration::from_millis(10));
    }

    fn handoff(dir: &Path, file: &str) {
        std::fs::write(dir.join(file), "# Handoff: dev\n**Status:** COMPLETE\n").unwrap();
    }

    /// A `handoffs/` folder holding `files`, its last change settled (not yet watched).
    fn folder(files: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("handoffs");
        std::fs::create_dir(&dir).unwrap();
        for f in files {
            handoff(&dir, f);
        }
        settle();
        (d, dir)
    }

    #[test]
    fn a_watched_folders_listing_is_kept_until_an_entry_or_an_event_changes_it() {
        let (_d, dir) = folder(&["dev-20250101-000000.md"]);
        let a = listing(&dir).unwrap();
        assert!(!Arc::ptr_eq(&a, &listing(&dir).unwrap()), "not watched: read each time");
        memo::watching(&dir);
        let a = listing(&dir).unwrap();
        assert!(Arc::ptr_eq(&a, &listing(&dir).unwrap()), "watched and unchanged: kept");
        // A new file, its event not yet arrived: the folder's version tells.
        handoff(&dir, "dev-20250101-000001.md");
        let b = listing(&dir).unwrap();
        assert_eq!(b.names.len(), 2, "a new entry is seen before its event");
        settle();
        let c = listing(&dir).unwrap();
        assert!(Arc::ptr_eq(&c, &listing(&dir).unwrap()));
        // An event (a file rewritten in place: the folder's version stays) forgets it.
        memo::touched(&dir.join("dev-20250101-000000.md"));
        assert!(!Arc::ptr_eq(&c, &listing(&dir).unwrap()));
        memo::unwatched(&dir);
    }

    #[test]
    fn a_listing_read_right_after_a_change_is_kept_and_amended_by_the_next_event() {
        let (_d, dir) = folder(&["dev-20250101-000000.md"]);
        memo::watching(&dir);
        // A check-in starts at once when a handoff lands: the folder changed a moment ago.
        handoff(&dir, "dev-20250101-000001.md");
        memo::touched(&dir.join("dev-20250101-000001.md"));
        let a = listing(&dir).unwrap();
        assert_eq!(a.names.len(), 2);
        assert!(
            Arc::ptr_eq(&a, &listing(&dir).unwrap()),
            "kept, though read within the timestamp tick of a change"
        );
        handoff(&dir, "dev-20250101-000002.md");
        memo::touched(&dir.join("dev-20250101-000002.md"));
        assert_eq!(listing(&dir).unwrap().names.len(), 3, "the next event's name is added");
        memo::unwatched(&dir);
    }

    fn files_of(names: &[HandoffName]) -> Vec<String> {
        names.iter().map(|n| n.file().to_string()).collect()
    }

    /// What a scan with nothing remembered finds: every name stat'ed, read when its
    /// record differs.
    fn blind_scan(ledger: &Ledger, dir: &Path, l: &Listing) -> Vec<(String, Seen)> {
        let mut m = memo::Scan::blind(dir);
        let (cands, _, _) = scan_with(&mut m, ledger, dir, &l.names).unwrap();
        cands.into_iter().map(|c| (c.loaded.file, c.seen)).collect()
    }

    #[test]
    fn a_scan_looks_only_at_what_the_last_left_open_events_named_and_the_ledger_gained() {
        let many: Vec<String> = (0..40).map(|i| format!("dev-20250101-0000{i:02}.md")).collect();
        let (_d, dir) = folder(&many.iter().map(String::as_str).collect::<Vec<_>>());
        memo::watching(&dir);
        let l = listing(&dir).unwrap();
        let mut recorded = Ledger::default();
        for c in &scan_listing(&Arc::new(Ledger::default()), &dir, &l).unwrap().cands {
            recorded.record_candidate(c, "2025-11-27T12:00:00Z");
        }
        let ledger = Arc::new(recorded);
        assert!(scan_listing(&ledger, &dir, &l).unwrap().cands.is_empty());
        assert_eq!(
            memo::open_names(&dir, &l, &ledger).map(|(n, _)| n.len()),
            Some(0),
            "nothing left open"
        );

        // A new handoff, with its event: the next scan looks at it alone.
        handoff(&dir, "pm-20250102-000000.md");
        memo::touched(&dir.join("pm-20250102-000000.md"));
        let l = listing(&dir).unwrap();
        assert_eq!(
            memo::open_names(&dir, &l, &ledger).map(|(n, _)| files_of(&n)),
            Some(vec!["pm-20250102-000000.md".to_string()])
        );
        let found = scan_listing(&ledger, &dir, &l).unwrap();
        assert_eq!(found.cands.len(), 1);
        // Recorded in a ledger grown from that one: the name it gained, then nothing.
        let mut grown = Ledger::clone(&ledger);
        grown.record_candidate(&found.cands[0], "2025-11-27T12:00:01Z");
        let grown = Arc::new(grown);
        assert_eq!(memo::open_names(&dir, &l, &grown).map(|(n, _)| n.len()), Some(1));
        assert!(scan_listing(&grown, &dir, &l).unwrap().cands.is_empty());
        assert_eq!(memo::open_names(&dir, &l, &grown).map(|(n, _)| n.len()), Some(0));
        // A ledger not grown from it (a fresh one, a repaired state): every name again.
        assert!(memo::open_names(&dir, &l, &Arc::new(Ledger::default())).is_none());
        assert_eq!(
            scan_listing(&Arc::new(Ledger::default()), &dir, &l)
                .unwrap()
                .cands
                .len(),
            41
        );

        // The folder changed with no event: read in full, and what was open is dropped.
        settle();
        handoff(&dir, "pm-20250102-000001.md");
        let l = listing(&dir).unwrap();
        assert_eq!(l.names.len(), 42);
        assert!(memo::open_names(&dir, &l, &grown).is_none());
        assert_eq!(
            scan_listing(&grown, &dir, &l).unwrap().cands.len(),
            1,
            "found by a full scan"
        );
        memo::unwatched(&dir);
    }

    #[test]
    fn an_event_between_the_listing_and_the_scan_leaves_its_name_open() {
        let (_d, dir) = folder(&["dev-20250101-000000.md"]);
        memo::watching(&dir);
        let ledger = Arc::new(Ledger::default());
        for round in 1..=3 {
            let stale = listing(&dir).unwrap();
            // Renamed in after the caller's listing, before its scan: that scan cannot see
            // it, and must not leave the folder believing nothing else is open.
            let file = format!("pm-20250102-00000{round}.md");
            handoff(&dir, &file);
            memo::touched(&dir.join(&file));
            assert_eq!(scan_listing(&ledger, &dir, &stale).unwrap().cands.len(), round);
            let fresh = listing(&dir).unwrap();
            let found = scan_listing(&ledger, &dir, &fresh).unwrap();
            assert!(found.cands.iter().any(|c| c.loaded.file == file), "round {round}");
            assert_eq!(found.cands.len(), round + 1);
        }
        memo::unwatched(&dir);
    }

    /// Whatever happens in the folder (handoffs new, rewritten, removed, each with its
    /// event) and to the ledger (records gained, or a fresh ledger), a scan finds what a
    /// scan with nothing remembered finds.
    #[test]
    fn scans_of_what_was_left_open_find_what_a_blind_scan_finds() {
        for seed in [0x9e37_79b9_7f4a_7c15u64, 0x2545_f491_4f6c_dd1d, 7] {
            left_open_against_blind(seed);
        }
    }

    fn left_open_against_blind(seed: u64) {
        let (_d, dir) = folder(&["dev-20250101-000000.md"]);
        memo::watching(&dir);
        let mut ledger = Arc::new(Ledger::default());
        let mut dice = seed;
        let mut roll = |n: u64| {
            dice ^= dice << 13;
            dice ^= dice >> 7;
            dice ^= dice << 17;
            dice % n
        };
        for step in 0..300 {
            let file = format!(
                "{}-20250101-00{:02}{:02}.md",
                ["dev", "pm", "test"][roll(3) as usize],
                roll(3),
                roll(60)
            );
            match roll(10) {
                0..=4 => {
                    std::fs::write(
                        dir.join(&file),
                        format!("# Handoff: dev\n**Status:** COMPLETE\n\nstep {step}\n"),
                    )
                    .unwrap();
                    memo::touched(&dir.join(&file));
                }
                5 => {
                    if std::fs::remove_file(dir.join(&file)).is_ok() {
                        memo::touched(&dir.join(&file));
                    }
                }
                6..=8 => {
                    let l = listing(&dir).unwrap();
                    let found = scan_listing(&ledger, &dir, &l).unwrap();
                    let mut grown = Ledger::clone(&ledger);
                    for c in found.cands.iter().take(1 + roll(3) as usize) {
                        grown.record_candidate(c, "2025-11-27T12:00:00Z");
                    }
                    ledger = Arc::new(grown);
                }
                _ => {
                    if roll(4) == 0 {
                        ledger = Arc::new(Ledger::default());
                    }
                }
            }
            let l = listing(&dir).unwrap();
            let found: Vec<_> = scan_listing(&ledger, &dir, &l)
                .unwrap()
                .cands
                .iter()
                .map(|c| (c.loaded.file.clone(), c.seen))
                .collect();
            assert_eq!(found, blind_scan(&ledger, &dir, &l), "seed {seed}, step {step}");
            assert_eq!(
                files_of(&l.names),
                files_of(&read_listing(&dir).unwrap().names),
                "seed {seed}, step {step}"
            );
        }
        memo::unwatched(&dir);
    }

    #[test]
    fn a_scan_is_reused_only_for_the_same_listing_and_ledger_with_no_event_between() {
        let (_d, dir) = folder(&["dev-20250101-000000.md"]);
        memo::watching(&dir);
        let l = listing(&dir).unwrap();
        let ledger = Arc::new(Ledger::default());
        let first = scan_listing(&ledger, &dir, &l).unwrap();
        assert_eq!(first.cands.len(), 1);
        assert!(Arc::ptr_eq(&first, &scan_listing(&ledger, &dir, &l).unwrap()), "reused");
        // The handoff recorded: a new ledger, scanned afresh.
        let mut recorded = Ledger::default();
        recorded.record_candidate(&first.cands[0], "2025-11-27T12:00:00Z");
        let recorded = Arc::new(recorded);
        assert!(scan_listing(&recorded, &dir, &l).unwrap().cands.is_empty());
        // Amended in place (same name, same folder version): its event forgets the scan.
        let again = scan_listing(&ledger, &dir, &l).unwrap();
        std::fs::write(
            dir.join("dev-20250101-000000.md"),
            "# Handoff: dev\n**Status:** BLOCKED\n",
        )
        .unwrap();
        memo::touched(&dir.join("dev-20250101-000000.md"));
        let after = scan_listing(&ledger, &dir, &l).unwrap();
        assert!(!Arc::ptr_eq(&again, &after));
        assert_eq!(after.cands[0].loaded.handoff.status, Status::Blocked);
        memo::unwatched(&dir);
    }

    /// The kept listing as a full read of the folder would give it.
    fn as_read(dir: &Path) -> (Vec<String>, Vec<String>) {
        let kept = listing(dir).unwrap();
        let Listing { names, skipped, agents } = read_listing(dir).unwrap();
        assert_eq!(kept.agents, agents, "each agent's count");
        let files = |n: &[HandoffName]| n.iter().map(|n| n.file().to_string()).collect::<Vec<_>>();
        let mut ks: Vec<String> = kept.skipped.iter().map(|s| s.file.clone()).collect();
        let mut rs: Vec<String> = skipped.iter().map(|s| s.file.clone()).collect();
        ks.sort();
        rs.sort();
        assert_eq!(files(&kept.names), files(&names), "names in timeline order");
        assert_eq!(ks, rs, "skipped entries");
        (files(&kept.names), ks)
    }

    #[test]
    fn after_events_only_their_names_are_looked_at_and_the_listing_is_what_a_read_gives() {
        let (_d, dir) = folder(&["dev-20250101-000005.md", "pm-20250101-000001.md"]);
        memo::watching(&dir);
        let first = listing(&dir).unwrap();
        assert_eq!(first.names.len(), 2);
        drop(first);
        // Each change with its event: amended, never read in full (a full read would
        // also pick up the file written below without an event).
        let step = |write: &dyn Fn(), event: &str| {
            write();
            settle();
            memo::touched(&dir.join(event));
        };
        // Only the names events carry are looked at: a file whose event is still on its
        // way, written beside one whose event came, waits for its own.
        step(
            &|| {
                handoff(&dir, "ops-20250101-000007.md");
                handoff(&dir, "test-20250101-000003.md");
            },
            "test-20250101-000003.md",
        );
        let kept = listing(&dir).unwrap();
        assert!(kept.names.iter().any(|n| n.file() == "test-20250101-000003.md"));
        assert!(
            !kept.names.iter().any(|n| n.file() == "ops-20250101-000007.md"),
            "amended, not read in full"
        );
        drop(kept);
        step(
            &|| std::fs::remove_file(dir.join("ops-20250101-000007.md")).unwrap(),
            "ops-20250101-000007.md",
        );
        let (names, _) = as_read(&dir);
        assert_eq!(
            names,
            [
                "pm-20250101-000001.md",
                "test-20250101-000003.md",
                "dev-20250101-000005.md"
            ]
        );
        step(
            &|| std::fs::remove_file(dir.join("pm-20250101-000001.md")).unwrap(),
            "pm-20250101-000001.md",
        );
        step(&|| std::fs::write(dir.join("notes.txt"), "x").unwrap(), "notes.txt");
        step(
            &|| handoff(&dir, "review-20250101-000003.md"),
            "review-20250101-000003.md",
        );
        step(&|| std::fs::write(dir.join(".tmp-x"), "x").unwrap(), ".tmp-x");
        let (names, skipped) = as_read(&dir);
        assert_eq!(
            names,
            [
                "test-20250101-000003.md",
                "review-20250101-000003.md",
                "dev-20250101-000005.md"
            ],
            "same second: in the order written"
        );
        assert_eq!(skipped, ["notes.txt"]);
        // A rename whose event has not come yet: the folder's version tells, read in full.
        let tmp = dir.join(".plan.tmp");
        handoff(&dir, ".plan.tmp");
        std::fs::rename(&tmp, dir.join("plan-20250101-000009.md")).unwrap();
        let (names, _) = as_read(&dir);
        assert_eq!(names.last().map(String::as_str), Some("plan-20250101-000009.md"));
        memo::unwatched(&dir);
    }
}
