//! One node's pub/sub connection task: connects, subscribes the channels that belong on the
//! node, dispatches their messages, notices what the server unsubscribed on its own, and
//! reconnects when the connection drops. Holds the listener weakly, and ends with it.
//!
//! The connection is a RESP3 multiplexed connection whose pushes (messages, subscription
//! confirmations, and the `sunsubscribe` a node sends when a shard channel's slot leaves
//! it) arrive on a channel of their own. redis-rs' `PubSub` swallows an unsolicited
//! `sunsubscribe` and has no `SSUBSCRIBE`; this connection passes every push on.
//!
//! Each channel is subscribed with a command of its own, all of one round pipelined: a
//! `SSUBSCRIBE` naming channels of several slots fails with `CROSSSLOT`, and one refused
//! or redirected channel then fails only its own command. A subscription counts once its
//! confirmation push arrives, not when the command's reply does: a push the server sends
//! on its own while a command is in flight is taken by redis-rs for that command's reply,
//! so replies are read for their errors only.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, PushInfo, PushKind, RedisError, ServerErrorKind, Value};
use tokio::sync::{mpsc, watch};

use crate::error::{is_permission_failure, Result};
use crate::transport::bounded::within;
use crate::transport::pubsub::channel::Channel;
use crate::transport::pubsub::hub::{Hub, Timing};
use crate::transport::pubsub::topology::NodeId;
use crate::transport::sentinel::Master;
use crate::util::metrics::{self, WakeUp};

/// Pause between reconnection attempts while channels belong on the node.
const RECONNECT_DELAY: Duration = Duration::from_millis(100);

/// Most channels subscribed (or unsubscribed) by one pipeline.
const CHUNK: usize = 512;

/// Why a connection's service ended.
enum End {
    /// The connection is lost or unusable: reconnect.
    Lost,
    /// The listener is gone, or the task was retired: stop.
    Done,
}

