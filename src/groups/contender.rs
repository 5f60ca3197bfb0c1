//! A group as the [waiting loop](crate::locks::wait) drives it: a round on every node per
//! try, every lock asked at once and the outcome decided as soon as the quorum is reached
//! or cannot be; listening only on the nodes that answered busy.
//!
//! Only a busy node's unlock can let the group in: its own rollback published on the
//! others. After a split vote (some nodes granted it, too few) it pauses a random moment
//! before the next try, so that rivals who split the nodes retry at different moments.
//!
//! With the [wait registry](crate::ClientBuilder::wait_registry) on a node's client, the
//! call is recorded on that node as a single lock's wait is, until the call ends: from the
//! first round that found the node busy and listens there, for a `MultiLock`; from the
//! first round that listens anywhere, for a `RedLock`, whose nodes are one lock.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, select_all};
use futures_util::stream::{FuturesUnordered, StreamExt};
use rand::Rng;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::groups::fence;
use crate::groups::group::{Group, GroupKind, Node};
use crate::groups::guard::GroupGuard;
use crate::locks::attempt::attempt;
use crate::locks::wait::{Contender, Listening, Tried, WakeUps};
use crate::locks::wait_registry::Registration;
use crate::transport::connections::Connections;
use crate::transport::pubsub::Wake;
use crate::util::lock_metrics::LockMetrics;

/// The longest random pause before retrying after a split vote.
const MAX_SPLIT_JITTER: Duration = Duration::from_millis(10);

/// A group's waiting call: its group, its nodes, and what it has set up on them.
pub(super) struct GroupContender<'a, K: GroupKind> {
    pub(super) group: &'a Group<K>,
    pub(super) nodes: Vec<Node>,
    pub(super) owner: Arc<str>,
    /// One per node, listening once the node has answered busy, so that a node that is
    /// down costs no subscribe timeout; retried each round until it listens.
    pub(super) wake_ups: Vec<WakeUps>,
    /// The nodes the last round found held elsewhere; once the group listened, those of
    /// them whose unlocks it hears.
    pub(super) busy: Vec<usize>,
    /// Whether the last round split the nodes between rivals.
    pub(super) split: bool,
    /// The call's entry in the wait registry of each node whose client keeps one, with
    /// the node's index: empty, and never allocated, when no client does.
    pub(super) registrations: Vec<(usize, Box<Registration>)>,
}

