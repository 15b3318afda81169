//! What a handoff says: its file name, the document model, fault-tolerant parsing,
//! rendering a new one, and the ledger that decides which handoffs are new. All pure;
//! reading and writing the files is [`crate::store::handoffs`]'s.

mod ledger;
mod model;
mod name;
mod new;
mod parse;
mod text;

pub use ledger::{Candidate, Ledger, LedgerEntry, Seen, sha256_hex};
pub use model::{Gate, GateResult, Handoff, Sections, Status};
pub use name::HandoffName;
pub use new::{NewHandoff, render};
pub use parse::{parse, parse_bytes};
pub use text::{decode, is_none_text, one_line};

/// One handoff file as found in `handoffs/`: its name, what was read, and the parse.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The file name (no folder).
    pub file: String,
    /// Parsed name (agent, timestamp, suffix).
    pub name: HandoffName,
    /// Size from fstat.
    pub size: u64,
    /// mtime in ns.
    pub mtime_ns: i64,
    /// SHA-256 (hex) of the bytes read: what "unchanged" and "amended" are judged by.
    pub sha256: String,
    /// The parsed document, with warnings (including a title/file-name agent mismatch).
    /// Shared: a handoff once parsed is copied into every check-in's plan, progress.md's
    /// newest-per-agent and the parsed handoffs' memo, and deep copies of its sections were
    /// a visible share of a check-in.
    pub handoff: std::sync::Arc<Handoff>,
}

impl Loaded {
    /// A handoff read from `bytes` (the capped head when `truncated`) of a file of
    /// `size` bytes, parsed, with a title that disagrees with the file name noted:
    /// the file name is authoritative.
    pub fn new(name: &HandoffName, bytes: &[u8], truncated: bool, size: u64, mtime_ns: i64, sha256: String) -> Loaded {
        let mut handoff = parse_bytes(bytes, truncated);
        if let Some(t) = &handoff.title_agent {
            if t != &name.agent {
                handoff.warnings.push(format!(
                    "title names agent {t:?} but the file name says {:?}",
                    name.agent
                ));
            }
        }
        Loaded {
            file: name.file_name(),
            name: name.clone(),
            size,
            mtime_ns,
            sha256,
            handoff: std::sync::Arc::new(handoff),
        }
    }

    /// The source agent: the file name is authoritative (the supervisor wrote or validated it).
    pub fn agent(&self) -> &str {
        &self.name.agent
    }

    /// A handoff as if read from `file` with `text` in it, for unit tests of the decisions.
    #[cfg(test)]
    pub(crate) fn from_text(file: &str, text: &str) -> Loaded {
        Loaded {
            file: file.into(),
            name: HandoffName::parse(file).expect("a valid handoff file name"),
            size: text.len() as u64,
            mtime_ns: 0,
            sha256: sha256_hex(text.as_bytes()),
            handoff: std::sync::Arc::new(parse(text)),
        }
    }
}
