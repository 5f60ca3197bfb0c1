//! Counting who listens on a lock's channels: `PUBSUB NUMSUB` (and on a cluster
//! `SHARDNUMSUB`) on every master, since subscribers are counted per node.

use crate::acl;
use crate::connect::Nodes;
use crate::exit::Failure;
use crate::inspect::PIPELINE;
use crate::keys::{shown, Key};
use crate::model::{ChannelSubscribers, NodeCount};

/// `PUBSUB NUMSUB` (and `SHARDNUMSUB` on a cluster) of `channels` on every master
/// (subscribers are counted per node), per channel in order.
///
/// # Errors
/// When a node does not answer.
pub async fn subscribers(
    nodes: &Nodes,
    channels: &[Key],
) -> Result<Vec<ChannelSubscribers>, Failure> {
    let mut counts: Vec<ChannelSubscribers> = channels
        .iter()
        .map(|channel| ChannelSubscribers {
            channel: shown(channel),
            total: 0,
            per_node: Vec::new(),
        })
        .collect();
    for chunk_start in (0..channels.len()).step_by(PIPELINE) {
        let chunk = &channels[chunk_start..(chunk_start + PIPELINE).min(channels.len())];
        for node in &nodes.nodes {
            let reply: Vec<(Key, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg(chunk)
                .query_async(&mut node.conn.clone())
                .await
                .map_err(|e| {
                    let context = format!("PUBSUB NUMSUB on {}", node.addr);
                    acl::failure(&context, &node.addr, "pubsub|numsub", None, &e)
                })?;
            // A cluster client subscribes with SSUBSCRIBE by default (sharded pub/sub,
            // Redis 7): those count only in SHARDNUMSUB, and only on the slot's master,
            // which the others refuse with MOVED. Any refusal (an older Redis, a user
            // without `+pubsub|shardnumsub`) counts as none.
            let sharded: Vec<(Key, i64)> = if nodes.cluster {
                redis::cmd("PUBSUB")
                    .arg("SHARDNUMSUB")
                    .arg(chunk)
                    .query_async(&mut node.conn.clone())
                    .await
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            for (i, (_, count)) in reply.into_iter().enumerate() {
                let count = count + sharded.get(i).map_or(0, |(_, c)| *c);
                let entry = &mut counts[chunk_start + i];
                entry.total += count;
                entry.per_node.push(NodeCount {
                    node: node.addr.clone(),
                    count,
                });
            }
        }
    }
    Ok(counts)
}
