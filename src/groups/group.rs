//! [`LockGroup`]: one lock taken on several nodes, or several locks taken together, held
//! while a quorum of them is: [`RedLock`](crate::RedLock) needs a majority of independent
//! masters, [`MultiLock`](crate::MultiLock) every lock.
//!
//! While it waits, a group listens only on the nodes that answered it busy: its own rollback
//! publishes on the others, and only the holder's unlock can let it in.
//!
//! Each node is asked with the reentrant lock's own acquire attempt (its script, its hold
//! in that client's registry, renewal by that client's watchdog, and its undo when an
//! answer comes after the caller left), all at once and with one owner field, so that a
//! re-entry is a re-entry on every node. A group of fenced locks also makes its token
//! agree across majorities ([`crate::groups::fence`]) before it returns.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::groups::contender::GroupContender;
use crate::groups::guard::GroupGuard;
use crate::groups::independence::Independence;
use crate::groups::node::Node;
use crate::groups::policy::{GroupKind, GroupPolicy};
use crate::holds::{drift, Lease};
use crate::locks::acquire::Timed;
use crate::locks::attempt::Request;
use crate::locks::distributed::{self, DistributedLock};
use crate::locks::wait::{deadline_after, wait_for};
use crate::locks::{Lock, Reentrant};
use crate::protocol::owner::{Identity, Owner};
use crate::util::validate;

/// How long one node may take to answer an acquire before it counts as failed, unless set
/// with [`LockGroup::with_node_timeout`]: small next to any lease, large next to a round
/// trip to a healthy node.
const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// Several locks taken as one: use it as [`RedLock`](crate::RedLock) or
/// [`MultiLock`](crate::MultiLock).
///
/// The same owner field (`<client-uuid>:<task-id>`, with the first lock's client id, or an
/// explicit owner's: [`with_owner`](LockGroup::with_owner)) and
/// the same lease go to every lock, all at once. The group is acquired as soon as its
/// quorum of locks is, and only if time is left of the lease once the drift allowance is
/// taken off; otherwise whatever was taken is released on every lock and the call waits
/// for an unlock message from any of them (bounded by the holders' TTLs and the caller's
/// wait), then tries again. A lock that answers after the quorum joins the guard.
pub struct LockGroup<P: GroupPolicy, K: GroupKind = Reentrant> {
    locks: Arc<[Lock<K>]>,
    node_timeout: Duration,
    max_hold: Option<Duration>,
    /// Whether the locks are on independent masters, as far as known (a `RedLock`'s).
    independence: Arc<Independence>,
    /// Whose name the group is taken in.
    identity: Identity,
    policy: PhantomData<fn() -> P>,
}

impl<P: GroupPolicy, K: GroupKind> Clone for LockGroup<P, K> {
    fn clone(&self) -> Self {
        LockGroup {
            locks: self.locks.clone(),
            node_timeout: self.node_timeout,
            max_hold: self.max_hold,
            independence: self.independence.clone(),
            identity: self.identity,
            policy: PhantomData,
        }
    }
}

impl<P: GroupPolicy, K: GroupKind> std::fmt::Debug for LockGroup<P, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct(P::TYPE_NAME)
            .field("locks", &self.locks)
            .field("quorum", &self.quorum())
            .field("node_timeout", &self.node_timeout)
            .field("max_hold", &self.max_hold)
            .field("owner", &self.identity)
            .finish()
    }
}

impl<P: GroupPolicy, K: GroupKind> LockGroup<P, K> {
    pub(crate) fn from_locks(locks: Vec<Lock<K>>) -> Self {
        LockGroup {
            locks: locks.into(),
            node_timeout: DEFAULT_NODE_TIMEOUT,
            max_hold: None,
            independence: Arc::default(),
            identity: Identity::Task,
            policy: PhantomData,
        }
    }

    /// This group, taken in `owner`'s name instead of the calling task's, as
    /// [`Lock::with_owner`](crate::Lock::with_owner) does for one lock: every node's field
    /// is `<first lock's client uuid>:<owner id>`, and only calls for `owner` re-enter.
    /// The group's owner is the one that counts: an owner set on the locks it was made of
    /// is not used.
    #[must_use]
    pub fn with_owner(mut self, owner: Owner) -> Self {
        self.identity = Identity::Owner(owner);
        self
    }

    /// This group, never re-entering: each acquire is an owner of its own, as
    /// [`Lock::non_reentrant`](crate::Lock::non_reentrant) does for one lock.
    #[must_use]
    pub fn non_reentrant(mut self) -> Self {
        self.identity = Identity::EachAcquire;
        self
    }

