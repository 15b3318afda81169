//! `task web`: have the daemon serve the web page, and get in with a one-time login code.

use std::io::Read;

use anyhow::Context;

use crate::app::session::Ctx;
use crate::core::error::{Error, Exit};
use crate::core::wire::{Request, Response, WebRequest};
use crate::io::control;
use crate::web::auth::{CODE_TTL, Keys};

use crate::cli::output::print_json;

/// The `task web --help` epilogue.
pub(crate) const AFTER_HELP: &str = "\
The page (served by the daemon, on 127.0.0.1:8470 unless told otherwise):
  Needs you first (dialogs, permission requests, escalations, dead agents, BLOCKED
  handoffs, paused agents), then every task; a task's agents, events and progress.md; each
  handoff. Answers: allow / always / deny a permission request, mark seen, check in now,
  message an agent (delivery verified), stop an agent. Each is recorded in the task's
  events.jsonl with the web session that did it. Open pages update by themselves.

Getting in:
  `task web` prints a login URL with a code that works once, for 10 minutes; opening it
  logs that browser in for 30 days. `task web --url` makes another code. `task web
  --revoke` ends every session at once. Only a person may ask: an agent is refused.

From a phone:
  Keep the page on loopback and reach it through an SSH tunnel (ssh -L 8470:127.0.0.1:8470
  host) or Tailscale (tailscale serve 8470). A non-loopback --listen needs
  --insecure-listen, which says what it costs.

Settings (config.toml, beside `notify`):
  [web]      listen, url (the address links use), read_only, insecure_listen
  [webhook]  url, timeout_secs, retries: a JSON POST per escalation, with the link to it
             (Slack `text`, Discord `content`, ntfy `message`/`title`/`click`)";

/// What `task web` was asked.
#[derive(Debug)]
pub(crate) struct Asked {
    pub listen: Option<String>,
    pub insecure_listen: bool,
    pub read_only: bool,
    pub url: bool,
    pub revoke: bool,
    pub json: bool,
}

pub(crate) fn run(a: Asked) -> anyhow::Result<()> {
    let ctx = Ctx::from_env()?;
    crate::app::verbs::web::permit_here(&ctx)?;
    let keys = Keys::of_user()?;
    if a.revoke {
        keys.revoke()?;
        if a.json {
            return print_json(&serde_json::json!({"revoked": true}));
        }
        println!(
            "Every web session has ended and unused login codes are void. Log in again with a code from `task web --url`."
        );
        return Ok(());
    }
    if !control::running() {
        return Err(Error::Environment(
            "no daemon runs to serve the page; start one with `task daemon` (or `task start`), then run `task web`"
                .into(),
        )
        .into());
    }
    let req = Request::Web(WebRequest {
        start: !a.url,
        listen: a.listen,
        read_only: a.read_only.then_some(true),
        insecure_listen: a.insecure_listen,
    });
    let (url, read_only) = match control::request(&req)? {
        Some(Response::Web {
            url: Some(u),
            read_only,
        }) => (u, read_only),
        Some(Response::Web { url: None, .. }) => {
            return Err(
                Error::Environment("the daemon does not serve the page; start it with `task web`".into()).into(),
            );
        }
        Some(Response::Refused { refusal }) => return Err(refusal.into()),
        Some(Response::Error { message, code }) => return Err(Exit::new(code, message).into()),
        Some(other) => anyhow::bail!("the daemon answered {other:?} to `task web`; is it an older version? Restart it"),
        None => return Err(Error::Environment("the daemon stopped while asked".into()).into()),
    };
    let host = url
        .split("://")
        .nth(1)
        .unwrap_or("")
        .rsplit_once(':')
        .map_or("", |(h, _)| h);
    let loopback = host
        .trim_matches(['[', ']'])
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback());
    if !loopback && url.starts_with("http://") {
        crate::cli::output::warn(format!(
            "the page is served on {url} over plain HTTP: anyone on that network can read it, session cookies included; \
             set [web] tls_cert and tls_key in config.toml for HTTPS"
        ));
    }
    let code = keys.new_code()?;
    let base = crate::app::settings::web()
        .ok()
        .and_then(|w| w.url)
        .map(|u| u.trim_end_matches('/').to_string())
        .unwrap_or_else(|| url.clone());
    let login = format!("{base}/login?code={code}");
    if a.json {
        return print_json(&serde_json::json!({
            "url": base,
            "login_url": login,
            "read_only": read_only,
            "code_expires_in_secs": CODE_TTL.num_seconds(),
        }));
    }
    println!(
        "The web page is served at {url}{}.",
        if read_only { " (read-only)" } else { "" }
    );
    println!("Log in (this code works once, for {} minutes):", CODE_TTL.num_minutes());
    println!("  {login}");
    Ok(())
}

/// The hidden `task webhook-post`: `{"url", "timeout_secs", "retries", "body"}` on stdin.
pub(crate) fn webhook_post() -> anyhow::Result<()> {
    let mut input = String::new();
    std::io::stdin()
        .take(1 << 20)
        .read_to_string(&mut input)
        .context("reading the webhook message")?;
    let v: serde_json::Value = serde_json::from_str(&input).context("the webhook message is not JSON")?;
    let hook = crate::io::webhook::Hook {
        url: v["url"].as_str().context("no url")?.to_string(),
        timeout: std::time::Duration::from_secs(v["timeout_secs"].as_u64().unwrap_or(10).max(1)),
        retries: v["retries"].as_u64().unwrap_or(3) as u32,
    };
    if !crate::io::webhook::post(&hook, &v["body"]) {
        anyhow::bail!("the webhook did not take the message");
    }
    Ok(())
}
