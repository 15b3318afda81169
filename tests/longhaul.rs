//! Issue 26's long-haul run, small enough for CI: real Claude Code as the whole team
//! against the scripted model, ten review loops with progress reports and a short check-in
//! schedule, and every fault once on the way (the PM killed, dev killed, a usage limit, the
//! daemon kill -9'd, the task folder's disk full). `cargo bench --bench longhaul` is the
//! long one, with the figures.

mod common;

use std::time::Duration;

use common::longhaul::{Haul, run};

#[test]
fn a_long_run_with_every_fault_loses_nothing_tells_nothing_twice_and_keeps_the_pm_flat() {
    let f = run(&Haul {
        rejections: 10,
        progress: 1,
        faults: true,
        full_for: Duration::from_secs(10),
        window: 4000,
        per_message: 150,
        deadline: Duration::from_secs(600),
    });
    f.print();
    assert!(f.lost.is_empty(), "lost: {:?}\n{}", f.lost, f.trail.join("\n"));
    assert!(f.twice.is_empty(), "told twice: {:?}", f.twice);
    // Eleven loops of five handoffs, after explore's and plan's.
    assert!(f.handoffs >= 55, "{} handoffs", f.handoffs);
    // Explore's, plan's, and each loop's dev and review handoff must reach the PM before
    // the next step starts: 24 check-ins at least. Dev's progress reports may share one
    // with its final handoff (they do when the daemon is down as both are written), so
    // no more is certain.
    assert!(f.checkins >= 24, "{} check-ins", f.checkins);
    assert!(f.rotations >= 3, "{} rotations", f.rotations);
    assert!(f.ratio() <= 1.5, "PM context per check-in grew: {:?}", f.contexts);
    assert!(
        f.unrotated > 2 * 4000,
        "the run is long enough to need rotation: {}",
        f.unrotated
    );
    assert_eq!(f.faults.len(), 5, "{:?}", f.faults);
    assert!(
        (f.pauses, f.resumes) >= (1, 1),
        "the usage limit paused and resumed review"
    );
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(!f.faults.iter().any(|x| x.contains("skipped")), "{:?}", f.faults);
    }
}
