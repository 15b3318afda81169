//! The task folder: where it is, what it holds, how it is created and repaired.

mod artifacts;
pub mod lock;
pub mod logs;
pub mod persist;

use std::path::{Path, PathBuf};

use crate::core::error::{Error, Result};
use crate::core::model::{PmState, TaskSpec};
use crate::core::names::TaskName;
use crate::store::fsutil;
use crate::store::memo::{self, Memo};

/// The artifact kinds (docs/protocol.md#task-folder), created under `artifacts/`.
pub const ARTIFACT_KINDS: [&str; 5] = ["analysis", "design", "code", "tests", "reviews"];

/// The template copied into a new task's task.md; `{task}` is replaced by the name.
const TASK_TEMPLATE: &str = include_str!("../../../templates/task.md");

/// A task: `<project>/tasks/<name>/`. Cheap to build; touches nothing.
#[derive(Debug, Clone)]
pub struct Task {
    /// The project folder (absolute).
    pub project: PathBuf,
    /// The validated name.
    pub name: TaskName,
    /// `<project>/tasks/<name>`, made once: every path of the task is asked for several
    /// times per check-in, and joining it anew each time was a visible part of one.
    dir: PathBuf,
    /// The turn this handle reads in, if any ([`Task::in_pass`]).
    pass: Option<crate::store::parsed::Pass>,
}

/// The same task, whatever turn a handle reads in.
impl PartialEq for Task {
    fn eq(&self, other: &Task) -> bool {
        self.project == other.project && self.name == other.name
    }
}

impl Eq for Task {}

/// Every task.md this process read, parsed (a process memo: [`crate::store::memo`]).
#[derive(Default)]
struct Specs(crate::store::parsed::Cache<std::sync::Arc<TaskSpec>>);

impl Memo for Specs {
    const NAME: &'static str = "parsed task.md";
    fn entries(&self) -> usize {
        self.0.len()
    }
}

impl Task {
    /// A task handle under `project`.
    pub fn new(project: &Path, name: TaskName) -> Result<Task> {
        let project = fsutil::absolute(project)?;
        let dir = project.join("tasks").join(name.as_str());
        Ok(Task {
            project,
            name,
            dir,
            pass: None,
        })
    }

    /// This task read in `pass`, one turn of the daemon's work: its display reads of
    /// pm_state.json and task.md ([`Task::state`], [`Task::spec`]) take a check made in
    /// the pass moments ago as still good ([`crate::store::parsed`]); reads to change
    /// the state, under its lock, look at the file every time.
    pub fn in_pass(&self, pass: &crate::store::parsed::Pass) -> Task {
        Task {
            pass: Some(pass.clone()),
            ..self.clone()
        }
    }

