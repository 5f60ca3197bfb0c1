//! [`RedLock`] and [`MultiLock`], the groups users see: each a thin face over one engine
//! (`Group`) that holds the locks, the [`Quorum`] as a value and the settings, and takes
//! them as one.
//!
//! While it waits, a group listens only on the nodes that answered it busy: its own rollback
//! publishes on the others, and only the holder's unlock can let it in.
//!
//! Each node is asked with the reentrant lock's own acquire attempt (its script, its hold
//! in that client's registry, renewal by that client's watchdog, and its undo when an
//! answer comes after the caller left), all at once and with one owner field, so that a
//! re-entry is a re-entry on every node. A group of fenced locks also makes its token
//! agree across majorities ([`crate::groups::fence`]) before it returns.

use crate::util::lock_metrics::LockMetrics;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::groups::contender::GroupContender;
use crate::groups::guard::GroupGuard;
use crate::groups::independence::Independence;
use crate::holds::drift;
use crate::locks::acquire::Timed;
use crate::locks::attempt::Request;
use crate::locks::distributed::{self, DistributedLock};
use crate::locks::wait::{deadline_after, wait_for, WakeUps};
use crate::locks::wait_registry::Registration;
use crate::locks::{Fenced, Lock, LockKind, RLock, Reentrant};
use crate::protocol::names::LockNames;
use crate::protocol::owner::{Identity, Owner};
use crate::util::validate;

/// How long one node may take to answer an acquire before it counts as failed, unless set
/// with `with_node_timeout`: small next to any lease, large next to a round trip to a
/// healthy node.
const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// A lock held on a majority of N independent Redis masters, for deployments where one
/// Redis (and its asynchronous failover) is not trusted to keep a lock.
///
/// Give it one [`RLock`] per master, each from a [`Client`](crate::Client)
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
#[derive(Clone)]
pub struct RedLock<K: GroupKind = Reentrant> {
    group: Group<K>,
}

impl<K: GroupKind> RedLock<K> {
    /// A RedLock over `locks`, one per independent master: [`RLock`]s, or
    /// [`FencedLock`](crate::FencedLock)s for fencing tokens. Nothing is sent until a
    /// method is called; an empty list, or two locks whose clients have the same URL or
    /// reach the same Redis Cluster (a majority must be of independent masters: see
    /// [independent masters](crate::groups#independent-masters)), is reported by the first
    /// call.
    pub fn new(locks: Vec<Lock<K>>) -> Self {
        RedLock {
            group: Group::new(locks, Quorum::Majority),
        }
    }
}

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
#[derive(Clone)]
pub struct MultiLock {
    group: Group<Reentrant>,
}

impl MultiLock {
    /// A MultiLock over `locks`. Nothing is sent until a method is called; an empty list is
    /// reported by the first call.
    pub fn new(locks: Vec<RLock>) -> Self {
        MultiLock {
            group: Group::new(locks, Quorum::All),
        }
    }
}

/// The kinds of lock a group can be made of: [`Reentrant`] and [`Fenced`],
/// whose waiters all hear one unlock channel (a fair lock's waiters wait on channels of
/// their own, in a queue a group never joins). Sealed: no other crate can make a
/// [`LockKind`], nor implement this trait for this crate's kinds.
pub trait GroupKind: LockKind {}

impl GroupKind for Reentrant {}
impl GroupKind for Fenced {}

