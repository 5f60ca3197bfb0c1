//! [`RedLock`]: a lock held on a majority of independent Redis masters (the Redlock
//! algorithm).

use crate::groups::group::LockGroup;
use crate::groups::policy::{GroupKind, Majority};
use crate::locks::{Lock, Reentrant};

/// A lock held on a majority of N independent Redis masters, for deployments where one
/// Redis (and its asynchronous failover) is not trusted to keep a lock.
///
/// Give it one [`RLock`](crate::RLock) per master, each from a [`Client`](crate::Client)
/// connected to that master, usually with the same name; or one
/// [`FencedLock`](crate::FencedLock) per master for a `RedLock<Fenced>`, whose guard
/// carries a [fencing token](crate::GroupGuard::fencing_token) that grows across holders
/// whatever majority each of them held. The group is held while a majority of
/// `N / 2 + 1` masters hold it:
///
/// - every master is asked at once, each with a per-node timeout
///   ([`with_node_timeout`](crate::groups::LockGroup::with_node_timeout), 100 ms by default), and
///   the call returns as soon as a majority said yes, without waiting for stragglers (whose
///   holds join the guard when they answer);
/// - the group is acquired only if time is left of the lease after the time it took and
///   a drift allowance (1 % of the lease + 2 ms): [`GroupGuard::valid_until`](crate::GroupGuard::valid_until);
/// - otherwise it is released on every master, including those that did not answer, and
///   the call waits for an unlock message from a master that said it was held elsewhere,
///   or the holders' TTL, before trying again (after a short random pause when the
///   masters were split between rivals);
/// - each master's hold is renewed by its own client's watchdog; once fewer than a
///   majority are held, the guard is lost with [`LostReason::QuorumLost`](crate::LostReason::QuorumLost);
/// - reentrancy works as for `RLock`: every master has the same owner field.
///
/// **What it protects against, and what it does not.** Any minority of masters may crash,
/// freeze or be cut off: the lock stays held and exclusive. It assumes clocks that *run*
/// at about the same rate on every machine (not synchronized clocks: only durations are
/// compared), and a master that crashed must not come back with the lock forgotten while
/// a holder still counts on it: keep it down longer than the longest lease, or run it with
/// `appendfsync always`. Like every lease lock, it cannot stop a holder paused past its
/// lease (GC, SIGSTOP) from acting after it expired: race the work against
/// [`GroupGuard::lost`](crate::GroupGuard::lost), and have the resource check a fencing
/// token where that matters.
///
/// ```no_run
/// # async fn demo(masters: Vec<redis_rlock::Client>) -> redis_rlock::Result<()> {
/// use redis_rlock::RedLock;
/// let redlock = RedLock::new(masters.iter().map(|m| m.lock("payments:batch")).collect());
/// let guard = redlock.lock().await?;
/// // ... the critical section, while a majority holds it ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
///
/// With fencing tokens:
///
/// ```no_run
/// # async fn demo(masters: Vec<redis_rlock::Client>) -> redis_rlock::Result<()> {
/// use redis_rlock::RedLock;
/// let redlock = RedLock::new(masters.iter().map(|m| m.fenced_lock("ledger")).collect());
/// let guard = redlock.lock().await?;
/// let token = guard.fencing_token().expect("a fenced RedLock's guard has a token");
/// // ... pass `token` with every write to the ledger ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub type RedLock<K = Reentrant> = LockGroup<Majority, K>;

impl<K: GroupKind> LockGroup<Majority, K> {
    /// A RedLock over `locks`, one per independent master: [`RLock`](crate::RLock)s, or
    /// [`FencedLock`](crate::FencedLock)s for fencing tokens. Nothing is sent until a
    /// method is called; an empty list, or two locks whose clients have the same URL (a
    /// majority must be of distinct masters), is reported by the first call.
    pub fn new(locks: Vec<Lock<K>>) -> Self {
        LockGroup::from_locks(locks)
    }
}
