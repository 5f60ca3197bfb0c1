//! [`LostReason`]: why a held lock is no longer held.

use std::fmt;

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
    /// The client was shut down ([`Client::shutdown`](crate::Client::shutdown)), which
    /// released the lock (or permit) on the guard's behalf.
    ShutDown,
}

impl LostReason {
    /// The reason as a metric label: its name in snake case.
    pub(crate) fn label(self) -> &'static str {
        match self {
            LostReason::Expired => "expired",
            LostReason::Released => "released",
            LostReason::ConnectionLost => "connection_lost",
            LostReason::QuorumLost => "quorum_lost",
            LostReason::MaxHoldReached => "max_hold_reached",
            LostReason::ShutDown => "shut_down",
        }
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LostReason::Expired => "the lease expired before it was renewed",
            LostReason::Released => {
                "the lock was released by another client, or forgotten by Redis (restart, failover)"
            }
            LostReason::ConnectionLost => "Redis could not be reached to renew the lease",
            LostReason::QuorumLost => "fewer than a quorum of the RedLock's nodes still hold it",
            LostReason::MaxHoldReached => "it was held for the longest time allowed",
            LostReason::ShutDown => "the client was shut down, which released it",
        })
    }
}

/// `reason` in words for an expirable permit, which has a lease but no renewal.
pub(super) fn permit_words(reason: LostReason) -> String {
    match reason {
        LostReason::Expired => "its lease ran out".to_string(),
        LostReason::Released => "it was released by its id elsewhere, or Redis lost it".to_string(),
        other => other.to_string(),
    }
}
