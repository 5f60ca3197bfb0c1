//! `rlock unlock NAME`: force-unlock through the library, so that the kind's own script
//! runs and waiters are woken (a plain `DEL` frees the lock but wakes nobody: waiters then
//! sleep until their bound).
//!
//! It frees only the holders it showed (in the question, or printed with `--yes`): the
//! library's `force_unlock_if_held_by` runs the kind's force-unlock script with the owner
//! fields shown, and the script deletes the lock only if the hash holds exactly those
//! fields (whatever their counts) and, for a read-write lock, is still in the mode shown.
//! Otherwise it changes nothing and answers what it found, which is printed, with exit
//! code 5 ([`Exit::Changed`]). Between the question and its answer, the holder shown may
//! have released the lock and another taken it: a plain force unlock would free that
//! other holder, whom the operator never saw. `--any-holder` does just that, on purpose.

use std::io::{BufRead, IsTerminal, Write};

use redis_rlock::{ForceUnlockOutcome, Lock, LockKind};
use serde::Serialize;

use crate::args::UnlockArgs;
use crate::connect::Target;
use crate::exit::{Exit, Failure, Outcome};
use crate::model::{Holder, Kind, LockView};
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
    /// Whether it was held, as shown, when the script ran and deleted it (a free fair
    /// lock's queue is still purged and its head told).
    was_held: bool,
    /// The holders it had, as read just before (and shown).
    holders: &'a [crate::model::Holder],
    /// Set when nothing was unlocked because the lock was no longer held as shown.
    changed: bool,
    /// With `changed`: what the script found.
    #[serde(skip_serializing_if = "Option::is_none")]
    found: Option<Found>,
}

/// What the script found in place of the holders shown.
#[derive(Debug, Serialize)]
struct Found {
    /// A read-write lock's mode (`null` for other kinds, or when free).
    mode: Option<String>,
    /// The owner fields (`<client id>:<task id>`, a writer's with `:write`); empty when
    /// free.
    holders: Vec<String>,
}

/// Force-unlocks `args.name` after confirmation: only the holders shown, unless
/// `--any-holder`.
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
        let shown = render::printable(&lock.name);
        eprintln!("rlock: `{shown}` is not held: nothing to unlock");
        return Ok(Exit::Found);
    }
    if lock.holders_truncated && !args.any_holder {
        eprintln!(
            "rlock: `{}` has more holders than one read shows, so they cannot be checked: \
             not unlocked (--any-holder frees whoever holds it)",
            render::printable(&lock.name)
        );
        return Ok(Exit::Found);
    }
    if args.yes {
        // What is "shown" without a question: the holders read just now, which the script
        // checks as it would an answered question's.
        eprintln!("rlock: unlocking {}", describe(&lock));
    } else if !confirm(&lock)? {
        eprintln!("rlock: not unlocked");
        return Ok(Exit::Found);
    }
    let client = target.library_client().await?;
    let name = args.name.as_str();
    let seen: Option<Vec<String>> =
        (!args.any_holder).then(|| lock.holders.iter().map(Holder::field).collect());
    let seen = seen.as_deref();
    let result = match lock.kind {
        Kind::Fair => free(client.fair_lock(name), seen).await,
        Kind::Fenced => free(client.fenced_lock(name), seen).await,
        Kind::Reentrant => free(client.lock(name), seen).await,
        // The side of the mode it is held in: that side's script deletes it (the read
        // holds' timeout keys too) and wakes every waiter.
        Kind::ReadWrite if lock.mode.as_deref() == Some("write") => {
            free(client.read_write_lock(name).write_lock(), seen).await
        }
        Kind::ReadWrite => free(client.read_write_lock(name).read_lock(), seen).await,
    };
    let outcome = result.map_err(|e| {
        let message = format!("force-unlocking `{}`: {e}", render::printable(name));
        if e.is_connection_error() || e.is_timeout() {
            Failure::connect(message)
        } else {
            Failure::redis(message)
        }
    })?;
    let found = match &outcome {
        ForceUnlockOutcome::HoldersChanged { mode, holders } => Some(Found {
            mode: mode.clone(),
            holders: holders.clone(),
        }),
        _ => None,
    };
    if lock.kind == Kind::Fair && found.is_none() {
        // A queue head that nobody hears keeps its turn for 100 ms (it may be a Redisson
        // waiter still subscribing); the library looks at the queue again after that, in
        // the background: stay until it has, or a queue of Java waiters behind a dead head
        // would wait for a Java retry.
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let was_held = outcome == ForceUnlockOutcome::Deleted;
    let exit = if found.is_some() {
        Exit::Changed
    } else {
        Exit::Ok
    };
    if json {
        println!(
            "{}",
            render::json(&Unlocked {
                name,
                key: &lock.key,
                kind: lock.kind,
                was_held,
                holders: &lock.holders,
                changed: found.is_some(),
                found,
            })
        );
    } else {
        report(name, &lock, found.as_ref(), was_held);
    }
    Ok(exit)
}

