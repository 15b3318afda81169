//! Token usage read from Claude Code's transcripts (pure): a transcript is JSONL, one
//! entry per line; assistant entries carry `message.id`, `message.model` and
//! `message.usage`. Claude Code writes one line per content block of an answer, every
//! one with the same message id and a copy of its usage (the later ones with the final
//! output count), so an answer is counted once, with the largest figures seen for its id.
//!
//! The reader is incremental: it is fed the bytes after the offset it last stopped at,
//! takes only complete lines (a line still being written is left for next time), and
//! skips a malformed line that carries usage with a warning rather than guessing at it
//! (a line without usage is not parsed: it cannot change a total).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// How many recent message ids are remembered to merge their repeated lines: an answer's
/// lines are written together, so a handful is plenty; the bound keeps the state small.
const RECENT_IDS: usize = 64;

/// Tokens of one kind of use, as the API bills them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
}

impl Tokens {
    /// Every token, of every kind.
    pub fn total(&self) -> u64 {
        self.input + self.output + self.cache_creation + self.cache_read
    }

    /// Add `o` to these.
    pub fn add(&mut self, o: &Tokens) {
        self.input += o.input;
        self.output += o.output;
        self.cache_creation += o.cache_creation;
        self.cache_read += o.cache_read;
    }

    /// Take `o` away (saturating: never below zero).
    fn sub(&mut self, o: &Tokens) {
        self.input = self.input.saturating_sub(o.input);
        self.output = self.output.saturating_sub(o.output);
        self.cache_creation = self.cache_creation.saturating_sub(o.cache_creation);
        self.cache_read = self.cache_read.saturating_sub(o.cache_read);
    }

    /// The larger of each field.
    fn max(&self, o: &Tokens) -> Tokens {
        Tokens {
            input: self.input.max(o.input),
            output: self.output.max(o.output),
            cache_creation: self.cache_creation.max(o.cache_creation),
            cache_read: self.cache_read.max(o.cache_read),
        }
    }
}

/// Tokens by model.
pub type ByModel = BTreeMap<String, Tokens>;

/// The sum of every model's tokens.
pub fn sum(by_model: &ByModel) -> Tokens {
    let mut t = Tokens::default();
    for v in by_model.values() {
        t.add(v);
    }
    t
}

/// Add every model of `from` into `into`.
pub fn merge(into: &mut ByModel, from: &ByModel) {
    for (m, t) in from {
        into.entry(m.clone()).or_default().add(t);
    }
}

/// One transcript as read so far: where reading stopped, and what it counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transcript {
    /// Bytes consumed (always at a line end).
    pub offset: u64,
    /// Tokens by model.
    #[serde(default)]
    pub by_model: ByModel,
    /// Answers counted.
    #[serde(default)]
    pub messages: u64,
    /// Lines skipped as malformed.
    #[serde(default)]
    pub skipped: u64,
    /// The latest message ids with the model and tokens counted for them, oldest first.
    #[serde(default)]
    pub recent: Vec<(String, String, Tokens)>,
    /// Times the client compacted this conversation by itself (or was told to: `/compact`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub compactions: u64,
    /// The latest of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction: Option<Compaction>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A compaction, as the transcript records it (`compact_boundary`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    /// `auto` (the client, near its window's end) or `manual` (`/compact`).
    pub trigger: String,
    /// The conversation's tokens before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct SystemLine {
    #[serde(rename = "type")]
    kind: Option<String>,
    subtype: Option<String>,
    #[serde(rename = "compactMetadata")]
    meta: Option<CompactMeta>,
}

#[derive(Deserialize)]
struct CompactMeta {
    trigger: Option<String>,
    #[serde(rename = "preTokens")]
    pre_tokens: Option<u64>,
}

