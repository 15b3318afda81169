//! The bundle on disk, end to end: deploy, redeploy, cleanup, and the bytes agents read.

use super::disk::Cleanup;
use super::*;
use crate::core::handoff;
use crate::core::names::TaskName;
use crate::store::handoffs;
use serde_json::Value;

fn setup() -> (tempfile::TempDir, Task) {
    let d = tempfile::tempdir().unwrap();
    let name: TaskName = "t1".parse().unwrap();
    let t = Task::new(d.path(), name).unwrap();
    crate::store::task::create_or_repair(&t, Utc::now()).unwrap();
    (d, t)
}

fn put(p: &Path, text: &[u8]) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

const SPAWN: &str = "# Handoff: pm\n**Status:** IN_PROGRESS\n**Target:** dev\n\n## Instructions\nDo it.\n\n## Skills to Load\n- embedded-testing\n- ../etc\n- a/b\n- missing-one\n\n## Scope\nMay modify:\n- src/pool/writer.rs\n";

fn deploy_with<'a>(t: &'a Task, agent: &'a str, phase: Phase, h: &'a Handoff) -> Deploy<'a> {
    Deploy {
        task: t,
        agent,
        role: "spoke",
        phase,
        spawn_handoff: "pm-20251127-103500.md",
        handoff: h,
        agent_md: "---\nname: dev\n---\nYou are dev.\n",
        worktree: None,
        now: "2025-11-27T10:35:00Z".parse().unwrap(),
    }
}

fn bundle_of(t: &Task, agent: &str) -> Value {
    serde_json::from_slice(&std::fs::read(active_dir(t, agent).join("context/context-bundle.json")).unwrap()).unwrap()
}

