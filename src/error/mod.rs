//! The crate's one error type, what a lost lock reports, and how Redis' own errors are
//! classified (retry, refuse, explain): the bottom layer, which imports nothing of the
//! crate.

mod classify;
mod lost;

pub(crate) use classify::{
    channel_missing, channel_rule, is_auth_failure, is_permission_failure, is_transient,
    may_have_run, server_message,
};
pub use lost::LostReason;

use std::time::Duration;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in this crate.
///
/// A lock held by someone else is not an error: `try_lock*` return `Ok(None)` for that.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An argument was rejected before anything was sent to Redis.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The guard's lock was lost before it was released; nothing was deleted.
    #[error("lock `{name}` was lost: {reason}")]
    LockLost {
        /// The lock's key.
        name: String,
        /// Why the lock was lost.
        reason: LostReason,
        /// How long ago the guard's local validity ran out, when known.
        expired_ago: Option<Duration>,
    },

    /// An expirable permit was no longer taken when it was released: its lease ran out,
    /// or it was released by its id elsewhere, or Redis lost it (a restart, a failover).
    /// Another holder's permit is never touched. Also what
    /// [`PermitExpirableSemaphore::release_by_id`](crate::PermitExpirableSemaphore::release_by_id)
    /// answers for an id that is not taken.
    #[error("permit `{id}` of semaphore `{semaphore}` was lost: {}", lost::permit_words(*reason))]
    PermitLost {
        /// The semaphore's key.
        semaphore: String,
        /// The permit's id, in hex.
        id: String,
        /// Why: [`LostReason::Expired`] (its lease ran out) or [`LostReason::Released`]
        /// (released by id, or forgotten by Redis).
        reason: LostReason,
        /// How long ago the permit's local validity ran out, when known.
        expired_ago: Option<Duration>,
    },

    /// Redis answered with an error, or the connection failed. The message says what
    /// redis-rs said, so the error has no `source()`: printed as a chain (`anyhow`'s
    /// `{:#}`), it reads once.
    #[error("redis error: {0}")]
    Redis(redis::RedisError),

    /// No connection to Redis could be made: the address refused it, could not be reached,
    /// or did not answer in time. Nothing was sent, and a later try may succeed. The URL
    /// shows no password (`***` in its place); the message says what redis-rs said, so the
    /// error has no `source()`.
    #[error("cannot reach Redis at {url}: {error}")]
    Unreachable {
        /// The server's URL, its password replaced by `***`.
        url: String,
        /// What redis-rs said.
        error: redis::RedisError,
    },

    /// No connection could be taken from, or made by, the connection pool.
    #[error("connection pool error: {message}")]
    Pool {
        /// What the pool could not do.
        message: String,
        /// The pool's own error, when it gave one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// Too few of a lock group's nodes could be reached to take the lock: a
    /// [`RedLock`](crate::RedLock) needs a majority, a [`MultiLock`](crate::MultiLock) all.
    #[error("{reachable} of {total} nodes reachable, {needed} needed")]
    QuorumUnreachable {
        /// Nodes that answered in the last attempt.
        reachable: usize,
        /// Nodes the lock must be held on.
        needed: usize,
        /// Nodes in the group.
        total: usize,
        /// What the last unreachable node failed with.
        #[source]
        last_error: Option<Box<Error>>,
    },

    /// With [replica sync](crate::ClientBuilder::replica_sync) on, no replica acknowledged a
    /// lock write within the timeout while replicas were connected: the write was rolled
    /// back (an acquire) or not counted (a renewal).
    #[error("no replica acknowledged the lock write within {timeout:?} ({connected} connected)")]
    NotReplicated {
        /// Replicas connected to the master when the write was given up.
        connected: usize,
        /// How long the write waited for them.
        timeout: Duration,
    },

    /// An operation did not complete within its time bound.
    #[error("timed out after {after:?} while {during}")]
    Timeout {
        /// What was being done.
        during: &'static str,
        /// The bound that ran out.
        after: Duration,
    },

    /// Redis refused a command for lack of an ACL permission of the connected user. Nothing
    /// was changed: every script checks what it may be refused before it writes. The
    /// README's "Security" section lists the rules a lock user needs.
    #[error("Redis refused {operation} `{target}`: the user lacks {missing}")]
    PermissionDenied {
        /// What was being done, such as "unlocking".
        operation: &'static str,
        /// The lock, channel or server the operation was on.
        target: String,
        /// The permission that is missing, with the ACL rule that grants it when known,
        /// such as "PUBLISH to channel `redisson_lock__channel:{a}` (`&redisson_lock__channel:*`)".
        missing: String,
    },

    /// The key is not a lock of this kind (a string, a list, a Redisson read-write lock, a
    /// hash of other data), or not a semaphore's or latch's count (a hash, a string that
    /// is no integer, ...): the call was refused and nothing was changed.
    #[error("`{name}` is {found}, not a lock or synchronizer of this kind; nothing was changed")]
    NotALock {
        /// The key.
        name: String,
        /// What it holds, such as "a string" or "a hash that is not a lock".
        found: String,
    },

    /// Redis answered a lock operation with an error of its own (such as OOM when it is out
    /// of memory, or a fencing counter that cannot grow any more). Nothing is retried.
    #[error("{operation} `{lock}` was refused by Redis: {message}")]
    Rejected {
        /// What was being done, such as "acquiring".
        operation: &'static str,
        /// The lock's key.
        lock: String,
        /// Redis' answer, without the script's hash and line number.
        message: String,
        /// The error as redis-rs reported it.
        #[source]
        source: redis::RedisError,
    },

    /// The server answered, but not as Redis does: something else listens at that address
    /// (an HTTP server, a TLS port spoken to without TLS, ...).
    #[error("the server at {url} did not answer as Redis: {detail}")]
    NotRedis {
        /// The URL, with its password redacted.
        url: String,
        /// What went wrong.
        detail: String,
    },

    /// The server cannot hold locks for this client: a replica (locks must be written on
    /// a master), a Sentinel, a cluster node, or a Redis older than 7.0.
    #[error("the server at {url} cannot hold locks: {reason}")]
    UnsupportedServer {
        /// The URL, with its password redacted.
        url: String,
        /// Why, and what to connect to instead.
        reason: String,
    },

    /// The server may evict keys when its memory is full (its `maxmemory-policy` is one of
    /// the `allkeys-*` or `volatile-*` policies, with a `maxmemory` limit), which would
    /// free held locks without telling their holders. Set `maxmemory-policy noeviction`,
    /// or accept the risk with
    /// [`ClientBuilder::allow_evicting_policy`](crate::ClientBuilder::allow_evicting_policy).
    /// From `build()`, with nothing written; and from calls after a reconnection to a
    /// server that runs such a policy by then, until it no longer does.
    #[error(
        "the server at {url} runs maxmemory-policy {policy} with a maxmemory limit: when \
         full it may evict lock keys, freeing locks without telling their holders; set \
         maxmemory-policy noeviction, or accept it with \
         ClientBuilder::allow_evicting_policy(true)"
    )]
    EvictingServer {
        /// The URL (or, on a cluster, the node), with its password redacted.
        url: String,
        /// The server's `maxmemory-policy`.
        policy: String,
    },

    /// On a Redis Cluster, the lock's name would put its derived keys in other hash slots
    /// than its key, so no script could touch them together (Redis would refuse every call
    /// with `CROSSSLOT`). Names with braces that do not form a hash tag do this, such as
    /// `a{b` or `{}x`: give the name a valid tag (`{a}b`) or no braces. Refused at the
    /// first call on the lock, with nothing sent; clients of one Redis accept such names.
    #[error(
        "lock `{name}` cannot be used on a Redis Cluster: its key is in hash slot {slot}, \
         but `{other}` is in slot {other_slot} (braces that do not form a hash tag split \
         a lock's names over slots; use a valid tag such as `{{name}}` or no braces)"
    )]
    CrossSlotName {
        /// The lock's key.
        name: String,
        /// The key's hash slot.
        slot: u16,
        /// A derived name in another slot.
        other: String,
        /// That name's slot.
        other_slot: u16,
    },

    /// The calling task holds the read lock of a [`ReadWriteLock`](crate::ReadWriteLock)
    /// and asked for its write lock: the write lock waits until no one reads, this task
    /// included, so the call would wait for itself forever (Redisson's does). Refused at
    /// once, with nothing sent. A reader cannot upgrade: release its read guards first. (A
    /// writer may take the read lock: see [`ReadWriteLock`](crate::ReadWriteLock).)
    #[error(
        "the task holds a read lock on `{name}` and asked for its write lock, which would \
         wait for the task itself forever; release the read lock first"
    )]
    UpgradeRefused {
        /// The lock's key.
        name: String,
    },

    /// The tokio runtime the client was built on has shut down, and with it the client's
    /// connections and background tasks: build the client on a runtime that outlives its
    /// use.
    #[error("the tokio runtime this client was built on has shut down")]
    RuntimeGone,

    /// The client was shut down ([`Client::shutdown`](crate::Client::shutdown)): it takes
    /// no lock, permit or call any more, and a guard it released on shutdown sends nothing
    /// when it is unlocked. Nothing was sent.
    #[error("the client was shut down")]
    ShutDown,
}

