//! The seam between the torture run and the lock it tortures: a backend takes the lock and
//! returns a held lock with a fencing token, a `lost()` future and `unlock()`. Workers, the
//! coordinator's last acquisition and the checker see nothing else; each [`Mode`] brings
//! its backend, its number of lock servers and its fault kinds.

use std::future::Future;
use std::time::{Duration, Instant};

use redis_rlock::{
    Client, ClientBuilder, Fenced, FencedLock, GroupGuard, LockGuard, LostReason, RedLock,
};

use super::config::Timing;
use super::faults::FaultKind;

/// The name of the lock every worker contends for.
pub const LOCK_NAME: &str = "torture:lock";

/// The semaphore of the permit steps (`cluster` mode): tagged with the lock's name, so
/// that it lives in the lock's slot and goes through every failover and migration of it.
pub const PERMITS_NAME: &str = "{torture:lock}:permits";

/// How many permits the semaphore of the permit steps has: fewer than the workers, so that
/// they wait for each other.
pub const PERMITS: u64 = 2;

/// Which lock a run tortures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A `FencedLock` on one Redis server.
    Fenced,
    /// A `RedLock<Fenced>` over five independent masters.
    RedLock,
    /// A `FencedLock` on a Redis Cluster of three masters with a replica each, whose
    /// lock's master fails over and whose slot moves while holders hold it.
    Cluster,
}

impl Mode {
    /// The name used on the command line and in the worker spec.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fenced => "fenced",
            Mode::RedLock => "redlock",
            Mode::Cluster => "cluster",
        }
    }

    /// Reads a [`name`](Mode::name).
    pub fn parse(text: &str) -> Result<Mode, String> {
        match text {
            "fenced" => Ok(Mode::Fenced),
            "redlock" => Ok(Mode::RedLock),
            "cluster" => Ok(Mode::Cluster),
            other => Err(format!(
                "unknown torture mode `{other}` (known: fenced, redlock, cluster)"
            )),
        }
    }

    /// How many stand-alone lock servers the mode needs (none for a cluster, which the
    /// coordinator starts as a whole).
    pub fn lock_servers(self) -> usize {
        match self {
            Mode::Fenced => 1,
            Mode::RedLock => 5,
            Mode::Cluster => 0,
        }
    }

    /// Whether the lock lives on a Redis Cluster.
    pub fn is_cluster(self) -> bool {
        self == Mode::Cluster
    }

    /// How many lock servers may be down at once with the lock still held: 0 for one
    /// server (and for a cluster, where no server goes down), a minority of a `RedLock`'s
    /// masters.
    pub fn tolerated_down(self) -> usize {
        let servers = self.lock_servers();
        servers.saturating_sub(servers / 2 + 1)
    }

    /// The faults the schedule draws from.
    pub fn fault_kinds(self) -> &'static [FaultKind] {
        match self {
            Mode::Fenced => &[
                FaultKind::PauseHolder,
                FaultKind::KillHolder,
                FaultKind::RestartLockServer,
                FaultKind::KillPubSubConnections,
                FaultKind::KillCommandConnections,
                FaultKind::ForceUnlock,
            ],
            Mode::RedLock => &[
                FaultKind::PauseHolder,
                FaultKind::KillHolder,
                FaultKind::RestartLockServer,
                FaultKind::MinorityDown,
                FaultKind::KillPubSubConnections,
                FaultKind::KillCommandConnections,
                FaultKind::ForceUnlock,
            ],
            // No lock server crashes: a master that dies may take writes its replica never
            // got (the lock, the token counter) with it, which no lock on one cluster can
            // survive; see the `transport` docs. A manual failover and a slot migration
            // lose nothing, and the lock must stay held and exclusive through them.
            Mode::Cluster => &[
                FaultKind::PauseHolder,
                FaultKind::KillHolder,
                FaultKind::FailoverMaster,
                FaultKind::MigrateSlot,
                FaultKind::KillPubSubConnections,
                FaultKind::KillCommandConnections,
                FaultKind::ForceUnlock,
            ],
        }
    }
}

/// A lock as the torture run uses it.
pub trait LockBackend: Send + Sync + 'static {
    /// What a successful acquire returns.
    type Held: HeldLock;

    /// Waits up to `wait` for the lock: `Ok(None)` when someone else held it all along.
    fn try_acquire(
        &self,
        wait: Duration,
    ) -> impl Future<Output = redis_rlock::Result<Option<Self::Held>>> + Send;

    /// Deletes the lock whoever holds it (on every master of a `RedLock`), waking a
    /// waiter, as an operator's force unlock does: whether anything was deleted.
    fn force_unlock(&self) -> impl Future<Output = redis_rlock::Result<bool>> + Send;
}

/// One acquisition, from acquire to unlock.
pub trait HeldLock: Send + Sync + 'static {
    /// The fencing token: greater than every token handed out before for this lock.
    fn token(&self) -> u64;

    /// Resolves, with the reason, when the lock is lost. Does not borrow the lock, so that
    /// it can race the critical section.
    fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static;

    /// Whether the lock is known to be, or must be assumed, lost.
    fn is_lost(&self) -> bool;

    /// The instant until which the lock is certainly held, on this process's monotonic clock.
    fn valid_until(&self) -> Instant;

    /// Releases the lock; `Error::LockLost` when it was lost before.
    fn unlock(self) -> impl Future<Output = redis_rlock::Result<()>> + Send;
}

/// Work to do with whichever backend a run's mode calls for: generic over the backend, so
/// that [`with_backend`] alone dispatches on the mode.
pub trait BackendJob {
    /// What the work returns.
    type Output;

    /// Does the work with `backend`.
    fn run<B: LockBackend>(self, backend: B) -> impl Future<Output = Self::Output> + Send;
}

