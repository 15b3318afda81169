//! Fault-tolerant handoff parsing (docs/protocol.md#fault-tolerant-parsing).
//!
//! Agents are language models: they forget headers, write statuses in lower
//! case, wrap things in code fences, and occasionally emit binary junk. The
//! parser never fails. It extracts what is there, records a warning for each
//! deviation, and falls back to BLOCKED when the status cannot be trusted, so
//! the PM looks at the handoff instead of assuming success.

use std::ops::Range;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::model::{Gate, GateResult, Handoff, Sections, Status};
use super::text::{decode, is_none_text, one_line};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Known {
    Instructions,
    Context,
    Skills,
    Success,
    Completed,
    Artifacts,
    Blockers,
    SkillGaps,
    Gates,
    Scope,
    NextAction,
    Summary,
    Outcome,
}

fn classify_heading(h: &str) -> Option<Known> {
    // "Blockers (if BLOCKED)", "Gates Honored (A5 …)", "Artifacts Generated:" all count.
    let base = h.split('(').next().unwrap_or(h);
    let norm: String = base
        .trim()
        .trim_end_matches(':')
        .to_ascii_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    Some(match norm.as_str() {
        "instructions" | "your instructions" => Known::Instructions,
        "context" => Known::Context,
        "skills to load" | "skills" => Known::Skills,
        "success criteria" => Known::Success,
        "completed work" | "work completed" => Known::Completed,
        "artifacts generated" | "artifacts" => Known::Artifacts,
        "blockers" | "blocker" => Known::Blockers,
        "skill gaps" | "skill gap" => Known::SkillGaps,
        "gates honored" | "gates honoured" | "gates" => Known::Gates,
        "scope" | "scope boundaries" => Known::Scope,
        "next action" | "next steps" => Known::NextAction,
        "summary" => Known::Summary,
        "outcome" => Known::Outcome,
        _ => return None,
    })
}

struct Section {
    heading: String,
    body: Range<usize>,
    items: Vec<Range<usize>>,
}

/// Parse handoff markdown. Never fails; see [`Handoff::warnings`].
pub fn parse(text: &str) -> Handoff {
    let mut warnings = Vec::new();
    parse_into(text, &mut warnings)
}

/// Parse raw bytes: decode (lossy), then [`parse`]; `truncated` adds the size-cap warning.
pub fn parse_bytes(bytes: &[u8], truncated: bool) -> Handoff {
    let mut warnings = Vec::new();
    if truncated {
        warnings.push(format!(
            "larger than the {} KiB cap; only its head was parsed",
            bytes.len() / 1024
        ));
    }
    let mut text = decode(bytes, &mut warnings);
    if truncated {
        // Drop a possibly torn last line.
        if let Some(i) = text.rfind('\n') {
            text.truncate(i + 1);
        }
    }
    parse_into(&text, &mut warnings)
}

/// Parse in steps: the markdown's outline (title, `##` sections, paragraphs), then the
/// title, the header fields, the limit flags, their clean-up, the status, the sections.
fn parse_into(text: &str, warnings: &mut Vec<String>) -> Handoff {
    let outline = outline(text);
    let mut h = Handoff {
        title_agent: None,
        timestamp: None,
        target: None,
        status: Status::Blocked,
        status_written: None,
        recommended_next: None,
        cycle_result: None,
        verdict: None,
        budget_exceeded: false,
        scope_escalation: false,
        sections: Sections::default(),
        warnings: Vec::new(),
    };
    h.title_agent = title_agent(outline.title.as_deref(), warnings);
    let status_raw = header_fields(text, &outline.paragraphs, &mut h, warnings);
    limit_flags(text, &mut h);
    tidy_fields(&mut h);
    h.status = resolve_status(
        status_raw.as_deref(),
        h.cycle_result.as_deref(),
        &mut h.status_written,
        warnings,
    );
    known_sections(text, &outline.sections, &mut h.sections, warnings);
    h.warnings = std::mem::take(warnings);
    h
}

/// The markdown's shape, as byte ranges into the text.
struct Outline {
    /// The first H1's text.
    title: Option<String>,
    /// The `##` sections, in order (a later H1 ends the one before it).
    sections: Vec<Section>,
    /// Top-level paragraphs, each with whether it comes before the first section.
    paragraphs: Vec<(Range<usize>, bool)>,
}

