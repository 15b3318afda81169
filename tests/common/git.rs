//! git for tests of agents' worktrees: commands that must succeed, and a repository to start from.

use std::path::Path;
use std::process::Command;

/// `git -C dir args…` with a test identity; it must succeed; its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let o = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=tester", "-c", "user.email=tester@example.invalid"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Whether `git -C dir args…` succeeds.
pub fn git_ok(dir: &Path, args: &[&str]) -> bool {
    Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap()
        .status
        .success()
}

/// `dir` as a repository on branch `main` with one commit of src/a.txt; that commit.
pub fn init_repo(dir: &Path, a_txt: &str) -> String {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/a.txt"), a_txt).unwrap();
    git(dir, &["add", "src"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
    git(dir, &["rev-parse", "HEAD"])
}
