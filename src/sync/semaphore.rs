//! [`Semaphore`]: Redisson's `RSemaphore`, a count of free permits at the name.

use std::sync::Arc;
use std::time::Duration;

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::locks::wait::Tried;
use crate::protocol::names::{SyncKind, SyncNames};
use crate::protocol::scripts::{self, Change};
use crate::sync::call::{self, CountChange, Kind};
use crate::sync::check;
use crate::sync::handle::Handle;
use crate::sync::semaphore_guard::{give_back, SemaphoreGuard};
use crate::sync::waiting::{wait_until, Try, RECHECK};
use crate::transport::pubsub::Wake;
use crate::util::detach::FinishOnDrop;

/// A distributed semaphore: a number of permits that tasks anywhere (Rust or Java with
/// Redisson's `RSemaphore`, on the same name) take and give back.
///
/// The semaphore is a count of free permits at the key, nothing more: **no owner and no
/// expiry**, as in Redisson. Permits taken by a process that dies before it gives them back
/// stay taken until someone [`release`](Semaphore::release)s or
/// [`add_permits`](Semaphore::add_permits) them; where that matters, use a
/// [`PermitExpirableSemaphore`](crate::PermitExpirableSemaphore), whose permits come back
/// when their lease runs out. The layout, messages and waiting bounds are in the
/// [`sync`](crate::sync) docs.
///
/// Cheap to clone; made by [`Client::semaphore`](crate::Client::semaphore).
///
/// ```no_run
/// # async fn demo(client: redis_rlock::Client) -> redis_rlock::Result<()> {
/// let pool = client.semaphore("db:pool");
/// pool.try_set_permits(10).await?;          // false if someone set it already
/// let permits = pool.acquire(2).await?;     // waits until 2 are free
/// // ... use two connections ...
/// permits.release().await?;                 // or drop it: released in the background
/// assert_eq!(pool.available_permits().await?, 10);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    handle: Handle,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.handle.debug("Semaphore", f)
    }
}

impl Semaphore {
    pub(crate) fn new(core: Arc<Core>, name: &str) -> Self {
        Semaphore {
            handle: Handle::new(core, SyncKind::Semaphore, "semaphore", name),
        }
    }

    /// The semaphore's name, as given to [`Client::semaphore`](crate::Client::semaphore)
    /// (without the key prefix).
    pub fn name(&self) -> &str {
        &self.handle.name
    }

