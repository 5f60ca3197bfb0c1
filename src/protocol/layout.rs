//! Redisson's layout of locks and synchronizers in Redis, as functions: from a lock's key to
//! the names of its keys and channels, the shape of an owner field, and back from a key a
//! `SCAN` found to the lock it belongs to.
//!
//! This crate names everything it writes with this module, and the `rlock` inspector and the
//! Redisson interop suite read with it, so a tool of your own that looks at locks in Redis
//! (a dashboard, a cleanup job) can name them as Java and Rust clients do.
//!
//! A lock's *key* is the client's [`key_prefix`](crate::ClientBuilder::key_prefix) followed
//! by the lock's name; every other name derives from the key. Redisson derives them with
//! [`RedissonObject.prefixName` and `suffixName`][redisson-object], here [`prefix_name`] and
//! [`suffix_name`]: the key goes in braces, a hash tag, so that a Redis Cluster puts every
//! name of a lock in the key's slot; a key that has a `{` already keeps its own tag and is
//! used as it is. What each name holds is in the
//! [`protocol`](super#wire-layout-redisson-compatible) docs.
//!
//! ```
//! use redis_rlock::protocol::layout::{self, Derived};
//!
//! assert_eq!(Derived::UnlockChannel.of("jobs"), "redisson_lock__channel:{jobs}");
//! assert_eq!(Derived::FairQueue.of("{user42}:cart"), "redisson_lock_queue:{user42}:cart");
//! assert_eq!(layout::fair_waiter_channel("jobs", "c1:7"), "redisson_lock__channel:{jobs}:c1:7");
//! // And back, from a key a `SCAN` found: the lock `jobs`, or the lock `{jobs}`.
//! assert_eq!(
//!     layout::parse_derived("redisson_lock_queue:{jobs}"),
//!     Some((Derived::FairQueue, vec!["jobs".to_string(), "{jobs}".to_string()]))
//! );
//! ```
//!
//! [redisson-object]: https://github.com/redisson/redisson/blob/redisson-3.52.0/redisson/src/main/java/org/redisson/RedissonObject.java

/// Payload published on a lock's unlock channel when the lock becomes free (Redisson's
/// `LockPubSub.UNLOCK_MESSAGE`): wakes one waiter.
pub const UNLOCK_MESSAGE: &str = "0";

/// Payload a read-write lock's write unlock publishes (Redisson's
/// `LockPubSub.READ_UNLOCK_MESSAGE`): wakes every waiter, so that all the readers waiting
/// behind the writer come in together.
pub const READ_UNLOCK_MESSAGE: &str = "1";

/// The suffix of a write lock's owner field, `<client-uuid>:<task-id>:write` (Redisson's
/// `RedissonWriteLock.getLockName`); see [`write_owner`].
pub const WRITE_SUFFIX: &str = ":write";

/// The prefix of a count-down latch's channel, `redisson_countdownlatch__channel__{<key>}`
/// (see [`latch_channel`]).
pub const LATCH_CHANNEL: &str = "redisson_countdownlatch__channel__";

/// A name derived from a key by [`prefix_name`]: `<prefix>:{<key>}`, or `<prefix>:<key>`
/// when the key has a `{`.
///
/// ```
/// use redis_rlock::protocol::layout::Derived;
///
/// assert_eq!(Derived::FencingToken.of("order:7"), "redisson_lock_token:{order:7}");
/// assert_eq!(Derived::FencingToken.prefix(), "redisson_lock_token");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Derived {
    /// `redisson_lock_queue:{<key>}`: a fair lock's waiting queue, a list of owner fields,
    /// head first.
    FairQueue,
    /// `redisson_lock_timeout:{<key>}`: a fair lock's waiter deadlines, a sorted set of
    /// owner field → ms on the Redis server's clock.
    FairTimeouts,
    /// `redisson_lock_token:{<key>}`: a fenced lock's token counter, a string with no
    /// expiry.
    FencingToken,
    /// `redisson_unlock_latch:{<key>}`: the prefix of a request's latch key, which adds
    /// `:<request id>` (32 hex digits): Redisson's unlocks write one, and so do a Redis
    /// Cluster or Sentinel client's semaphore and latch count changes here; this crate's lock releases
    /// write none.
    UnlockLatch,
    /// `redisson_lock__channel:{<key>}`: where a lock's unlocks are announced; a fair
    /// lock's waiter has its own, see [`fair_waiter_channel`].
    UnlockChannel,
    /// `redisson_rwlock:{<key>}`: where a read-write lock's unlocks are announced.
    ReadWriteChannel,
    /// `redisson_sc:{<key>}`: where both kinds of semaphore announce permits given back.
    SemaphoreChannel,
    /// `redis_rlock_fence:{<key>}`: the highest fencing token a
    /// [`fenced_set`](crate::Client::fenced_set) to the resource `<key>` accepted. This
    /// crate's own; Redisson has none.
    Fence,
    /// `redis_rlock_waiters:{<key>}`: with the [wait registry](crate::ClientBuilder::wait_registry)
    /// on, who waits for the lock at `<key>`: a sorted set of owner field → when the entry
    /// lapses unless refreshed, ms on the Redis server's clock (its waiter refreshes it
    /// every third of that). The key expires with its last entry. This crate's own;
    /// Redisson neither writes nor reads it.
    Waiters,
}

