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
use super::history::{acquisitions, overlap, pauses_by_worker, Acquisition, WriteRecord};
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

/// A write refused while its writer still held the lock means a greater token was used
/// while this holder's key lived: exclusion or the counter broke. A holder whose key a
/// force unlock deleted cannot know before its next renewal, or a re-entry: its refusals
/// until then are what a force unlock costs, not a broken promise.
fn no_valid_holder_is_refused(all: &[Acquisition], input: &CheckInput<'_>, verdict: &mut Verdict) {
    let told = micros(input.lease + input.bounds.told);
    for a in all {
        for w in &a.writes {
            if w.accepted == Some(false) && w.valid_after && !unaware_of_force_unlock(a, w, told) {
                verdict.violation(
                    "valid_holder_refused",
                    format!(
                        "{} write {} ({:?}) refused at {} while its guard was valid",
                        who(a),
                        w.seq,
                        w.via,
                        w.call.ended()
                    ),
                );
            }
        }
    }
}

/// Every holder cut off from Redis past its lease (its process paused, or the lock server
/// down) and still inside its section at its deadline learned that it lost the lock, soon
/// after the fault ended: its `lost()` resolved, or its `unlock()` failed with `LockLost`.
/// Its deadline certainly passed during the fault: the last renewal it could have had began
/// before the fault. (During an outage a holder keeps running, and may finish its section
/// before its deadline; its unlock then fails to reach Redis, which is no loss to report.)
fn cut_off_holders_are_told(all: &[Acquisition], input: &CheckInput<'_>, verdict: &mut Verdict) {
    let told_bound = micros(input.bounds.told);
    let killed_at = killed_at(input.exits);
    for fault in input.faults.iter().filter(|f| f.cut_off > input.lease) {
        let caught = all.iter().filter(|a| {
            let open_at = |at: Micros| a.end.as_ref().map_or(true, |end| end.at > at);
            a.worker != COORDINATOR
                && fault.worker.map_or(true, |worker| worker == a.worker)
                && a.reported_at < fault.began
                && open_at(fault.began)
                && open_at(a.valid_until)
        });
        for a in caught {
            let told = match (&a.end, &a.unlock) {
                (Some(end), _) if end.lost.is_some() => Some(end.at),
                (Some(end), Some((UnlockOutcome::LockLost(_), _))) => Some(end.at),
                _ => None,
            };
            let died = killed_at.get(&a.worker).copied().unwrap_or(Micros::MAX);
            if told.is_none() && died <= a.valid_until.max(fault.ended) + told_bound {
                // Killed by a later fault before it was due to be told: nothing to check.
                continue;
            }
            let tally = verdict.cut_off.entry(fault.kind).or_default();
            tally.caught += 1;
            let Some(at) = told else {
                verdict.violation(
                    "cut_off_holder_told",
                    format!(
                        "{} was cut off by a {} for {} ms (lease {} ms) and never told: \
                         section end {:?}, unlock {:?}",
                        who(a),
                        fault.kind.name(),
                        fault.cut_off.as_millis(),
                        input.lease.as_millis(),
                        a.end,
                        a.unlock
                    ),
                );
                continue;
            };
            tally.told += 1;
            let after = (at - fault.ended).max(0);
            tally.longest_to_tell = tally.longest_to_tell.max(super::clock::duration(after));
            if after > told_bound {
                verdict.violation(
                    "cut_off_holder_told",
                    format!(
                        "{} was told {} ms after the {} ended",
                        who(a),
                        after / 1000,
                        fault.kind.name()
                    ),
                );
            }
        }
    }
}

