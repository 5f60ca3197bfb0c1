//! The unlock listener: one pub/sub connection per client, shared by every waiting call.
//!
//! Waiters register interest in a channel ([`UnlockListener::subscribe`]) and get a
//! [`Subscription`] once Redis confirmed the SUBSCRIBE, so that an unlock published after
//! that point is never missed; they then retry the acquire script, and only then wait.
//! Each `0` message adds one wake-up permit to the channel (wakes one waiter); reconnecting
//! adds a permit per waiter so that every waiter re-checks at once, because messages
//! published while the connection was down are gone.
//!
//! On a Redis Cluster the connection goes to one node: a classic `PUBLISH` on any node
//! reaches the subscribers of every node (replicas too) over the cluster bus. When the node
//! fails, the connection moves to the next seed that answers.
//!
//! On a Sentinel client the connection goes to the master the sentinels name, and moves
//! with it when they fail it over: the old master hears nothing the new one publishes until
//! the sentinels make it a replica, seconds later.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinHandle;

use crate::error::{channel_missing, is_permission_failure, Error, Result};
use crate::transport::connection::Reconnects;
use crate::transport::sentinel::MasterWatch;
use crate::util::sync;

/// Pause between reconnection attempts while waiters want a subscription.
const RECONNECT_DELAY: Duration = Duration::from_millis(100);

/// The waiters of one channel on this client.
#[derive(Debug)]
struct Channel {
    /// Wake-up permits: one per unlock message, capped at the number of waiters.
    wakeups: Semaphore,
    waiters: AtomicUsize,
    /// Whether Redis confirmed our subscription on the current connection.
    subscribed: watch::Sender<Subscribed>,
}

/// Where a channel's subscription stands on the current connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subscribed {
    /// Asked for, or to be asked for once connected.
    Pending,
    Confirmed,
    /// The user may not subscribe to it (ACL): its waiters are told at once, and the
    /// connection, which is fine, is kept.
    Refused,
}

impl Channel {
    fn wake_one(&self) {
        // A permit nobody will take only costs a spurious retry, but unbounded permits would
        // turn later waits into polling; keep at most one per waiter.
        if self.wakeups.available_permits() < self.waiters.load(Ordering::Acquire) {
            self.wakeups.add_permits(1);
        }
    }

    fn wake_all(&self) {
        let missing = self
            .waiters
            .load(Ordering::Acquire)
            .saturating_sub(self.wakeups.available_permits());
        self.wakeups.add_permits(missing);
    }
}

enum Command {
    Subscribe(Arc<str>),
    Unsubscribe(Arc<str>),
}

struct Shared {
    /// The nodes to connect to, tried in turn from `next_node`: the one URL, or each seed.
    nodes: Vec<redis::Client>,
    /// On a Sentinel client, where the master is: `nodes` is not used.
    master: Option<MasterWatch>,
    /// The node tried first at the next connection.
    next_node: AtomicUsize,
    /// Bound on each SUBSCRIBE, UNSUBSCRIBE and PING of the connection task.
    command_timeout: Duration,
    /// Told when this connection is re-established after a loss: the shared connection's
    /// listeners check their holds then too.
    reconnects: Arc<Reconnects>,
    /// How often the connection is pinged, so that a half-open connection (a peer that
    /// vanished without a FIN) is noticed and replaced instead of silently hearing nothing.
    ping_interval: Duration,
    /// Where the connection task runs: the runtime the client was built on.
    runtime: tokio::runtime::Handle,
    connect_timeout: Duration,
    channels: Mutex<HashMap<Arc<str>, Arc<Channel>>>,
    /// The connection task and its command queue, created together, lazily, on the runtime
    /// of the first waiter; re-created if that runtime went away.
    task: Mutex<Option<(JoinHandle<()>, mpsc::UnboundedSender<Command>)>>,
}

/// One pub/sub connection multiplexing every unlock channel this client waits on. Clones
/// share it.
#[derive(Clone)]
pub(crate) struct UnlockListener {
    shared: Arc<Shared>,
}

impl UnlockListener {
    /// `nodes`: where to connect (one node, or a cluster's seeds, tried in turn), with the
    /// client's TLS settings; `master`, on a Sentinel client, in their place.
    pub(crate) fn new(
        nodes: Vec<redis::Client>,
        master: Option<MasterWatch>,
        connect_timeout: Duration,
        command_timeout: Duration,
        ping_interval: Duration,
        reconnects: Arc<Reconnects>,
        runtime: tokio::runtime::Handle,
    ) -> Result<Self> {
        Ok(UnlockListener {
            shared: Arc::new(Shared {
                nodes,
                master,
                next_node: AtomicUsize::new(0),
                reconnects,
                command_timeout,
                ping_interval,
                runtime,
                connect_timeout,
                channels: Mutex::new(HashMap::new()),
                task: Mutex::new(None),
            }),
        })
    }

