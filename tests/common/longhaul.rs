//! The long-haul run (issue 26): the example task's team on real Claude Code against the
//! scripted model, driven through many loops of work so that an eight-hour run's check-ins
//! and handoffs happen in minutes, with the faults a long run meets on the way. Used by
//! `cargo bench --bench longhaul` (`ao-bench longhaul`) for the figures and by
//! tests/longhaul.rs, smaller, for CI.
//!
//! The loop: the review rejects the work `rejections` times, so the PM sends dev back each
//! time; dev reports IN_PROGRESS `progress` times before each final handoff; check-ins also
//! come on a short schedule. The PM's reported context grows with its conversation, so it
//! is rotated again and again. Each fault is injected once, at the start of a loop (after a
//! review), while dev is provably at work (its answer held by the model server): the PM
//! killed, dev killed, a usage limit on review, the daemon kill -9'd with dev's handoffs
//! written while it is down, and the task folder's disk full.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::claude::{Cc, events, pane_pid};
use super::{wait_for, wait_until};

/// The model every answer names in the run, with the window the run gives it.
const MODEL: &str = "claude-longhaul";

/// How long and how hard a run is.
pub struct Haul {
    /// Times the review rejects the work before it approves (each one a loop of the team).
    pub rejections: usize,
    /// IN_PROGRESS reports dev writes before each final handoff.
    pub progress: usize,
    /// Inject the faults.
    pub faults: bool,
    /// How long the disk stays full.
    pub full_for: Duration,
    /// The PM's context window (tokens) and what each message of its conversation adds.
    pub window: u64,
    pub per_message: u64,
    /// The whole run must finish within this.
    pub deadline: Duration,
}

/// The faults, in the order they are injected (one per loop).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    PmKilled,
    SpokeKilled,
    UsageLimit,
    DaemonKilled,
    DiskFull,
}

pub const FAULTS: [Fault; 5] = [
    Fault::PmKilled,
    Fault::SpokeKilled,
    Fault::UsageLimit,
    Fault::DaemonKilled,
    Fault::DiskFull,
];

/// What a run did.
pub struct Figures {
    /// Check-ins delivered to the PM.
    pub checkins: usize,
    /// Handoff files, the PM's and the spokes'.
    pub handoffs: usize,
    /// The spokes' handoffs: each must reach the PM in exactly one check-in.
    pub spoke_handoffs: usize,
    /// Spoke handoffs that never reached the PM, and those that reached it more than once.
    pub lost: Vec<String>,
    pub twice: Vec<String>,
    /// PM rotations.
    pub rotations: usize,
    /// Check-ins Claude Code put into a running PM turn at a tool call (typed while the PM
    /// worked), rather than taking them as a turn of their own.
    pub into_running_turn: usize,
    /// The PM's context (tokens) at each check-in, in order.
    pub contexts: Vec<u64>,
    /// What one PM conversation would have reached without rotation (tokens).
    pub unrotated: u64,
    /// The daemon's CPU seconds, over every daemon of the run.
    pub daemon_cpu: f64,
    /// Start to COMPLETE.
    pub wall: Duration,
    /// Each fault injected, with what came of it.
    pub faults: Vec<String>,
    /// Agents paused by a usage limit, and resumed.
    pub pauses: usize,
    pub resumes: usize,
    /// The events that tell how the faults were met, one line each.
    pub timeline: Vec<String>,
    /// What the daemons logged of the full disk (each distinct message once).
    pub disk_said: Vec<String>,
    /// When a handoff was lost: every check-in, rotation, restart and event naming a lost
    /// file, in order, so a failure that happens once in several runs can be read.
    pub trail: Vec<String>,
}

/// The event kinds the timeline shows.
const NOTABLE: [&str; 11] = [
    "pm_restart",
    "agent_died",
    "paused",
    "resumed",
    "attention_cleared",
    "turn_failed",
    "turn_corrected",
    "pm_rotated",
    "daemon",
    "checkin_failed",
    "spawn",
];

