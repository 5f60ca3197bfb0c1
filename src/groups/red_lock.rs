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
/// `N / 2 + 1` masters hold it; how it is taken and kept, what it protects against and
/// what it assumes are in the [`groups`](crate::groups) docs.
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
    /// method is called; an empty list, or two locks whose clients have the same URL or
    /// reach the same Redis Cluster (a majority must be of independent masters: see
    /// [independent masters](crate::groups#independent-masters)), is reported by the first
    /// call.
    pub fn new(locks: Vec<Lock<K>>) -> Self {
        LockGroup::from_locks(locks)
    }
}
