//! Reading locks: from the Redisson layout in Redis to the [`model`](crate::model). Every
//! command is routed to the master of its key's slot, and the commands for many locks go
//! out as one pipeline per node, so that `list` costs a few round trips whatever the
//! number of locks.
//!
//! Reads only, each bounded: a hash is read with one `HSCAN … COUNT 256` (a lock hash has a
//! few fields; a big non-lock hash costs one bounded call), a queue up to
//! [`QUEUE_SHOWN`] waiters.

use redis::{Cmd, Value};
use redis_rlock::protocol::layout::{self, parse_owner, Derived};

use crate::acl;
use crate::connect::Nodes;
use crate::exit::Failure;
use crate::keys::{self, shown, Key};
use crate::model::{Holder, Kind, LockDetail, LockView, PermitView, SyncDetail, Waiter};
use crate::reply::{as_int, as_text};
use crate::subscribers::subscribers;

/// How many fields one read of a hash asks for.
const HASH_FIELDS: u64 = 256;
/// How many waiters of a fair queue `show` lists.
pub const QUEUE_SHOWN: usize = 1000;
/// How many commands go into one pipeline.
pub(crate) const PIPELINE: usize = 512;

/// What a lock key holds.
#[derive(Debug)]
pub enum Read {
    /// A lock (or a free fair or fenced lock that has a queue or a counter).
    Lock(LockView),
    /// Something else: a hash of other data, or another type (named).
    NotALock(String),
    /// Nothing: no hash, no queue, no counter.
    Absent,
}

/// One command of a [`Batch`]: the node of its key, its ACL name and key (to name a
/// refusal), and the command.
struct Queued {
    node: usize,
    acl: &'static str,
    key: Key,
    cmd: Cmd,
}

/// Commands routed by key, run as one pipeline per node.
#[derive(Default)]
pub struct Batch {
    commands: Vec<Queued>,
}

impl Batch {
    /// Adds `cmd` (whose ACL name is `acl`, such as `hscan`) for the node of `key`;
    /// returns its index in the results.
    pub fn push(&mut self, nodes: &Nodes, key: &[u8], acl: &'static str, cmd: &Cmd) -> usize {
        self.commands.push(Queued {
            node: nodes.of_key(key),
            acl,
            key: key.to_vec(),
            cmd: cmd.clone(),
        });
        self.commands.len() - 1
    }

    /// Runs everything; one reply per command, in order. A command's error reply is a
    /// `Value::ServerError` in its place (a key of another type is an answer too).
    ///
    /// # Errors
    /// When a node does not answer, or answers an error other than `WRONGTYPE` (a refusal
    /// is named with the ACL rule it needs).
    pub async fn run(self, nodes: &Nodes) -> Result<Vec<Value>, Failure> {
        let mut replies = vec![Value::Nil; self.commands.len()];
        for (index, node) in nodes.nodes.iter().enumerate() {
            let mine: Vec<(usize, &Queued)> = self
                .commands
                .iter()
                .enumerate()
                .filter(|(_, queued)| queued.node == index)
                .collect();
            for chunk in mine.chunks(PIPELINE) {
                let mut pipe = redis::pipe();
                pipe.ignore_errors();
                for (_, queued) in chunk {
                    pipe.add_command(queued.cmd.clone());
                }
                let answers: Vec<Value> = pipe
                    .query_async(&mut node.conn.clone())
                    .await
                    .map_err(|e| Failure::from_redis(&format!("reading from {}", node.addr), &e))?;
                for ((i, queued), answer) in chunk.iter().zip(answers) {
                    // WRONGTYPE is an answer (a derived name holding other data); any other
                    // error, such as a missing ACL permission, must not read as "empty".
                    if let Value::ServerError(error) = &answer {
                        if error.code() != "WRONGTYPE" {
                            let detail = error.details().unwrap_or_default();
                            let object = Some(queued.key.as_slice()).filter(|k| !k.is_empty());
                            return Err(acl::refused(
                                &node.addr,
                                queued.acl,
                                object,
                                error.code(),
                                detail,
                            )
                            .unwrap_or_else(|| {
                                Failure::redis(format!(
                                    "{} answered {}: {detail}",
                                    node.addr,
                                    error.code(),
                                ))
                            }));
                        }
                    }
                    replies[*i] = answer;
                }
            }
        }
        Ok(replies)
    }
}

/// The indices of one lock's replies in a batch.
struct LockReads {
    kind: usize,
    pttl: usize,
    hash: usize,
    queue_len: usize,
    waiters: usize,
    stale: usize,
    token: usize,
}