impl<K: GroupKind> Contender for GroupContender<'_, K> {
    type Guard = GroupGuard;

    /// Asks every lock at once and stops as soon as the outcome is decided: the quorum of
    /// the nodes granted it, or too many refused or failed for that to happen. A fenced
    /// group's token is agreed by the quorum before the guard is returned. Not acquired,
    /// it notes which nodes were busy and whether rivals split them, for the wait.
    async fn attempt(&mut self) -> Result<Tried<GroupGuard>> {
        let (nodes, owner, name) = (&self.nodes, &self.owner, self.group.name());
        let (quorum, node_timeout) = (self.group.quorum(), self.group.node_timeout);
        // Whether each node's acquire draws a fencing token, which the quorum must agree on.
        let fenced = nodes[0].names.kind.fenced;
        let total = nodes.len();
        let mut pending: FuturesUnordered<_> = nodes
            .iter()
            .enumerate()
            .map(|(index, node)| {
                let (node, owner) = (node.clone(), owner.clone());
                async move {
                    // A node that does not answer in time is dropped from this round; the
                    // attempt finishes in the background and undoes what it took.
                    let asked = attempt(&node.core, &node.names, &owner, node.request, false);
                    let outcome = tokio::time::timeout(node_timeout, asked).await;
                    let timed_out = Error::Timeout {
                        during: "a node's acquire",
                        after: node_timeout,
                    };
                    (index, outcome.unwrap_or(Err(timed_out)))
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
                Ok(Tried::Acquired(guard)) => held.push((index, guard)),
                Ok(Tried::Busy(bound)) => {
                    busy.push(index);
                    // The sooner of the bounds known.
                    retry_within = retry_within.into_iter().chain(bound).min();
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
            let token = match fenced {
                true => fence::agree(nodes, &held, owner, quorum, node_timeout).await,
                false => None,
            };
            if fenced && token.is_none() {
                // Too few masters still held the lock to vouch for the token: as if the
                // quorum were never reached. Dropping the holds releases them.
                tracing::debug!(lock = %name, "fencing token not agreed");
                return Ok(self.no_time_left(busy));
            }
            let holds = held.into_iter().map(|(_, hold)| hold).collect();
            let guard = GroupGuard::new(name, owner.clone(), quorum, total, holds, token);
            if Instant::from_std(guard.valid_until()) > Instant::now() {
                if !pending.is_empty() {
                    // Late answers join the guard, keeping the lock on every node that can
                    // (and, fenced, vouching for its token there too).
                    let joiner = guard.joiner();
                    let first = nodes[0].core.clone();
                    let (nodes, owner) = (token.map(|_| nodes.to_vec()), owner.clone());
                    first.spawn(async move {
                        while let Some((index, outcome)) = pending.next().await {
                            if let Ok(Tried::Acquired(hold)) = outcome {
                                if let (Some(nodes), Some(token)) = (&nodes, token) {
                                    fence::raise(&nodes[index], &owner, token, node_timeout)
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
                return Ok(Tried::Acquired(guard));
            }
            // Reaching the quorum took what the lease left after the node timeout (a stalled
            // process): no time is left to use it. Dropping the guard releases it.
            tracing::debug!(lock = %name, "quorum reached too late");
            return Ok(self.no_time_left(busy));
        }
        self.split = !held.is_empty();
        self.busy = busy;
        // Not acquired: the attempts still out are dropped, and each undoes what it took
        // when its answer comes; what was taken is released on every node at once, awaited
        // up to the node timeout so that a waiting group does not sit on part of what it
        // wants (a release still running then finishes in the background).
        drop(pending);
        let rollback = join_all(held.into_iter().map(|(_, hold)| hold.unlock()));
        let _ = tokio::time::timeout(node_timeout, rollback).await;
        if unreachable > total - quorum {
            return Err(Error::QuorumUnreachable {
                reachable: total - unreachable,
                needed: quorum,
                total,
                last_error: last_error.map(Box::new),
            });
        }
        Ok(Tried::Busy(retry_within))
    }

    fn may_retry(&self, error: &Error) -> bool {
        // As for one lock: a re-entry on a node that may have run cannot be undone, so
        // sending the round again could count it twice there.
        let reentry = self.nodes.iter().any(|node| {
            let holds = &node.core.holds;
            holds.is_held(&holds.id(&node.names.key, &self.owner))
        });
        !(reentry && error.may_have_run())
    }

    /// Subscribes to the unlock channel of every busy node that has no subscription yet,
    /// all at once. Only a busy node's unlock can let the group in: a subscription elsewhere
    /// would only cost a round (each new one is followed by a retry, for an unlock published
    /// before it was made). A node that cannot confirm in time keeps none, and is asked
    /// again after the next round.
    async fn listen(&mut self, remaining: Duration) -> Result<Listening> {
        let (nodes, owner, busy) = (&self.nodes, &self.owner, &self.busy);
        let listens = (self.wake_ups.iter_mut().enumerate())
            .filter(|(index, _)| busy.contains(index))
            .map(|(index, wake_ups)| {
                let Node { core, names, .. } = &nodes[index];
                let channel = || names.wait_channel(owner);
                let listening = wake_ups.listen(core, channel, Wake::Lock, remaining);
                async move { (index, listening.await) }
            });
        let (mut heard, mut started) = (Vec::new(), false);
        for (index, listening) in join_all(listens).await {
            match listening {
                Ok(Listening::GaveUp) => {}
                Ok(listening) => {
                    started |= matches!(listening, Listening::Started);
                    heard.push(index);
                }
                Err(e) => tracing::debug!(error = %e, "cannot hear a node's unlocks yet"),
            }
        }
        // A MultiLock waits for those of its locks held elsewhere. A RedLock's nodes are one
        // lock: waiting, it waits for that lock on every master, including those its rounds
        // were decided without (two busy masters of three decide a round).
        let one_lock = self.group.one_lock() && !heard.is_empty();
        Registration::group_waiting(&mut self.registrations, |index| {
            one_lock || heard.contains(&index)
        });
        self.busy = heard;
        // Try again now that these nodes' unlocks are heard.
        Ok(if started {
            Listening::Started
        } else {
            Listening::Already
        })
    }

    /// Waits for an unlock message from any of the busy nodes, at most `bound`.
    async fn wait(&mut self, bound: Duration) {
        let busy = &self.busy;
        let waits: Vec<_> = (self.wake_ups.iter_mut().enumerate())
            .filter(|(index, _)| busy.contains(index))
            .map(|(_, wake_ups)| Box::pin(wake_ups.wait(bound)))
            .collect();
        let wait = async move {
            if waits.is_empty() {
                tokio::time::sleep(bound).await;
            } else {
                select_all(waits).await;
            }
        };
        if self.registrations.is_empty() {
            wait.await;
        } else {
            // Every node's entry is kept fresh beside the wait, never in its way (a node
            // heard in an earlier round stays recorded: the call still waits for the
            // group); boxed, so that the wait of a group without a registry stays small.
            let registrations = self.registrations.iter_mut().map(|(_, r)| &mut **r);
            Box::pin(Registration::beside(registrations, wait)).await;
        }
        if self.split {
            let jitter = rand::rng().random_range(Duration::ZERO..=MAX_SPLIT_JITTER);
            tokio::time::sleep(jitter.min(bound)).await;
        }
    }

    fn wakeups_used(&mut self) {
        self.wake_ups.iter_mut().for_each(WakeUps::used);
    }

    fn pacing(&self) -> &Connections {
        &self.nodes[0].core.connections
    }

    fn metrics(&self) -> &LockMetrics {
        &self.group.metrics
    }
}

impl<K: GroupKind> GroupContender<'_, K> {
    /// The quorum was reached, but nothing usable was left of the lease by the time the
    /// group could be returned: try again at once (after the split-vote pause).
    fn no_time_left(&mut self, busy: Vec<usize>) -> Tried<GroupGuard> {
        self.busy = busy;
        self.split = true;
        Tried::Busy(Some(Duration::ZERO))
    }
}
