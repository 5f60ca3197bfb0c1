//! The report of a run: what happened, in figures, and every violation. Printed as a table
//! for people and as one `TORTURE_SUMMARY {...}` line of JSON for scripts.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use super::backend::Mode;
use super::checker::{CutOffHolders, Verdict, Violation};
use super::clock::{duration, Micros};
use super::config::RunConfig;
use super::events::{Event, EventKind, UnlockOutcome, COORDINATOR};
use super::faults::{Fault, FaultKind};
use super::history::{overlap, pauses_by_worker};

/// One broken promise usually shows many times over: the first few of each check tell
/// the story.
const VIOLATIONS_SHOWN_PER_CHECK: usize = 5;

/// Injections of one fault kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCount {
    /// How many were injected.
    pub injected: u32,
    /// How many hit what they aimed at.
    pub hit: u32,
}

/// The permit steps of a `cluster` run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PermitSteps {
    /// Permits taken.
    pub taken: u64,
    /// Acquires that waited their whole bound.
    pub timeouts: u64,
    /// Acquires and releases that failed with an error.
    pub errors: u64,
}

/// The figures and the verdict of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Which lock.
    pub mode: Mode,
    /// The seed, to repeat the schedule.
    pub seed: u64,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// Workers running at once.
    pub workers: usize,
    /// Workers started in all (killed ones were replaced).
    pub workers_started: u32,
    /// Critical sections entered by workers.
    pub sections: u64,
    /// Fenced writes the resource accepted.
    pub writes_accepted: u64,
    /// Fenced writes the resource refused (a stale token).
    pub writes_refused: u64,
    /// Stale writes made after the writer was told it lost the lock: refused, accepted
    /// (no newer holder had written yet).
    pub stale_writes: (u64, u64),
    /// Fenced writes that failed to reach the resource.
    pub writes_failed: u64,
    /// Acquires that waited their whole bound.
    pub acquire_timeouts: u64,
    /// Acquires that failed with an error.
    pub acquire_errors: u64,
    /// Sections ended by `lost()`, by reason.
    pub lost: BTreeMap<String, u64>,
    /// Unlocks that failed with `LockLost` at the end of a section `lost()` had not
    /// ended, by reason.
    pub unlock_lost: BTreeMap<String, u64>,
    /// Unlocks that failed otherwise.
    pub unlock_errors: u64,
    /// Re-entries inside sections: returned a guard, and of those, found the outer guard
    /// lost (the lock had left Redis before them).
    pub reentries: (u64, u64),
    /// Permit steps (`cluster` mode): permits taken, acquires that waited their whole
    /// bound, and calls (acquire or release) that failed with an error.
    pub permits: PermitSteps,
    /// Faults by kind.
    pub faults: BTreeMap<FaultKind, FaultCount>,
    /// Holders cut off from Redis past their lease, by the fault that did it.
    pub cut_off: BTreeMap<FaultKind, CutOffHolders>,
    /// The longest time from the end of a fault to the next acquisition, by kind.
    pub reacquire_after: BTreeMap<FaultKind, Duration>,
    /// The longest call of each kind (`acquire`, `write`, `unlock`), time stopped excluded.
    pub longest_call: BTreeMap<&'static str, Duration>,
    /// Entries in the resource's log.
    pub log_entries: usize,
    /// Every violation.
    pub violations: Vec<Violation>,
}

