//! Text helpers shared by the parser and the readers of handoffs: what counts as
//! "none", a one-line summary of markdown, and lenient decoding of bytes agents wrote.

/// True for "None", "N/A", "-" and the like.
pub fn is_none_text(s: &str) -> bool {
    let t = s
        .trim()
        .trim_start_matches("- ")
        .trim()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    matches!(t.as_str(), "" | "none" | "n/a" | "na" | "-" | "no blockers" | "nothing")
}

/// Collapse markdown to one line of at most `max` characters: the first list
/// item, or the first paragraph with its lines joined.
pub fn one_line(src: &str, max: usize) -> String {
    let is_bullet = |l: &str| l.starts_with("- ") || l.starts_with("* ") || l.starts_with("+ ");
    let mut lines = src
        .lines()
        .map(str::trim)
        .skip_while(|l| l.is_empty() || l.starts_with("```"));
    let mut text = String::new();
    if let Some(first) = lines.next() {
        text.push_str(first);
        if !is_bullet(first) && !first.starts_with('#') {
            for l in lines {
                if l.is_empty() || is_bullet(l) || l.starts_with('#') || l.starts_with("```") {
                    break;
                }
                text.push(' ');
                text.push_str(l);
            }
        }
    }
    let first = text.trim_start_matches(['-', '*', '+', '#', '>']).trim();
    let clean: String = first
        .chars()
        .map(|c| if c.is_control() || c == '|' { ' ' } else { c })
        .filter(|c| *c != '*' && *c != '`')
        .collect();
    let clean = clean.trim();
    if clean.chars().count() > max {
        let mut s: String = clean.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    } else {
        clean.to_string()
    }
}

/// Decode bytes as UTF-8, replacing invalid sequences; strip a BOM; normalise CRLF.
pub fn decode(bytes: &[u8], warnings: &mut Vec<String>) -> String {
    let text = match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => {
            warnings.push("not valid UTF-8; invalid bytes were replaced".into());
            String::from_utf8_lossy(bytes).into_owned()
        }
    };
    let text = text.strip_prefix('\u{feff}').map(str::to_string).unwrap_or(text);
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text
    }
}
