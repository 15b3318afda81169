//! The shell's edge, kept pure of everything else: quoting words for a POSIX shell
//! (ssh joins its arguments into one remote command line, so user text must never reach
//! it unquoted) and finding a program on PATH the way a shell would.

use std::path::{Path, PathBuf};

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

/// Find a program on PATH (or check an explicit path).
pub fn which(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
