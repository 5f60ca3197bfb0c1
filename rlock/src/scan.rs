//! Finding lock keys with `SCAN`, never `KEYS`: per node (a cluster's keyspace is split over
//! its masters, and `SCAN` walks the node asked), with a `COUNT` hint per call and a bound
//! on the keys walked, so that a call on a large production keyspace does a known amount
//! of work and says when it stopped short.
//!
//! Two passes per node, each filtered by Redis itself: the hashes whose key matches the
//! pattern (`SCAN … MATCH <prefix><pattern> TYPE hash`: lock hashes and read-write locks,
//! among other hashes), and the `redisson_*` keys (fair queues and deadlines, fencing
//! counters, unlock latches), whose lock name is read back from the derived key.

use std::collections::{BTreeMap, BTreeSet};

use redis_rlock::protocol::layout::{self, parse_derived, Derived};
use serde::Serialize;

use crate::args::ScanArgs;
use crate::connect::{Node, Nodes};
use crate::exit::Failure;
use crate::glob::{glob_escape, glob_match};

/// What the scan found, before anything is read.
#[derive(Debug, Default)]
pub struct Found {
    /// Keys of hashes whose name matches: lock candidates.
    pub hashes: BTreeSet<String>,
    /// Lock keys that have derived keys, by the kinds of derived keys found.
    pub derived: BTreeMap<String, BTreeSet<Derived>>,
    /// Unlock latches: (latch key, lock key).
    pub latches: Vec<(String, String)>,
    /// Keys of expirable semaphores (found by their `{name}:timeout` sorted sets) and of
    /// semaphores and latches with waiters (found by their channels).
    pub synchronizers: BTreeSet<String>,
    /// How far each pass got on each node.
    pub report: ScanReport,
}

/// How complete the scan was.
#[derive(Debug, Default, Serialize)]
pub struct ScanReport {
    /// Whether every pass walked every node's whole keyspace.
    pub complete: bool,
    /// One entry per node and pass.
    pub passes: Vec<PassReport>,
}

/// One scan pass of one node.
#[derive(Debug, Serialize)]
pub struct PassReport {
    /// `host:port`.
    pub node: String,
    /// The `MATCH` pattern (and `TYPE`, if any).
    pub filter: String,
    /// `SCAN` calls made.
    pub calls: u64,
    /// Keys walked, at most (calls × COUNT: Redis filters after walking).
    pub walked: u64,
    /// Whether the cursor came back to 0.
    pub complete: bool,
}

/// Scans every node for locks whose name (without `key_prefix`) matches `args.pattern`.
///
/// # Errors
/// When a node does not answer, or refuses `SCAN` (an ACL user needs `+scan`).
pub async fn find(nodes: &Nodes, key_prefix: &str, args: &ScanArgs) -> Result<Found, Failure> {
    let mut found = Found {
        report: ScanReport {
            complete: true,
            ..ScanReport::default()
        },
        ..Found::default()
    };
    let hash_pattern = format!("{}{}", glob_escape(key_prefix), args.pattern);
    for node in &nodes.nodes {
        let (keys, pass) = scan(node, &hash_pattern, Some("hash"), args).await?;
        found.report.complete &= pass.complete;
        found.report.passes.push(pass);
        found.hashes.extend(keys);
    }
    for node in &nodes.nodes {
        let (keys, pass) = scan(node, "redisson_*", None, args).await?;
        found.report.complete &= pass.complete;
        found.report.passes.push(pass);
        for key in keys {
            let Some((kind, candidates)) = parse_derived(&key) else {
                continue;
            };
            // `a` and `{a}` derive the same keys: the one whose hash exists, else the first.
            let lock = candidates
                .iter()
                .find(|c| found.hashes.contains(*c))
                .unwrap_or(&candidates[0])
                .clone();
            let Some(name) = lock.strip_prefix(key_prefix) else {
                continue;
            };
            if !glob_match(&args.pattern, name) {
                continue;
            }
            if kind == Derived::UnlockLatch {
                found.latches.push((key, lock));
            } else {
                found.derived.entry(lock).or_default().insert(kind);
            }
        }
    }
    let wanted = |key: &str| {
        key.strip_prefix(key_prefix)
            .is_some_and(|name| glob_match(&args.pattern, name))
    };
    // An expirable semaphore's taken permits: `{name}:timeout` (`name:timeout` when the
    // name has a brace), a sorted set.
    for node in &nodes.nodes {
        let (keys, pass) = scan(node, "*:timeout", Some("zset"), args).await?;
        found.report.complete &= pass.complete;
        found.report.passes.push(pass);
        found.synchronizers.extend(
            keys.iter()
                .filter_map(|key| layout::parse_permit_timeouts(key))
                .filter(|key| wanted(key)),
        );
    }
    // Semaphores and latches are a bare number, like any counter: those with waiters show
    // by their channels.
    for node in &nodes.nodes {
        for channel in channels(node, nodes.cluster).await? {
            if let Some(key) = layout::parse_sync_channel(&channel).filter(|key| wanted(key)) {
                found.synchronizers.insert(key);
            }
        }
    }
    Ok(found)
}

/// The channels of semaphores and latches that have subscribers on `node` (`PUBSUB
/// CHANNELS`, and `SHARDCHANNELS` on a cluster, whose refusal counts as none).
async fn channels(node: &Node, cluster: bool) -> Result<Vec<String>, Failure> {
    let mut conn = node.conn.clone();
    let mut found = Vec::new();
    let patterns = [
        format!("{}:*", Derived::SemaphoreChannel.prefix()),
        format!("{}*", layout::LATCH_CHANNEL),
    ];
    for pattern in &patterns {
        let classic: Vec<String> = redis::cmd("PUBSUB")
            .arg("CHANNELS")
            .arg(pattern)
            .query_async(&mut conn)
            .await
            .map_err(|e| Failure::from_redis(&format!("PUBSUB CHANNELS on {}", node.addr), &e))?;
        found.extend(classic);
        if cluster {
            let sharded: Vec<String> = redis::cmd("PUBSUB")
                .arg("SHARDCHANNELS")
                .arg(pattern)
                .query_async(&mut conn)
                .await
                .unwrap_or_default();
            found.extend(sharded);
        }
    }
    Ok(found)
}

/// One bounded scan pass of one node.
async fn scan(
    node: &Node,
    pattern: &str,
    type_filter: Option<&str>,
    args: &ScanArgs,
) -> Result<(Vec<String>, PassReport), Failure> {
    let mut conn = node.conn.clone();
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    let (mut calls, mut walked) = (0u64, 0u64);
    loop {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(args.scan_count);
        if let Some(kind) = type_filter {
            cmd.arg("TYPE").arg(kind);
        }
        let (next, batch): (u64, Vec<String>) = cmd
            .query_async(&mut conn)
            .await
            .map_err(|e| Failure::from_redis(&format!("SCAN on {}", node.addr), &e))?;
        calls += 1;
        walked += args.scan_count;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 || walked >= args.scan_limit {
            break;
        }
    }
    let filter = match type_filter {
        Some(kind) => format!("MATCH {pattern} TYPE {kind}"),
        None => format!("MATCH {pattern}"),
    };
    Ok((
        keys,
        PassReport {
            node: node.addr.clone(),
            filter,
            calls,
            walked,
            complete: cursor == 0,
        },
    ))
}
