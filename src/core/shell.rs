//! Quoting words for a POSIX shell: ssh joins its arguments into one remote command
//! line, so user text must never reach it unquoted.

/// Quote words for a POSIX shell and join them, for ssh's remote command line.
pub fn shell_join<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| {
            shlex::try_quote(w.as_ref())
                .map(|q| q.into_owned())
                .unwrap_or_else(|_| "''".into())
        })
        .collect::<Vec<_>>()
        .join(" ")
}
