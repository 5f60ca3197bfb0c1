//! A background task that works in rounds while there is work, and ends when there is none:
//! the watchdog renewing held locks, the heartbeat refreshing queued waiters, the lease
//! check.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::util::poison;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The work of one periodic task.
pub(crate) trait Rounds: Send + Sync + 'static {
    /// Whether anything is left to do. Checked under the task's lock, so that work added
    /// just as the task finds none either is seen or starts a new task.
    fn has_work(&self) -> bool;

    /// Runs one round; returns the time from its start to the next round's. `woken`: the
    /// pause before it was cut short by the task's event (see [`Periodic::new`]).
    fn round(&self, woken: bool) -> impl Future<Output = Duration> + Send + '_;
}

/// Runs `R`'s rounds on one runtime, starting on demand.
pub(crate) struct Periodic<R: Rounds> {
    shared: Arc<Shared<R>>,
}

struct Shared<R> {
    rounds: R,
    /// The pause before the first round.
    first_pause: Duration,
    /// What cuts a pause short, if anything: an event after which the next round should
    /// not wait.
    cut_short: Option<Arc<Notify>>,
    /// The runtime the client was built on: a lock call from another runtime must not tie
    /// the task to a runtime that may go away first.
    runtime: tokio::runtime::Handle,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl<R: Rounds> Drop for Periodic<R> {
    /// The client is gone (no guard or waiter is left either, they hold it): the task ends
    /// now rather than at its next round, up to a third of a lease later.
    fn drop(&mut self) {
        self.stop();
    }
}

impl<R: Rounds> Periodic<R> {
    /// `rounds` on `runtime`, the first after `first_pause`; each pause is cut short by
    /// `cut_short`, if given.
    pub(crate) fn new(
        rounds: R,
        first_pause: Duration,
        cut_short: Option<Arc<Notify>>,
        runtime: &tokio::runtime::Handle,
    ) -> Self {
        Periodic {
            shared: Arc::new(Shared {
                rounds,
                first_pause,
                cut_short,
                runtime: runtime.clone(),
                task: Mutex::new(None),
            }),
        }
    }

    pub(crate) fn rounds(&self) -> &R {
        &self.shared.rounds
    }

    /// Makes sure the task runs; call after adding work.
    pub(crate) fn ensure_running(&self) {
        let mut task = poison::locked(&self.shared.task);
        if task.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        *task = Some(self.shared.runtime.spawn(run(self.shared.clone())));
    }

    /// Ends the task now, for the client's shutdown (which leaves it no work to start
    /// another for).
    pub(crate) fn stop(&self) {
        if let Some(task) = poison::locked(&self.shared.task).take() {
            task.abort();
        }
    }

    /// Whether the task is running (for tests and diagnostics).
    pub(crate) fn is_running(&self) -> bool {
        let task = poison::locked(&self.shared.task);
        task.as_ref().is_some_and(|t| !t.is_finished())
    }
}

async fn run<R: Rounds>(shared: Arc<Shared<R>>) {
    let mut pause = shared.first_pause;
    loop {
        let event = async {
            match &shared.cut_short {
                Some(event) => event.notified().await,
                None => std::future::pending().await,
            }
        };
        let woken = tokio::select! {
            () = tokio::time::sleep(pause) => false,
            () = event => true,
        };
        {
            let mut task = poison::locked(&shared.task);
            if !shared.rounds.has_work() {
                *task = None;
                return;
            }
        }
        let began = tokio::time::Instant::now();
        let pause_after = shared.rounds.round(woken).await;
        // Counted from the round's start: a long round (a client holding 100,000 locks)
        // must not push every lock's next renewal a round's length further out.
        pause = pause_after.saturating_sub(began.elapsed());
    }
}