/// What `unlock` did, in words (the name made printable).
fn report(name: &str, lock: &LockView, found: Option<&Found>, was_held: bool) {
    let name = render::printable(name);
    if let Some(found) = found {
        let now = if found.holders.is_empty() {
            "it is free now".to_string()
        } else {
            let mode = found
                .mode
                .as_deref()
                .map(|mode| format!(" for {mode}ing"))
                .unwrap_or_default();
            format!("it is held{mode} by {} now", found.holders.join(", "))
        };
        eprintln!(
            "rlock: `{name}` not unlocked: it is no longer held as shown; {now} \
             (--any-holder frees whoever holds it)"
        );
    } else if was_held {
        let woken = match lock.kind {
            Kind::Fair => "the head of its queue, if any, was told",
            Kind::ReadWrite => "the unlock message went out, and every waiter wakes",
            _ => "the unlock message went out, and one waiter, if any, wakes",
        };
        println!("force-unlocked `{name}` ({}): {woken}", lock.kind.label());
    } else if lock.kind == Kind::Fair {
        println!("`{name}` was not held: its queue's dead waiters were dropped and its head told");
    } else {
        println!("`{name}` was no longer held: nothing to unlock");
    }
}

/// Force-unlocks `lock`: with `seen`, only if held by exactly those owner fields.
async fn free<K: LockKind>(
    lock: Lock<K>,
    seen: Option<&[String]>,
) -> redis_rlock::Result<ForceUnlockOutcome> {
    match seen {
        Some(seen) => lock.force_unlock_if_held_by(seen).await,
        None => Ok(if lock.force_unlock().await? {
            ForceUnlockOutcome::Deleted
        } else {
            ForceUnlockOutcome::NotHeld
        }),
    }
}

/// The lock as shown: "`NAME` (KIND, held by HOLDERS, TTL T)".
fn describe(lock: &LockView) -> String {
    let holders = lock
        .holders
        .iter()
        .map(|h| match h.mode {
            Some(mode) => format!("{}:{} ×{} ({mode})", h.client_id, h.task_id, h.count),
            None => format!("{}:{} ×{}", h.client_id, h.task_id, h.count),
        })
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "`{}` ({}, held by {}, TTL {})",
        render::printable(&lock.name),
        lock.kind.label(),
        if holders.is_empty() {
            "nobody"
        } else {
            &holders
        },
        render::ttl(lock.pttl_ms),
    )
}

/// Asks on the terminal; `true` for yes.
fn confirm(lock: &LockView) -> Result<bool, Failure> {
    let mut stderr = std::io::stderr();
    let _ = write!(
        stderr,
        "Force-unlock {}? Its holder loses it. [y/N] ",
        describe(lock)
    );
    let _ = stderr.flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::usage(format!("cannot read the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}
