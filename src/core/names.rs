//! Task and agent names.
//!
//! Names become folder names, file-name prefixes, tmux session names and
//! shell arguments, so they are checked against an allowlist before anything
//! touches the disk. Case-sensitive: upper-case letters are refused rather
//! than folded, so `Dev` and `dev` can never name two different folders on a
//! case-insensitive filesystem.

use std::fmt;
use std::str::FromStr;

use crate::core::error::Error;

/// The rule, stated once, for error messages and `--help`.
pub const NAME_RULE: &str =
    "names are 1-63 characters of lower-case a-z, 0-9, '-' and '_', starting with a letter or digit";

/// Longest accepted name; keeps `<prefix>-<task>-<agent>` session names and file names short.
pub const MAX_NAME_LEN: usize = 63;

/// Check `s` against the allowlist; `kind` ("task" or "agent") goes into the message.
pub fn validate(kind: &'static str, s: &str) -> Result<(), Error> {
    let ok = !s.is_empty()
        && s.len() <= MAX_NAME_LEN
        && s.bytes().enumerate().all(|(i, b)| match b {
            b'a'..=b'z' | b'0'..=b'9' => true,
            b'-' | b'_' => i > 0,
            _ => false,
        });
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidName {
            kind,
            shown: show(s),
            rule: NAME_RULE,
        })
    }
}

/// Render a refused name safely: escaped, and cut when absurdly long.
fn show(s: &str) -> String {
    let cut: String = s.chars().take(80).collect();
    let mut out = format!("{cut:?}");
    if cut.len() < s.len() {
        out.push_str(&format!(" ({} bytes)", s.len()));
    }
    out
}

macro_rules! name_type {
    ($ty:ident, $kind:literal, $doc:literal) => {
        #[doc = $doc]
        ///
        /// On the wire a plain string, checked when it is read: a request naming
        /// `../x` is refused where it arrives, and nothing past it parses names again.
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $ty(String);

        impl TryFrom<String> for $ty {
            type Error = Error;
            fn try_from(s: String) -> Result<Self, Error> {
                validate($kind, &s)?;
                Ok($ty(s))
            }
        }

        impl From<$ty> for String {
            fn from(n: $ty) -> String {
                n.0
            }
        }

        impl $ty {
            /// The validated name.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $ty {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                validate($kind, s)?;
                Ok($ty(s.to_string()))
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $ty {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    TaskName,
    "task",
    "A validated task name: safe as a folder name, a tmux session part and a shell word."
);
name_type!(
    AgentName,
    "agent",
    "A validated agent name: safe as a handoff file prefix, a session part and a shell word."
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cross_the_wire_as_strings_and_are_checked_when_read() {
        let n: AgentName = serde_json::from_str("\"dev\"").unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "\"dev\"");
        let e = serde_json::from_str::<TaskName>("\"../etc\"").unwrap_err();
        assert!(e.to_string().contains("lower-case"), "{e}");
    }

    #[test]
    fn accepted() {
        for s in ["a", "dev", "task1", "dds-writer-pool", "x_y", "0abc", &"a".repeat(63)] {
            assert!(validate("task", s).is_ok(), "{s:?} should be accepted");
        }
    }

    #[test]
    fn refused() {
        let long = "a".repeat(64);
        for s in [
            "", "../x", "/abs", "a/b", ".hidden", "-rf", "a;b", "a:b", "a.b", "a b", "a\nb", "a\0b", "é", "Dev", "_x",
            "a$b", "a`b", "a'b", "a\"b", "..", ".", &long,
        ] {
            let err = validate("task", s).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("lower-case"), "message states the rule: {msg}");
            assert_eq!(err.exit_code(), crate::core::error::EXIT_BAD_INPUT);
        }
    }

    #[test]
    fn message_escapes_control_chars() {
        let msg = validate("agent", "a\nb").unwrap_err().to_string();
        assert!(msg.contains("\\n"), "{msg}");
        assert!(!msg.contains('\n'));
    }
}
