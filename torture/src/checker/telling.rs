//! The checks that a holder is told when it lost its lock, and only then: a valid holder
//! is never refused, a cut-off or force-unlocked holder hears of it within its bound, and
//! a lost lock's unlock says so.

use super::*;

/// A write refused while its writer still held the lock means a greater token was used
/// while this holder's key lived: exclusion or the counter broke. A holder whose key a
/// force unlock deleted cannot know before its next renewal, or a re-entry: its refusals
/// until then are what a force unlock costs, not a broken promise.
pub(super) fn no_valid_holder_is_refused(
    all: &[Acquisition],
    input: &CheckInput<'_>,
    verdict: &mut Verdict,
) {
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
pub(super) fn cut_off_holders_are_told(
    all: &[Acquisition],
    input: &CheckInput<'_>,
    verdict: &mut Verdict,
) {
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
            tally.longest_to_tell = tally.longest_to_tell.max(crate::clock::duration(after));
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
pub(super) fn force_unlocked_holders_are_told(
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
        tally.longest_to_tell = tally.longest_to_tell.max(crate::clock::duration(after));
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
pub(super) fn reentries_after_a_force_unlock_tell(all: &[Acquisition], verdict: &mut Verdict) {
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
pub(super) fn lost_locks_do_not_unlock(all: &[Acquisition], verdict: &mut Verdict) {
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
