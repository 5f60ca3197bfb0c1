//! [`SemaphoreGuard`]: permits taken from a [`Semaphore`](crate::Semaphore), given back by
//! [`SemaphoreGuard::release`] or on drop.

use std::sync::Arc;

use crate::client_core::handed_out::Outstanding;
use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::protocol::names::SyncNames;
use crate::protocol::scripts::{self, Change};
use crate::sync::call::{self, Kind};
use crate::util::detach::FinishOnDrop;

/// Permits taken from a [`Semaphore`](crate::Semaphore).
///
/// Give them back with [`release`](SemaphoreGuard::release); dropping the guard gives them
/// back too, in the background on the client's runtime (`Drop` cannot wait for Redis),
/// wherever it is dropped. [`forget`](SemaphoreGuard::forget) keeps them taken.
///
/// The guard may be moved to, and released from, any task: a plain semaphore has no owner.
#[must_use = "if unused the permits are given back immediately"]
#[clippy::has_significant_drop]
pub struct SemaphoreGuard {
    /// `None` once released or forgotten.
    state: Option<GuardState>,
}

struct GuardState {
    core: Arc<Core>,
    names: Arc<SyncNames>,
    permits: u64,
    /// Its entry in the client's list of guards (see [`HandedOut`](crate::client_core::handed_out)).
    ticket: u64,
}

impl std::fmt::Debug for SemaphoreGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut debug = f.debug_struct("SemaphoreGuard");
        if let Some(state) = &self.state {
            debug
                .field("semaphore", &state.names.key)
                .field("permits", &state.permits);
        }
        debug.finish()
    }
}

impl SemaphoreGuard {
    pub(crate) fn new(core: Arc<Core>, names: Arc<SyncNames>, permits: u64) -> Self {
        let ticket = core.handed_out.list(Outstanding::Permits {
            names: names.clone(),
            permits,
        });
        SemaphoreGuard {
            state: Some(GuardState {
                core,
                names,
                permits,
                ticket,
            }),
        }
    }

    fn state(&self) -> &GuardState {
        self.state
            .as_ref()
            .expect("a SemaphoreGuard holds its state until it is consumed")
    }

    /// How many permits the guard holds.
    pub fn permits(&self) -> u64 {
        self.state().permits
    }

    /// The semaphore's Redis key: the client's key prefix followed by its name.
    pub fn semaphore(&self) -> &str {
        &self.state().names.key
    }

    /// Gives the permits back and tells the waiters.
    ///
    /// # Errors
    /// [`Error::Rejected`] when the count would pass a Java
    /// `int`'s range (permits were added meanwhile; nothing written);
    /// [`Error::ShutDown`] when the client's
    /// [`shutdown`](crate::Client::shutdown) gave them back already (nothing is sent);
    /// [`Error::NotALock`] when the key now holds other data; a
    /// connection error when Redis could not be reached. A try whose reply was lost is
    /// not sent again (it may have run, and the count has no owner to check): the
    /// permits are then given back or lost, and an error says which cannot be known. A
    /// Redis Cluster or Sentinel client sends it again with its request latch, and a
    /// cluster client rides out a migration or a failover (see
    /// [retries](crate::sync#retries)).
    ///
    /// # Cancel safety
    /// The release runs to completion in the background if this future is dropped.
    pub async fn release(mut self) -> Result<()> {
        let state = self.state.take().expect("a guard is released once");
        if !state.core.handed_out.take(state.ticket) {
            return Err(Error::ShutDown);
        }
        let runtime = state.core.background().clone();
        FinishOnDrop::new(give_back(state.core, state.names, state.permits), |_| {})
            .on(&runtime)
            .await
    }

    /// Keeps the permits taken: nothing is given back, now or on drop, nor by the client's
    /// [`shutdown`](crate::Client::shutdown). Returns how many they are;
    /// [`Semaphore::release`](crate::Semaphore::release) gives them back later, from
    /// anywhere. (After a shutdown, which gave them back, it returns their number all the
    /// same.)
    pub fn forget(mut self) -> u64 {
        let state = self.state.take().expect("a guard is consumed once");
        state.core.handed_out.take(state.ticket);
        tracing::debug!(semaphore = %state.names.key, permits = state.permits, "permits forgotten");
        state.permits
    }
}

/// Gives `permits` back to the semaphore `names` (Redisson's `release(n)`): sent again only
/// after failures that certainly did not reach Redis, since a count change that ran twice
/// would give them back twice.
pub(crate) async fn give_back(core: Arc<Core>, names: Arc<SyncNames>, permits: u64) -> Result<()> {
    // A shutdown waits for it.
    let _tracked = core.track();
    let names: &SyncNames = &names;
    let added = i64::try_from(permits).expect("permits are checked to fit an int");
    let released = call::run(
        &core,
        names,
        "releasing permits of",
        Kind::CountChange,
        |conn, latch| scripts::change_permits(conn, names, latch, added, Change::Release),
    )
    .await;
    released
        .result
        .map(|_| tracing::debug!(semaphore = %names.key, permits, "released"))
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        let Some(state) = self.state.take() else {
            return;
        };
        if !state.core.handed_out.take(state.ticket) {
            return; // the shutdown gave them back
        }
        let core = state.core.clone();
        let key = state.names.key.clone();
        let releasing = give_back(state.core, state.names, state.permits);
        core.spawn(async move {
            if let Err(e) = releasing.await {
                tracing::warn!(semaphore = %key, error = %e, "background release of permits failed");
            }
        });
    }
}
