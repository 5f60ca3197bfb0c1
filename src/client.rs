//! [`Client`]: the connection to one Redis, and the services every lock of it shares.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::batch::Batcher;
use crate::config::ClientBuilder;
use crate::connection::{Connections, Reconnects};
use crate::error::{Error, Result};
use crate::fair_lock::FairLock;
use crate::fenced_lock::FencedLock;
use crate::hold::Holds;
use crate::latches::LatchReaper;
use crate::lease_check::LeaseCheck;
use crate::lock::{Lock, RLock};
use crate::permissions::CommandCheck;
use crate::pubsub::UnlockListener;
use crate::queue::Heartbeat;
use crate::replica_sync::ReplicaSync;
use crate::scripts::{AcquireItem, UnlockItem};
use crate::server_check;
use crate::server_url::ServerUrl;
use crate::settings::Settings;
use crate::watchdog::Watchdog;

/// A connection to one Redis server and the source of its locks.
///
/// Cheap to clone: clones share the connections, the client id, the watchdog and the
/// unlock listener. A client belongs to the tokio runtime it was built on: its connections
/// and background tasks run there, so build it on the runtime that outlives its use.
///
/// Each `Client` has its own random id, the `<client-uuid>` of the hash fields it writes, so
/// two `Client`s in one process never share a lock's ownership.
///
/// ```no_run
/// # async fn demo() -> redis_rlock::Result<()> {
/// let client = redis_rlock::Client::connect("redis://127.0.0.1:6379").await?;
/// let guard = client.lock("order:1001").lock().await?;
/// // ... the critical section ...
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
///
/// `Debug` shows the client id, the URL with its password replaced by `***`, and how many
/// locks the client holds.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) id: Uuid,
    /// `id` as it appears in hash fields, formatted once.
    pub(crate) id_text: String,
    pub(crate) settings: Settings,
    pub(crate) connections: Arc<Connections>,
    pub(crate) holds: Arc<Holds>,
    pub(crate) watchdog: Watchdog,
    /// Checks fixed-lease holds after a reconnection.
    pub(crate) lease_check: LeaseCheck,
    pub(crate) heartbeat: Heartbeat,
    pub(crate) listener: UnlockListener,
    pub(crate) latches: LatchReaper,
    /// Coalesces concurrent acquires of plain locks into multi-key script calls.
    pub(crate) acquires: Arc<Batcher<AcquireItem>>,
    /// Coalesces concurrent releases of plain locks likewise.
    pub(crate) releases: Arc<Batcher<UnlockItem>>,
    /// Set when lock writes must reach a replica before they count.
    pub(crate) replica_sync: Option<Arc<ReplicaSync>>,
    /// Whether the user may run each lock kind's commands, checked at its first use.
    pub(crate) commands: CommandCheck,
    /// The runtime the client was built on, where its connections are driven.
    runtime: tokio::runtime::Handle,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.id)
            .field("url", &self.inner.settings.url)
            .field("held_locks", &self.inner.holds.len())
            .finish()
    }
}

impl Client {
    /// Connects with default settings and verifies that Redis answers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a malformed URL; a connection error or
    /// [`Error::Timeout`](crate::Error::Timeout) when Redis does not answer within the connect timeout (2 s by
    /// default) and the response timeout (1 s).
    pub async fn connect(url: impl Into<String>) -> Result<Client> {
        Client::builder(url).build().await
    }

    /// A builder for a client with non-default settings; see [`ClientBuilder`].
    pub fn builder(url: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(url)
    }