impl Derived {
    /// Every derived key, found by a `SCAN`, that [`parse_derived`] reads back.
    const SCANNED: [Derived; 4] = [
        Derived::FairQueue,
        Derived::FairTimeouts,
        Derived::FencingToken,
        Derived::UnlockLatch,
    ];

    /// The prefix of the name, such as `redisson_lock_queue`.
    pub const fn prefix(self) -> &'static str {
        match self {
            Derived::FairQueue => "redisson_lock_queue",
            Derived::FairTimeouts => "redisson_lock_timeout",
            Derived::FencingToken => "redisson_lock_token",
            Derived::UnlockLatch => "redisson_unlock_latch",
            Derived::UnlockChannel => "redisson_lock__channel",
            Derived::ReadWriteChannel => "redisson_rwlock",
            Derived::SemaphoreChannel => "redisson_sc",
            Derived::Fence => "redis_rlock_fence",
            Derived::Waiters => "redis_rlock_waiters",
        }
    }

    /// The name of the lock (or semaphore, or resource) at `key`: [`prefix_name`] of
    /// [`prefix`](Derived::prefix) and `key`.
    pub fn of(self, key: &str) -> String {
        prefix_name(self.prefix(), key)
    }
}

/// Redisson's `RedissonObject.prefixName`: `<prefix>:{<key>}`, or `<prefix>:<key>` when the
/// key already has a `{`, so that the name stays in the key's cluster slot.
///
/// ```
/// use redis_rlock::protocol::layout::prefix_name;
///
/// assert_eq!(prefix_name("redisson_sc", "pool"), "redisson_sc:{pool}");
/// assert_eq!(prefix_name("redisson_sc", "{tenant}:pool"), "redisson_sc:{tenant}:pool");
/// ```
pub fn prefix_name(prefix: &str, key: &str) -> String {
    if key.contains('{') {
        format!("{prefix}:{key}")
    } else {
        format!("{prefix}:{{{key}}}")
    }
}

/// Redisson's `RedissonObject.suffixName`: `{<key>}:<suffix>`, or `<key>:<suffix>` when the
/// key already has a `{`.
pub fn suffix_name(key: &str, suffix: &str) -> String {
    format!("{}:{suffix}", hash_tagged(key))
}

/// [`suffix_name`] without the suffix: `{<key>}`, or the key as it is when it has a `{`. A
/// read-write lock's scripts build the timeout keys of read holds from it.
pub fn hash_tagged(key: &str) -> String {
    if key.contains('{') {
        key.to_string()
    } else {
        format!("{{{key}}}")
    }
}

/// The prefix of [`waiting_record`]'s key.
pub const WAITING_RECORD: &str = "redis_rlock_waiting";

/// With the [wait registry](crate::ClientBuilder::wait_registry) on, the key of what the
/// owner `owner` (an owner field, `<client id>:<task id>`) waits for:
/// `redis_rlock_waiting:{<owner>}`, a hash of `lock` (the lock's key), `since` (when the
/// wait began, ms on the server's clock) and `client` (the waiter's
/// [`client_name`](crate::ClientBuilder::client_name)). It expires unless refreshed, as the
/// owner's entry in [`Derived::Waiters`] does, and goes when the wait ends. Read beside a
/// lock's holders, these records make the graph of who waits for whom that `rlock
/// deadlocks` walks. This crate's own.
///
/// ```
/// use redis_rlock::protocol::layout::waiting_record;
///
/// assert_eq!(waiting_record("c1:7"), "redis_rlock_waiting:{c1:7}");
/// ```
pub fn waiting_record(owner: &str) -> String {
    prefix_name(WAITING_RECORD, owner)
}

