//! `ao-bench permit`: how long the permission broker keeps an agent's tool call waiting.
//! By rule: the whole `task hook permission-request` Claude Code runs for a compound
//! command task.md's rules allow (that is the time added to the tool call), beside the
//! floor of starting the same binary (`task --version`). By the PM: from the hook's start
//! to the check-in naming the request confirmed in the PM's pane, beside a handoff's
//! check-in measured the same way in the same task (the path the request rides on).

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::daemon::{Env, lines_in, write_handoff};
use crate::{arg, header, row, stats, task_bin};

fn hook(e: &Env, agent: &str, command: &str) -> std::process::Child {
    let mut c = e.task(&["hook", "permission-request"]);
    c.env("TASK_NAME", "t1")
        .env("TASK_DIR", e.project.join("tasks/t1"))
        .env("TASK_AGENT", agent)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = c.spawn().expect("run the hook");
    let req = serde_json::json!({"tool_name": "Bash", "tool_input": {"command": command}});
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&serde_json::to_vec(&req).unwrap()).unwrap();
    drop(stdin);
    child
}

fn behavior(out: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(out).map_or_else(
        |_| String::from_utf8_lossy(out).into_owned(),
        |v| {
            v["hookSpecificOutput"]["decision"]["behavior"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        },
    )
}

pub(crate) fn bench_permit(args: &[String]) {
    let runs = arg(args, "--runs", 30);
    let e = Env::new();
    assert!(e.task(&["new", "t1"]).status().unwrap().success());
    let md = e.project.join("tasks/t1/task.md");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(
        &md,
        format!("{text}\n## Agent Config\nallow-dev: Bash(cargo test:*)\npermit_timeout: 60s\npermit_deadline: 120s\n"),
    )
    .unwrap();
    assert!(
        e.task(&["start", "t1", "--runtime", "demo"])
            .status()
            .unwrap()
            .success()
    );
    let inbox = e.project.join("tasks/t1/scratchpad/pm/inbox.jsonl");
    std::thread::sleep(Duration::from_millis(500));

    let floor = stats(
        (0..runs)
            .map(|_| {
                let mut c = Command::new(task_bin());
                c.arg("--version").stdout(Stdio::null());
                let t = Instant::now();
                assert!(c.status().unwrap().success());
                t.elapsed()
            })
            .collect(),
    );
    let by_rule = stats(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                let out = hook(&e, "dev", "cargo test -q && cargo test --doc 2>&1")
                    .wait_with_output()
                    .unwrap();
                let took = t.elapsed();
                assert_eq!(
                    behavior(&out.stdout),
                    "allow",
                    "the rule decides: {}",
                    String::from_utf8_lossy(&out.stdout)
                );
                took
            })
            .collect(),
    );

    // Handoff → check-in, then request → check-in, alternating, in the same task.
    let handoffs = e.project.join("tasks/t1/handoffs");
    let (mut checkin, mut by_pm) = (Vec::new(), Vec::new());
    let wait_inbox = |n: usize, t: Instant, what: &str| {
        while lines_in(&inbox) < n {
            std::thread::sleep(Duration::from_millis(1));
            assert!(t.elapsed() < Duration::from_secs(30), "{what} timed out");
        }
        t.elapsed()
    };
    for i in 0..runs {
        let n = lines_in(&inbox);
        let t = Instant::now();
        write_handoff(&handoffs, i);
        checkin.push(wait_inbox(n + 1, t, "a handoff's check-in"));

        let n = lines_in(&inbox);
        let t = Instant::now();
        let child = hook(&e, "review", &format!("pip install -e . # run {i}"));
        by_pm.push(wait_inbox(n + 1, t, "the request's check-in"));
        let told = std::fs::read_to_string(&inbox).unwrap();
        let last = told.lines().last().unwrap_or("");
        let at = last.find("task permit t1 p-").expect("the check-in names the request") + "task permit t1 ".len();
        let id = &last[at..at + 10];
        let mut answer = e.task(&["permit", "t1", id, "allow"]);
        answer.env("TASK_AGENT", "pm").env("TASK_NAME", "t1");
        assert!(answer.status().unwrap().success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(behavior(&out.stdout), "allow", "the PM decides");
    }
    let checkin = stats(checkin);
    let by_pm = stats(by_pm);
    println!("\n{runs} requests each way\n");
    header();
    row("floor: `task --version`", &floor, &floor, "-");
    row("decided by rule (the hook, whole)", &by_rule, &floor, "p50 < 50 ms");
    row("floor: a handoff's check-in", &checkin, &checkin, "-");
    row("request → check-in in the PM pane", &by_pm, &checkin, "p50 < 1 s");
}
