//! What to start: the lock kinds the driver knows, and the settings of one Redisson client.

use std::time::Duration;

use super::Redisson;

/// The lock kinds the driver knows, each a Redisson object of the same Redis layout as one
/// of this crate's kinds. The driver's command set takes the next kinds (read-write lock,
/// semaphores, latch) as new words beside these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `RLock` (`getLock`): this crate's `RLock`.
    Lock,
    /// `RFairLock` (`getFairLock`): this crate's `FairLock`.
    Fair,
    /// `RFencedLock` (`getFencedLock`): this crate's `FencedLock`.
    Fenced,
    /// `getReadWriteLock(name).readLock()`: this crate's `ReadLock`.
    Read,
    /// `getReadWriteLock(name).writeLock()`: this crate's `WriteLock`.
    Write,
}

impl Kind {
    /// The kind's word in a request.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Fair => "fair",
            Kind::Fenced => "fenced",
            Kind::Read => "read",
            Kind::Write => "write",
        }
    }
}

/// Settings of one Redisson client (Redisson's defaults for everything not set).
#[derive(Debug, Clone)]
#[must_use]
pub struct RedissonOptions {
    pub(super) target: Target,
    pub(super) watchdog: Option<Duration>,
    pub(super) fair_wait: Option<Duration>,
}

/// What a Redisson client connects to.
#[derive(Debug, Clone)]
pub(super) enum Target {
    /// One Redis: `useSingleServer`.
    Single(String),
    /// A Redis Cluster through these seeds: `useClusterServers`, with sharded pub/sub on or
    /// off (`shardedSubscriptionMode` ON / OFF).
    Cluster { seeds: Vec<String>, sharded: bool },
}

impl RedissonOptions {
    /// A client of the Redis at `url` (`redis://127.0.0.1:PORT`).
    pub fn new(url: impl Into<String>) -> Self {
        RedissonOptions {
            target: Target::Single(url.into()),
            watchdog: None,
            fair_wait: None,
        }
    }

    /// A client of the Redis Cluster reached through `seeds`, its pub/sub sharded (Redisson's
    /// `shardedSubscriptionMode` ON) or classic (OFF).
    pub fn cluster(seeds: Vec<String>, sharded: bool) -> Self {
        RedissonOptions {
            target: Target::Cluster { seeds, sharded },
            watchdog: None,
            fair_wait: None,
        }
    }

    /// Redisson's `lockWatchdogTimeout` (default 30 s; renewal every third of it).
    pub fn watchdog(mut self, timeout: Duration) -> Self {
        self.watchdog = Some(timeout);
        self
    }

    /// Redisson's `fairLockWaitTimeout` (default 5 minutes).
    pub fn fair_wait(mut self, timeout: Duration) -> Self {
        self.fair_wait = Some(timeout);
        self
    }

    /// Starts the JVM and waits, up to [`START_LIMIT`](super::START_LIMIT), until its client is
    /// connected.
    ///
    /// # Panics
    ///
    /// When Java or the driver jar is missing, or the driver does not get ready in time,
    /// with what the JVM printed.
    pub async fn start(self) -> Redisson {
        Redisson::start(self).await
    }
}
