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
    /// replicas) rather than from what was asked: a later retry may succeed.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Redis(e) => crate::connection::is_transient(e),
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

impl From<deadpool_redis::PoolError> for Error {
    fn from(e: deadpool_redis::PoolError) -> Self {
        match e {
            deadpool_redis::PoolError::Backend(e) => Error::Redis(e),
            other => Error::Pool(other.to_string()),
        }
    }
}