    /// `<project>/tasks/<name>`.
    pub fn dir(&self) -> PathBuf {
        self.dir.clone()
    }
    /// task.md.
    pub fn task_md(&self) -> PathBuf {
        self.dir.join("task.md")
    }
    /// pm_state.json.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join("pm_state.json")
    }
    /// progress.md.
    pub fn progress_path(&self) -> PathBuf {
        self.dir.join("progress.md")
    }
    /// handoffs/.
    pub fn handoffs(&self) -> PathBuf {
        self.dir.join("handoffs")
    }
    /// artifacts/.
    pub fn artifacts(&self) -> PathBuf {
        self.dir.join("artifacts")
    }
    /// scratchpad/.
    pub fn scratchpad(&self) -> PathBuf {
        self.dir.join("scratchpad")
    }

    /// Lock for pm_state.json read-modify-write cycles (short holds).
    pub fn lock_state(&self) -> Result<lock::Lock> {
        lock::Lock::acquire(&self.dir.join(".state.lock"))
    }

    /// Lock held for a whole check-in; `None` when another check-in is running.
    pub fn try_lock_checkin(&self) -> Result<Option<lock::Lock>> {
        lock::Lock::try_acquire(&self.dir.join(".checkin.lock"))
    }

    /// Read the state to change it (corrupt → set aside with a warning on stderr).
    pub fn state_for_update(&self, now: chrono::DateTime<chrono::Utc>) -> Result<PmState> {
        let loaded = persist::load_for_update(&self.state_path(), self.name.as_str(), now)?;
        if let Some(aside) = loaded.set_aside {
            tracing::warn!(path = %aside.display(), "pm_state.json was corrupt and was set aside");
            eprintln!(
                "warning: {} was corrupt; moved to {} and a fresh state was started",
                self.state_path().display(),
                aside.display()
            );
        }
        Ok(loaded.state)
    }

    /// Look at the state under its lock, for a supervisor that must go on whatever it
    /// finds: a corrupt file is set aside ([`persist::set_aside`]) and replaced by
    /// `fallback` (the last good state the caller read, so agents and the ledger survive)
    /// or a fresh state; a file from a newer version is reported, never rewritten.
    pub fn recover_state(&self, now: chrono::DateTime<chrono::Utc>, fallback: Option<&PmState>) -> Result<StateHealth> {
        // A good state needs no lock to be read (every save is a rename): the daemon asks
        // this of every task on every tick. Only what looks corrupt is looked at again
        // under the lock before anything is moved.
        if let Ok(st) = persist::load(&self.state_path(), self.name.as_str()) {
            return Ok(StateHealth::Fine(st));
        }
        let _l = self.lock_state()?;
        match persist::load(&self.state_path(), self.name.as_str()) {
            Ok(st) => Ok(StateHealth::Fine(st)),
            Err(Error::CorruptState { detail, .. }) => {
                let copy = persist::set_aside(&self.state_path(), now)?;
                self.save_state(fallback.cloned().unwrap_or_default())?;
                Ok(StateHealth::SetAside {
                    copy,
                    detail,
                    restored: fallback.is_some(),
                })
            }
            Err(Error::StateTooNew { found, .. }) => Ok(StateHealth::TooNew { found }),
            Err(e) => Err(e),
        }
    }

    /// Save the state atomically.
    pub fn save_state(&self, st: PmState) -> Result<()> {
        persist::save(&self.state_path(), st)
    }

    /// One read-modify-write of pm_state.json: take the state lock, read the state to
    /// change it ([`Task::state_for_update`]), run `f` on it, and save it atomically when
    /// `f` changed it; the lock is released on return. An error from `f` saves nothing
    /// (the file is left as it was) and is returned, as is an error saving.
    pub fn update_state<T>(
        &self,
        now: chrono::DateTime<chrono::Utc>,
        f: impl FnOnce(&mut PmState) -> Result<T>,
    ) -> Result<T> {
        let _l = self.lock_state()?;
        let before = match persist::load(&self.state_path(), self.name.as_str()) {
            Ok(st) => Some(st),
            Err(Error::CorruptState { .. }) => None,
            Err(e) => return Err(e),
        };
        let mut st = match &before {
            Some(st) => PmState::clone(st),
            None => self.state_for_update(now)?,
        };
        let out = f(&mut st)?;
        if before.as_deref() != Some(&st) {
            self.save_state(st)?;
        }
        Ok(out)
    }

    /// Whether the folder exists with a task.md.
    pub fn exists(&self) -> bool {
        self.task_md().is_file()
    }

    /// Error unless the task exists.
    pub fn require(&self) -> Result<()> {
        if self.exists() {
            Ok(())
        } else {
            Err(Error::TaskNotFound {
                name: self.name.to_string(),
                searched: self.project.join("tasks").display().to_string(),
            })
        }
    }

    /// Read task.md (parsed again only when it changed: [`crate::store::parsed`]). Shared,
    /// not copied: the daemon asks for it several times per task on every tick.
    pub fn spec(&self) -> Result<std::sync::Arc<TaskSpec>> {
        let path = self.task_md();
        let missing = || Error::io("read", &path, std::io::Error::from(std::io::ErrorKind::NotFound));
        memo::get::<Specs>()
            .0
            .get_in(
                self.pass.as_ref(),
                &path,
                |e| Error::io("read", &path, e),
                |bytes| crate::core::model::taskmd::decode(bytes.to_vec(), &path).map(std::sync::Arc::new),
            )?
            .ok_or_else(missing)
    }

    /// Read pm_state.json for display (missing → fresh; corrupt → error, untouched).
    /// Shared with every other reader of the same version: clone it to change it.
    pub fn state(&self) -> Result<std::sync::Arc<PmState>> {
        persist::load_in(self.pass.as_ref(), &self.state_path(), self.name.as_str())
    }
}

