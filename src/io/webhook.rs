//! The webhook: one JSON POST per thing that needs a human, with the link to it on the web
//! page, sent from a thread of its own (an escalation never waits for the network), tried
//! again after 1 s, 2 s, 4 s … on a failure or a 5xx/429 answer, each try bounded by a
//! timeout. The body carries the keys Slack (`text`), Discord (`content`) and ntfy's JSON
//! publishing (`message`, `title`, `click`) read, so one setting suits any of them.

use std::time::Duration;

use serde_json::{Value, json};

/// Where and how to send.
#[derive(Debug, Clone)]
pub struct Hook {
    /// The endpoint.
    pub url: String,
    /// One try's bound.
    pub timeout: Duration,
    /// Tries after the first.
    pub retries: u32,
}

/// The message for `reason` in `task` (of `project`), with `link` to the item when the web
/// page is configured.
pub fn payload(project: &str, task: &str, reason: &str, link: Option<&str>) -> Value {
    let title = format!("agent-orchestrator: {task} needs you");
    let text = match link {
        Some(l) => format!("{title}: {reason}\n{l}"),
        None => format!("{title}: {reason}"),
    };
    json!({
        "text": text,
        "content": text,
        "title": title,
        "message": reason,
        "click": link,
        "link": link,
        "task": task,
        "project": project,
        "reason": reason,
    })
}

/// Whether an answer's status is worth another try.
fn retryable(status: u16) -> bool {
    status == 429 || status >= 500
}

/// POST `body` until it is taken or the tries run out; whether it was taken.
pub fn post(hook: &Hook, body: &Value) -> bool {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(hook.timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let bytes = body.to_string();
    let mut pause = Duration::from_secs(1);
    for attempt in 0..=hook.retries {
        if attempt > 0 {
            std::thread::sleep(pause);
            pause *= 2;
        }
        match agent
            .post(&hook.url)
            .header("Content-Type", "application/json")
            .send(bytes.as_bytes())
        {
            Ok(r) if r.status().is_success() => return true,
            Ok(r) if retryable(r.status().as_u16()) => {
                tracing::warn!(url = %hook.url, status = r.status().as_u16(), attempt, "webhook refused; trying again");
            }
            Ok(r) => {
                tracing::warn!(url = %hook.url, status = r.status().as_u16(), "webhook refused the message; not tried again");
                return false;
            }
            Err(e) => tracing::warn!(url = %hook.url, error = %e, attempt, "webhook unreachable; trying again"),
        }
    }
    tracing::warn!(url = %hook.url, tries = hook.retries + 1, "webhook gave up");
    false
}

/// [`post`] from a process of its own (`task webhook-post`, the message on its stdin), so
/// it outlives a short-lived `task` that raised the escalation (a permission hook, a cron
/// check-in); from a thread when no process can be started.
pub fn send(hook: Hook, body: Value) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let bin = match &crate::io::hooks::get().task_bin {
        Some(b) => Ok(b.clone()),
        None => std::env::current_exe(),
    };
    let msg = json!({
        "url": hook.url,
        "timeout_secs": hook.timeout.as_secs(),
        "retries": hook.retries,
        "body": body,
    })
    .to_string();
    let child = bin.and_then(|b| {
        Command::new(b)
            .arg("webhook-post")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
    });
    match child {
        Ok(mut c) => {
            // A message is far smaller than a pipe's buffer: the write does not wait.
            if let Some(mut stdin) = c.stdin.take() {
                let _ = stdin.write_all(msg.as_bytes());
            }
            std::thread::spawn(move || {
                let _ = c.wait();
            });
        }
        Err(e) => {
            tracing::warn!(error = %e, "cannot start `task webhook-post`; posting from this process");
            std::thread::spawn(move || post(&hook, &body));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_has_every_services_keys_and_the_link() {
        let v = payload("/p", "demo", "PM out of restarts", Some("http://h/t/x/demo#needs"));
        for k in ["text", "content", "message", "title", "click"] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert!(v["text"].as_str().unwrap().contains("http://h/t/x/demo#needs"));
        assert_eq!(v["task"], "demo");
        let v = payload("/p", "demo", "r", None);
        assert!(v["link"].is_null());
    }

    #[test]
    fn only_busy_or_broken_servers_are_tried_again() {
        assert!(retryable(503) && retryable(429));
        assert!(!retryable(404) && !retryable(400));
    }
}
