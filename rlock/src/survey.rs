//! One walk of the keyspace for `list`, `leaks` and `watch`: every master, page by page,
//! each page read before the next is asked for, so that memory holds one page and what is
//! found, whatever the keyspace (a million plain hashes cost as little memory as ten).
//!
//! Per node, four passes, each filtered by Redis itself:
//!
//! 1. the hashes whose key matches the pattern (`SCAN … MATCH <prefix><pattern> TYPE
//!    hash`): per page, one pipeline reads the first fields of each (`HSCAN`), and one more
//!    reads in full the few whose fields are owners (lock hashes and read-write locks);
//! 2. the `redisson_*` keys (fair queues and deadlines, fencing counters, unlock latches),
//!    whose lock name is read back from the key: per page, one pipeline asks whether the
//!    lock hash exists (then pass 1 has it) and one reads the free fair and fenced locks;
//! 3. the `*:timeout` sorted sets (`TYPE zset`): expirable semaphores' permits;
//! 4. the channels of semaphores and latches with waiters (`PUBSUB CHANNELS`).
//!
//! A page is one `SCAN` call: at most `--scan-count` keys walked, and at most two
//! pipelines; a pass stops after `--scan-limit` keys walked.

use std::collections::BTreeSet;

use redis::Value;
use redis_rlock::protocol::layout::{self, Derived};

use crate::args::ScanArgs;
use crate::connect::Nodes;
use crate::exit::Failure;
use crate::glob::{glob_escape, glob_match};
use crate::inspect::{self, Read};
use crate::keys::{self, Key};
use crate::model::LockView;
use crate::reply::as_int;
use crate::scan::{self, ScanReport, Walk};

/// What a walk hands over as it goes.
pub trait Visit {
    /// A lock, read (each once).
    fn lock(&mut self, lock: LockView);

    /// An unlock latch of the lock key `lock`, with its PTTL (-1: none); only when the
    /// walk was asked for latches.
    fn latch(&mut self, latch: Key, lock: Key, pttl: i64);
}

/// What the walk found besides what it handed over.
pub struct Walked {
    /// The keys of expirable semaphores (found by their `{name}:timeout` sorted sets) and
    /// of semaphores and latches with waiters (found by their channels): the first
    /// `--limit`, by key.
    pub synchronizers: BTreeSet<Key>,
    /// How far each pass got on each node.
    pub report: ScanReport,
}

/// Walks every node for the locks whose name (without `key_prefix`) matches
/// `args.pattern`, handing each to `visit`, and the unlock latches too when `latches`.
///
/// # Errors
/// When a node does not answer, or refuses a command (named with the ACL rule it needs).
pub async fn walk(
    nodes: &Nodes,
    key_prefix: &str,
    args: &ScanArgs,
    latches: bool,
    visit: &mut impl Visit,
) -> Result<Walked, Failure> {
    let mut report = ScanReport::new();
    let now = nodes.server_times().await?;
    let wanted = |key: &[u8]| {
        key.strip_prefix(key_prefix.as_bytes())
            .is_some_and(|name| glob_match(&args.pattern, &String::from_utf8_lossy(name)))
    };
    let hash_pattern = format!("{}{}", glob_escape(key_prefix), args.pattern).into_bytes();
    for node in &nodes.nodes {
        let mut pass = Walk::new(node, hash_pattern.clone(), Some("hash"), args);
        while let Some(page) = pass.next_page().await? {
            let owned = inspect::owner_hashes(nodes, page).await?;
            for read in inspect::read_locks(nodes, key_prefix, &owned, &now).await? {
                if let Read::Lock(lock) = read {
                    visit.lock(lock);
                }
            }
        }
        report.add(pass.report());
    }
    for node in &nodes.nodes {
        let mut pass = Walk::new(node, b"redisson_*".to_vec(), None, args);
        while let Some(page) = pass.next_page().await? {
            derived_page(nodes, key_prefix, &now, page, &wanted, latches, visit).await?;
        }
        report.add(pass.report());
    }
    let mut synchronizers = BTreeSet::new();
    let mut keep = |key: Key| {
        synchronizers.insert(key);
        if synchronizers.len() > args.limit {
            synchronizers.pop_last();
        }
    };
    // An expirable semaphore's taken permits: `{name}:timeout` (`name:timeout` when the
    // name has a brace), a sorted set.
    for node in &nodes.nodes {
        let mut pass = Walk::new(node, b"*:timeout".to_vec(), Some("zset"), args);
        while let Some(page) = pass.next_page().await? {
            page.iter()
                .filter_map(|key| keys::parse_permit_timeouts(key))
                .filter(|key| wanted(key))
                .for_each(&mut keep);
        }
        report.add(pass.report());
    }
    // Semaphores and latches are a bare number, like any counter: those with waiters show
    // by their channels.
    let patterns = [
        format!("{}:*", Derived::SemaphoreChannel.prefix()),
        format!("{}*", layout::LATCH_CHANNEL),
    ];
    for node in &nodes.nodes {
        for channel in scan::channels(node, nodes.cluster, &patterns).await? {
            if let Some(key) = keys::parse_sync_channel(&channel).filter(|key| wanted(key)) {
                keep(key);
            }
        }
    }
    Ok(Walked {
        synchronizers,
        report,
    })
}

