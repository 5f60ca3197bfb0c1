//! The locks: the kinds (`kind`), the handle every kind shares ([`Lock`]), the engine
//! that takes and releases them (`attempt`, `wait`, `acquire`, `release`) and the
//! guard a hold gives ([`LockGuard`]); the read-write lock's two sides are kinds too
//! ([`read_write`]).
//!
//! # Guarantees and caveats
//!
//! What a lock promises, what its lease means, and what happens when a holder is paused, Redis
//! goes away or a call is abandoned. These hold for every lock kind; a
//! [`RedLock`](crate::RedLock) adds its own assumptions, in the [`groups`](crate::groups) docs.
//!
//! - **Mutual exclusion holds while the lease holds.** A lock is a key with a lease (its Redis
//!   TTL). The watchdog renews it every third of the lease while a guard is alive; a fixed
//!   lease ([`lock_with_lease`](crate::RLock::lock_with_lease)) is never renewed. If the
//!   holder cannot renew in time (a process paused past its lease by GC, swapping or SIGSTOP;
//!   Redis unreachable), Redis expires the key and another client may take the lock while the
//!   old holder still runs. No lease-based lock can prevent that; this one makes sure the old
//!   holder **knows**: [`LockGuard::valid_until`](crate::LockGuard::valid_until) is a deadline
//!   on the local monotonic clock (the start of the last confirmed acquire or renewal + lease
//!   − 1 % of the lease − 2 ms), which passes before the key can expire in Redis, and
//!   [`LockGuard::lost`](crate::LockGuard::lost) resolves at that deadline at the latest.
//!   Check it before each step of a long job, or race the job against it with `select!`.
//!   Where the resource can check, make it refuse the old holder: take a
//!   [`FencedLock`] and pass
//!   [`LockGuard::fencing_token`](crate::LockGuard::fencing_token) with each write (see
//!   [fencing tokens](crate::locks#fencing-tokens)).
//! - **One owner is one holder: the task, or an owner you name.** The hash field is
//!   `<client-uuid>:<task-id>`, so every call from one tokio task re-enters, including calls
//!   from futures that the task polls concurrently (`join!`, `select!`,
//!   `FuturesUnordered`, `buffer_unordered`): their critical sections overlap. Such code
//!   takes the lock with an explicit [`Owner`](crate::Owner)
//!   ([`Lock::with_owner`](crate::Lock::with_owner),
//!   [`RedLock::with_owner`](crate::RedLock::with_owner)), re-entrant for that owner only,
//!   or through a [`non_reentrant`](crate::Lock::non_reentrant) handle, where every acquire
//!   is an owner of its own and a second one waits.
//! - **A re-entry never hides a loss.** Each acquire learns from Redis whether it re-entered
//!   the owner's count or made the owner's field anew. A new field while the client still
//!   counted a hold of that owner means the hold left Redis first (a
//!   [`force_unlock`](crate::Lock::force_unlock) by another client, a restart without
//!   persistence, an eviction): the earlier guards are marked lost
//!   ([`Released`](crate::LostReason::Released)) before the new guard is returned, and the
//!   new guard is a hold of its own, so releasing it never leaves an earlier guard looking
//!   valid on a free lock. A release that frees the lock while other guards of its hold
//!   remain marks those lost too. An acquire waits for a release of the same owner still
//!   on its way (a guard just dropped), so that release never takes the new hold's count.
//!   Without a re-entry, another client's force unlock is told
//!   at this client's next renewal (a third of the lease at most), and a restart at its
//!   reconnection (below).
//! - **What the watchdog promises.** Renewal every `watchdog_timeout / 3` (10 s by default,
//!   [`ClientBuilder::watchdog_timeout`](crate::ClientBuilder::watchdog_timeout)), a batch of
//!   locks per script call, retried every 500 ms after a failure. Renewal stops the moment the
//!   last guard of a hold is released or dropped, never outlives an unlock, and is never
//!   started for a cancelled acquire. A renewal that finds the owner's field gone marks the
//!   guard lost at once ([`Released`](crate::LostReason::Released), or
//!   [`Expired`](crate::LostReason::Expired) if the local deadline had passed); a renewal that
//!   does not reach Redis before the deadline gives
//!   [`ConnectionLost`](crate::LostReason::ConnectionLost). Each loss is logged with `warn!`.
//! - **A Redis that forgot a lock tells its holders soon.** When a lock call finds the
//!   client's connection broken (the server closed it: a restart, a failover) and the client
//!   reconnects, a renewal round runs at once rather than up to a third of a lease later, so a
//!   Redis that came back without the lock tells its holders (`Released`) within a round trip
//!   of the reconnection; a client that makes no lock calls finds out at its next renewal
//!   round. Holders of fixed-lease locks, which are never renewed, are checked the same way
//!   whenever the client reconnects (its command connection or its pub/sub connection). No
//!   client can know before someone else takes the freshly forgotten lock: use persistence,
//!   [replica sync](crate::ClientBuilder::replica_sync) or a [`RedLock`](crate::RedLock)
//!   where that matters.
//! - **A maximum hold time bounds even a healthy holder.**
//!   [`with_max_hold(cap)`](crate::RLock::with_max_hold) (or
//!   [`RedLock::with_max_hold`](crate::RedLock::with_max_hold) for a group) counts from the
//!   acquire that takes the lock: the watchdog renews it until the cap and no further, and
//!   every lease applied to the key (a fixed lease, a re-entry's, an unlock's, a renewal near
//!   the end) is reckoned to end by the cap, so Redis frees the lock then (give or take the
//!   time the request takes to reach it). The guard's `valid_until()` ends just before,
//!   `lost()` resolves with [`MaxHoldReached`](crate::LostReason::MaxHoldReached), and
//!   `unlock()` after that returns [`Error::LockLost`](crate::Error::LockLost) with that
//!   reason. A nested call cannot lift the cap of an outer one: a hold keeps the earliest cap
//!   any of its guards asked for, and a group's cap and each of its locks' own caps combine
//!   the same way. Taking the lock again right after the cap is reached works as usual: counts
//!   Redis still holds for the old hold are taken back with the new hold's last release.
//! - **Unlock never harms another owner.** The unlock script checks the owner's field;
//!   [`LockGuard::unlock`](crate::LockGuard::unlock) on a lost guard returns
//!   [`Error::LockLost`](crate::Error::LockLost) (with the reason and how long ago the lease
//!   ran out) and sends nothing. Unlocks are retried after connection errors, and a retry
//!   never releases a second hold: it knows its earlier try by the owner's count (see
//!   `locks::release`).
//! - **Waiting is bounded.** Each wait lasts at most the holder's remaining TTL and the
//!   caller's remaining wait, so a missed unlock message costs at most the TTL; after a
//!   pub/sub reconnection every waiter re-checks at once. A call with a wait budget
//!   (`try_lock_for`, `try_lock_with`, a synchronizer's or a group's timed wait) rides out
//!   failures to reach Redis until the budget is spent, then returns the last error;
//!   `lock()`, without one, returns it after `retry_attempts` tries. Connecting and
//!   subscribing have timeouts of their own; the pub/sub connection is pinged every
//!   `ping_interval` (5 s; on RESP2 and RESP3 alike, a healthy one is kept), and the
//!   command connection is replaced after three timed-out replies in a row (a half-open
//!   connection). Nothing waits forever on a dead server.
//! - **A cancelled call leaves nothing behind.** A `lock()` future dropped at any point leaves
//!   no subscription and no lock. An acquire that timed out may still run in Redis later: if
//!   the caller held nothing, the library undoes it at once (and may try again); if it was
//!   a re-entry, the extra count cannot be undone blindly, so the call fails rather than
//!   send it again (a count per call at most), and after the last unlock the lock lingers
//!   until its lease runs out (at most the watchdog timeout, 30 s by default).
//! - **Dropping a guard** releases it in the background, on the client's runtime, even when
//!   the guard is dropped outside any runtime. Renewal stops at once; if the client's runtime
//!   itself is gone, nothing can be sent and the lock frees itself when its lease runs out.
//! - **One runtime per client.** A [`Client`](crate::Client) runs its connections, watchdog
//!   and unlock listener on the tokio runtime it was built on; lock calls may come from any
//!   runtime, but build the client on the one that outlives its use. Once that runtime has
//!   shut down, every call fails with [`Error::RuntimeGone`](crate::Error::RuntimeGone).
//! - **A re-entry under the watchdog converts the hold.** When the task holding a lock with a
//!   fixed lease takes it again with `lock()`, the key's lease becomes the watchdog's and the
//!   watchdog keeps the whole hold until its last guard is released (the guards'
//!   `valid_until()` follows). A fixed-lease re-entry into a watchdog hold stays under the
//!   watchdog.
//! - **One Redis can lose a lock in a failover.** Replication is asynchronous: a failover can
//!   lose a lock that was just written (and a fencing counter's last increments). Turn on
//!   [replica sync](crate::ClientBuilder::replica_sync), or use a
//!   [`RedLock`](crate::RedLock) over independent masters, where that matters.
//! - **On a Redis Cluster** ([`Client::connect_cluster`](crate::Client::connect_cluster))
//!   every key and channel of one lock shares a hash slot (Redisson's `{name}` rule), and
//!   waiters subscribe on that slot's master, so every kind works as on one Redis; what a
//!   failover or a slot migration costs is in the [`transport`](crate::transport) docs,
//!   under "Topologies".
//!
//! # Who owns a lock
//!
//! The owner is the **tokio task** that called `lock()`: the lock hash's field is
//! `<client-uuid>:<task-id>`, with tokio's task id as a decimal number, as Redisson uses the
//! Java thread id. So a nested `lock()` in the same task re-enters (the count goes up, and the
//! lock frees with the last release), and a different task, even of the same
//! [`Client`](crate::Client), waits.
//!
//! A guard remembers its owner ([`LockGuard::owner`](crate::LockGuard::owner)), so it can be
//! moved to, and released from, any task. Guards of reentrant calls by one task share one lease
//! and one lost signal.
//!
//! Code outside any task (the body of `#[tokio::main]` or `#[tokio::test]`, or any `block_on`)
//! has no task id. There the owner is a per-thread id with bit 62 set (4611686018427387904 and
//! up): it can never equal a task id, which tokio counts from 1, and it stays below `i64::MAX`
//! for Java readers. Two `block_on` calls on one thread are one owner.
//!
//! Each `Client` has its own random uuid ([`Client::id`](crate::Client::id)): two clients never
//! share ownership, even in one process. A [`RedLock`](crate::RedLock) or
//! [`MultiLock`](crate::MultiLock) sends one owner field (with the first lock's client id) to
//! every node, so a re-entry is a re-entry everywhere.
//!
//! # Fair locks
//!
//! A [`FairLock`] gives the lock out first come, first served: same methods,
//! guard, watchdog and reentrancy as an [`RLock`], with Redisson's `RFairLock`
//! layout (see the [`protocol`](crate::protocol) docs). An `RLock` wakes one waiter per
//! release too, but a task that releases and asks again at once, or one on a faster machine,
//! may take it ahead of others that waited longer; a fair lock does not let that happen.
//!
//! ## What a fair lock promises
//!
//! - **Arrival order.** A waiter joins the queue (`redisson_lock_queue:{name}`) with its first
//!   waiting attempt, after it subscribed to its own channel; only the head of the queue may
//!   take a free lock, so waiters get the lock in the order they joined, and a task that
//!   releases and asks again queues behind everyone already waiting.
//!   [`try_lock`](crate::FairLock::try_lock) never jumps the queue: it fails while others are
//!   queued.
//! - **One waiter woken per release.** The unlock publishes to the head's own channel
//!   (`redisson_lock__channel:{name}:<owner>`); nobody else wakes, so a release costs the
//!   unlock and the head's acquire, two script calls, however long the queue.
//! - **Giving up is immediate.** A waiter whose wait runs out
//!   ([`try_lock_for`](crate::FairLock::try_lock_for)) or whose future is dropped leaves the
//!   queue at once; if the lock is free, the new head is told. A `try_lock_for` that returns
//!   `None` has already left.
//! - **Dead waiters do not stall the queue.** Each waiter has a deadline on the Redis server's
//!   clock (`TIME` inside the scripts, never a client clock), pushed forward by its client's
//!   heartbeat every quarter of
//!   [`fair_waiter_timeout`](crate::ClientBuilder::fair_waiter_timeout) (5 s by default, so
//!   every 1.25 s). A waiter whose deadline passes is dropped from the queue by the next script
//!   call on the lock, wherever it stands; the heartbeats of the other waiters make that call
//!   within the timeout. A waiter whose process died with its connection closed is passed over
//!   within a tenth of a second: when the lock frees and nobody listens for the head (counted
//!   with `PUBSUB NUMSUB`, or `PUBSUB SHARDNUMSUB` with sharded pub/sub, on the node that
//!   holds the lock, where waiters subscribe), the head is told all the same and keeps its
//!   turn for 100 ms, since a Redisson waiter subscribes only after joining the queue; then
//!   the unheard waiters at the head step back behind the first one that can hear, and only
//!   that one is told (the releasing client looks again once the 100 ms have passed).
//!   A head that is told its turn and does not take it (a future nobody polls any more) is no
//!   longer refreshed, and is dropped like a dead waiter.
//! - **Live waiters keep their places.** The heartbeat keeps a waiting task queued however
//!   long it waits, through Redis being unreachable for up to half the timeout.
//!
//! ## Its limits
//!
//! - **Order is arrival at Redis**, not the order in which tasks called `lock()`: two calls a
//!   moment apart on different machines queue in the order their scripts ran.
//! - **A waiter whose pub/sub connection is reconnecting** (or, on a cluster, whose
//!   subscription is moving to a new master) when its turn comes steps back one place for
//!   each release it missed, and is woken to re-check when it is subscribed again; it never
//!   leaves the queue while its client refreshes its deadline.
//! - **A frozen process** (SIGSTOP, a long GC pause, a cut network) still holds a live
//!   connection, so it is not passed over at once: it holds the queue up until its deadline
//!   passes, at most `fair_waiter_timeout` (Redisson's fair lock: up to 5 minutes by default).
//! - **A waiter's turn is not a reservation against a lease running out.** Fairness decides
//!   who gets a free lock; mutual exclusion still holds only while the holder's lease holds
//!   (see [guarantees and caveats](crate::locks#guarantees-and-caveats)).
//! - **Mixing with Redisson's `RFairLock`** on one name keeps mutual exclusion. Redisson's
//!   waiters set client-clock deadlines chained behind each other and shorten every deadline
//!   behind them by their `fairLockWaitTimeout` when they take the lock or give up; give the
//!   client that wait with
//!   [`redisson_fair_lock_wait`](crate::ClientBuilder::redisson_fair_lock_wait) and the
//!   queue keeps its order (tested against Redisson with a mixed queue), or a Rust waiter
//!   behind a Java one is dropped early and rejoins at the tail.
//!
//! # Fencing tokens
//!
//! A lease cannot stop a holder that was paused past it (a GC pause, SIGSTOP, swapping) from
//! waking up and writing after another client took the lock. A fencing token lets the resource
//! refuse it.
//!
//! - [`Client::fenced_lock`](crate::Client::fenced_lock) makes a
//!   [`FencedLock`]: an `RLock` (same methods, guard, watchdog, reentrancy)
//!   whose acquire script also `INCR`s `redisson_lock_token:{<name>}`, Redisson's
//!   `RFencedLock` counter, in the same call: no extra round trip.
//!   [`LockGuard::fencing_token`](crate::LockGuard::fencing_token) is that token (`Some` for a
//!   fenced lock, `None` for other kinds). Every acquire, a re-entry included, draws a token
//!   strictly greater than all before it for that name, so tokens follow the order in which
//!   holders got the lock.
//! - The resource remembers the highest token it accepted and refuses lower ones.
//!   [`Client::fenced_set`](crate::Client::fenced_set) does that for a Redis key: one script
//!   sets the value if the token is at least the highest seen (kept in
//!   `redis_rlock_fence:{<key>}`), and returns whether it did. Equal tokens pass, so one holder
//!   may write many times. Tokens are compared exactly over their whole range (`u64` for
//!   `fenced_set`; a fenced lock's counter stops at `i64::MAX`, Redis' `INCR` limit, with an
//!   error).
//! - The counter has no expiry and this crate never resets it; tokens grow as long as Redis
//!   keeps the key. Where tokens must keep growing across a Redis restart or failover, run
//!   Redis with persistence (`appendfsync always` for the strictest guarantee).
//!
//! ## Fencing across the masters of a RedLock
//!
//! `RedLock::new(masters.iter().map(|m| m.fenced_lock(name)).collect())` is a
//! [`RedLock<Fenced>`](crate::RedLock): each master's acquire draws from that master's own
//! counter, and the counters disagree, since each holder talks to a majority of its own. The
//! guard's [`fencing_token`](crate::GroupGuard::fencing_token) is made to grow anyway:
//!
//! 1. The group's token `T` is the greatest its majority drew.
//! 2. Before the guard is returned, `T` is written back: every master that holds the lock
//!    raises its counter to at least `T`, in one script that first checks that this owner
//!    still holds the lock there (`fenced_raise.lua`). At least a majority must confirm within
//!    the node timeout; otherwise the acquire counts as failed and is retried. A master that
//!    answers after the majority gets the write-back too, when it joins.
//! 3. Why that suffices: the next holder's majority shares at least one master `m` with the
//!    majority that confirmed `T`. On `m` the next holder could take the lock only after this
//!    holder's hold there was gone, so after the write-back: its draw on `m` is greater than
//!    `T`, and its token, the greatest of its draws, is too.
//!
//! This costs one more round trip per acquire (in parallel on every master). It assumes, as
//! the `RedLock` itself does (see the [`groups`](crate::groups) docs), that masters do not
//! forget: a master restarted without its data resets its counter, and if it is the one shared
//! master, a later holder may draw a lower token. Because the write-back reaches every master
//! that holds the lock, tokens survive as many forgetful masters as the masters that confirmed
//! exceed a majority (two of five when all five held it). Run the masters with
//! `appendonly yes` and `appendfsync always` where tokens must never go back.

pub(crate) mod acquire;
pub(crate) mod attempt;
pub(crate) mod distributed;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod guard;
pub(crate) mod kind;
pub(crate) mod lock;
pub mod read_write;
pub(crate) mod release;
pub(crate) mod wait;
pub(crate) mod wait_registry;

pub use distributed::{DistributedGuard, DistributedLock};
pub use fair::{Fair, FairLock};
pub use fenced::{Fenced, FencedLock};
pub use guard::LockGuard;
pub use kind::{LockKind, Reentrant};
pub use lock::{ForceUnlockOutcome, Lock, RLock};
pub use read_write::{Read, ReadLock, ReadWriteLock, Write, WriteLock};
