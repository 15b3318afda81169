//! The user's settings for the web page, its webhook and the fleet's hosts, from
//! config.toml (beside the `notify` argv and `[runtimes.*]`):
//!
//! ```toml
//! [web]
//! listen = "127.0.0.1:8470"                 # the daemon serves the page (off when absent)
//! url = "https://laptop.tailnet.ts.net:8470" # how links in notifications reach it
//! read_only = false
//! insecure_listen = false                    # serve a non-loopback address without TLS
//! tls_cert = "/path/cert.pem"                # with tls_key: HTTPS
//! tls_key = "/path/key.pem"
//!
//! [webhook]
//! url = "https://ntfy.example/topic"        # a JSON POST per escalation
//! timeout_secs = 10
//! retries = 3
//! ```

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::core::error::{Error, Result};

/// `[web]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Web {
    /// Where the daemon serves the page; `None`: it does not, until `task web` asks.
    pub listen: Option<String>,
    /// The page's address as a phone reaches it, for links in notifications.
    pub url: Option<String>,
    /// No actions, only looking.
    #[serde(default)]
    pub read_only: bool,
    /// Serve a non-loopback address over plain HTTP (a warning each start).
    #[serde(default)]
    pub insecure_listen: bool,
    /// PEM certificate chain for HTTPS.
    pub tls_cert: Option<String>,
    /// PEM private key for HTTPS.
    pub tls_key: Option<String>,
}

/// `[webhook]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Webhook {
    /// Where each message is POSTed as JSON.
    pub url: String,
    /// Seconds one try may take.
    #[serde(default = "default_timeout")]
    pub timeout_secs: u64,
    /// Tries after the first one fails (1 s, 2 s, 4 s … apart).
    #[serde(default = "default_retries")]
    pub retries: u32,
}

impl Web {
    /// The certificate and key for HTTPS: both or neither.
    pub fn tls(&self) -> Result<Option<(std::path::PathBuf, std::path::PathBuf)>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Ok(Some((c.into(), k.into()))),
            (None, None) => Ok(None),
            _ => Err(Error::BadInput(
                "config.toml [web] needs both tls_cert and tls_key for HTTPS (or neither)".into(),
            )),
        }
    }
}

fn default_timeout() -> u64 {
    10
}

fn default_retries() -> u32 {
    3
}

#[derive(Debug, Default, Deserialize)]
struct Both {
    web: Option<Web>,
    webhook: Option<Webhook>,
}

/// The two tables of `text` (config.toml, read from `file`); other keys belong to others.
/// Errors name the file, the table and what to fix.
fn parse(file: &std::path::Path, text: &str) -> Result<(Option<Web>, Option<Webhook>)> {
    let file = file.display();
    let v: toml::Value = toml::from_str(text)
        .map_err(|e| Error::BadInput(format!("{file} is not valid TOML: {e}; fix it and try again")))?;
    let mut both = Both::default();
    if let Some(w) = v.get("web") {
        both.web = Some(
            w.clone()
                .try_into()
                .map_err(|e| Error::BadInput(format!("{file} [web]: {e}")))?,
        );
    }
    if let Some(w) = v.get("webhook") {
        both.webhook = Some(
            w.clone()
                .try_into()
                .map_err(|e| Error::BadInput(format!("{file} [webhook]: {e}")))?,
        );
    }
    if let Some(h) = &both.webhook {
        if !(h.url.starts_with("http://") || h.url.starts_with("https://")) {
            return Err(Error::BadInput(format!(
                "{file} [webhook] url {:?} is not an http:// or https:// address",
                h.url
            )));
        }
    }
    Ok((both.web, both.webhook))
}

fn read() -> Result<(Option<Web>, Option<Webhook>)> {
    match crate::io::config::text()? {
        Some((file, text)) => parse(&file, &text),
        None => Ok((None, None)),
    }
}

/// The fleet: config.toml's `[hosts.<name>]` tables, checked (`core::fleet::hosts`); empty
/// when there is none.
pub fn hosts() -> Result<Vec<crate::core::fleet::Host>> {
    let Some((p, v)) = crate::io::config::value()? else {
        return Ok(Vec::new());
    };
    let Some(t) = v.get("hosts") else {
        return Ok(Vec::new());
    };
    let tables: std::collections::BTreeMap<String, crate::core::fleet::HostConfig> = t
        .clone()
        .try_into()
        .map_err(|e| Error::BadInput(format!("{} [hosts]: {e}", p.display())))?;
    crate::core::fleet::hosts(tables).map_err(|e| Error::BadInput(format!("{}: {e}", p.display())))
}

/// `[web]`, or the defaults when there is none.
pub fn web() -> Result<Web> {
    Ok(read()?.0.unwrap_or_default())
}

/// `[webhook]`, when configured. A broken config is logged and means no webhook: the
/// escalation it would announce must not fail for it.
pub fn webhook() -> Option<Webhook> {
    match read() {
        Ok((_, h)) => h,
        Err(e) => {
            tracing::warn!(error = %e, "no webhook: the config does not read");
            None
        }
    }
}

/// A task's place on the web page: `/t/<project id>/<task>`, the id being the first 12
/// hex digits of the project folder's SHA-256 (names repeat across projects, folders
/// are long and private).
pub fn task_path(project: &str, task: &str) -> String {
    format!("/t/{}/{task}", project_id(project))
}

/// The project id in [`task_path`].
pub fn project_id(project: &str) -> String {
    Sha256::digest(project.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The page's base address for links: `url`, else `http://<listen>`; `None` when the page
/// is not configured.
pub fn base_url(w: &Web) -> Option<String> {
    match (&w.url, &w.listen) {
        (Some(u), _) => Some(u.trim_end_matches('/').to_string()),
        (None, Some(l)) => Some(format!("http://{l}")),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn both_tables_read_and_others_are_left_alone() {
        let (w, h) = parse(
            Path::new("c.toml"),
            "notify = [\"x\"]\n[runtimes.a]\nargv=[\"a\"]\n[web]\nlisten = \"127.0.0.1:1\"\nread_only = true\n[webhook]\nurl = \"http://127.0.0.1:2/h\"\n",
        )
        .unwrap();
        let w = w.unwrap();
        assert_eq!(w.listen.as_deref(), Some("127.0.0.1:1"));
        assert!(w.read_only);
        assert_eq!(base_url(&w).as_deref(), Some("http://127.0.0.1:1"));
        let h = h.unwrap();
        assert_eq!((h.timeout_secs, h.retries), (10, 3));
        assert_eq!(parse(Path::new("c.toml"), "").unwrap(), (None, None));
    }

    #[test]
    fn mistakes_are_named() {
        let file = Path::new("/home/me/.config/agent-orchestrator/config.toml");
        let e = parse(file, "[web]\nlisen = \"x\"\n").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{} [web]", file.display())) && e.contains("lisen"),
            "{e}"
        );
        let e = parse(file, "[webhook]\nurl = \"file:///etc/passwd\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&file.display().to_string()) && e.contains("http"), "{e}");
        let e = parse(file, "[web\n").unwrap_err().to_string();
        assert!(
            e.starts_with(&file.display().to_string()) && e.contains("not valid TOML"),
            "{e}"
        );
    }

    #[test]
    fn a_task_path_hides_the_folder() {
        let p = task_path("/home/me/secret-project", "demo");
        assert!(
            p.starts_with("/t/") && p.ends_with("/demo") && !p.contains("secret"),
            "{p}"
        );
        assert_eq!(project_id("/a").len(), 12);
    }
}
