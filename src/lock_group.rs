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
//! agree across majorities ([`crate::group_fence`]) before it returns.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, select_all};
use futures_util::stream::{FuturesUnordered, StreamExt};
use rand::Rng;
use tokio::time::Instant;
use tracing::instrument;

use crate::acquire::{attempt, remaining, Attempt, Request, NO_TTL_RECHECK};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::group_fence;
use crate::group_guard::GroupGuard;
use crate::hold::{drift, Lease};
use crate::lock::{Lock, LockKind, Reentrant};
use crate::names::LockNames;
use crate::owner::current_owner_field;
use crate::pubsub::Subscription;
use crate::validate;

/// How long one node may take to answer an acquire before it counts as failed, unless set
/// with [`LockGroup::with_node_timeout`]: small next to any lease, large next to a round
/// trip to a healthy node.
const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// The longest random pause before retrying after a split vote (some nodes granted the
/// lock, too few): competing groups that split the nodes between them then retry at
/// different moments instead of splitting again.
const MAX_SPLIT_JITTER: Duration = Duration::from_millis(10);

/// How many of a group's locks must be held for the group to be held. Sealed: the policies
/// are [`Majority`](crate::Majority) and [`All`](crate::All).
pub trait GroupPolicy: sealed::Sealed + Send + Sync + 'static {}

pub(crate) mod sealed {
    pub trait Sealed {
        /// The type name shown by `Debug`.
        const TYPE_NAME: &'static str;
        /// Whether every lock must be on a master of its own (a majority is only worth
        /// something over independent masters).
        const DISTINCT_NODES: bool;
        /// How many of `total` locks make the group held.
        fn quorum(total: usize) -> usize;
    }

    /// The lock kinds a group can be made of: those whose waiters all hear one unlock
    /// channel (a fair lock's waiters wait on channels of their own, in a queue a group
    /// never joins).
    pub trait GroupableKind {}
}

/// The kinds of lock a [`LockGroup`] can be made of: [`Reentrant`] and
/// [`Fenced`](crate::Fenced). Sealed.
pub trait GroupKind: LockKind + sealed::GroupableKind {}

impl sealed::GroupableKind for Reentrant {}
impl GroupKind for Reentrant {}
impl sealed::GroupableKind for crate::fenced_lock::Fenced {}
impl GroupKind for crate::fenced_lock::Fenced {}

/// Several locks taken as one: use it as [`RedLock`](crate::RedLock) or
/// [`MultiLock`](crate::MultiLock).
///
/// The same owner field (`<client-uuid>:<task-id>`, with the first lock's client id) and
/// the same lease go to every lock, all at once. The group is acquired as soon as its
/// quorum of locks is, and only if time is left of the lease once the drift allowance is
/// taken off; otherwise whatever was taken is released on every lock and the call waits
/// for an unlock message from any of them (bounded by the holders' TTLs and the caller's
/// wait), then tries again. A lock that answers after the quorum joins the guard.
pub struct LockGroup<P: GroupPolicy, K: GroupKind = Reentrant> {
    locks: Arc<[Lock<K>]>,
    node_timeout: Duration,
    max_hold: Option<Duration>,
    policy: PhantomData<fn() -> P>,
}