impl Report {
    /// Gathers the figures of a run.
    pub fn new(
        config: &RunConfig,
        elapsed: Duration,
        events: &[Event],
        faults: &[Fault],
        log_entries: usize,
        verdict: Verdict,
    ) -> Report {
        let mut report = Report {
            mode: config.mode,
            seed: config.seed,
            elapsed,
            workers: config.workers,
            workers_started: 0,
            sections: 0,
            writes_accepted: 0,
            writes_refused: 0,
            stale_writes: (0, 0),
            writes_failed: 0,
            acquire_timeouts: 0,
            acquire_errors: 0,
            lost: BTreeMap::new(),
            unlock_lost: BTreeMap::new(),
            unlock_errors: 0,
            reentries: (0, 0),
            permits: PermitSteps::default(),
            faults: BTreeMap::new(),
            cut_off: verdict.cut_off,
            reacquire_after: verdict.reacquire_after,
            longest_call: BTreeMap::new(),
            log_entries,
            violations: verdict.violations,
        };
        for fault in faults {
            let count = report.faults.entry(fault.kind).or_default();
            count.injected += 1;
            count.hit += u32::from(fault.hit);
        }
        let pauses = pauses_by_worker(faults);
        let mut lost_acquisitions = std::collections::BTreeSet::new();
        for event in events.iter().filter(|e| e.worker != COORDINATOR) {
            let running = |began: Micros, took: Micros| {
                let stopped = overlap(
                    began,
                    began + took,
                    pauses.get(&event.worker).map_or(&[][..], Vec::as_slice),
                );
                duration(took - stopped)
            };
            let mut longest = |what: &'static str, began: Micros, took: Micros| {
                let entry = report.longest_call.entry(what).or_default();
                *entry = (*entry).max(running(began, took));
            };
            match &event.kind {
                EventKind::Started { .. } => report.workers_started += 1,
                EventKind::Acquired { call, .. } => {
                    report.sections += 1;
                    longest("acquire", call.began, call.took);
                }
                EventKind::AcquireTimedOut { call } => {
                    report.acquire_timeouts += 1;
                    longest("acquire", call.began, call.took);
                }
                EventKind::AcquireFailed { call, .. } => {
                    report.acquire_errors += 1;
                    longest("acquire", call.began, call.took);
                }
                EventKind::Wrote {
                    accepted,
                    after_loss,
                    call,
                    ..
                } => {
                    if *accepted {
                        report.writes_accepted += 1;
                    } else {
                        report.writes_refused += 1;
                    }
                    if *after_loss && *accepted {
                        report.stale_writes.1 += 1;
                    } else if *after_loss {
                        report.stale_writes.0 += 1;
                    }
                    longest("write", call.began, call.took);
                }
                EventKind::WriteFailed { call, .. } => {
                    report.writes_failed += 1;
                    longest("write", call.began, call.took);
                }
                EventKind::Lost { acq, reason, .. } => {
                    lost_acquisitions.insert((event.worker, *acq));
                    *report.lost.entry(reason.clone()).or_default() += 1;
                }
                EventKind::Unlocked { acq, outcome, call } => {
                    longest("unlock", call.began, call.took);
                    match outcome {
                        UnlockOutcome::Released => {}
                        UnlockOutcome::LockLost(reason) => {
                            if !lost_acquisitions.contains(&(event.worker, *acq)) {
                                *report.unlock_lost.entry(reason.clone()).or_default() += 1;
                            }
                        }
                        UnlockOutcome::Failed(_) => report.unlock_errors += 1,
                    }
                }
                EventKind::Reentered {
                    acquired,
                    outer_lost,
                    call,
                    ..
                } => {
                    longest("acquire", call.began, call.took);
                    if *acquired {
                        report.reentries.0 += 1;
                        report.reentries.1 += u64::from(*outer_lost);
                    }
                }
                EventKind::PermitTaken { call } => {
                    report.permits.taken += 1;
                    longest("permit acquire", call.began, call.took);
                }
                EventKind::PermitTimedOut { call } => {
                    report.permits.timeouts += 1;
                    longest("permit acquire", call.began, call.took);
                }
                EventKind::PermitAcquireFailed { call, .. } => {
                    report.permits.errors += 1;
                    longest("permit acquire", call.began, call.took);
                }
                EventKind::PermitReleased { call, error } => {
                    report.permits.errors += u64::from(error.is_some());
                    longest("permit release", call.began, call.took);
                }
                EventKind::Releasing { .. }
                | EventKind::Stopped
                | EventKind::PermitAcquiring
                | EventKind::PermitReleasing => {}
            }
        }
        report
    }

    /// The report as one line: `TORTURE_SUMMARY` and a JSON object.
    pub fn json_line(&self) -> String {
        let map = |pairs: Vec<(String, String)>| {
            let fields: Vec<String> = pairs
                .into_iter()
                .map(|(k, v)| format!("\"{k}\":{v}"))
                .collect();
            format!("{{{}}}", fields.join(","))
        };
        let ms = |d: &Duration| d.as_millis().to_string();
        let counts = |m: &BTreeMap<String, u64>| {
            map(m.iter().map(|(k, v)| (k.clone(), v.to_string())).collect())
        };
        let faults = map(self
            .faults
            .iter()
            .map(|(kind, count)| {
                let cut_off = self.cut_off.get(kind).copied().unwrap_or_default();
                let reacquire = self.reacquire_after.get(kind).map_or("null".into(), ms);
                let fields = vec![
                    ("injected".to_string(), count.injected.to_string()),
                    ("hit".to_string(), count.hit.to_string()),
                    ("holders_cut_off".to_string(), cut_off.caught.to_string()),
                    ("told".to_string(), cut_off.told.to_string()),
                    ("max_ms_to_tell".to_string(), ms(&cut_off.longest_to_tell)),
                    ("max_ms_to_reacquire".to_string(), reacquire),
                ];
                (kind.name().to_string(), map(fields))
            })
            .collect());
        let longest = map(self
            .longest_call
            .iter()
            .map(|(k, d)| (k.to_string(), ms(d)))
            .collect());
        let fields = vec![
            ("mode", format!("\"{}\"", self.mode.name())),
            ("seed", self.seed.to_string()),
            ("seconds", format!("{:.1}", self.elapsed.as_secs_f64())),
            ("workers", self.workers.to_string()),
            ("workers_started", self.workers_started.to_string()),
            ("critical_sections", self.sections.to_string()),
            ("writes_accepted", self.writes_accepted.to_string()),
            ("writes_refused", self.writes_refused.to_string()),
            ("stale_writes_refused", self.stale_writes.0.to_string()),
            ("stale_writes_accepted", self.stale_writes.1.to_string()),
            ("writes_failed", self.writes_failed.to_string()),
            ("acquire_timeouts", self.acquire_timeouts.to_string()),
            ("acquire_errors", self.acquire_errors.to_string()),
            ("lost", counts(&self.lost)),
            ("unlock_lock_lost", counts(&self.unlock_lost)),
            ("unlock_errors", self.unlock_errors.to_string()),
            ("reentries", self.reentries.0.to_string()),
            ("reentries_after_loss", self.reentries.1.to_string()),
            ("permits_taken", self.permits.taken.to_string()),
            ("permit_timeouts", self.permits.timeouts.to_string()),
            ("permit_errors", self.permits.errors.to_string()),
            ("faults", faults),
            ("longest_call_ms", longest),
            ("log_entries", self.log_entries.to_string()),
            ("violations", self.violations.len().to_string()),
        ];
        format!(
            "TORTURE_SUMMARY {}",
            map(fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect())
        )
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reasons = |m: &BTreeMap<String, u64>| {
            if m.is_empty() {
                return "none".to_string();
            }
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            f,
            "torture run: mode {}, seed {}, {:.1} s, {} workers ({} started)",
            self.mode.name(),
            self.seed,
            self.elapsed.as_secs_f64(),
            self.workers,
            self.workers_started
        )?;
        writeln!(f, "  critical sections        {}", self.sections)?;
        writeln!(
            f,
            "  fenced writes            {} accepted, {} refused (stale token), {} failed",
            self.writes_accepted, self.writes_refused, self.writes_failed
        )?;
        writeln!(
            f,
            "  stale writes after loss  {} refused, {} accepted (no newer holder had written)",
            self.stale_writes.0, self.stale_writes.1
        )?;
        writeln!(
            f,
            "  acquires without lock    {} waited out, {} errors",
            self.acquire_timeouts, self.acquire_errors
        )?;
        writeln!(f, "  lost() fired             {}", reasons(&self.lost))?;
        writeln!(
            f,
            "  unlock found it lost     {}; other unlock errors {}",
            reasons(&self.unlock_lost),
            self.unlock_errors
        )?;
        if self.mode.is_cluster() {
            writeln!(
                f,
                "  permit steps             {} permits taken, {} waited out, {} errors",
                self.permits.taken, self.permits.timeouts, self.permits.errors
            )?;
        }
        writeln!(
            f,
            "  re-entries               {} ({} found the outer guard lost)",
            self.reentries.0, self.reentries.1
        )?;
        writeln!(
            f,
            "  faults                     injected  hit  holders cut off past the lease: told  \
             max time to reacquire"
        )?;
        for (kind, count) in &self.faults {
            let reacquire = self
                .reacquire_after
                .get(kind)
                .map_or_else(|| "-".to_string(), |d| format!("{} ms", d.as_millis()));
            let told = match self.cut_off.get(kind) {
                Some(cut) => format!(
                    "{} of {} (at most {} ms after)",
                    cut.told,
                    cut.caught,
                    cut.longest_to_tell.as_millis()
                ),
                None => "-".to_string(),
            };
            writeln!(
                f,
                "    {:<24} {:>8} {:>4}  {told:<37} {reacquire}",
                kind.name(),
                count.injected,
                count.hit
            )?;
        }
        let longest: Vec<String> = self
            .longest_call
            .iter()
            .map(|(k, d)| format!("{k} {} ms", d.as_millis()))
            .collect();
        writeln!(f, "  longest calls            {}", longest.join(", "))?;
        writeln!(f, "  resource log entries     {}", self.log_entries)?;
        writeln!(f, "  violations = {}", self.violations.len())?;
        let mut by_check: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for v in &self.violations {
            by_check.entry(v.check).or_default().push(&v.detail);
        }
        for (check, details) in by_check {
            writeln!(f, "    {check}: {}", details.len())?;
            for detail in details.iter().take(VIOLATIONS_SHOWN_PER_CHECK) {
                writeln!(f, "      {detail}")?;
            }
            if details.len() > VIOLATIONS_SHOWN_PER_CHECK {
                writeln!(
                    f,
                    "      ... and {} more",
                    details.len() - VIOLATIONS_SHOWN_PER_CHECK
                )?;
            }
        }
        Ok(())
    }
}
