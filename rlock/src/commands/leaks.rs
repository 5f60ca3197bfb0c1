//! `rlock leaks`: what the manual routine looks for ("TTL = -1 means potential deadlock"),
//! and what only a layout-aware tool can see: fair queues nobody will ever leave, and unlock
//! latches that outlived every retry. Each with the command that fixes it.

use redis_rlock::protocol::layout::Derived;

use crate::args::ScanArgs;
use crate::connect::{Node, Nodes, Target};
use crate::exit::{Failure, Outcome};
use crate::keys::{self, shown, Key};
use crate::model::{Leak, LeakReport, LockView};
use crate::render;
use crate::shell::{quote, quote_bytes};
use crate::survey::{self, Visit};

/// A latch lives 16–20 s in Redisson and about 20 ms in the library: one that will still
/// be there after this long was not written by an unlock in progress.
const LATCH_STALE_MS: i64 = 60_000;

/// The lease `PEXPIRE` fixes give a lock without TTL: the library's and Redisson's
/// watchdog lease, which a live holder's watchdog keeps renewing.
const FIX_LEASE_MS: i64 = 30_000;

/// Prints every leak found; exit code 1 when there is one.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn run(target: &Target, args: &ScanArgs, json: bool) -> Outcome {
    let nodes = target.connect().await?;
    let report = find(target, &nodes, args).await?;
    let found = !report.leaks.is_empty();
    Ok(super::report(&report, json, render::leaks, found))
}

/// Walks the keyspace and judges each lock and unlock latch as it is read.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn find(target: &Target, nodes: &Nodes, args: &ScanArgs) -> Result<LeakReport, Failure> {
    let mut judge = Judge {
        target,
        nodes,
        locks: Vec::new(),
        latches: Vec::new(),
        locks_examined: 0,
        latches_examined: 0,
    };
    let walked = survey::walk(nodes, &target.key_prefix, args, true, &mut judge).await?;
    // Locks by name, each lock's problems in the order found; then the latches.
    judge.locks.sort_by(|a, b| a.name.cmp(&b.name));
    let mut leaks = judge.locks;
    leaks.extend(judge.latches);
    Ok(LeakReport {
        leaks,
        locks_examined: judge.locks_examined,
        latches_examined: judge.latches_examined,
        scan: walked.report,
    })
}

/// The leaks found so far: only they are kept, not the locks read.
struct Judge<'a> {
    target: &'a Target,
    nodes: &'a Nodes,
    locks: Vec<Leak>,
    latches: Vec<Leak>,
    locks_examined: usize,
    latches_examined: usize,
}

impl Visit for Judge<'_> {
    fn lock(&mut self, lock: LockView) {
        self.locks_examined += 1;
        self.locks.extend(lock_leak(self.target, self.nodes, &lock));
    }

    fn latch(&mut self, latch: Key, lock_key: Key, pttl: i64) {
        self.latches_examined += 1;
        let detail = match pttl {
            -1 => "an unlock latch without a TTL: it is never removed".to_string(),
            ms if ms > LATCH_STALE_MS => format!(
                "an unlock latch that expires only in {}: no unlock retries that long",
                render::millis(ms)
            ),
            _ => return,
        };
        let (target, nodes) = (self.target, self.nodes);
        let node = &nodes.nodes[nodes.of_key(&latch)];
        let prefix = target.key_prefix.as_bytes();
        self.latches.push(Leak {
            problem: "stale_latch",
            name: shown(lock_key.strip_prefix(prefix).unwrap_or(&lock_key)),
            key: shown(&latch),
            node: node.addr.clone(),
            detail,
            fix: redis_cli(target, node, &[b"DEL", &latch]),
            alternative: None,
        });
    }
}

/// The `rlock` command that force-unlocks the lock `name` on `target`: `--` before the
/// name, so that a lock named `-h` is a name, not a flag.
pub fn unlock_command(target: &Target, name: &str) -> String {
    let flags = match target.shown_flags.is_empty() {
        true => String::new(),
        false => format!("{} ", target.shown_flags),
    };
    format!("rlock {flags}unlock --yes -- {}", quote(name))
}

