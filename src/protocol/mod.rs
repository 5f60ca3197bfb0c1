//! The Redis protocol of a lock, exactly as Redisson lays it out: the names of its keys and
//! channels (`names`, and the public [`layout`]), the owner field (`owner`), what each lock
//! kind is in Redis (`kinds`: its kept keys, its scripts and the shape of their calls), the
//! Lua scripts' Rust bindings (`scripts`), sent as EVALSHA on the one connection type
//! (`conn`) and coalesced into multi-lock calls under load (`batch`); on a Redis Cluster,
//! the hash slot of a key and batches grouped by slot or master (`slot`), and the cluster's
//! slot map (`slot_map`).
//!
//! Nothing here knows about connections beyond the one it is handed.
//!
//! # Wire layout (Redisson-compatible)
//!
//! A Java service using Redisson and a Rust service using this crate can share locks: both
//! write the same keys, fields and messages.
//!
//! | what | Redis | notes |
//! |---|---|---|
//! | lock | hash at `<key_prefix><name>` | field `<client-uuid>:<task-id>` → reentry count; the lease is the key's PEXPIRE |
//! | unlock channel | `redisson_lock__channel:{<key>}` | payload `0` on the final release (wakes one waiter); a key that already contains `{` is used as is: `redisson_lock__channel:<key>` |
//!
//! Redisson's unlocks also write a latch per request,
//! `redisson_unlock_latch:{<key>}:<request-id>`, for a retried unlock to read its first
//! try's answer. This crate's releases write none: each says how many holds its owner should
//! count before it, and a retry that finds fewer knows its earlier try ran (see
//! `locks::release`). A Redis Cluster or Sentinel client's semaphore and latch count changes do write
//! request latches under that prefix (see [`sync`](crate::sync#retries)).
//!
//! A [`FairLock`](crate::FairLock) adds, as Redisson's `RFairLock`:
//!
//! | what | Redis | notes |
//! |---|---|---|
//! | waiting queue | list at `redisson_lock_queue:{<key>}` | owner fields, head first; only the head may take a free lock |
//! | waiter deadlines | zset at `redisson_lock_timeout:{<key>}` | owner → deadline in ms on the Redis server's clock; past it the waiter is dropped |
//! | waiter channel | `redisson_lock__channel:{<key>}:<owner>` | payload `0`: "the lock is free and you head the queue" |
//!
//! The queue and the deadlines have no TTL, as in Redisson, so no wait may leave them
//! behind: a waiter that takes the lock or gives up leaves both (`fair_leave.lua` also
//! takes the `unheard:<owner>` record a release may have left for it in the deadlines, see
//! `fair_common.lua`), and every fair script deletes the deadlines set once the queue is
//! empty. A waiter whose process died while queued is dropped by the next call on the lock
//! after its deadline, as in Redisson; with no further call, `rlock leaks` lists its queue.
//!
//! A [`FencedLock`](crate::FencedLock) adds, as Redisson's `RFencedLock`, the token counter
//! `redisson_lock_token:{<key>}` (a string, no expiry), and
//! [`Client::fenced_set`](crate::Client::fenced_set) keeps the highest token it accepted for a
//! resource key in `redis_rlock_fence:{<key>}`.
//!
//! The semaphores and the count-down latch (Redisson's `RSemaphore`,
//! `RPermitExpirableSemaphore` and `RCountDownLatch`) have their layout and messages in the
//! [`sync`](crate::sync#layout-redisson-compatible) docs.
//!
//! A [`ReadWriteLock`](crate::ReadWriteLock) keeps Redisson's `RReadWriteLock` layout: one
//! hash with a `mode`, a timeout key per read hold and the channel `redisson_rwlock:{<key>}`,
//! set out with its scripts in the [`read_write`](crate::locks::read_write#layout-redissons)
//! docs.
//!
//! The owner field is described in [who owns a lock](crate::locks#who-owns-a-lock). Every key
//! and channel of one lock shares the lock key's hash slot.
//!
//! ## Scripts
//!
//! The scripts live in the repository's top-level `lua/`, one file per script with the
//! helpers they share beside them; the bindings in `scripts` include them at build time.
//! They run with `EVALSHA` (loaded at connect, and again on `NOSCRIPT`). Unlock channels are passed as arguments, not keys (a channel needs no key
//! permission), and so is the command that publishes on them, `publish` or `spublish`
//! (sharded pub/sub on a cluster), as Redisson passes it; "`PUBLISH`" below means that
//! command. Every script that frees a lock publishes before it deletes, so a lock is never
//! freed without the message its waiters wait for. The release scripts carry the
//! `#!lua flags=allow-oom` line, so that releases work when Redis is full; the read-only ones
//! carry `no-writes`. Every script checks that the keys it writes have a lock's shape
//! (`lock_common.lua`, prepended at build time) before it writes, and answers `NOTALOCK`
//! otherwise ([`Error::NotALock`](crate::Error::NotALock)).
//!
//! - `acquire.lua`: if the key does not exist or the owner's field does, `HINCRBY field 1` and
//!   `PEXPIRE lease`, answer -3 ("acquired"); else answer the key's PTTL. Redisson's script,
//!   run over every key of the call and answering an array (Redisson answers nil for
//!   "acquired", which a Lua array cannot hold).
//! - `unlock.lua`: owner's field missing → -1 (on a retry of a last release, -2: an earlier
//!   try may have freed it); on a retry, a count below `expected` → 0 with nothing written
//!   (its earlier try ran); count above 1 → `HINCRBY -1`, `PEXPIRE`, 0; else `PUBLISH 0`,
//!   `DEL`, 1. The same effects as Redisson's script, with one `HGET` where Redisson runs
//!   `HEXISTS` and `HINCRBY`, and no latch key.
//! - `acquire.lua` and `unlock.lua` take any number of locks: concurrent acquires (and
//!   releases) of plain locks by the tasks of one client go out as one call when they
//!   coincide (up to 8 calls of a kind in flight; those that arrive meanwhile go out together).
//! - `renew.lua`: for each key of a watchdog batch, `PEXPIRE` if the owner's field still
//!   exists; 1 or 0 per key. One lease for the batch, or one per key for locks near their
//!   maximum hold time.
//! - `still_held.lua`: whether each fixed-lease hold (and each expirable permit: its id in
//!   the permits' sorted set) is still there, after a reconnection.
//! - `inspect.lua`: PTTL and one owner's count, for `is_locked`, `hold_count` and
//!   `remaining_ttl`.
//! - `force_unlock.lua`: if the key is a lock, `PUBLISH 0` and `DEL`.
//! - `fenced_acquire.lua`: `acquire.lua`, plus `INCR redisson_lock_token:{<key>}` on success
//!   (first, so that a counter that cannot grow fails before anything is written); returns
//!   `{1, token}` with the token as a decimal string (exact above 2^53), or `{0, pttl}`.
//!   `fenced_set.lua`: the fenced write, comparing tokens as decimal strings
//!   (`fence_common.lua`). `fenced_raise.lua`: a fenced `RedLock`'s write-back, raising the
//!   counter to the group's token if the owner still holds the lock there.
//! - `fair_*.lua`, each prefixed at build time with `fair_common.lua` (server clock, purge of
//!   stale waiters, telling the head): `fair_acquire.lua` (re-entry; a free lock to the head or
//!   to anyone if nobody is queued; else join or refresh the place when waiting; returns the
//!   holder's PTTL or, for a free lock headed by another waiter, the time to that waiter's
//!   deadline), `fair_unlock.lua` (as `unlock.lua`, telling the head), `fair_leave.lua`,
//!   `fair_force_unlock.lua`, and `fair_heartbeat.lua` (refreshes a batch of waiters'
//!   deadlines, purges their queues, and tells a head nobody told).
//! - The synchronizers' scripts, each prefixed at build time with `sync_common.lua` (the
//!   count's shape check), and the expirable semaphore's with `permit_common.lua` (server
//!   clock, giving expired permits back): `count_try_set.lua`, `count_read.lua`,
//!   `count_delete.lua`, `semaphore_acquire.lua`, `semaphore_change.lua` (release and add),
//!   `semaphore_drain.lua`, `permit_acquire.lua`, `permit_release.lua`, `permit_count.lua`,
//!   `permit_update.lua` (a new lease), `permit_left.lua` (the time a permit has left),
//!   `latch_count_down.lua`; what each does is in the [`sync`](crate::sync#what-the-scripts-do)
//!   docs.
//! - `read_*.lua`, `write_*.lua` and `rw_*.lua`, each prefixed at build time with
//!   `rw_common.lua`: the read-write lock's acquire, unlock, force-unlock, inspect and
//!   renewal (see [`read_write`](crate::locks::read_write)).
//! - `acl_probe.lua`: which of the commands a lock kind's scripts run the connected user may
//!   run (`redis.acl_check_cmd`), so that a missing ACL rule is named before anything is
//!   written.
//!
//! ## Sharing locks with Java
//!
//! The default watchdog lease is 30 s, renewed every 10 s, like Redisson's
//! `lockWatchdogTimeout`. To share locks with Redisson, use the same names (and a
//! [`key_prefix`](crate::ClientBuilder::key_prefix) that matches any `NameMapper`), and the
//! same pub/sub kind on both sides: on a cluster, Redisson's `shardedSubscriptionMode` and
//! this crate's [`PubSubMode`](crate::PubSubMode) (whose docs pair the settings up); on one
//! Redis both publish with `PUBLISH`. Owner ids outside a tokio task stay below `i64::MAX`,
//! so a Java reader parses every field.

pub(crate) mod batch;
pub(crate) mod channels;
pub(crate) mod conn;
pub(crate) mod kinds;
pub mod layout;
pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod scripts;
pub(crate) mod slot;
pub(crate) mod slot_map;
pub(crate) mod waits;

pub use owner::Owner;
pub use slot::key_slot;
