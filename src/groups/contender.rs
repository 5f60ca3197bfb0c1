//! A group as the [waiting loop](crate::locks::wait) drives it: a round on every node per
//! try, listening only on the nodes that answered busy.
//!
//! Only a busy node's unlock can let the group in: its own rollback published on the
//! others. After a split vote (some nodes granted it, too few) it pauses a random moment
//! before the next try, so that rivals who split the nodes retry at different moments.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{join_all, select_all};
use rand::Rng;

use crate::error::{Error, Result};
use crate::groups::group::Node;
use crate::groups::guard::GroupGuard;
use crate::locks::wait::{Contender, Listening, Tried};
use crate::transport::connections::Connections;
use crate::transport::pubsub::{Limit, Subscription};

/// The longest random pause before retrying after a split vote.
const MAX_SPLIT_JITTER: Duration = Duration::from_millis(10);

/// A group's waiting call: its nodes, and what it has set up on them.
pub(super) struct GroupContender<'a> {
    pub(super) nodes: Vec<Node>,
    pub(super) owner: Arc<str>,
    pub(super) quorum: usize,
    /// Whether each node's acquire draws a fencing token, which the group must make agree
    /// across its majority ([`fence`](crate::groups::fence)).
    pub(super) fenced: bool,
    pub(super) node_timeout: Duration,
    pub(super) name: &'a str,
    /// One per node, made once the node has answered busy, so that a node that is down
    /// costs no subscribe timeout; retried each round until it is made.
    pub(super) subscriptions: Vec<Option<Subscription>>,
    /// The nodes the last round found held elsewhere.
    pub(super) busy: Vec<usize>,
    /// Whether the last round split the nodes between rivals.
    pub(super) split: bool,
    /// The caller's time left when the group last listened: a wait that runs to it ends
    /// at the caller's deadline, not at a holder's TTL.
    pub(super) remaining: Duration,
}

impl Contender for GroupContender<'_> {
    type Guard = GroupGuard;

    async fn attempt(&mut self) -> Result<Tried<GroupGuard>> {
        self.round().await
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
        self.remaining = remaining;
        let subscriptions = &mut self.subscriptions;
        let missing = self
            .busy
            .iter()
            .copied()
            .filter(|&index| subscriptions[index].is_none());
        let subscribing = missing.map(|index| {
            let Node { core, names, .. } = &self.nodes[index];
            let limit = core.settings.subscribe_timeout.min(remaining);
            let channel = names.wait_channel(&self.owner);
            async move { (index, core.listener.subscribe(&channel, limit).await) }
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
        // Try again now that these nodes' unlocks are heard.
        Ok(if made {
            Listening::Started
        } else {
            Listening::Already
        })
    }

    /// Waits for an unlock message from any of the busy nodes, at most `bound`.
    async fn wait(&mut self, bound: Duration) {
        let waits: Vec<_> = self
            .subscriptions
            .iter_mut()
            .enumerate()
            .filter(|(index, _)| self.busy.contains(index))
            .filter_map(|(_, subscription)| subscription.as_mut())
            .map(|subscription| {
                Box::pin(subscription.wait_within(bound, Limit::of(bound, self.remaining)))
            })
            .collect();
        if waits.is_empty() {
            tokio::time::sleep(bound).await;
        } else {
            select_all(waits).await;
        }
        if self.split {
            let jitter = rand::rng().random_range(Duration::ZERO..=MAX_SPLIT_JITTER);
            tokio::time::sleep(jitter.min(bound)).await;
        }
    }

    fn wakeups_used(&mut self) {
        self.subscriptions
            .iter_mut()
            .flatten()
            .for_each(Subscription::wakeup_used);
    }

    fn pacing(&self) -> &Connections {
        &self.nodes[0].core.connections
    }
}
