//! [`FairLock`]: the reentrant lock that serves its waiters first come, first served, with
//! Redisson's `RFairLock` layout.

use crate::lock::{sealed, Lock, LockKind};

/// A reentrant distributed lock that its waiters get in arrival order, each woken alone.
///
/// Same methods, guard, watchdog and reentrancy as [`RLock`](crate::RLock); what differs is
/// who gets the lock when it frees. Waiters queue in Redis in the order their first
/// waiting attempt reached it, and only the head of the queue may take a free lock: an
/// unlock publishes to the head's own channel, so it alone wakes (no thundering herd), and
/// a `try_lock` never jumps the queue.
///
/// A waiter that gives up (its future is dropped, or `try_lock_for` runs out) leaves the
/// queue at once and the next waiter is told if the lock is free. A waiter whose process
/// died cannot say so: if its connection closed, the hand-over skips it at once; if not
/// (the process froze, the network is cut), it holds the queue up for at most the
/// client's [`fair_waiter_timeout`](crate::ClientBuilder::fair_waiter_timeout), 5 s by
/// default. Live waiters keep their place by a heartbeat from their client.
///
/// Redis keys (Redisson's `RFairLock`): the lock hash `<name>`, the queue list
/// `redisson_lock_queue:{<name>}`, the deadlines zset `redisson_lock_timeout:{<name>}`
/// (owner → ms on the Redis server's clock) and one channel per waiter,
/// `redisson_lock__channel:{<name>}:<owner>`.
///
/// Made by [`Client::fair_lock`](crate::Client::fair_lock); cheap to clone.
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let jobs = client.fair_lock("jobs");
/// // Every consumer on every machine waits its turn, in arrival order.
/// let turn = jobs.lock().await?;
/// // ... take the next job ...
/// turn.unlock().await?; // the next consumer in the queue, and only it, is woken
/// # Ok(()) }
/// ```
pub type FairLock = Lock<Fair>;

/// The kind of a [`FairLock`]: reentrant, and served in arrival order (Redisson's
/// `RFairLock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fair;

impl LockKind for Fair {}

impl sealed::Sealed for Fair {
    const TYPE_NAME: &'static str = "FairLock";
    const FAIR: bool = true;
    const FENCED: bool = false;
}
