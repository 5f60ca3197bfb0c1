//! [`Hub`]: the listener's shared state. Which channels this client's waiters want, on
//! which node each one's subscription belongs, and the task that keeps each node's pub/sub
//! connection. Everything here changes under one lock, never held across an `await`:
//! a channel's node, its subscription state and the commands sent to node tasks change
//! together, so that a confirmation from a node a channel just left cannot mark it
//! subscribed.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::protocol::channels::ChannelKind;
use crate::protocol::slot_map::SlotMap;
use crate::transport::pubsub::channel::{Channel, Subscribed, Wake};
use crate::transport::pubsub::topology::{NodeId, Topology};
use crate::transport::pubsub::{node, watcher};
use crate::transport::reconnects::Reconnects;
use crate::util::metrics;
use crate::util::poison;

/// Timeouts and intervals of the pub/sub connections.
#[derive(Debug, Clone, Copy)]
pub(super) struct Timing {
    pub(super) connect_timeout: Duration,
    /// Bound on each SUBSCRIBE, UNSUBSCRIBE, PING and `CLUSTER SLOTS`.
    pub(super) command_timeout: Duration,
    /// How often each connection is pinged, so that a half-open connection (a peer that
    /// vanished without a FIN) is noticed and replaced instead of silently hearing nothing.
    pub(super) ping_interval: Duration,
}

/// The listener's shared state; node tasks and the cluster watcher hold it weakly and end
/// with it.
pub(super) struct Hub {
    pub(super) kind: ChannelKind,
    pub(super) topology: Topology,
    pub(super) timing: Timing,
    /// Told when a node's connection comes back after being lost, or subscriptions moved
    /// to another node: Redis may have restarted or failed over and forgotten locks.
    pub(super) reconnects: Arc<Reconnects>,
    /// Asks the cluster watcher to read the slot map again; held apart from the hub, which
    /// the watcher holds only weakly while it waits.
    refresh: Arc<Notify>,
    /// Where the tasks run: the runtime the client was built on.
    runtime: tokio::runtime::Handle,
    state: Mutex<State>,
    /// Cancelled when the hub goes (its client is gone) or the client shuts down: every
    /// node task and the watcher end then, closing their connections, rather than when
    /// they next find the hub gone.
    pub(super) closing: CancellationToken,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.closing.cancel();
    }
}

#[derive(Default)]
struct State {
    channels: HashMap<Arc<str>, Wanted>,
    /// The cluster's slot map as last read; `None` on one Redis, or before the first read.
    slots: Option<Arc<SlotMap>>,
    nodes: HashMap<NodeId, NodeTask>,
    /// The cluster watcher, while there are channels to watch over.
    watcher: Option<JoinHandle<Option<()>>>,
}

/// A channel some waiter of this client wants, and the node its subscription belongs on
/// (`None` while unknown: no slot map yet, or its slot unserved).
struct Wanted {
    channel: Arc<Channel>,
    node: Option<NodeId>,
}

impl State {
    /// The wanted channels whose subscription belongs on `node`.
    fn on<'a>(&'a self, node: &'a NodeId) -> impl Iterator<Item = (&'a Arc<str>, &'a Wanted)> {
        self.channels
            .iter()
            .filter(move |(_, w)| w.node.as_ref() == Some(node))
    }

    /// The channel `name`, if it is wanted and belongs on `node`.
    fn assigned(&self, name: &str, node: &NodeId) -> Option<&Wanted> {
        let wanted = self.channels.get(name)?;
        (wanted.node.as_ref() == Some(node)).then_some(wanted)
    }

    /// `node`'s connection is gone: its channels are to be subscribed again.
    fn unconfirm_on(&self, node: &NodeId) {
        for (_, wanted) in self.on(node) {
            wanted.channel.unconfirm();
        }
    }
}

/// A node's connection task and its queue of channels to look at again.
struct NodeTask {
    handle: JoinHandle<Option<()>>,
    sender: mpsc::UnboundedSender<Arc<str>>,
}

impl Hub {
    pub(super) fn new(
        kind: ChannelKind,
        topology: Topology,
        timing: Timing,
        reconnects: Arc<Reconnects>,
        runtime: tokio::runtime::Handle,
    ) -> Self {
        Hub {
            kind,
            topology,
            timing,
            reconnects,
            refresh: Arc::new(Notify::new()),
            runtime,
            state: Mutex::default(),
            closing: CancellationToken::new(),
        }
    }