/// The methods [`RedLock`] and [`MultiLock`] share, written once: each face gets them over
/// its `group`, so that both show them, with their docs, as their own.
macro_rules! group_methods {
    ([$($generics:tt)*] $group:ty, $lock:ty) => {
        impl<$($generics)*> $group {
            /// This group, taken in `owner`'s name instead of the calling task's, as
            /// [`Lock::with_owner`](crate::Lock::with_owner) does for one lock: every node's
            /// field is `<first lock's client uuid>:<owner id>`, and only calls for `owner`
            /// re-enter. The group's owner is the one that counts: an owner set on the locks
            /// it was made of is not used.
            #[must_use]
            pub fn with_owner(mut self, owner: Owner) -> Self {
                self.group.identity = Identity::Owner(owner);
                self
            }

            /// This group, never re-entering: each acquire is an owner of its own, as
            /// [`Lock::non_reentrant`](crate::Lock::non_reentrant) does for one lock.
            #[must_use]
            pub fn non_reentrant(mut self) -> Self {
                self.group.identity = Identity::EachAcquire;
                self
            }

            /// How long one lock's node may take to answer an acquire before it counts as
            /// failed (its answer, if it comes later, is undone). Keep it small next to the
            /// lease: the time to reach the quorum is taken off the lock's validity.
            ///
            /// Default: 100 ms.
            #[must_use]
            pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
                self.group.node_timeout = timeout;
                self
            }

            /// A cap on how long the group may be held, as
            /// [`Lock::with_max_hold`](crate::Lock::with_max_hold) sets for one lock: every
            /// node's hold ends by it, and the guard's [`lost`](GroupGuard::lost) then
            /// resolves with [`LostReason::MaxHoldReached`](crate::LostReason::MaxHoldReached).
            /// A lock with a cap of its own ([`Lock::with_max_hold`](crate::Lock::with_max_hold))
            /// keeps the tighter of the two.
            ///
            /// Checked by each call: under 10 ms or over ten years is
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), with nothing sent.
            #[must_use]
            pub fn with_max_hold(mut self, cap: Duration) -> Self {
                self.group.max_hold = Some(cap);
                self
            }

            /// The locks of the group, in the order given.
            pub fn locks(&self) -> &[$lock] {
                &self.group.locks
            }

            /// How many of the locks must be held for the group to be held.
            pub fn quorum(&self) -> usize {
                self.group.quorum()
            }

            /// Takes the group, waiting as long as it takes; each lock's client's watchdog
            /// keeps its hold alive.
            ///
            /// # Errors
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), with nothing
            /// written, for an empty group, an empty lock name, a zero node timeout, a lease
            /// (a client's watchdog timeout, here) that leaves no time after the node timeout
            /// and the drift allowance, or a `RedLock` given two locks on one master or on one
            /// Redis Cluster (see the [`groups`](crate::groups#independent-masters) docs);
            /// [`Error::QuorumUnreachable`](crate::Error::QuorumUnreachable) when too many
            /// nodes cannot be reached in `retry_attempts` rounds in a row (the first lock's
            /// client's setting).
            ///
            /// # Cancel safety
            /// Cancel safe: a dropped call leaves no subscription, and every hold it took, or
            /// that an answer still on its way takes, is released.
            pub async fn lock(&self) -> Result<GroupGuard> {
                DistributedLock::lock(self).await
            }

            /// Takes the group with a fixed lease on every lock, waiting as long as it takes.
            ///
            /// # Errors
            /// As [`lock`](Self::lock); also
            /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a lease under
            /// 10 ms or over ten years.
            ///
            /// # Cancel safety
            /// As [`lock`](Self::lock).
            pub async fn lock_with_lease(&self, lease: Duration) -> Result<GroupGuard> {
                DistributedLock::lock_with_lease(self, lease).await
            }

            /// One round, no waiting: `Ok(None)` when the group is held elsewhere.
            ///
            /// # Errors
            /// As [`lock`](Self::lock), after one round.
            ///
            /// # Cancel safety
            /// As [`lock`](Self::lock).
            pub async fn try_lock(&self) -> Result<Option<GroupGuard>> {
                DistributedLock::try_lock(self).await
            }

            /// Waits up to `wait` for the group: `Ok(None)` if it stayed held elsewhere that
            /// long.
            ///
            /// # Errors
            /// As [`lock`](Self::lock).
            ///
            /// # Cancel safety
            /// As [`lock`](Self::lock).
            pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<GroupGuard>> {
                DistributedLock::try_lock_for(self, wait).await
            }

            /// Waits up to `wait` for the group and takes it with a fixed `lease` on every
            /// lock.
            ///
            /// # Errors
            /// As [`lock_with_lease`](Self::lock_with_lease).
            ///
            /// # Cancel safety
            /// As [`lock`](Self::lock).
            pub async fn try_lock_with(
                &self,
                wait: Duration,
                lease: Duration,
            ) -> Result<Option<GroupGuard>> {
                DistributedLock::try_lock_with(self, wait, lease).await
            }
        }

        impl<$($generics)*> fmt::Debug for $group {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.group, f)
            }
        }

        impl<$($generics)*> distributed::sealed::Sealed for $group {}

        impl<$($generics)*> DistributedLock for $group {
            type Guard = GroupGuard;

            fn name(&self) -> &str {
                self.group.name()
            }

            /// Takes the group, waiting up to `wait` (`None`: as long as it takes), with a
            /// fixed lease in ms (`None`: each client's watchdog lease).
            #[tracing::instrument(level = "debug", name = "acquire", skip(self), fields(lock = %self.group.name()))]
            async fn acquire(
                &self,
                fixed_lease_ms: Option<u64>,
                wait: Option<Duration>,
            ) -> Result<Option<GroupGuard>> {
                let group = &self.group;
                let mut timed = Timed::start(&group.metrics);
                // The caller's wait counts from the call, the independence check included.
                let deadline = deadline_after(wait);
                let outcome = async {
                    let nodes = group.nodes(fixed_lease_ms)?;
                    if group.quorum == Quorum::Majority {
                        let type_name = group.quorum.type_names().0;
                        (group.independence)
                            .check(&nodes, type_name, group.node_timeout)
                            .await?;
                    }
                    let owner: Arc<str> = group.identity.field(&nodes[0].core.id_text);
                    let wake_ups = nodes.iter().map(|_| WakeUps::default()).collect();
                    // Collected from an iterator that yields nothing when no client keeps a
                    // registry: then no allocation.
                    let registrations = (nodes.iter().enumerate())
                        .filter_map(|(index, node)| {
                            Registration::new(&node.core, &node.names.key, &owner)
                                .map(|registration| (index, registration))
                        })
                        .collect();
                    let mut contender = GroupContender {
                        group,
                        nodes,
                        owner,
                        wake_ups,
                        busy: Vec::new(),
                        split: false,
                        registrations,
                    };
                    wait_for(&mut contender, deadline).await
                }
                .await;
                timed.ended(&outcome);
                outcome
            }
        }
    };
}

