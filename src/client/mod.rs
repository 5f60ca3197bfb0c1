//! The public handle: [`Client`], made by a [`ClientBuilder`], and its [`Status`].
//!
//! The top layer. A client is a handle on a [`Core`](crate::client_core), which every lock it
//! makes shares; it adds nothing but the public methods.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use crate::client_core::Core;
use crate::config::settings::Settings;
use crate::error::Result;
use crate::locks::kind::lock_factories;
use crate::locks::{fenced, Lock, RLock, ReadWriteLock};
use crate::sync::{CountDownLatch, PermitExpirableSemaphore, Semaphore};

pub(crate) mod builder;
mod shutdown;
mod status;

pub use crate::config::settings::PubSubMode;
pub use builder::ClientBuilder;
pub use shutdown::{NotReleased, ShutdownReport};
pub use status::Status;

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
    core: Arc<Core>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.core.id)
            .field("url", &self.core.settings.url)
            .field("topology", &self.core.settings.topology)
            .field("held_locks", &self.core.holds.len())
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
        ClientBuilder {
            settings: Settings::new(url.into()),
        }
    }

    /// Connects to a Redis Cluster with default settings: `seeds` are URLs of some of its
    /// nodes (one that answers is enough; the others are found through it).
    ///
    /// Every lock kind works on a cluster as on one Redis, with the same keys: each lock's
    /// keys share the hash slot of its key (see [`Error::CrossSlotName`](crate::Error::CrossSlotName)
    /// for names that cannot), and the client routes each call to the master of that
    /// slot. See the README's "Redis Cluster and Sentinel" section for what is and is not supported
    /// yet.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_rlock::Result<()> {
    /// let client = redis_rlock::Client::connect_cluster([
    ///     "redis://127.0.0.1:7000",
    ///     "redis://127.0.0.1:7001",
    /// ])
    /// .await?;
    /// let guard = client.lock("order:1001").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no seed or a malformed
    /// seed URL (nothing is sent); [`Error::UnsupportedServer`](crate::Error::UnsupportedServer)
    /// when the server is not in cluster mode; a connection error or
    /// [`Error::Timeout`](crate::Error::Timeout) when no seed answers.
    pub async fn connect_cluster(
        seeds: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> Result<Client> {
        Client::cluster_builder(seeds).build().await
    }

    /// A builder for a Redis Cluster client with non-default settings (see
    /// [`connect_cluster`](Client::connect_cluster) and [`ClientBuilder`]).
    pub fn cluster_builder(seeds: impl IntoIterator<Item = impl AsRef<str>>) -> ClientBuilder {
        let seeds = seeds.into_iter().map(|s| s.as_ref().to_string()).collect();
        ClientBuilder {
            settings: Settings::cluster(seeds),
        }
    }

    /// Connects, with default settings, to the master that Redis Sentinel monitors as
    /// `master_name`: `sentinels` are URLs of some of the sentinels (one that answers is
    /// enough). The client follows the master through failovers: lock calls, pub/sub and
    /// renewals move to the new master within a second of the sentinels naming it, and
    /// locks the failover lost are reported by [`lost`](crate::LockGuard::lost).
    ///
    /// The sentinel URLs' credentials, TLS scheme and database number serve the master
    /// too, unless [`ClientBuilder::master_credentials`] gives the master its own.
    ///
    /// ```no_run
    /// # async fn demo() -> redis_rlock::Result<()> {
    /// let client = redis_rlock::Client::connect_sentinel(
    ///     ["redis://127.0.0.1:26379", "redis://127.0.0.1:26380"],
    ///     "mymaster",
    /// )
    /// .await?;
    /// let guard = client.lock("order:1001").lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// See the [`transport`](crate::transport#sentinel) docs for how a failover is followed.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for no sentinel, a malformed
    /// URL or an empty master name (nothing is sent);
    /// [`Error::UnsupportedServer`](crate::Error::UnsupportedServer) when the sentinels
    /// monitor no master of that name, or a URL is no sentinel; a connection error or
    /// [`Error::Timeout`](crate::Error::Timeout) when no sentinel, or not the master,
    /// answers.
    pub async fn connect_sentinel(
        sentinels: impl IntoIterator<Item = impl AsRef<str>>,
        master_name: impl AsRef<str>,
    ) -> Result<Client> {
        Client::sentinel_builder(sentinels, master_name)
            .build()
            .await
    }

    /// A builder for a Sentinel client with non-default settings (see
    /// [`connect_sentinel`](Client::connect_sentinel) and [`ClientBuilder`]).
    pub fn sentinel_builder(
        sentinels: impl IntoIterator<Item = impl AsRef<str>>,
        master_name: impl AsRef<str>,
    ) -> ClientBuilder {
        let sentinels = sentinels.into_iter().map(|s| s.as_ref().to_string());
        let master_name = master_name.as_ref().to_string();
        ClientBuilder {
            settings: Settings::sentinel(sentinels.collect(), master_name),
        }
    }

    /// This client's id: the `<client-uuid>` part of the hash fields it writes.
    pub fn id(&self) -> Uuid {
        self.core.id
    }

    /// A fresh lock owner, to take locks in its name rather than the calling task's (see
    /// [`Owner`](crate::Owner) and [`Lock::with_owner`]): its hash field is
    /// `<client-uuid>:<id>` with an id no task, thread or other owner of this process has.
    /// Nothing is sent.
    pub fn new_owner(&self) -> crate::protocol::Owner {
        crate::protocol::owner::Owner::new()
    }

    /// A handle on the reentrant lock `name` (the Redis key is the configured key prefix
    /// followed by `name`). Cheap; nothing is sent until a method is called.
    ///
    /// An empty name is reported by the first call on the handle, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn lock(&self, name: impl AsRef<str>) -> RLock {
        Lock::new(self.core.clone(), name.as_ref())
    }

    // `fair_lock` and `fenced_lock`, written in their kinds' entries in `locks::kind`, so
    // that a new kind's method comes with its entry (the read and write sides come from
    // `read_write_lock`).
    lock_factories!();

    /// A handle on the semaphore `name` (Redisson's `RSemaphore`: the Redis key is the
    /// configured key prefix followed by `name`). Cheap; nothing is sent until a method is
    /// called. Its permits have no owner and no expiry: see [`Semaphore`], and
    /// [`permit_expirable_semaphore`](Client::permit_expirable_semaphore) for permits that
    /// come back when their holder dies.
    ///
    /// An empty name is reported by the first call on the handle, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn semaphore(&self, name: impl AsRef<str>) -> Semaphore {
        Semaphore::new(self.core.clone(), name.as_ref())
    }

    /// A handle on the expirable semaphore `name` (Redisson's
    /// `RPermitExpirableSemaphore`): each permit has an id and a lease (see
    /// [`PermitExpirableSemaphore`]). Cheap; nothing is sent until a method is called.
    ///
    /// An empty name is reported by the first call on the handle, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn permit_expirable_semaphore(&self, name: impl AsRef<str>) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore::new(self.core.clone(), name.as_ref())
    }

    /// A handle on the count-down latch `name` (Redisson's `RCountDownLatch`; see
    /// [`CountDownLatch`]). Cheap; nothing is sent until a method is called.
    ///
    /// An empty name is reported by the first call on the handle, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn count_down_latch(&self, name: impl AsRef<str>) -> CountDownLatch {
        CountDownLatch::new(self.core.clone(), name.as_ref())
    }

    /// The lease of locks taken without one; the watchdog renews them every third of it.
    pub fn watchdog_timeout(&self) -> Duration {
        self.core.settings.watchdog_timeout
    }

    /// A handle on the read-write lock `name`: many readers at once or one writer, each
    /// side a reentrant lock of its own (see [`ReadWriteLock`]), with Redisson's
    /// `RReadWriteLock` layout. Cheap; nothing is sent until a method is called.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
    /// let doc = client.read_write_lock("doc:7");
    /// let reading = doc.read_lock().lock().await?;
    /// reading.unlock().await?;
    /// let writing = doc.write_lock().lock().await?;
    /// writing.unlock().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// An empty name is reported by the first call on either side, as
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument).
    pub fn read_write_lock(&self, name: impl AsRef<str>) -> ReadWriteLock {
        ReadWriteLock::new(self.core.clone(), name.as_ref())
    }

    /// Sets the Redis key `key` to `value` for the holder of fencing token `token`, unless
    /// a write with a higher token was accepted before: a reference for resources that
    /// take fenced writes. Returns whether it was written.
    ///
    /// The highest token accepted is kept beside the key, in `redis_rlock_fence:{<key>}`
    /// (same cluster slot). Equal tokens are accepted, so one holder may write many times.
    /// The key is used as given (no key prefix).
    ///
    /// Tokens are compared exactly over the whole `u64` range.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for an empty key or one
    /// over 64 KiB (nothing is sent); [`Error::NotALock`](crate::Error::NotALock) when the
    /// fence key holds something other than a token; a connection error when Redis cannot
    /// be reached after the retries (a retried write is harmless: the same token and value
    /// again).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the value may or may not have been written.
    pub async fn fenced_set(&self, key: &str, token: u64, value: &[u8]) -> Result<bool> {
        fenced::fenced_set(&self.core, key, token, value).await
    }

    /// Releases everything the client holds and closes it, within `timeout`: for a
    /// service's clean exit (on SIGTERM, at the end of `main`), so that the locks it held
    /// free at once rather than at the end of their leases.
    ///
    /// - From the moment it is called, acquires (of locks, of permits) fail with
    ///   [`Error::ShutDown`](crate::Error::ShutDown), and calls waiting for a lock or for
    ///   permits return with it at once, leaving their fair-queue places. A try already
    ///   sent gets up to half of `timeout` to finish; a lock it took is released again.
    /// - Every lock, expirable permit and semaphore permit that a guard of this client
    ///   still holds is released through its kind's own script, so that other clients'
    ///   waiters are woken at once and fair queues move on. The guards' [`lost`](crate::LockGuard::lost)
    ///   resolves [`LostReason::ShutDown`](crate::LostReason::ShutDown), and their
    ///   `unlock()`/`release()` returns [`Error::ShutDown`](crate::Error::ShutDown) and sends
    ///   nothing.
    /// - Releases running in the background (from dropped guards) finish, and the request
    ///   latches of a Redis Cluster client's semaphore and latch count changes are deleted
    ///   (lock releases write none); then the watchdog and the other background tasks stop
    ///   and the connections close. Every later call on the client, its handles and guards
    ///   returns [`Error::ShutDown`](crate::Error::ShutDown).
    ///
    /// Returns what was released and what could not be (those expire with their leases).
    /// A second call, or one on a clone, waits for the first to end and returns an empty
    /// report. A client that is dropped instead (its last handle, lock or guard gone)
    /// releases guards as they drop, in the background, which a runtime that is ending
    /// may cut short: call this before leaving `main`.
    ///
    /// ```no_run
    /// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
    /// let guard = client.lock("nightly-report").lock().await?;
    /// tokio::select! {
    ///     _ = run_report() => guard.unlock().await?,
    ///     _ = tokio::signal::ctrl_c() => {} // the guard is released below
    /// }
    /// let report = client.shutdown(std::time::Duration::from_secs(5)).await;
    /// assert!(report.is_complete(), "{report:?}");
    /// # Ok(()) }
    /// # async fn run_report() {}
    /// ```
    pub async fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        shutdown::shut_down(&self.core, timeout).await
    }

    /// What the client holds and waits for right now: held locks, watchdog holds, queued
    /// fair-lock waiters and subscribed unlock channels. Local counts; nothing is sent.
    pub fn status(&self) -> Status {
        let core = &self.core;
        Status {
            held_locks: core.holds.len(),
            watchdog_holds: core.holds.watch.len(),
            // The task itself may outlive the last hold until its next round finds nothing
            // to renew: what a user asks is whether anything is being renewed.
            watchdog_running: core.holds.watch.len() > 0 && core.watchdog.is_running(),
            queued_waiters: core.heartbeat.len(),
            subscribed_channels: core.listener.channel_count(),
        }
    }
}
