//! The checker: reads the events, the faults, the resource's log and how the workers
//! ended, and lists every broken promise.
//!
//! It relies only on what must hold whatever the timing: a lock key with an owner's field
//! lives at least until that owner's validity deadline (Redis expires it after it) and
//! until its unlock (nothing else deletes it: the lock server keeps its data through
//! restarts), and tokens come from one counter that only grows. Everything else in the
//! bounds is generous, for a loaded machine.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::clock::{micros, Micros};
use super::config::Bounds;
use super::events::{Event, EventKind, UnlockOutcome, WorkerId, WriteVia, COORDINATOR};
use super::faults::{Fault, FaultKind};
use super::fleet::WorkerExit;
use super::history::{acquisitions, Acquisition, WriteRecord};
use super::resource::LogEntry;

/// Slack for comparing times taken by different processes from the shared clock: reading
/// it and the monotonic clock back to back. The lock's own drift allowance (1 % of the
/// lease + 2 ms) keeps real expiries further away than this.
const CLOCK_SLACK: Micros = 2_000;

/// One broken promise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which check found it.
    pub check: &'static str,
    /// What happened, with the workers, tokens and times involved.
    pub detail: String,
}

/// Everything the checker reads.
#[derive(Debug)]
pub struct CheckInput<'a> {
    /// Every event, the coordinator's last acquisition included.
    pub events: &'a [Event],
    /// Lines that carried the event marker but did not parse.
    pub garbled: &'a [String],
    /// Every fault injected.
    pub faults: &'a [Fault],
    /// The resource's log of accepted logged writes.
    pub log: &'a [Result<LogEntry, String>],
    /// How each worker ended.
    pub exits: &'a [WorkerExit],
    /// When the workers were asked to stop.
    pub stop_requested: Micros,
    /// The run's bounds.
    pub bounds: &'a Bounds,
    /// The lease.
    pub lease: Duration,
    /// The permit steps' semaphore (`cluster` mode), as the coordinator found it once the
    /// workers were gone.
    pub permits: Option<&'a PermitsAtEnd>,
}

/// The permit steps' semaphore at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PermitsAtEnd {
    /// The permits it was set to.
    pub total: u64,
    /// The free permits read at the end, or why they could not be read.
    pub available: Result<u64, String>,
}

/// What the checker found, with the figures it measured on the way.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Every violation.
    pub violations: Vec<Violation>,
    /// Holders caught inside their sections by a pause or an outage that outlived the
    /// lease, by fault kind.
    pub cut_off: BTreeMap<FaultKind, CutOffHolders>,
    /// The longest time from the end of a fault to the next acquisition, per fault kind.
    pub reacquire_after: BTreeMap<FaultKind, Duration>,
}

/// The holders that faults of one kind cut off from Redis past their lease.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CutOffHolders {
    /// How many were caught inside their critical sections.
    pub caught: u32,
    /// How many of them were told (`lost()`, or a failed unlock).
    pub told: u32,
    /// The longest any of them took to be told, from the end of the fault.
    pub longest_to_tell: Duration,
}

impl Verdict {
    fn violation(&mut self, check: &'static str, detail: String) {
        self.violations.push(Violation { check, detail });
    }
}

/// Runs every check.
pub fn check(input: &CheckInput<'_>) -> Verdict {
    let mut all = acquisitions(input.events);
    mark_force_unlocked(&mut all, input.faults, &killed_at(input.exits));
    let mut verdict = Verdict::default();
    for garbled in input.garbled {
        verdict.violation("events_readable", garbled.clone());
    }
    tokens_are_unique(&all, &mut verdict);
    tokens_follow_acquisition_order(&all, &mut verdict);
    holders_never_overlap(&all, &mut verdict);
    resource_log_is_fenced(&all, input.log, &mut verdict);
    no_valid_holder_is_refused(&all, input, &mut verdict);
    cut_off_holders_are_told(&all, input, &mut verdict);
    force_unlocked_holders_are_told(&all, input, &mut verdict);
    reentries_after_a_force_unlock_tell(&all, &mut verdict);
    lost_locks_do_not_unlock(&all, &mut verdict);
    calls_return_in_time(input, &mut verdict);
    workers_keep_reporting(input, &mut verdict);
    sections_end(&all, input.exits, &mut verdict);
    lock_is_acquirable_after_faults(&all, input, &mut verdict);
    coordinator_acquires_last(&all, input, &mut verdict);
    workers_exit_cleanly(input.exits, &mut verdict);
    if let Some(permits) = input.permits {
        permits_are_counted(input.events, permits, &mut verdict);
    }
    verdict
}