group_methods!([K: GroupKind] RedLock<K>, Lock<K>);
group_methods!([] MultiLock, RLock);

/// How many of a group's locks must be held for the group to be held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quorum {
    /// A [`RedLock`]'s: a majority, which is worth something only over independent masters.
    Majority,
    /// A [`MultiLock`]'s: every lock.
    All,
}

impl Quorum {
    /// The group's type, as `Debug` and errors name it, and as a metric label.
    fn type_names(self) -> (&'static str, &'static str) {
        match self {
            Quorum::Majority => ("RedLock", "redlock"),
            Quorum::All => ("MultiLock", "multilock"),
        }
    }
}

/// One lock of a group: its client's core, its names and what to ask of it.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) core: Arc<Core>,
    pub(crate) names: Arc<LockNames>,
    pub(crate) request: Request,
}

/// Several locks taken as one, what both faces are.
///
/// The same owner field (`<client-uuid>:<task-id>`, with the first lock's client id, or an
/// explicit owner's) and the same lease go to every lock, all at once. The group is
/// acquired as soon as its quorum of locks is, and only if time is left of the lease once
/// the drift allowance is taken off; otherwise whatever was taken is released on every lock
/// and the call waits for an unlock message from any of them (bounded by the holders' TTLs
/// and the caller's wait), then tries again. A lock that answers after the quorum joins the
/// guard.
#[derive(Clone)]
pub(super) struct Group<K: GroupKind> {
    locks: Arc<[Lock<K>]>,
    quorum: Quorum,
    pub(super) node_timeout: Duration,
    max_hold: Option<Duration>,
    /// Whether the locks are on independent masters, as far as known (a `RedLock`'s).
    independence: Arc<Independence>,
    /// Whose name the group is taken in.
    identity: Identity,
    /// Its acquires' metrics: the group's kind, in its first lock's class.
    pub(super) metrics: LockMetrics,
}

impl<K: GroupKind> fmt::Debug for Group<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(self.quorum.type_names().0)
            .field("locks", &self.locks)
            .field("quorum", &self.quorum())
            .field("node_timeout", &self.node_timeout)
            .field("max_hold", &self.max_hold)
            .field("owner", &self.identity)
            .finish()
    }
}

impl<K: GroupKind> Group<K> {
    fn new(locks: Vec<Lock<K>>, quorum: Quorum) -> Self {
        let metrics = locks
            .first()
            .map(|lock| lock.metrics_as(quorum.type_names().1))
            .unwrap_or_default();
        Group {
            metrics,
            locks: locks.into(),
            quorum,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            max_hold: None,
            independence: Arc::default(),
            identity: Identity::Task,
        }
    }

    pub(super) fn quorum(&self) -> usize {
        let total = self.locks.len();
        match self.quorum {
            Quorum::Majority => total / 2 + 1,
            Quorum::All => total,
        }
    }

    /// Whether the group is one lock on several masters (a `RedLock`), rather than several
    /// locks (a `MultiLock`).
    pub(super) fn one_lock(&self) -> bool {
        self.quorum == Quorum::Majority
    }

    /// The group's first lock name, for errors and logs.
    pub(super) fn name(&self) -> &str {
        self.locks.first().map_or("", |lock| lock.name())
    }

    /// Every lock, checked before anything is sent.
    fn nodes(&self, fixed_lease_ms: Option<u64>) -> Result<Vec<Node>> {
        if self.locks.is_empty() {
            return Err(Error::invalid("a lock group needs at least one lock"));
        }
        validate::positive("node_timeout", self.node_timeout)?;
        let nodes: Vec<Node> = self
            .locks
            .iter()
            .map(|lock| {
                let (core, names) = lock.parts()?;
                // The tighter of the group's cap and the lock's own.
                let max_hold = self.max_hold.into_iter().chain(lock.max_hold()).min();
                Ok(Node {
                    core: core.clone(),
                    names: names.clone(),
                    request: Request::new(core, fixed_lease_ms, max_hold)?,
                })
            })
            .collect::<Result<_>>()?;
        for node in &nodes {
            let lease_ms = node.request.lease.millis();
            let usable = Duration::from_millis(lease_ms).saturating_sub(drift(lease_ms));
            if usable <= self.node_timeout {
                return Err(Error::invalid(format!(
                    "a lease of {lease_ms} ms leaves no time to use the lock after the node \
                     timeout ({:?}) and the drift allowance",
                    self.node_timeout
                )));
            }
        }
        Ok(nodes)
    }
}