#[test]
fn every_source_present() {
    let (_d, t) = setup();
    let p = t.project.clone();
    put(&t.dir().join("research_notes/a.md"), b"found 3 modules");
    put(&t.dir().join("architecture.json"), br#"{"decision": "pool"}"#);
    put(
        &t.handoffs().join("explore-20251127-093000.md"),
        b"# Handoff: explore\n**Status:** BLOCKED\n\n## Blockers\nno board\n\n## Execution Notes\ntried twice\n",
    );
    put(
        &t.dir().join("phase_context/keep.md"),
        b"---\npersistence: phase-persistent\nphase: DEVELOPING\n---\nalways\n",
    );
    put(&p.join(".claude/skills/embedded-testing/SKILL.md"), b"skill text");
    put(
        &p.join("context/instructions/pool.md"),
        b"---\napplyTo: \"src/pool/**\"\n---\npool rules\n",
    );
    put(
        &p.join("context/instructions/all.md"),
        b"---\napplyTo: \"**/*\"\n---\nall rules\n",
    );
    put(
        &p.join("context/instructions/docs.md"),
        b"---\napplyTo: \"docs/**\"\n---\nnot for us\n",
    );
    put(&p.join("context/instructions/plain.md"), b"no frontmatter\n");
    put(&p.join("context/workspace.md"), b"the workspace");
    put(&p.join("context/knowledge/k.md"), b"knowledge");
    let h = handoff::parse(SPAWN);
    let m = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    for k in SOURCES {
        assert!(m.sources[k].present, "{k} should be present: {m:?}");
    }
    let b = bundle_of(&t, "dev");
    assert_eq!(b["research"][0]["text"], "found 3 modules");
    assert_eq!(b["architecture"]["decision"], "pool");
    assert_eq!(b["handoff"]["file"], "pm-20251127-103500.md");
    assert_eq!(b["handoff"]["previous"]["agent"], "explore");
    assert_eq!(
        b["handoff"]["previous"]["execution_notes"]["execution_notes"],
        "tried twice"
    );
    assert_eq!(b["phase_context"][0]["persistence"], "phase-persistent");
    assert_eq!(b["skills"][0]["name"], "embedded-testing");
    assert_eq!(b["workspace_context"], "the workspace");
    assert_eq!(b["knowledge"][0]["text"], "knowledge");
    let mut inst: Vec<String> = std::fs::read_dir(active_dir(&t, "dev").join("instructions"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    inst.sort();
    assert_eq!(inst, vec!["all.md", "pool.md"], "exactly the matched instructions");
    assert_eq!(m.instructions, vec!["all.md", "pool.md"]);
    let notes = &m.sources["skills"].notes;
    assert!(notes.iter().any(|n| n.contains("\"../etc\" refused")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("\"a/b\" refused")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("'missing-one' not found")), "{notes:?}");
    assert!(active_dir(&t, "dev").join("dev.agent.md").is_file());
    let on_disk: Manifest =
        serde_json::from_slice(&std::fs::read(active_dir(&t, "dev").join("manifest.json")).unwrap()).unwrap();
    assert_eq!(on_disk, m);
}

#[test]
fn every_source_absent_is_null_and_deploys() {
    let (_d, t) = setup();
    let h = handoff::parse("# Handoff: pm\n**Status:** IN_PROGRESS\n");
    let m = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    let b = bundle_of(&t, "dev");
    for k in SOURCES {
        if k == "handoff" {
            assert!(m.sources[k].present);
            assert!(b[k]["previous"].is_null());
        } else {
            assert!(!m.sources[k].present, "{k}");
            assert!(b[k].is_null(), "{k}: {}", b[k]);
        }
    }
    assert!(m.instructions.is_empty());
}

#[test]
fn phase_persistent_stays_single_agent_is_consumed_once() {
    let (_d, t) = setup();
    put(
        &t.dir().join("phase_context/keep.md"),
        b"---\npersistence: phase-persistent\nphase: DEVELOPING\n---\nkeep\n",
    );
    put(
        &t.dir().join("phase_context/once.md"),
        b"---\npersistence: single-agent\n---\nonce\n",
    );
    put(
        &t.dir().join("phase_context/test-only.md"),
        b"---\nphase: TESTING\n---\nlater\n",
    );
    let h = handoff::parse(SPAWN);
    let m1 = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    assert_eq!(
        m1.sources["phase_context"].files,
        vec!["phase_context/keep.md", "phase_context/once.md"]
    );
    assert_eq!(m1.consumed, vec!["once.md"]);
    assert!(!t.dir().join("phase_context/once.md").exists(), "consumed");
    let m2 = deploy(&deploy_with(&t, "architect", Phase::Developing, &h)).unwrap();
    assert_eq!(m2.sources["phase_context"].files, vec!["phase_context/keep.md"]);
    let m3 = deploy(&deploy_with(&t, "test", Phase::Testing, &h)).unwrap();
    assert_eq!(m3.sources["phase_context"].files, vec!["phase_context/test-only.md"]);
    // The consumed item goes to the reviewed queue with the execution notes.
    let Cleanup::Cleaned { notes } = cleanup(&t, "dev", None, "2025-11-27T11:00:00Z".parse().unwrap()) else {
        panic!("not cleaned")
    };
    assert!(notes.parent().unwrap().join("consumed/once.md").is_file());
}

#[test]
fn redeploy_overwrites_and_cleanup_runs_once() {
    let (_d, t) = setup();
    put(
        &t.project.join("context/instructions/all.md"),
        b"---\napplyTo: \"**\"\n---\nx\n",
    );
    let h = handoff::parse(SPAWN);
    deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    assert!(active_dir(&t, "dev").join("instructions/all.md").exists());
    std::fs::remove_file(t.project.join("context/instructions/all.md")).unwrap();
    deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    assert!(
        !active_dir(&t, "dev").join("instructions/all.md").exists(),
        "the old bundle is gone"
    );
    let leftovers: Vec<_> = std::fs::read_dir(active_root(&t)).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temp or old folders left");
    put(
        &t.handoffs().join("dev-20251127-113000.md"),
        b"# Handoff: dev\n**Status:** COMPLETE\n\n## Completed Work\ndone\n",
    );
    let (names, _) = handoffs::list(&t.handoffs()).unwrap();
    let last = handoffs::load(&t.handoffs(), names.last().unwrap()).unwrap().unwrap();
    let now: DateTime<Utc> = "2025-11-27T11:30:00Z".parse().unwrap();
    let Cleanup::Cleaned { notes } = cleanup(&t, "dev", Some(&last), now) else {
        panic!()
    };
    assert!(
        notes.ends_with("reviewed_queue/dev_20251127T113000Z/execution_notes.json"),
        "{}",
        notes.display()
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&notes).unwrap()).unwrap();
    assert_eq!(v["status"], "COMPLETE");
    assert_eq!(v["manifest"]["agent"], "dev");
    assert_eq!(
        cleanup(&t, "dev", Some(&last), now),
        Cleanup::AlreadyClean,
        "handoff and completion both fire"
    );
    assert_eq!(std::fs::read_dir(reviewed_root(&t)).unwrap().count(), 1, "one entry");
    assert!(!active_dir(&t, "dev").exists());
}

#[test]
fn a_failing_cleanup_is_recorded_and_never_raised() {
    let (_d, t) = setup();
    let h = handoff::parse(SPAWN);
    deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    put(&reviewed_root(&t), b"a file where the folder should be");
    let r = cleanup(&t, "dev", None, Utc::now());
    assert!(matches!(r, Cleanup::Failed(_)), "{r:?}");
    let log = std::fs::read_to_string(crate::store::events::path(&t)).unwrap();
    assert!(log.contains("bundle_cleanup_failed"), "{log}");
}

#[test]
fn odd_files_are_included_with_notes_or_skipped() {
    let (_d, t) = setup();
    put(&t.dir().join("research_notes/latin1.md"), b"caf\xe9");
    put(
        &t.dir().join("research_notes/big.md"),
        &vec![b'x'; (FILE_CAP + 10) as usize],
    );
    std::os::unix::fs::symlink("/etc/passwd", t.dir().join("research_notes/link.md")).unwrap();
    put(&t.dir().join("architecture.json"), b"{not json");
    let h = handoff::parse(SPAWN);
    let m = deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    let notes = m.sources["research"].notes.join("\n");
    assert!(notes.contains("latin1.md: not valid UTF-8"), "{notes}");
    assert!(notes.contains("big.md: larger than 64 KiB"), "{notes}");
    assert!(notes.contains("link.md: skipped, it is a symbolic link"), "{notes}");
    assert_eq!(m.sources["research"].files.len(), 2);
    let b = bundle_of(&t, "dev");
    assert!(!b.to_string().contains("root:"), "nothing read through the symlink");
    assert_eq!(b["architecture"]["unparsed"], "{not json");
}

/// A representative bundle, every source and every fallback note, pinned byte for byte:
/// what agents read must not change when the code that builds it does.
#[test]
fn the_written_bundle_and_manifest_are_pinned() {
    let (_d, t) = setup();
    let p = t.project.clone();
    put(&t.dir().join("research_notes/a.md"), b"found 3 modules\n");
    put(&t.dir().join("research_notes/b.md"), b"caf\xe9");
    put(
        &t.dir().join("architecture.json"),
        br#"{"zeta": [1, 2], "decision": {"pool": true, "by": "architect"}}"#,
    );
    put(
        &t.handoffs().join("explore-20251127-093000.md"),
        b"# Handoff: explore\n**Status:** BLOCKED\n**Recommended Next:** dev\n\n## Blockers\nno board\n\n## Completed Work\nmapped it\n\n## Execution Notes\ntried twice\n",
    );
    put(&t.handoffs().join("pm-20251127-103500.md"), SPAWN.as_bytes());
    put(
        &t.dir().join("phase_context/keep.md"),
        b"---\npersistence: phase-persistent\nphase: DEVELOPING\n---\nalways\n",
    );
    put(&t.dir().join("phase_context/once.md"), b"---\nagent: dev\n---\nonce\n");
    put(
        &t.dir().join("phase_context/odd.md"),
        b"---\npersistence: forever\n---\nodd\n",
    );
    put(
        &t.dir().join("phase_context/other.md"),
        b"---\nagent: test\n---\nnot ours\n",
    );
    put(&p.join(".claude/skills/embedded-testing/SKILL.md"), b"skill text");
    put(&p.join("context/skills/missing-one.md"), b"fallback skill");
    put(
        &p.join("context/instructions/pool.md"),
        b"---\napplyTo: \"src/pool/**\"\n---\npool rules\n",
    );
    put(
        &p.join("context/instructions/bad.md"),
        b"---\napplyTo: \"a[\"\n---\nbad\n",
    );
    put(
        &p.join("context/instructions/docs.md"),
        b"---\napplyTo: docs/**\n---\nno\n",
    );
    put(&p.join("context/workspace.md"), b"the workspace");
    put(&p.join("context/knowledge/k.md"), b"knowledge");
    let h = handoff::parse(SPAWN);
    deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    let dir = active_dir(&t, "dev");
    let bundle = std::fs::read_to_string(dir.join("context/context-bundle.json")).unwrap();
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert_eq!(bundle, PINNED_BUNDLE, "context-bundle.json changed:\n{bundle}");
    assert_eq!(manifest, PINNED_MANIFEST, "manifest.json changed:\n{manifest}");
}

/// execution_notes.json in the reviewed queue, pinned byte for byte like the bundle.
#[test]
fn the_reviewed_notes_are_pinned() {
    let (_d, t) = setup();
    put(&t.dir().join("phase_context/once.md"), b"once\n");
    let h = handoff::parse(SPAWN);
    deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
    put(
        &t.handoffs().join("dev-20251127-113000.md"),
        b"# Handoff: dev\n**Status:** COMPLETE\n**Recommended Next:** test\nCycle Result: PASS\n\n## Completed Work\nthe writer pool\n\n## Next Action\ntest it\n\n## Execution Notes\nthe board was slow\n",
    );
    let (names, _) = handoffs::list(&t.handoffs()).unwrap();
    let last = handoffs::load(&t.handoffs(), names.last().unwrap()).unwrap().unwrap();
    let Cleanup::Cleaned { notes } = cleanup(&t, "dev", Some(&last), "2025-11-27T11:30:00Z".parse().unwrap()) else {
        panic!("not cleaned")
    };
    let written = std::fs::read_to_string(&notes).unwrap();
    assert_eq!(written, PINNED_NOTES, "execution_notes.json changed:\n{written}");
}

const PINNED_NOTES: &str = include_str!("expected/execution_notes.json");

const PINNED_BUNDLE: &str = include_str!("expected/context-bundle.json");

const PINNED_MANIFEST: &str = include_str!("expected/manifest.json");

#[test]
fn review_folders_are_named_by_agent_and_time_then_numbered() {
    let now: DateTime<Utc> = "2025-11-27T11:30:00Z".parse().unwrap();
    assert_eq!(disk::review_dir_name("dev", now, 1), "dev_20251127T113000Z");
    assert_eq!(disk::review_dir_name("dev", now, 2), "dev_20251127T113000Z-2");
    assert_eq!(disk::review_dir_name("dev", now, 999), "dev_20251127T113000Z-999");
}

#[test]
fn two_cleanups_in_one_second_keep_both() {
    let (_d, t) = setup();
    let h = handoff::parse(SPAWN);
    let now: DateTime<Utc> = "2025-11-27T11:30:00Z".parse().unwrap();
    let mut kept = Vec::new();
    for _ in 0..2 {
        deploy(&deploy_with(&t, "dev", Phase::Developing, &h)).unwrap();
        let Cleanup::Cleaned { notes } = cleanup(&t, "dev", None, now) else {
            panic!("not cleaned")
        };
        kept.push(
            notes
                .parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        );
    }
    assert_eq!(kept, vec!["dev_20251127T113000Z", "dev_20251127T113000Z-2"]);
}

#[test]
fn the_bundle_and_the_manifest_name_the_same_sources() {
    let (_d, t) = setup();
    let h = handoff::parse(SPAWN);
    let a = assemble(&deploy_with(&t, "dev", Phase::Developing, &h));
    let json: Value = serde_json::from_slice(&a.bundle.to_json()).unwrap();
    let mut keys: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
    let mut sources = SOURCES.to_vec();
    keys.sort_unstable();
    sources.sort_unstable();
    assert_eq!(keys, sources);
    assert!(a.manifest.sources.keys().eq(sources.iter()));
}
