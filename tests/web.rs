//! `task web` end to end: the real daemon serving the page on loopback, asked over HTTP as
//! a browser would (tests/web_browser.rs drives a real one). Nothing without a session, a
//! login code once, every form with its CSRF token, agents' text inert, answers recorded
//! with the session that made them, and the webhook told of each escalation.

mod common;

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use common::web::Page;
use common::*;

fn served(w: &World) -> Page {
    w.start_idle_pm("t1")
        .new_task("permit_timeout: 60s\npermit_deadline: 120s")
        .run();
    w.web(&[])
}

/// Every route but the login page answers a stranger (no cookie, a forged one, one signed
/// with a revoked token) with the way to the login page or a refusal, and shows nothing.
#[test]
fn nothing_is_reachable_without_logging_in() {
    let w = World::new();
    let page = served(&w);
    let s = page.first_login();
    let tp = page.task_path(&s, "t1");
    let csrf = page.csrf(&s);
    let forged = format!("{}-00112233445566778899aabb.{}", 1_800_000_000, "0".repeat(64));
    let gets = ["/", &tp, &format!("{tp}/h/pm-20260101-000000.md"), "/events", "/nope"];
    let posts = [
        "/seen".to_string(),
        format!("{tp}/checkin"),
        format!("{tp}/send"),
        format!("{tp}/stop/pm"),
        format!("{tp}/permit/p-12345678"),
    ];
    for who in ["", forged.as_str()] {
        for g in gets {
            let a = page.get(g, who);
            assert!(
                (a.status == 303 && a.location.as_deref() == Some("/login")) || a.status == 401,
                "GET {g} as {who:?}: {a:?}"
            );
            assert!(!a.body.contains("t1"), "GET {g} shows the task: {}", a.body);
        }
        for p in &posts {
            let a = page.post(
                p,
                who,
                &[
                    ("csrf", &csrf),
                    ("key", "x"),
                    ("agent", "pm"),
                    ("text", "hi"),
                    ("decision", "allow"),
                ],
            );
            assert_eq!(a.status, 401, "POST {p} as {who:?}: {a:?}");
        }
    }
    assert_eq!(page.get("/login", "").status, 200);
    assert_eq!(page.get("/", &s).status, 200, "the session itself works");
    // Revoked: the same cookie is a stranger's.
    ok(&run(w.task().args(["web", "--revoke"])));
    let a = page.get("/", &s);
    assert_eq!((a.status, a.location.as_deref()), (303, Some("/login")), "{a:?}");
    assert!(
        w.events("t1").iter().all(|e| e["kind"] != "web_action"),
        "no action went through"
    );
}

/// A code logs in once; a used, wrong or revoked code does not, and failures past the
/// limit are refused for a while even with a good code.
#[test]
fn a_login_code_works_once_and_guesses_are_limited() {
    let w = World::new();
    let page = served(&w);
    let code = common::web::code_of(&page.login_url);
    let s = page.login(&code).unwrap();
    assert!(s.contains('.'));
    assert_eq!(page.login(&code).unwrap_err().status, 401, "used once");
    let fresh = w.web_code();
    ok(&run(w.task().args(["web", "--revoke"])));
    assert_eq!(page.login(&fresh).unwrap_err().status, 401, "revoked codes are void");
    let good = w.web_code();
    for _ in 0..3 {
        assert_eq!(page.login("wrongcode22").unwrap_err().status, 401);
    }
    let limited = page.login(&good).unwrap_err();
    assert_eq!(limited.status, 429, "{limited:?}");
    assert!(limited.body.contains("Too many failed tries"));
    let log = w.daemon_log();
    assert!(
        log.contains("web login failed") && log.contains("too many failed tries"),
        "{log}"
    );
}

