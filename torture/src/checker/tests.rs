//! The checker is only worth its silence if it speaks up: each broken promise, written as a
//! made-up history, must be caught by its check.

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
fn permit_held(worker: WorkerId, from: Micros, to: Micros) -> Vec<(WorkerId, Micros, EventKind)> {
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
