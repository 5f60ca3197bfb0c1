//! [`ClientBuilder`]: every setting of a [`Client`], with its default and its range.

use std::borrow::Cow;
use std::time::Duration;

use crate::client::Client;
use crate::client_core::Core;
use crate::config::sentinel::MasterCredentials;
use crate::config::settings::{PubSubMode, Settings};
use crate::error::Result;
use crate::util::lock_metrics::ClassRule;

/// Builds a [`Client`]. Start from [`Client::builder`].
///
/// ```no_run
/// # async fn demo() -> redis_rlock::Result<()> {
/// use std::time::Duration;
/// let client = redis_rlock::Client::builder("redis://127.0.0.1:6379")
///     .watchdog_timeout(Duration::from_secs(10))
///     .key_prefix("billing:")
///     .build()
///     .await?;
/// # Ok(()) }
/// ```
///
/// `Debug` prints the URL with its password replaced by `***`, and of TLS certificates only
/// whether they are set.
#[must_use = "a builder does nothing until `build` is awaited"]
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    pub(super) settings: Settings,
}

/// Setters that store what they are given in the builder's settings, each `name(args) =>
/// field = value`: the docs of each are those of the public method.
macro_rules! setters {
    ($(
        $(#[$attr:meta])*
        $name:ident($($arg:ident: $ty:ty),*) => $($field:ident).+ = $value:expr;
    )*) => {$(
        $(#[$attr])*
        pub fn $name(mut self, $($arg: $ty),*) -> Self {
            self.settings.$($field).+ = $value;
            self
        }
    )*};
}

impl ClientBuilder {
    setters! {
        /// The user and password a [Sentinel client](Client::sentinel_builder) gives the
        /// master, when they are not the sentinels' (Redisson's `password`, where the sentinel
        /// URLs' credentials are its `sentinelPassword`). `username: None` is the `default`
        /// user. Without this, the master is reached with the credentials of the sentinel URLs.
        /// Never printed: `Debug` shows `***`.
        ///
        /// ```no_run
        /// # async fn demo() -> redis_rlock::Result<()> {
        /// let client = redis_rlock::Client::sentinel_builder(["redis://10.0.0.5:26379"], "mymaster")
        ///     .master_credentials(Some("locker"), "s3cret")
        ///     .build()
        ///     .await?;
        /// # Ok(()) }
        /// ```
        ///
        /// # Errors
        /// [`build`](ClientBuilder::build) fails with
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) on a client that is not a
        /// Sentinel client: put the credentials in its URL.
        master_credentials(username: Option<&str>, password: &str) => master_credentials =
            Some(MasterCredentials {
                username: username.map(str::to_string),
                password: password.to_string(),
            });

        /// How unlock messages travel, Redisson's `shardedSubscriptionMode`; see [`PubSubMode`]
        /// for the setting that matches your Java services.
        ///
        /// Default: [`PubSubMode::Auto`] (sharded pub/sub on a Redis 7 cluster, classic
        /// otherwise).
        ///
        /// # Errors
        /// [`build`](ClientBuilder::build) fails with
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
        /// [`PubSubMode::Sharded`] on a client of one Redis ([`Client::builder`]).
        pubsub_mode(mode: PubSubMode) => pubsub = mode;

        /// The lease of locks taken without an explicit lease; the watchdog renews them every
        /// third of it while they are held. Redisson's `lockWatchdogTimeout`.
        ///
        /// Default: 30 s. From 10 ms to 24 hours.
        watchdog_timeout(timeout: Duration) => watchdog_timeout = timeout;

        /// How many locks one renewal script call extends. Redisson's `lockWatchdogBatchSize`.
        ///
        /// Default: 100. From 1 to 10,000.
        watchdog_batch_size(size: usize) => watchdog_batch_size = size;

        /// Prepended to every lock name to form its Redis key (Redisson's `NameMapper` does the
        /// same job): a Java client must use the same mapping to share locks.
        ///
        /// Default: empty. At most 64 KiB.
        key_prefix(prefix: impl Into<String>) => key_prefix = prefix.into();

        /// How long opening a connection to Redis may take.
        ///
        /// Default: 2 s. From 1 ms to 5 minutes.
        connect_timeout(timeout: Duration) => connect_timeout = timeout;

        /// How long one command may wait for Redis' reply before it fails with a timeout.
        ///
        /// Default: 1 s. From 1 ms to 5 minutes.
        response_timeout(timeout: Duration) => response_timeout = timeout;

        /// How many times a command that failed to reach Redis is tried in all before the error
        /// is returned; unlocks are retried safely (a retry knows its earlier try by the
        /// owner's hold count).
        ///
        /// Default: 3. From 1 to 100.
        retry_attempts(attempts: u32) => retry_attempts = attempts;

        /// The pause before retrying a command that failed to reach Redis; a random jitter of up
        /// to the same amount is added so that clients do not retry in step.
        ///
        /// Default: 100 ms. At most 60 s.
        retry_delay(delay: Duration) => retry_delay = delay;

        /// How long a waiting lock call may wait for its unlock subscription to be confirmed
        /// before it fails with [`Error::Timeout`](crate::Error::Timeout).
        ///
        /// Default: 5 s. From 1 ms to 1 hour.
        subscribe_timeout(timeout: Duration) => subscribe_timeout = timeout;

        /// The most command connections the client opens. Lock calls share one multiplexed
        /// connection; the watchdog and reconnections take theirs from this pool.
        ///
        /// Default: 4. From 2 to 1,024.
        pool_size(size: usize) => pool_size = size;

        /// The longest a [`FairLock`](crate::FairLock) waiter that stopped responding can hold
        /// up the queue: its place is dropped at most this long after its client last
        /// refreshed it. Live waiters refresh their places every quarter of it (one script
        /// call per batch of waiters), so a waiter keeps its place through Redis being
        /// unreachable for up to half of it. A waiter whose process died with its connection
        /// closed is passed over within 100 ms, whatever this is. Redisson's nearest setting,
        /// `fairLockWaitTimeout`, defaults to 5 minutes.
        ///
        /// Default: 5 s. From 100 ms to 24 hours.
        fair_waiter_timeout(timeout: Duration) => fair_waiter_timeout = timeout;

        /// Records every waiting lock call in Redis, in the *wait registry*, so that
        /// operators can see who waits for whom: `rlock show NAME` lists a lock's waiters, and
        /// `rlock deadlocks` finds cycles of tasks each holding a lock the next one waits for.
        /// Redis itself shows only holders; an `RLock`'s waiters only subscribe.
        ///
        /// A call that waits (its first try found the lock held) records its owner field in the
        /// lock's `redis_rlock_waiters:{<key>}` and what it waits for, since when and from which
        /// [client](Self::client_name) in `redis_rlock_waiting:{<owner>}` (see
        /// [`layout`](crate::protocol::layout)); it refreshes both every third of the
        /// [`watchdog_timeout`](Self::watchdog_timeout) and removes them when the wait ends,
        /// however it ends. A crashed waiter's entries expire within one watchdog timeout.
        /// Redisson clients neither write nor read them. A wait that lasts longer than
        /// [`long_wait_warning`](Self::long_wait_warning) logs one `WARN` naming the lock's
        /// holders and, when the holders wait in turn in a cycle, the cycle.
        ///
        /// The price, on contended locks only (an uncontended acquire never waits): two script
        /// calls when a wait starts, two at each refresh, two when it ends. The registry is
        /// for diagnosis: its own failures are logged and never fail or delay a lock call. It
        /// covers single locks of every kind and groups: a [`RedLock`](crate::RedLock)'s
        /// wait is recorded on every master whose client keeps a registry (its locks are one
        /// lock), a [`MultiLock`](crate::MultiLock)'s on each of its locks held elsewhere,
        /// both under the group's one owner field. An ACL user needs `~redis_rlock_wait*`
        /// beside the lock rules.
        ///
        /// Default: off.
        ///
        /// ```no_run
        /// # async fn run() -> redis_rlock::Result<()> {
        /// use std::time::Duration;
        /// let client = redis_rlock::Client::builder("redis://127.0.0.1/")
        ///     .wait_registry(true)
        ///     .long_wait_warning(Duration::from_secs(30))
        ///     .client_name("billing-worker-3")
        ///     .build()
        ///     .await?;
        /// # Ok(()) }
        /// ```
        wait_registry(enabled: bool) => wait_registry = enabled;

        /// With the [wait registry](Self::wait_registry) on, how long a wait lasts before it
        /// logs one `WARN`: the lock, how long it waited, who holds the lock, and the cycle of
        /// waits when there is one (a deadlock).
        ///
        /// Default: 60 s. From 10 ms to 24 hours.
        long_wait_warning(after: Duration) => long_wait_warning = after;

        /// How this client names itself in the [wait registry](Self::wait_registry), for
        /// whoever reads it on call: a service and instance name, a pod name.
        ///
        /// Default: the host name and the process id, `<host>:<pid>`. 1 to 256 bytes.
        client_name(name: impl Into<String>) => client_name = name.into().into();

        /// With the `metrics` feature, the `class` label of a lock's metrics is the part of
        /// its name before the first `separator` (the whole name without one):
        /// `lock_class_by_prefix(':')` puts `orders:42` and `orders:43` in the class
        /// `orders`. Without a rule every lock is in the class `default`, so no part of a
        /// lock name reaches a label unless asked for. At most
        /// [`max_lock_classes`](Self::max_lock_classes) classes; a handle's own class is set
        /// with [`Lock::with_class`](crate::Lock::with_class).
        ///
        /// ```no_run
        /// # async fn run() -> redis_rlock::Result<()> {
        /// let client = redis_rlock::Client::builder("redis://127.0.0.1/")
        ///     .lock_class_by_prefix(':')
        ///     .build()
        ///     .await?;
        /// // rlock_acquires_total{kind="reentrant",outcome="acquired",class="orders",...}
        /// let order = client.lock("orders:42").lock().await?;
        /// # Ok(()) }
        /// ```
        lock_class_by_prefix(separator: char) => class_rule = ClassRule::Prefix(separator);

        /// With the `metrics` feature, the `class` label of a lock's metrics is what `rule`
        /// gives for its name (called once per handle made, not per call). Keep the set of
        /// classes small: past [`max_lock_classes`](Self::max_lock_classes), the names fold
        /// into `other`.
        ///
        /// ```no_run
        /// # async fn run() -> redis_rlock::Result<()> {
        /// use std::borrow::Cow;
        /// let client = redis_rlock::Client::builder("redis://127.0.0.1/")
        ///     .lock_class_with(|name: &str| match name.starts_with("tenant/") {
        ///         true => Cow::Borrowed("tenant"),
        ///         false => Cow::Borrowed("system"),
        ///     })
        ///     .build()
        ///     .await?;
        /// # Ok(()) }
        /// ```
        lock_class_with(rule: impl Fn(&str) -> Cow<'static, str> + Send + Sync + 'static)
            => class_rule = ClassRule::With(std::sync::Arc::new(rule));

        /// The most distinct classes one client gives the metrics of its locks (see
        /// [`lock_class_by_prefix`](Self::lock_class_by_prefix)): each class is a set of
        /// series in the metrics backend, so a rule that turned out unbounded (a class
        /// per user id) must not become a cardinality bomb. Handles of classes past it are
        /// counted under `other`, and each such handle made counts one in
        /// `rlock_lock_classes_folded_total`.
        ///
        /// Default: 64. From 1 to 10,000.
        max_lock_classes(max: usize) => max_lock_classes = max;

        /// Set this to the `fairLockWaitTimeout` of the Redisson clients that share this
        /// client's [`FairLock`](crate::FairLock)s (Redisson's default: 5 minutes), so that
        /// a mixed queue of Java and Rust waiters is served in arrival order.
        ///
        /// Redisson chains its waiters' deadlines, each the one before it plus
        /// `fairLockWaitTimeout`, and a Java waiter that takes the lock or gives up subtracts
        /// that wait from every deadline behind it
        /// ([RedissonFairLock](https://github.com/redisson/redisson/blob/redisson-3.52.0/redisson/src/main/java/org/redisson/RedissonFairLock.java)).
        /// This client's waiters keep their deadlines [`fair_waiter_timeout`](Self::fair_waiter_timeout)
        /// ahead of the server's clock; with Java waiters ahead, one subtraction would put
        /// them in the past, and they would be dropped to the tail of the queue. With this set,
        /// a waiter's deadline is also pushed this far ahead for each waiter ahead of it,
        /// recomputed at each refresh, so no subtraction reaches a live waiter. The price: a
        /// waiter that stopped responding without closing its connection (a frozen process)
        /// holds the queue up for as long as a Redisson one does, up to this long per waiter
        /// that was ahead of it at its last refresh. A waiter whose connection closed is still
        /// passed over within 100 ms.
        ///
        /// Default: zero (no Redisson client shares the queues). Up to 24 hours.
        ///
        /// ```no_run
        /// # async fn run() -> redis_rlock::Result<()> {
        /// use std::time::Duration;
        /// // The Java services run Redisson with its default fairLockWaitTimeout.
        /// let client = redis_rlock::Client::builder("redis://127.0.0.1/")
        ///     .redisson_fair_lock_wait(Duration::from_secs(5 * 60))
        ///     .build()
        ///     .await?;
        /// # Ok(()) }
        /// ```
        redisson_fair_lock_wait(wait: Duration) => redisson_fair_lock_wait = wait;

        /// Accepts a Redis whose `maxmemory-policy` may evict keys (every `allkeys-*` and
        /// `volatile-*` policy: lock keys have TTLs, so the `volatile-*` ones evict them too).
        /// Without it, [`build`](Self::build) fails with
        /// [`Error::EvictingServer`](crate::Error::EvictingServer) when the server runs such a
        /// policy with a `maxmemory` limit, and so do calls after a reconnection to a server
        /// that runs one by then (see the `transport` module docs, "Memory and eviction").
        ///
        /// What it costs: when Redis is full, it may evict a held lock's key. The lock is then
        /// free for anyone, and no one is told: a watchdog holder learns it at its next renewal
        /// (up to a third of [`watchdog_timeout`](Self::watchdog_timeout) later), and a holder
        /// with a fixed lease is never told, so both may run their critical sections beside
        /// the new holder. Queued fair waiters and fencing counters may be evicted as well (a
        /// fencing counter evicted starts again from 1, so tokens no longer grow). Only
        /// `noeviction` keeps locks safe: Redis then refuses writes when full, and this crate's
        /// releases still work (see `tests/hardening/out_of_memory.rs`). The choice is logged once, at
        /// `INFO`, with the policy.
        ///
        /// Default: `false`.
        allow_evicting_policy(allow: bool) => allow_evicting_policy = allow;

        /// Makes lock writes count only once a replica has them (Redisson's
        /// `checkLockSyncedSlaves`), so that a failover to a replica keeps the lock: after an
        /// acquire takes the lock, and after each watchdog renewal, the client sends
        /// `WAIT <replicas> <timeout>` on the connection that wrote.
        ///
        /// - At least one replica acknowledged: the write counts (fewer than `replicas` is
        ///   accepted, as in Redisson).
        /// - None acknowledged while replicas are connected: an acquire is rolled back and
        ///   tried again, up to `retry_attempts` in all, then fails with
        ///   [`Error::NotReplicated`](crate::Error::NotReplicated); a renewal does not count,
        ///   so the guard's validity is not pushed forward and, if no later renewal is
        ///   acknowledged in time, it is lost ([`LostReason::ConnectionLost`](crate::LostReason::ConnectionLost)).
        /// - No replica connected (`connected_slaves` of `INFO replication`, read at most once
        ///   a second): nothing to wait for, the write counts.
        ///
        /// On a cluster each acquire waits on the master of its lock's slot, and each renewal
        /// round on every master; on Sentinel, on the master the sentinels name.
        ///
        /// Unlocks are not waited for: a release a failover forgets only keeps the lock until
        /// its lease runs out. Synced writes go out on pooled connections (so a lagging replica
        /// never blocks the connection all lock calls share), one per call in flight: raise
        /// [`pool_size`](ClientBuilder::pool_size) for many concurrent acquires.
        ///
        /// Default: off. `replicas` from 1 to 1,000, and `timeout` at least 1 ms and shorter
        /// than the [`response_timeout`](ClientBuilder::response_timeout).
        replica_sync(replicas: usize, timeout: Duration) => replica_sync = Some((replicas, timeout));

        /// How often the pub/sub connection is pinged while the client waits for unlock
        /// messages, so that a connection whose peer vanished without closing it (a half-open
        /// connection behind a NAT or a load balancer) is noticed and replaced instead of
        /// silently hearing nothing. Redisson's `pingConnectionInterval`.
        ///
        /// Default: 5 s. From 100 ms to 1 hour.
        ping_interval(interval: Duration) => ping_interval = interval;

        /// Trusts the certificate authorities in `pem` (one or more PEM certificates) for a
        /// `rediss://` URL, instead of the system's trusted roots: for a Redis whose
        /// certificate a private CA signed. Used by every connection of the client: lock
        /// calls, the pool and pub/sub.
        ///
        /// A URL ending in `#insecure` (redis-rs's syntax) accepts any certificate instead; keep
        /// that for tests.
        ///
        /// # Errors
        /// [`build`](ClientBuilder::build) fails with
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when `pem` holds no PEM
        /// certificate, or the URL is not a `rediss://` one.
        #[cfg(feature = "tls")]
        tls_root_certificate(pem: Vec<u8>) => tls.root_certificate = Some(pem);

        /// Presents this certificate chain and private key (PEM) to a Redis that requires
        /// client certificates (`tls-auth-clients yes`): mutual TLS, for every connection of
        /// the client. The key is never printed.
        ///
        /// # Errors
        /// [`build`](ClientBuilder::build) fails with
        /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) when either is not PEM,
        /// or the URL is not a `rediss://` one.
        #[cfg(feature = "tls")]
        tls_client_certificate(cert_pem: Vec<u8>, key_pem: Vec<u8>) =>
            tls.client_certificate = Some((cert_pem, key_pem));
    }

    /// Checks the settings, connects, and verifies that Redis answers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a malformed URL or an out-of-range setting (nothing is
    /// sent); [`Error::Redis`](crate::Error::Redis), [`Error::Pool`](crate::Error::Pool) or [`Error::Timeout`](crate::Error::Timeout) when Redis cannot be
    /// reached within the connect and response timeouts.
    pub async fn build(self) -> Result<Client> {
        let (settings, endpoints) = self.settings.validated()?;
        Ok(Client {
            core: Core::start(settings, endpoints).await?,
        })
    }
}
