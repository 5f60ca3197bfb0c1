//! The events regrouped by acquisition: one record per guard, from its acquire to its
//! unlock, which the checker, the fault schedule and the summary read.

use std::collections::BTreeMap;

use super::clock::Micros;
use super::events::{Call, Event, EventKind, UnlockOutcome, WorkerId, WriteVia};
use super::faults::{Fault, FaultKind};

/// How a critical section ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionEnd {
    /// When: the `lost` or `releasing` event.
    pub at: Micros,
    /// The reason, when `lost()` ended it.
    pub lost: Option<String>,
}

/// One write made in a section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// Its number in the section.
    pub seq: u32,
    /// Its path.
    pub via: WriteVia,
    /// Whether it was the stale write after the loss.
    pub after_loss: bool,
    /// `Some(accepted)` when it returned, `None` when it failed.
    pub accepted: Option<bool>,
    /// Whether the guard was still valid when it returned.
    pub valid_after: bool,
    /// The call.
    pub call: Call,
}

/// One acquisition by one worker (or the coordinator), from acquire to unlock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acquisition {
    /// Who held it.
    pub worker: WorkerId,
    /// The worker's acquisition number.
    pub acq: u64,
    /// Its fencing token.
    pub token: u64,
    /// The acquire call.
    pub call: Call,
    /// When the `acquired` event was reported.
    pub reported_at: Micros,
    /// The latest validity deadline the worker reported for it.
    pub valid_until: Micros,
    /// How its critical section ended; `None` if it never did (the worker was killed).
    pub end: Option<SectionEnd>,
    /// How its unlock ended, and the call.
    pub unlock: Option<(UnlockOutcome, Call)>,
    /// Its writes.
    pub writes: Vec<WriteRecord>,
    /// Its re-entries, inside its section.
    pub reentries: Vec<ReentryRecord>,
    /// The window of a `force_unlock` fault that deleted the key while this acquisition
    /// may have held it (set by the checker from the faults).
    pub force_unlocked: Option<(Micros, Micros)>,
}

/// One re-entry made in a section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReentryRecord {
    /// Whether it returned a guard.
    pub acquired: bool,
    /// Whether the outer guard was lost when it returned.
    pub outer_lost: bool,
    /// The call.
    pub call: Call,
}

impl Acquisition {
    /// Until when the lock key certainly still held this acquisition's owner: the end of
    /// its section (the unlock comes after), or its validity deadline (Redis expires the key
    /// after it), whichever is first; or a force unlock, which deletes the key whatever
    /// the lease. No other acquire can have succeeded before this.
    pub fn exclusive_until(&self) -> Micros {
        let until = match &self.end {
            Some(end) => end.at.min(self.valid_until),
            None => self.valid_until,
        };
        self.force_unlocked
            .map_or(until, |(deleted, _)| until.min(deleted))
    }
}

/// Every acquisition in `events`, in the order they were reported. Events of an unknown
/// acquisition (which a worker never reports) are ignored here; the log check catches
/// writes nobody acquired for.
pub fn acquisitions(events: &[Event]) -> Vec<Acquisition> {
    let mut all: Vec<Acquisition> = Vec::new();
    let mut index: BTreeMap<(WorkerId, u64), usize> = BTreeMap::new();
    for event in events {
        if let EventKind::Acquired {
            acq,
            token,
            call,
            valid_until,
        } = &event.kind
        {
            index.insert((event.worker, *acq), all.len());
            all.push(Acquisition {
                worker: event.worker,
                acq: *acq,
                token: *token,
                call: *call,
                reported_at: event.at,
                valid_until: *valid_until,
                end: None,
                unlock: None,
                writes: Vec::new(),
                reentries: Vec::new(),
                force_unlocked: None,
            });
            continue;
        }
        let Some(acq) = event.kind.acquisition() else {
            continue;
        };
        let Some(&at) = index.get(&(event.worker, acq)) else {
            continue;
        };
        let record = &mut all[at];
        match &event.kind {
            EventKind::Wrote {
                seq,
                via,
                after_loss,
                accepted,
                valid_after,
                call,
                valid_until,
                ..
            } => {
                record.valid_until = record.valid_until.max(*valid_until);
                record.writes.push(WriteRecord {
                    seq: *seq,
                    via: *via,
                    after_loss: *after_loss,
                    accepted: Some(*accepted),
                    valid_after: *valid_after,
                    call: *call,
                });
            }
            EventKind::WriteFailed {
                seq,
                via,
                after_loss,
                call,
                ..
            } => record.writes.push(WriteRecord {
                seq: *seq,
                via: *via,
                after_loss: *after_loss,
                accepted: None,
                valid_after: false,
                call: *call,
            }),
            EventKind::Lost {
                reason,
                valid_until,
                ..
            } => {
                record.valid_until = record.valid_until.max(*valid_until);
                record.end.get_or_insert(SectionEnd {
                    at: event.at,
                    lost: Some(reason.clone()),
                });
            }
            EventKind::Releasing { valid_until, .. } => {
                record.valid_until = record.valid_until.max(*valid_until);
                record.end.get_or_insert(SectionEnd {
                    at: event.at,
                    lost: None,
                });
            }
            EventKind::Unlocked { outcome, call, .. } => {
                record.unlock = Some((outcome.clone(), *call));
            }
            EventKind::Reentered {
                acquired,
                outer_lost,
                call,
                ..
            } => record.reentries.push(ReentryRecord {
                acquired: *acquired,
                outer_lost: *outer_lost,
                call: *call,
            }),
            _ => {}
        }
    }
    all
}

/// The acquisition `worker` was holding, inside its critical section, at `at`: its last
/// acquire reported before `at` whose section had not ended by then.
pub fn in_section_at(events: &[Event], worker: WorkerId, at: Micros) -> Option<u64> {
    events
        .iter()
        .rev()
        .filter(|e| e.worker == worker && e.at < at)
        .find_map(|e| match e.kind {
            EventKind::Acquired { acq, .. } => Some(Some(acq)),
            EventKind::Lost { .. } | EventKind::Releasing { .. } => Some(None),
            _ => None,
        })
        .flatten()
}

/// How much of `[from, to]` falls inside `windows`.
pub fn overlap(from: Micros, to: Micros, windows: &[(Micros, Micros)]) -> Micros {
    windows
        .iter()
        .map(|&(start, end)| (to.min(end) - from.max(start)).max(0))
        .sum()
}

/// The windows in which each worker was stopped.
pub fn pauses_by_worker(faults: &[Fault]) -> BTreeMap<WorkerId, Vec<(Micros, Micros)>> {
    let mut pauses: BTreeMap<WorkerId, Vec<(Micros, Micros)>> = BTreeMap::new();
    for fault in faults.iter().filter(|f| f.kind == FaultKind::PauseHolder) {
        if let Some(worker) = fault.worker {
            pauses
                .entry(worker)
                .or_default()
                .push((fault.began, fault.ended));
        }
    }
    pauses
}