    /// Registers a waiter on `channel` and returns once Redis confirmed the subscription.
    ///
    /// # Errors
    /// [`Error::Timeout`](crate::Error::Timeout) when the subscription is not confirmed
    /// within `timeout`; [`Error::PermissionDenied`](crate::Error::PermissionDenied) as soon
    /// as Redis refuses it.
    pub(crate) async fn subscribe(
        &self,
        channel: &Arc<str>,
        timeout: Duration,
    ) -> Result<Subscription> {
        let (entry, first) = {
            let mut channels = sync::locked(&self.shared.channels);
            let entry = channels
                .entry(channel.clone())
                .or_insert_with(|| {
                    Arc::new(Channel {
                        wakeups: Semaphore::new(0),
                        waiters: AtomicUsize::new(0),
                        subscribed: watch::Sender::new(Subscribed::Pending),
                    })
                })
                .clone();
            let first = entry.waiters.fetch_add(1, Ordering::AcqRel) == 0;
            (entry, first)
        };
        // Sent outside the map's lock, which `send` may take itself. Only this call can
        // bring the count back to zero, so no unsubscribe can overtake it.
        if first {
            self.send(Command::Subscribe(channel.clone()));
        }
        // From here on, dropping the subscription undoes the registration.
        let subscription = Subscription {
            shared: self.shared.clone(),
            name: channel.clone(),
            channel: entry,
            holds_wakeup: false,
        };
        let mut subscribed = subscription.channel.subscribed.subscribe();
        let settled =
            tokio::time::timeout(timeout, subscribed.wait_for(|s| *s != Subscribed::Pending)).await;
        let settled = settled
            .ok()
            .and_then(|state| state.ok().map(|state| *state));
        match settled {
            Some(Subscribed::Confirmed) => Ok(subscription),
            Some(_) => Err(Error::PermissionDenied {
                operation: "subscribing to",
                target: channel.to_string(),
                missing: channel_missing("SUBSCRIBE", channel),
            }),
            _ => Err(Error::Timeout {
                during: "subscribing to the unlock channel",
                after: timeout,
            }),
        }
    }

    fn send(&self, command: Command) {
        self.shared.send(command);
    }

    /// Wakes every local waiter on `channel` to re-check the lock, as a message would.
    pub(crate) fn wake_waiters(&self, channel: &str) {
        if let Some(channel) = self.shared.channel(channel) {
            channel.wake_all();
        }
    }

    /// How many channels Redis confirmed this client's subscription to (for tests and
    /// diagnostics): a waiter counts once it can hear an unlock, not when it asks to.
    pub(crate) fn channel_count(&self) -> usize {
        sync::locked(&self.shared.channels)
            .values()
            .filter(|channel| *channel.subscribed.borrow() == Subscribed::Confirmed)
            .count()
    }
}

impl Shared {
    fn send(self: &Arc<Self>, command: Command) {
        let mut task = sync::locked(&self.task);
        if let Some((handle, sender)) = task.as_ref() {
            if !handle.is_finished() {
                // A live task holds the receiver, so this cannot fail.
                let _ = sender.send(command);
                return;
            }
        }
        // No live connection task: nothing is subscribed, so an unsubscribe has nothing to
        // do (and may come from a `Drop` outside any runtime). A subscribe starts a task,
        // which subscribes every wanted channel when it connects.
        if let Command::Subscribe(_) = command {
            // A task that died (with its runtime) leaves waiters that believe they are
            // subscribed: the new task re-confirms them, and wakes them to re-check.
            let respawn = task.is_some();
            if respawn {
                for (_, channel) in self.wanted() {
                    channel.subscribed.send_replace(Subscribed::Pending);
                }
            }
            let (sender, receiver) = mpsc::unbounded_channel();
            let handle = self
                .runtime
                .spawn(run(Arc::downgrade(self), receiver, respawn));
            *task = Some((handle, sender));
        }
    }

    fn channel(&self, name: &str) -> Option<Arc<Channel>> {
        sync::locked(&self.channels).get(name).cloned()
    }

    fn wanted(&self) -> Vec<(Arc<str>, Arc<Channel>)> {
        sync::locked(&self.channels)
            .iter()
            .map(|(name, channel)| (name.clone(), channel.clone()))
            .collect()
    }

