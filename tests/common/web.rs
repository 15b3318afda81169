//! The web page from outside, as a browser sees it: `task web` asked of the world's
//! daemon, then plain HTTP on loopback (ureq; redirects not followed, cookies kept by
//! hand so each test says what it sends).

use std::time::Duration;

use serde_json::Value;

use super::{World, ok, run};

/// The page served by the world's daemon.
pub struct Page {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// The login URL `task web` printed (its code not used yet).
    pub login_url: String,
    agent: ureq::Agent,
}

/// One answer: status, headers that matter here, body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    pub cookies: Vec<String>,
    pub csp: Option<String>,
    pub body: String,
}

impl World {
    /// `task web --listen 127.0.0.1:0 --json` (plus `extra`), a daemon running; the page.
    pub fn web(&self, extra: &[&str]) -> Page {
        let mut c = self.task();
        c.args(["web", "--listen", "127.0.0.1:0", "--json"]).args(extra);
        let v: Value = serde_json::from_str(&ok(&run(&mut c))).unwrap();
        Page {
            url: v["url"].as_str().unwrap().to_string(),
            login_url: v["login_url"].as_str().unwrap().to_string(),
            agent: ureq::Agent::config_builder()
                .max_redirects(0)
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(20)))
                .build()
                .into(),
        }
    }

    /// A new login code from `task web --url`.
    pub fn web_code(&self) -> String {
        let v: Value = serde_json::from_str(&ok(&run(self.task().args(["web", "--url", "--json"])))).unwrap();
        code_of(v["login_url"].as_str().unwrap())
    }
}

/// The code in a login URL.
pub fn code_of(login_url: &str) -> String {
    login_url.split("code=").nth(1).unwrap().to_string()
}

fn answer(r: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    let mut r = r.unwrap();
    let h = r.headers();
    let get = |k: &str| h.get(k).and_then(|v| v.to_str().ok()).map(str::to_string);
    let cookies = h
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    let location = get("location");
    let csp = get("content-security-policy");
    let status = r.status().as_u16();
    // The pages escape `/` in attributes as `&#x2f;` (minijinja's HTML escaping), which a
    // browser reads as `/`; so do these tests.
    let body = r
        .body_mut()
        .with_config()
        .limit(20 << 20)
        .read_to_string()
        .unwrap_or_default()
        .replace("&#x2f;", "/");
    Answer {
        status,
        location,
        cookies,
        csp,
        body,
    }
}

impl Page {
    /// GET `path` with the session cookie `session` (none when empty).
    pub fn get(&self, path: &str, session: &str) -> Answer {
        let mut r = self.agent.get(format!("{}{path}", self.url));
        if !session.is_empty() {
            r = r.header("Cookie", format!("ao_session={session}"));
        }
        answer(r.call())
    }

    /// GET `path` sending `cookies` as the Cookie header and the extra `headers`.
    pub fn get_with(&self, path: &str, cookies: &str, headers: &[(&str, &str)]) -> Answer {
        let mut r = self.agent.get(format!("{}{path}", self.url)).header("Cookie", cookies);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        answer(r.call())
    }

    /// POST the form `fields` to `path` with the session cookie `session`.
    pub fn post(&self, path: &str, session: &str, fields: &[(&str, &str)]) -> Answer {
        let mut r = self.agent.post(format!("{}{path}", self.url));
        if !session.is_empty() {
            r = r.header("Cookie", format!("ao_session={session}"));
        }
        answer(r.send_form(fields.iter().copied()))
    }

    /// Log in with `code`: the session cookie's value, or the refusal.
    pub fn login(&self, code: &str) -> Result<String, Answer> {
        let a = self.post("/login", "", &[("code", code)]);
        let cookie = a.cookies.iter().find_map(|c| {
            c.strip_prefix("ao_session=")
                .map(|v| v.split(';').next().unwrap().to_string())
        });
        match (a.status, cookie) {
            (303, Some(c)) if !c.is_empty() => Ok(c),
            _ => Err(a),
        }
    }

    /// Log in with the code `task web` printed.
    pub fn first_login(&self) -> String {
        self.login(&code_of(&self.login_url)).expect("the printed code logs in")
    }

    /// The CSRF token a page's forms carry.
    pub fn csrf(&self, session: &str) -> String {
        let a = self.get("/", session);
        let at = a
            .body
            .find("name=\"csrf\" value=\"")
            .expect("a form with its CSRF token");
        a.body[at + 19..].split('"').next().unwrap().to_string()
    }

    /// The path of task `task`'s page, as the home page links it.
    pub fn task_path(&self, session: &str, task: &str) -> String {
        let a = self.get("/", session);
        let end = format!("/{task}\"");
        let at = a
            .body
            .find(&end)
            .unwrap_or_else(|| panic!("no link to {task}: {}", a.body));
        let start = a.body[..at].rfind("\"/t/").unwrap();
        a.body[start + 1..at + end.len() - 1].to_string()
    }
}

/// An attribute's text as a browser reads it.
pub fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&#x27;", "'")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&#x2f;", "/")
        .replace("&amp;", "&")
}

/// The one-time note an action's answer carries for the page it goes back to.
pub fn note(a: &Answer) -> Option<String> {
    let hex = a.cookies.iter().find_map(|c| {
        c.strip_prefix("ao_note=")
            .map(|v| v.split(';').next().unwrap().to_string())
    })?;
    let bytes: Vec<u8> = (0..hex.len() / 2)
        .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    String::from_utf8(bytes).ok()
}
