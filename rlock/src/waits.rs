//! Reading the library's opt-in wait registry (`ClientBuilder::wait_registry`): a lock's
//! waiters (`redis_rlock_waiters:{K}`, a sorted set of owner → expiry on the server's
//! clock) and what each owner waits for (`redis_rlock_waiting:{<owner>}`, a hash of `lock`,
//! `since` and `client`). Redisson writes neither; a lock without them may still have
//! waiters that only subscribe.

use redis::Value;
use redis_rlock::protocol::layout::{Derived, WAITING_RECORD};

use crate::args::ScanArgs;
use crate::connect::Nodes;
use crate::exit::Failure;
use crate::inspect::Batch;
use crate::keys::{self, Key};
use crate::model::RegisteredWaiter;
use crate::reply::{as_int, as_text};
use crate::scan::{ScanReport, Walk};

/// How many registered waiters `show` lists.
pub const WAITERS_SHOWN: isize = 1000;

/// One registered wait: who waits for which lock key, since when and from which client.
#[derive(Debug, Clone)]
pub struct Wait {
    /// The waiting owner field, `<client id>:<task id>`.
    pub owner: String,
    /// The key of the lock it waits for.
    pub lock: Key,
    /// When the wait began, ms on the server's clock.
    pub since_ms: Option<i64>,
    /// The waiter's client name.
    pub client: Option<String>,
}

/// The owner field a record's key names: `redis_rlock_waiting:{<owner>}`.
fn owner_of_record(key: &[u8]) -> Option<String> {
    let rest = key
        .strip_prefix(WAITING_RECORD.as_bytes())?
        .strip_prefix(b":")?;
    let owner = match rest.strip_prefix(b"{") {
        Some(braced) => braced.strip_suffix(b"}")?,
        None => rest,
    };
    String::from_utf8(owner.to_vec()).ok()
}

/// The record key of `owner`.
fn record_of(owner: &[u8]) -> Key {
    redis_rlock::protocol::layout::waiting_record(&String::from_utf8_lossy(owner)).into_bytes()
}

/// Reads the records at `keys` (`HMGET lock since client`), one pipeline per node; a
/// record gone meanwhile, or not a registry's, is left out.
async fn read_records(nodes: &Nodes, keys: &[Key]) -> Result<Vec<Wait>, Failure> {
    let mut batch = Batch::default();
    let asked: Vec<usize> = keys
        .iter()
        .map(|key| {
            let cmd = redis::cmd("HMGET")
                .arg(key)
                .arg("lock")
                .arg("since")
                .arg("client")
                .clone();
            batch.push(nodes, key, "hmget", &cmd)
        })
        .collect();
    let replies = batch.run(nodes).await?;
    Ok(keys
        .iter()
        .zip(asked)
        .filter_map(|(key, i)| {
            let fields = replies[i].as_sequence()?;
            let lock = match fields.first()? {
                Value::BulkString(lock) => lock.clone(),
                _ => return None,
            };
            Some(Wait {
                owner: owner_of_record(key)?,
                lock,
                since_ms: fields.get(1).and_then(as_int),
                client: fields.get(2).and_then(as_text),
            })
        })
        .collect())
}

/// The registered waiters of the lock at `key`, whose entries are live on the clock `now`
/// of the lock's node, longest waiting first.
///
/// # Errors
/// When the node does not answer or refuses a read.
pub async fn waiters_of(
    nodes: &Nodes,
    key: &[u8],
    now: i64,
) -> Result<Vec<RegisteredWaiter>, Failure> {
    let set = keys::derived(Derived::Waiters, key);
    let mut batch = Batch::default();
    let range = batch.push(
        nodes,
        &set,
        "zrangebyscore",
        redis::cmd("ZRANGEBYSCORE")
            .arg(&set)
            .arg(format!("({now}"))
            .arg("+inf")
            .arg("LIMIT")
            .arg(0)
            .arg(WAITERS_SHOWN),
    );
    let owners: Vec<Key> = batch.run(nodes).await?[range]
        .as_sequence()
        .unwrap_or_default()
        .iter()
        .filter_map(|owner| match owner {
            Value::BulkString(owner) => Some(owner.clone()),
            _ => None,
        })
        .collect();
    let records: Vec<Key> = owners.iter().map(|owner| record_of(owner)).collect();
    let waits = read_records(nodes, &records).await?;
    let mut waiters: Vec<RegisteredWaiter> = owners
        .iter()
        .map(|owner| {
            let owner = keys::shown(owner);
            // The record says since when, and from where, if it is of this lock still.
            let wait = waits.iter().find(|w| w.owner == owner && w.lock == key);
            let since_ms = wait.and_then(|w| w.since_ms);
            RegisteredWaiter {
                owner,
                client: wait.and_then(|w| w.client.clone()),
                since_ms,
                waited_ms: since_ms.map(|since| now - since),
            }
        })
        .collect();
    waiters.sort_by_key(|w| w.since_ms.unwrap_or(i64::MAX));
    Ok(waiters)
}

/// Every registered wait on every node (`SCAN … MATCH redis_rlock_waiting:* TYPE hash`),
/// page by page, and how far the scan got.
///
/// # Errors
/// When a node does not answer or refuses a read.
pub async fn every_wait(
    nodes: &Nodes,
    args: &ScanArgs,
) -> Result<(Vec<Wait>, ScanReport), Failure> {
    let mut waits = Vec::new();
    let mut report = ScanReport::new();
    let pattern = format!("{WAITING_RECORD}:*").into_bytes();
    for node in &nodes.nodes {
        let mut walk = Walk::new(node, pattern.clone(), Some("hash"), args);
        while let Some(page) = walk.next_page().await? {
            waits.extend(read_records(nodes, &page).await?);
        }
        report.add(walk.report());
    }
    Ok((waits, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_key_names_its_owner() {
        assert_eq!(
            owner_of_record(b"redis_rlock_waiting:{c1:7}").as_deref(),
            Some("c1:7")
        );
        assert_eq!(record_of(b"c1:7"), b"redis_rlock_waiting:{c1:7}".to_vec());
        assert_eq!(owner_of_record(b"redisson_lock_queue:{x}"), None);
    }
}