/// Of the hashes at `keys`, those whose first fields are a lock's (owners, or a read-write
/// lock's `mode`): one `HSCAN` each, in one pipeline per node. Most hashes of a keyspace are
/// other data, and cost this one read.
///
/// # Errors
/// When a node does not answer or refuses the read.
pub async fn owner_hashes(nodes: &Nodes, keys: Vec<Key>) -> Result<Vec<Key>, Failure> {
    let mut batch = Batch::default();
    for key in &keys {
        batch.push(nodes, key, "hscan", &hscan(key));
    }
    let replies = batch.run(nodes).await?;
    Ok(keys
        .into_iter()
        .zip(replies)
        .filter(|(_, reply)| holders(&hash_fields(reply).0).is_some())
        .map(|(key, _)| key)
        .collect())
}

/// One bounded read of a hash's fields.
fn hscan(key: &[u8]) -> Cmd {
    let mut cmd = redis::cmd("HSCAN");
    cmd.arg(key).arg(0).arg("COUNT").arg(HASH_FIELDS);
    cmd
}

/// Reads the locks at `keys` (full Redis keys), one [`Read`] each, in order. `now` is each
/// node's clock ([`Nodes::server_times`]), against which fair waiters are stale.
///
/// # Errors
/// When a node does not answer.
pub async fn read_locks(
    nodes: &Nodes,
    key_prefix: &str,
    keys: &[Key],
    now: &[i64],
) -> Result<Vec<Read>, Failure> {
    let mut batch = Batch::default();
    let mut plan = Vec::with_capacity(keys.len());
    for key in keys {
        let queue = keys::derived(Derived::FairQueue, key);
        let timeouts = keys::derived(Derived::FairTimeouts, key);
        let token = keys::derived(Derived::FencingToken, key);
        let mut stale = redis::cmd("ZCOUNT");
        stale
            .arg(&timeouts)
            .arg("-inf")
            .arg(now[nodes.of_key(&timeouts)]);
        plan.push(LockReads {
            kind: batch.push(nodes, key, "type", redis::cmd("TYPE").arg(key)),
            pttl: batch.push(nodes, key, "pttl", redis::cmd("PTTL").arg(key)),
            hash: batch.push(nodes, key, "hscan", &hscan(key)),
            queue_len: batch.push(nodes, &queue, "llen", redis::cmd("LLEN").arg(&queue)),
            waiters: batch.push(
                nodes,
                &timeouts,
                "zcard",
                redis::cmd("ZCARD").arg(&timeouts),
            ),
            stale: batch.push(nodes, &timeouts, "zcount", &stale),
            token: batch.push(nodes, &token, "get", redis::cmd("GET").arg(&token)),
        });
    }
    let replies = batch.run(nodes).await?;
    Ok(keys
        .iter()
        .zip(plan)
        .map(|(key, reads)| interpret(nodes, key_prefix, key, &reads, &replies))
        .collect())
}

/// One lock's replies, read.
fn interpret(
    nodes: &Nodes,
    key_prefix: &str,
    key: &[u8],
    reads: &LockReads,
    replies: &[Value],
) -> Read {
    let kind = as_text(&replies[reads.kind]).unwrap_or_default();
    // A queue, a deadline set or a counter of the wrong type answers an error: not a lock's.
    let queue_length = as_int(&replies[reads.queue_len]).unwrap_or(0).max(0) as u64;
    let waiters = as_int(&replies[reads.waiters]).unwrap_or(0).max(0) as u64;
    let stale = as_int(&replies[reads.stale]).unwrap_or(0).max(0) as u64;
    let token = as_text(&replies[reads.token]).and_then(|t| t.parse::<u64>().ok());
    let fair = queue_length > 0 || waiters > 0;
    let name = shown(key.strip_prefix(key_prefix.as_bytes()).unwrap_or(key));
    let mut view = LockView {
        name,
        key: shown(key),
        raw_key: key.to_vec(),
        kind: if fair {
            Kind::Fair
        } else if token.is_some() {
            Kind::Fenced
        } else {
            Kind::Reentrant
        },
        held: false,
        holders: Vec::new(),
        holders_truncated: false,
        mode: None,
        pttl_ms: None,
        queue_length: fair.then_some(queue_length),
        stale_waiters: fair.then_some(stale),
        fencing_token: token,
        node: nodes.nodes[nodes.of_key(key)].addr.clone(),
    };
    match kind.as_str() {
        "none" if fair || token.is_some() => Read::Lock(view),
        "none" => Read::Absent,
        "hash" => {
            let (fields, truncated) = hash_fields(&replies[reads.hash]);
            match holders(&fields) {
                Some((mode, holders)) => {
                    if mode.is_some() {
                        view.kind = Kind::ReadWrite;
                        view.queue_length = None;
                        view.stale_waiters = None;
                    }
                    view.mode = mode;
                    view.held = true;
                    view.holders = holders;
                    view.holders_truncated = truncated;
                    view.pttl_ms = as_int(&replies[reads.pttl]);
                    Read::Lock(view)
                }
                None => Read::NotALock("a hash that is not a lock".to_string()),
            }
        }
        "" => Read::NotALock("unreadable".to_string()),
        other => Read::NotALock(format!("a {other}")),
    }
}

