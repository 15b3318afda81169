//! `task web` in a real browser: Debian's Chromium, headless at a phone's size, driven
//! over WebDriver (chromedriver on a loopback port, fantoccini). A person logs in with the
//! printed URL, sees a permission request appear on the open page by itself and allows it,
//! then sees a kill -9'd agent appear under Needs you within 2 s. A screenshot at phone
//! size is kept in target/test-artifacts/.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use fantoccini::{Client, ClientBuilder, Locator};

/// Phone size (CSS pixels), as the page is meant to be read.
const PHONE: (u32, u32) = (390, 844);

/// chromedriver on a free loopback port, ended by PID on drop (the browser with it).
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn start(dir: &std::path::Path) -> Driver {
        let bin = ["chromedriver", "/usr/bin/chromedriver"]
            .into_iter()
            .find(|b| {
                Command::new(b)
                    .arg("--version")
                    .output()
                    .is_ok_and(|o| o.status.success())
            })
            .expect("chromedriver (Debian's chromium-driver) is needed: scripts/test installs it");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(bin)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", dir.join("chromedriver.log").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        wait_for("chromedriver to listen", 20, || {
            std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
        });
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(d: &Driver, profile: &std::path::Path) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                format!("--window-size={},{}", PHONE.0, PHONE.1),
                format!("--user-data-dir={}", profile.display()),
            ],
            "mobileEmulation": {"deviceMetrics": {"width": PHONE.0, "height": PHONE.1, "pixelRatio": 2.0}},
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{}", d.port))
        .await
        .expect("a Chromium session")
}

/// The text of `css` on the page now (empty when absent).
/// The live update can swap the element between finding it and reading it: read the new one.
async fn text(c: &Client, css: &str) -> String {
    for _ in 0..20 {
        let Ok(e) = c.find(Locator::Css(css)).await else {
            return String::new();
        };
        match e.text().await {
            Ok(t) => return t,
            Err(e) if e.is_stale_element_reference() => continue,
            Err(_) => return String::new(),
        }
    }
    String::new()
}

/// Tap what `css` finds now. The live update may swap the part it is in between finding
/// and tapping (WebDriver then calls the found element stale): find the new one and tap
/// that, as a person tapping a button redrawn under their finger would tap again.
async fn tap(c: &Client, what: &str, css: &str) {
    let t0 = Instant::now();
    loop {
        let found = c.find(Locator::Css(css)).await;
        let tapped = match found {
            Ok(e) => e.click().await,
            Err(e) => Err(e),
        };
        match tapped {
            Ok(()) => return,
            Err(e) if e.is_stale_element_reference() && t0.elapsed() < Duration::from_secs(5) => {}
            Err(e) => panic!("tapping {what} ({css}): {e}"),
        }
    }
}

/// Wait (polling every 50 ms) until `css`'s text satisfies `ok`; how long it took.
async fn until(c: &Client, what: &str, secs: u64, css: &str, ok: impl Fn(&str) -> bool) -> Duration {
    let t0 = Instant::now();
    loop {
        let t = text(c, css).await;
        if ok(&t) {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "{what}: not within {secs} s; {css} says {t:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_phone_logs_in_answers_a_request_and_sees_a_death_at_once() {
    let w = World::new();
    w.start_idle_pm("t1")
        .new_task("permit_timeout: 60s\npermit_deadline: 120s")
        .run();
    let h = w.handoff("t1", "pm", "IN_PROGRESS").target("dev").write();
    w.spawn_idle_demo("t1", "dev", &h);
    let page = w.web(&[]);
    let driver = Driver::start(w.dir.path());
    let c = browser(&driver, &w.dir.path().join("chromium")).await;

    // Log in: the printed URL fills the code in; one tap.
    c.goto(&page.login_url).await.unwrap();
    c.find(Locator::Css("#login")).await.unwrap().click().await.unwrap();
    until(&c, "the home page after login", 10, "#tasks", |t| t.contains("t1")).await;
    assert!(text(&c, "#needs").await.contains("Nobody needs you"));
    let width: f64 = c
        .execute("return document.documentElement.clientWidth", vec![])
        .await
        .unwrap()
        .as_f64()
        .unwrap();
    assert!(width <= PHONE.0 as f64, "laid out at phone width, not {width}");

    // A permission request appears on the open page by itself, and Allow answers it.
    let hook = w.permission_hook("t1", "dev", "make test");
    until(&c, "the request under Needs you", 5, "#needs", |t| {
        t.contains("make test")
    })
    .await;
    tap(&c, "Allow", "#needs button.allow[value=allow]").await;
    until(&c, "the answer shown", 10, ".note", |t| t.contains("allow (by you)")).await;
    let out = hook.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["hookSpecificOutput"]["decision"]["behavior"], "allow", "{v}");
    let decided = w.events_of("t1", "permission_decision");
    assert!(
        decided[0]["data"]["by"].as_str().unwrap().starts_with("web:"),
        "{decided:?}"
    );
    let acts = w.events_of("t1", "web_action");
    assert_eq!(acts[0]["data"]["action"], "permit");

    // kill -9 of an agent: under Needs you within 2 s, the page not reloaded.
    until(&c, "the request gone", 10, "#needs", |t| !t.contains("make test")).await;
    let pid: i32 = String::from_utf8_lossy(
        &w.tmux(&["display", "-p", "-t", &w.pane("t1", "dev"), "#{pane_pid}"])
            .stdout,
    )
    .trim()
    .parse()
    .unwrap();
    c.execute("document.body.dataset.same = 'yes'", vec![]).await.unwrap();
    // SAFETY: the demo agent this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    let took = until(&c, "the dead agent under Needs you", 2, "#needs", |t| {
        (t.contains("DEAD") || t.contains("dead")) && t.contains("t1/dev")
    })
    .await;
    let same = c.execute("return document.body.dataset.same", vec![]).await.unwrap();
    assert_eq!(same, "yes", "updated in place, not reloaded");
    eprintln!("kill -9 → on the page in {took:?}");

    let shot = c.screenshot().await.unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("web-phone.png"), &shot).unwrap();
    assert_eq!(&shot[1..4], b"PNG");
    c.close().await.unwrap();
}