impl<P: GroupPolicy, K: GroupKind> Clone for LockGroup<P, K> {
    fn clone(&self) -> Self {
        LockGroup {
            locks: self.locks.clone(),
            node_timeout: self.node_timeout,
            max_hold: self.max_hold,
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
            .finish()
    }
}

/// One lock of a group, checked and ready to be asked.
#[derive(Clone)]
pub(crate) struct Node {
    pub(crate) client: Client,
    pub(crate) names: Arc<LockNames>,
    request: Request,
}

/// What one round of attempts on every lock came to.
enum Round {
    Acquired(GroupGuard),
    /// Not acquired.
    Failed(Failure),
}

struct Failure {
    /// Too many locks could not be reached: the error to return if it lasts.
    unreachable: Option<Error>,
    /// Try again within this long at the latest: the shortest TTL the holders reported.
    retry_within: Option<Duration>,
    /// Some locks were granted, but too few: rivals may have split the nodes.
    split: bool,
    /// The nodes held by someone else: only their unlocks can let the group in.
    busy: Vec<usize>,
}

impl Failure {
    /// The quorum was reached, but nothing usable was left of the lease by the time the
    /// group could be returned: try again at once (after the split-vote pause).
    fn no_time_left(busy: Vec<usize>) -> Self {
        Failure {
            unreachable: None,
            retry_within: Some(Duration::ZERO),
            split: true,
            busy,
        }
    }
}

impl<P: GroupPolicy, K: GroupKind> LockGroup<P, K> {
    pub(crate) fn from_locks(locks: Vec<Lock<K>>) -> Self {
        LockGroup {
            locks: locks.into(),
            node_timeout: DEFAULT_NODE_TIMEOUT,
            max_hold: None,
            policy: PhantomData,
        }
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
    /// Checked by each call: under 1 ms or over ten years is
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
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument), with nothing sent, for an
    /// empty group, an empty lock name, a zero node timeout, a lease (a client's watchdog
    /// timeout, here) that leaves no time after the node timeout and the drift allowance,
    /// or a `RedLock` given two locks on one master;
    /// [`Error::QuorumUnreachable`](crate::Error::QuorumUnreachable) when too many nodes
    /// cannot be reached in `retry_attempts` rounds in a row (the first lock's client's
    /// setting).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription, and every hold it took, or that
    /// an answer still on its way takes, is released.
    #[instrument(level = "debug", skip(self), fields(lock = %self.first_name()))]
    pub async fn lock(&self) -> Result<GroupGuard> {
        let guard = self.acquire(None, None).await?;
        Ok(guard.expect("an unbounded wait ends with the lock or an error"))
    }

