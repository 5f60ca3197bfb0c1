//! What the inspector reports, independent of how it is printed: the `--json` output is
//! these types serialized, and the tables are made from them.

use serde::Serialize;

use crate::scan::ScanReport;

/// The kind of lock, as the Redis layout shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A lock hash and nothing else (`RLock`; also a fair lock with nobody queued, which
    /// has the same layout).
    Reentrant,
    /// A lock with a waiting queue (`FairLock`, Redisson's `RFairLock`).
    Fair,
    /// A lock with a fencing token counter (`FencedLock`, Redisson's `RFencedLock`).
    Fenced,
    /// Redisson's `RReadWriteLock`: a hash with a `mode` field.
    ReadWrite,
}

impl Kind {
    /// The name printed in tables.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Reentrant => "reentrant",
            Kind::Fair => "fair",
            Kind::Fenced => "fenced",
            Kind::ReadWrite => "read-write",
        }
    }
}

/// One owner of a lock: a hash field `<client id>:<task id>` and its re-entry count.
#[derive(Debug, Clone, Serialize)]
pub struct Holder {
    /// The client's UUID (the library's `Client::id`, Redisson's connection manager id).
    pub client_id: String,
    /// The tokio task id (library) or Java thread id (Redisson).
    pub task_id: String,
    /// How many times it holds the lock (re-entry count).
    pub count: i64,
    /// For a read-write lock, `read` or `write`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<&'static str>,
}

impl Holder {
    /// The owner field as the lock hash stores it: `<client id>:<task id>`, with `:write`
    /// after it for a read-write lock's writer.
    pub fn field(&self) -> String {
        let owner = format!("{}:{}", self.client_id, self.task_id);
        match self.mode {
            Some("write") => redis_rlock::protocol::layout::write_owner(&owner),
            _ => owner,
        }
    }
}

/// One lock, as `list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct LockView {
    /// The name, without the key prefix: what `show` and `unlock` take (a name that is not
    /// UTF-8 is printed with its other bytes as `\xHH`, and only `list` and `leaks` show it).
    pub name: String,
    /// The Redis key of the lock hash (as [`shown`](crate::keys::shown): escaped when it
    /// is not UTF-8).
    pub key: String,
    /// The key as Redis stores it.
    #[serde(skip)]
    pub raw_key: crate::keys::Key,
    /// The kind.
    pub kind: Kind,
    /// Whether anyone holds it (the hash exists).
    pub held: bool,
    /// The holders, in the hash's order.
    pub holders: Vec<Holder>,
    /// Set when the hash had more fields than one read returns (only the first are shown).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub holders_truncated: bool,
    /// For a read-write lock, the hash's `mode` (`read` or `write`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The lock's remaining lease in ms (PTTL): -1 when it has none (it never expires),
    /// `null` when it is not held.
    pub pttl_ms: Option<i64>,
    /// For a fair lock: how many waiters are queued.
    pub queue_length: Option<u64>,
    /// For a fair lock: how many queued waiters are past their deadline (on the server's
    /// clock); they are dropped by the next fair-lock call.
    pub stale_waiters: Option<u64>,
    /// For a fenced lock: the last token drawn.
    pub fencing_token: Option<u64>,
    /// The node (`host:port`) that holds the lock key.
    pub node: String,
}

/// `list`'s output.
#[derive(Debug, Serialize)]
pub struct Listing {
    /// The locks found, by name, at most `--limit`.
    pub locks: Vec<LockView>,
    /// How many matching locks were found in all (more than `locks` when `--limit` cut).
    pub total: usize,
    /// Whether `--limit` left some out.
    pub truncated: bool,
    /// Semaphores and latches that show: expirable semaphores, and any with waiters (a
    /// plain semaphore or latch is a bare number, which nothing else tells from a counter:
    /// `show NAME` gives one by name).
    pub synchronizers: Vec<SyncDetail>,
    /// How far the scan got.
    pub scan: ScanReport,
}

/// A waiter in a fair lock's queue.
#[derive(Debug, Clone, Serialize)]
pub struct Waiter {
    /// 1 for the head of the queue.
    pub position: usize,
    /// The owner field: `<client id>:<task id>`.
    pub owner: String,
    /// Its deadline (ms since the epoch; on the server clock for this library's clients, on
    /// the client's for Redisson's): past it, the waiter is dropped from the queue.
    pub deadline_ms: Option<i64>,
    /// Deadline minus the server's `TIME`: negative when it is past.
    pub remaining_ms: Option<i64>,
    /// Clients subscribed to its own channel (`redisson_lock__channel:{K}:<owner>`): 0 for
    /// a waiter whose process is gone.
    pub subscribers: i64,
}

/// Subscribers of one channel.
#[derive(Debug, Clone, Serialize)]
pub struct ChannelSubscribers {
    /// The channel.
    pub channel: String,
    /// The sum over the nodes asked.
    pub total: i64,
    /// Per node: `PUBSUB NUMSUB` counts the subscribers of the node asked only.
    pub per_node: Vec<NodeCount>,
}

/// A count on one node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeCount {
    /// `host:port`.
    pub node: String,
    /// The count there.
    pub count: i64,
}

