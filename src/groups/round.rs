//! One round of a group's acquire: every lock asked at once, the outcome decided as soon
//! as the quorum is reached or cannot be.

use std::time::Duration;

use futures_util::future::join_all;
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::groups::contender::GroupContender;
use crate::groups::fence;
use crate::groups::guard::GroupGuard;
use crate::locks::attempt::attempt;
use crate::locks::wait::Tried;

impl GroupContender<'_> {
    /// Asks every lock at once and stops as soon as the outcome is decided: the quorum of
    /// the nodes granted it, or too many refused or failed for that to happen. A fenced
    /// group's token is agreed by the quorum before the guard is returned. Not acquired,
    /// it notes which nodes were busy and whether rivals split them, for the wait.
    pub(super) async fn round(&mut self) -> Result<Tried<GroupGuard>> {
        let (nodes, owner, name) = (&self.nodes, &self.owner, self.name);
        let (quorum, node_timeout) = (self.quorum, self.node_timeout);
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
                Ok(Tried::Acquired(guard)) => {
                    held.push((index, guard));
                }
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
            let token = if self.fenced {
                let agreed = fence::agree(nodes, &held, owner, quorum, node_timeout).await;
                if agreed.is_none() {
                    // Too few masters still held the lock to vouch for the token: as if the
                    // quorum were never reached. Dropping the holds releases them.
                    tracing::debug!(lock = %name, "fencing token not agreed");
                    return Ok(self.no_time_left(busy));
                }
                agreed
            } else {
                None
            };
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

    /// The quorum was reached, but nothing usable was left of the lease by the time the
    /// group could be returned: try again at once (after the split-vote pause).
    fn no_time_left(&mut self, busy: Vec<usize>) -> Tried<GroupGuard> {
        self.busy = busy;
        self.split = true;
        Tried::Busy(Some(Duration::ZERO))
    }
}