/// The channel on which a fair lock tells the waiter `owner` (its owner field) that it may
/// take the lock: the unlock channel followed by `:<owner>` (what `RedissonFairLock.subscribe`
/// subscribes to), so that an unlock wakes the head of the queue alone.
pub fn fair_waiter_channel(key: &str, owner: &str) -> String {
    format!("{}:{owner}", Derived::UnlockChannel.of(key))
}

/// The prefix of the timeout keys of `owner`'s read holds on the read-write lock at `key`,
/// `{<key>}:<owner>:rwlock_timeout` (Redisson's
/// `RedissonReadLock.getReadWriteTimeoutNamePrefix`); read hold `n` adds `:<n>`.
///
/// ```
/// use redis_rlock::protocol::layout::read_timeout_prefix;
///
/// assert_eq!(read_timeout_prefix("doc:7", "u:3"), "{doc:7}:u:3:rwlock_timeout");
/// ```
pub fn read_timeout_prefix(key: &str, owner: &str) -> String {
    format!("{}:{owner}:rwlock_timeout", hash_tagged(key))
}

/// The owner field of `owner` (`<client-uuid>:<task-id>`) holding a read-write lock's write
/// side: `<owner>:write`.
pub fn write_owner(owner: &str) -> String {
    format!("{owner}{WRITE_SUFFIX}")
}

/// An expirable semaphore's taken permits, a sorted set of permit id → expiry:
/// [`suffix_name`] of the key and `timeout`, `{<key>}:timeout` (the layout of Redisson
/// 3.52's `RPermitExpirableSemaphore`, which this crate keeps).
pub fn permit_timeouts(key: &str) -> String {
    suffix_name(key, "timeout")
}

/// A count-down latch's channel, `redisson_countdownlatch__channel__{<key>}`: Redisson
/// writes this one by hand, braces always added, even around a key with a tag of its own.
pub fn latch_channel(key: &str) -> String {
    format!("{LATCH_CHANNEL}{{{key}}}")
}

/// A hash field naming an owner, `<client-uuid>:<task-id>`, read back: the client's id and
/// the task's (or, for Redisson, the Java thread's). `None` for any other shape: the client
/// id is hex digits and dashes, the task id decimal. A write lock's field ends in
/// [`WRITE_SUFFIX`]: take it off first. The owner of this crate's locks is the calling task
/// or an explicit [`Owner`](crate::Owner).
///
/// ```
/// use redis_rlock::protocol::layout::parse_owner;
///
/// let field = "3f2b8c1e-1d2a-4c4b-9f00-0123456789ab:42";
/// assert_eq!(parse_owner(field), Some(("3f2b8c1e-1d2a-4c4b-9f00-0123456789ab", "42")));
/// assert_eq!(parse_owner("mode"), None);
/// ```
pub fn parse_owner(field: &str) -> Option<(&str, &str)> {
    let (client, task) = field.rsplit_once(':')?;
    let client_ok =
        !client.is_empty() && client.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    let task_ok = !task.is_empty() && task.bytes().all(|b| b.is_ascii_digit());
    (client_ok && task_ok).then_some((client, task))
}