/// Every holder whose key a force unlock deleted under its section learned it lost the
/// lock (`lost()`, or `unlock()` failing with `LockLost`): at its next renewal, a third of
/// a lease later, or at once when it re-entered first; within the lease and the told bound.
fn force_unlocked_holders_are_told(
    all: &[Acquisition],
    input: &CheckInput<'_>,
    verdict: &mut Verdict,
) {
    let bound = micros(input.lease + input.bounds.told);
    let killed_at = killed_at(input.exits);
    for (a, ended) in force_unlocked_victims(all) {
        let told = match (&a.end, &a.unlock) {
            (Some(end), _) if end.lost.is_some() => Some(end.at),
            (Some(_), Some((UnlockOutcome::LockLost(_), call))) => Some(call.ended()),
            _ => None,
        };
        let died = killed_at.get(&a.worker).copied().unwrap_or(Micros::MAX);
        if told.is_none() && died <= ended + bound {
            // Killed by a later fault before it was due to be told: nothing to check.
            continue;
        }
        let tally = verdict.cut_off.entry(FaultKind::ForceUnlock).or_default();
        tally.caught += 1;
        let Some(at) = told else {
            verdict.violation(
                "force_unlocked_holder_told",
                format!(
                    "{} held the lock when it was force-unlocked and was never told:                      section end {:?}, unlock {:?}",
                    who(a),
                    a.end,
                    a.unlock
                ),
            );
            continue;
        };
        tally.told += 1;
        let after = (at - ended).max(0);
        tally.longest_to_tell = tally.longest_to_tell.max(super::clock::duration(after));
        if after > bound {
            verdict.violation(
                "force_unlocked_holder_told",
                format!(
                    "{} was told {} ms after the force unlock",
                    who(a),
                    after / 1000
                ),
            );
        }
    }
}

/// A re-entry made after the key was force-unlocked finds no field of its owner: Redis
/// makes a new one, and the outer guard must be lost by the time the re-entry returns.
fn reentries_after_a_force_unlock_tell(all: &[Acquisition], verdict: &mut Verdict) {
    for (a, ended) in force_unlocked_victims(all) {
        for r in &a.reentries {
            if r.acquired && r.call.began > ended && !r.outer_lost {
                verdict.violation(
                    "reentry_hides_loss",
                    format!(
                        "{} re-entered at {} after the force unlock and its outer guard                          still looked valid",
                        who(a),
                        r.call.began
                    ),
                );
            }
        }
    }
}

/// Once `lost()` fired, `unlock()` reports the loss and touches nothing.
///
/// (A section that merely ended after its deadline may still unlock: a renewal sent before
/// the deadline and confirmed after it moves the deadline on, and it proves the key kept
/// this owner's field all along.)
fn lost_locks_do_not_unlock(all: &[Acquisition], verdict: &mut Verdict) {
    for a in all {
        let (Some(end), Some((outcome, _))) = (&a.end, &a.unlock) else {
            continue;
        };
        if end.lost.is_some() && !matches!(outcome, UnlockOutcome::LockLost(_)) {
            verdict.violation(
                "lost_lock_unlock",
                format!(
                    "{} was lost ({:?}) but its unlock returned {outcome}",
                    who(a),
                    end.lost
                ),
            );
        }
    }
}

/// Every call returned within its bound, not counting time the worker spent stopped.
fn calls_return_in_time(input: &CheckInput<'_>, verdict: &mut Verdict) {
    let pauses = pauses_by_worker(input.faults);
    let b = input.bounds;
    for event in input.events {
        let (what, call, bound) = match &event.kind {
            EventKind::Acquired { call, .. }
            | EventKind::AcquireTimedOut { call }
            | EventKind::AcquireFailed { call, .. } => ("acquire", call, b.acquire),
            EventKind::Wrote { call, .. } | EventKind::WriteFailed { call, .. } => {
                ("write", call, b.write)
            }
            EventKind::Unlocked { call, .. } => ("unlock", call, b.unlock),
            _ => continue,
        };
        let stopped = overlap(
            call.began,
            call.ended(),
            pauses.get(&event.worker).map_or(&[][..], Vec::as_slice),
        );
        let running = call.took - stopped;
        if running > micros(bound) {
            verdict.violation(
                "call_bound",
                format!(
                    "worker {}: {what} call began at {} took {} ms (bound {} ms)",
                    event.worker,
                    call.began,
                    running / 1000,
                    bound.as_millis()
                ),
            );
        }
    }
}

/// No live worker fell silent: a hang inside a call, or a stuck loop, shows as a gap.
fn workers_keep_reporting(input: &CheckInput<'_>, verdict: &mut Verdict) {
    let pauses = pauses_by_worker(input.faults);
    let silence = micros(input.bounds.silence);
    let mut last_seen: BTreeMap<WorkerId, Micros> = BTreeMap::new();
    let check_gap = |worker: WorkerId, from: Micros, to: Micros, verdict: &mut Verdict| {
        let stopped = overlap(from, to, pauses.get(&worker).map_or(&[][..], Vec::as_slice));
        if to - from - stopped > silence {
            verdict.violation(
                "worker_silent",
                format!(
                    "worker {worker} reported nothing from {from} to {to} ({} ms running)",
                    (to - from - stopped) / 1000
                ),
            );
        }
    };
    for event in input.events.iter().filter(|e| e.worker != COORDINATOR) {
        if let Some(previous) = last_seen.insert(event.worker, event.at) {
            check_gap(event.worker, previous, event.at, verdict);
        }
    }
    for exit in input.exits {
        let Some(&last) = last_seen.get(&exit.worker) else {
            continue;
        };
        let until = exit.killed_at.unwrap_or(input.stop_requested);
        if until > last {
            check_gap(exit.worker, last, until, verdict);
        }
    }
}

