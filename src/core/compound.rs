//! A shell command that Claude Code could not analyse (`h=$(task handoff …) && task spawn
//! … --handoff "$h"`), taken apart by a real shell parser (brush-parser) into the simple
//! commands it would run, so that rules can judge each one. Anything the parser cannot
//! account for — a command name that is not literal, a compound command, a function, a
//! process substitution, output redirected to a file — makes the whole command
//! unaccounted for: then nobody but a person decides.

use brush_parser::ast;
use brush_parser::word::WordPiece;

/// The simple commands `command` runs, each as its words joined by single spaces (quotes
/// as written), command substitutions included; or why it cannot be accounted for.
pub fn simple_commands(command: &str) -> Result<Vec<String>, String> {
    let options = brush_parser::ParserOptions::default();
    let mut parser = brush_parser::Parser::new(std::io::Cursor::new(command.as_bytes()), &options);
    let program = parser
        .parse_program()
        .map_err(|e| format!("the shell parser gave up: {e}"))?;
    let mut out = Vec::new();
    for list in &program.complete_commands {
        compound_list(list, &options, &mut out)?;
    }
    Ok(out)
}

fn compound_list(
    list: &ast::CompoundList,
    o: &brush_parser::ParserOptions,
    out: &mut Vec<String>,
) -> Result<(), String> {
    for ast::CompoundListItem(and_or, _) in &list.0 {
        pipeline(&and_or.first, o, out)?;
        for more in &and_or.additional {
            match more {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => pipeline(p, o, out)?,
            }
        }
    }
    Ok(())
}

fn pipeline(p: &ast::Pipeline, o: &brush_parser::ParserOptions, out: &mut Vec<String>) -> Result<(), String> {
    for c in &p.seq {
        match c {
            ast::Command::Simple(s) => simple(s, o, out)?,
            ast::Command::Compound(..) => return Err("it has a compound command (a loop, group or subshell)".into()),
            ast::Command::Function(_) => return Err("it defines a function".into()),
            ast::Command::ExtendedTest(..) => return Err("it has a [[ … ]] test".into()),
        }
    }
    Ok(())
}

fn simple(s: &ast::SimpleCommand, o: &brush_parser::ParserOptions, out: &mut Vec<String>) -> Result<(), String> {
    let mut words: Vec<String> = Vec::new();
    let items = s
        .prefix
        .iter()
        .flat_map(|p| p.0.iter())
        .chain(s.suffix.iter().flat_map(|p| p.0.iter()));
    if let Some(name) = &s.word_or_name {
        if !literal(&name.value, o)? {
            return Err(format!("its command name {:?} is not literal", name.value));
        }
        words.push(name.value.clone());
    }
    for item in items {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                substitutions(&w.value, o, out)?;
                words.push(w.value.clone());
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => substitutions(&w.value, o, out)?,
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => redirect(r, o, out)?,
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(..) => {
                return Err("it has a process substitution".into());
            }
        }
    }
    if !words.is_empty() {
        out.push(words.join(" "));
    }
    Ok(())
}

/// Only input may be redirected (a here-document, a file read), and output only to
/// /dev/null or another descriptor: a write to a file is not a rule's to allow.
fn redirect(r: &ast::IoRedirect, o: &brush_parser::ParserOptions, out: &mut Vec<String>) -> Result<(), String> {
    use ast::{IoFileRedirectKind as K, IoFileRedirectTarget as T};
    match r {
        ast::IoRedirect::HereDocument(_, h) if !h.requires_expansion => Ok(()),
        ast::IoRedirect::HereDocument(_, h) => {
            let pieces = brush_parser::word::parse_heredoc(&h.doc.value, o)
                .map_err(|e| format!("the shell parser gave up on a here-document: {e}"))?;
            pieces_substitutions(&pieces, out)
        }
        ast::IoRedirect::HereString(_, w) => substitutions(&w.value, o, out),
        ast::IoRedirect::File(_, K::Read | K::DuplicateInput, T::Filename(w)) => substitutions(&w.value, o, out),
        ast::IoRedirect::File(_, _, T::Fd(_) | T::Duplicate(_)) => Ok(()),
        ast::IoRedirect::File(_, _, T::Filename(w)) if w.value == "/dev/null" => Ok(()),
        ast::IoRedirect::OutputAndError(w, _) if w.value == "/dev/null" => Ok(()),
        _ => Err("it redirects output to a file".into()),
    }
}

