//! Another process of this user, as /proc shows it: its ancestors and the environment it
//! started with. The daemon uses them to learn which agent's pane a request comes from,
//! rather than taking the request's word for it.

/// How far up the tree to look: a pane's shell, a make, a script, the `task` binary.
const MAX_DEPTH: usize = 64;

/// `pid` and its ancestors, nearest first, up to (not including) PID 1.
pub fn ancestors(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut at = pid;
    while out.len() < MAX_DEPTH {
        match parent(at) {
            Some(p) if p > 1 && !out.contains(&p) => {
                out.push(p);
                at = p;
            }
            _ => break,
        }
    }
    out
}

/// The parent of `pid`, from /proc/<pid>/stat (the field after the command name, which
/// may itself hold spaces and parentheses).
fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parent_in_stat(&stat)
}

/// The ppid field of a /proc/<pid>/stat line. Pure.
fn parent_in_stat(stat: &str) -> Option<u32> {
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The environment `pid` was started with (what it set for itself later is not there);
/// empty when it cannot be read.
pub fn environ(pid: u32) -> Vec<(String, String)> {
    let Ok(bytes) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return Vec::new();
    };
    bytes
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            kv.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_a_command_name_with_parentheses() {
        assert_eq!(parent_in_stat("4242 (a (b) c) S 17 4242 4242 0"), Some(17));
        assert_eq!(parent_in_stat("garbage"), None);
    }

    #[test]
    fn this_process_descends_from_its_parent_and_has_its_environment() {
        let me = std::process::id();
        let up = ancestors(me);
        assert_eq!(up[0], me);
        assert!(up.contains(&std::os::unix::process::parent_id()) || std::os::unix::process::parent_id() == 1);
        assert!(environ(me).iter().any(|(k, _)| k == "PATH"));
    }
}
