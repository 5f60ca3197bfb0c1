//! Semaphores and latches: [`Semaphore`], [`PermitExpirableSemaphore`] and
//! [`CountDownLatch`], with the layouts, scripts and messages of Redisson's `RSemaphore`,
//! `RPermitExpirableSemaphore` (3.52) and `RCountDownLatch`, so that Java services and Rust
//! services share them by name.
//!
//! They share the client's connections and its unlock listener with the locks, and wait
//! as the locks do: woken by messages, with every wait bounded.
//!
//! # Which one to use
//!
//! | | [`Semaphore`] | [`PermitExpirableSemaphore`] | [`CountDownLatch`] |
//! |---|---|---|---|
//! | for | a pool of N interchangeable permits | the same, where a holder may die | waiting until N things happened |
//! | a holder that dies | keeps its permits forever | loses its permit when its lease runs out | (no holders) |
//! | a call takes | any number of permits | one permit, with an id and a lease | — |
//! | released by | the guard, or anyone ([`Semaphore::release`]) | the permit, or its id from any client | — |
//!
//! A plain semaphore's permits have **no owner and no expiry** (Redisson's layout): permits
//! taken by a process that crashes, or by an acquire whose reply was lost, stay taken until
//! someone gives them back with [`Semaphore::release`] or
//! [`add_permits`](Semaphore::add_permits). Use a [`PermitExpirableSemaphore`] where that
//! cannot be allowed: each permit comes back by itself when its lease runs out, and its
//! holder is told ([`ExpirablePermit::lost`]).
//!
//! # Layout (Redisson-compatible)
//!
//! `<key>` is the client's [`key_prefix`](crate::ClientBuilder::key_prefix) followed by the
//! name. Redis' integers are decimal strings.
//!
//! | what | Redis | notes |
//! |---|---|---|
//! | semaphore | string at `<key>` | the free permits; no expiry; may go below 0 through `add_permits(-n)` |
//! | its channel | `redisson_sc:{<key>}` | the count after a release, or the permits set (`try_set_permits`) |
//! | expirable semaphore | string at `<key>` | the free permits |
//! | its permits | sorted set `{<key>}:timeout` | permit id (16 random bytes) → expiry in ms since the epoch (`922337203685477`: none, Redisson's lease-less permits) |
//! | its channel | `redisson_sc:{<key>}` | the count after a release or a reclaim, the permits set, or the permits added |
//! | latch | string at `<key>` | the count; deleted when it reaches 0 |
//! | its channel | `redisson_countdownlatch__channel__{<key>}` | `0`: the count reached zero; `1`: a new count, or the latch deleted |
//! | request latch (cluster and Sentinel clients) | `redisson_unlock_latch:{<key>}:<request-id>` | one per count change, the change's answer, `SET … PX` by the same script run; deleted after the reply (batched), expires otherwise (see [retries](#retries)) |
//!
//! A key that already contains `{` keeps its own hash tag (`redisson_sc:<key>`,
//! `<key>:timeout`), as in Redisson, except in the latch's channel, which Redisson always
//! builds with braces around the key. On a Redis Cluster every name of one semaphore or
//! latch must share its key's slot: a name whose braces split them (`a{b` for the
//! semaphores; any name with a hash tag for a latch, such as `{user}:batch`, since its
//! channel's tag then differs) is refused with
//! [`Error::CrossSlotName`](crate::Error::CrossSlotName), nothing sent.
//!
//! The same string layout serves all three kinds, so Redis cannot tell a semaphore from a
//! latch of the same name: give each its own name. A key that holds anything else (a lock
//! hash, a list, a string that is no integer; for an expirable semaphore, a
//! `{<key>}:timeout` that is no sorted set) is refused with
//! [`Error::NotALock`](crate::Error::NotALock), nothing written.
//!
//! # What the scripts do
//!
//! The effects are Redisson's, script by script (`count_*.lua`, `semaphore_*.lua`,
//! `permit_*.lua`, `latch_*.lua` in `lua/`); each also checks the shape of
//! its keys first, publishes before it writes (so a refused `PUBLISH` leaves nothing half
//! done), and takes the publish command as an argument (`publish`, or `spublish` with
//! sharded pub/sub).
//!
//! - Set (`try_set_permits`, `try_set_count`): if the key is absent, `SET` and publish the
//!   permits (a latch: `1`).
//! - Take (semaphore): if the count is at least the permits wanted, `DECRBY`.
//! - Give back (semaphore): `INCRBY`, publish the new count. Add: `SET` to count + n
//!   (which drops a TTL, as Redisson's does), publish it. Drain: `SET 0`.
//! - Take (expirable): give back up to one expired permit per permit wanted, then as the
//!   semaphore, and `ZADD` the new id with now + lease; else answer the time until the
//!   nearest expiry. Release by id: if the id is there, `ZREM`, `INCRBY 1`, publish the new
//!   count. Counting calls give back every expired permit first, as Redisson's do. New
//!   lease (`update_lease_time`): give back every expired permit, then if the id is there,
//!   `ZADD` it with now + the lease. Time left (asked when a permit's own deadline passed):
//!   `ZSCORE` of the id, minus now.
//! - Count down: `DECR`; at 0 (or below) `DEL`, and at exactly 0 publish `0`.
//! - Delete: `DEL` (a latch: publish `1` when there was one).
//!
//! # Waiting
//!
//! A waiting call (`acquire`, `try_acquire_for`, `wait`, `wait_for`) never polls: it tries,
//! subscribes to the channel (one subscription per channel per client, shared by its
//! waiting tasks), tries again, then waits for a message. Any message that may let a waiter
//! through wakes **every** local waiter of the channel to try again (a semaphore's
//! message with a count of 0 or below wakes none): waiters may want different numbers of
//! permits, and only their own try can tell who fits. Each waiter tries once more for every
//! such message, even one whose try was under way when the message came; a waiter that
//! still cannot go waits again. One release thus costs a try per local waiter.
//!
//! Every wait is bounded even when a message is lost: a waiter tries again after at most
//! [`RECHECK`] (5 s) without a message, an expirable semaphore's waiter also when the
//! nearest taken permit expires (nothing announces an expiry), and every waiter at once
//! when its channel is subscribed again after a lost connection or a moved slot (messages
//! of the gap are gone). Redis errors end a wait after the client's `retry_attempts`; on a
//! Redis Cluster a try refused for a topology change (`MOVED`, `ASK`, `TRYAGAIN`,
//! `CLUSTERDOWN`: a slot on the move, a master failing over) is tried again for as long
//! as the wait allows, up to 30 s, as a lock's wait does.
//!
//! # Guards
//!
//! [`SemaphoreGuard`] and [`ExpirablePermit`] give their permits back on
//! [`release`](SemaphoreGuard::release) (which reports whether it worked) and on drop (in
//! the background, on the client's runtime); `forget()` keeps them taken. An expirable
//! permit also has a [`lost`](ExpirablePermit::lost) future and a
//! [`valid_until`](ExpirablePermit::valid_until) deadline, as a [`LockGuard`](crate::LockGuard)
//! has: it resolves when the lease runs out (before the semaphore can give the permit to
//! someone else), when this client releases it by id, and when, after a reconnection, Redis
//! no longer has it (a restart, a failover). Releasing a lost permit is
//! [`Error::PermitLost`](crate::Error::PermitLost) and never a second release. A permit
//! released by another client is found gone when its holder releases it.
//!
//! # Retries
//!
//! Calls that are harmless to run twice (reads, sets, deletes, releasing a permit by its
//! id) are retried after failures to reach Redis. Count changes (`acquire` of a plain
//! semaphore, its releases, `add_permits`, `drain_permits`, `count_down`) would count
//! twice if run twice:
//!
//! - On one server they are retried only when they certainly did not run (as Redisson
//!   sends them once): when a reply is lost, the call fails, and the change may or may not
//!   have been made.
//! - A Redis Cluster or Sentinel client, whose failovers break connections by design,
//!   sends each with a request latch, as Redisson's unlocks carry an unlock latch: the
//!   script that makes the change also keeps its answer for the request's retries, under
//!   `redisson_unlock_latch:{<key>}:<request-id>` (in the count's slot, so on the same
//!   master and its replicas as the change). A retry whose first try ran answers as that
//!   try did and counts nothing, so a count change whose reply was lost is retried like
//!   any other call, for as long as its latch lives (about 45 s with the default
//!   settings). The key needs the README's `~redisson_unlock_latch:*` rule
//!   (which lock releases, writing no latch, do not); Redisson never reads it.
//!
//! On a Redis Cluster every call, the background releases of dropped guards included,
//! rides out a topology change as a lock's unlock does: a call refused with `MOVED`,
//! `ASK`, `TRYAGAIN` or `CLUSTERDOWN` (it certainly did not run) is sent again after the
//! retry backoff for up to 30 s from its first try, and a failure to reach Redis between
//! two such refusals (the dead master's broken connection, before its replica is
//! promoted) counts against `retry_attempts` afresh. A half-way slot migration or a
//! failover then costs the calls its length, not an error.
//!
//! An expirable permit taken by a try whose reply was lost is released by its id before
//! the next try. Writes do not wait for replicas
//! ([`replica_sync`](crate::ClientBuilder::replica_sync) applies to locks): a change
//! acknowledged by a master that dies before its replica has it is lost with it, as any
//! Redis write is.
//!
//! # Differences from Redisson
//!
//! - **Bounded waits**: Redisson's semaphore `acquire` and latch `await` wait for a message
//!   without bound; here every wait re-checks (see [waiting](#waiting)).
//! - **One wake-up for all**: a message wakes every local waiter of the channel; Redisson
//!   wakes as many of its waiters as the message's count.
//! - **The server's clock**: an expirable permit's expiry is written, and expired permits
//!   are found, on the Redis server's clock (`TIME` in the scripts); Redisson uses the
//!   clock of the client that calls. Keep the clocks of Java services sharing a semaphore
//!   with this crate in sync with Redis' (NTP): a Java client whose clock runs ahead gives
//!   permits back that much early.
//! - **A lease for every permit**: [`PermitExpirableSemaphore::acquire`] takes a lease;
//!   Redisson's permits without one are honoured (never given back, never waited for).
//!   A call takes one permit.
//! - **Deleted latches open**: a deleted latch's count reads 0, so its waiters here return;
//!   Redisson's wait for the next zero (its delete sends "new count").
//! - **Input**: 0 permits to take or give back, counts past a Java `int` (semaphores) or a
//!   Redis integer (latches), keys of other types, are typed errors with nothing written;
//!   Redisson returns early, or fails in the script. A count below zero reads 0.

mod call;
mod check;
mod expirable;
mod handle;
mod latch;
pub(crate) mod permit;
mod semaphore;
pub(crate) mod semaphore_guard;
mod waiting;

pub use expirable::PermitExpirableSemaphore;
pub use latch::CountDownLatch;
pub use permit::ExpirablePermit;
pub use semaphore::Semaphore;
pub use semaphore_guard::SemaphoreGuard;
pub use waiting::RECHECK;
