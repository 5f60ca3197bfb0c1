//! The crate's one error type.

use std::fmt;
use std::time::Duration;

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a held lock is no longer, or can no longer be assumed to be, held.
///
/// Reported by [`LockGuard::lost`](crate::LockGuard::lost) and inside
/// [`Error::LockLost`](crate::Error::LockLost).
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LostReason {
    /// The lease ran out before a renewal was confirmed: a fixed lease expired, or the
    /// watchdog did not get a renewal through in time (for example a long process pause).
    Expired,
    /// The owner's field is gone from the lock hash while its lease should still run:
    /// someone force-unlocked or deleted the lock, or Redis lost it (a restart without
    /// persistence, a failover to a replica that did not have it).
    Released,
    /// The watchdog could not get a renewal confirmed before the lease ran out: Redis could
    /// not be reached, or, with [replica sync](crate::ClientBuilder::replica_sync), no
    /// replica acknowledged it.
    ConnectionLost,
    /// Fewer than a quorum of a [`RedLock`](crate::RedLock)'s nodes still hold it.
    QuorumLost,
    /// The hold reached the cap set with [`Lock::with_max_hold`](crate::Lock::with_max_hold):
    /// the watchdog stopped renewing it, and its last lease ran out.
    MaxHoldReached,
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LostReason::Expired => "the lease expired before it was renewed",
            LostReason::Released => "the lock was released by someone else",
            LostReason::ConnectionLost => "Redis could not be reached to renew the lease",
            LostReason::QuorumLost => "fewer than a quorum of the RedLock's nodes still hold it",
            LostReason::MaxHoldReached => "it was held for the longest time allowed",
        })
    }
}

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

    /// Redis answered with an error, or the connection failed.
    #[error("redis error: {0}")]
    Redis(#[from] redis::RedisError),

    /// No connection could be taken from, or made by, the connection pool.
    #[error("connection pool error: {0}")]
    Pool(String),

    /// Too few of a lock group's nodes could be reached to take the lock: a
    /// [`RedLock`](crate::RedLock) needs a majority, a [`MultiLock`](crate::MultiLock) all.
    #[error("{reachable} of {total} nodes reachable, {needed} needed: {last_error}")]
    QuorumUnreachable {
        /// Nodes that answered in the last attempt.
        reachable: usize,
        /// Nodes the lock must be held on.
        needed: usize,
        /// Nodes in the group.
        total: usize,
        /// What the last unreachable node failed with.
        last_error: String,
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
    /// hash of other data): the call was refused and nothing was changed.
    #[error("`{name}` is {found}, not a lock of this kind; nothing was changed")]
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

    /// The tokio runtime the client was built on has shut down, and with it the client's
    /// connections and background tasks: build the client on a runtime that outlives its
    /// use.
    #[error("the tokio runtime this client was built on has shut down")]
    RuntimeGone,
}

impl Error {
    /// True when the argument was rejected before anything was sent to Redis.
    pub fn is_invalid_argument(&self) -> bool {
        matches!(self, Error::InvalidArgument(_))
    }

    /// True when the lock was lost before it was released.
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, Error::LockLost { .. })
    }

    /// True when an operation ran out of time, ours or the Redis connection's.
    pub fn is_timeout(&self) -> bool {
        match self {
            Error::Timeout { .. } => true,
            Error::Redis(e) => e.is_timeout(),
            _ => false,
        }
    }

    /// True when the failure came from reaching Redis (or, with replica sync, its
    /// replicas) rather than from what was asked: a later retry may succeed. Failed
    /// authentication is not one: retrying with the same credentials cannot succeed.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Redis(e) => is_transient(e),
            Error::Pool(_)
            | Error::Timeout { .. }
            | Error::QuorumUnreachable { .. }
            | Error::NotReplicated { .. } => true,
            _ => false,
        }
    }

    /// True when, with replica sync on, no connected replica acknowledged a lock write in
    /// time ([`Error::NotReplicated`](crate::Error::NotReplicated)).
    pub fn is_not_replicated(&self) -> bool {
        matches!(self, Error::NotReplicated { .. })
    }

    /// True when Redis refused the credentials: a wrong password or user name
    /// (`WRONGPASS`), or none given to a server that requires them (`NOAUTH`). Final: it is
    /// never retried.
    pub fn is_auth_error(&self) -> bool {
        match self {
            Error::Redis(e) => is_auth_failure(e),
            _ => false,
        }
    }

    /// True when Redis refused a command for lack of an ACL permission
    /// ([`Error::PermissionDenied`](crate::Error::PermissionDenied)).
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, Error::PermissionDenied { .. })
    }

    /// True when the key is not a lock of this kind
    /// ([`Error::NotALock`](crate::Error::NotALock)).
    pub fn is_not_a_lock(&self) -> bool {
        matches!(self, Error::NotALock { .. })
    }

    /// The reason a lock was lost, for [`Error::LockLost`](crate::Error::LockLost).
    pub fn lost_reason(&self) -> Option<LostReason> {
        match self {
            Error::LockLost { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }
}

/// True for failures of reaching Redis, after which a retry may succeed: I/O errors,
/// timeouts, dropped connections, and a server that is loading or failing over. Not
/// refused credentials, and not an answer that is not Redis' (a protocol error at connect
/// is reported as [`Error::NotRedis`]).
pub(crate) fn is_transient(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    if is_auth_failure(e) {
        return false;
    }
    e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::MasterDown
            )
        )
}

/// Refused credentials: redis-rs' own kind for a failed `AUTH` at connect, and the server's
/// codes when a command is sent unauthenticated or the credentials are wrong.
pub(crate) fn is_auth_failure(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(e.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// True for a refusal for lack of an ACL permission: `NOPERM` for the command itself, and
/// the messages Redis 7 gives a script whose inner command was refused (which carry the
/// code `ERR`: see `scriptCall` in Redis' `script.c`).
pub(crate) fn is_permission_failure(e: &redis::RedisError) -> bool {
    e.code() == Some("NOPERM")
        || e.detail()
            .is_some_and(|detail| detail.starts_with("The user executing the script can't"))
}

/// How a refused PUBLISH or SUBSCRIBE (`verb`) to an unlock channel is named in
/// [`Error::PermissionDenied`], with the ACL rule that grants it.
pub(crate) fn channel_missing(verb: &str, channel: &str) -> String {
    format!("{verb} to channel `{channel}` (`&redisson_lock__channel:*`)")
}

/// A server's error, without the hash and line of the script it came from: Redis 7 appends
/// ` script: <sha>, on @user_script:<line>.` to errors raised inside scripts.
pub(crate) fn server_message(e: &redis::RedisError) -> String {
    let detail = e.detail().unwrap_or_default();
    let detail = match detail.find(" script: ") {
        Some(at) => &detail[..at],
        None => detail,
    };
    match e.code() {
        Some(code) if !detail.is_empty() => format!("{code} {detail}"),
        Some(code) => code.to_string(),
        None => e.to_string(),
    }
}

impl From<deadpool_redis::PoolError> for Error {
    fn from(e: deadpool_redis::PoolError) -> Self {
        match e {
            deadpool_redis::PoolError::Backend(e) => Error::Redis(e),
            other => Error::Pool(other.to_string()),
        }
    }
}