    /// Connects to the first node that answers, starting at `next_node`; on a Sentinel
    /// client, to the master, with the generation of the master it connected to.
    async fn connect(&self) -> Result<(PubSubSink, PubSubStream, u64)> {
        if let Some(watch) = &self.master {
            let master = watch.current();
            let connected =
                tokio::time::timeout(self.connect_timeout, master.client.get_async_pubsub());
            return match connected.await {
                Ok(Ok(pubsub)) => {
                    let (sink, stream) = pubsub.split();
                    Ok((sink, stream, master.generation))
                }
                Ok(Err(e)) => {
                    watch.suspect();
                    Err(e.into())
                }
                Err(_) => Err(Error::Timeout {
                    during: "connecting for pub/sub",
                    after: self.connect_timeout,
                }),
            };
        }
        let count = self.nodes.len().max(1);
        let start = self.next_node.load(Ordering::Relaxed);
        let mut failure = None;
        for step in 0..count {
            let index = (start + step) % count;
            let Some(node) = self.nodes.get(index) else {
                break;
            };
            // redis-rs puts no timeout on opening a pub/sub connection; a frozen server
            // would hang it.
            match tokio::time::timeout(self.connect_timeout, node.get_async_pubsub()).await {
                Ok(Ok(pubsub)) => {
                    self.next_node.store(index, Ordering::Relaxed);
                    let (sink, stream) = pubsub.split();
                    return Ok((sink, stream, 0));
                }
                Ok(Err(e)) => failure = Some(e.into()),
                Err(_) => {
                    failure = Some(Error::Timeout {
                        during: "connecting for pub/sub",
                        after: self.connect_timeout,
                    })
                }
            }
        }
        Err(failure.unwrap_or_else(|| Error::invalid("no node to connect to for pub/sub")))
    }

    /// The connection to the current node was lost: start the next try at the next node
    /// (on a cluster, the node may have failed).
    fn move_on(&self) {
        self.next_node.fetch_add(1, Ordering::Relaxed);
    }
}

/// The connection task: connects, subscribes what is wanted, dispatches messages, and
/// reconnects when the connection drops. Holds the listener weakly, and ends with it.
async fn run(
    shared: Weak<Shared>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    mut reconnecting: bool,
) {
    loop {
        let Some(listener) = shared.upgrade() else {
            return;
        };
        if listener.wanted().is_empty() {
            // Nothing to listen for: stay disconnected until a waiter arrives.
            drop(listener);
            match commands.recv().await {
                Some(_) => continue,
                None => return,
            }
        }
        let (mut sink, mut stream, master) = match listener.connect().await {
            Ok(connection) => connection,
            Err(e) => {
                tracing::debug!(error = %e, "pub/sub connect failed; retrying");
                drop(listener);
                tokio::time::sleep(RECONNECT_DELAY).await;
                continue;
            }
        };
        let subscribed = bounded(
            listener.command_timeout,
            subscribe_all(&listener, &mut sink, reconnecting),
        )
        .await;
        if subscribed.is_err() {
            drop(listener);
            tokio::time::sleep(RECONNECT_DELAY).await;
            continue;
        }
        if reconnecting {
            listener.reconnects.tell();
        }
        let (command_timeout, ping_interval) = (listener.command_timeout, listener.ping_interval);
        // On a Sentinel client: told when the sentinels name another master, which this
        // connection must follow.
        let mut master_changes = listener.master.as_ref().map(|watch| {
            let mut changes = watch.changes();
            if changes.borrow_and_update().generation != master {
                // It changed while this connection was made.
                changes.mark_changed();
            }
            changes
        });
        drop(listener);
        reconnecting = true;
        let mut keepalive = tokio::time::interval(ping_interval);
        keepalive.tick().await;
        loop {
            let master_changed = async {
                match master_changes.as_mut() {
                    Some(changes) => changes.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                true = master_changed => {
                    tracing::debug!("the master changed; moving the pub/sub connection");
                    break;
                }
                _ = keepalive.tick() => {
                    // Any reply will do: on RESP2 a subscribed connection answers PING with
                    // `["pong", ""]`, on RESP3 with `PONG`.
                    let pong = async { Ok(sink.ping::<redis::Value>().await?) };
                    if let Err(e) = bounded(command_timeout, pong).await {
                        tracing::debug!(error = %e, "pub/sub ping failed");
                        break;
                    }
                }
                command = commands.recv() => {
                    let Some(command) = command else { return };
                    let Some(listener) = shared.upgrade() else { return };
                    if bounded(command_timeout, apply(&listener, &mut sink, command)).await.is_err() {
                        break;
                    }
                }
                message = stream.next() => {
                    let Some(message) = message else { break };
                    let Some(listener) = shared.upgrade() else { return };
                    if let Some(channel) = listener.channel(message.get_channel_name()) {
                        // "0" is an unlock (wake one); "1" a read unlock (wake all).
                        match message.get_payload_bytes() {
                            b"1" => channel.wake_all(),
                            _ => channel.wake_one(),
                        }
                    }
                }
            }
        }
        tracing::debug!("pub/sub connection lost; reconnecting");
        if let Some(listener) = shared.upgrade() {
            listener.move_on();
            for (_, channel) in listener.wanted() {
                channel.subscribed.send_replace(Subscribed::Pending);
            }
        }
    }
}

/// Runs a pub/sub command with a time bound: redis-rs sets none on this connection.
async fn bounded<T>(
    limit: Duration,
    command: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(limit, command).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Error::Timeout {
            during: "a pub/sub command",
            after: limit,
        }),
    }
}