fn outline(text: &str) -> Outline {
    let mut title: Option<String> = None;
    let mut sections: Vec<Section> = Vec::new();
    let mut paragraphs: Vec<(Range<usize>, bool)> = Vec::new();

    let mut in_heading: Option<(HeadingLevel, usize)> = None;
    let mut heading_text = String::new();
    let mut list_depth = 0usize;
    let mut para_depth = 0usize;

    for (ev, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
        match ev {
            Event::Start(Tag::Heading { level, .. }) => {
                in_heading = Some((level, range.start));
                heading_text.clear();
            }
            Event::End(TagEnd::Heading(level)) => {
                let start = in_heading.take().map(|(_, s)| s).unwrap_or(range.start);
                let h = heading_text.trim().to_string();
                match level {
                    HeadingLevel::H1 => {
                        if let Some(s) = sections.last_mut() {
                            s.body.end = start;
                        }
                        if title.is_none() {
                            title = Some(h);
                        } else if !sections.is_empty() {
                            // A second H1 ends the current section; nothing follows into it.
                            sections.push(Section {
                                heading: h,
                                body: range.end..range.end,
                                items: Vec::new(),
                            });
                        }
                    }
                    HeadingLevel::H2 => {
                        if let Some(s) = sections.last_mut() {
                            s.body.end = start;
                        }
                        sections.push(Section {
                            heading: h,
                            body: range.end..text.len(),
                            items: Vec::new(),
                        });
                    }
                    _ => {}
                }
            }
            Event::Text(t) | Event::Code(t) if in_heading.is_some() => heading_text.push_str(&t),
            Event::Start(Tag::List(_)) => list_depth += 1,
            Event::End(TagEnd::List(_)) => list_depth = list_depth.saturating_sub(1),
            Event::Start(Tag::Item) if list_depth == 1 => {
                if let Some(s) = sections.last_mut() {
                    s.items.push(range);
                }
            }
            Event::Start(Tag::Paragraph) => {
                if para_depth == 0 {
                    paragraphs.push((range, sections.is_empty()));
                }
                para_depth += 1;
            }
            Event::End(TagEnd::Paragraph) => para_depth = para_depth.saturating_sub(1),
            _ => {}
        }
    }
    Outline {
        title,
        sections,
        paragraphs,
    }
}

/// The agent named by a `# Handoff: <agent>` title.
fn title_agent(title: Option<&str>, warnings: &mut Vec<String>) -> Option<String> {
    match title {
        Some(t) => match t.split_once(':') {
            Some((k, v)) if k.trim().eq_ignore_ascii_case("handoff") => {
                let v = v.trim();
                (!v.is_empty()).then(|| v.to_string())
            }
            _ => {
                warnings.push(format!("title {:?} is not '# Handoff: <agent>'", one_line(t, 60)));
                None
            }
        },
        None => {
            warnings.push("no '# Handoff: <agent>' title".into());
            None
        }
    }
}

/// The `**Key:** value` fields of the paragraphs into `h` (the first of each wins);
/// returns the status as written.
fn header_fields(
    text: &str,
    paragraphs: &[(Range<usize>, bool)],
    h: &mut Handoff,
    warnings: &mut Vec<String>,
) -> Option<String> {
    let mut status_raw: Option<String> = None;
    for (range, in_header) in paragraphs {
        for line in text[range.clone()].lines() {
            if let Some((key, value)) = header_field(line, *in_header) {
                let slot = match key.as_str() {
                    "timestamp" | "date" | "time" => &mut h.timestamp,
                    "target" | "to" => &mut h.target,
                    "status" => &mut status_raw,
                    "recommended next" | "recommended next agent" | "recommended" | "next agent" => {
                        &mut h.recommended_next
                    }
                    "cycle result" | "implementation result" | "investigation result" | "closure result" => {
                        &mut h.cycle_result
                    }
                    "verdict" => &mut h.verdict,
                    _ => continue,
                };
                match slot {
                    None => *slot = Some(value),
                    Some(prev) if *prev != value => warnings.push(format!(
                        "'{key}' given twice ({prev:?}, then {value:?}); the first is used"
                    )),
                    Some(_) => {}
                }
            }
        }
    }
    status_raw
}