    /// Adds a waiter on `name`; the channel's first waiter has its node told to subscribe,
    /// and sets what its messages wake (every waiter of one channel waits on one kind of
    /// object: the channels of different kinds have different prefixes).
    pub(super) fn register(self: &Arc<Self>, name: &Arc<str>, wake: Wake) -> Arc<Channel> {
        let mut state = poison::locked(&self.state);
        let state = &mut *state;
        let wanted = state
            .channels
            .entry(name.clone())
            .or_insert_with(|| Wanted {
                channel: Arc::new(Channel::new(wake)),
                node: None,
            });
        let channel = wanted.channel.clone();
        if channel.waiters.fetch_add(1, Ordering::AcqRel) == 0 {
            // A new entry: only the last waiter's leaving removes one, under this lock.
            metrics::channels(1.0);
            wanted.node = self.topology.node_of(state.slots.as_deref(), name);
            match wanted.node.clone() {
                Some(node) => self.tell(state, &node, name, true),
                None => self.request_refresh(),
            }
        }
        if self.topology.is_cluster() {
            self.ensure_watcher(state);
        }
        channel
    }

    /// Removes a waiter from `name`; the last one's leaving has its node unsubscribe.
    pub(super) fn deregister(self: &Arc<Self>, name: &Arc<str>, channel: &Channel) {
        let mut state = poison::locked(&self.state);
        if channel.waiters.fetch_sub(1, Ordering::AcqRel) == 1 {
            metrics::channels(-1.0);
            if let Some(Wanted {
                node: Some(node), ..
            }) = state.channels.remove(name)
            {
                // Never spawns a task (this may run in a `Drop` outside any runtime): a
                // node without a live task has no subscription to drop.
                self.tell(&mut state, &node, name, false);
            }
        }
    }

    /// Has `node`'s task look at `name` again; with `spawn`, starts the task if it has
    /// none running (the first channel of the node, or a task that died with its runtime).
    fn tell(self: &Arc<Self>, state: &mut State, node: &NodeId, name: &Arc<str>, spawn: bool) {
        if let Some(task) = state.nodes.get(node) {
            if !task.handle.is_finished() {
                // A live task holds the receiver, so this cannot fail.
                let _ = task.sender.send(name.clone());
                return;
            }
        }
        if !spawn {
            return;
        }
        // A task that died (with its runtime) leaves channels that believe they are
        // subscribed: the new task confirms them again, and wakes their waiters.
        let respawn = state.nodes.contains_key(node);
        if respawn {
            state.unconfirm_on(node);
        }
        let (sender, receiver) = mpsc::unbounded_channel();
        let run = node::run(Arc::downgrade(self), node.clone(), receiver, respawn);
        let handle = self.spawn(run);
        state
            .nodes
            .insert(node.clone(), NodeTask { handle, sender });
    }

    fn ensure_watcher(self: &Arc<Self>, state: &mut State) {
        if state.watcher.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        let watch = watcher::run(Arc::downgrade(self), self.refresh.clone());
        state.watcher = Some(self.spawn(watch));
    }

    /// Runs `task` on the client's runtime until it ends or the hub closes.
    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> JoinHandle<Option<()>> {
        let task = self.closing.clone().run_until_cancelled_owned(task);
        self.runtime.spawn(task)
    }

    /// Asks the cluster watcher to read the slot map again (a node's connection was lost,
    /// a subscription was dropped or redirected by the server); nothing on one Redis, where
    /// no watcher runs.
    pub(super) fn request_refresh(&self) {
        self.refresh.notify_one();
    }

    /// The cluster watcher ends when no channel is wanted (under the lock, so that a
    /// channel registered meanwhile finds no watcher and starts one). True when it should.
    pub(super) fn retire_watcher_if_idle(&self) -> bool {
        let mut state = poison::locked(&self.state);
        if state.channels.is_empty() {
            state.watcher = None;
            return true;
        }
        false
    }

    /// Whether some channel waits for its subscription, so that the watcher should look
    /// at the slot map again soon.
    pub(super) fn unsettled(&self) -> bool {
        let state = poison::locked(&self.state);
        state
            .channels
            .values()
            .any(|w| w.node.is_none() || w.channel.state() == Subscribed::Pending)
    }

    /// The last slot map read, if any.
    pub(super) fn slots(&self) -> Option<Arc<SlotMap>> {
        poison::locked(&self.state).slots.clone()
    }

