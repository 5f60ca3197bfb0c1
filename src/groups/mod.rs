//! Groups of locks held as one: [`RedLock`] (a majority of independent
//! masters) and [`MultiLock`] (every lock), the same machinery with a different quorum.
//!
//! Each node is asked with the single lock's own acquire attempt (its script, its hold in
//! that client's registry, renewal by that client's watchdog, and its undo when an answer
//! comes after the caller left), all at once and with one owner field, so that a re-entry
//! is a re-entry on every node. The waiting between rounds is the single lock's waiting
//! loop. A group of fenced locks also makes its token agree across majorities before it
//! returns.
//!
//! This module is public for the plumbing the group types are made of; use the group types
//! themselves, [`RedLock`] and [`MultiLock`], from the
//! crate root.
//!
//! # RedLock and MultiLock
//!
//! Both take one owner's lock on several nodes at once, each through an
//! [`RLock`](crate::RLock) (or a [`FencedLock`](crate::FencedLock), for a `RedLock`) from a
//! [`Client`](crate::Client):
//!
//! - [`RedLock::new(locks)`](crate::RedLock::new), one lock per independent master, is held
//!   while a majority (`N / 2 + 1`) holds it: for deployments where one Redis and its
//!   asynchronous failover are not trusted to keep a lock.
//! - [`MultiLock::new(locks)`](crate::MultiLock::new), several locks on one Redis or several,
//!   is held while all of them are: for work on several resources at once.
//!
//! They offer `lock`, `lock_with_lease`, `try_lock`, `try_lock_for` and `try_lock_with`, and
//! return a [`GroupGuard`](crate::GroupGuard) with
//! [`unlock`](crate::GroupGuard::unlock), [`lost`](crate::GroupGuard::lost),
//! [`is_lost`](crate::GroupGuard::is_lost), [`valid_until`](crate::GroupGuard::valid_until),
//! [`held_on`](crate::GroupGuard::held_on) and
//! [`fencing_token`](crate::GroupGuard::fencing_token).
//!
//! ## How a RedLock is taken
//!
//! The Redlock algorithm, step by step:
//!
//! 1. The same owner field (`<client-uuid>:<task-id>`, with the first lock's client id) and the
//!    same lease go to every master at once, each through the reentrant lock's own script.
//!    Each master has a per-node timeout
//!    ([`with_node_timeout`](crate::RedLock::with_node_timeout), 100 ms by default), small
//!    next to any lease.
//! 2. The call returns as soon as a majority said yes, without waiting for stragglers; a master
//!    that answers later joins the guard. Time is measured on the monotonic clock: each
//!    master's validity is its request's start + lease − drift (1 % of the lease + 2 ms), and
//!    the group's is the majority-th latest of those, so the group is acquired only if time is
//!    left after reaching the majority.
//! 3. Otherwise what was taken is released on every master at once, and awaited (up to the node
//!    timeout). A master that did not answer in time releases what its late answer took, as
//!    soon as it comes. Then the call waits for an unlock message from a master that said the
//!    lock was held elsewhere (its own rollback published on the others), or the holders' TTL,
//!    or the caller's remaining wait, whichever comes first, and tries again. After a split
//!    vote (rivals each got some masters), it first pauses 0–10 ms at random, so that they do
//!    not split again. Undoing a late answer never shortens the lease of a hold the same task
//!    took meanwhile: it re-applies that hold's lease.
//! 4. Each master's hold is renewed by its own client's watchdog (every third of that client's
//!    `watchdog_timeout`), or runs out with the fixed lease. When fewer than a majority can be
//!    renewed before their deadlines, the guard's `lost()` resolves with
//!    [`QuorumLost`](crate::LostReason::QuorumLost).
//! 5. `unlock()` releases on every master at once and returns as soon as a majority has
//!    confirmed: the lock is free from then on, since another owner can gather its majority on
//!    those masters. The others' releases finish in the background. A minority that cannot be
//!    reached does not fail the unlock: each is logged with `warn!`, and its hold runs out with
//!    its lease. Reentrancy works as for `RLock`: the field is the same everywhere.
//! 6. When more than a minority of masters cannot be reached, `retry_attempts` rounds in a row
//!    (the first lock's client's setting), the call fails with
//!    [`Error::QuorumUnreachable`](crate::Error::QuorumUnreachable), in bounded time, with
//!    nothing left behind on the masters that answered.
//! 7. Refused before anything is sent, with
//!    [`Error::InvalidArgument`](crate::Error::InvalidArgument): a lease (fixed, or a client's
//!    watchdog timeout) that leaves no time after the node timeout and the drift allowance, and
//!    a `RedLock` given two locks on one master (two clients with one URL) or on one Redis
//!    Cluster (see [independent masters](#independent-masters)).
//!
//! ## Independent masters
//!
//! A `RedLock` refuses, with [`Error::InvalidArgument`](crate::Error::InvalidArgument),
//! locks that are not on independent masters:
//!
//! - **Clients of one Redis** are told apart by the URL they were built with: two clients
//!   with one URL are refused. Two URLs that reach one server (a host name and its address)
//!   are not caught: give each client the same spelling of its master's address.
//! - **A Redis Cluster is one voter**, however many masters it has: its masters share one
//!   failover mechanism, and a key lives on one of them. Clients of independent clusters
//!   can make a `RedLock` (one lock per cluster), as can clients of clusters and of single
//!   masters mixed. Two cluster clients that share a seed URL are refused; so are two whose
//!   clusters list a node in common, asked at the group's first call (`CLUSTER SLOTS` on any
//!   node, within the node timeout), whatever seeds each was given. A cluster that does not
//!   answer in time is asked again at the next call, since a `RedLock` must work with a
//!   minority of its masters down; once each cluster answered, the group does not ask
//!   again.
//!
//! ## What a RedLock protects against, and what it assumes
//!
//! Any minority of masters may crash, freeze, be cut off or restart empty: the lock stays held
//! and exclusive. Two groups cannot both hold a majority of the same N masters while every hold
//! lives: majorities overlap, and a master holds one owner's field at a time. The argument
//! needs three things:
//!
//! - **Clocks that run at about the same rate.** Leases are durations, measured by each
//!   master's clock, while validity is measured by the client's monotonic clock, with the
//!   drift allowance covering a 1 % rate difference. Wall clocks need not agree.
//! - **No master forgets a lock while a holder counts on it.** A master that crashes and
//!   restarts empty gives its vote away again. Keep a crashed master down for longer than the
//!   longest lease, or run it with `appendfsync always`. A majority of the others still holds
//!   the lock meanwhile.
//! - **No holder acting past its validity.** A process paused past its lease (GC, swapping,
//!   SIGSTOP) wakes up believing it holds a lock that others may have taken. No lease-based
//!   lock can prevent that. Race the work against [`GroupGuard::lost`](crate::GroupGuard::lost)
//!   and check [`valid_until`](crate::GroupGuard::valid_until) between steps; where a stale
//!   write would do harm, have the resource check a fencing token: a `RedLock` of fenced locks
//!   keeps its tokens growing across majorities (see
//!   [fencing tokens](crate::locks#fencing-across-the-masters-of-a-redlock)).
//!
//! Redisson deprecated its `RedLock` over this dispute (Martin Kleppmann's critique of
//! Redlock); its advice for one Redis with replicas is `WAIT`-based replica sync, which this
//! crate has too ([`ClientBuilder::replica_sync`](crate::ClientBuilder::replica_sync)). A
//! `RedLock` over independent masters is for when no single Redis deployment may decide alone.
//!
//! ## MultiLock
//!
//! A `MultiLock` runs the same machinery with "all" as its quorum, and its locks may share one
//! Redis. Every lock is asked at once, with one owner field and one lease. If any is held
//! elsewhere, the ones taken are released (awaited) before the call waits for an unlock message
//! from the lock that was busy (bounded by the holders' TTLs and the caller's wait), and tries
//! again. So a waiting `MultiLock` never sits on part of what it wants, and two callers asking
//! for the same resources in different orders cannot deadlock: take several resources with one
//! `MultiLock` rather than one lock after another. Each lock's hold is renewed by its own
//! client's watchdog; the guard is lost as soon as any lock is, with that lock's reason.
//!
//! A cap on the hold time ([`with_max_hold`](crate::MultiLock::with_max_hold)) works for a
//! group as for one lock (see [guarantees and caveats](crate::locks#guarantees-and-caveats));
//! a lock with a cap of its own keeps the tighter of the two.

mod contender;
pub(crate) mod fence;
mod group;
pub(crate) mod guard;
mod independence;

pub use group::{GroupKind, MultiLock, RedLock};