/// A key that a `SCAN` of `redisson_*` found, read back: which of a lock's derived keys it
/// is ([`FairQueue`](Derived::FairQueue), [`FairTimeouts`](Derived::FairTimeouts),
/// [`FencingToken`](Derived::FencingToken) or an [`UnlockLatch`](Derived::UnlockLatch) with
/// its request id), and the lock keys it may belong to, most likely first. Two when the key
/// is wrapped in braces: the locks `a` and `{a}` derive the same names, and only the lock
/// hash that exists tells them apart. `None` for anything else.
pub fn parse_derived(scanned: &str) -> Option<(Derived, Vec<String>)> {
    let (kind, rest) = Derived::SCANNED.into_iter().find_map(|kind| {
        let rest = scanned.strip_prefix(kind.prefix())?.strip_prefix(':')?;
        Some((kind, rest))
    })?;
    let wrapped = if kind == Derived::UnlockLatch {
        // Redisson's request ids and this crate's are hex (16 random bytes).
        let (key, id) = rest.rsplit_once(':')?;
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        key
    } else {
        rest
    };
    if !wrapped.contains('{') {
        // `prefixName` always leaves a `{` in a derived name: not one of these.
        return None;
    }
    let mut candidates = Vec::with_capacity(2);
    if let Some(inner) = wrapped.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
        if !inner.contains('{') && !inner.is_empty() {
            candidates.push(inner.to_string());
        }
    }
    candidates.push(wrapped.to_string());
    Some((kind, candidates))
}

/// The key of the expirable semaphore whose taken permits the sorted set at `key` holds
/// (see [`permit_timeouts`]), if `key` has that shape.
pub fn parse_permit_timeouts(key: &str) -> Option<String> {
    let base = key.strip_suffix(":timeout")?;
    match base.strip_prefix('{').and_then(|b| b.strip_suffix('}')) {
        Some(name) if !name.contains('{') => Some(name.to_string()),
        _ if base.contains('{') => Some(base.to_string()),
        _ => None,
    }
}

/// The key of the semaphore or count-down latch whose channel is `channel` (a
/// [`SemaphoreChannel`](Derived::SemaphoreChannel) or a [`latch_channel`]), if it is one.
pub fn parse_sync_channel(channel: &str) -> Option<String> {
    let tagged = channel
        .strip_prefix(Derived::SemaphoreChannel.prefix())
        .and_then(|rest| rest.strip_prefix(':'))
        .or_else(|| channel.strip_prefix(LATCH_CHANNEL))?;
    let name = tagged.strip_prefix('{').and_then(|t| t.strip_suffix('}'));
    Some(name.unwrap_or(tagged).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_redisson() {
        assert_eq!(Derived::FairQueue.of("jobs"), "redisson_lock_queue:{jobs}");
        assert_eq!(
            Derived::UnlockChannel.of("{u1}:cart"),
            "redisson_lock__channel:{u1}:cart"
        );
        assert_eq!(suffix_name("gpu", "timeout"), "{gpu}:timeout");
        assert_eq!(permit_timeouts("{g}pu"), "{g}pu:timeout");
        assert_eq!(
            latch_channel("a{b"),
            "redisson_countdownlatch__channel__{a{b}"
        );
        assert_eq!(write_owner("u:7"), "u:7:write");
    }

    #[test]
    fn derived_keys_lead_back_to_their_lock() {
        assert_eq!(
            parse_derived("redisson_unlock_latch:{order:1}:00ab"),
            Some((
                Derived::UnlockLatch,
                vec!["order:1".into(), "{order:1}".into()]
            ))
        );
        assert_eq!(
            parse_derived("redisson_lock_token:{u1}:cart"),
            Some((Derived::FencingToken, vec!["{u1}:cart".into()]))
        );
        assert_eq!(parse_derived("redisson_lock_queue:plain"), None);
        assert_eq!(parse_derived("redisson_unlock_latch:{a}:zz"), None);
        assert_eq!(parse_derived("redisson_sc:{a}"), None);
        assert_eq!(parse_permit_timeouts("{gpu}:timeout"), Some("gpu".into()));
        assert_eq!(parse_permit_timeouts("{g}pu:timeout"), Some("{g}pu".into()));
        assert_eq!(parse_permit_timeouts("plain:timeout"), None);
        assert_eq!(
            parse_sync_channel("redisson_sc:{pool}"),
            Some("pool".into())
        );
        assert_eq!(
            parse_sync_channel("redisson_countdownlatch__channel__{a{b}"),
            Some("a{b".into())
        );
        assert_eq!(parse_sync_channel("redisson_scx"), None);
    }

    #[test]
    fn owner_fields_are_uuid_and_decimal() {
        let uuid = "3f2b8c1e-1d2a-4c4b-9f00-0123456789ab";
        assert_eq!(parse_owner(&format!("{uuid}:42")), Some((uuid, "42")));
        assert_eq!(parse_owner(&format!("{uuid}:write")), None);
        assert_eq!(parse_owner("user:alice"), None);
    }
}