impl Figures {
    /// How many check-ins a decile spans: a tenth of them, widened to two rotation periods
    /// when that is longer. With rotation the PM's context is a sawtooth (it grows until the
    /// rotation, then starts again); two windows shorter than a tooth compare one tooth's
    /// foot with another's top, which says nothing about growth. One period was not enough:
    /// teeth vary in length (a restart, a rotation a check-in late), so a one-period window
    /// can still hold one tooth's top and another's foot (a CI run: 1,270 vs 2,270 tokens
    /// over 3 check-ins each, 1.29x over 6).
    pub fn decile(&self) -> usize {
        let n = self.contexts.len();
        n.div_ceil(10).max(2 * n.div_ceil(self.rotations + 1)).min(n)
    }

    /// The mean PM context over the first and over the last [`Figures::decile`] check-ins.
    pub fn deciles(&self) -> (f64, f64) {
        let n = self.contexts.len();
        let d = self.decile().max(1).min(n.max(1));
        if n == 0 {
            return (0.0, 0.0);
        }
        let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
        (mean(&self.contexts[..d]), mean(&self.contexts[n - d..]))
    }

    /// Last decile over first: 1.0 is flat; a PM that is never rotated grows with the run.
    pub fn ratio(&self) -> f64 {
        let (first, last) = self.deciles();
        if first > 0.0 { last / first } else { f64::INFINITY }
    }

    pub fn print(&self) {
        let (first, last) = self.deciles();
        let secs = self.wall.as_secs_f64();
        println!("long haul: {:.0} s wall", secs);
        println!("  check-ins            {}", self.checkins);
        println!(
            "  handoffs             {} ({} from spokes)",
            self.handoffs, self.spoke_handoffs
        );
        println!("  lost                 {}", self.lost.len());
        println!("  told twice           {}", self.twice.len());
        println!("  PM rotations         {}", self.rotations);
        println!(
            "  into a running turn  {} (check-ins taken at a tool call)",
            self.into_running_turn
        );
        println!(
            "  PM input per check-in, mean of the first {d} check-ins {:.0}, of the last {d} {:.0}: ratio {:.2} (≤ 1.5)",
            first,
            last,
            self.ratio(),
            d = self.decile()
        );
        println!("  paused by the usage limit {}, resumed {}", self.pauses, self.resumes);
        for l in &self.disk_said {
            println!("  the daemon on the full disk: {l}");
        }
        println!(
            "  one PM conversation would have reached {} tokens without rotation (max seen {})",
            self.unrotated,
            self.contexts.iter().max().copied().unwrap_or(0)
        );
        println!(
            "  supervisor (daemon) CPU {:.1} s = {:.2} % of a core",
            self.daemon_cpu,
            100.0 * self.daemon_cpu / secs.max(1.0)
        );
        for f in &self.faults {
            println!("  fault: {f}");
        }
        if std::env::var_os("AO_LONGHAUL_TIMELINE").is_some() {
            for t in &self.timeline {
                println!("    {}", t.chars().take(300).collect::<String>());
            }
        }
    }
}

/// The events that tell what became of the `lost` files: every check-in (its files and
/// outcome), rotation, restart and death, and any event naming one of them.
fn trail(dir: &std::path::Path, lost: &[String]) -> Vec<String> {
    const KINDS: [&str; 9] = [
        "checkin",
        "checkin_settled",
        "checkin_skipped",
        "checkin_failed",
        "pm_rotated",
        "pm_restart",
        "agent_died",
        "daemon",
        "spawn",
    ];
    std::fs::read_to_string(dir.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| {
            lost.iter().any(|f| l.contains(f.as_str()))
                || KINDS.iter().any(|k| l.contains(&format!("\"kind\":\"{k}\"")))
        })
        .map(|l| l.chars().take(400).collect())
        .collect()
}

/// The task folder's disk: a small tmpfs mounted over `<project>/tasks` so it can be filled
/// for real. Needs root (mount); without it the run says the fault was skipped.
struct Disk {
    at: PathBuf,
}