/// Every section of a worker that was not killed ended and was unlocked.
fn sections_end(all: &[Acquisition], exits: &[WorkerExit], verdict: &mut Verdict) {
    let killed: BTreeSet<WorkerId> = exits
        .iter()
        .filter(|e| e.killed)
        .map(|e| e.worker)
        .collect();
    for a in all.iter().filter(|a| !killed.contains(&a.worker)) {
        if a.end.is_none() || a.unlock.is_none() {
            verdict.violation(
                "section_ended",
                format!(
                    "{} never finished: end {:?}, unlock {:?}",
                    who(a),
                    a.end,
                    a.unlock
                ),
            );
        }
    }
}

/// After every fault, someone took the lock again within the bound.
fn lock_is_acquirable_after_faults(
    all: &[Acquisition],
    input: &CheckInput<'_>,
    verdict: &mut Verdict,
) {
    let mut returns: Vec<Micros> = all.iter().map(|a| a.call.ended()).collect();
    returns.sort_unstable();
    for fault in input.faults {
        let next = returns.partition_point(|&at| at < fault.ended);
        let after = returns.get(next).map(|&at| at - fault.ended);
        match after {
            Some(after) if after <= micros(input.bounds.reacquire) => {
                let longest = verdict
                    .reacquire_after
                    .entry(fault.kind)
                    .or_insert(Duration::ZERO);
                *longest = (*longest).max(super::clock::duration(after));
            }
            _ => verdict.violation(
                "acquirable_after_fault",
                format!(
                    "nobody acquired within {} ms of the {} ending at {} ({}); next \
                     acquisition after {:?} ms",
                    input.bounds.reacquire.as_millis(),
                    fault.kind.name(),
                    fault.ended,
                    fault.detail,
                    after.map(|us| us / 1000)
                ),
            ),
        }
    }
}

/// At the end, with every worker gone, the coordinator took the lock within the bound,
/// with a token above every other, and the resource accepted its write.
fn coordinator_acquires_last(all: &[Acquisition], input: &CheckInput<'_>, verdict: &mut Verdict) {
    let Some(last) = all.iter().find(|a| a.worker == COORDINATOR) else {
        let failure = input
            .events
            .iter()
            .filter(|e| e.worker == COORDINATOR)
            .map(|e| e.to_string())
            .collect::<Vec<_>>();
        verdict.violation(
            "final_acquisition",
            format!("the coordinator could not take the lock at the end: {failure:?}"),
        );
        return;
    };
    if let Some(higher) = all
        .iter()
        .filter(|a| a.worker != COORDINATOR && a.token >= last.token)
        .map(who)
        .next()
    {
        verdict.violation(
            "final_acquisition",
            format!("{} is not above {higher}", who(last)),
        );
    }
    if micros(input.bounds.reacquire) < last.call.took {
        verdict.violation(
            "final_acquisition",
            format!("the coordinator waited {} ms", last.call.took / 1000),
        );
    }
    if !last.writes.iter().all(|w| w.accepted == Some(true)) || last.writes.is_empty() {
        verdict.violation(
            "final_acquisition",
            format!(
                "the coordinator's write was not accepted: {:?}",
                last.writes
            ),
        );
    }
    if !matches!(last.unlock, Some((UnlockOutcome::Released, _))) {
        verdict.violation(
            "final_acquisition",
            format!("the coordinator's unlock: {:?}", last.unlock),
        );
    }
}

/// Workers that were not killed stopped when asked, in time, with success.
fn workers_exit_cleanly(exits: &[WorkerExit], verdict: &mut Verdict) {
    for exit in exits.iter().filter(|e| !e.killed && !e.clean) {
        verdict.violation(
            "worker_exit",
            format!(
                "worker {} {} with {}; stderr: {:?}",
                exit.worker,
                if exit.in_time {
                    "exited"
                } else {
                    "did not stop in time and was killed"
                },
                exit.status,
                exit.stderr_tail
            ),
        );
    }
}