/// What [`Task::recover_state`] found.
#[derive(Debug)]
pub enum StateHealth {
    /// A state this build reads.
    Fine(std::sync::Arc<PmState>),
    /// It was corrupt: moved to `copy`, and replaced by the fallback (`restored`) or a
    /// fresh state.
    SetAside {
        /// Where the corrupt bytes are now.
        copy: PathBuf,
        /// Why it did not parse.
        detail: String,
        /// Whether the caller's last good state replaced it (else a fresh one).
        restored: bool,
    },
    /// Written by a newer version (schema `found`): left as it is.
    TooNew {
        /// The schema version in the file.
        found: u64,
    },
}

/// What `task new` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CreateReport {
    /// Paths created, relative to the task folder.
    pub created: Vec<String>,
    /// Where a corrupt pm_state.json was set aside.
    pub state_set_aside: Option<PathBuf>,
}

/// Create the task folder, or repair a partial one: missing folders and files
/// are added; an existing task.md or valid state is never overwritten.
pub fn create_or_repair(task: &Task, now: chrono::DateTime<chrono::Utc>) -> Result<CreateReport> {
    let mut report = CreateReport::default();
    let dir = task.dir();
    let mut folders = vec![dir.clone(), task.handoffs(), task.artifacts(), task.scratchpad()];
    folders.extend(ARTIFACT_KINDS.iter().map(|k| task.artifacts().join(k)));
    for f in &folders {
        if !f.is_dir() {
            fsutil::create_dir_all(f)?;
            let rel = f.strip_prefix(&dir).unwrap_or(f).display().to_string();
            report
                .created
                .push(if rel.is_empty() { ".".into() } else { format!("{rel}/") });
        }
    }
    let task_md = task.task_md();
    let text = TASK_TEMPLATE.replace("{task}", task.name.as_str());
    if fsutil::atomic_create(&task_md, text.as_bytes())? {
        report.created.push("task.md".into());
    }
    let sp = task.state_path();
    // Under the lock, as every writer of the state: a state read while a daemon saves it
    // must not look corrupt and be set aside.
    let lock = task.lock_state()?;
    if sp.exists() {
        let loaded = persist::load_for_update(&sp, task.name.as_str(), now)?;
        if let Some(aside) = loaded.set_aside {
            persist::save(&sp, loaded.state)?;
            report.created.push("pm_state.json".into());
            report.state_set_aside = Some(aside);
        }
    } else {
        let bytes = {
            let mut b = serde_json::to_vec_pretty(&PmState::default()).expect("state serialises");
            b.push(b'\n');
            b
        };
        if fsutil::atomic_create(&sp, &bytes)? {
            report.created.push("pm_state.json".into());
        }
    }
    drop(lock);
    let progress = task.progress_path();
    if !progress.exists() {
        let st = task.state()?;
        let text = crate::core::scribe::render_empty(task.name.as_str(), &st, now);
        if fsutil::atomic_create(&progress, text.as_bytes())? {
            report.created.push("progress.md".into());
        }
    }
    Ok(report)
}

/// Find the project holding task `name`: `--project` if given; else `$TASK_DIR`
/// when `$TASK_NAME` is this task (agents run with both set, possibly in another
/// cwd); else the nearest of the current folder and its ancestors holding
/// `tasks/<name>/task.md`; else the current folder.
pub fn find_project(flag: Option<&Path>, name: &TaskName) -> Result<PathBuf> {
    if let Some(p) = flag {
        return fsutil::absolute(p);
    }
    if let (Ok(tn), Ok(td)) = (std::env::var("TASK_NAME"), std::env::var("TASK_DIR")) {
        if tn == name.as_str() {
            let td = PathBuf::from(td);
            if let Some(project) = td.parent().and_then(Path::parent) {
                if td.join("task.md").is_file() {
                    return Ok(project.to_path_buf());
                }
            }
        }
    }
    let cwd = std::env::current_dir().map_err(|e| Error::io("read the current folder", ".", e))?;
    for dir in cwd.ancestors() {
        if dir.join("tasks").join(name.as_str()).join("task.md").is_file() {
            return Ok(dir.to_path_buf());
        }
    }
    Ok(cwd)
}