/// Whether a word is plain text (quotes allowed), with no expansion that could change
/// which program runs.
fn literal(word: &str, o: &brush_parser::ParserOptions) -> Result<bool, String> {
    let pieces =
        brush_parser::word::parse(word, o).map_err(|e| format!("the shell parser gave up on {word:?}: {e}"))?;
    Ok(pieces.iter().all(|p| {
        matches!(
            p.piece,
            WordPiece::Text(_) | WordPiece::SingleQuotedText(_) | WordPiece::EscapeSequence(_)
        )
    }))
}

/// Add the simple commands of every command substitution in a word.
fn substitutions(word: &str, o: &brush_parser::ParserOptions, out: &mut Vec<String>) -> Result<(), String> {
    let pieces =
        brush_parser::word::parse(word, o).map_err(|e| format!("the shell parser gave up on {word:?}: {e}"))?;
    pieces_substitutions(&pieces, out)
}

fn pieces_substitutions(
    pieces: &[brush_parser::word::WordPieceWithSource],
    out: &mut Vec<String>,
) -> Result<(), String> {
    for p in pieces {
        match &p.piece {
            WordPiece::CommandSubstitution(inner) | WordPiece::BackquotedCommandSubstitution(inner) => {
                out.extend(simple_commands(inner)?);
            }
            WordPiece::DoubleQuotedSequence(inner) | WordPiece::GettextDoubleQuotedSequence(inner) => {
                pieces_substitutions(inner, out)?;
            }
            WordPiece::ArithmeticExpression(_) => return Err("it has an arithmetic expansion".into()),
            _ => {}
        }
    }
    Ok(())
}

/// Whether a simple command (as [`simple_commands`] gives it) matches one of Claude Code's
/// Bash rules: `Bash` (any command), `Bash(prefix:*)` (the prefix, then nothing or a space),
/// `Bash(exact)`. Rules for other tools never match.
pub fn matches(command: &str, rules: &[String]) -> bool {
    rules.iter().any(|r| {
        if r == "Bash" {
            return true;
        }
        let Some(spec) = r.strip_prefix("Bash(").and_then(|s| s.strip_suffix(')')) else {
            return false;
        };
        match spec.strip_suffix(":*") {
            Some(prefix) => command == prefix || command.starts_with(&format!("{prefix} ")),
            None => command == spec,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_substitution_and_a_chain_are_the_commands_they_run() {
        let c = "h=$(task handoff t1 --from pm --target dev --status IN_PROGRESS --body-file - <<'EOF'\n## Instructions\nx $(rm -rf /) y\nEOF\n) && task spawn t1 dev --handoff \"$h\"";
        assert_eq!(
            simple_commands(c).unwrap(),
            vec![
                "task handoff t1 --from pm --target dev --status IN_PROGRESS --body-file -",
                "task spawn t1 dev --handoff \"$h\"",
            ]
        );
        assert_eq!(
            simple_commands("task status t1 2>/dev/null; task log t1 | tail -n 5").unwrap(),
            vec!["task status t1", "task log t1", "tail -n 5"]
        );
        // An unquoted here-document runs what it substitutes; a quoted one does not.
        assert_eq!(
            simple_commands("task handoff t1 --body-file - <<EOF\nsee $(curl -s x)\nEOF").unwrap(),
            vec!["curl -s x", "task handoff t1 --body-file -"]
        );
        assert_eq!(
            simple_commands("echo \"$(task status t1)\"").unwrap(),
            vec!["task status t1", "echo \"$(task status t1)\""]
        );
    }

    #[test]
    fn what_cannot_be_accounted_for_is_said() {
        for (c, why) in [
            ("$CMD --x", "not literal"),
            ("for f in a; do task status $f; done", "compound"),
            ("(task status t1)", "compound"),
            ("task status t1 > /etc/passwd", "redirects output"),
            ("f() { rm -rf /; }; f", "function"),
            ("cat <(curl x)", "process substitution"),
            ("task status 'unterminated", "gave up"),
        ] {
            let e = simple_commands(c).unwrap_err();
            assert!(e.contains(why), "{c}: {e}");
        }
    }

    #[test]
    fn rules_match_by_prefix_at_a_word_boundary_or_exactly() {
        let rules = vec![
            "Bash(task handoff:*)".to_string(),
            "Bash(make test)".to_string(),
            "Read".to_string(),
        ];
        assert!(matches("task handoff t1 --from pm", &rules));
        assert!(matches("task handoff", &rules));
        assert!(!matches("task handoffx", &rules));
        assert!(matches("make test", &rules));
        assert!(!matches("make test && rm", &rules));
        assert!(!matches("curl x", &rules));
        assert!(matches("anything", &["Bash".to_string()]));
    }
}