    /// Applies a fresh slot map: every wanted channel whose slot now lives on another
    /// master moves there (its old node unsubscribes, its new node subscribes, and its
    /// waiters are woken once the new subscription is confirmed: messages sent in between
    /// were lost); channels still waiting for a subscription are asked for again; tasks of
    /// nodes that neither serve slots nor hold channels are stopped. Returns how many
    /// channels moved.
    pub(super) fn reroute(self: &Arc<Self>, map: SlotMap) -> usize {
        let map = Arc::new(map);
        let mut state = poison::locked(&self.state);
        let state = &mut *state;
        state.slots = Some(map.clone());
        let mut moved = 0;
        let mut tells: Vec<(NodeId, Arc<str>, bool)> = Vec::new();
        for (name, wanted) in state.channels.iter_mut() {
            let node = self.topology.node_of(Some(&map), name);
            if node != wanted.node {
                wanted.channel.unconfirm();
                if let Some(old) = wanted.node.take() {
                    moved += 1;
                    tells.push((old, name.clone(), false));
                }
                wanted.node = node.clone();
            } else if wanted.channel.state() != Subscribed::Pending {
                continue;
            }
            // Moved here, or still waiting for its subscription: asked for again.
            if let Some(node) = node {
                tells.push((node, name.clone(), true));
            }
        }
        for (node, name, spawn) in &tells {
            self.tell(state, node, name, *spawn);
        }
        let busy: HashSet<&NodeId> = state
            .channels
            .values()
            .filter_map(|w| w.node.as_ref())
            .collect();
        // Dropping a retired task's sender ends it once it has handled what it was told.
        state.nodes.retain(|node, _| match node {
            NodeId::At(addr) => map.is_master(addr) || busy.contains(node),
            NodeId::Only => true,
        });
        moved
    }

    /// The channels `node` should be subscribed to.
    pub(super) fn assigned_to(&self, node: &NodeId) -> Vec<Arc<str>> {
        let state = poison::locked(&self.state);
        state.on(node).map(|(name, _)| name.clone()).collect()
    }

    /// `node`'s connection was lost: its channels are to be subscribed again.
    pub(super) fn unconfirm_all(&self, node: &NodeId) {
        poison::locked(&self.state).unconfirm_on(node);
    }

    /// Which of `names` `node`'s connection should subscribe to, and which it should drop,
    /// in that order. A channel that belongs here, waits for its subscription and is
    /// subscribed on this connection already (it moved away and back) is confirmed at once.
    pub(super) fn plan(
        &self,
        node: &NodeId,
        names: &[Arc<str>],
        subscribed: &HashSet<Arc<str>>,
    ) -> (Vec<Arc<str>>, Vec<Arc<str>>) {
        let state = poison::locked(&self.state);
        let (mut subscribe, mut unsubscribe) = (Vec::new(), Vec::new());
        let mut seen = HashSet::new();
        for name in names {
            if !seen.insert(name) {
                continue;
            }
            match state.assigned(name, node) {
                Some(wanted) if wanted.channel.state() == Subscribed::Pending => {
                    if subscribed.contains(name) {
                        wanted.channel.confirm();
                    } else {
                        subscribe.push(name.clone());
                    }
                }
                None if subscribed.contains(name) => unsubscribe.push(name.clone()),
                _ => {}
            }
        }
        (subscribe, unsubscribe)
    }

    /// Runs `action` on the channel `name` if it is wanted and belongs on `node`, under the
    /// lock: a channel that moved on is not touched by its old node. Whether it ran.
    pub(super) fn on_assigned(
        &self,
        name: &str,
        node: &NodeId,
        action: impl FnOnce(&Channel),
    ) -> bool {
        let state = poison::locked(&self.state);
        let Some(wanted) = state.assigned(name, node) else {
            return false;
        };
        action(&wanted.channel);
        true
    }

    pub(super) fn channel(&self, name: &str) -> Option<Arc<Channel>> {
        poison::locked(&self.state)
            .channels
            .get(name)
            .map(|w| w.channel.clone())
    }

    /// How many channels are confirmed subscribed.
    pub(super) fn confirmed_count(&self) -> usize {
        poison::locked(&self.state)
            .channels
            .values()
            .filter(|w| w.channel.state() == Subscribed::Confirmed)
            .count()
    }
}
