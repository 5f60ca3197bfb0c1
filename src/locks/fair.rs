//! [`FairLock`]: the reentrant lock that serves its waiters first come, first served, with
//! Redisson's `RFairLock` layout; and a waiter's [`QueuePlace`] in its queue.
//!
//! A queued waiter has a deadline on the Redis server's clock, pushed forward by its
//! client's [heartbeat](crate::services::heartbeat). A place belongs to an owner (a task),
//! not to one call: two waits of one task on one lock share it, and it is left when the
//! last of them gives up.

use std::sync::Arc;

use crate::client_core::Core;
use crate::protocol::kinds::fair;
use crate::protocol::names::LockNames;
use crate::util::detach::FinishOnDrop;

// Defined in the table of kinds; named here too, where `locks` lists them.
pub use crate::locks::kind::{Fair, FairLock};

/// A waiter's claim on a place in a fair lock's queue, from just before its first queueing
/// attempt until it takes the lock or leaves. Dropping it leaves the queue in the
/// background.
pub(crate) struct QueuePlace {
    core: Arc<Core>,
    names: Arc<LockNames>,
    owner: Arc<str>,
    registered: bool,
}

impl QueuePlace {
    /// Starts keeping `owner`'s place in the queue of `names`; the acquire script adds it.
    pub(crate) fn claim(core: &Arc<Core>, names: &Arc<LockNames>, owner: &Arc<str>) -> Self {
        core.heartbeat.register(names, owner);
        QueuePlace {
            core: core.clone(),
            names: names.clone(),
            owner: owner.clone(),
            registered: true,
        }
    }

    /// The wait ended with the lock (`Some(true)`: taking it removed the waiter from the
    /// queue), gave up (`Some(false)`), or failed (`None`: Redis is failing, and a leave
    /// now would fail too; the drop leaves in the background).
    pub(crate) async fn end(mut self, acquired: Option<bool>) {
        match acquired {
            Some(true) => {
                self.deregister();
            }
            // Left before returning, so that the caller sees the queue without it and the
            // waiter behind it is already told.
            Some(false) => self.leave().await,
            None => drop(self),
        }
    }

    /// The waiter gives up: leaves the queue, and the new head is told if the lock is free.
    /// One try is awaited, so that a caller who gave up sees the queue without it; if Redis
    /// fails it, the retries go on in the background rather than holding the caller. They
    /// go on in the background too if the caller stops waiting.
    async fn leave(mut self) {
        if !self.deregister() {
            return;
        }
        let (core, names, owner) = (self.core.clone(), self.names.clone(), self.owner.clone());
        let leaving = async move {
            let left = core
                .connections
                .once(|conn| fair::leave_queue(conn, &names, &owner));
            if let Err(e) = left.await {
                tracing::debug!(lock = %names.key, error = %e, "leaving the queue; retrying");
                leave_in_background(core, names, owner);
            }
        };
        let runtime = self.core.background().clone();
        FinishOnDrop::new(leaving, |()| {}).on(&runtime).await;
    }

    /// Stops keeping the place; true when no other wait of the owner still wants it.
    fn deregister(&mut self) -> bool {
        std::mem::take(&mut self.registered)
            && self.core.heartbeat.deregister(&self.names, &self.owner)
    }
}

impl Drop for QueuePlace {
    fn drop(&mut self) {
        if self.deregister() {
            leave_in_background(self.core.clone(), self.names.clone(), self.owner.clone());
        }
    }
}

/// Leaves the queue without waiting (for dropped waits and abandoned attempts), on the
/// client's runtime. If that is gone, the place is dropped when its deadline passes.
pub(crate) fn leave_in_background(core: Arc<Core>, names: Arc<LockNames>, owner: Arc<str>) {
    core.clone().spawn(leave(core, names, owner));
}

async fn leave(core: Arc<Core>, names: Arc<LockNames>, owner: Arc<str>) {
    if core.heartbeat.is_registered(&names, &owner) {
        // A new wait of the same owner took the place up again while this leave was on its
        // way (a `timeout(lock())` in a loop): leaving now would take the new wait's place.
        return;
    }
    let left = core
        .connections
        .with_retries(|conn| fair::leave_queue(conn, &names, &owner))
        .await;
    if let Err(e) = left {
        tracing::warn!(
            lock = %names.key, %owner, error = %e,
            "could not leave the queue; the place expires with its deadline"
        );
    }
}

/// After a release that found the head of the fair lock's queue unheard (it keeps its turn
/// for [`UNHEARD_GRACE`](fair::UNHEARD_GRACE), in case it is subscribing yet), looks
/// again once that grace has passed, in the background on the client's runtime: the head
/// has taken the lock by then, or it is passed over and the next waiter that hears is
/// told. Without this, a queue of Redisson waiters behind a dead head would wait for a
/// message nobody sends. A few rounds at most, for heads found unheard one after another.
pub(crate) fn look_again_after_grace(core: &Arc<Core>, names: &Arc<LockNames>) {
    const ROUNDS: usize = 3;
    // Past the grace as Redis measures it, however the two clocks run.
    let after = fair::UNHEARD_GRACE + std::time::Duration::from_millis(20);
    let (task_core, names) = (core.clone(), names.clone());
    core.spawn(async move {
        for _ in 0..ROUNDS {
            tokio::time::sleep(after).await;
            let looked = task_core
                .connections
                .with_retries(|conn| fair::notify_queue(conn, &names))
                .await;
            match looked {
                Ok(true) => continue,
                Ok(false) => return,
                Err(e) => {
                    tracing::debug!(lock = %names.key, error = %e, "could not look at the queue again; its waiters' own checks will");
                    return;
                }
            }
        }
    });
}