    /// How long one lock's node may take to answer an acquire before it counts as failed
    /// (its answer, if it comes later, is undone). Keep it small next to the lease: the
    /// time to reach the quorum is taken off the lock's validity.
    ///
    /// Default: 100 ms.
    #[must_use]
    pub fn with_node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// A cap on how long the group may be held, as
    /// [`Lock::with_max_hold`](crate::Lock::with_max_hold) sets for one lock: every node's
    /// hold ends by it, and the guard's [`lost`](GroupGuard::lost) then resolves with
    /// [`LostReason::MaxHoldReached`](crate::LostReason::MaxHoldReached). A lock with a
    /// cap of its own ([`Lock::with_max_hold`](crate::Lock::with_max_hold)) keeps the
    /// tighter of the two.
    ///
    /// Checked by each call: under 10 ms or over ten years is
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), with nothing sent.
    #[must_use]
    pub fn with_max_hold(mut self, cap: Duration) -> Self {
        self.max_hold = Some(cap);
        self
    }

    /// The locks of the group, in the order given.
    pub fn locks(&self) -> &[Lock<K>] {
        &self.locks
    }

    /// How many of the locks must be held for the group to be held.
    pub fn quorum(&self) -> usize {
        P::quorum(self.locks.len())
    }

    /// Takes the group, waiting as long as it takes; each lock's client's watchdog keeps
    /// its hold alive.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), with nothing written, for an
    /// empty group, an empty lock name, a zero node timeout, a lease (a client's watchdog
    /// timeout, here) that leaves no time after the node timeout and the drift allowance,
    /// or a `RedLock` given two locks on one master or on one Redis Cluster (see the
    /// [`groups`](crate::groups#independent-masters) docs);
    /// [`Error::QuorumUnreachable`](crate::Error::QuorumUnreachable) when too many nodes
    /// cannot be reached in `retry_attempts` rounds in a row (the first lock's client's
    /// setting).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription, and every hold it took, or that
    /// an answer still on its way takes, is released.
    pub async fn lock(&self) -> Result<GroupGuard> {
        DistributedLock::lock(self).await
    }

    /// Takes the group with a fixed lease on every lock, waiting as long as it takes.
    ///
    /// # Errors
    /// As [`lock`](LockGroup::lock); also [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a lease under 10 ms or over ten years.
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<GroupGuard> {
        DistributedLock::lock_with_lease(self, lease).await
    }

    /// One round, no waiting: `Ok(None)` when the group is held elsewhere.
    ///
    /// # Errors
    /// As [`lock`](LockGroup::lock), after one round.
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    pub async fn try_lock(&self) -> Result<Option<GroupGuard>> {
        DistributedLock::try_lock(self).await
    }

    /// Waits up to `wait` for the group: `Ok(None)` if it stayed held elsewhere that long.
    ///
    /// # Errors
    /// As [`lock`](LockGroup::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<GroupGuard>> {
        DistributedLock::try_lock_for(self, wait).await
    }

    /// Waits up to `wait` for the group and takes it with a fixed `lease` on every lock.
    ///
    /// # Errors
    /// As [`lock_with_lease`](LockGroup::lock_with_lease).
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    pub async fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<GroupGuard>> {
        DistributedLock::try_lock_with(self, wait, lease).await
    }

    fn first_name(&self) -> &str {
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
                let max_hold = match (self.max_hold, lock.max_hold()) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if let Some(cap) = max_hold {
                    validate::lease_millis("max_hold", cap)?;
                }
                let lease = match fixed_lease_ms {
                    Some(ms) => Lease::Fixed(ms),
                    None => Lease::Watchdog(core.watchdog.lease_ms()),
                };
                Ok(Node {
                    core: core.clone(),
                    names: names.clone(),
                    request: Request { lease, max_hold },
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

impl<P: GroupPolicy, K: GroupKind> distributed::sealed::Sealed for LockGroup<P, K> {}

impl<P: GroupPolicy, K: GroupKind> DistributedLock for LockGroup<P, K> {
    type Guard = GroupGuard;

    fn name(&self) -> &str {
        self.first_name()
    }

    #[tracing::instrument(level = "debug", name = "acquire", skip(self), fields(lock = %self.first_name()))]
    async fn acquire(
        &self,
        fixed_lease_ms: Option<u64>,
        wait: Option<Duration>,
    ) -> Result<Option<GroupGuard>> {
        let mut timed = Timed::start(if P::DISTINCT_NODES {
            "redlock"
        } else {
            "multilock"
        });
        let outcome = self.contend(fixed_lease_ms, wait).await;
        timed.ended(&outcome);
        outcome
    }
}

impl<P: GroupPolicy, K: GroupKind> LockGroup<P, K> {
    /// Takes the group, waiting up to `wait`: what [`DistributedLock::acquire`] measures.
    async fn contend(
        &self,
        fixed_lease_ms: Option<u64>,
        wait: Option<Duration>,
    ) -> Result<Option<GroupGuard>> {
        // The caller's wait counts from the call, the independence check included.
        let deadline = deadline_after(wait);
        let nodes = self.nodes(fixed_lease_ms)?;
        if P::DISTINCT_NODES {
            self.independence
                .check(&nodes, P::TYPE_NAME, self.node_timeout)
                .await?;
        }
        let owner: Arc<str> = self.identity.field(&nodes[0].core.id_text);
        let subscriptions = nodes.iter().map(|_| None).collect();
        let mut contender = GroupContender::<K> {
            quorum: P::quorum(nodes.len()),
            nodes,
            owner,
            node_timeout: self.node_timeout,
            name: self.first_name(),
            subscriptions,
            busy: Vec::new(),
            split: false,
            kind: PhantomData,
        };
        wait_for(&mut contender, deadline).await
    }
}
