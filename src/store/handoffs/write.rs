//! Writing handoffs, so agents and the PM never hand-format names or headers.

use std::path::{Path, PathBuf};

use crate::core::error::{Error, Result};
use crate::store::fsutil;

use crate::core::handoff::{HandoffName, NewHandoff, render};

/// Write a handoff into `dir` atomically under a fresh name; returns its path.
/// A same-second collision takes the next suffix (`-2`, `-3`, …), never overwriting.
pub fn write(dir: &Path, h: &NewHandoff<'_>) -> Result<PathBuf> {
    if h.body.len() as u64 > super::SIZE_CAP {
        return Err(Error::BadInput(format!(
            "the handoff body is {} bytes, over the {} byte cap; put large content in artifacts/ and list it under '## Artifacts Generated'",
            h.body.len(),
            super::SIZE_CAP
        )));
    }
    let content = render(h);
    // Staged in the task folder: the watched handoffs/ sees the rename in and nothing else.
    let stage = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(dir);
    for seq in 1..=1000 {
        let name = HandoffName::new(h.from.to_string(), h.now.naive_local(), seq);
        let path = dir.join(name.file_name());
        if fsutil::atomic_create_staged(stage, &path, content.as_bytes())? {
            return Ok(path);
        }
    }
    Err(Error::BadInput(format!(
        "more than 1000 handoffs from {} in one second in {}; refusing to write more",
        h.from,
        dir.display()
    )))
}