/// The leaks of one lock: no TTL, or a queue of dead waiters.
fn lock_leak(target: &Target, nodes: &Nodes, lock: &LockView) -> Vec<Leak> {
    let node = &nodes.nodes[nodes.of_key(&lock.raw_key)];
    // `--` before the name: a lock named `-h` is a name, not a flag. A name that is not
    // UTF-8 cannot be given to `rlock` (nor to the library): Redis' own commands fix it.
    let name = lock
        .raw_key
        .strip_prefix(target.key_prefix.as_bytes())
        .and_then(|name| std::str::from_utf8(name).ok());
    let unlock = name.map(|name| unlock_command(target, name));
    let pexpire = redis_cli(
        target,
        node,
        &[
            b"PEXPIRE",
            &lock.raw_key,
            FIX_LEASE_MS.to_string().as_bytes(),
        ],
    );
    let mut leaks = Vec::new();
    if lock.held && lock.pttl_ms == Some(-1) {
        let (fix, alternative) = match &unlock {
            Some(unlock) => (
                unlock.clone(),
                Some(format!(
                    "{pexpire}   # lets a live holder finish; a watchdog keeps renewing it"
                )),
            ),
            None => (pexpire, None),
        };
        leaks.push(Leak {
            problem: "no_ttl",
            name: lock.name.clone(),
            key: lock.key.clone(),
            node: node.addr.clone(),
            detail: format!(
                "held by {} with no TTL: it never expires, and a crashed holder keeps it forever",
                holders(lock)
            ),
            fix,
            alternative,
        });
    }
    if let (Some(length), Some(stale)) = (lock.queue_length, lock.stale_waiters) {
        if stale > 0 && stale >= length {
            let queue = keys::derived(Derived::FairQueue, &lock.raw_key);
            let timeouts = keys::derived(Derived::FairTimeouts, &lock.raw_key);
            let drop_queue = redis_cli(target, node, &[b"DEL", &queue, &timeouts]);
            let (detail, fix) = if lock.held {
                (
                    format!(
                        "all {stale} queued waiter(s) are past their deadline (their processes \
                         stopped refreshing them); the lock is held, and live waiters rejoin \
                         the queue on their next attempt"
                    ),
                    drop_queue,
                )
            } else {
                (
                    format!(
                        "all {stale} queued waiter(s) are past their deadline and the lock is \
                         free: nobody will take it until a new caller comes; the fair \
                         force-unlock script drops them and tells the next waiter"
                    ),
                    unlock.clone().unwrap_or(drop_queue),
                )
            };
            leaks.push(Leak {
                problem: "dead_queue",
                name: lock.name.clone(),
                key: shown(&queue),
                node: node.addr.clone(),
                detail,
                fix,
                alternative: None,
            });
        }
    }
    leaks
}

/// The holders, short.
fn holders(lock: &LockView) -> String {
    if lock.holders.is_empty() {
        return "nobody".to_string();
    }
    lock.holders
        .iter()
        .map(|h| format!("{}:{}", h.client_id, h.task_id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A `redis-cli` command for `node`: its address, TLS files, user and database; a password
/// is asked for (`--askpass`), never written out.
fn redis_cli(target: &Target, node: &Node, args: &[&[u8]]) -> String {
    let mut words = vec!["redis-cli".to_string()];
    match node.info.addr() {
        redis::ConnectionAddr::Tcp(host, port) => {
            words.extend(["-h".into(), quote(host), "-p".into(), port.to_string()]);
        }
        redis::ConnectionAddr::TcpTls {
            host,
            port,
            insecure,
            ..
        } => {
            words.extend([
                "-h".into(),
                quote(host),
                "-p".into(),
                port.to_string(),
                "--tls".into(),
            ]);
            if *insecure {
                words.push("--insecure".into());
            }
            if !target.redis_cli_tls.is_empty() {
                words.push(target.redis_cli_tls.clone());
            }
        }
        redis::ConnectionAddr::Unix(path) => {
            words.extend(["-s".into(), quote(&path.display().to_string())]);
        }
        _ => {}
    }
    let settings = node.info.redis_settings();
    if let Some(user) = settings.username() {
        words.extend(["--user".into(), quote(user)]);
    }
    if settings.password().is_some() {
        words.push("--askpass".into());
    }
    if settings.db() != 0 {
        words.extend(["-n".into(), settings.db().to_string()]);
    }
    words.extend(args.iter().map(|a| quote_bytes(a)));
    words.join(" ")
}