    /// `redis`: the redis-rs client of the settings' URL and certificates.
    pub(crate) async fn from_settings(settings: Settings, redis: redis::Client) -> Result<Client> {
        // Background tasks (watchdog, unlock listener) run here, where the connections'
        // drivers run too, so that a lock call from another runtime cannot tie them to a
        // runtime that may go away first.
        let runtime = tokio::runtime::Handle::current();
        let reconnects = Arc::new(Reconnects::default());
        let listener = UnlockListener::new(
            redis.clone(),
            settings.connect_timeout,
            settings.subscribe_timeout,
            settings.ping_interval,
            reconnects.clone(),
            runtime.clone(),
        )?;
        let url = &settings.url;
        let connections = Arc::new(
            Connections::open(&settings, &redis, reconnects)
                .await
                .map_err(|e| first_contact(url, e))?,
        );
        let mut conn = connections.shared().await?.conn;
        let pong: String = redis::cmd("PING")
            .query_async(&mut conn)
            .await
            .map_err(|e| first_contact(url, e.into()))?;
        if pong != "PONG" {
            return Err(Error::NotRedis {
                url: url.to_string(),
                detail: format!("PING answered `{pong}`"),
            });
        }
        server_check::check_server(&mut conn, url).await?;
        let commands = CommandCheck::new(settings.replica_sync.is_some());
        let holds = Arc::new(Holds::default());
        let latches = LatchReaper::start(&connections, &runtime);
        let replica_sync = settings
            .replica_sync
            .map(|(replicas, timeout)| Arc::new(ReplicaSync::new(replicas, timeout)));
        let watchdog = Watchdog::new(
            holds.clone(),
            connections.clone(),
            settings.watchdog_timeout,
            settings.watchdog_batch_size,
            replica_sync.clone(),
            runtime.clone(),
        );
        let lease_check = LeaseCheck::new(
            holds.clone(),
            connections.clone(),
            settings.watchdog_batch_size,
            runtime.clone(),
        );
        let heartbeat = Heartbeat::new(
            connections.clone(),
            listener.clone(),
            settings.fair_waiter_timeout,
            settings.watchdog_batch_size,
            runtime.clone(),
        );
        let id = Uuid::new_v4();
        tracing::debug!(client = %id, url = %settings.url, "connected");
        Ok(Client {
            inner: Arc::new(Inner {
                id,
                id_text: id.to_string(),
                settings,
                connections,
                holds,
                watchdog,
                lease_check,
                heartbeat,
                listener,
                latches,
                acquires: Batcher::new(runtime.clone()),
                releases: Batcher::new(runtime.clone()),
                replica_sync,
                commands,
                runtime,
            }),
        })
    }

    /// Runs clean-up work (a release from a `Drop`, the undo of an abandoned acquire) on the
    /// client's runtime, which drives its connections: it works from a `Drop` outside any
    /// runtime too, and does not die with a caller's runtime that is shutting down. If the
    /// client's own runtime is gone, nothing can be sent: locks expire with their leases.
    pub(crate) fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        drop(self.inner.runtime.spawn(work));
    }

    /// The runtime the client was built on (see [`Client::spawn`]).
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    /// This client's id: the `<client-uuid>` part of the hash fields it writes.
    pub fn id(&self) -> Uuid {
        self.inner.id
    }

    /// A handle on the reentrant lock `name` (the Redis key is the configured key prefix
    /// followed by `name`). Cheap; nothing is sent until a method is called.
    ///
    /// An empty name is reported by the first call on the handle, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn lock(&self, name: impl AsRef<str>) -> RLock {
        Lock::new(self.clone(), name.as_ref())
    }

    /// A handle on the fair lock `name`: reentrant like [`lock`](Client::lock), and served
    /// to its waiters in arrival order (see [`FairLock`]). Cheap; nothing is sent until a
    /// method is called.
    ///
    /// An empty name is reported by the first call on the handle, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn fair_lock(&self, name: impl AsRef<str>) -> FairLock {
        Lock::new(self.clone(), name.as_ref())
    }

    /// The lease of locks taken without one; the watchdog renews them every third of it.
    pub fn watchdog_timeout(&self) -> Duration {
        self.inner.settings.watchdog_timeout
    }

    /// How many (lock, owner) holds this client currently tracks, reentrant holds counting
    /// once.
    pub fn held_lock_count(&self) -> usize {
        self.inner.holds.len()
    }

    /// Whether the watchdog task is running; it runs while a watchdog lock is held.
    pub fn is_watchdog_running(&self) -> bool {
        self.inner.watchdog.is_running()
    }

    /// A handle on the fenced lock `name`: reentrant like [`lock`](Client::lock), and every
    /// acquire draws a fencing token (see [`FencedLock`]). Cheap; nothing is sent until a
    /// method is called.
    ///
    /// An empty name is reported by the first call on the handle, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn fenced_lock(&self, name: impl AsRef<str>) -> FencedLock {
        Lock::new(self.clone(), name.as_ref())
    }

    /// How many fair-lock queue places this client keeps alive for its waiting tasks.
    pub fn queued_waiter_count(&self) -> usize {
        self.inner.heartbeat.len()
    }

    /// How many unlock channels this client is subscribed to, as Redis confirmed: one per
    /// lock that has local waiters, and one per waiting task for fair locks.
    pub fn subscribed_channel_count(&self) -> usize {
        self.inner.listener.channel_count()
    }
}

/// The first failure to reach the server, in words for a user who may have the wrong
/// address: a reply redis-rs cannot parse means something else listens there.
fn first_contact(url: &ServerUrl, error: Error) -> Error {
    match error {
        Error::Redis(e) if e.kind() == redis::ErrorKind::Parse => Error::NotRedis {
            url: url.to_string(),
            detail: url.scrub(&e.to_string()),
        },
        other => other,
    }
}
