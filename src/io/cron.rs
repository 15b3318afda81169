//! Cron mode (docs/protocol.md#cron-mode): one marked crontab line per task that
//! runs `task checkin` on the task's schedule. Installing is idempotent (the
//! marked line is replaced, never duplicated); removing deletes only it.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::core::error::{Error, Result};

/// The marker comment that identifies a task's line.
pub fn marker(project: &Path, task: &str) -> String {
    format!("# agent-orchestrator checkin {task} {}", project.display())
}

/// The schedule field for a `checkin:` setting: `Nm`/`Nh` or a 5-field cron expression.
pub fn schedule(setting: Option<&str>) -> std::result::Result<String, String> {
    let Some(s) = setting.map(str::trim) else {
        return Ok("*/10 * * * *".into());
    };
    if s.split_whitespace().count() == 5 {
        return Ok(s.to_string());
    }
    let d = crate::core::clock::parse_duration(s)
        .ok_or_else(|| format!("checkin: {s:?} is neither a duration like 10m nor a 5-field cron expression"))?;
    let mins = d.as_secs() / 60;
    match mins {
        0 => Err(format!(
            "checkin: {s} is under a minute; cron runs at most once a minute"
        )),
        1..=59 => Ok(format!("*/{mins} * * * *")),
        60..=1439 if mins % 60 == 0 => Ok(format!("0 */{} * * *", mins / 60)),
        _ => Err(format!(
            "checkin: {s} cannot be written as a cron schedule; use a cron expression"
        )),
    }
}

fn sh_quote(s: &str) -> String {
    shlex::try_quote(s)
        .map(|c| c.into_owned())
        .unwrap_or_else(|_| format!("'{}'", s.replace('\'', "'\\''")))
}

/// The full crontab line for a task.
pub fn line(schedule: &str, task_bin: &Path, project: &Path, task: &str, log: &Path) -> String {
    format!(
        "{schedule} {} checkin {task} --project {} >> {} 2>&1 {}",
        sh_quote(&task_bin.to_string_lossy()),
        sh_quote(&project.to_string_lossy()),
        sh_quote(&log.to_string_lossy()),
        marker(project, task)
    )
}

/// `existing` with the task's line replaced or added.
pub fn upsert(existing: &str, line: &str, marker: &str) -> String {
    let mut out: Vec<&str> = existing.lines().filter(|l| !l.ends_with(marker)).collect();
    out.push(line);
    out.join("\n") + "\n"
}

/// `existing` without the task's line.
pub fn remove(existing: &str, marker: &str) -> String {
    let out: Vec<&str> = existing.lines().filter(|l| !l.ends_with(marker)).collect();
    if out.is_empty() {
        String::new()
    } else {
        out.join("\n") + "\n"
    }
}

/// Whether `crontab` is installed.
pub fn available() -> bool {
    crate::io::program::which("crontab").is_some()
}

fn read() -> Result<String> {
    let out = Command::new("crontab")
        .arg("-l")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io("run", "crontab -l", e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        // "no crontab for <user>" is an empty table.
        Ok(String::new())
    }
}

fn write(table: &str) -> Result<()> {
    let mut child = Command::new("crontab")
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::io("run", "crontab -", e))?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(table.as_bytes())
        .map_err(|e| Error::io("write to", "crontab -", e))?;
    let out = child
        .wait_with_output()
        .map_err(|e| Error::io("wait for", "crontab -", e))?;
    if !out.status.success() {
        return Err(Error::Environment(format!(
            "crontab refused the table: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Install or replace the task's line.
pub fn install(line: &str, marker: &str) -> Result<()> {
    let table = read()?;
    let new = upsert(&table, line, marker);
    if new != table { write(&new) } else { Ok(()) }
}

/// Whether the task's marked line is in the crontab (false without `crontab`).
pub fn installed(marker: &str) -> bool {
    available() && read().is_ok_and(|t| t.lines().any(|l| l.ends_with(marker)))
}

/// Remove the task's line; `true` when there was one.
pub fn uninstall(marker: &str) -> Result<bool> {
    let table = read()?;
    let new = remove(&table, marker);
    if new != table {
        write(&new)?;
        Ok(true)
    } else {
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules() {
        assert_eq!(schedule(None).unwrap(), "*/10 * * * *");
        assert_eq!(schedule(Some("5m")).unwrap(), "*/5 * * * *");
        assert_eq!(schedule(Some("2h")).unwrap(), "0 */2 * * *");
        assert_eq!(schedule(Some("*/15 9-17 * * 1-5")).unwrap(), "*/15 9-17 * * 1-5");
        assert!(schedule(Some("30s")).is_err());
        assert!(schedule(Some("soon")).is_err());
    }

    #[test]
    fn upsert_is_idempotent_and_remove_is_exact() {
        let m = marker(Path::new("/p"), "t1");
        let l = line(
            "*/10 * * * *",
            Path::new("/bin/task"),
            Path::new("/p"),
            "t1",
            Path::new("/p/tasks/t1/.checkin.log"),
        );
        let other = "0 * * * * backup # mine\n";
        let once = upsert(other, &l, &m);
        assert_eq!(upsert(&once, &l, &m), once);
        assert_eq!(once.lines().count(), 2);
        let m10 = marker(Path::new("/p"), "t10");
        assert_eq!(remove(&once, &m10), once, "t10's marker does not match t1's line");
        assert_eq!(remove(&once, &m), other);
    }

    #[test]
    fn paths_are_quoted() {
        let l = line(
            "*/10 * * * *",
            Path::new("/my bin/task"),
            Path::new("/p;rm -rf ~"),
            "t1",
            Path::new("/l"),
        );
        assert!(l.contains("'/my bin/task'") && l.contains("'/p;rm -rf ~'"), "{l}");
    }
}
