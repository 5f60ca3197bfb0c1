//! [`Lifecycle`]: a client's way from running to shut down, and [`Background`], where its
//! clean-up work runs so that a shutdown can wait for it.
//!
//! A shutdown goes in three steps: it begins ([`Lifecycle::begin`]: acquires are refused
//! and waiting calls return), waits for the calls and clean-ups on their way
//! ([`Lifecycle::work_done`]), and, once it has released what the client held, closes
//! the connections ([`Lifecycle::close`]: every call is refused).

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_util::sync::CancellationToken;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tokio_util::task::TaskTracker;

use crate::error::{Error, Result};

/// Where a client stands between running and shut down.
#[derive(Debug, Default)]
pub(crate) struct Lifecycle {
    /// Set by the first shutdown.
    begun: AtomicBool,
    /// Cancelled when the shutdown begins: waiting calls return then.
    stopping: CancellationToken,
    /// Set when the connections are closed.
    closed: AtomicBool,
    /// Cancelled when the shutdown is over, for a second shutdown call to wait on.
    finished: CancellationToken,
    /// The calls that may take something (acquires, waits for permits) and the clean-ups
    /// in the background (releases from a `Drop`, undone acquires, queue places left).
    work: TaskTracker,
}

impl Lifecycle {
    /// Begins the shutdown; false if one began before.
    pub(crate) fn begin(&self) -> bool {
        if self.begun.swap(true, Ordering::AcqRel) {
            return false;
        }
        self.stopping.cancel();
        true
    }

    /// Whether a shutdown has begun.
    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Resolves when a shutdown begins.
    pub(crate) fn stopping(&self) -> impl Future<Output = ()> + Send + '_ {
        self.stopping.cancelled()
    }

    /// What a waiting call listens to for a shutdown's beginning, without borrowing this.
    pub(crate) fn stop_signal(&self) -> CancellationToken {
        self.stopping.clone()
    }

    /// Counts a call that may take something as on its way until the token drops, or
    /// refuses it with [`Error::ShutDown`] once a shutdown has begun.
    pub(crate) fn admit(&self) -> Result<TaskTrackerToken> {
        if self.is_stopping() {
            return Err(Error::ShutDown);
        }
        Ok(self.work.token())
    }

    /// Counts a release as on its way until the token drops, so that a shutdown waits for
    /// it; never refused (a shutdown needs them).
    pub(crate) fn track(&self) -> TaskTrackerToken {
        self.work.token()
    }

    /// Waits until no admitted call and no clean-up is on its way.
    pub(crate) async fn work_done(&self) {
        self.work.close();
        self.work.wait().await;
    }

    /// Marks the connections closed: from now on every call is refused.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// [`Error::ShutDown`] once the connections are closed.
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        Ok(())
    }

    /// The shutdown is over.
    pub(crate) fn finish(&self) {
        self.finished.cancel();
    }

    /// Resolves when the shutdown is over.
    pub(crate) fn finished(&self) -> impl Future<Output = ()> + Send + '_ {
        self.finished.cancelled()
    }

    /// Where clean-up work runs: `runtime`, counted among this lifecycle's work.
    pub(crate) fn background(&self, runtime: tokio::runtime::Handle) -> Background {
        Background {
            runtime,
            work: self.work.clone(),
        }
    }
}

/// A client's runtime, where clean-up work runs (it drives the client's connections, and
/// outlives a caller's runtime that is shutting down), counted so that a shutdown waits
/// for it.
#[derive(Debug, Clone)]
pub(crate) struct Background {
    runtime: tokio::runtime::Handle,
    work: TaskTracker,
}

impl Background {
    /// Runs `work` in the background.
    pub(crate) fn spawn(&self, work: impl Future<Output = ()> + Send + 'static) {
        drop(self.work.spawn_on(work, &self.runtime));
    }

    /// Runs `work` on the client's runtime without counting it among the clean-up work: for
    /// the shutdown itself, which waits for that work.
    pub(crate) fn spawn_uncounted<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> tokio::task::JoinHandle<T> {
        self.runtime.spawn(work)
    }
}