/// `budget_exceeded:` and `scope_escalation:` lines anywhere outside code fences.
fn limit_flags(text: &str, h: &mut Handoff) {
    let mut fenced = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        match limit_flag(line).filter(|_| !fenced) {
            Some(("budget", on)) => h.budget_exceeded |= on,
            Some((_, on)) => h.scope_escalation |= on,
            None => {}
        }
    }
}

/// Results and verdicts as one upper-case word; agent names as one word, `none` as absent.
fn tidy_fields(h: &mut Handoff) {
    for s in [&mut h.cycle_result, &mut h.verdict].into_iter().flatten() {
        *s = first_word(s).to_ascii_uppercase();
    }
    for v in [&mut h.target, &mut h.recommended_next] {
        if let Some(s) = v {
            let w = first_word(s).to_string();
            if w.is_empty() || is_none_text(&w) {
                *v = None;
            } else {
                *s = w;
            }
        }
    }
}

/// The protocol's sections into `sec` (the first of each kind wins), the rest kept as other.
fn known_sections(text: &str, sections: &[Section], sec: &mut Sections, warnings: &mut Vec<String>) {
    let mut seen: Vec<Known> = Vec::new();
    for s in sections {
        let body = text[s.body.clone()].trim().to_string();
        let Some(kind) = classify_heading(&s.heading) else {
            sec.other.push((s.heading.clone(), body));
            continue;
        };
        if seen.contains(&kind) {
            warnings.push(format!("section '## {}' appears twice; the first is used", s.heading));
            continue;
        }
        seen.push(kind);
        let items = || -> Vec<String> {
            s.items
                .iter()
                .map(|r| item_text(&text[r.clone()]))
                .filter(|t| !t.is_empty())
                .collect()
        };
        match kind {
            Known::Instructions => sec.instructions = Some(body),
            Known::Context => sec.context = Some(body),
            Known::Skills => sec.skills_to_load = Some(items()),
            Known::Success => sec.success_criteria = Some(body),
            Known::Completed => sec.completed_work = Some(body),
            Known::Artifacts => {
                sec.artifacts_generated = Some(
                    items()
                        .into_iter()
                        .map(|i| artifact_path(&i))
                        .filter(|p| !p.is_empty() && !is_none_text(p))
                        .collect(),
                )
            }
            Known::Blockers => sec.blockers = Some(body),
            Known::SkillGaps => sec.skill_gaps = Some(body),
            Known::Gates => sec.gates_honored = Some(items().iter().filter_map(|i| gate(i)).collect()),
            Known::Scope => sec.scope = Some(body),
            Known::NextAction => sec.next_action = Some(body),
            Known::Summary => sec.summary = Some(body),
            Known::Outcome => sec.outcome = Some(body),
        }
    }
}

fn resolve_status(
    raw: Option<&str>,
    cycle: Option<&str>,
    written: &mut Option<String>,
    warnings: &mut Vec<String>,
) -> Status {
    if let Some(raw) = raw {
        let v = raw.trim().trim_matches(['*', '`', '_']).trim();
        if v.contains('|') {
            *written = Some(raw.to_string());
            warnings.push(format!(
                "status {:?} lists several values; treated as BLOCKED",
                one_line(raw, 60)
            ));
            return Status::Blocked;
        }
        let word = first_word(v);
        // "NEEDS REVIEW" / "IN PROGRESS" written with a space.
        let two: String = v.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        let found = Status::from_word(word).or_else(|| Status::from_word(&two));
        return match found {
            Some(s) => {
                if word != s.as_str() {
                    *written = Some(raw.to_string());
                    warnings.push(format!(
                        "status {:?} is not written as {}; accepted",
                        one_line(raw, 60),
                        s
                    ));
                }
                s
            }
            None => {
                *written = Some(raw.to_string());
                warnings.push(format!("unknown status {:?}; treated as BLOCKED", one_line(raw, 60)));
                Status::Blocked
            }
        };
    }
    match cycle {
        Some("PASS") => Status::Complete,
        Some("FAIL") | Some("BLOCKED") => Status::Blocked,
        Some(other) => {
            warnings.push(format!(
                "no status and unknown cycle result {other:?}; treated as BLOCKED"
            ));
            Status::Blocked
        }
        None => {
            warnings.push("no status; treated as BLOCKED".into());
            Status::Blocked
        }
    }
}