/// The checker is only worth its silence if it speaks up: each broken promise, written as a
/// made-up history, must be caught by its check.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Timing;
    use crate::events::Call;

    const MS: Micros = 1_000;
    const LEASE: Micros = 1_000 * MS;

    /// A history under construction, in microseconds from an arbitrary start.
    #[derive(Default)]
    struct Story {
        events: Vec<Event>,
        faults: Vec<Fault>,
        log: Vec<Result<LogEntry, String>>,
        workers: BTreeSet<WorkerId>,
        /// Workers killed, and when.
        killed: BTreeMap<WorkerId, Micros>,
        stop_requested: Micros,
    }

    impl Story {
        fn event(&mut self, at: Micros, worker: WorkerId, kind: EventKind) -> &mut Self {
            if worker != COORDINATOR {
                self.workers.insert(worker);
            }
            self.events.push(Event { at, worker, kind });
            self
        }

        fn acquired(&mut self, worker: WorkerId, acq: u64, token: u64, at: Micros) -> &mut Self {
            let call = Call {
                began: at - MS,
                took: MS,
            };
            self.event(
                at,
                worker,
                EventKind::Acquired {
                    acq,
                    token,
                    call,
                    valid_until: at + LEASE - 20 * MS,
                },
            )
        }

        fn wrote(
            &mut self,
            worker: WorkerId,
            acq: u64,
            token: u64,
            at: Micros,
            accepted: bool,
        ) -> &mut Self {
            if accepted {
                self.log.push(Ok(LogEntry {
                    token,
                    worker,
                    acq,
                    seq: 0,
                }));
            }
            self.event(
                at,
                worker,
                EventKind::Wrote {
                    acq,
                    token,
                    seq: 0,
                    via: WriteVia::Logged,
                    after_loss: false,
                    accepted,
                    valid_after: true,
                    call: Call {
                        began: at - MS,
                        took: MS,
                    },
                    valid_until: at + LEASE - 20 * MS,
                },
            )
        }

        fn released(
            &mut self,
            worker: WorkerId,
            acq: u64,
            at: Micros,
            valid_until: Micros,
            outcome: UnlockOutcome,
        ) -> &mut Self {
            self.event(at, worker, EventKind::Releasing { acq, valid_until });
            self.event(
                at + MS,
                worker,
                EventKind::Unlocked {
                    acq,
                    outcome,
                    call: Call {
                        began: at,
                        took: MS,
                    },
                },
            )
        }

        /// A section that goes by the book: acquire at `from`, one accepted write, release
        /// at `to`.
        fn section(
            &mut self,
            worker: WorkerId,
            acq: u64,
            token: u64,
            from: Micros,
            to: Micros,
        ) -> &mut Self {
            self.acquired(worker, acq, token, from)
                .wrote(worker, acq, token, from + MS, true)
                .released(worker, acq, to, to + LEASE / 2, UnlockOutcome::Released)
        }

        /// Workers asked to stop at `at`, and the coordinator's last acquisition after.
        fn finish(&mut self, at: Micros, last_token: u64) -> &mut Self {
            self.stop_requested = at;
            for worker in self.workers.clone() {
                self.event(at + MS, worker, EventKind::Stopped);
            }
            self.section(COORDINATOR, 1, last_token, at + 10 * MS, at + 20 * MS)
        }

        fn checks_failed(&self) -> BTreeSet<&'static str> {
            let exits: Vec<WorkerExit> = self
                .workers
                .iter()
                .map(|&worker| WorkerExit {
                    worker,
                    killed: self.killed.contains_key(&worker),
                    killed_at: self.killed.get(&worker).copied(),
                    clean: true,
                    in_time: true,
                    status: "exit status: 0".to_string(),
                    stderr_tail: Vec::new(),
                })
                .collect();
            let verdict = check(&CheckInput {
                events: &self.events,
                garbled: &[],
                faults: &self.faults,
                log: &self.log,
                exits: &exits,
                stop_requested: self.stop_requested,
                bounds: &Bounds::of(&Timing::default()),
                lease: Duration::from_micros(LEASE as u64),
                permits: None,
            });
            verdict.violations.iter().map(|v| v.check).collect()
        }
    }

    fn names(checks: &[&'static str]) -> BTreeSet<&'static str> {
        checks.iter().copied().collect()
    }

    #[test]
    fn a_history_by_the_book_passes() {
        let mut story = Story::default();
        story
            .section(1, 1, 1, 0, 100 * MS)
            .section(2, 1, 2, 150 * MS, 250 * MS)
            .section(1, 2, 3, 300 * MS, 400 * MS)
            .finish(500 * MS, 4);
        assert_eq!(story.checks_failed(), names(&[]));
    }

    #[test]
    fn a_token_handed_out_twice_is_caught() {
        let mut story = Story::default();
        story
            .section(1, 1, 1, 0, 100 * MS)
            .section(2, 1, 1, 150 * MS, 250 * MS)
            .finish(500 * MS, 4);
        assert!(story.checks_failed().contains("tokens_unique"));
        assert!(story
            .checks_failed()
            .contains("tokens_follow_acquisition_order"));
    }

    #[test]
    fn an_acquire_while_another_holder_is_valid_is_caught() {
        let mut story = Story::default();
        // Worker 1 is paused with its lease still running when worker 2 gets in.
        story
            .acquired(1, 1, 1, 0)
            .section(2, 1, 2, 300 * MS, 400 * MS)
            .released(
                1,
                1,
                2_000 * MS,
                980 * MS,
                UnlockOutcome::LockLost("Expired".into()),
            )
            .finish(3_000 * MS, 3);
        assert_eq!(story.checks_failed(), names(&["mutual_exclusion"]));
    }

    #[test]
    fn a_stale_write_the_resource_accepted_is_caught() {
        let mut story = Story::default();
        story
            .section(1, 1, 1, 0, 100 * MS)
            .section(2, 1, 2, 150 * MS, 250 * MS);
        story.log.push(Ok(LogEntry {
            token: 1,
            worker: 1,
            acq: 1,
            seq: 9,
        }));
        story.finish(500 * MS, 3);
        assert_eq!(story.checks_failed(), names(&["stale_write_accepted"]));
    }

    #[test]
    fn a_valid_holder_refused_is_caught() {
        let mut story = Story::default();
        story
            .acquired(1, 1, 1, 0)
            .wrote(1, 1, 1, 10 * MS, false)
            .released(1, 1, 100 * MS, 600 * MS, UnlockOutcome::Released)
            .finish(500 * MS, 2);
        assert_eq!(story.checks_failed(), names(&["valid_holder_refused"]));
    }

    /// Worker 1 stopped from 10 ms to 2,510 ms: well past a 1 s lease.
    fn pause_of_worker_1() -> Fault {
        Fault {
            kind: FaultKind::PauseHolder,
            began: 10 * MS,
            ended: 2_510 * MS,
            worker: Some(1),
            hit: true,
            cut_off: Duration::from_millis(2_500),
            detail: String::new(),
        }
    }

    #[test]
    fn a_paused_holder_never_told_is_caught() {
        let mut story = Story::default();
        story.faults.push(pause_of_worker_1());
        story
            .acquired(1, 1, 1, 0)
            .section(2, 1, 2, 1_200 * MS, 1_300 * MS)
            // Not renewed while stopped: its deadline stayed where the acquire put it.
            .released(1, 1, 2_520 * MS, 980 * MS, UnlockOutcome::Released)
            .finish(3_000 * MS, 3);
        assert_eq!(story.checks_failed(), names(&["cut_off_holder_told"]));
    }

    #[test]
    fn a_paused_holder_told_late_is_caught() {
        let mut story = Story::default();
        story.faults.push(pause_of_worker_1());
        story.acquired(1, 1, 1, 0).event(
            12_000 * MS,
            1,
            EventKind::Lost {
                acq: 1,
                reason: "Expired".into(),
                valid_until: 980 * MS,
            },
        );
        story
            .event(
                12_001 * MS,
                1,
                EventKind::Unlocked {
                    acq: 1,
                    outcome: UnlockOutcome::LockLost("Expired".into()),
                    call: Call {
                        began: 12_000 * MS,
                        took: 0,
                    },
                },
            )
            .finish(13_000 * MS, 2);
        assert_eq!(story.checks_failed(), names(&["cut_off_holder_told"]));
    }

    #[test]
    fn a_hung_call_and_a_silent_worker_are_caught() {
        let mut story = Story::default();
        story.section(1, 1, 1, 0, 100 * MS).event(
            60_000 * MS,
            1,
            EventKind::AcquireTimedOut {
                call: Call {
                    began: 110 * MS,
                    took: 59_890 * MS,
                },
            },
        );
        story.finish(61_000 * MS, 2);
        assert_eq!(
            story.checks_failed(),
            names(&["call_bound", "worker_silent"])
        );
    }

    #[test]
    fn a_lock_nobody_takes_again_after_a_fault_is_caught() {
        let mut story = Story::default();
        story.faults.push(Fault {
            kind: FaultKind::RestartLockServer,
            began: 200 * MS,
            ended: 300 * MS,
            worker: None,
            hit: true,
            cut_off: Duration::from_millis(100),
            detail: String::new(),
        });
        story.section(1, 1, 1, 0, 100 * MS);
        for n in 1..10 {
            story.event(
                n * 2_100 * MS,
                1,
                EventKind::AcquireTimedOut {
                    call: Call {
                        began: n * 2_100 * MS - 2_000 * MS,
                        took: 2_000 * MS,
                    },
                },
            );
        }
        story.finish(30_000 * MS, 2);
        assert_eq!(story.checks_failed(), names(&["acquirable_after_fault"]));
    }

    #[test]
    fn a_lost_lock_that_unlocks_is_caught() {
        let mut story = Story::default();
        story.acquired(1, 1, 1, 0).event(
            990 * MS,
            1,
            EventKind::Lost {
                acq: 1,
                reason: "Expired".into(),
                valid_until: 980 * MS,
            },
        );
        story
            .event(
                991 * MS,
                1,
                EventKind::Unlocked {
                    acq: 1,
                    outcome: UnlockOutcome::Released,
                    call: Call {
                        began: 990 * MS,
                        took: MS,
                    },
                },
            )
            .finish(2_000 * MS, 2);
        assert_eq!(story.checks_failed(), names(&["lost_lock_unlock"]));
    }

    fn force_unlock_of_worker_1(at: Micros) -> Fault {
        Fault {
            kind: FaultKind::ForceUnlock,
            began: at,
            ended: at + 5 * MS,
            worker: Some(1),
            hit: true,
            cut_off: Duration::ZERO,
            detail: String::new(),
        }
    }

    fn reentered(story: &mut Story, at: Micros, outer_lost: bool) {
        story.event(
            at,
            1,
            EventKind::Reentered {
                acq: 1,
                acquired: true,
                outer_lost,
                call: Call {
                    began: at - MS,
                    took: MS,
                },
            },
        );
    }

    /// Worker 1 holds, its key is force-unlocked at 20 ms, worker 2 takes the lock at 30 ms
    /// and writes; worker 1's next write (unaware) is refused; worker 1 re-enters at 60 ms.
    fn force_unlocked_story(outer_lost: bool) -> Story {
        let mut story = Story::default();
        story.acquired(1, 1, 1, 10 * MS);
        story.faults.push(force_unlock_of_worker_1(20 * MS));
        story.section(2, 1, 2, 30 * MS, 50 * MS);
        story.wrote(1, 1, 1, 40 * MS, false);
        reentered(&mut story, 60 * MS, outer_lost);
        story
    }

    #[test]
    fn a_force_unlocked_holder_told_at_its_reentry_passes() {
        let mut story = force_unlocked_story(true);
        story.event(
            61 * MS,
            1,
            EventKind::Lost {
                acq: 1,
                reason: "Released".to_string(),
                valid_until: 61 * MS,
            },
        );
        story.event(
            63 * MS,
            1,
            EventKind::Unlocked {
                acq: 1,
                outcome: UnlockOutcome::LockLost("Released".to_string()),
                call: Call {
                    began: 62 * MS,
                    took: MS,
                },
            },
        );
        story.finish(500 * MS, 3);
        assert_eq!(story.checks_failed(), names(&[]));
    }

    #[test]
    fn a_worker_killed_inside_its_section_is_no_victim_of_a_later_force_unlock() {
        let mut story = Story::default();
        story.acquired(1, 1, 1, 10 * MS);
        story.killed.insert(1, 20 * MS);
        story.section(2, 1, 2, 2 * LEASE, 2 * LEASE + 100 * MS);
        let mut fault = force_unlock_of_worker_1(3 * LEASE);
        fault.worker = Some(3);
        story.faults.push(fault);
        // Worker 3 is the one it hit, and is told at its unlock.
        story.acquired(3, 1, 3, 3 * LEASE - 10 * MS).released(
            3,
            1,
            3 * LEASE + 100 * MS,
            3 * LEASE + 100 * MS,
            UnlockOutcome::LockLost("Released".to_string()),
        );
        story.finish(4 * LEASE, 4);
        assert!(
            !story.checks_failed().contains("force_unlocked_holder_told"),
            "{:?}",
            story.checks_failed()
        );
    }

    #[test]
    fn a_reentry_that_hides_a_force_unlock_is_caught() {
        let mut story = force_unlocked_story(false);
        // Still "valid" after the re-entry: its next write is refused, and it unlocks.
        story.wrote(1, 1, 1, 80 * MS, false);
        story.released(1, 1, 90 * MS, 90 * MS + LEASE, UnlockOutcome::Released);
        story.finish(500 * MS, 3);
        assert_eq!(
            story.checks_failed(),
            names(&[
                "reentry_hides_loss",
                "valid_holder_refused",
                "force_unlocked_holder_told"
            ])
        );
    }

    /// The violations `permits_are_counted` finds in `steps` (worker, at, kind), for a
    /// semaphore of `total` permits with `available` free at the end.
    fn permit_violations(
        steps: &[(WorkerId, Micros, EventKind)],
        total: u64,
        available: u64,
    ) -> Vec<&'static str> {
        let events: Vec<Event> = steps
            .iter()
            .map(|(worker, at, kind)| Event {
                at: *at,
                worker: *worker,
                kind: kind.clone(),
            })
            .collect();
        let mut verdict = Verdict::default();
        let end = PermitsAtEnd {
            total,
            available: Ok(available),
        };
        permits_are_counted(&events, &end, &mut verdict);
        verdict.violations.iter().map(|v| v.check).collect()
    }

    /// A permit taken by `worker` from `from` to `to` (its release reported at once).
    fn permit_held(
        worker: WorkerId,
        from: Micros,
        to: Micros,
    ) -> Vec<(WorkerId, Micros, EventKind)> {
        let call = |at: Micros| Call {
            began: at - MS,
            took: MS,
        };
        vec![
            (worker, from - 2 * MS, EventKind::PermitAcquiring),
            (worker, from, EventKind::PermitTaken { call: call(from) }),
            (worker, to, EventKind::PermitReleasing),
            (
                worker,
                to + MS,
                EventKind::PermitReleased {
                    call: call(to + MS),
                    error: None,
                },
            ),
        ]
    }

    #[test]
    fn permits_held_at_once_are_counted_against_the_total() {
        let mut steps = permit_held(1, 100 * MS, 200 * MS);
        steps.extend(permit_held(2, 150 * MS, 250 * MS));
        assert!(permit_violations(&steps, 2, 2).is_empty());
        assert_eq!(
            permit_violations(&steps, 1, 1),
            ["permits_never_over_taken"]
        );
        // One after the other (within the clocks' slack) is fine with one permit.
        let mut steps = permit_held(1, 100 * MS, 200 * MS);
        steps.extend(permit_held(2, 200 * MS, 300 * MS));
        assert!(permit_violations(&steps, 1, 1).is_empty());
    }

    #[test]
    fn every_permit_is_back_at_the_end_but_those_a_killed_worker_kept() {
        let mut steps = permit_held(1, 100 * MS, 200 * MS);
        assert!(permit_violations(&steps, 2, 2).is_empty());
        assert_eq!(permit_violations(&steps, 2, 1), ["no_permit_lost"]);
        assert_eq!(permit_violations(&steps, 2, 3), ["no_permit_lost"]);
        // Worker 2 was killed holding one: one fewer, exactly.
        steps.extend(permit_held(2, 300 * MS, 400 * MS).into_iter().take(2));
        assert!(permit_violations(&steps, 2, 1).is_empty());
        assert_eq!(permit_violations(&steps, 2, 2), ["no_permit_lost"]);
        // Worker 3 was killed inside an acquire: it may have taken one, or not.
        steps.push((3, 500 * MS, EventKind::PermitAcquiring));
        assert!(permit_violations(&steps, 2, 1).is_empty());
        assert!(permit_violations(&steps, 2, 0).is_empty());
    }
}
