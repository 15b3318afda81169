//! The one place where the process keeps mutable state that every task and every caller
//! in it shares. Nothing else in `src/` declares a mutable `static` (a test below reads the
//! source to keep it so); what the daemon decides with is owned by its task actors and
//! passed down ("State a process keeps" in DESIGN.md).
//!
//! What is kept here is of two kinds, and each is safe to share by construction:
//!
//! | memo | module | kept per | valid while |
//! |---|---|---|---|
//! | parsed pm_state.json | `store::task::persist` | state file | the file's identity, size and times (in an actor's turn, a check made in its pass moments ago) |
//! | parsed task.md | `store::task` | task.md | the same |
//! | parsed runtime config | `io::runtime` | config file | the same |
//! | prices from the config | `io::prices` | config file | the same |
//! | state log tails (and a version-3 state's two) | `store::task::logs` | log file | the log grows from the offset read |
//! | parsed usage.json | `store::usage` | usage.json | the file's identity, size and times |
//! | events.jsonl tallies (the supervisor's spend) | `store::usage` | log file | the log's identity; it grows from the offset counted |
//! | the lines this process appended last to each events.jsonl | `store::events` | log file | the log's identity, and its end where the last of them ends |
//! | handoffs/ listing | `store::handoffs::memo` | folder | the folder's version; the watcher's events amend it |
//! | artifacts/ folders' entries | `store::task::artifacts` | folder | the folder's version (its files are looked at every time) |
//! | parsed handoffs | `store::handoffs::loads` | handoff file | the file's identity, size and times (an `lstat`) |
//! | ssh masters, rsync per host, backoff, pull turns | `io::remote` | host | the master answers |
//! | each host's home folder (a `~` in its path) | `io::remote` | host | the master that asked lives |
//! | kept SFTP channels (the pulls') | `io::remote::sftp` | host | the master it runs on; a failed use drops it |
//! | whether each host answers its heartbeat | `io::health` | host | the next beat (every 2 s) |
//! | tmux control clients, whether to use them | `io::tmux::control` | tmux server | the client answers |
//! | bubblewrap binaries whose trial sandbox started | `io::sandbox` | binary | the binary's identity (a failure is not kept) |
//!
//! Memos are keyed by a path or a host and checked against the thing itself on every use,
//! so a stale one costs a re-read, never a wrong answer; connections are reconnected when
//! they fail. Threading them through every signature as a context would change nothing a
//! caller could observe. Each is a type of its module's own ([`Memo`]), made empty on
//! first use; [`census`] says what each holds (the daemon reports it with its pid).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

/// A piece of state the whole process shares: made with `Default` on first use, kept for
/// the process's life.
pub trait Memo: Default + Send + Sync + 'static {
    /// What [`census`] calls it.
    const NAME: &'static str;
    /// How many entries it holds now (files, hosts, servers; a flag holds 0 or 1).
    fn entries(&self) -> usize;
}

/// A memo as the census sees it.
trait Counted: Send + Sync {
    fn name(&self) -> &'static str;
    fn entries(&self) -> usize;
}

impl<M: Memo> Counted for M {
    fn name(&self) -> &'static str {
        M::NAME
    }
    fn entries(&self) -> usize {
        Memo::entries(self)
    }
}

/// One memo, leaked once: it lives as long as the process, as a `static` would.
#[derive(Clone, Copy)]
struct Held {
    any: &'static (dyn Any + Send + Sync),
    counted: &'static dyn Counted,
}

static HELD: LazyLock<RwLock<HashMap<TypeId, Held>>> = LazyLock::new(Default::default);

/// The process's one `M`, made empty on first use.
pub fn get<M: Memo>() -> &'static M {
    let id = TypeId::of::<M>();
    let found = HELD.read().unwrap_or_else(|e| e.into_inner()).get(&id).copied();
    let held = match found {
        Some(h) => h,
        None => *HELD
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id)
            .or_insert_with(|| {
                let m: &'static M = Box::leak(Box::default());
                Held { any: m, counted: m }
            }),
    };
    held.any
        .downcast_ref::<M>()
        .expect("each memo is kept under its own type")
}

/// Every memo made so far, by name, with how many entries it holds.
pub fn census() -> Vec<(&'static str, usize)> {
    // Counted outside the registry's lock: counting takes each memo's own lock, and its
    // holder may be asking the registry for another memo at that moment.
    let all: Vec<Held> = HELD
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .copied()
        .collect();
    let mut v: Vec<_> = all.iter().map(|h| (h.counted.name(), h.counted.entries())).collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Seen(Mutex<Vec<u32>>);

    impl Memo for Seen {
        const NAME: &'static str = "test: seen";
        fn entries(&self) -> usize {
            self.0.lock().unwrap().len()
        }
    }

    #[test]
    fn one_memo_per_type_shared_by_every_caller_and_counted() {
        get::<Seen>().0.lock().unwrap().push(7);
        let other = std::thread::spawn(|| get::<Seen>().0.lock().unwrap().clone())
            .join()
            .unwrap();
        assert_eq!(other, vec![7]);
        assert!(std::ptr::eq(get::<Seen>(), get::<Seen>()));
        assert!(census().contains(&("test: seen", 1)), "{:?}", census());
    }

    /// The promise of this module: no other file declares a mutable `static`. Statics
    /// computed once and never changed (parsed built-ins, compiled fixed regexes, the test
    /// hooks read once) are not state and may stay where they are used.
    #[test]
    fn no_mutable_static_lives_anywhere_else() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut bad = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    dirs.push(p);
                    continue;
                }
                if p.extension().is_none_or(|x| x != "rs") || p.ends_with("store/memo.rs") {
                    continue;
                }
                let text = std::fs::read_to_string(&p).unwrap();
                for (n, line) in text.lines().enumerate() {
                    let l = line.trim_start();
                    let declares = l.starts_with("static ") || l.contains(" static ") && !l.starts_with("//");
                    let mutable = [
                        "Mutex",
                        "RwLock",
                        "Atomic",
                        "Cell<",
                        "Cache<",
                        "Tails<",
                        "HashMap",
                        "static mut",
                    ]
                    .iter()
                    .any(|k| l.contains(k));
                    if declares && mutable {
                        bad.push(format!("{}:{}: {l}", p.strip_prefix(&root).unwrap().display(), n + 1));
                    }
                }
            }
        }
        assert!(
            bad.is_empty(),
            "mutable statics outside store/memo.rs:\n{}",
            bad.join("\n")
        );
    }
}
