//! `rlock unlock NAME`: force-unlock through the library, so that the kind's own script
//! runs and waiters are woken (a plain `DEL` frees the lock but wakes nobody: waiters then
//! sleep until their bound).

use std::io::{BufRead, IsTerminal, Write};

use serde::Serialize;

use crate::args::UnlockArgs;
use crate::connect::Target;
use crate::exit::{Exit, Failure, Outcome};
use crate::model::{Kind, LockView};
use crate::render;

use super::show;

/// What `unlock --json` prints.
#[derive(Debug, Serialize)]
struct Unlocked<'a> {
    /// The lock.
    name: &'a str,
    /// Its key.
    key: &'a str,
    /// Its kind.
    kind: Kind,
    /// Whether it was held when the script ran (a free fair lock's queue is still purged
    /// and its head told).
    was_held: bool,
    /// The holders it had, as read just before.
    holders: &'a [crate::model::Holder],
}

/// Force-unlocks `args.name` after confirmation.
///
/// # Errors
/// A usage failure without `--yes` when stdin is not a terminal (before anything is sent);
/// a Redis failure for an error reply; a connect
/// failure when Redis cannot be reached.
pub async fn run(target: &Target, args: &UnlockArgs, json: bool) -> Outcome {
    let interactive = std::io::stdin().is_terminal();
    if !args.yes && !interactive {
        return Err(Failure::usage(
            "refusing to force-unlock without --yes: stdin is not a terminal to confirm on",
        ));
    }
    let nodes = target.connect().await?;
    let Some(detail) = show::detail(&nodes, &target.key_prefix, &args.name).await? else {
        return Ok(Exit::Found);
    };
    let lock = detail.lock;
    // A free fair lock with a queue still gets its script: it drops dead waiters and tells
    // the head, which is what unsticks a stalled queue.
    if !lock.held && lock.kind != Kind::Fair {
        eprintln!("rlock: `{}` is not held: nothing to unlock", lock.name);
        return Ok(Exit::Found);
    }
    if !args.yes && !confirm(&lock)? {
        eprintln!("rlock: not unlocked");
        return Ok(Exit::Found);
    }
    let client = target.library_client().await?;
    let name = args.name.as_str();
    let result = match lock.kind {
        Kind::Fair => client.fair_lock(name).force_unlock().await,
        Kind::Fenced => client.fenced_lock(name).force_unlock().await,
        Kind::Reentrant => client.lock(name).force_unlock().await,
        // The side of the mode it is held in: that side's script deletes it (the read
        // holds' timeout keys too) and wakes every waiter.
        Kind::ReadWrite if lock.mode.as_deref() == Some("write") => {
            client
                .read_write_lock(name)
                .write_lock()
                .force_unlock()
                .await
        }
        Kind::ReadWrite => {
            client
                .read_write_lock(name)
                .read_lock()
                .force_unlock()
                .await
        }
    };
    if lock.kind == Kind::Fair {
        // A queue head that nobody hears keeps its turn for 100 ms (it may be a Redisson
        // waiter still subscribing); the library looks at the queue again after that, in
        // the background: stay until it has, or a queue of Java waiters behind a dead head
        // would wait for a Java retry.
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let was_held = result.map_err(|e| {
        let message = format!("force-unlocking `{name}`: {e}");
        if e.is_connection_error() || e.is_timeout() {
            Failure::connect(message)
        } else {
            Failure::redis(message)
        }
    })?;
    if json {
        println!(
            "{}",
            render::json(&Unlocked {
                name,
                key: &lock.key,
                kind: lock.kind,
                was_held,
                holders: &lock.holders,
            })
        );
    } else if was_held {
        let woken = match lock.kind {
            Kind::Fair => "the head of its queue, if any, was told",
            Kind::ReadWrite => "the unlock message went out, and every waiter wakes",
            _ => "the unlock message went out, and one waiter, if any, wakes",
        };
        println!("force-unlocked `{name}` ({}): {woken}", lock.kind.label());
    } else {
        println!("`{name}` was not held: its queue's dead waiters were dropped and its head told");
    }
    Ok(Exit::Ok)
}

/// Asks on the terminal; `true` for yes.
fn confirm(lock: &LockView) -> Result<bool, Failure> {
    let holders = lock
        .holders
        .iter()
        .map(|h| format!("{}:{} ×{}", h.client_id, h.task_id, h.count))
        .collect::<Vec<_>>()
        .join(", ");
    let mut stderr = std::io::stderr();
    let _ = write!(
        stderr,
        "Force-unlock `{}` ({}, held by {}, TTL {})? Its holder loses it. [y/N] ",
        lock.name,
        lock.kind.label(),
        if holders.is_empty() {
            "nobody"
        } else {
            &holders
        },
        render::ttl(lock.pttl_ms),
    );
    let _ = stderr.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::usage(format!("cannot read the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}
