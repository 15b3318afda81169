//! Handoff file names: `{agent}-{YYYYMMDD}-{HHMMSS}.md`.
//!
//! Two handoffs from one agent in the same second get a numeric suffix,
//! `{agent}-{YYYYMMDD}-{HHMMSS}-2.md`, `-3`, … so nothing is ever overwritten.
//! Names sort by timestamp first, then suffix, which is the order the scribe
//! and lineage present them in.

use chrono::NaiveDateTime;

use crate::core::names;

/// A parsed handoff file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoffName {
    /// The agent that wrote it (validated against the name allowlist).
    pub agent: String,
    /// The timestamp in the name (the writer's local time).
    pub stamp: NaiveDateTime,
    /// 1 for the plain name, 2.. for same-second collisions.
    pub seq: u32,
    /// The file name, made once: every scan looks every name in handoffs/ up by it.
    file: String,
}

impl HandoffName {
    /// Parse a file name (not a path). `None` for anything that is not a handoff name.
    /// Every scan parses every name in handoffs/, so this allocates only the two strings
    /// it keeps: an accepted name is already in its one spelling (fixed-width digits, no
    /// `-1` suffix, no leading zero), which is kept as the file name.
    pub fn parse(file_name: &str) -> Option<HandoffName> {
        let stem = file_name.strip_suffix(".md")?;
        // Try "agent-date-time-seq" first, then "agent-date-time".
        let mut four = stem.rsplitn(4, '-');
        if let (Some(seq), Some(time), Some(date), Some(agent)) = (four.next(), four.next(), four.next(), four.next())
            && is_digits(seq, 1..=6)
            && seq != "1"
            && !seq.starts_with('0')
            && let Some(n) = Self::from_parts(agent, date, time, seq, file_name)
        {
            return Some(n);
        }
        let mut three = stem.rsplitn(3, '-');
        match (three.next(), three.next(), three.next()) {
            (Some(time), Some(date), Some(agent)) => Self::from_parts(agent, date, time, "1", file_name),
            _ => None,
        }
    }

    fn from_parts(agent: &str, date: &str, time: &str, seq: &str, file: &str) -> Option<HandoffName> {
        if !is_digits(date, 8..=8) || !is_digits(time, 6..=6) || names::validate("agent", agent).is_err() {
            return None;
        }
        // By hand, not with a format string: every scan parses every name in handoffs/.
        let n = |s: &str, r: std::ops::Range<usize>| s[r].parse::<u32>().ok();
        let day = chrono::NaiveDate::from_ymd_opt(n(date, 0..4)? as i32, n(date, 4..6)?, n(date, 6..8)?)?;
        let stamp = day.and_hms_opt(n(time, 0..2)?, n(time, 2..4)?, n(time, 4..6)?)?;
        Some(HandoffName {
            agent: agent.to_string(),
            stamp,
            seq: seq.parse().ok()?,
            file: file.to_string(),
        })
    }

    /// The name of `agent`'s handoff at `stamp` (`seq` 1 for the plain name).
    pub fn new(agent: String, stamp: NaiveDateTime, seq: u32) -> HandoffName {
        use chrono::{Datelike, Timelike};
        let (d, t) = (stamp.date(), stamp.time());
        let base = format!(
            "{agent}-{:04}{:02}{:02}-{:02}{:02}{:02}",
            d.year(),
            d.month(),
            d.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        let file = if seq <= 1 {
            format!("{base}.md")
        } else {
            format!("{base}-{seq}.md")
        };
        HandoffName {
            agent,
            stamp,
            seq,
            file,
        }
    }

    /// The file name for this handoff.
    pub fn file_name(&self) -> String {
        self.file.clone()
    }

    /// The file name, borrowed.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Sort key: time, then collision suffix, then agent.
    pub fn sort_key(&self) -> (NaiveDateTime, u32, &str) {
        (self.stamp, self.seq, &self.agent)
    }
}

fn is_digits(s: &str, len: std::ops::RangeInclusive<usize>) -> bool {
    len.contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Option<(String, String, u32)> {
        HandoffName::parse(s).map(|n| (n.agent, n.stamp.format("%Y%m%d%H%M%S").to_string(), n.seq))
    }

    #[test]
    fn parses_plain_and_suffixed() {
        assert_eq!(
            p("pm-20251127-090000.md"),
            Some(("pm".into(), "20251127090000".into(), 1))
        );
        assert_eq!(
            p("dev-20251127-154500-2.md"),
            Some(("dev".into(), "20251127154500".into(), 2))
        );
        assert_eq!(
            p("security-reviewer-20251127-154500.md"),
            Some(("security-reviewer".into(), "20251127154500".into(), 1))
        );
        assert_eq!(
            p("a-1-20251127-154500.md"),
            Some(("a-1".into(), "20251127154500".into(), 1))
        );
    }

    #[test]
    fn rejects_non_handoffs() {
        for s in [
            "pm.md",
            "pm-20251127-090000.txt",
            "pm-2025112-090000.md",
            "pm-20251327-090000.md",
            "pm-20251127-256000.md",
            ".pm-20251127-090000.md",
            "Pm-20251127-090000.md",
            "-20251127-090000.md",
            "README.md",
            "pm-20251127-090000-0.md",
            "pm-20251127-090000-1.md",
            "pm-20251127-090000-02.md",
            "pm-20251127-090000-1234567.md",
        ] {
            assert_eq!(p(s), None, "{s}");
        }
    }

    #[test]
    fn round_trip() {
        for s in [
            "pm-20251127-090000.md",
            "dev-20251127-154500-2.md",
            "x_y-20200101-000000-17.md",
        ] {
            let n = HandoffName::parse(s).unwrap();
            assert_eq!(n.file_name(), s);
            // The spelling kept from the folder is the one a writer would make.
            assert_eq!(HandoffName::new(n.agent.clone(), n.stamp, n.seq).file(), s);
        }
    }
}