/// The permit steps' semaphore never had more holders at once than permits, and every
/// permit is back at the end but those a killed worker may have kept.
///
/// A permit is certainly taken in Redis from the return of the acquire that took it to the
/// start of its release (less [`CLOCK_SLACK`] at both ends); those intervals may never
/// overlap more than `total` deep. At the end the free permits must be `total`, less the
/// permits of workers killed while holding one, less at most one per step whose outcome is
/// unknown (a worker killed inside an acquire or a release, or a call that failed: it may
/// or may not have counted).
fn permits_are_counted(events: &[Event], end: &PermitsAtEnd, verdict: &mut Verdict) {
    #[derive(Clone, Copy)]
    enum Step {
        Idle,
        Acquiring,
        Held(Micros),
        Releasing,
    }
    let mut steps: BTreeMap<WorkerId, Step> = BTreeMap::new();
    // (from, to): `to` is `None` for a permit its holder never gave back.
    let mut held: Vec<(Micros, Option<Micros>)> = Vec::new();
    let mut unknown = 0u64;
    for event in events {
        let step = steps.entry(event.worker).or_insert(Step::Idle);
        *step = match (&event.kind, *step) {
            (EventKind::PermitAcquiring, _) => Step::Acquiring,
            (EventKind::PermitTaken { call }, _) => Step::Held(call.ended()),
            (EventKind::PermitTimedOut { .. }, _) => Step::Idle,
            (EventKind::PermitAcquireFailed { .. }, _) => {
                unknown += 1;
                Step::Idle
            }
            (EventKind::PermitReleasing, Step::Held(since)) => {
                held.push((since, Some(event.at)));
                Step::Releasing
            }
            (EventKind::PermitReleased { error, .. }, _) => {
                unknown += u64::from(error.is_some());
                Step::Idle
            }
            (_, step) => step,
        };
    }
    let mut kept = 0u64;
    for step in steps.values() {
        match step {
            Step::Idle => {}
            Step::Acquiring | Step::Releasing => unknown += 1,
            Step::Held(since) => {
                held.push((*since, None));
                kept += 1;
            }
        }
    }
    // Most permits held at once: +1 where an interval starts, -1 where it ends (ends
    // first at equal times).
    let mut edges: Vec<(Micros, i64)> = Vec::new();
    for (from, to) in held {
        let from = from + CLOCK_SLACK;
        match to {
            Some(to) if to > from + CLOCK_SLACK => {
                edges.push((from, 1));
                edges.push((to - CLOCK_SLACK, -1));
            }
            Some(_) => {}
            None => edges.push((from, 1)),
        }
    }
    edges.sort();
    let (mut depth, mut deepest, mut deepest_at) = (0i64, 0i64, 0);
    for (at, change) in edges {
        depth += change;
        if depth > deepest {
            (deepest, deepest_at) = (depth, at);
        }
    }
    if deepest > i64::try_from(end.total).unwrap_or(i64::MAX) {
        verdict.violation(
            "permits_never_over_taken",
            format!(
                "{deepest} permits held at once at {deepest_at}, of {}",
                end.total
            ),
        );
    }
    let highest = end.total.saturating_sub(kept);
    let lowest = highest.saturating_sub(unknown);
    match &end.available {
        Ok(available) if (lowest..=highest).contains(available) => {}
        Ok(available) => verdict.violation(
            "no_permit_lost",
            format!(
                "{available} of {} permits free at the end; expected {lowest} to {highest} \
                 ({kept} kept by killed workers, {unknown} steps of unknown outcome)",
                end.total
            ),
        ),
        Err(error) => verdict.violation("no_permit_lost", format!("not read: {error}")),
    }
}

