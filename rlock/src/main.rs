//! `rlock`: a command-line inspector for the locks of redis-rlock and Redisson, which share
//! one Redis layout. It reads that layout directly (owners, re-entry counts, leases, fair
//! queues with their deadlines, fencing counters, subscribers) and force-unlocks through
//! the library, so that waiters are woken.
//!
//! ```text
//! cargo run --bin rlock -- list                 # from the repository root
//! cargo install --path rlock                    # then: rlock list
//! ```
//!
//! # Connecting
//!
//! As the library connects: `--url URL` (default: `$REDIS_URL`, else
//! `redis://127.0.0.1:6379`), `--cluster SEED[,SEED…]` (every master is read), or
//! `--sentinel URL[,URL…] --master NAME` (with `--master-user`/`--master-password` or
//! `RLOCK_MASTER_USER`/`RLOCK_MASTER_PASSWORD` when the master's credentials differ from the
//! sentinels'). TLS with `rediss://` URLs, `--tls-ca FILE`, and `--tls-cert FILE --tls-key
//! FILE` for mutual TLS; ACL users in the URL (`redis://user:password@host:port`).
//! `--key-prefix P` is the library's `key_prefix` (a Redisson `NameMapper`'s prefix): only
//! keys with it are read, and names are printed and taken without it. Passwords are never
//! printed: URLs show `***` in their place, in output and in errors alike.
//!
//! The ACL rules of a read-only user are in the README's Operations section (an `ACL
//! SETUSER inspector` block, which `rlock/tests/cli/keyspace.rs` runs with); the
//! [`operations`](redis_rlock::operations) module docs add those of a cluster and of
//! Sentinel, and what `unlock` needs. A missing rule is named as the library names one
//! ("Redis refused reading `host:port`: the user lacks permission to run `+scan` …", exit
//! code 4), never read as "no lock".
//!
//! # Commands
//!
//! - `rlock list [--pattern GLOB] [--limit N]`: every lock, one line each: name, kind,
//!   remaining TTL, fair-queue length (and how many waiters are past their deadline),
//!   fencing counter, node, holders (`<client id>:<task id> ×<count>`). Keys are found with
//!   `SCAN` on every master, never `KEYS`: hashes matching the pattern (`SCAN … TYPE
//!   hash`) and the `redisson_*` keys (queues, deadlines, counters, latches). Each pass
//!   walks at most `--scan-limit` keys per node, `--scan-count` per call; the output says
//!   when a scan stopped short. The keyspace is walked a `SCAN` page at a time, each page
//!   read (pipelined) before the next is asked for, so memory stays bounded whatever the
//!   keyspace (`rlock list --help` says what a walk costs). Keys are bytes: a key that is
//!   not UTF-8 never fails the walk, and a lock so named is listed with its other bytes as
//!   `\xHH`. Then the semaphores and latches it can tell from other
//!   data: expirable semaphores (by their `{name}:timeout` sorted sets, `SCAN … TYPE zset`)
//!   and any with waiters (by their channels, `PUBSUB CHANNELS`); a plain semaphore or latch
//!   nobody waits on is a bare number, which `show NAME` gives by name.
//! - `rlock show NAME`: one lock in full: holders and counts, PTTL, the fair queue head
//!   first with each waiter's deadline against the server's clock (`TIME`) and whether its
//!   process still listens on its channel, the fencing counter, and the subscribers of the
//!   lock's channels (`PUBSUB NUMSUB`; on a cluster also `SHARDNUMSUB`, every master is
//!   asked and the counts are added, since each node counts only its own). Given a
//!   semaphore or a count-down latch (Redisson's layout for both is a string holding a
//!   number, which `list` cannot tell from other data, so they are shown by name only): the
//!   number, an expirable semaphore's taken permits (`{NAME}:timeout`) with their ids and
//!   expiries, and the subscribers of the semaphore and latch channels.
//! - `rlock unlock NAME [--yes] [--any-holder]`: force-unlocks through the library's
//!   client (`force_unlock_if_held_by` of the kind found: reentrant, fair or fenced), so
//!   that the kind's script publishes the unlock message and a waiter is woken. On a
//!   terminal it asks first, showing the holders; with stdin not a terminal it refuses
//!   unless `--yes` is given, and then prints the holders it read just before. Either way
//!   it frees only those holders: the script that deletes the lock first checks that the
//!   hash holds exactly the owner fields shown (whatever their counts) and, for a
//!   read-write lock, the same mode; when it does not (a holder released and another took
//!   the lock while the question was open), it changes nothing, prints the holders it
//!   found, and exits with code 5. `--any-holder` frees whoever holds the lock when the
//!   script runs. A key that is not a lock is left alone. A read-write lock is unlocked
//!   through the side of the mode it is held in (the read holds' timeout keys go too), and
//!   every waiter wakes.
//! - `rlock leaks`: locks without a TTL (`PTTL` -1: never expire), fair queues whose
//!   waiters are all past their deadline, unlock latches without a TTL or with one longer
//!   than any retry; for each, what is wrong and the command that fixes it (`rlock … unlock
//!   --yes -- NAME`, `redis-cli … PEXPIRE KEY 30000`, `redis-cli … DEL KEY`; redis-cli
//!   commands use `--askpass` rather than a password). Names and keys are quoted for a
//!   POSIX shell (`$'…'` for control characters and bytes that are not UTF-8) and follow
//!   `--`, so that a lock named `-h` is a name. A lock whose name is not UTF-8, which
//!   neither `rlock` nor the library can take, is fixed with `redis-cli`.
//! - `rlock deadlocks`: cycles of tasks each holding a lock the next one waits for, in the
//!   graph of holds (the lock hashes) and waits. Redis shows no waiter of an `RLock` (they
//!   only subscribe), so the waits are those the library's opt-in wait registry records
//!   (`ClientBuilder::wait_registry`): `redis_rlock_waiting:{<owner>}`, found with `SCAN` on
//!   every master, and each owner's lock's holders. Each cycle is printed with its tasks,
//!   their clients, the lock each waits for, how long, and the `rlock … unlock --yes --
//!   NAME` that frees the lock held by the task whose wait began last (its client reports
//!   the lock lost). Exit code 1 when a cycle is found. `show NAME` lists the registered
//!   waiters of one lock.
//! - `rlock watch [NAME] [--interval 1s] [--iterations N]`: `list` (or `show NAME`) again
//!   every interval until Ctrl-C; a failed refresh prints its error and the next one
//!   reconnects.
//!
//! # Kinds
//!
//! The layout tells the kinds apart: a lock hash (fields `<uuid>:<decimal id>` → count) is
//! `reentrant`; with a non-empty `redisson_lock_queue:{K}` or `redisson_lock_timeout:{K}`
//! it is `fair`; with a `redisson_lock_token:{K}` counter, `fenced`; a hash with a `mode`
//! field is a Redisson `read-write` lock. A fair lock with nobody queued looks like a
//! reentrant lock, and is listed as one. Free fair locks with a queue and free fenced locks
//! (the counter stays) are listed too, with no holder. Hashes of other data are not locks
//! and are never listed or touched. Semaphores and count-down latches are plain strings,
//! which cannot be told from other data, and are not listed.
//!
//! # Output
//!
//! Tables for people, with the control characters of names, keys and waiters escaped
//! (`\n`, `\u{1b}`: a name cannot draw a row or move the cursor); `--json` prints the same
//! facts, exact, as one JSON document (`watch --json`:
//! one line per refresh) for scripts. `list`: `{"locks": [{"name", "key", "kind", "held",
//! "holders": [{"client_id", "task_id", "count"}], "pttl_ms", "queue_length",
//! "stale_waiters", "fencing_token", "node"}], "total", "truncated", "scan": {"complete",
//! "passes"}}`; `show`: one lock's fields plus `"server_time_ms"`, `"queue": [{"position",
//! "owner", "deadline_ms", "remaining_ms", "subscribers"}]` and `"subscribers":
//! [{"channel", "total", "per_node"}]`; `leaks`: `{"leaks": [{"problem", "name", "key",
//! "node", "detail", "fix", "alternative"}], …}`; `unlock`: `{"name", "key", "kind",
//! "was_held", "holders", "changed"}`, plus `"found": {"mode", "holders"}` (owner fields)
//! when `changed`. `pttl_ms` is -1 for a lock without TTL and `null` for a free
//! one; kinds are `reentrant`, `fair`, `fenced`, `read_write`.
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done; nothing wrong found |
//! | 1 | `leaks` found something; `show`/`unlock`: no such lock, or not a lock; `unlock`: not held, or the confirmation was declined |
//! | 2 | usage error: bad flags, unreadable TLS files, `unlock` without `--yes` and without a terminal |
//! | 3 | cannot connect: unreachable, timeout, credentials or TLS refused, unknown Sentinel master, not a cluster |
//! | 4 | Redis answered with an error (such as a missing ACL permission) |
//! | 5 | `unlock`: the lock was held by others than those shown (or in another mode, or freed) when the script ran; nothing was unlocked |
//!
//! # Layout of this crate
//!
//! [`args`] (the command line), [`connect`] (one server, cluster masters or the Sentinel
//! master; the library client for `unlock`), [`keys`] (keys as bytes, and the library's
//! [`layout`](redis_rlock::protocol::layout) on them: Redisson's names, both ways),
//! [`scan`] (bounded `SCAN` per node, a page at a time), [`survey`] (the walk of `list`
//! and `leaks`, page by page), [`glob`] (Redis' patterns), [`inspect`] (Redis →
//! [`model`]), [`render`] (tables, printable text and JSON), [`shell`] (quoting printed
//! commands), [`commands`] (one module per command), [`acl`] (refusals named as the rule
//! to grant), [`redact`] (secrets out of every message), [`exit`] (exit codes).