/// The fields of an `HSCAN` reply, and whether the hash has more.
fn hash_fields(reply: &Value) -> (Vec<(String, String)>, bool) {
    let Some([cursor, items]) = reply
        .as_sequence()
        .and_then(|s| <&[Value; 2]>::try_from(s).ok())
    else {
        return (Vec::new(), false);
    };
    let more = as_text(cursor).is_some_and(|c| c != "0");
    let items = items.as_sequence().unwrap_or_default();
    let fields = items
        .chunks(2)
        .filter_map(|pair| match pair {
            [field, value] => Some((as_text(field)?, as_text(value)?)),
            _ => None,
        })
        .collect();
    (fields, more)
}

/// The holders of a lock hash, with its `mode` for a read-write lock; `None` when the hash
/// is not a lock (a field that is no owner, a count that is no integer).
fn holders(fields: &[(String, String)]) -> Option<(Option<String>, Vec<Holder>)> {
    let mode = fields
        .iter()
        .find(|(field, _)| field == "mode")
        .map(|(_, value)| value.clone());
    if let Some(mode) = &mode {
        if mode != "read" && mode != "write" {
            return None;
        }
    }
    let mut holders = Vec::with_capacity(fields.len());
    for (field, value) in fields {
        if field == "mode" {
            continue;
        }
        let count: i64 = value.parse().ok()?;
        let (owner, lock_mode) = match (&mode, field.strip_suffix(layout::WRITE_SUFFIX)) {
            (Some(_), Some(owner)) => (owner, Some("write")),
            (Some(_), None) => (field.as_str(), Some("read")),
            (None, _) => (field.as_str(), None),
        };
        let (client_id, task_id) = parse_owner(owner)?;
        holders.push(Holder {
            client_id: client_id.to_string(),
            task_id: task_id.to_string(),
            count,
            mode: lock_mode,
        });
    }
    if holders.is_empty() && mode.is_none() {
        return None;
    }
    Some((mode, holders))
}

/// One lock in full, for `show`: its [`LockView`], the fair queue in order with deadlines
/// against the server clock, and the subscribers of its channels on every master.
///
/// # Errors
/// When a node does not answer; `Ok(Err(read))` when there is no lock (absent, or not a
/// lock).
pub async fn read_detail(
    nodes: &Nodes,
    key_prefix: &str,
    name: &str,
) -> Result<Result<LockDetail, Read>, Failure> {
    let key = format!("{key_prefix}{name}").into_bytes();
    let now = nodes.server_times().await?;
    let read = read_locks(nodes, key_prefix, std::slice::from_ref(&key), &now)
        .await?
        .pop()
        .unwrap_or(Read::Absent);
    let lock = match read {
        Read::Lock(lock) => lock,
        other => return Ok(Err(other)),
    };
    let server_time_ms = now[nodes.of_key(&key)];

    let mut queue = Vec::new();
    let mut queue_truncated = false;
    if lock.kind == Kind::Fair {
        let list = keys::derived(Derived::FairQueue, &key);
        let timeouts = keys::derived(Derived::FairTimeouts, &key);
        let mut batch = Batch::default();
        let range = batch.push(
            nodes,
            &list,
            "lrange",
            redis::cmd("LRANGE")
                .arg(&list)
                .arg(0)
                .arg(QUEUE_SHOWN as i64 - 1),
        );
        let owners: Vec<Key> = batch
            .run(nodes)
            .await?
            .get(range)
            .and_then(Value::as_sequence)
            .unwrap_or_default()
            .iter()
            .filter_map(|owner| match owner {
                Value::BulkString(bytes) => Some(bytes.clone()),
                _ => None,
            })
            .collect();
        queue_truncated = lock.queue_length.unwrap_or(0) > owners.len() as u64;
        if !owners.is_empty() {
            let mut batch = Batch::default();
            let deadlines = batch.push(
                nodes,
                &timeouts,
                "zmscore",
                redis::cmd("ZMSCORE").arg(&timeouts).arg(&owners),
            );
            let replies = batch.run(nodes).await?;
            let scores = replies[deadlines]
                .as_sequence()
                .unwrap_or_default()
                .to_vec();
            let channels: Vec<Key> = owners
                .iter()
                .map(|owner| keys::fair_waiter_channel(&key, owner))
                .collect();
            let counts = subscribers(nodes, &channels).await?;
            let deadline_now = now[nodes.of_key(&timeouts)];
            for (i, owner) in owners.iter().enumerate() {
                let deadline = scores.get(i).and_then(score);
                queue.push(Waiter {
                    position: i + 1,
                    owner: shown(owner),
                    deadline_ms: deadline,
                    remaining_ms: deadline.map(|d| d - deadline_now),
                    subscribers: counts.get(i).map_or(0, |c| c.total),
                });
            }
        }
    }

    let mut channels = vec![keys::derived(Derived::UnlockChannel, &key)];
    if lock.kind == Kind::ReadWrite {
        channels.push(keys::derived(Derived::ReadWriteChannel, &key));
    }
    let subscribers = subscribers(nodes, &channels).await?;
    let registered_waiters = crate::waits::waiters_of(nodes, &key, server_time_ms).await?;
    let subscribers_note = if nodes.cluster {
        "PUBSUB NUMSUB and SHARDNUMSUB count the subscribers of the node asked only: every \
         master was asked and the counts added; replicas were not asked"
            .to_string()
    } else {
        format!("subscribers on {}", nodes.nodes[0].addr)
    };
    Ok(Ok(LockDetail {
        lock,
        server_time_ms,
        queue,
        queue_truncated,
        registered_waiters,
        subscribers,
        subscribers_note,
    }))
}