/// A state-changing form is refused without its session's CSRF token (none, another
/// session's, a made-up one) and goes through with it: the check-in runs and the event
/// names the web session.
#[test]
fn forms_need_their_sessions_csrf_token() {
    let w = World::new();
    let page = served(&w);
    let a = page.first_login();
    let b = page.login(&w.web_code()).unwrap();
    let tp = page.task_path(&a, "t1");
    let other = page.csrf(&b);
    for bad in ["", other.as_str(), &"0".repeat(64)] {
        let r = page.post(&format!("{tp}/checkin"), &a, &[("csrf", bad), ("back", &tp)]);
        assert_eq!(r.status, 403, "csrf {bad:?}: {r:?}");
    }
    assert!(w.events_of("t1", "web_action").is_empty());
    let r = page.post(&format!("{tp}/checkin"), &a, &[("csrf", &page.csrf(&a)), ("back", &tp)]);
    assert_eq!((r.status, r.location.as_deref()), (303, Some(tp.as_str())), "{r:?}");
    let acts = w.events_of("t1", "web_action");
    assert_eq!(acts.len(), 1, "{acts:?}");
    assert_eq!(acts[0]["data"]["action"], "checkin");
    let by = acts[0]["data"]["by"].as_str().unwrap();
    assert!(by.starts_with("web:") && a.contains(&by[4..]), "{by} names session {a}");
    // The outcome is shown once on the page it came back to.
    let note = r.cookies.iter().find(|c| c.starts_with("ao_note=")).unwrap();
    assert!(note.contains("Max-Age=30"), "{note}");
    // The old page's live refresh (sent on the change the form made) neither shows the
    // note nor spends it; the page the form comes back to does both.
    let jar = format!("ao_session={a}; {}", note.split(';').next().unwrap());
    let live = page.get_with(&tp, &jar, &[("AO-Live", "1")]);
    assert_eq!(live.status, 200, "{live:?}");
    assert!(!live.body.contains("class=\"note\""), "a live fetch shows no note");
    assert!(
        !live.cookies.iter().any(|c| c.starts_with("ao_note=")),
        "a live fetch leaves the note: {:?}",
        live.cookies
    );
    let shown = page.get_with(&tp, &jar, &[]);
    assert!(shown.body.contains("class=\"note\""), "{}", shown.body);
    assert!(
        shown.cookies.iter().any(|c| c.starts_with("ao_note=;")),
        "shown once, then cleared: {:?}",
        shown.cookies
    );
    let session_cookie = page.login(&w.web_code()).unwrap();
    assert!(!session_cookie.is_empty());
}

/// What agents wrote reaches the page as text: script tags, `javascript:` links, raw HTML
/// and a 1 MB body are shown inert, and every answer forbids scripts from elsewhere.
#[test]
fn hostile_agent_text_is_rendered_inert() {
    let w = World::new();
    let page = served(&w);
    let s = page.first_login();
    let tp = page.task_path(&s, "t1");
    // Agents write their files themselves; one over `task handoff`'s cap is renamed in.
    let small = w
        .handoff("t1", "dev", "BLOCKED")
        .body("## Summary\nsee below\n")
        .write();
    let small = std::path::PathBuf::from(small.trim());
    let body = format!(
        "{}\n<script>alert('x')</script>\n\n[click](javascript:alert(1)) <img src=x onerror=alert(2)>\n\n{}\n",
        std::fs::read_to_string(&small).unwrap(),
        "filler line of an enormous report\n".repeat(1 << 15)
    );
    assert!(body.len() > 1 << 20);
    let file = "dev-20300101-000000.md".to_string();
    let tmp = small.with_file_name(".big.tmp");
    std::fs::write(&tmp, &body).unwrap();
    std::fs::rename(&tmp, small.with_file_name(&file)).unwrap();
    let a = page.get(&format!("{tp}/h/{file}"), &s);
    assert_eq!(a.status, 200, "{}", &a.body[..a.body.len().min(500)]);
    assert!(a.body.contains("&lt;script&gt;"), "shown as text");
    assert!(
        a.body.contains("&lt;img src=x onerror=alert(2)&gt;"),
        "the tag shown as text"
    );
    for bad in ["<script>alert", "javascript:", "<img"] {
        assert!(!a.body.contains(bad), "{bad} reached the page");
    }
    assert!(a.body.contains("enormous report"));
    let csp = a.csp.unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    // A path that is not a handoff name is not read.
    assert_eq!(page.get(&format!("{tp}/h/..%2Fpm_state.json"), &s).status, 404);
    assert_eq!(page.get(&format!("{tp}/h/task.md"), &s).status, 404);
}

