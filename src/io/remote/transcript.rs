//! A remote agent's Claude Code transcript, read from an offset over the host's SSH
//! master: one `sh` command prints the file's size, then at most `max` bytes from the
//! offset, so an update moves only what was appended. The transcript is where Claude
//! Code keeps it on the host (`$CLAUDE_CONFIG_DIR/projects`, else `~/.claude/projects`);
//! `AO_REMOTE_CLAUDE_PROJECTS` overrides it (tests, whose loopback host is this machine).

use super::Host;
use crate::core::error::{Error, Result};

/// The command run on the host: `$1` folder slug, `$2` session id, `$3` first byte
/// (1-based, as `tail -c +N` counts), `$4` most bytes, `$5` a projects folder override.
const SCRIPT: &str = r#"d="${CLAUDE_CONFIG_DIR:-$HOME/.claude}/projects"; [ -n "$5" ] && d="$5"; f="$d/$1/$2.jsonl"; [ -f "$f" ] || exit 0; wc -c < "$f"; tail -c +"$3" "$f" | head -c "$4""#;

/// A piece of a remote transcript: the file's whole size, and bytes from the offset asked.
#[derive(Debug, PartialEq, Eq)]
pub struct Piece {
    /// The file's size now.
    pub size: u64,
    /// Bytes from the offset (at most the `max` asked for).
    pub bytes: Vec<u8>,
}

/// Read at most `max` bytes of session `id`'s transcript from `offset`; `None` when the
/// host has no such file yet (Claude Code writes it at its first answer).
pub async fn read(host: &Host, slug: &str, id: &str, offset: u64, max: usize) -> Result<Option<Piece>> {
    let over = std::env::var("AO_REMOTE_CLAUDE_PROJECTS").unwrap_or_default();
    let (start, max) = ((offset + 1).to_string(), max.to_string());
    let out = host
        .run(
            "read a Claude Code transcript",
            &["sh", "-c", SCRIPT, "sh", slug, id, &start, &max, &over],
            None,
        )
        .await?;
    parse(&out, host)
}

fn parse(out: &str, host: &Host) -> Result<Option<Piece>> {
    if out.is_empty() {
        return Ok(None);
    }
    let (size, rest) = out.split_once('\n').unwrap_or((out, ""));
    let size = size.trim().parse().map_err(|_| {
        Error::Remote(format!(
            "reading a transcript on {} printed {:?} where its size should be; is `wc` there?",
            host.spec.destination(),
            size.chars().take(40).collect::<String>()
        ))
    })?;
    Ok(Some(Piece {
        size,
        bytes: rest.as_bytes().to_vec(),
    }))
}
