//! The unlock listener: the pub/sub connections of one client, shared by every waiting call.
//!
//! Waiters register interest in a channel ([`UnlockListener::subscribe_as`]) and get a
//! [`Subscription`] once Redis confirmed the subscription, so that an unlock published after
//! that point is never missed; they then retry the acquire script, and only then wait.
//! On a lock's channel each `0` message adds one wake-up permit to the channel (wakes one
//! waiter), `1` one per waiter; a semaphore's or a count-down latch's channel wakes every
//! waiter (see [`Wake`]). A channel that loses its subscription (its connection dropped, its slot moved)
//! wakes every waiter once it is subscribed again, because messages published in the gap
//! are gone; the waiters re-check the lock at once.
//!
//! # Where subscriptions live
//!
//! One pub/sub connection per node (`node`), each kept by a task of its own: on one Redis,
//! one connection; on a Redis Cluster, one to each master that owns the slot of a wanted
//! channel (all of one lock's names share its key's slot). The listener learns where to
//! connect in one place (`topology`). In both pub/sub kinds a channel is subscribed on the
//! master of its slot: there a sharded message (`SPUBLISH`) is delivered, and there the
//! scripts run, whose `PUBSUB NUMSUB` or `PUBSUB SHARDNUMSUB` (a fair lock's look for a
//! waiter that can hear its turn) count the subscribers of their own node only.
//!
//! # Following the slots
//!
//! On a cluster, a watcher (`watcher`) reads the slot map with `CLUSTER SLOTS` and moves
//! each subscription whose slot lives elsewhere now: the old node unsubscribes, the new one
//! subscribes, and the waiters are woken once the new subscription is confirmed. It reads
//! the map at once when a node task tells it that:
//!
//! - the server dropped a subscription on its own: after a failover or a slot migration a
//!   node sends its shard channels' subscribers an unsolicited `sunsubscribe` push, which
//!   is why the connections speak RESP3 (see `node`; redis-rs' own cluster pub/sub applies
//!   the push and never subscribes again);
//! - a `SSUBSCRIBE` was answered `MOVED` (or `ASK`, `TRYAGAIN`, `CLUSTERDOWN`);
//! - a node's connection was lost, or the node does not answer.
//!
//! and every 2 s otherwise (every 250 ms while a channel waits for its subscription),
//! since a classic subscription is told nothing when its slot moves (it keeps hearing every
//! `PUBLISH`, but the new master's `PUBSUB NUMSUB` does not count it until it moves).
//! Each channel is subscribed with a command of its own, pipelined: never one `SSUBSCRIBE`
//! over several slots, which Redis refuses with `CROSSSLOT`.
//!
//! # What each connection keeps
//!
//! Every command is bounded (the subscribe timeout); the connection is pinged every
//! `ping_interval`, so that a half-open connection is replaced; a channel the user may not
//! subscribe to (ACL) fails its waiters at once and keeps the connection; a connection that
//! comes back after being lost, and subscriptions that moved, tell the client's services
//! (`Reconnects`), which then check the locks they hold.

mod channel;
mod hub;
mod node;
mod topology;
mod watcher;

use std::sync::Arc;
use std::time::Duration;

use crate::error::{channel_missing, Error, Result};
use crate::protocol::channels::ChannelKind;
use crate::transport::reconnects::Reconnects;
use crate::transport::sentinel::MasterWatch;
use crate::util::metrics::{self, WakeUp};

pub(crate) use channel::{Limit, Subscription, Wake};

use channel::Subscribed;
use hub::{Hub, Timing};
use topology::Topology;

/// The pub/sub connections of one client, shared by every unlock channel it waits on.
/// Clones share them.
#[derive(Clone)]
pub(crate) struct UnlockListener {
    hub: Arc<Hub>,
}

impl UnlockListener {
    /// `nodes`: where to connect (the one Redis, or a cluster's seeds, where the slot map
    /// is read from), with the client's credentials and TLS settings; `cluster`: whether
    /// they are a cluster's; `master`: on a Sentinel client, the master to follow instead;
    /// `kind`: classic or sharded pub/sub.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        nodes: &[redis::Client],
        cluster: bool,
        master: Option<MasterWatch>,
        kind: ChannelKind,
        connect_timeout: Duration,
        command_timeout: Duration,
        ping_interval: Duration,
        reconnects: Arc<Reconnects>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self> {
        let timing = Timing {
            connect_timeout,
            command_timeout,
            ping_interval,
        };
        let topology = Topology::new(nodes, cluster, master)?;
        Ok(UnlockListener {
            hub: Arc::new(Hub::new(kind, topology, timing, reconnects, runtime)),
        })
    }

    /// Closes the pub/sub connections for good: the client shuts down, and nothing waits
    /// any more.
    pub(crate) fn close(&self) {
        self.hub.closing.cancel();
    }

    /// Registers a waiter on `channel`, whose messages wake as `wake` says (a lock's, a
    /// semaphore's or a count-down latch's), and returns once Redis confirmed the
    /// subscription.
    ///
    /// # Errors
    /// [`Error::Timeout`] when the subscription is not confirmed
    /// within `timeout`; [`Error::PermissionDenied`] as soon
    /// as Redis refuses it.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future deregisters the waiter.
    pub(crate) async fn subscribe_as(
        &self,
        channel: &Arc<str>,
        wake: Wake,
        timeout: Duration,
    ) -> Result<Subscription> {
        let entry = self.hub.register(channel, wake);
        // From here on, dropping the subscription undoes the registration.
        let subscription = Subscription {
            hub: self.hub.clone(),
            name: channel.clone(),
            moves: entry.generation.subscribe(),
            channel: entry,
            holds_wakeup: false,
        };
        let mut subscribed = subscription.channel.watch();
        let settled = subscribed.wait_for(|s| *s != Subscribed::Pending);
        let settled = tokio::time::timeout(timeout, settled).await;
        match settled.map(|state| state.map(|state| *state)) {
            Ok(Ok(Subscribed::Confirmed)) => Ok(subscription),
            Ok(Ok(_)) => Err(Error::PermissionDenied {
                operation: "subscribing to",
                target: channel.to_string(),
                missing: channel_missing(self.hub.kind.subscribe(), channel),
            }),
            _ => Err(Error::Timeout {
                during: "subscribing to the unlock channel",
                after: timeout,
            }),
        }
    }

    /// Wakes every local waiter on `channel` to re-check the lock, as a message would.
    pub(crate) fn wake_waiters(&self, channel: &str) {
        if let Some(channel) = self.hub.channel(channel) {
            // The fair heartbeat asks: a turn came that the waiter may not have heard.
            metrics::woken(WakeUp::Heartbeat, channel.wake_all() as u64);
        }
    }

    /// How many channels Redis confirmed this client's subscription to (for tests and
    /// diagnostics): a waiter counts once it can hear an unlock, not when it asks to.
    pub(crate) fn channel_count(&self) -> usize {
        self.hub.confirmed_count()
    }
}
