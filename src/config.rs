//! [`ClientBuilder`]: every setting of a [`Client`], with its default.

use std::time::Duration;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::validate;

/// Settings of a [`Client`], checked by [`ClientBuilder::build`].
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) url: String,
    pub(crate) key_prefix: String,
    pub(crate) watchdog_timeout: Duration,
    pub(crate) watchdog_batch_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) retry_attempts: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) subscribe_timeout: Duration,
    pub(crate) pool_size: usize,
    pub(crate) fair_waiter_timeout: Duration,
    /// Replicas to `WAIT` for after lock writes, and for how long; `None`: no waiting.
    pub(crate) replica_sync: Option<(usize, Duration)>,
}

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
#[must_use = "a builder does nothing until `build` is awaited"]
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    settings: Settings,
}

impl ClientBuilder {
    pub(crate) fn new(url: impl Into<String>) -> Self {
        ClientBuilder {
            settings: Settings {
                url: url.into(),
                key_prefix: String::new(),
                watchdog_timeout: Duration::from_secs(30),
                watchdog_batch_size: 100,
                connect_timeout: Duration::from_secs(2),
                response_timeout: Duration::from_secs(1),
                retry_attempts: 3,
                retry_delay: Duration::from_millis(100),
                subscribe_timeout: Duration::from_secs(5),
                pool_size: 4,
                fair_waiter_timeout: Duration::from_secs(5),
                replica_sync: None,
            },
        }
    }

    /// The lease of locks taken without an explicit lease; the watchdog renews them every
    /// third of it while they are held. Redisson's `lockWatchdogTimeout`.
    ///
    /// Default: 30 s. Must be at least 10 ms.
    pub fn watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.settings.watchdog_timeout = timeout;
        self
    }

    /// How many locks one renewal script call extends. Redisson's `lockWatchdogBatchSize`.
    ///
    /// Default: 100. Must be at least 1.
    pub fn watchdog_batch_size(mut self, size: usize) -> Self {
        self.settings.watchdog_batch_size = size;
        self
    }

    /// Prepended to every lock name to form its Redis key (Redisson's `NameMapper` does the
    /// same job): a Java client must use the same mapping to share locks.
    ///
    /// Default: empty.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.settings.key_prefix = prefix.into();
        self
    }

    /// How long opening a connection to Redis may take.
    ///
    /// Default: 2 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.settings.connect_timeout = timeout;
        self
    }

    /// How long one command may wait for Redis' reply before it fails with a timeout.
    ///
    /// Default: 1 s.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.settings.response_timeout = timeout;
        self
    }

    /// How many times a command that failed to reach Redis is tried in all before the error
    /// is returned; unlocks are retried idempotently (Redisson's unlock latch).
    ///
    /// Default: 3. Must be at least 1.
    pub fn retry_attempts(mut self, attempts: u32) -> Self {
        self.settings.retry_attempts = attempts;
        self
    }

    /// The pause before retrying a command that failed to reach Redis; a random jitter of up
    /// to the same amount is added so that clients do not retry in step.
    ///
    /// Default: 100 ms.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.settings.retry_delay = delay;
        self
    }

    /// How long a waiting lock call may wait for its unlock subscription to be confirmed
    /// before it fails with [`Error::Timeout`](crate::Error::Timeout).
    ///
    /// Default: 5 s.
    pub fn subscribe_timeout(mut self, timeout: Duration) -> Self {
        self.settings.subscribe_timeout = timeout;
        self
    }

    /// The most command connections the client opens. Lock calls share one multiplexed
    /// connection; the watchdog and reconnections take theirs from this pool.
    ///
    /// Default: 4. Must be at least 2.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.settings.pool_size = size;
        self
    }

    /// The longest a [`FairLock`](crate::FairLock) waiter that stopped responding can hold
    /// up the queue: its place is dropped at most this long after its client last
    /// refreshed it. Live waiters refresh their places every quarter of it (one script
    /// call per batch of waiters), so a waiter keeps its place through Redis being
    /// unreachable for up to half of it. A waiter whose process died with its connection
    /// closed is passed over at once, whatever this is. Redisson's nearest setting,
    /// `fairLockWaitTimeout`, defaults to 5 minutes.
    ///
    /// Default: 5 s. Must be at least 100 ms.
    pub fn fair_waiter_timeout(mut self, timeout: Duration) -> Self {
        self.settings.fair_waiter_timeout = timeout;
        self
    }

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
    /// Unlocks are not waited for: a release a failover forgets only keeps the lock until
    /// its lease runs out. Synced writes go out on pooled connections (so a lagging replica
    /// never blocks the connection all lock calls share), one per call in flight: raise
    /// [`pool_size`](ClientBuilder::pool_size) for many concurrent acquires.
    ///
    /// Default: off. `replicas` must be at least 1, and `timeout` at least 1 ms and shorter
    /// than the [`response_timeout`](ClientBuilder::response_timeout).
    pub fn replica_sync(mut self, replicas: usize, timeout: Duration) -> Self {
        self.settings.replica_sync = Some((replicas, timeout));
        self
    }

    /// Checks the settings, connects, and verifies that Redis answers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a malformed URL or an out-of-range setting (nothing is
    /// sent); [`Error::Redis`](crate::Error::Redis), [`Error::Pool`](crate::Error::Pool) or [`Error::Timeout`](crate::Error::Timeout) when Redis cannot be
    /// reached within the connect and response timeouts.
    pub async fn build(self) -> Result<Client> {
        let settings = self.validated()?;
        Client::from_settings(settings).await
    }

    fn validated(self) -> Result<Settings> {
        let s = self.settings;
        validate::positive("watchdog_timeout", s.watchdog_timeout)?;
        if s.watchdog_timeout < Duration::from_millis(10) {
            return Err(Error::invalid(format!(
                "watchdog_timeout must be at least 10 ms, got {:?}",
                s.watchdog_timeout
            )));
        }
        if s.watchdog_batch_size == 0 {
            return Err(Error::invalid("watchdog_batch_size must be at least 1"));
        }
        validate::positive("connect_timeout", s.connect_timeout)?;
        validate::positive("response_timeout", s.response_timeout)?;
        validate::positive("subscribe_timeout", s.subscribe_timeout)?;
        if s.retry_attempts == 0 {
            return Err(Error::invalid("retry_attempts must be at least 1"));
        }
        if s.retry_delay > Duration::from_secs(60) {
            return Err(Error::invalid("retry_delay must be at most 60 s"));
        }
        validate::positive("fair_waiter_timeout", s.fair_waiter_timeout)?;
        if s.fair_waiter_timeout < Duration::from_millis(100) {
            return Err(Error::invalid(format!(
                "fair_waiter_timeout must be at least 100 ms, got {:?}",
                s.fair_waiter_timeout
            )));
        }
        if s.pool_size < 2 {
            return Err(Error::invalid("pool_size must be at least 2"));
        }
        if let Some((replicas, timeout)) = s.replica_sync {
            if replicas == 0 {
                return Err(Error::invalid("replica_sync needs at least 1 replica"));
            }
            if timeout < Duration::from_millis(1) || timeout >= s.response_timeout {
                return Err(Error::invalid(format!(
                    "the replica_sync timeout must be at least 1 ms and shorter than the \
                     response timeout ({:?}), got {timeout:?}",
                    s.response_timeout
                )));
            }
        }
        Ok(s)
    }
}