    /// Takes the group with a fixed lease on every lock, waiting as long as it takes.
    ///
    /// # Errors
    /// As [`lock`](LockGroup::lock); also [`Error::InvalidArgument`](crate::Error::InvalidArgument)
    /// for a lease under 1 ms or over ten years.
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.first_name()))]
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<GroupGuard> {
        let lease = validate::lease_millis("lease", lease)?;
        let guard = self.acquire(Some(lease), None).await?;
        Ok(guard.expect("an unbounded wait ends with the lock or an error"))
    }

    /// One round, no waiting: `Ok(None)` when the group is held elsewhere.
    ///
    /// # Errors
    /// As [`lock`](LockGroup::lock), after one round.
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.first_name()))]
    pub async fn try_lock(&self) -> Result<Option<GroupGuard>> {
        self.acquire(None, Some(Duration::ZERO)).await
    }

    /// Waits up to `wait` for the group: `Ok(None)` if it stayed held elsewhere that long.
    ///
    /// # Errors
    /// As [`lock`](LockGroup::lock).
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.first_name()))]
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<GroupGuard>> {
        self.acquire(None, Some(wait)).await
    }

    /// Waits up to `wait` for the group and takes it with a fixed `lease` on every lock.
    ///
    /// # Errors
    /// As [`lock_with_lease`](LockGroup::lock_with_lease).
    ///
    /// # Cancel safety
    /// As [`lock`](LockGroup::lock).
    #[instrument(level = "debug", skip(self), fields(lock = %self.first_name()))]
    pub async fn try_lock_with(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<GroupGuard>> {
        let lease = validate::lease_millis("lease", lease)?;
        self.acquire(Some(lease), Some(wait)).await
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
                let (client, names) = lock.parts()?;
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
                    None => Lease::Watchdog(client.inner.watchdog.lease_ms()),
                };
                Ok(Node {
                    client: client.clone(),
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
        if P::DISTINCT_NODES {
            let mut seen = std::collections::HashSet::new();
            for node in &nodes {
                if !seen.insert(node.client.inner.settings.url.raw()) {
                    return Err(Error::invalid(format!(
                        "a {} needs one lock per independent master; `{}` is given twice",
                        P::TYPE_NAME,
                        node.client.inner.settings.url
                    )));
                }
            }
        }
        Ok(nodes)
    }

    async fn acquire(
        &self,
        fixed_lease_ms: Option<u64>,
        wait: Option<Duration>,
    ) -> Result<Option<GroupGuard>> {
        let nodes = self.nodes(fixed_lease_ms)?;
        let first = nodes[0].client.clone();
        let owner = current_owner_field(&first.inner.id_text);
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let retry_attempts = first.inner.connections.retry_attempts();
        let mut unreachable_rounds = 0;
        // One per node, made once the node has answered busy, so that a node that is down costs
        // no subscribe timeout; retried each round until it is made.
        let mut subscriptions: Vec<Option<Subscription>> = nodes.iter().map(|_| None).collect();
        loop {
            let failure = match self.round(&nodes, &owner).await {
                Round::Acquired(guard) => return Ok(Some(guard)),
                Round::Failed(failure) => failure,
            };
            let retry_within = match failure.unreachable {
                Some(e) => {
                    unreachable_rounds += 1;
                    if unreachable_rounds >= retry_attempts || remaining(deadline).is_zero() {
                        return Err(e);
                    }
                    Some(first.inner.connections.backoff())
                }
                None => {
                    unreachable_rounds = 0;
                    failure.retry_within
                }
            };
            subscriptions
                .iter_mut()
                .flatten()
                .for_each(Subscription::wakeup_used);
            if remaining(deadline).is_zero() {
                return Ok(None);
            }
            let subscribed = subscribe_missing(
                &nodes,
                &owner,
                &failure.busy,
                &mut subscriptions,
                remaining(deadline),
            )
            .await;
            if subscribed {
                // Try again now that these nodes' unlocks are heard.
                continue;
            }
            let bound = retry_within
                .unwrap_or(NO_TTL_RECHECK)
                .max(Duration::from_millis(1))
                .min(remaining(deadline));
            // Only an unlock on a node held elsewhere can let the group in; the group's own
            // rollback published on the others.
            wait_for_any(&mut subscriptions, &failure.busy, bound).await;
            if failure.split {
                let jitter = rand::rng().random_range(Duration::ZERO..=MAX_SPLIT_JITTER);
                tokio::time::sleep(jitter.min(remaining(deadline))).await;
            }
        }
    }

    /// Asks every lock at once and stops as soon as the outcome is decided.
    async fn round(&self, nodes: &[Node], owner: &Arc<str>) -> Round {
        let total = nodes.len();
        let quorum = P::quorum(total);
        let node_timeout = self.node_timeout;
        let mut pending: FuturesUnordered<_> = nodes
            .iter()
            .enumerate()
            .map(|(index, node)| {
                let (node, owner) = (node.clone(), owner.clone());
                async move {
                    // A node that does not answer in time is dropped from this round; the
                    // attempt finishes in the background and undoes what it took.
                    let asked = attempt(&node.client, &node.names, &owner, node.request, false);
                    let outcome = match tokio::time::timeout(node_timeout, asked).await {
                        Ok(outcome) => outcome,
                        Err(_) => Err(Error::Timeout {
                            during: "a node's acquire",
                            after: node_timeout,
                        }),
                    };
                    (index, outcome)
                }
            })
            .collect();
        let mut held = Vec::with_capacity(total);
        let mut busy = Vec::new();
        let mut unreachable = 0;
        let mut retry_within: Option<Duration> = None;
        let mut last_error = None;
        while let Some((index, outcome)) = pending.next().await {
            match outcome {
                Ok(Attempt::Acquired(guard)) => {
                    held.push((index, guard));
                }
                Ok(Attempt::RetryWithin(bound)) => {
                    busy.push(index);
                    retry_within = match (retry_within, bound) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(e) => {
                    tracing::debug!(error = %e, "a node of the group failed to answer");
                    unreachable += 1;
                    last_error = Some(e);
                }
            }
            if held.len() >= quorum || busy.len() + unreachable > total - quorum {
                break;
            }
        }
        if held.len() >= quorum {
            let token = if K::FENCED {
                let agreed = group_fence::agree(nodes, &held, owner, quorum, node_timeout).await;
                if agreed.is_none() {
                    // Too few masters still held the lock to vouch for the token: as if the
                    // quorum were never reached. Dropping the holds releases them.
                    tracing::debug!(lock = %self.first_name(), "fencing token not agreed");
                    return Round::Failed(Failure::no_time_left(busy));
                }
                agreed
            } else {
                None
            };
            let holds = held.into_iter().map(|(_, hold)| hold).collect();
            let guard = GroupGuard::new(
                self.first_name(),
                owner.clone(),
                quorum,
                total,
                holds,
                token,
            );
            if guard.deadline() > Instant::now() {
                if !pending.is_empty() {
                    // Late answers join the guard, keeping the lock on every node that can
                    // (and, fenced, vouching for its token there too).
                    let joiner = guard.joiner();
                    let first = nodes[0].client.clone();
                    let (nodes, owner) = (token.map(|_| nodes.to_vec()), owner.clone());
                    first.spawn(async move {
                        while let Some((index, outcome)) = pending.next().await {
                            if let Ok(Attempt::Acquired(hold)) = outcome {
                                if let (Some(nodes), Some(token)) = (&nodes, token) {
                                    group_fence::raise(&nodes[index], &owner, token, node_timeout)
                                        .await;
                                }
                                if let Some(late) = joiner.join(hold) {
                                    // Released in this task rather than by a drop, which
                                    // would spawn a task of its own for it.
                                    if let Err(e) = late.unlock().await {
                                        if !e.is_lock_lost() {
                                            tracing::warn!(error = %e, "a late hold's release failed; it expires with its lease");
                                        }
                                    }
                                }
                            }
                        }
                    });
                }
                return Round::Acquired(guard);
            }
            // Reaching the quorum took what the lease left after the node timeout (a stalled
            // process): no time is left to use it. Dropping the guard releases it.
            tracing::debug!(lock = %self.first_name(), "quorum reached too late");
            return Round::Failed(Failure::no_time_left(busy));
        }
        // Not acquired: the attempts still out are dropped, and each undoes what it took
        // when its answer comes; what was taken is released on every node at once, awaited
        // up to the node timeout so that a waiting group does not sit on part of what it
        // wants (a release still running then finishes in the background).
        let split = !held.is_empty();
        drop(pending);
        let rollback = join_all(held.into_iter().map(|(_, hold)| hold.unlock()));
        let _ = tokio::time::timeout(node_timeout, rollback).await;
        let unreachable = (unreachable > total - quorum).then(|| Error::QuorumUnreachable {
            reachable: total - unreachable,
            needed: quorum,
            total,
            last_error: last_error.map_or_else(String::new, |e| e.to_string()),
        });
        Round::Failed(Failure {
            unreachable,
            retry_within,
            split,
            busy,
        })
    }
}

/// Subscribes to the unlock channel of every node in `busy` that has no subscription yet,
/// all at once; returns whether any was made. Only a busy node's unlock can let the group
/// in: a subscription elsewhere would only cost a round (each new one is followed by a
/// retry, for an unlock published before it was made). A node that cannot confirm in time
/// keeps none, and is asked again after the next round.
async fn subscribe_missing(
    nodes: &[Node],
    owner: &str,
    busy: &[usize],
    subscriptions: &mut [Option<Subscription>],
    remaining: Duration,
) -> bool {
    let missing: Vec<usize> = busy
        .iter()
        .copied()
        .filter(|&index| subscriptions[index].is_none())
        .collect();
    let subscribing = missing.iter().map(|&index| {
        let Node { client, names, .. } = &nodes[index];
        let limit = client.inner.settings.subscribe_timeout.min(remaining);
        let channel = names.wait_channel(owner);
        async move {
            (
                index,
                client.inner.listener.subscribe(&channel, limit).await,
            )
        }
    });
    let mut made = false;
    for (index, outcome) in join_all(subscribing).await {
        match outcome {
            Ok(subscription) => {
                subscriptions[index] = Some(subscription);
                made = true;
            }
            Err(e) => tracing::debug!(error = %e, "cannot hear a node's unlocks yet"),
        }
    }
    made
}

/// Waits for an unlock message from any of the `busy` nodes, at most `bound`.
async fn wait_for_any(subscriptions: &mut [Option<Subscription>], busy: &[usize], bound: Duration) {
    let waits: Vec<_> = subscriptions
        .iter_mut()
        .enumerate()
        .filter(|(index, _)| busy.contains(index))
        .filter_map(|(_, subscription)| subscription.as_mut())
        .map(|subscription| Box::pin(subscription.wait(bound)))
        .collect();
    if waits.is_empty() {
        tokio::time::sleep(bound).await;
    } else {
        select_all(waits).await;
    }
}