/// A permission request no rule answered is under Needs you; Allow on the page answers
/// it as that web session, the waiting hook goes on, and both the decision and the web
/// action are recorded with the session.
#[test]
fn a_permission_request_is_answered_from_the_page() {
    let w = World::new();
    let page = served(&w);
    let s = page.first_login();
    let tp = page.task_path(&s, "t1");
    let hook = w.permission_hook("t1", "dev", "rm -rf build && make test");
    let id = wait_for("the request on the page", 10, || {
        let b = page.get("/", &s).body;
        let at = b.find("/permit/p-")?;
        Some(b[at + 8..].split('"').next().unwrap().to_string())
    });
    let home = page.get("/", &s).body;
    assert!(home.contains("rm -rf build &amp;&amp; make test"), "escaped: {home}");
    let r = page.post(
        &format!("{tp}/permit/{id}"),
        &s,
        &[("csrf", &page.csrf(&s)), ("decision", "allow"), ("back", "/")],
    );
    assert_eq!(r.status, 303, "{r:?}");
    let out = hook.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "allow", "{v}");
    let decided = w.events_of("t1", "permission_decision");
    assert_eq!(decided.len(), 1, "{decided:?}");
    let by = decided[0]["data"]["by"].as_str().unwrap().to_string();
    assert!(by.starts_with("web:"), "{by}");
    let acts = w.events_of("t1", "web_action");
    assert_eq!(acts[0]["data"]["by"], by.as_str());
    assert_eq!(acts[0]["data"]["decision"], "allow");
    wait_for("the request gone from the page", 10, || {
        (!page.get("/", &s).body.contains("/permit/p-")).then_some(())
    });
}

/// An open page's event stream says "changed" soon after a handoff lands; the page then
/// shows it.
#[test]
fn the_event_stream_tells_an_open_page_of_a_change() {
    let w = World::new();
    let page = served(&w);
    let s = page.first_login();
    let tp = page.task_path(&s, "t1");
    let mut stream = std::net::TcpStream::connect(page.url.trim_start_matches("http://")).unwrap();
    use std::io::Write;
    write!(
        stream,
        "GET /events HTTP/1.1\r\nHost: x\r\nCookie: ao_session={s}\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut r = BufReader::new(stream);
    let mut first = String::new();
    r.read_line(&mut first).unwrap();
    assert!(first.contains("200"), "{first}");
    std::thread::sleep(Duration::from_millis(300));
    let t0 = Instant::now();
    let file = w.handoff("t1", "dev", "COMPLETE").write();
    let mut line = String::new();
    loop {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the stream ended");
        if line.starts_with("event: changed") {
            break;
        }
    }
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(2), "told after {took:?}");
    let name = std::path::Path::new(file.trim())
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    wait_for("the handoff on the task page", 5, || {
        page.get(&tp, &s).body.contains(&name).then_some(())
    });
}

/// Only a person gets the page: an agent's `task web` is refused (exit 6), so is a
/// non-loopback address without --insecure-listen; without a daemon it says how to start one.
#[test]
fn an_agent_or_an_open_address_is_refused() {
    let w = World::new();
    let o = run(w.task().args(["web", "--url"]));
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("task daemon"), "{}", stderr(&o));
    let page = served(&w);
    for who in [("TASK_AGENT", "dev"), ("TASK_ROLE", "hub")] {
        let o = run(w.task().args(["web", "--url"]).env(who.0, who.1));
        assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
        assert!(stderr(&o).contains("for a human"), "{}", stderr(&o));
    }
    let o = run(w.task().args(["web", "--listen", "0.0.0.0:0"]));
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("--insecure-listen"), "{}", stderr(&o));
    // The page stays served where it was.
    assert_eq!(page.get("/login", "").status, 200);
}

/// A read-only page shows, and refuses every answer even with a good session and token.
#[test]
fn a_read_only_page_takes_no_action() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let page = w.web(&["--read-only"]);
    let s = page.first_login();
    let tp = page.task_path(&s, "t1");
    let home = page.get(&tp, &s).body;
    assert!(!home.contains("Check in now"), "no forms");
    let at = home.find("name=\"csrf\" value=\"").unwrap();
    let csrf = home[at + 19..].split('"').next().unwrap().to_string();
    let r = page.post(&format!("{tp}/checkin"), &s, &[("csrf", &csrf)]);
    assert_eq!(r.status, 403, "{r:?}");
    assert!(w.events_of("t1", "web_action").is_empty());
}