/// The task of `node`. `reconnecting`: the task replaces one that died, whose channels'
/// waiters may have missed messages.
pub(super) async fn run(
    hub: Weak<Hub>,
    node: NodeId,
    mut tells: mpsc::UnboundedReceiver<Arc<str>>,
    mut reconnecting: bool,
) {
    // Since when the node could not be reached again, if it cannot.
    let mut failing_since: Option<tokio::time::Instant> = None;
    loop {
        let Some(listener) = hub.upgrade() else {
            return;
        };
        if listener.assigned_to(&node).is_empty() {
            // Nothing to listen for: stay disconnected until a channel arrives.
            drop(listener);
            match tells.recv().await {
                Some(_) => continue,
                None => return,
            }
        }
        // Where it is now (a Sentinel master moves), for the logs.
        let address = listener.topology.address_of(&node);
        let opened = Session::open(&listener, &node, &address).await;
        let mut session = match opened {
            Ok(opened) => opened,
            Err(e) => {
                // Once per outage, for waiters who had a subscription: they now wait out
                // their TTL-bounded re-checks. Reconnect tries go on every RECONNECT_DELAY.
                if reconnecting && failing_since.is_none() {
                    tracing::warn!(node = %address, error = %e, waiting = listener.assigned_to(&node).len(), "cannot resubscribe unlock channels; their waiters re-check at their TTL bounds until it can");
                } else {
                    tracing::debug!(node = %address, error = %e, "pub/sub connect failed; retrying");
                }
                failing_since.get_or_insert_with(tokio::time::Instant::now);
                // The node may be gone for good: its slots may have moved.
                listener.request_refresh();
                drop(listener);
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        };
        let end = match session.sync(&listener, &listener.assigned_to(&node)).await {
            Ok(()) => {
                if reconnecting {
                    listener.reconnects.tell();
                }
                if let Some(since) = failing_since.take() {
                    tracing::info!(node = %address, after = ?since.elapsed(), "unlock channels subscribed again");
                }
                reconnecting = true;
                drop(listener);
                session.serve(&hub, &mut tells).await
            }
            Err(end) => end,
        };
        if let End::Done = end {
            return;
        }
        tracing::debug!(node = %address, "pub/sub connection lost; reconnecting");
        if let Some(listener) = hub.upgrade() {
            listener.unconfirm_all(&node);
            listener.request_refresh();
        }
        tokio::time::sleep(RECONNECT_DELAY).await;
    }
}

/// One connection to the node, and what the server confirmed on it.
struct Session {
    node: NodeId,
    /// Where it is, as logs name it.
    address: String,
    conn: MultiplexedConnection,
    /// Channels whose subscription the server confirmed on this connection, and that it
    /// was not asked to drop since: an `unsubscribe` push for one of them is news.
    subscribed: HashSet<Arc<str>>,
    /// What the server pushes on this connection: messages, subscription changes, and its
    /// loss.
    pushes: mpsc::UnboundedReceiver<PushInfo>,
    /// The bound on each command, and how often the connection is pinged.
    timing: Timing,
    /// On a Sentinel client: told when the sentinels name another master, which this
    /// connection must leave (see the topology docs).
    master_changes: Option<watch::Receiver<Arc<Master>>>,
}

impl Session {
    async fn open(hub: &Hub, node: &NodeId, address: &str) -> Result<Session> {
        let timing = hub.timing;
        let master_changes = hub.topology.master_changes();
        let client = hub.topology.client_for(node)?;
        let (sender, pushes) = mpsc::unbounded_channel();
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timing.connect_timeout))
            .set_response_timeout(Some(timing.command_timeout))
            .set_push_sender(sender);
        // Bounded as a whole: the handshake after the connect has no bound of its own.
        let limit = timing.connect_timeout + timing.command_timeout;
        let connecting = client.get_multiplexed_async_connection_with_config(&config);
        let conn = within(limit, "connecting for pub/sub", connecting).await?;
        Ok(Session {
            node: node.clone(),
            address: address.to_string(),
            conn,
            subscribed: HashSet::new(),
            pushes,
            timing,
            master_changes,
        })
    }

    /// Serves the connection until it is lost or the listener is gone.
    async fn serve(
        &mut self,
        hub: &Weak<Hub>,
        tells: &mut mpsc::UnboundedReceiver<Arc<str>>,
    ) -> End {
        let mut keepalive = tokio::time::interval(self.timing.ping_interval);
        keepalive.tick().await;
        let mut names = Vec::with_capacity(CHUNK);
        loop {
            let master_changed = async {
                match self.master_changes.as_mut() {
                    Some(changes) => changes.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                true = master_changed => {
                    tracing::debug!(node = %self.address, "the master changed; moving the pub/sub connection");
                    return End::Lost;
                }
                _ = keepalive.tick() => {
                    // Any reply will do (even a push redis-rs hands to the PING).
                    let ping = redis::cmd("PING");
                    let pong = self.conn.req_packed_command(&ping);
                    if within(self.timing.command_timeout, "pinging", pong).await.is_err() {
                        tracing::debug!(node = %self.address, "pub/sub ping failed");
                        return End::Lost;
                    }
                }
                told = tells.recv_many(&mut names, CHUNK) => {
                    let Some(listener) = hub.upgrade().filter(|_| told > 0) else {
                        return End::Done;
                    };
                    if let Err(end) = self.sync(&listener, &std::mem::take(&mut names)).await {
                        return end;
                    }
                }
                push = self.pushes.recv() => {
                    let Some(push) = push else { return End::Lost };
                    let Some(listener) = hub.upgrade() else { return End::Done };
                    if let Err(end) = self.on_push(&listener, push).await {
                        return end;
                    }
                }
            }
        }
    }

    /// Subscribes what belongs here and is not subscribed, and drops what is subscribed
    /// and no longer belongs here, among `names`.
    async fn sync(&mut self, hub: &Hub, names: &[Arc<str>]) -> Result<(), End> {
        let (subscribe, unsubscribe) = hub.plan(&self.node, names, &self.subscribed);
        let kind = hub.kind;
        for chunk in unsubscribe.chunks(CHUNK) {
            for name in chunk {
                self.subscribed.remove(name);
            }
            let replies = self.pipeline(kind.unsubscribe(), chunk).await?;
            for (name, reply) in chunk.iter().zip(replies) {
                if let Err(e) = reply {
                    // Refused (no `+unsubscribe`): the subscription stays, harmlessly.
                    tracing::debug!(channel = %name, error = %e, "pub/sub unsubscribe refused");
                }
            }
        }
        for chunk in subscribe.chunks(CHUNK) {
            let replies = self.pipeline(kind.subscribe(), chunk).await?;
            for (name, reply) in chunk.iter().zip(replies) {
                let Err(e) = reply else { continue };
                if is_permission_failure(&e) {
                    tracing::warn!(channel = %name, error = %e, "the user may not subscribe to an unlock channel");
                    hub.on_assigned(name, &self.node, Channel::refuse);
                } else if is_redirection(&e) {
                    // The slot map is stale: the channel waits for the watcher to route it
                    // again.
                    tracing::debug!(channel = %name, error = %e, "pub/sub subscribe redirected");
                    hub.request_refresh();
                } else {
                    tracing::debug!(channel = %name, error = %e, "pub/sub subscribe failed");
                    return Err(End::Lost);
                }
            }
        }
        Ok(())
    }

    /// Sends `command` once per channel, in one pipeline; each channel's own outcome.
    async fn pipeline(
        &mut self,
        command: &str,
        channels: &[Arc<str>],
    ) -> Result<Vec<Result<(), RedisError>>, End> {
        let mut pipe = redis::pipe();
        for name in channels {
            pipe.cmd(command).arg(&**name);
        }
        let sending = self.conn.req_packed_commands(&pipe, 0, channels.len());
        let limit = self.timing.command_timeout;
        match within(limit, "sending pub/sub commands", sending).await {
            Ok(replies) => Ok(replies
                .into_iter()
                .map(|reply| match reply {
                    Value::ServerError(e) => Err(RedisError::from(e)),
                    _ => Ok(()),
                })
                .collect()),
            Err(e) => {
                tracing::debug!(node = %self.address, error = %e, "pub/sub command failed");
                Err(End::Lost)
            }
        }
    }

    /// Handles what the server pushed.
    async fn on_push(&mut self, hub: &Hub, push: PushInfo) -> Result<(), End> {
        if push.kind == PushKind::Disconnection {
            return Err(End::Lost);
        }
        let Some(name) = (match push.data.first() {
            Some(Value::BulkString(bytes)) => std::str::from_utf8(bytes).ok(),
            _ => None,
        }) else {
            return Ok(());
        };
        match push.kind {
            PushKind::Message | PushKind::SMessage => {
                let (Some(channel), Some(payload)) = (hub.channel(name), push.data.get(1)) else {
                    return Ok(());
                };
                let payload = match payload {
                    Value::BulkString(bytes) => bytes.as_slice(),
                    _ => b"",
                };
                metrics::woken(WakeUp::Message, channel.on_message(payload) as u64);
            }
            PushKind::Subscribe | PushKind::SSubscribe => {
                let name = Arc::<str>::from(name);
                self.subscribed.insert(name.clone());
                if !hub.on_assigned(&name, &self.node, |channel| channel.confirm()) {
                    // Its waiters left (or it moved) while the subscribe was under way.
                    self.sync(hub, &[name]).await?;
                }
            }
            // Not asked for (asking takes the channel out of `subscribed` first): the server
            // dropped it on its own, as the channel's slot left this node (a failover, a
            // migration). Find where it lives now.
            PushKind::Unsubscribe | PushKind::SUnsubscribe if self.subscribed.remove(name) => {
                tracing::debug!(node = %self.address, channel = %name, "subscription dropped by the server");
                hub.on_assigned(name, &self.node, Channel::unconfirm);
                hub.request_refresh();
            }
            _ => {}
        }
        Ok(())
    }
}

/// The node does not serve the channel's slot (any more), or the cluster is reconfiguring.
fn is_redirection(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::Server(
            ServerErrorKind::Moved
                | ServerErrorKind::Ask
                | ServerErrorKind::TryAgain
                | ServerErrorKind::ClusterDown
                | ServerErrorKind::MasterDown
        )
    )
}