/// What one feed did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Fed {
    /// Bytes consumed from the chunk (complete lines only).
    pub consumed: usize,
    /// One line per malformed line skipped: where it was and why.
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct Message {
    id: Option<String>,
    model: Option<String>,
    usage: Option<RawUsage>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

impl Transcript {
    /// Feed the bytes that follow [`Transcript::offset`]; complete lines are counted and
    /// `offset` moves past them.
    pub fn feed(&mut self, chunk: &[u8]) -> Fed {
        let mut fed = Fed::default();
        let Some(end) = chunk.iter().rposition(|b| *b == b'\n') else {
            return fed;
        };
        for line in chunk[..=end].split(|b| *b == b'\n') {
            let at = self.offset + fed.consumed as u64;
            fed.consumed += line.len() + 1;
            if let Err(why) = self.line(line) {
                self.skipped += 1;
                fed.warnings.push(format!("line at byte {at}: {why}; skipped"));
            }
        }
        // The split yields an empty piece after the last newline: it consumed nothing.
        fed.consumed -= 1;
        self.offset += fed.consumed as u64;
        fed
    }

    /// Count one line (no newline). Lines that are not assistant answers count nothing.
    fn line(&mut self, line: &[u8]) -> Result<(), String> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        // Most lines (prompts, tool results: most of the bytes) carry no usage: they cannot
        // change a total, so they are not parsed at all, and a first read of a long
        // transcript stays close to the cost of reading its bytes.
        if !carries_usage(line) {
            if names_compact_boundary(line) {
                self.compaction(line);
            }
            return Ok(());
        }
        let l: Line = serde_json::from_slice(line).map_err(|e| format!("not a transcript entry ({e})"))?;
        if l.kind.as_deref() != Some("assistant") {
            return Ok(());
        }
        let Some(m) = l.message else { return Ok(()) };
        let Some(u) = m.usage else { return Ok(()) };
        let model = m.model.unwrap_or_else(|| "unknown".into());
        // Claude Code's own placeholders (errors shown as answers) cost nothing.
        if model == "<synthetic>" {
            return Ok(());
        }
        let t = Tokens {
            input: u.input_tokens,
            output: u.output_tokens,
            cache_creation: u.cache_creation_input_tokens,
            cache_read: u.cache_read_input_tokens,
        };
        let Some(id) = m.id else {
            // No id to merge by: each line is its own answer.
            self.by_model.entry(model).or_default().add(&t);
            self.messages += 1;
            return Ok(());
        };
        if let Some(i) = self.recent.iter().position(|(rid, _, _)| *rid == id) {
            let (_, old_model, old) = self.recent[i].clone();
            let new = old.max(&t);
            let e = self.by_model.entry(old_model.clone()).or_default();
            e.sub(&old);
            e.add(&new);
            self.recent[i] = (id, old_model, new);
            return Ok(());
        }
        self.by_model.entry(model.clone()).or_default().add(&t);
        self.messages += 1;
        self.recent.push((id, model, t));
        if self.recent.len() > RECENT_IDS {
            self.recent.remove(0);
        }
        Ok(())
    }
}

impl Transcript {
    /// Count a `compact_boundary` line; any other line naming it is not one.
    fn compaction(&mut self, line: &[u8]) {
        let Ok(l) = serde_json::from_slice::<SystemLine>(line) else {
            return;
        };
        if l.kind.as_deref() != Some("system") || l.subtype.as_deref() != Some("compact_boundary") {
            return;
        }
        self.compactions += 1;
        self.last_compaction = Some(Compaction {
            trigger: l
                .meta
                .as_ref()
                .and_then(|m| m.trigger.clone())
                .unwrap_or_else(|| "unknown".into()),
            pre_tokens: l.meta.and_then(|m| m.pre_tokens),
        });
    }
}

/// Whether a line names `compact_boundary` (a literal search).
fn names_compact_boundary(line: &[u8]) -> bool {
    static COMPACT: std::sync::OnceLock<regex::bytes::Regex> = std::sync::OnceLock::new();
    COMPACT
        .get_or_init(|| regex::bytes::Regex::new("\"compact_boundary\"").expect("a literal pattern"))
        .is_match(line)
}

