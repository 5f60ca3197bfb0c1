//! [`MultiLock`]: several locks taken together, all or nothing.

use crate::groups::group::LockGroup;
use crate::groups::policy::All;
use crate::locks::RLock;

/// Several locks held together, all or nothing: for work on several resources at once,
/// on one Redis or several.
///
/// Every lock is asked at once, with one owner field and one lease. If any is held
/// elsewhere, the ones taken are released at once, before the call waits for an unlock
/// message from any of them (bounded by the holders' TTLs and the caller's wait) and tries
/// again, so a waiting `MultiLock` never sits on part of what it wants. Each lock's hold is
/// renewed by its own client's watchdog; the guard is lost as soon as any lock is, with that
/// lock's reason.
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// use redis_rlock::MultiLock;
/// let both = MultiLock::new(vec![client.lock("account:1"), client.lock("account:2")]);
/// let guard = both.lock().await?;
/// // ... move money between the two accounts ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub type MultiLock = LockGroup<All>;

impl LockGroup<All> {
    /// A MultiLock over `locks`. Nothing is sent until a method is called; an empty list is
    /// reported by the first call.
    pub fn new(locks: Vec<RLock>) -> Self {
        LockGroup::from_locks(locks)
    }
}
