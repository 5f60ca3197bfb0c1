//! `rlock watch [NAME]`: `list` (or `show NAME`) again every interval, until Ctrl-C or
//! `--iterations`. A refresh that fails prints its error and the next one reconnects, so
//! the view survives a restart or a failover of Redis.

use std::io::{IsTerminal, Write};

use serde_json::json;

use crate::args::WatchArgs;
use crate::connect::{Nodes, Target};
use crate::exit::{Exit, Failure, Outcome};
use crate::redact::scrub;
use crate::render;

use super::{list, show};

/// Refreshes until Ctrl-C or `args.iterations`.
///
/// # Errors
/// A connect failure when Redis cannot be reached at the start.
pub async fn run(target: &Target, args: &WatchArgs, json: bool) -> Outcome {
    let mut nodes = Some(target.connect().await?);
    // Clearing the screen only makes sense on a terminal; piped output keeps every frame.
    let clear = !json && std::io::stdout().is_terminal();
    let mut refresh: u64 = 0;
    loop {
        refresh += 1;
        if nodes.is_none() {
            nodes = target.connect().await.ok();
        }
        let frame = match &nodes {
            Some(connected) => frame(target, connected, args, json, refresh).await,
            None => Err(Failure::connect("cannot reconnect")),
        };
        let text = match frame {
            Ok(text) => text,
            Err(failure) => {
                // Reconnect at the next refresh: a broken connection stays broken.
                nodes = None;
                let message = scrub(&failure.message);
                if json {
                    format!(
                        "{}\n",
                        render::json_line(&json!({ "refresh": refresh, "error": message }))
                    )
                } else {
                    format!("rlock watch: refresh {refresh} failed: {message}\n")
                }
            }
        };
        let mut stdout = std::io::stdout().lock();
        if clear {
            let _ = write!(stdout, "\x1b[2J\x1b[H");
        }
        if !json {
            let _ = writeln!(
                stdout,
                "rlock watch: every {:?}, refresh {refresh} (Ctrl-C to stop)\n",
                args.interval
            );
        }
        let _ = write!(stdout, "{text}");
        let _ = stdout.flush();
        drop(stdout);
        if args.iterations.is_some_and(|n| refresh >= n) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(args.interval) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    Ok(Exit::Ok)
}

/// One refresh, as text to print.
async fn frame(
    target: &Target,
    nodes: &Nodes,
    args: &WatchArgs,
    json: bool,
    refresh: u64,
) -> Result<String, Failure> {
    match &args.name {
        Some(name) => {
            let detail = crate::inspect::read_detail(nodes, &target.key_prefix, name).await?;
            Ok(match (detail, json) {
                (Ok(detail), true) => {
                    format!(
                        "{}\n",
                        render::json_line(&json!({ "refresh": refresh, "lock": detail }))
                    )
                }
                (Ok(detail), false) => render::detail(&detail),
                (Err(_), true) => {
                    format!(
                        "{}\n",
                        render::json_line(&json!({ "refresh": refresh, "lock": null }))
                    )
                }
                (Err(read), false) => {
                    format!("{}\n", show::not_found(&target.key_prefix, name, &read))
                }
            })
        }
        None => {
            let listing = list::collect(nodes, &target.key_prefix, &args.scan).await?;
            Ok(if json {
                format!(
                    "{}\n",
                    render::json_line(&json!({ "refresh": refresh, "locks": listing }))
                )
            } else {
                render::listing(&listing)
            })
        }
    }
}