#![forbid(unsafe_code)]
#![warn(missing_docs, rust_2018_idioms)]

mod acl;
mod args;
mod commands;
mod connect;
mod exit;
mod glob;
mod inspect;
mod keys;
mod model;
mod redact;
mod render;
mod reply;
mod scan;
mod shell;
mod subscribers;
mod survey;
mod waits;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};
use crate::exit::{Exit, Outcome};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    register_secrets(&argv);
    let cli = match Cli::try_parse_from(&argv) {
        Ok(cli) => cli,
        Err(error) => {
            let text = error.render().to_string();
            return if error.use_stderr() {
                // clap may quote what it was given: a URL with its password included.
                eprint!("{}", redact::scrub(&text));
                ExitCode::from(Exit::Usage.code())
            } else {
                // Help and version: only what the environment put in them can be secret.
                print!("{}", redact::scrub_secrets(&text));
                ExitCode::SUCCESS
            };
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("rlock: cannot start the runtime: {e}");
            return ExitCode::from(Exit::Redis.code());
        }
    };
    match runtime.block_on(run(&cli)) {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(failure) => {
            eprintln!("rlock: error: {}", redact::scrub(&failure.message));
            ExitCode::from(failure.exit.code())
        }
    }
}

/// Every secret this run may see, from the command line and the environment, so that no
/// message prints one.
fn register_secrets(argv: &[String]) {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let redis_url = env("REDIS_URL");
    let master_password = env("RLOCK_MASTER_PASSWORD");
    // A password given as `--master-password X` or `--master-password=X`.
    let mut others: Vec<&str> = master_password.as_deref().into_iter().collect();
    for (i, arg) in argv.iter().enumerate() {
        if arg == "--master-password" {
            others.extend(argv.get(i + 1).map(String::as_str));
        } else if let Some(value) = arg.strip_prefix("--master-password=") {
            others.push(value);
        }
    }
    let urls = argv
        .iter()
        .flat_map(|arg| arg.split(','))
        .chain(redis_url.as_deref())
        .filter(|text| text.contains("://"));
    redact::register(urls, &others);
}

/// Runs the command.
async fn run(cli: &Cli) -> Outcome {
    let target = connect::Target::from_args(&cli.connection)?;
    match &cli.command {
        Command::List(args) => commands::list::run(&target, &args.scan, cli.json).await,
        Command::Show(args) => commands::show::run(&target, &args.name, cli.json).await,
        Command::Unlock(args) => commands::unlock::run(&target, args, cli.json).await,
        Command::Leaks(args) => commands::leaks::run(&target, args, cli.json).await,
        Command::Deadlocks(args) => commands::deadlocks::run(&target, args, cli.json).await,
        Command::Watch(args) => commands::watch::run(&target, args, cli.json).await,
    }
}