/// Connects the backend of `mode` to `lock_urls` and runs `job` with it.
///
/// # Errors
/// When the lock servers cannot be reached.
pub async fn with_backend<J: BackendJob>(
    mode: Mode,
    lock_urls: &[String],
    timing: &Timing,
    job: J,
) -> redis_rlock::Result<J::Output> {
    match mode {
        Mode::Fenced => {
            let backend = FencedBackend::connect(&lock_urls[0], timing).await?;
            Ok(job.run(backend).await)
        }
        Mode::Cluster => {
            let backend = FencedBackend::connect_cluster(lock_urls, timing).await?;
            Ok(job.run(backend).await)
        }
        Mode::RedLock => {
            let backend = RedLockBackend::connect(lock_urls, timing).await?;
            Ok(job.run(backend).await)
        }
    }
}

/// A client of the lock server with the run's timing.
pub async fn lock_client(url: &str, timing: &Timing) -> redis_rlock::Result<Client> {
    with_timing(Client::builder(url), timing).build().await
}

/// A client of the lock cluster, found from `seeds`, with the run's timing.
pub async fn cluster_client(seeds: &[String], timing: &Timing) -> redis_rlock::Result<Client> {
    with_timing(Client::cluster_builder(seeds), timing)
        .build()
        .await
}

fn with_timing(builder: ClientBuilder, timing: &Timing) -> ClientBuilder {
    builder
        .watchdog_timeout(timing.lease)
        .response_timeout(timing.response_timeout)
        .connect_timeout(timing.connect_timeout)
        .subscribe_timeout(timing.subscribe_timeout)
        .retry_attempts(timing.retry_attempts)
        .retry_delay(timing.retry_delay)
}

/// The single-node `FencedLock`: the watchdog keeps the lease, and every acquire draws a
/// token from the server's counter.
#[derive(Debug, Clone)]
pub struct FencedBackend {
    lock: FencedLock,
}

impl FencedBackend {
    /// Connects to the lock server at `url`.
    pub async fn connect(url: &str, timing: &Timing) -> redis_rlock::Result<FencedBackend> {
        let client = lock_client(url, timing).await?;
        Ok(FencedBackend {
            lock: client.fenced_lock(LOCK_NAME),
        })
    }

    /// Connects to the lock cluster through `seeds`.
    pub async fn connect_cluster(
        seeds: &[String],
        timing: &Timing,
    ) -> redis_rlock::Result<FencedBackend> {
        let client = cluster_client(seeds, timing).await?;
        Ok(FencedBackend {
            lock: client.fenced_lock(LOCK_NAME),
        })
    }
}

impl LockBackend for FencedBackend {
    type Held = LockGuard;

    fn try_acquire(
        &self,
        wait: Duration,
    ) -> impl Future<Output = redis_rlock::Result<Option<LockGuard>>> + Send {
        self.lock.try_lock_for(wait)
    }

    fn force_unlock(&self) -> impl Future<Output = redis_rlock::Result<bool>> + Send {
        self.lock.force_unlock()
    }
}

impl HeldLock for LockGuard {
    fn token(&self) -> u64 {
        self.fencing_token()
            .expect("a FencedLock's guard carries a fencing token")
    }

    fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        LockGuard::lost(self)
    }

    fn is_lost(&self) -> bool {
        LockGuard::is_lost(self)
    }

    fn valid_until(&self) -> Instant {
        LockGuard::valid_until(self)
    }

    fn unlock(self) -> impl Future<Output = redis_rlock::Result<()>> + Send {
        LockGuard::unlock(self)
    }
}

/// How long one master may take to answer a `RedLock`'s acquire: roomy on a loaded 2-core
/// machine running five masters, small next to the lease.
const NODE_TIMEOUT: Duration = Duration::from_millis(250);

/// A `RedLock<Fenced>` over five masters: each master's hold is renewed by its own client's
/// watchdog, and the token is agreed by a majority before the guard is returned.
#[derive(Debug, Clone)]
pub struct RedLockBackend {
    group: RedLock<Fenced>,
}

impl RedLockBackend {
    /// Connects a client to every master in `urls` (all must answer).
    pub async fn connect(urls: &[String], timing: &Timing) -> redis_rlock::Result<RedLockBackend> {
        let mut locks = Vec::with_capacity(urls.len());
        for url in urls {
            locks.push(lock_client(url, timing).await?.fenced_lock(LOCK_NAME));
        }
        Ok(RedLockBackend {
            group: RedLock::new(locks).with_node_timeout(NODE_TIMEOUT),
        })
    }
}

impl LockBackend for RedLockBackend {
    type Held = GroupGuard;

    fn try_acquire(
        &self,
        wait: Duration,
    ) -> impl Future<Output = redis_rlock::Result<Option<GroupGuard>>> + Send {
        self.group.try_lock_for(wait)
    }

    async fn force_unlock(&self) -> redis_rlock::Result<bool> {
        let mut deleted = false;
        for lock in self.group.locks() {
            deleted |= lock.force_unlock().await?;
        }
        Ok(deleted)
    }
}

impl HeldLock for GroupGuard {
    fn token(&self) -> u64 {
        self.fencing_token()
            .expect("a RedLock<Fenced>'s guard carries a fencing token")
    }

    fn lost(&self) -> impl Future<Output = LostReason> + Send + 'static {
        GroupGuard::lost(self)
    }

    fn is_lost(&self) -> bool {
        GroupGuard::is_lost(self)
    }

    fn valid_until(&self) -> Instant {
        GroupGuard::valid_until(self)
    }

    fn unlock(self) -> impl Future<Output = redis_rlock::Result<()>> + Send {
        GroupGuard::unlock(self)
    }
}
