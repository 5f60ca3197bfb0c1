//! The checks that the run kept moving: calls return within their bounds, workers keep
//! reporting and end their sections, the lock can be taken after the faults, and the
//! workers exit cleanly.

use super::*;
use crate::history::{overlap, pauses_by_worker};

/// Every call returned within its bound, not counting time the worker spent stopped.
pub(super) fn calls_return_in_time(input: &CheckInput<'_>, verdict: &mut Verdict) {
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
pub(super) fn workers_keep_reporting(input: &CheckInput<'_>, verdict: &mut Verdict) {
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
pub(super) fn sections_end(all: &[Acquisition], exits: &[WorkerExit], verdict: &mut Verdict) {
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
pub(super) fn lock_is_acquirable_after_faults(
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
                *longest = (*longest).max(crate::clock::duration(after));
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
pub(super) fn coordinator_acquires_last(
    all: &[Acquisition],
    input: &CheckInput<'_>,
    verdict: &mut Verdict,
) {
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
pub(super) fn workers_exit_cleanly(exits: &[WorkerExit], verdict: &mut Verdict) {
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