fn who(a: &Acquisition) -> String {
    if a.worker == COORDINATOR {
        format!("coordinator (token {})", a.token)
    } else {
        format!("worker {} acq {} (token {})", a.worker, a.acq, a.token)
    }
}

/// Every acquire draws its own token.
fn tokens_are_unique(all: &[Acquisition], verdict: &mut Verdict) {
    let mut seen: BTreeMap<u64, &Acquisition> = BTreeMap::new();
    for a in all {
        if let Some(first) = seen.insert(a.token, a) {
            verdict.violation(
                "tokens_unique",
                format!("{} and {} got the same token", who(first), who(a)),
            );
        }
    }
}

/// An acquire that began after another returned drew a greater token: the counter only
/// grows, across lock-server restarts too.
fn tokens_follow_acquisition_order(all: &[Acquisition], verdict: &mut Verdict) {
    let mut by_return: Vec<&Acquisition> = all.iter().collect();
    by_return.sort_by_key(|a| a.reported_at);
    let mut by_start: Vec<&Acquisition> = all.iter().collect();
    by_start.sort_by_key(|a| a.call.began);
    let mut returned = by_return.iter().peekable();
    let mut highest: Option<&Acquisition> = None;
    for b in by_start {
        while let Some(a) = returned.next_if(|a| a.reported_at < b.call.began) {
            if highest.map_or(true, |h| h.token < a.token) {
                highest = Some(a);
            }
        }
        if let Some(a) = highest {
            if a.token >= b.token {
                verdict.violation(
                    "tokens_follow_acquisition_order",
                    format!(
                        "{} began its acquire at {} after {} had been reported at {}",
                        who(b),
                        b.call.began,
                        who(a),
                        a.reported_at
                    ),
                );
            }
        }
    }
}

/// No acquire returned while an acquisition with a lower token could still hold the key:
/// mutual exclusion as long as the lease holds, which is what a guard's validity promises.
fn holders_never_overlap(all: &[Acquisition], verdict: &mut Verdict) {
    let mut by_token: Vec<&Acquisition> = all.iter().collect();
    by_token.sort_by_key(|a| a.token);
    let mut latest: Option<&Acquisition> = None;
    for b in by_token {
        if let Some(a) = latest {
            if b.call.ended() + CLOCK_SLACK < a.exclusive_until() {
                verdict.violation(
                    "mutual_exclusion",
                    format!(
                        "{} returned from its acquire at {}, {} ms before {} stopped being \
                         certain it held the lock (at {})",
                        who(b),
                        b.call.ended(),
                        (a.exclusive_until() - b.call.ended()) / 1000,
                        who(a),
                        a.exclusive_until()
                    ),
                );
            }
        }
        if latest.map_or(true, |a| b.exclusive_until() > a.exclusive_until()) {
            latest = Some(b);
        }
    }
}

