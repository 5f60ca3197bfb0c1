//! Taking one lock: [`Lock`]'s acquire, and the contender the [waiting loop](super::wait)
//! drives for it, for a single lock of any kind.
//!
//! A fair lock's waiter subscribes to its own channel and only then joins the queue (its
//! [`QueuePlace`]), so that from the moment it is queued, a PUBLISH to it that reaches nobody
//! means its process is gone (see `notify_head` in `fair_common.lua`). Its first try does
//! not queue: an uncontended lock costs one round trip, as for a plain lock.

use std::sync::Arc;
use std::time::Duration;

use crate::client_core::Core;
use crate::error::{Error, Result};
use crate::locks::attempt::{attempt, Request};
use crate::locks::distributed::{sealed, DistributedLock};
use crate::locks::fair::QueuePlace;
use crate::locks::guard::LockGuard;
use crate::locks::kind::LockKind;
use crate::locks::lock::Lock;
use crate::locks::wait::{deadline_after, wait_for, Contender, Listening, Tried, WakeUps};
use crate::locks::wait_registry::Registration;
use crate::protocol::names::LockNames;
use crate::transport::connections::Connections;
use crate::transport::pubsub::Wake;
use crate::util::lock_metrics::LockMetrics;
use crate::util::metrics::{self, AcquireOutcome};

impl<K: LockKind> sealed::Sealed for Lock<K> {}

impl<K: LockKind> DistributedLock for Lock<K> {
    type Guard = LockGuard;

    fn name(&self) -> &str {
        &self.name
    }

    /// Takes the lock for the handle's owner (by default the task calling this), waiting up
    /// to `wait` (`None`: for as long as it takes). `Ok(None)` means the wait ran out while
    /// someone else held the lock.
    #[tracing::instrument(level = "debug", name = "acquire", skip(self), fields(lock = %self.name, kind = self.names.as_deref().map_or("", |names| names.kind.label)))]
    async fn acquire(
        &self,
        fixed_lease_ms: Option<u64>,
        wait: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        let request = Request::new(&self.core, fixed_lease_ms, self.max_hold)?;
        let (core, names) = self.parts()?;
        let mut timed = Timed::start(&names.metrics);
        let _admitted = timed.admit(core)?;
        let task = self.identity.field(&core.id_text);
        let owner = names.owner_field(&task);
        let outcome = async {
            crate::locks::read_write::refuse_upgrade(core, names, &task, &owner)?;
            let mut contender = OneLock {
                core,
                names,
                owner,
                request,
                wake_ups: WakeUps::default(),
                place: None,
                registration: Registration::new(core, &names.key, &task),
            };
            let outcome = wait_for(&mut contender, deadline_after(wait)).await;
            if let Some(place) = contender.place.take() {
                place.end(outcome.as_ref().ok().map(Option::is_some)).await;
            }
            outcome
        }
        .await;
        timed.ended(&outcome);
        outcome
    }
}

/// Reports an acquire call's outcome and wait to the metrics when it ends, as cancelled
/// if its future is dropped first.
pub(crate) struct Timed<'m> {
    metrics: &'m LockMetrics,
    started: Option<std::time::Instant>,
    ended: bool,
}

impl<'m> Timed<'m> {
    pub(crate) fn start(metrics: &'m LockMetrics) -> Self {
        Timed {
            metrics,
            started: metrics::start(),
            ended: false,
        }
    }

    pub(crate) fn ended<G>(&mut self, outcome: &Result<Option<G>>) {
        self.end(match outcome {
            Ok(Some(_)) => AcquireOutcome::Acquired,
            Ok(None) => AcquireOutcome::TimedOut,
            Err(_) => AcquireOutcome::Failed,
        });
    }

    fn end(&mut self, outcome: AcquireOutcome) {
        self.ended = true;
        self.metrics.acquire_ended(outcome, self.started);
    }

    /// Admits the call ([`Core::admit`]): counted until the token drops, queue place left
    /// and all, so that a shutdown waits for it; refused, it ends as a failed call.
    pub(crate) fn admit(
        &mut self,
        core: &Core,
    ) -> Result<tokio_util::task::task_tracker::TaskTrackerToken> {
        core.admit()
            .inspect_err(|_| self.end(AcquireOutcome::Failed))
    }
}

impl Drop for Timed<'_> {
    fn drop(&mut self) {
        if !self.ended {
            self.end(AcquireOutcome::Cancelled);
        }
    }
}

/// One lock, and what its waiting call has set up: undone when the call ends, however it
/// ends.
struct OneLock<'a> {
    core: &'a Arc<Core>,
    names: &'a Arc<LockNames>,
    owner: Arc<str>,
    request: Request,
    wake_ups: WakeUps,
    /// A fair lock's place in the queue, claimed once the call listens for unlocks, that
    /// is, once it is willing to wait (other kinds' waiters race: nothing to keep).
    place: Option<QueuePlace>,
    /// The call's entry in the wait registry, when the client keeps one.
    registration: Option<Box<Registration>>,
}

impl Contender for OneLock<'_> {
    type Guard = LockGuard;

    async fn attempt(&mut self) -> Result<Tried<LockGuard>> {
        // A waiter with a place joins the queue, or refreshes its place, with each attempt.
        let join_queue = self.place.is_some();
        attempt(self.core, self.names, &self.owner, self.request, join_queue).await
    }

    fn may_retry(&self, error: &Error) -> bool {
        // A first acquire that may have run is undone before the retry; a re-entry cannot
        // be (it may not have run), so sending it again could count it twice.
        let holds = &self.core.holds;
        !(holds.is_held(&holds.id(&self.names.key, &self.owner)) && error.may_have_run())
    }

    async fn listen(&mut self, remaining: Duration) -> Result<Listening> {
        let channel = || self.names.wait_channel(&self.owner);
        let listening = (self.wake_ups)
            .listen(self.core, channel, Wake::Lock, remaining)
            .await?;
        if matches!(listening, Listening::Started) {
            if self.names.kind.queued {
                self.place = Some(QueuePlace::claim(self.core, self.names, &self.owner));
            }
            if let Some(registration) = self.registration.as_mut() {
                registration.waiting();
            }
        }
        Ok(listening)
    }

    async fn wait(&mut self, bound: Duration) {
        match self.registration.as_mut() {
            None => self.wake_ups.wait(bound).await,
            // The registry's writes run beside the wait, never in its way; boxed, so that
            // the wait of a client without a registry stays small.
            Some(registration) => {
                let wait = self.wake_ups.wait(bound);
                Box::pin(Registration::beside([&mut **registration], wait)).await
            }
        }
    }

    fn wakeups_used(&mut self) {
        self.wake_ups.used();
    }

    fn pacing(&self) -> &Connections {
        &self.core.connections
    }

    fn metrics(&self) -> &LockMetrics {
        &self.names.metrics
    }
}