/// Whether a line names `"usage"` (a literal search, vectorised by the regex crate).
fn carries_usage(line: &[u8]) -> bool {
    static USAGE: std::sync::OnceLock<regex::bytes::Regex> = std::sync::OnceLock::new();
    USAGE
        .get_or_init(|| regex::bytes::Regex::new("\"usage\"").expect("a literal pattern"))
        .is_match(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &str, model: &str, i: u64, o: u64, cw: u64, cr: u64) -> String {
        format!(
            "{{\"type\":\"assistant\",\"message\":{{\"id\":\"{id}\",\"model\":\"{model}\",\"role\":\"assistant\",\"usage\":{{\"input_tokens\":{i},\"output_tokens\":{o},\"cache_creation_input_tokens\":{cw},\"cache_read_input_tokens\":{cr}}}}}}}\n"
        )
    }

    #[test]
    fn compactions_are_counted_from_their_boundary_lines() {
        let mut t = Transcript::default();
        let text = concat!(
            "{\"type\":\"system\",\"subtype\":\"compact_boundary\",\"content\":\"Conversation compacted\",\"compactMetadata\":{\"trigger\":\"auto\",\"preTokens\":167000}}\n",
            "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"the word compact_boundary in a prompt\"}}\n",
            "{\"type\":\"system\",\"subtype\":\"compact_boundary\",\"compactMetadata\":{\"trigger\":\"manual\"}}\n",
        );
        t.feed(text.as_bytes());
        assert_eq!(t.compactions, 2);
        assert_eq!(
            t.last_compaction,
            Some(Compaction {
                trigger: "manual".into(),
                pre_tokens: None
            })
        );
        assert_eq!(t.messages, 0);
    }

    #[test]
    fn answers_are_summed_by_model_and_each_id_counted_once() {
        let mut t = Transcript::default();
        let text = [
            "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n".to_string(),
            answer("m1", "claude-sonnet-4-5", 100, 1, 10, 1000),
            // The same answer's second content block, with the final output count.
            answer("m1", "claude-sonnet-4-5", 100, 20, 10, 1000),
            answer("m2", "claude-opus-4-1", 5, 7, 0, 0),
        ]
        .concat();
        let fed = t.feed(text.as_bytes());
        assert_eq!(fed.consumed, text.len());
        assert!(fed.warnings.is_empty(), "{:?}", fed.warnings);
        assert_eq!(t.offset, text.len() as u64);
        assert_eq!(t.messages, 2);
        assert_eq!(
            t.by_model["claude-sonnet-4-5"],
            Tokens {
                input: 100,
                output: 20,
                cache_creation: 10,
                cache_read: 1000
            }
        );
        assert_eq!(sum(&t.by_model).total(), 1130 + 12);
    }

    #[test]
    fn a_line_still_being_written_waits_and_is_counted_once_complete() {
        let mut t = Transcript::default();
        let line = answer("m1", "m", 3, 4, 0, 0);
        let (a, b) = line.split_at(40);
        assert_eq!(t.feed(a.as_bytes()).consumed, 0);
        assert_eq!(t.offset, 0);
        assert_eq!(t.messages, 0);
        // Next time the reader starts again at the offset, with the whole line.
        let fed = t.feed(format!("{a}{b}").as_bytes());
        assert_eq!(fed.consumed, line.len());
        assert_eq!(
            sum(&t.by_model),
            Tokens {
                input: 3,
                output: 4,
                ..Default::default()
            }
        );
    }

    #[test]
    fn a_malformed_line_is_skipped_with_a_warning_and_the_total_stays_right() {
        let mut t = Transcript::default();
        let text = format!(
            "{}{{\"type\":\"assistant\",\"message\":{{\"usage\":{{\"input_tokens\":\"lots\"}}}}}}\nnot json \"usage\" at all\n{}",
            answer("m1", "m", 1, 2, 0, 0),
            answer("m2", "m", 10, 20, 0, 0)
        );
        let fed = t.feed(text.as_bytes());
        assert_eq!(fed.warnings.len(), 2, "{:?}", fed.warnings);
        assert!(fed.warnings[0].contains("skipped"), "{:?}", fed.warnings);
        assert_eq!(t.skipped, 2);
        assert_eq!(
            sum(&t.by_model),
            Tokens {
                input: 11,
                output: 22,
                ..Default::default()
            }
        );
    }

    #[test]
    fn repeated_lines_of_one_answer_merge_across_feeds() {
        let mut t = Transcript::default();
        let first = answer("m1", "m", 10, 1, 0, 0);
        t.feed(first.as_bytes());
        t.feed(answer("m1", "m", 10, 30, 0, 0).as_bytes());
        assert_eq!(t.messages, 1);
        assert_eq!(
            sum(&t.by_model),
            Tokens {
                input: 10,
                output: 30,
                ..Default::default()
            }
        );
        // Serialised and read back (the usage file), the merge still holds.
        let mut back: Transcript = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        back.feed(answer("m1", "m", 10, 30, 0, 0).as_bytes());
        assert_eq!(sum(&back.by_model).output, 30);
    }

    #[test]
    fn synthetic_answers_and_other_entries_cost_nothing() {
        let mut t = Transcript::default();
        let text = format!(
            "{}{{\"type\":\"summary\",\"usage\":{{\"input_tokens\":5}}}}\n\n",
            answer("m1", "<synthetic>", 0, 0, 0, 0)
        );
        let fed = t.feed(text.as_bytes());
        assert!(fed.warnings.is_empty());
        assert_eq!(t.messages, 0);
        assert_eq!(t.offset, text.len() as u64);
    }
}