/// Public `is_*` predicates of [`Error`], each true for what its pattern matches.
macro_rules! predicates {
    ($($(#[$doc:meta])* $name:ident => $pattern:pat $(if $guard:expr)?,)*) => {
        impl Error {$(
            $(#[$doc])*
            pub fn $name(&self) -> bool {
                matches!(self, $pattern $(if $guard)?)
            }
        )*}
    };
}

predicates! {
    /// True when the argument was rejected before anything was sent to Redis.
    is_invalid_argument => Error::InvalidArgument(_),

    /// True when the lock (or an expirable permit:
    /// [`Error::PermitLost`]) was lost before it was released.
    is_lock_lost => Error::LockLost { .. } | Error::PermitLost { .. },

    /// True when, with replica sync on, no connected replica acknowledged a lock write in
    /// time ([`Error::NotReplicated`]).
    is_not_replicated => Error::NotReplicated { .. },

    /// True when Redis refused the credentials: a wrong password or user name
    /// (`WRONGPASS`), or none given to a server that requires them (`NOAUTH`). Final: it is
    /// never retried.
    is_auth_error => Error::Redis(e) if is_auth_failure(e),

    /// True when Redis refused a command for lack of an ACL permission
    /// ([`Error::PermissionDenied`]).
    is_permission_denied => Error::PermissionDenied { .. },

    /// True when the key is not a lock of this kind
    /// ([`Error::NotALock`]).
    is_not_a_lock => Error::NotALock { .. },

    /// True when a lock name cannot be used on a Redis Cluster
    /// ([`Error::CrossSlotName`]).
    is_cross_slot_name => Error::CrossSlotName { .. },

    /// True when the server may evict lock keys and the client was not told to accept it
    /// ([`Error::EvictingServer`]).
    is_evicting_server => Error::EvictingServer { .. },

    /// True when a task holding a read lock asked for the write lock of the same
    /// read-write lock ([`Error::UpgradeRefused`]).
    is_upgrade_refused => Error::UpgradeRefused { .. },

    /// True when the client was shut down ([`Error::ShutDown`]).
    is_shut_down => Error::ShutDown,
}

impl Error {
    /// True when an operation ran out of time, ours or the Redis connection's.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Redis(e) | Error::Unreachable { error: e, .. } if e.is_timeout())
            || matches!(self, Error::Timeout { .. })
    }

    /// True when the failure came from reaching Redis (or, with replica sync, its
    /// replicas) rather than from what was asked: a later retry may succeed. Failed
    /// authentication is not one: retrying with the same credentials cannot succeed.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Redis(e) => is_transient(e),
            Error::Pool { .. }
            | Error::Unreachable { .. }
            | Error::Timeout { .. }
            | Error::QuorumUnreachable { .. }
            | Error::NotReplicated { .. } => true,
            _ => false,
        }
    }

    /// The reason a lock was lost, for [`Error::LockLost`] (and an
    /// expirable permit, for [`Error::PermitLost`]).
    pub fn lost_reason(&self) -> Option<LostReason> {
        match self {
            Error::LockLost { reason, .. } | Error::PermitLost { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    /// [`Error::CrossSlotName`]: the key `name`, in hash slot `slot`, derives `other`,
    /// which is in `other_slot`.
    pub(crate) fn cross_slot(name: &str, slot: u16, other: String, other_slot: u16) -> Self {
        Error::CrossSlotName {
            name: name.to_string(),
            slot,
            other,
            other_slot,
        }
    }

    /// A pool failure without an error of the pool's own.
    pub(crate) fn pool(message: impl Into<String>) -> Self {
        Error::Pool {
            message: message.into(),
            source: None,
        }
    }
}

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

impl From<deadpool_redis::PoolError> for Error {
    fn from(e: deadpool_redis::PoolError) -> Self {
        match e {
            deadpool_redis::PoolError::Backend(e) => Error::Redis(e),
            other => Error::Pool {
                message: other.to_string(),
                source: Some(Box::new(other)),
            },
        }
    }
}