/// One page of `redisson_*` keys: the free fair and fenced locks they belong to (a lock
/// whose hash exists is pass 1's), and the unlock latches.
async fn derived_page(
    nodes: &Nodes,
    key_prefix: &str,
    now: &[i64],
    page: Vec<Key>,
    wanted: &impl Fn(&[u8]) -> bool,
    latches: bool,
    visit: &mut impl Visit,
) -> Result<(), Failure> {
    // Only the lock keys the pattern wants are asked about: a user's ACL may cover no
    // others.
    let parsed: Vec<(Key, Derived, Vec<Key>)> = page
        .into_iter()
        .filter_map(|key| {
            let (kind, mut candidates) = keys::parse_derived(&key)?;
            candidates.retain(|candidate| wanted(candidate));
            (!candidates.is_empty()).then_some((key, kind, candidates))
        })
        .filter(|(_, kind, _)| latches || *kind != Derived::UnlockLatch)
        .collect();
    if parsed.is_empty() {
        return Ok(());
    }
    // `a` and `{a}` derive the same keys: the one whose hash exists, else the first.
    let mut types = inspect::Batch::default();
    let mut latch_ttls = Vec::new();
    let asked: Vec<Vec<usize>> = parsed
        .iter()
        .map(|(key, kind, candidates)| {
            if *kind == Derived::UnlockLatch {
                latch_ttls.push(types.push(nodes, key, "pttl", redis::cmd("PTTL").arg(key)));
            }
            candidates
                .iter()
                .map(|c| types.push(nodes, c, "type", redis::cmd("TYPE").arg(c)))
                .collect()
        })
        .collect();
    let replies = types.run(nodes).await?;
    let is_hash = |i: usize| matches!(&replies[i], Value::SimpleString(t) if t == "hash");
    let mut free = BTreeSet::new();
    let mut latch_ttls = latch_ttls.into_iter();
    for ((key, kind, candidates), asked) in parsed.into_iter().zip(asked) {
        let hash = asked.iter().position(|&i| is_hash(i));
        let lock = candidates[hash.unwrap_or(0)].clone();
        if kind == Derived::UnlockLatch {
            let pttl = latch_ttls
                .next()
                .map_or(-2, |i| as_int(&replies[i]).unwrap_or(-2));
            visit.latch(key, lock, pttl);
        } else if hash.is_none() {
            free.insert((lock, kind));
        }
    }
    let free: Vec<(Key, Derived)> = free.into_iter().collect();
    let lock_keys: Vec<Key> = free.iter().map(|(lock, _)| lock.clone()).collect();
    let reads = inspect::read_locks(nodes, key_prefix, &lock_keys, now).await?;
    for ((_, kind), read) in free.into_iter().zip(reads) {
        if let Read::Lock(lock) = read {
            if reported_by(&lock, kind) {
                visit.lock(lock);
            }
        }
    }
    Ok(())
}

/// Whether the derived key of `kind` is the one that reports the free `lock`: a lock has
/// up to three, which may come in different pages, and is reported once.
fn reported_by(lock: &LockView, kind: Derived) -> bool {
    match kind {
        Derived::FairQueue => lock.queue_length.is_some_and(|n| n > 0),
        Derived::FairTimeouts => lock.queue_length == Some(0),
        Derived::FencingToken => lock.queue_length.is_none(),
        _ => false,
    }
}