    /// Sets the number of free permits, if the semaphore has none set yet: true when set,
    /// false when a count was there already (nothing changed). 0 is allowed: a closed
    /// gate that [`add_permits`](Semaphore::add_permits) or
    /// [`release`](Semaphore::release) opens. Waiters are told.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid name or
    /// more than 2,147,483,647 permits (a Java `int`, as Redisson reads the count), with
    /// nothing sent; [`Error::NotALock`] when the key holds other
    /// data; a connection error.
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the count may or may not have been set.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.handle.try_set_permits(permits).await
    }

    /// Adds `permits` free permits (a negative number takes that many away, down to below
    /// zero if need be, as Redisson's `addPermits` does), whether or not a count was set,
    /// and tells the waiters.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid name, 0, or
    /// more than 2,147,483,647 either way (nothing sent);
    /// [`Error::Rejected`] when the count would leave a Java
    /// `int`'s range (nothing written); [`Error::NotALock`] when
    /// the key holds other data; a connection error.
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the permits may or may not have been added.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        self.handle.add_permits(permits, Change::Add).await
    }

    /// Takes `permits` permits, waiting as long as it takes for that many to be free. The
    /// guard gives them back when released or dropped.
    ///
    /// Waiting never polls: the waiter subscribes to the semaphore's channel and tries
    /// again when permits are given back, and at least every
    /// [`RECHECK`] (5 s) in case a message was lost. The semaphore
    /// is not fair: a waiter that wants fewer permits may get them first.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid name, 0
    /// permits or more than 2,147,483,647 (nothing sent);
    /// [`Error::NotALock`] when the key holds other data; a
    /// connection error when Redis cannot be reached after the configured retries (a try
    /// whose reply was lost is not sent again, and may have taken the permits: with no
    /// owner recorded, they cannot be told apart from others' and stay taken; a Redis
    /// Cluster or Sentinel client sends it again with its request latch, see
    /// [retries](crate::sync#retries));
    /// [`Error::Timeout`] when the subscription cannot be made.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind, and permits it took in
    /// its last moment are given back at once.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn acquire(&self, permits: u64) -> Result<SemaphoreGuard> {
        let taken = self.take(permits, None).await?;
        Ok(taken.expect("a wait without a deadline ends with the permits or an error"))
    }

    /// One try, no waiting: the permits, or `Ok(None)` when fewer are free.
    ///
    /// # Errors
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Semaphore::acquire).
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn try_acquire(&self, permits: u64) -> Result<Option<SemaphoreGuard>> {
        self.take(permits, Some(Duration::ZERO)).await
    }

    /// Waits up to `wait` for `permits` permits: `Ok(None)` if fewer were free all that
    /// time. A `wait` too large to add to the clock waits without bound.
    ///
    /// # Errors
    /// As [`acquire`](Semaphore::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Semaphore::acquire).
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn try_acquire_for(
        &self,
        permits: u64,
        wait: Duration,
    ) -> Result<Option<SemaphoreGuard>> {
        self.take(permits, Some(wait)).await
    }

    async fn take(&self, permits: u64, wait: Option<Duration>) -> Result<Option<SemaphoreGuard>> {
        let permits = check::permits("acquire", permits)?;
        let take = Take {
            permits,
            retrying: None,
        };
        wait_until(&self.handle, Wake::Permits, take, wait).await
    }

    /// Gives `permits` permits back without a guard (Redisson's `release(n)`): for permits
    /// a guard [`forget`](SemaphoreGuard::forget)s, or taken by a process that died. The
    /// semaphore checks nothing: permits given back that nobody took are added.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid name, 0 or
    /// more than 2,147,483,647 permits (nothing sent);
    /// [`Error::Rejected`] when the count would pass a Java
    /// `int`'s range (nothing written); [`Error::NotALock`]; a
    /// connection error (a try whose reply was lost is not sent again, as it may have run,
    /// but by a Redis Cluster or Sentinel client, with its request latch: see
    /// [retries](crate::sync#retries)).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the permits may or may not have been given back.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn release(&self, permits: u64) -> Result<()> {
        let permits = check::permits("release", permits)?;
        let (core, names) = self.handle.parts().await?;
        give_back(core.clone(), names.clone(), permits).await
    }

    /// How many permits are free (0 when no count was set, or when permits were taken away
    /// below zero).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an invalid name;
    /// [`Error::NotALock`] when the key holds other data; a
    /// connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (read only).
    pub async fn available_permits(&self) -> Result<u64> {
        self.handle.read_count().await
    }

    /// Takes every free permit at once (the count becomes 0) and returns how many there
    /// were. They are not given back by anything: [`release`](Semaphore::release) them.
    ///
    /// # Errors
    /// As [`available_permits`](Semaphore::available_permits).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the permits may or may not have been taken.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn drain_permits(&self) -> Result<u64> {
        let drained = self
            .handle
            .call("draining", Kind::CountChange, |conn, names, latch| {
                scripts::drain(conn, names, latch)
            })
            .await?;
        Ok(drained.max(0).unsigned_abs())
    }

    /// Deletes the semaphore's count; true when there was one. Waiters stay waiting until
    /// a count is set again (as in Redisson, nobody is told).
    ///
    /// # Errors
    /// As [`available_permits`](Semaphore::available_permits).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the count may or may not have been deleted.
    #[tracing::instrument(level = "debug", skip(self), fields(semaphore = %self.handle.name))]
    pub async fn delete(&self) -> Result<bool> {
        self.handle.delete().await
    }
}

/// One try at taking permits, as the waiting loop drives it.
struct Take {
    permits: u64,
    /// The request of a try that failed, which the next try sends again: with its latch
    /// on a cluster or Sentinel, so that a try that ran answers as it did (see `sync::call`). A try
    /// that got an answer ends its request; the next try is a new one.
    retrying: Option<CountChange>,
}

impl Try for Take {
    type Output = SemaphoreGuard;

    async fn try_once(
        &mut self,
        core: &Arc<Core>,
        names: &Arc<SyncNames>,
    ) -> Result<Tried<SemaphoreGuard>> {
        let permits = self.permits;
        let mut request = self
            .retrying
            .take()
            .unwrap_or_else(|| CountChange::new(core, names));
        let (sent_names, latch) = (names.clone(), request.latch().cloned());
        let (orphan_core, orphan_names) = (core.clone(), names.clone());
        let taken = call::once(core, names, "acquiring permits of", |conn| {
            let call = async move {
                scripts::semaphore_acquire(conn, &sent_names, latch, permits).await
            };
            // The script call finishes if the caller leaves; permits it took for nobody
            // are given back at once.
            FinishOnDrop::new(call, move |outcome| {
                if let Ok(true) = outcome {
                    let releasing = give_back(orphan_core.clone(), orphan_names, permits);
                    orphan_core.spawn(async move {
                        if let Err(e) = releasing.await {
                            tracing::warn!(error = %e, "permits taken for a caller who left could not be given back");
                        }
                    });
                }
            })
            .on(core.background())
        })
        .await;
        match taken {
            Ok(taken) => {
                request.done(core);
                if !taken {
                    return Ok(Tried::Busy(Some(RECHECK)));
                }
                tracing::debug!(semaphore = %names.key, permits, "acquired");
                Ok(Tried::Acquired(SemaphoreGuard::new(
                    core.clone(),
                    names.clone(),
                    permits,
                )))
            }
            Err(e) => {
                request.failed(&e);
                self.retrying = Some(request);
                Err(e)
            }
        }
    }

    fn may_retry(&self, error: &Error) -> bool {
        // A try that may have run may have taken the permits: sent again without a latch
        // (or once its latch may be gone), it could take them twice, and with no owner
        // nothing tells which are whose.
        match &self.retrying {
            Some(request) => request.resends(error),
            None => !error.may_have_run(),
        }
    }
}