/// `show`'s output: one lock in full.
#[derive(Debug, Serialize)]
pub struct LockDetail {
    /// What `list` shows.
    #[serde(flatten)]
    pub lock: LockView,
    /// The server's clock (`TIME` on the lock's node), ms since the epoch.
    pub server_time_ms: i64,
    /// The fair queue, head first (empty for other kinds).
    pub queue: Vec<Waiter>,
    /// Set when the queue is longer than what is shown.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub queue_truncated: bool,
    /// The waiters the library's wait registry records (clients built with
    /// `wait_registry(true)`), longest waiting first; other waiters only subscribe, and
    /// show in `subscribers`.
    pub registered_waiters: Vec<RegisteredWaiter>,
    /// The lock's unlock channel (and a read-write lock's channel): who listens.
    pub subscribers: Vec<ChannelSubscribers>,
    /// Which nodes the subscriber counts come from.
    pub subscribers_note: String,
}

/// One problem `leaks` found.
#[derive(Debug, Clone, Serialize)]
pub struct Leak {
    /// `no_ttl`, `dead_queue` or `stale_latch`.
    pub problem: &'static str,
    /// The lock's name (without the key prefix).
    pub name: String,
    /// The key at fault.
    pub key: String,
    /// The node holding it.
    pub node: String,
    /// What is wrong, in words.
    pub detail: String,
    /// The command that fixes it.
    pub fix: String,
    /// Another fix, when one fits some cases better.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alternative: Option<String>,
}

/// `leaks`' output.
#[derive(Debug, Serialize)]
pub struct LeakReport {
    /// The problems found.
    pub leaks: Vec<Leak>,
    /// How many locks were examined.
    pub locks_examined: usize,
    /// How many unlock latches were examined.
    pub latches_examined: usize,
    /// How far the scan got.
    pub scan: ScanReport,
}

/// A semaphore or a count-down latch (Redisson's `RSemaphore`, `RPermitExpirableSemaphore`,
/// `RCountDownLatch`), as `show` gives it: their layout is a string holding a number, the
/// same for all three, so the channels that have listeners and an expirable semaphore's
/// permits tell them apart, when anything does.
#[derive(Debug, Clone, Serialize)]
pub struct SyncDetail {
    /// The name, without the key prefix.
    pub name: String,
    /// The key holding the number.
    pub key: String,
    /// The node serving the key.
    pub node: String,
    /// The number: free permits of a semaphore, or a latch's count; `None` when the key is
    /// absent (an expirable semaphore's taken permits may still be there).
    pub value: Option<i64>,
    /// The key's PTTL in ms: -1 without TTL (Redisson sets none), `None` when absent.
    pub pttl_ms: Option<i64>,
    /// An expirable semaphore's taken permits (`{name}:timeout`), soonest to expire first,
    /// at most 100.
    pub permits: Vec<PermitView>,
    /// The server's clock, in ms, that the permits' expiries are read against.
    pub server_time_ms: i64,
    /// Who listens on the semaphore channel and on the latch channel.
    pub subscribers: Vec<ChannelSubscribers>,
}

/// One taken permit of an expirable semaphore.
#[derive(Debug, Clone, Serialize)]
pub struct PermitView {
    /// The permit's id: the hex of the 16 bytes stored, as Redisson shows it.
    pub id: String,
    /// When its lease ends, in ms on the server clock.
    pub expires_ms: i64,
    /// How long until then (negative: past; given back by the next call on it).
    pub remaining_ms: i64,
}

/// A waiter the library's wait registry records.
#[derive(Debug, Clone, Serialize)]
pub struct RegisteredWaiter {
    /// The owner field: `<client id>:<task id>`.
    pub owner: String,
    /// Its client's name (`ClientBuilder::client_name`; by default `<host>:<pid>`).
    pub client: Option<String>,
    /// When its wait began, ms on the server's clock.
    pub since_ms: Option<i64>,
    /// How long it has waited, by the server's clock.
    pub waited_ms: Option<i64>,
}

/// One task in a deadlock: it holds the lock the task before it waits for, and waits for
/// a lock the task after it holds.
#[derive(Debug, Clone, Serialize)]
pub struct CycleStep {
    /// The owner field: `<client id>:<task id>`.
    pub owner: String,
    /// Its client's name, as its wait recorded it.
    pub client: Option<String>,
    /// The lock it waits for (its name, without the key prefix).
    pub waits_for: String,
    /// The node of that lock.
    pub node: String,
    /// How long it has waited, by the server's clock of the node of its record.
    pub waited_ms: Option<i64>,
    /// Who holds the lock it waits for, in the cycle: the next step's owner.
    pub held_by: String,
}

/// A cycle of waits: no task in it can go on until one gives a lock up.
#[derive(Debug, Clone, Serialize)]
pub struct Deadlock {
    /// The tasks, each waiting for a lock the next one holds (the last, the first's).
    pub steps: Vec<CycleStep>,
    /// The lock to free to break the cycle: the one held by the task whose wait began
    /// last (the other waits have lasted longer).
    pub break_lock: String,
    /// The command that frees it (its holder is told the lock was lost, by its watchdog).
    pub fix: String,
}

/// `deadlocks`' output.
#[derive(Debug, Serialize)]
pub struct DeadlockReport {
    /// The cycles found.
    pub deadlocks: Vec<Deadlock>,
    /// How many registered waits were read.
    pub waits_examined: usize,
    /// How many locks were read for their holders.
    pub locks_examined: usize,
    /// How far the scan got.
    pub scan: ScanReport,
}
