//! `task handoff`: write a well-formed handoff and print its path.

use std::io::Read;
use std::path::Path;

use anyhow::Context as _;

use crate::app;
use crate::core::clock;
use crate::core::error::Error;
use crate::core::handoff::{NewHandoff, Status};
use crate::core::names::{AgentName, TaskName};

use crate::cli::output::{print_json, warn};

/// The handoff's header fields, as given on the command line.
pub(crate) struct Header<'a> {
    /// The agent writing it.
    pub from: &'a AgentName,
    /// Its status.
    pub status: Status,
    /// Who it is for (default: pm, unless written by pm).
    pub target: Option<&'a AgentName>,
    /// The agent recommended to run next.
    pub next: Option<&'a AgentName>,
}

/// Read the body (from a file, or stdin for `-`), write the handoff, print its path.
pub(crate) fn run(
    project: Option<&Path>,
    name: &TaskName,
    header: Header<'_>,
    body_file: Option<&Path>,
    json: bool,
) -> anyhow::Result<()> {
    let body = read_body(body_file)?;
    let t = app::locate(project, name)?;
    let h = NewHandoff {
        from: header.from,
        status: header.status,
        target: header.target,
        next: header.next,
        body: &body,
        now: clock::now().with_timezone(&chrono::Local),
    };
    let path = app::handoff::write(&t, &h, &mut warn)?;
    if json {
        return print_json(&serde_json::json!({ "path": path }));
    }
    println!("{}", path.display());
    Ok(())
}

/// The body as the handoff will hold it: capped, UTF-8, no NUL, LF line ends, no BOM.
fn read_body(path: Option<&Path>) -> anyhow::Result<String> {
    let Some(path) = path else { return Ok(String::new()) };
    let mut bytes = Vec::new();
    let cap = crate::store::handoffs::SIZE_CAP;
    if path == Path::new("-") {
        std::io::stdin()
            .lock()
            .take(cap + 1)
            .read_to_end(&mut bytes)
            .context("reading the handoff body from stdin")?;
    } else {
        let f = std::fs::File::open(path).map_err(|e| Error::io("open the body file", path, e))?;
        f.take(cap + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::io("read the body file", path, e))?;
    }
    if bytes.len() as u64 > cap {
        return Err(Error::BadInput(format!(
            "the handoff body is over the {cap} byte cap; put large content in artifacts/ and list it under '## Artifacts Generated'"
        ))
        .into());
    }
    let body = String::from_utf8(bytes).map_err(|e| {
        Error::BadInput(format!(
            "the handoff body is not valid UTF-8 (first bad byte at offset {}); nothing was written",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let body = body.strip_prefix('\u{feff}').unwrap_or(&body).replace("\r\n", "\n");
    if body.contains('\0') {
        return Err(Error::BadInput("the handoff body contains NUL bytes; nothing was written".into()).into());
    }
    Ok(body)
}
