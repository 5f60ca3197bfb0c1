//! The lock kinds as types ([`Reentrant`], [`Fair`], [`Fenced`], [`Read`], [`Write`]),
//! the handle types that name them ([`FairLock`], [`FencedLock`], [`ReadLock`],
//! [`WriteLock`]; [`RLock`](crate::RLock) is `lock`'s) and the [`Client`](crate::Client)
//! methods that make them ([`fair_lock`](crate::Client::fair_lock),
//! [`fenced_lock`](crate::Client::fenced_lock)), one entry per kind. Its types are
//! re-exported at the crate's root with one glob, and its methods are put in `impl Client`
//! by the one line `lock_factories!()` in `client`, above this layer. So a new kind is,
//! beside its scripts, its entry in `protocol::kinds` and its entry here.
//!
//! A kind is chosen by type (`Lock<Fair>`), and each type names its description in the
//! protocol ([`protocol::kinds`](crate::protocol::kinds)): its names, scripts and the shape
//! of their calls. From then on the engine reads that description (a read-write side is
//! renewed with its read timeouts, a fair lock's waiters queue, a fenced lock draws
//! tokens), never which kind it is.

use crate::locks::lock::Lock;
use crate::protocol::kinds::{self, Kind};

/// The kind of a [`Lock`]: [`Reentrant`], [`Fair`], [`Fenced`], or a read-write lock's
/// [`Read`] or [`Write`]. Sealed: the kinds are this crate's, each with its own scripts.
/// `Clone`, so that the handles of every kind derive theirs.
pub trait LockKind: sealed::Sealed + Clone + Send + Sync + 'static {}

pub(crate) mod sealed {
    /// What the engine needs of a kind; public in name only, so that no other crate can
    /// add a kind.
    pub trait Sealed {
        /// The type name shown by `Debug`.
        const TYPE_NAME: &'static str;
        /// What the kind is in Redis.
        const KIND: &'static crate::protocol::kinds::Kind;
    }
}

/// A kind's marker type, with its docs: the [`Kind`] it stands for, and the name `Debug`
/// shows for its handle type.
macro_rules! kind {
    ($(#[$doc:meta])* $marker:ident($kind:path) as $shown:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $marker;

        impl LockKind for $marker {}

        impl sealed::Sealed for $marker {
            const TYPE_NAME: &'static str = $shown;
            const KIND: &'static Kind = &$kind;
        }
    };
}

kind! {
    /// The kind of an [`RLock`](crate::RLock): reentrant, a release wakes any one waiter
    /// (Redisson's `RLock`).
    Reentrant(kinds::reentrant::REENTRANT) as "RLock"
}

kind! {
    /// The kind of a [`FairLock`]: reentrant, and served in arrival order (Redisson's
    /// `RFairLock`).
    Fair(kinds::fair::FAIR) as "FairLock"
}
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

kind! {
    /// The kind of a [`FencedLock`]: reentrant, and every acquire draws a fencing token
    /// (Redisson's `RFencedLock`).
    Fenced(kinds::fenced::FENCED) as "FencedLock"
}
/// A reentrant distributed lock whose every acquire gets a fencing token: a number strictly
/// greater than every token handed out before for the same name, read with
/// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token).
///
/// A lease cannot stop a holder paused past it (a GC pause, SIGSTOP, a swapped-out process)
/// from waking up and touching the resource after another client took the lock. The token
/// lets the resource refuse it: pass the token with every write, and have the resource
/// reject a token lower than the highest it has seen ([`Client::fenced_set`](crate::Client::fenced_set) does that for
/// a Redis key).
///
/// Same methods, guard, watchdog and reentrancy as [`RLock`](crate::RLock); the acquire
/// script also `INCR`s the counter `redisson_lock_token:{<name>}` (no extra round trip),
/// on every acquire including a re-entry, as Redisson does. The counter has no expiry and
/// is never reset by this crate: tokens keep growing as long as Redis keeps the key, so
/// run Redis with persistence where tokens must grow across a restart. Made by
/// [`Client::fenced_lock`](crate::Client::fenced_lock).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let lock = client.fenced_lock("ledger");
/// let guard = lock.lock().await?;
/// let token = guard.fencing_token().expect("a fenced lock's guard has a token");
/// // A write that a paused, stale holder could not make after a newer one:
/// let written = client.fenced_set("ledger:balance", token, b"42").await?;
/// assert!(written);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub type FencedLock = Lock<Fenced>;

kind! {
    /// The kind of a [`ReadLock`].
    Read(kinds::read_write::READ) as "ReadLock"
}
/// The read side of a [`ReadWriteLock`](crate::ReadWriteLock): shared by any number of
/// tasks while nobody writes, with every method of [`Lock`] and the same
/// [`LockGuard`](crate::LockGuard) (Redisson's `RReadWriteLock.readLock()`).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let read = client.read_write_lock("doc:7").read_lock();
/// let guard = read.lock().await?;  // waits only while someone writes
/// let again = read.lock().await?;  // same task: re-entry
/// assert_eq!(read.hold_count().await?, 2);
/// again.unlock().await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub type ReadLock = Lock<Read>;

kind! {
    /// The kind of a [`WriteLock`].
    Write(kinds::read_write::WRITE) as "WriteLock"
}
/// The write side of a [`ReadWriteLock`](crate::ReadWriteLock): exclusive of readers and
/// other writers, with every method of [`Lock`] and the same
/// [`LockGuard`](crate::LockGuard) (Redisson's `RReadWriteLock.writeLock()`). A task
/// holding it may also take the read lock; a task holding the read lock is refused it
/// (see [`ReadWriteLock`](crate::ReadWriteLock)).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let write = client.read_write_lock("doc:7").write_lock();
/// let guard = write.lock().await?; // waits until no one reads or writes
/// guard.unlock().await?;           // every waiting reader comes in
/// # Ok(()) }
/// ```
pub type WriteLock = Lock<Write>;

/// The [`Client`](crate::Client) methods of the kinds that have one, for `client` to
/// invoke inside `impl Client`: this layer cannot name `Client`.
macro_rules! lock_factories {
    () => {
        /// A handle on the fair lock `name`: reentrant like [`lock`](crate::Client::lock), and
        /// served to its waiters in arrival order (see [`FairLock`](crate::FairLock)). Cheap;
        /// nothing is sent until a method is called.
        ///
        /// An empty name is reported by the first call on the handle, as
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
        pub fn fair_lock(&self, name: impl AsRef<str>) -> crate::locks::kind::FairLock {
            crate::locks::lock::Lock::new(self.core.clone(), name.as_ref())
        }

        /// A handle on the fenced lock `name`: reentrant like [`lock`](crate::Client::lock),
        /// and every acquire draws a fencing token (see [`FencedLock`](crate::FencedLock)).
        /// Cheap; nothing is sent until a method is called.
        ///
        /// An empty name is reported by the first call on the handle, as
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
        pub fn fenced_lock(&self, name: impl AsRef<str>) -> crate::locks::kind::FencedLock {
            crate::locks::lock::Lock::new(self.core.clone(), name.as_ref())
        }
    };
}
pub(crate) use lock_factories;