/// The project for commands without a task name: `--project`, else the nearest
/// ancestor of the current folder with a `tasks/` folder, else the current folder.
pub fn find_project_root(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = flag {
        return fsutil::absolute(p);
    }
    let cwd = std::env::current_dir().map_err(|e| Error::io("read the current folder", ".", e))?;
    for dir in cwd.ancestors() {
        if dir.join("tasks").is_dir() {
            return Ok(dir.to_path_buf());
        }
    }
    Ok(cwd)
}

/// The tasks in a project (folders under `tasks/` with a valid name and a task.md), sorted.
pub fn list_tasks(project: &Path) -> Result<Vec<Task>> {
    let dir = project.join("tasks");
    let rd = match std::fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list", &dir, e)),
    };
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Error::io("list", &dir, e))?;
        let Some(name) = entry.file_name().to_str().and_then(|s| s.parse::<TaskName>().ok()) else {
            continue;
        };
        let t = Task::new(project, name)?;
        if t.exists() {
            out.push(t);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Every regular, non-dot file under `artifacts/`, sorted by path. Symlinks are not
/// followed; folders unchanged since the last listing are not read again ([`artifacts`]).
pub fn list_artifacts(task: &Task) -> Result<Vec<crate::core::scribe::Artifact>> {
    artifacts::list(&task.dir(), &task.artifacts())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::model::Phase;

    fn task() -> (tempfile::TempDir, Task) {
        let d = tempfile::tempdir().unwrap();
        let t = Task::new(d.path(), "t1".parse().unwrap()).unwrap();
        std::fs::create_dir_all(t.dir()).unwrap();
        (d, t)
    }

    #[test]
    fn update_state_saves_what_the_closure_changed_and_returns_its_value() {
        let (_d, t) = task();
        let now: chrono::DateTime<chrono::Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
        let got = t
            .update_state(now, |st| {
                st.phase = Phase::Developing;
                st.next_checkin = Some(now);
                Ok(42)
            })
            .unwrap();
        assert_eq!(got, 42);
        let st = t.state().unwrap();
        assert_eq!(st.phase, Phase::Developing);
        assert_eq!(st.next_checkin, Some(now));
        // Nothing changed: the value still comes back, the file is not rewritten.
        let before = std::fs::read(t.state_path()).unwrap();
        let seen = t.update_state(now, |st| Ok(st.phase)).unwrap();
        assert_eq!(seen, Phase::Developing);
        assert_eq!(std::fs::read(t.state_path()).unwrap(), before);
    }

    #[test]
    fn update_state_leaves_the_file_unchanged_when_the_closure_fails() {
        let (_d, t) = task();
        let now: chrono::DateTime<chrono::Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
        t.update_state(now, |st| {
            st.phase = Phase::Exploring;
            Ok(())
        })
        .unwrap();
        let before = std::fs::read(t.state_path()).unwrap();
        let r: Result<()> = t.update_state(now, |st| {
            st.phase = Phase::Complete;
            st.last_checkin = Some(now);
            Err(Error::BadInput("no".into()))
        });
        assert!(matches!(r, Err(Error::BadInput(_))));
        assert_eq!(std::fs::read(t.state_path()).unwrap(), before);
        // The lock was released: the next update goes through.
        t.update_state(now, |st| {
            st.phase = Phase::Developing;
            Ok(())
        })
        .unwrap();
        assert_eq!(t.state().unwrap().phase, Phase::Developing);
    }

    #[test]
    fn update_state_returns_a_save_error() {
        let (_d, t) = task();
        let now: chrono::DateTime<chrono::Utc> = "2026-11-23T09:00:00Z".parse().unwrap();
        // A folder appears where the file goes (root ignores permissions): the rename fails.
        let r = t.update_state(now, |st| {
            st.phase = Phase::Developing;
            std::fs::create_dir_all(t.state_path().join("in-the-way")).unwrap();
            Ok(())
        });
        assert!(r.is_err(), "a save that cannot happen is an error, not silence");
    }
}