/// The resource accepted writes in non-decreasing token order, each token's writes from
/// one acquisition that really drew it, and logged every write reported accepted.
fn resource_log_is_fenced(
    all: &[Acquisition],
    log: &[Result<LogEntry, String>],
    verdict: &mut Verdict,
) {
    let token_of: BTreeMap<(WorkerId, u64), u64> =
        all.iter().map(|a| ((a.worker, a.acq), a.token)).collect();
    let mut writer_of: BTreeMap<u64, (WorkerId, u64)> = BTreeMap::new();
    let mut logged: BTreeSet<(WorkerId, u64, u32)> = BTreeSet::new();
    let mut previous: Option<LogEntry> = None;
    for (position, entry) in log.iter().enumerate() {
        let entry = match entry {
            Ok(entry) => *entry,
            Err(text) => {
                verdict.violation("resource_log", format!("unreadable log entry `{text}`"));
                continue;
            }
        };
        if let Some(before) = previous {
            if entry.token < before.token {
                verdict.violation(
                    "stale_write_accepted",
                    format!(
                        "log entry {position}: token {} (worker {} acq {}) accepted after \
                         token {} (worker {} acq {})",
                        entry.token,
                        entry.worker,
                        entry.acq,
                        before.token,
                        before.worker,
                        before.acq
                    ),
                );
            }
        }
        previous = Some(entry);
        match token_of.get(&(entry.worker, entry.acq)) {
            Some(&token) if token == entry.token => {}
            other => verdict.violation(
                "resource_log",
                format!(
                    "log entry {position} claims token {} for worker {} acq {}, which drew {:?}",
                    entry.token, entry.worker, entry.acq, other
                ),
            ),
        }
        let writer = (entry.worker, entry.acq);
        if let Some(first) = writer_of.insert(entry.token, writer) {
            if first != writer {
                verdict.violation(
                    "resource_log",
                    format!(
                        "token {} written by worker {} acq {} and by worker {} acq {}",
                        entry.token, first.0, first.1, writer.0, writer.1
                    ),
                );
            }
        }
        logged.insert((entry.worker, entry.acq, entry.seq));
    }
    for a in all {
        for w in &a.writes {
            if w.via == WriteVia::Logged
                && w.accepted == Some(true)
                && !logged.contains(&(a.worker, a.acq, w.seq))
            {
                verdict.violation(
                    "resource_log",
                    format!(
                        "{} write {} reported accepted but not logged",
                        who(a),
                        w.seq
                    ),
                );
            }
        }
    }
}

/// When each killed worker died.
fn killed_at(exits: &[WorkerExit]) -> BTreeMap<WorkerId, Micros> {
    exits
        .iter()
        .filter_map(|exit| Some((exit.worker, exit.killed_at?)))
        .collect()
}

/// Marks the acquisitions a `force_unlock` fault may have deleted the key of: those whose
/// acquire returned before the fault ended and whose section had not ended when it began,
/// by a worker still alive then (a killed worker's section never ends).
fn mark_force_unlocked(
    all: &mut [Acquisition],
    faults: &[Fault],
    killed_at: &BTreeMap<WorkerId, Micros>,
) {
    for fault in faults
        .iter()
        .filter(|f| f.kind == FaultKind::ForceUnlock && f.hit)
    {
        for a in all.iter_mut().filter(|a| a.worker != COORDINATOR) {
            let open = a.end.as_ref().map_or(true, |end| end.at > fault.began);
            let alive = killed_at
                .get(&a.worker)
                .map_or(true, |&died| died > fault.began);
            if a.call.ended() < fault.ended && open && alive {
                a.force_unlocked = Some((fault.began, fault.ended));
            }
        }
    }
}

/// The acquisitions a force unlock certainly deleted under a running section: acquired
/// before it began, and still inside the section when it ended.
fn force_unlocked_victims(all: &[Acquisition]) -> impl Iterator<Item = (&Acquisition, Micros)> {
    all.iter().filter_map(|a| {
        let (began, ended) = a.force_unlocked?;
        let open = a.end.as_ref().map_or(true, |end| end.at > ended);
        (a.reported_at < began && open).then_some((a, ended))
    })
}

/// Whether a refused write of `a` that returned at `returned` after a force unlock could
/// not know of it yet: before its next renewal (the told bound after the fault), and
/// before any re-entry made after the fault returned.
fn unaware_of_force_unlock(a: &Acquisition, w: &WriteRecord, told: Micros) -> bool {
    let Some((began, ended)) = a.force_unlocked else {
        return false;
    };
    let reentered_before = a
        .reentries
        .iter()
        .any(|r| r.acquired && r.call.began > ended && r.call.ended() < w.call.began);
    w.call.ended() >= began && w.call.began <= ended + told && !reentered_before
}

mod liveness;
mod telling;
#[cfg(test)]
mod tests;

use liveness::{
    calls_return_in_time, coordinator_acquires_last, lock_is_acquirable_after_faults, sections_end,
    workers_exit_cleanly, workers_keep_reporting,
};
use telling::{
    cut_off_holders_are_told, force_unlocked_holders_are_told, lost_locks_do_not_unlock,
    no_valid_holder_is_refused, reentries_after_a_force_unlock_tell,
};
