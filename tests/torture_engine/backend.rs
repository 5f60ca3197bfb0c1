//! The seam between the torture run and the lock it tortures: a backend takes the lock and
//! returns a held lock with a fencing token, a `lost()` future and `unlock()`. Workers, the
//! coordinator's last acquisition and the checker see nothing else, so another lock (a
//! `RedLock` over several masters) plugs in as one more [`Mode`] with its backend, its
//! number of lock servers and its fault kinds.

use std::future::Future;
use std::time::{Duration, Instant};

use redis_rlock::{Client, FencedLock, LockGuard, LostReason};

use super::config::Timing;
use super::faults::FaultKind;

/// The name of the lock every worker contends for.
pub const LOCK_NAME: &str = "torture:lock";

/// Which lock a run tortures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A `FencedLock` on one Redis server.
    Fenced,
}

impl Mode {
    /// The name used on the command line and in the worker spec.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Fenced => "fenced",
        }
    }

    /// Reads a [`name`](Mode::name).
    pub fn parse(text: &str) -> Result<Mode, String> {
        match text {
            "fenced" => Ok(Mode::Fenced),
            other => Err(format!("unknown torture mode `{other}` (known: fenced)")),
        }
    }

    /// How many lock servers the mode needs.
    pub fn lock_servers(self) -> usize {
        match self {
            Mode::Fenced => 1,
        }
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
    }
}

/// A client of the lock server with the run's timing.
pub async fn lock_client(url: &str, timing: &Timing) -> redis_rlock::Result<Client> {
    Client::builder(url)
        .watchdog_timeout(timing.lease)
        .response_timeout(timing.response_timeout)
        .connect_timeout(timing.connect_timeout)
        .subscribe_timeout(timing.subscribe_timeout)
        .retry_attempts(timing.retry_attempts)
        .retry_delay(timing.retry_delay)
        .build()
        .await
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
}

impl LockBackend for FencedBackend {
    type Held = LockGuard;

    fn try_acquire(
        &self,
        wait: Duration,
    ) -> impl Future<Output = redis_rlock::Result<Option<LockGuard>>> + Send {
        self.lock.try_lock_for(wait)
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