fn first_word(s: &str) -> &str {
    s.split(|c: char| c.is_whitespace() || c == ',' || c == ';' || c == '(')
        .find(|w| !w.is_empty())
        .unwrap_or("")
        .trim_matches(['*', '`', '_', '.', '"', '\''])
}

/// Seed 001's limit flags, anywhere outside code: `budget_exceeded: true`,
/// `**Scope Escalation:** yes`, `- scope_escalation: true`. Returns ("budget" |
/// "scope", whether it is set).
fn limit_flag(line: &str) -> Option<(&'static str, bool)> {
    let l = line.trim().trim_start_matches("- ").replace("**", "").replace('`', "");
    let (k, v) = l.split_once(':')?;
    let k = k.trim().to_ascii_lowercase().replace(' ', "_");
    let which = match k.as_str() {
        "budget_exceeded" => "budget",
        "scope_escalation" => "scope",
        _ => return None,
    };
    let v = v.trim().to_ascii_lowercase();
    Some((which, matches!(first_word(&v), "true" | "yes" | "1")))
}

/// Recognise `**Key:** value`, `**Key**: value`, `- **Key:** value` and, in the header only, `Key: value`.
fn header_field(line: &str, in_header: bool) -> Option<(String, String)> {
    let l = line.trim();
    let l = l.strip_prefix("- ").unwrap_or(l);
    let (key, value) = if let Some(rest) = l.strip_prefix("**") {
        let end = rest.find("**")?;
        let inner = &rest[..end];
        let after = &rest[end + 2..];
        if let Some(k) = inner.strip_suffix(':') {
            (k, after)
        } else {
            (inner, after.strip_prefix(':')?)
        }
    } else if in_header || l.starts_with("Cycle Result:") {
        let (k, v) = l.split_once(':')?;
        if k.len() > 30 || k.contains(['*', '`', '[']) {
            return None;
        }
        (k, v)
    } else {
        return None;
    };
    let key = key.trim().to_ascii_lowercase();
    let value = value.trim().to_string();
    if key.is_empty() || value.is_empty() {
        return None;
    }
    Some((key, value))
}

fn item_text(src: &str) -> String {
    let first = src.lines().next().unwrap_or("").trim();
    let stripped = first
        .strip_prefix("- ")
        .or_else(|| first.strip_prefix("* "))
        .or_else(|| first.strip_prefix("+ "))
        .unwrap_or_else(|| {
            first
                .split_once(". ")
                .filter(|(n, _)| n.bytes().all(|b| b.is_ascii_digit()))
                .map(|(_, r)| r)
                .unwrap_or(first)
        });
    let stripped = stripped.trim();
    let stripped = stripped
        .strip_prefix("[ ] ")
        .or_else(|| stripped.strip_prefix("[x] "))
        .unwrap_or(stripped);
    stripped.trim().to_string()
}

/// `artifacts/x.py (created)` / `` `artifacts/x.py` — notes `` → `artifacts/x.py`.
fn artifact_path(item: &str) -> String {
    let t = item.trim();
    if let Some(rest) = t.strip_prefix('`') {
        if let Some(end) = rest.find('`') {
            return rest[..end].to_string();
        }
    }
    let t = t.split(" (").next().unwrap_or(t);
    let t = t.split(" — ").next().unwrap_or(t);
    let t = t.split(" - ").next().unwrap_or(t);
    t.trim().trim_matches(['`', '*']).to_string()
}

fn gate(item: &str) -> Option<Gate> {
    let (name, value) = item.split_once(':')?;
    let name = name.trim().trim_matches(['*', '`']).trim().to_string();
    let value = value.trim().trim_matches(['*', '`']).trim();
    if name.is_empty() {
        return None;
    }
    let result = match first_word(value).to_ascii_uppercase().as_str() {
        "PASS" | "PASSED" => GateResult::Pass,
        "FAIL" | "FAILED" => GateResult::Fail,
        "SKIPPED" | "SKIP" => GateResult::Skipped,
        _ => GateResult::Other(value.to_string()),
    };
    Some(Gate { name, result })
}
