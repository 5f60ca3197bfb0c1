//! The timed steps of a critical section (acquire, fenced write, unlock), each returning
//! the event that reports it: the workers and the coordinator's last acquisition report
//! them alike.

use std::time::{Duration, Instant};

use super::backend::{HeldLock, LockBackend};
use super::clock::{self, micros, shared_time_of};
use super::events::{Call, EventKind, UnlockOutcome, WriteVia};
use super::resource::{LogEntry, Resource};

/// Runs `step`, timing it on the monotonic clock from a start read on the shared clock.
pub async fn timed<T>(step: impl std::future::Future<Output = T>) -> (Call, T) {
    let began = clock::now();
    let started = Instant::now();
    let outcome = step.await;
    let call = Call {
        began,
        took: micros(started.elapsed()),
    };
    (call, outcome)
}

/// Waits up to `wait` for the lock: the guard, or the event reporting why there is none.
pub async fn acquire<B: LockBackend>(
    backend: &B,
    wait: Duration,
) -> (Call, Result<B::Held, EventKind>) {
    let (call, outcome) = timed(backend.try_acquire(wait)).await;
    let outcome = match outcome {
        Ok(Some(held)) => Ok(held),
        Ok(None) => Err(EventKind::AcquireTimedOut { call }),
        Err(e) => Err(EventKind::AcquireFailed {
            call,
            error: e.to_string(),
        }),
    };
    (call, outcome)
}

/// Takes the lock again from inside the section of `outer` (the same task: a re-entry),
/// waiting up to `wait`: the event reporting it, and the inner guard.
pub async fn reenter<B: LockBackend>(
    backend: &B,
    outer: &B::Held,
    acq: u64,
    wait: Duration,
) -> (EventKind, Option<B::Held>) {
    let (call, outcome) = timed(backend.try_acquire(wait)).await;
    let inner = outcome.ok().flatten();
    let event = EventKind::Reentered {
        acq,
        acquired: inner.is_some(),
        outer_lost: outer.is_lost(),
        call,
    };
    (event, inner)
}

/// The event reporting that `held` was acquired.
pub fn acquired<H: HeldLock>(held: &H, acq: u64, call: Call) -> EventKind {
    EventKind::Acquired {
        acq,
        token: held.token(),
        call,
        valid_until: shared_time_of(held.valid_until()),
    }
}

/// One fenced write of `entry` to the resource, through `via`, and whether the writer's
/// lock was still valid when it returned. `after_loss` marks the stale write a worker
/// makes once told it lost the lock.
pub async fn write<H: HeldLock>(
    resource: &Resource,
    held: &H,
    entry: LogEntry,
    via: WriteVia,
    after_loss: bool,
) -> EventKind {
    let (call, outcome) = timed(async {
        match via {
            WriteVia::Logged => resource
                .write_logged(entry)
                .await
                .map_err(|e| e.to_string()),
            WriteVia::Library => resource
                .write_with_library(entry)
                .await
                .map_err(|e| e.to_string()),
        }
    })
    .await;
    match outcome {
        Ok(accepted) => EventKind::Wrote {
            acq: entry.acq,
            token: entry.token,
            seq: entry.seq,
            via,
            after_loss,
            accepted,
            valid_after: !held.is_lost() && held.valid_until() > Instant::now(),
            call,
            valid_until: shared_time_of(held.valid_until()),
        },
        Err(error) => EventKind::WriteFailed {
            acq: entry.acq,
            seq: entry.seq,
            via,
            after_loss,
            call,
            error,
        },
    }
}

/// The event that ends a section: `lost` when `lost()` ended it, else `releasing`.
pub fn section_end<H: HeldLock>(
    held: &H,
    acq: u64,
    lost: Option<redis_rlock::LostReason>,
) -> EventKind {
    let valid_until = shared_time_of(held.valid_until());
    match lost {
        Some(reason) => EventKind::Lost {
            acq,
            reason: format!("{reason:?}"),
            valid_until,
        },
        None => EventKind::Releasing { acq, valid_until },
    }
}

/// Unlocks `held`.
pub async fn unlock<H: HeldLock>(held: H, acq: u64) -> EventKind {
    let (call, outcome) = timed(held.unlock()).await;
    let outcome = match outcome {
        Ok(()) => UnlockOutcome::Released,
        Err(e) => match e.lost_reason() {
            Some(reason) => UnlockOutcome::LockLost(format!("{reason:?}")),
            None => UnlockOutcome::Failed(e.to_string()),
        },
    };
    EventKind::Unlocked { acq, outcome, call }
}