impl Disk {
    fn mount(at: &Path) -> Result<Disk, String> {
        std::fs::create_dir_all(at).map_err(|e| e.to_string())?;
        let o = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "longhaul"])
            .arg(at)
            .output()
            .map_err(|e| e.to_string())?;
        if !o.status.success() {
            return Err(String::from_utf8_lossy(&o.stderr).trim().to_string());
        }
        Ok(Disk { at: at.to_path_buf() })
    }

    fn filler(&self) -> PathBuf {
        self.at.join(".longhaul-fill")
    }

    /// Write until the disk says it is full.
    fn fill(&self) -> u64 {
        use std::io::Write;
        let mut f = std::fs::File::create(self.filler()).unwrap();
        let block = vec![0u8; 64 * 1024];
        let mut n = 0u64;
        while let Ok(k) = f.write(&block) {
            if k == 0 {
                break;
            }
            n += k as u64;
        }
        let _ = f.sync_all();
        n
    }

    fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.free();
        // Lazy: the world's processes may still hold files there; it goes when they do.
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.at).output();
    }
}

/// Hold dev's next handoff until `act` is done: the fault lands while dev works.
fn while_dev_works(cc: &Cc, act: impl FnOnce() -> String) -> String {
    let go = Arc::new(AtomicBool::new(false));
    let g = go.clone();
    cc.model
        .hold_until("dev", "tool: task handoff", move || g.load(Ordering::SeqCst));
    wait_until(
        "dev at work (its handoff held)",
        Duration::from_secs(120),
        Duration::from_millis(100),
        || cc.model.hold_taken("dev").then_some(()),
        || cc.dump(),
    );
    let out = act();
    go.store(true, Ordering::SeqCst);
    out
}

/// Wait up to 120 s for the task's events.jsonl to hold more than `before` events of
/// `kind`; a timeout shows [`failure_dump`].
fn wait_for_event(cc: &Cc, what: &str, kind: &str, before: usize) {
    let dir = cc.task_dir();
    wait_until(
        what,
        Duration::from_secs(120),
        Duration::from_millis(50),
        || (events(&dir, kind).len() > before).then_some(()),
        || failure_dump(cc),
    );
}

/// What a fault's wait that timed out shows: the screens, the model's calls, the events,
/// and the end of the daemon's log (what its actor was doing meanwhile).
fn failure_dump(cc: &Cc) -> String {
    let log = cc.w.daemon_log();
    let lines: Vec<&str> = log.lines().collect();
    format!(
        "{}\n--- the daemon's log, last 150 lines\n{}",
        cc.dump(),
        lines[lines.len().saturating_sub(150)..].join("\n")
    )
}

/// The distinct things the daemons' logs said of a full disk: the message with its times,
/// paths and numbers left out, so each kind of trouble is one line.
fn disk_said(cc: &Cc) -> Vec<String> {
    let logs = [
        cc.w.daemon_log(),
        std::fs::read_to_string(cc.w.dir.path().join("daemon-restarted.log")).unwrap_or_default(),
    ];
    let mut out: Vec<String> = Vec::new();
    for l in logs
        .iter()
        .flat_map(|l| l.lines())
        .filter(|l| l.contains("No space left"))
    {
        let shape: String = l
            .split_whitespace()
            .skip(1)
            .filter(|w| !w.contains('/') && !w.chars().any(|c| c.is_ascii_digit()))
            .collect::<Vec<_>>()
            .join(" ");
        if !out.contains(&shape) {
            out.push(shape);
        }
    }
    out
}

/// CPU seconds (user + system) of a live process.
fn cpu_secs(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of stat (utime, stime), counted from the state field (3).
    (ticks(11) + ticks(12)) / 100.0
}