/// The semaphore or latch at `key` (the full key: see [`SyncDetail`]); `None` when its key
/// holds no number and it has no expirable permits.
///
/// # Errors
/// When Redis cannot be reached or refuses a read.
pub async fn read_synchronizer(
    nodes: &Nodes,
    key_prefix: &str,
    key: &[u8],
) -> Result<Option<SyncDetail>, Failure> {
    // Redisson's `suffixName(name, "timeout")`, and its channels: in the key's slot.
    let timeouts = keys::permit_timeouts(key);
    let mut batch = Batch::default();
    let value = batch.push(nodes, key, "get", redis::cmd("GET").arg(key));
    let pttl = batch.push(nodes, key, "pttl", redis::cmd("PTTL").arg(key));
    let permits = batch.push(
        nodes,
        &timeouts,
        "zrange",
        redis::cmd("ZRANGE")
            .arg(&timeouts)
            .arg(0)
            .arg(99)
            .arg("WITHSCORES"),
    );
    let replies = batch.run(nodes).await?;
    let number = as_text(&replies[value]).and_then(|text| text.parse::<i64>().ok());
    let taken: Vec<(String, i64)> = match &replies[permits] {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [Value::BulkString(id), expiry] => Some((hex(id), score(expiry)?)),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if number.is_none() && taken.is_empty() {
        return Ok(None);
    }
    let node = nodes.of_key(key);
    let now = nodes.server_times().await?[node];
    let channels = [
        keys::derived(Derived::SemaphoreChannel, key),
        keys::latch_channel(key),
    ];
    Ok(Some(SyncDetail {
        name: shown(key.strip_prefix(key_prefix.as_bytes()).unwrap_or(key)),
        key: shown(key),
        node: nodes.nodes[node].addr.clone(),
        value: number,
        pttl_ms: as_int(&replies[pttl]).filter(|&ms| ms != -2),
        permits: taken
            .into_iter()
            .map(|(id, expires_ms)| PermitView {
                id,
                expires_ms,
                remaining_ms: expires_ms - now,
            })
            .collect(),
        server_time_ms: now,
        subscribers: subscribers(nodes, &channels).await?,
    }))
}

/// Bytes as lowercase hex: an expirable permit's id, as Redisson shows it.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A zset score as integer ms.
fn score(value: &Value) -> Option<i64> {
    match value {
        Value::Double(d) => Some(*d as i64),
        other => as_text(other)
            .and_then(|t| t.parse::<f64>().ok())
            .map(|d| d as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID: &str = "3f2b8c1e-1d2a-4c4b-9f00-0123456789ab";

    fn fields(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(f, v)| (f.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn lock_hashes_give_holders() {
        let (mode, holders) = holders(&fields(&[(&format!("{UUID}:7"), "2")])).unwrap();
        assert_eq!(mode, None);
        assert_eq!((holders[0].task_id.as_str(), holders[0].count), ("7", 2));
    }

    #[test]
    fn read_write_locks_are_recognised() {
        let write = format!("{UUID}:1:write");
        let (mode, holders) = holders(&fields(&[("mode", "write"), (&write, "1")])).unwrap();
        assert_eq!(mode.as_deref(), Some("write"));
        assert_eq!(holders[0].mode, Some("write"));
    }

    #[test]
    fn other_hashes_are_not_locks() {
        assert!(holders(&fields(&[("name", "alice")])).is_none());
        assert!(holders(&fields(&[(&format!("{UUID}:7"), "x")])).is_none());
        assert!(holders(&fields(&[("mode", "fast")])).is_none());
    }
}