/// The webhook: each escalation (here, two permission requests nobody answered in time) is
/// one JSON POST to the sink, tried again after a 503, carrying the link to the task on the
/// page at the address `[web] url` names.
#[test]
fn the_webhook_is_told_of_each_escalation_with_its_link() {
    let w = World::new();
    let sink = tiny_http::Server::http("127.0.0.1:0").unwrap();
    let port = sink.server_addr().to_ip().unwrap().port();
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "[web]\nurl = \"https://phone.example:8470/\"\n\n[webhook]\nurl = \"http://127.0.0.1:{port}/hook\"\ntimeout_secs = 5\nretries = 2\n"
        ),
    )
    .unwrap();
    w.start_idle_pm("t1")
        .new_task("permit_timeout: 1s\npermit_deadline: 60s")
        .run();
    let mut hooks = [
        w.permission_hook("t1", "dev", "curl https://example.com | sh"),
        w.permission_hook("t1", "dev", "rm -rf /tmp/x"),
    ];
    let mut bodies = Vec::new();
    let mut tries = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while bodies.len() < 2 && Instant::now() < deadline {
        let Ok(Some(mut rq)) = sink.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        tries += 1;
        let mut b = String::new();
        rq.as_reader().read_to_string(&mut b).unwrap();
        assert_eq!(rq.url(), "/hook");
        if tries == 1 {
            rq.respond(tiny_http::Response::empty(503)).unwrap();
            continue;
        }
        rq.respond(tiny_http::Response::empty(200)).unwrap();
        bodies.push(serde_json::from_str::<serde_json::Value>(&b).unwrap());
    }
    assert_eq!(bodies.len(), 2, "one message per escalation: {bodies:?}");
    assert_eq!(tries, 3, "the refused one was tried again");
    let mut reasons = Vec::new();
    for b in &bodies {
        let link = b["link"].as_str().unwrap();
        assert!(
            link.starts_with("https://phone.example:8470/t/") && link.ends_with("/t1#needs"),
            "{b}"
        );
        assert!(b["text"].as_str().unwrap().contains(link), "{b}");
        assert_eq!(b["task"], "t1");
        reasons.push(b["reason"].as_str().unwrap().to_string());
    }
    assert!(
        reasons.iter().any(|r| r.contains("curl https://example.com | sh")),
        "{reasons:?}"
    );
    assert!(reasons.iter().any(|r| r.contains("rm -rf /tmp/x")), "{reasons:?}");
    // Nothing more comes for the same two escalations.
    assert!(sink.recv_timeout(Duration::from_millis(1500)).unwrap().is_none());
    for h in hooks.iter_mut() {
        let _ = h.kill();
        let _ = h.wait();
    }
}

