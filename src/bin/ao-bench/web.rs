//! `ao-bench web`: what an open web page costs and how soon it shows a change. A handoff
//! renamed in → the page's event stream says "changed" and the task page, fetched again,
//! names the file; beside it in the same run, the daemon's own reaction to that handoff
//! (the check-in in the PM pane). Then the daemon's idle CPU with no page open and with
//! five pages following its stream.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::daemon::{Env, cpu_secs, lines_in, write_handoff};
use crate::{arg, header, ms, row, stats};

/// A page's event stream: each "changed" it hears is sent on.
fn follow(addr: &str, cookie: &str, tx: Option<mpsc::Sender<Instant>>) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET /events HTTP/1.1\r\nHost: x\r\nCookie: ao_session={cookie}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let keep = s.try_clone().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(s).lines() {
            let Ok(l) = l else { break };
            if l.starts_with("event: changed") {
                if let Some(tx) = &tx {
                    if tx.send(Instant::now()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    keep
}

fn p99(v: &[Duration]) -> Duration {
    let mut s = v.to_vec();
    s.sort();
    s[((s.len() as f64 - 1.0) * 0.99).round() as usize]
}

pub(crate) fn bench_web(args: &[String]) {
    let n = arg(args, "--handoffs", 50);
    let idle_secs = arg(args, "--idle-secs", 30) as u64;
    let e = Env::new();
    assert!(e.task(&["start", "b", "--runtime", "demo"]).status().unwrap().success());
    let out = e
        .task(&["web", "--listen", "127.0.0.1:0", "--json"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    assert!(out.status.success(), "task web failed");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let url = v["url"].as_str().unwrap().to_string();
    let code = v["login_url"]
        .as_str()
        .unwrap()
        .split("code=")
        .nth(1)
        .unwrap()
        .to_string();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into();
    let r = agent
        .post(format!("{url}/login"))
        .send_form([("code", code.as_str())])
        .unwrap();
    let cookie = r.headers()["set-cookie"].to_str().unwrap();
    let cookie = cookie
        .strip_prefix("ao_session=")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let get = |path: &str| -> String {
        agent
            .get(format!("{url}{path}"))
            .header("Cookie", format!("ao_session={cookie}"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
            .replace("&#x2f;", "/")
    };
    let home = get("/");
    let at = home.find("/b\"").expect("the task on the page");
    let task_path = home[home[..at].rfind("\"/t/").unwrap() + 1..at + 2].to_string();
    let addr = url.trim_start_matches("http://").to_string();
    let (tx, rx) = mpsc::channel();
    let _stream = follow(&addr, &cookie, Some(tx));
    let inbox = e.project.join("tasks/b/scratchpad/pm/inbox.jsonl");
    let handoffs = e.project.join("tasks/b/handoffs");
    std::thread::sleep(Duration::from_millis(500));
    while rx.try_recv().is_ok() {}
    let (mut page, mut pm) = (Vec::new(), Vec::new());
    for i in 0..n {
        std::thread::sleep(Duration::from_millis(300));
        while rx.try_recv().is_ok() {}
        let before = lines_in(&inbox);
        let t = Instant::now();
        write_handoff(&handoffs, i);
        let name = std::fs::read_dir(&handoffs)
            .unwrap()
            .flatten()
            .map(|d| d.file_name().to_string_lossy().into_owned())
            .max()
            .unwrap();
        let (mut seen_page, mut seen_pm) = (None, None);
        while seen_page.is_none() || seen_pm.is_none() {
            if seen_pm.is_none() && lines_in(&inbox) > before {
                seen_pm = Some(t.elapsed());
            }
            if seen_page.is_none() && rx.try_recv().is_ok() && get(&task_path).contains(&name) {
                seen_page = Some(t.elapsed());
            }
            std::thread::sleep(Duration::from_micros(500));
            assert!(t.elapsed() < Duration::from_secs(20), "handoff {i} timed out");
        }
        page.extend(seen_page);
        pm.extend(seen_pm);
    }
    println!("\n{n} handoffs, one at a time, one page open\n");
    header();
    let (sp, spm) = (stats(page.clone()), stats(pm.clone()));
    row("daemon: handoff → PM pane (baseline)", &spm, &spm, "-");
    row("handoff → visible on the open page", &sp, &spm, "< 1 s");
    println!("p99: page {}, PM pane {}", ms(p99(&page)), ms(p99(&pm)));
    drop(_stream);

    let pid = e.daemon_pid().expect("daemon");
    std::thread::sleep(Duration::from_secs(3));
    let idle = |what: &str| {
        let c0 = cpu_secs(pid);
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs(idle_secs));
        let pct = 100.0 * (cpu_secs(pid) - c0) / t0.elapsed().as_secs_f64();
        println!("idle daemon, {what}, {idle_secs} s: {pct:.2} % of a core");
        pct
    };
    let none = idle("no page open");
    let pages: Vec<_> = (0..5).map(|_| follow(&addr, &cookie, None)).collect();
    let five = idle("5 pages open");
    println!(
        "5 open pages cost {:+.2} points of a core ({:.2}x the idle daemon)",
        five - none,
        if none > 0.0 { five / none } else { f64::NAN }
    );
    drop(pages);
}
