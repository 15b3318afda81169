//! `task log`: the task's event log, or (`--lineage`) its handoff chain.

use std::io::Write;
use std::path::Path;

use crate::app;
use crate::core::names::TaskName;

use crate::cli::output::print_json;

/// Print events.jsonl (one line per event, or one JSON object per line), following it
/// with `follow`; `lineage` prints who handed to whom instead.
pub(crate) fn run(
    project: Option<&Path>,
    name: &TaskName,
    follow: bool,
    json: bool,
    lineage: bool,
) -> anyhow::Result<()> {
    let t = app::locate(project, name)?;
    if lineage {
        let st = t.state()?;
        if json {
            return print_json(&st.lineage);
        }
        print!("{}", crate::core::scribe::render_lineage(&st.lineage.to_vec()));
        return Ok(());
    }
    let path = crate::store::events::path(&t);
    let mut shown = 0usize;
    loop {
        let all = crate::store::events::read(&path)?;
        for e in all.iter().skip(shown) {
            if json {
                println!("{}", serde_json::to_string(e)?);
            } else {
                println!("{}", crate::store::events::render(e));
            }
        }
        shown = all.len();
        if !follow {
            return Ok(());
        }
        std::io::stdout().flush()?;
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}