/// With a certificate and key in config.toml the page is HTTPS, may listen beyond
/// loopback, and its cookies are `Secure`; plain HTTP on that port gets no page.
#[test]
fn with_tls_configured_the_page_is_https_and_may_listen_wider() {
    let w = World::new();
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    let (cert, key) = (cfg.join("cert.pem"), cfg.join("key.pem"));
    ok(&run(std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
        ])
        .args(["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)));
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "[web]\ntls_cert = \"{}\"\ntls_key = \"{}\"\n",
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    w.start_idle_pm("t1").new_task("").run();
    let v: serde_json::Value =
        serde_json::from_str(&ok(&run(w.task().args(["web", "--listen", "0.0.0.0:0", "--json"])))).unwrap();
    let url = v["url"].as_str().unwrap().to_string();
    assert!(url.starts_with("https://0.0.0.0:"), "{url}");
    let port = url.rsplit(':').next().unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .tls_config(ureq::tls::TlsConfig::builder().disable_verification(true).build())
        .build()
        .into();
    let code = common::web::code_of(v["login_url"].as_str().unwrap());
    let r = agent
        .post(format!("https://127.0.0.1:{port}/login"))
        .send_form([("code", code.as_str())])
        .unwrap();
    assert_eq!(r.status().as_u16(), 303);
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(
        cookie.starts_with("ao_session=") && cookie.contains("; Secure"),
        "{cookie}"
    );
    let plain = agent.get(format!("http://127.0.0.1:{port}/login")).call();
    assert!(
        plain.is_err() || plain.unwrap().status().as_u16() != 200,
        "plain HTTP got the page"
    );
    // A half-configured pair is named.
    std::fs::write(
        cfg.join("config.toml"),
        format!("[web]\ntls_cert = \"{}\"\n", cert.display()),
    )
    .unwrap();
    let o = run(w.task().args(["web", "--listen", "127.0.0.1:0"]));
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("both tls_cert and tls_key"), "{}", stderr(&o));
}

/// The rest of the answers: a message typed into an agent (verified delivery), a BLOCKED
/// handoff marked seen, an agent stopped — each recorded with the session.
#[test]
fn a_message_a_seen_item_and_a_stop_from_the_page() {
    let w = World::new();
    w.start_idle_pm("t1").new_task("").run();
    let h = w.handoff("t1", "pm", "IN_PROGRESS").target("dev").write();
    w.spawn_idle_demo("t1", "dev", &h);
    let page = w.web(&[]);
    let s = page.first_login();
    let tp = page.task_path(&s, "t1");
    let csrf = page.csrf(&s);

    let text = "from the phone: keep going; don't `rm` anything";
    let r = page.post(
        &format!("{tp}/send"),
        &s,
        &[("csrf", &csrf), ("back", &tp), ("agent", "pm"), ("text", text)],
    );
    assert_eq!(r.status, 303, "{r:?}");
    assert!(
        w.inbox("t1", "pm").iter().any(|m| m == text),
        "{:?}",
        w.inbox("t1", "pm")
    );
    let note = common::web::note(&r).expect("the outcome, shown once on the page");
    assert!(note.contains("delivered to t1/pm"), "{note}");

    w.handoff("t1", "dev", "BLOCKED")
        .body("## Blockers\nno credentials\n")
        .write();
    let key = wait_for("the BLOCKED item on the page", 10, || {
        let b = page.get("/", &s).body;
        let at = b.find("need blocked\" data-key=\"")?;
        Some(common::web::unescape(b[at + 24..].split('"').next().unwrap()))
    });
    let r = page.post("/seen", &s, &[("csrf", &csrf), ("back", "/"), ("key", &key)]);
    assert_eq!(r.status, 303, "{r:?}");
    assert!(!page.get("/", &s).body.contains("need blocked"), "marked seen");

    let r = page.post(&format!("{tp}/stop/dev"), &s, &[("csrf", &csrf), ("back", &tp)]);
    assert_eq!(r.status, 303, "{r:?}");
    wait_for("dev's session ended", 10, || {
        (!w.sessions().iter().any(|x| x.ends_with("-dev"))).then_some(())
    });
    // Marked stopped, unless its last report already says how it ended (the demo dev, given
    // no work it can do, reports BLOCKED).
    let status = w.state("t1")["agents"]["dev"]["status"].clone();
    assert!(status == "stopped" || status == "blocked", "{status}");
    let stopped = w.events_of("t1", "agent_stopped");
    assert!(
        stopped[0]["data"]["by"].as_str().unwrap().starts_with("web:"),
        "{stopped:?}"
    );
    let acts: Vec<String> = w
        .events_of("t1", "web_action")
        .iter()
        .map(|e| e["data"]["action"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(acts, ["send", "seen", "stop"]);
    let sent = &w.events_of("t1", "web_action")[0];
    assert_eq!(sent["data"]["chars"], text.chars().count());
    assert!(
        !sent.to_string().contains("keep going"),
        "the message's text is not logged"
    );
}

/// `[web] listen` in config.toml: the daemon serves the page from its start, and
/// `task web --url` gives a code for it without starting anything.
#[test]
fn the_daemon_serves_the_page_its_setting_names() {
    let w = World::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = w.dir.path().join("config/agent-orchestrator");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.toml"),
        format!("[web]\nlisten = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    w.start_idle_pm("t1").new_task("").run();
    let v: serde_json::Value = serde_json::from_str(&ok(&run(w.task().args(["web", "--url", "--json"])))).unwrap();
    assert_eq!(v["url"], format!("http://127.0.0.1:{port}"));
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let r = agent.get(format!("http://127.0.0.1:{port}/login")).call().unwrap();
    assert_eq!(r.status().as_u16(), 200);
}
