//! `task hook <event>`: what Claude Code runs for the hooks the supervisor sets in an
//! agent's `--settings`. `permission-request` answers by the broker ([`app::broker`]),
//! waiting for the PM or a human when no rule decides; `prompt-submit`, `stop`,
//! `stop-failure` and `notification` report on the agent's turn ([`app::turn`]). It never
//! fails in the agent's way: whatever goes wrong (no task in the environment, bad JSON, a
//! request too large to read) it prints nothing and exits 0, which leaves Claude Code's
//! own dialog to show and its turn to go on, and says why on stderr.

use std::io::Read;

use crate::app;

/// The most of the hook's JSON read; a larger request is left to the dialog.
const MAX_INPUT: u64 = 1 << 20;

pub(crate) async fn run(event: &str) -> anyhow::Result<()> {
    let turn = crate::core::turn::EVENTS.iter().any(|(name, _)| *name == event);
    if event != "permission-request" && !turn {
        let known: Vec<&str> = std::iter::once("permission-request")
            .chain(crate::core::turn::EVENTS.iter().map(|(n, _)| *n))
            .collect();
        eprintln!("task hook: unknown event {event:?}; known: {}", known.join(", "));
        return Ok(());
    }
    let mut bytes = Vec::new();
    std::io::stdin().lock().take(MAX_INPUT + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INPUT {
        eprintln!("task hook: the input is over {MAX_INPUT} bytes; ignored");
        return Ok(());
    }
    let input: serde_json::Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("task hook: the input is not JSON ({e}); ignored");
            return Ok(());
        }
    };
    let (Ok(name), Ok(agent)) = (std::env::var("TASK_NAME"), std::env::var("TASK_AGENT")) else {
        eprintln!("task hook: not an agent's session (TASK_NAME, TASK_AGENT unset); ignored");
        return Ok(());
    };
    let task = match name
        .parse()
        .map_err(anyhow::Error::from)
        .and_then(|n| Ok(app::locate(None, &n)?))
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("task hook: {e}; ignored");
            return Ok(());
        }
    };
    let ctx = app::session::Ctx::from_env().ok();
    if turn {
        if let Err(e) = app::turn::record(&task, &agent, event, &input, ctx.as_ref(), crate::core::clock::now()).await {
            eprintln!("task hook: {e}; the turn report is lost (the screen still shows it)");
        }
        return Ok(());
    }
    match app::broker::handle(&task, &agent, &input, ctx.as_ref()).await {
        Ok(d) => {
            if let Some(a) = app::broker::answer(&d) {
                println!("{a}");
            }
        }
        Err(e) => eprintln!("task hook: {e}; left to the dialog"),
    }
    Ok(())
}