/// Run the example task as `h` says and measure it; panics (with the world's dump) when the
/// run does not finish in time.
pub fn run(h: &Haul) -> Figures {
    let cc = Cc::new();
    let disk = if h.faults {
        Some(Disk::mount(&cc.w.project.join("tasks")))
    } else {
        None
    };
    cc.with_window(MODEL, h.window);
    cc.model.usage_grows("pm", h.per_message);
    cc.model.reject_reviews(h.rejections);
    cc.model.progress_reports("dev", h.progress);
    let start = Instant::now();
    cc.start_example_with("checkin: 15s\nrotate_at: 60%\nresume_delay: 1s\n");
    let mut run = Run {
        cc: &cc,
        daemon: None,
        cpu: 0.0,
        faults: Vec::new(),
    };
    let mut next = 0;
    loop {
        if run.cc.phase() == "COMPLETE" {
            break;
        }
        assert!(
            start.elapsed() < h.deadline,
            "the long haul did not finish in {:?}\n{}",
            h.deadline,
            run.cc.dump()
        );
        let loops = run.spoke_files("review-").len();
        if h.faults && next < FAULTS.len() && loops > next {
            let f = FAULTS[next];
            next += 1;
            let t0 = Instant::now();
            let what = match (f, &disk) {
                (Fault::DiskFull, Some(Err(why))) => format!("skipped: cannot mount a tmpfs to fill ({why})"),
                (Fault::DiskFull, Some(Ok(d))) => run.disk_full(d, h.full_for),
                _ => run.inject(f),
            };
            run.faults
                .push(format!("{f:?}: {what} ({:.1} s)", t0.elapsed().as_secs_f64()));
            continue;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let wall = start.elapsed();
    let figures = run.figures(wall, h.per_message);
    if let Some(mut d) = run.daemon.take() {
        let _ = d.kill();
        let _ = d.wait();
    }
    drop(disk);
    figures
}

/// One run in progress: the world, the daemon this driver started (after a kill), the CPU
/// of the daemons killed so far.
struct Run<'a> {
    cc: &'a Cc,
    daemon: Option<Child>,
    cpu: f64,
    faults: Vec<String>,
}

impl Run<'_> {
    fn spoke_files(&self, prefix: &str) -> Vec<String> {
        self.cc
            .spoke_handoffs()
            .into_iter()
            .filter(|f| f.starts_with(prefix))
            .collect()
    }

    fn inject(&mut self, f: Fault) -> String {
        let cc = self.cc;
        let dir = cc.task_dir();
        match f {
            Fault::PmKilled => while_dev_works(cc, || {
                let before = events(&dir, "pm_restart").len();
                let session = cc.state()["agents"]["pm"]["session"].as_str().unwrap().to_string();
                // SAFETY: killing the Claude Code process this run started.
                unsafe {
                    libc::kill(pane_pid(&cc.w, &session), libc::SIGKILL);
                }
                wait_for_event(cc, "the PM restarted", "pm_restart", before);
                "the PM's Claude Code kill -9'd while dev worked; restarted".into()
            }),
            Fault::SpokeKilled => {
                let before = events(&dir, "agent_died").len();
                let said = while_dev_works(cc, || {
                    let session = cc.state()["agents"]["dev"]["session"].as_str().unwrap().to_string();
                    // SAFETY: killing the Claude Code process this run started.
                    unsafe {
                        libc::kill(pane_pid(&cc.w, &session), libc::SIGKILL);
                    }
                    "dev's Claude Code kill -9'd mid-step".to_string()
                });
                wait_for_event(cc, "dev's death noticed", "agent_died", before);
                format!("{said}; its death told to the PM, which started dev again")
            }
            // Set while dev works, so the limit meets review's next step at its start (not
            // the last answer of the review that just handed off).
            Fault::UsageLimit => while_dev_works(cc, || {
                let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
                // The reset is said to the minute: the next minute at least 15 s away.
                let reset = ((now + 15) / 60 + 1) * 60;
                cc.model.limit_next("review", UNIX_EPOCH + Duration::from_secs(reset));
                format!("review's next step met the usage limit, resetting in {} s", reset - now)
            }),
            Fault::DaemonKilled => {
                let dev_before = self.spoke_files("dev-").len();
                let written = while_dev_works(cc, || {
                    let pid = cc.w.daemon_pid().expect("a daemon");
                    self.cpu += cpu_secs(pid);
                    cc.w.kill_daemon(self.daemon.take());
                    "daemon kill -9'd while dev worked".to_string()
                });
                // Dev's reports are written with no daemon to hear them.
                let progress = cc.model.seen().len();
                wait_for("dev's handoffs written while the daemon is down", 120, || {
                    (self.spoke_files("dev-").len() > dev_before
                        && cc
                            .model
                            .seen()
                            .iter()
                            .skip(progress)
                            .any(|s| s.agent.as_deref() == Some("dev") && s.answer.starts_with("text: Handed off")))
                    .then_some(())
                });
                let n = self.spoke_files("dev-").len() - dev_before;
                self.daemon = Some(self.start_daemon());
                format!("{written}; {n} of dev's handoffs written meanwhile; a new daemon started")
            }
            Fault::DiskFull => unreachable!("needs the disk"),
        }
    }

    fn disk_full(&mut self, d: &Disk, full_for: Duration) -> String {
        while_dev_works(self.cc, || {
            let bytes = d.fill();
            // The fault is the disk staying full this long while the supervisor works on.
            std::thread::sleep(full_for);
            d.free();
            format!(
                "the task folder's disk full ({} KiB written to fill it) for {} s while dev worked",
                bytes / 1024,
                full_for.as_secs()
            )
        })
    }

    /// `task daemon` with the user's environment, as systemd would start it again.
    fn start_daemon(&self) -> Child {
        let log = self.cc.w.dir.path().join("daemon-restarted.log");
        let child = self
            .cc
            .task(&["daemon"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .unwrap();
        wait_for("the new daemon", 10, || self.cc.w.daemon_pid());
        child
    }

    fn figures(&mut self, wall: Duration, per_message: u64) -> Figures {
        let cc = self.cc;
        let dir = cc.task_dir();
        if let Some(pid) = cc.w.daemon_pid() {
            self.cpu += cpu_secs(pid);
        }
        let spoke = cc.spoke_handoffs();
        let (mut lost, mut twice) = (Vec::new(), Vec::new());
        for f in &spoke {
            let n = cc.checkins_telling(f);
            match n {
                0 => lost.push(f.clone()),
                1 => {}
                _ => twice.push(format!("{f} ×{n}")),
            }
        }
        let checkins: Vec<serde_json::Value> = events(&dir, "checkin")
            .into_iter()
            .filter(|e| e["data"]["outcome"] == "delivered")
            .collect();
        let contexts = checkins
            .iter()
            .filter_map(|e| e["data"]["pm_context"].as_u64())
            .collect();
        // One conversation's length is where its messages stop growing: a request carrying
        // fewer messages than the one before starts a new conversation (a rotation).
        let (mut unrotated, mut last) = (0u64, 0u64);
        for s in cc
            .model
            .seen()
            .iter()
            .filter(|s| s.main && s.agent.as_deref() == Some("pm"))
        {
            let n = s.messages.len() as u64;
            if n < last {
                unrotated += last;
            }
            last = n;
        }
        unrotated = (unrotated + last) * per_message;
        let handoffs = std::fs::read_dir(dir.join("handoffs")).map(|d| d.count()).unwrap_or(0);
        let trail = if lost.is_empty() {
            Vec::new()
        } else {
            trail(&dir, &lost)
        };
        Figures {
            checkins: checkins.len(),
            handoffs,
            spoke_handoffs: spoke.len(),
            lost,
            twice,
            rotations: events(&dir, "pm_rotated").len(),
            into_running_turn: cc
                .model
                .given("pm")
                .iter()
                .filter(|p| p.contains(super::model::INJECTED) && p.contains("Check-in for task"))
                .count(),
            contexts,
            unrotated,
            daemon_cpu: self.cpu,
            wall,
            faults: std::mem::take(&mut self.faults),
            pauses: events(&dir, "paused").len(),
            resumes: events(&dir, "resumed").len(),
            timeline: std::fs::read_to_string(dir.join("events.jsonl"))
                .unwrap_or_default()
                .lines()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|e| NOTABLE.iter().any(|k| e["kind"] == *k) || e["data"]["outcome"] == "failed")
                .map(|e| format!("{} {} {} {}", e["time"], e["kind"], e["agent"], e["data"]))
                .collect(),
            disk_said: disk_said(cc),
            trail,
        }
    }
}