/// Subscribes every wanted channel on a new connection. After a reconnection, every waiter
/// is woken to re-check the lock: unlocks published in the gap were not delivered.
async fn subscribe_all(listener: &Shared, sink: &mut PubSubSink, reconnected: bool) -> Result<()> {
    let wanted = listener.wanted();
    if wanted.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = wanted.iter().map(|(name, _)| &**name).collect();
    match sink.subscribe(&names).await {
        Ok(()) => {
            for (_, channel) in &wanted {
                confirm(channel, reconnected);
            }
        }
        // Redis refuses the whole SUBSCRIBE when one channel is refused: ask for each
        // alone, to tell the refused ones' waiters and serve the others.
        Err(e) if is_permission_failure(&e) => {
            for (name, channel) in &wanted {
                subscribe_one(sink, name, channel).await?;
                if reconnected {
                    channel.wake_all();
                }
            }
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Marks `channel` subscribed, waking its waiters to re-check after a reconnection.
fn confirm(channel: &Channel, reconnected: bool) {
    channel.subscribed.send_replace(Subscribed::Confirmed);
    if reconnected {
        channel.wake_all();
    }
}

/// Subscribes one channel; a refusal is the channel's, told to its waiters, and keeps the
/// connection (reconnecting would only be refused again, ten times a second).
async fn subscribe_one(sink: &mut PubSubSink, name: &str, channel: &Channel) -> Result<()> {
    match sink.subscribe(name).await {
        Ok(()) => {
            channel.subscribed.send_replace(Subscribed::Confirmed);
            Ok(())
        }
        Err(e) if is_permission_failure(&e) => {
            tracing::warn!(channel = name, error = %e, "the user may not subscribe to an unlock channel");
            channel.subscribed.send_replace(Subscribed::Refused);
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// Applies one command, skipping it if the channel's waiters changed their mind since.
async fn apply(listener: &Shared, sink: &mut PubSubSink, command: Command) -> Result<()> {
    match command {
        Command::Subscribe(name) => {
            let Some(channel) = listener.channel(&name) else {
                return Ok(());
            };
            subscribe_one(sink, &name, &channel).await?;
        }
        Command::Unsubscribe(name) => {
            if listener.channel(&name).is_none() {
                sink.unsubscribe(&*name).await?;
            }
        }
    }
    Ok(())
}

/// One waiter's registration on a channel; dropping it deregisters, and unsubscribes when
/// it was the channel's last waiter on this client.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    name: Arc<str>,
    channel: Arc<Channel>,
    /// Took a wake-up it has not acted on yet: if dropped now, it passes it on.
    holds_wakeup: bool,
}

impl Subscription {
    /// Waits for an unlock message, at most `limit`. Returns true when woken by a message.
    ///
    /// # Cancel safety
    /// Cancel safe: a wake-up taken by a cancelled wait is passed on by `Drop`.
    pub(crate) async fn wait(&mut self, limit: Duration) -> bool {
        match tokio::time::timeout(limit, self.channel.wakeups.acquire()).await {
            Ok(Ok(permit)) => {
                permit.forget();
                self.holds_wakeup = true;
                true
            }
            // The semaphore is never closed; a timeout is the only other outcome.
            _ => false,
        }
    }

    /// The waiter acted on its wake-up (it retried the acquire).
    pub(crate) fn wakeup_used(&mut self) {
        self.holds_wakeup = false;
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if self.holds_wakeup {
            // This waiter was told the lock is free but leaves without trying it: hand the
            // news to another local waiter, or it would sit until the holder's TTL.
            self.channel.wakeups.add_permits(1);
        }
        let mut channels = sync::locked(&self.shared.channels);
        if self.channel.waiters.fetch_sub(1, Ordering::AcqRel) == 1 {
            channels.remove(&self.name);
            drop(channels);
            self.shared.send(Command::Unsubscribe(self.name.clone()));
        }
    }
}
