//! What the crate reports through the [`metrics`](https://docs.rs/metrics/0.24) facade, with
//! the cargo feature `metrics`: the one place that names the metrics and their labels.
//! Without the feature every function here is empty and the `metrics` crate is not linked.
//!
//! Labels are bounded: a lock kind, an outcome, a reason, a source or a lock's `class` (see
//! [`lock_metrics`](super::lock_metrics): the metrics of one lock carry it), never a lock
//! name or an owner. Gauges are per process: every client of the process adds to the same
//! ones.
//! The names, their meaning and an alert worth having are in the
//! [`operations`](crate::operations) module docs.

// Without the feature, the names and the functions' arguments are unused: they stay, so
// that the docs list every metric and the callers are the same either way.
#![cfg_attr(not(feature = "metrics"), allow(dead_code, unused_variables))]

/// Counter: acquire calls ended, by `kind`, `outcome` (see [`AcquireOutcome`]) and `class`; for a
/// semaphore, its permits; for a latch, a wait for it to open.
pub(crate) const ACQUIRES: &str = "rlock_acquires_total";
/// Histogram, seconds: from the call to its end (the wait), by `kind`, `outcome` and `class`.
pub(crate) const ACQUIRE_WAIT: &str = "rlock_acquire_wait_seconds";
/// Histogram, seconds: from an owner's first acquire to its last release, by `kind` and
/// `class`.
pub(crate) const HOLD: &str = "rlock_hold_seconds";
/// Counter: releases, by `kind`, `class` and `outcome`: `freed`, `still_held` (re-entered),
/// `lost` (the lock was gone), `failed` (Redis could not be reached).
pub(crate) const RELEASES: &str = "rlock_releases_total";
/// Counter: locks the watchdog renewed, by `outcome`: `renewed`, `not_held` (gone: lost).
pub(crate) const RENEWALS: &str = "rlock_renewals_total";
/// Counter: renewal calls that failed (Redis unreachable, or replicas did not
/// acknowledge): the locks in them were not renewed this round.
pub(crate) const RENEWAL_FAILURES: &str = "rlock_renewal_failures_total";
/// Counter: holds lost, by `reason` (`LostReason` in snake case) and `class`.
pub(crate) const LOST: &str = "rlock_locks_lost_total";
/// Gauge: holds this process has (one per owner and lock, however often re-entered), by
/// `class`.
pub(crate) const HELD: &str = "rlock_held_locks";
/// Gauge: calls waiting for a lock after a first busy try, by `class`.
pub(crate) const WAITING: &str = "rlock_waiting_tasks";
/// Gauge: channels this process is subscribed to for unlock messages.
pub(crate) const CHANNELS: &str = "rlock_subscribed_channels";
/// Counter: waiters woken, by `source` (see [`WakeUp`]).
pub(crate) const WAKEUPS: &str = "rlock_wakeups_total";
/// Counter: channels subscribed again after their connection dropped or their slot moved.
pub(crate) const RESUBSCRIPTIONS: &str = "rlock_resubscriptions_total";
/// Counter: lock handles whose class was past the client's `max_lock_classes`, counted
/// under `other` instead.
pub(crate) const CLASSES_FOLDED: &str = "rlock_lock_classes_folded_total";
/// Counter: replica sync checks (an acquire's, or a renewal round's), by `outcome`:
/// `acknowledged`, `not_acknowledged` (replicas connected, none acknowledged in time: the
/// write does not count), `failed` (`WAIT` itself failed).
pub(crate) const REPLICA_SYNC: &str = "rlock_replica_sync_total";

/// How an acquire call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireOutcome {
    Acquired,
    /// The wait ran out (or `try_lock` found it busy).
    TimedOut,
    Failed,
    /// The caller dropped the future.
    Cancelled,
}

impl AcquireOutcome {
    /// Every outcome's label, in the order of the variants: for the series made at zero.
    pub(super) const LABELS: [&'static str; 4] = ["acquired", "timed_out", "failed", "cancelled"];
}

/// What woke a waiter, the `source` of [`WAKEUPS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WakeUp {
    /// An unlock message.
    Message,
    /// A subscription confirmed again after a gap in which messages were lost.
    Reconnect,
    /// A fair waiter's heartbeat found its turn had come.
    Heartbeat,
    /// No message came within the holder's TTL (or the one-second re-check of a lock
    /// without one): a re-check. Many of these beside few `Message`s mean lost messages.
    TtlBound,
    /// No message came before the caller's own deadline (`try_lock_for`): its last
    /// re-check. Counted apart from `TtlBound`, since a busy lock makes many of these on a
    /// healthy system.
    Deadline,
}

impl WakeUp {
    /// Every source's label, in the order of the variants: for the series made at zero.
    const LABELS: [&'static str; 5] =
        ["message", "reconnect", "heartbeat", "ttl_bound", "deadline"];

    fn label(self) -> &'static str {
        Self::LABELS[self as usize]
    }
}

// The label values the callers pass as text, listed here so that every series can be made
// at zero (see `describe`); the lock kinds' own `kind` labels come from their table, above
// this layer, through `lock_metrics::Classes::new`. `tests/metrics/` checks that whatever
// a walk through every kind emits was among them.

/// The `kind` of the acquires of a group (`groups`' quorums) or a synchronizer
/// (`protocol::names::SyncKind`), beside the lock kinds' (a `RedLock`'s or `MultiLock`'s
/// releases and holds count under its locks' kinds).
pub(super) const OTHER_ACQUIRE_KINDS: [&str; 5] = [
    "redlock",
    "multilock",
    "semaphore",
    "expirable_semaphore",
    "latch",
];
/// The `outcome` of [`RELEASES`], as `locks::guard` names them.
pub(super) const RELEASE_OUTCOMES: [&str; 4] = ["freed", "still_held", "lost", "failed"];
/// The `outcome` of [`RENEWALS`] (see [`renewals`]).
const RENEWAL_OUTCOMES: [&str; 2] = ["renewed", "not_held"];
/// The `reason` of [`LOST`]: `LostReason`'s labels but `shut_down`, which is not counted.
pub(super) const LOST_REASONS: [&str; 5] = [
    "expired",
    "released",
    "connection_lost",
    "quorum_lost",
    "max_hold_reached",
];
/// The `outcome` of [`REPLICA_SYNC`], as `transport::replica_sync` names them.
const REPLICA_SYNC_OUTCOMES: [&str; 3] = ["acknowledged", "not_acknowledged", "failed"];

/// Describes every metric to the installed recorder, and makes every counter and gauge, for
/// every label value the crate emits, at zero: once per process, when its first client is
/// built (a later client leaves them as they are).
///
/// Made at zero because a counter that first appears at 1 shows no increase: Prometheus'
/// `increase(rlock_locks_lost_total[5m]) > 0` would miss a process's first lost lock.
/// Histograms are left to their first sample: an empty one has no rate to miss, and would
/// add a line per bucket for every kind and outcome.
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        static DESCRIBED: std::sync::Once = std::sync::Once::new();
        DESCRIBED.call_once(|| {
            use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
            describe_counter!(ACQUIRES, "Lock acquire calls ended, by kind and outcome");
            describe_histogram!(
                ACQUIRE_WAIT,
                Unit::Seconds,
                "Time from an acquire call to its end, by kind and outcome"
            );
            describe_histogram!(
                HOLD,
                Unit::Seconds,
                "Time from an owner's first acquire of a lock to its last release"
            );
            describe_counter!(RELEASES, "Lock releases, by kind and outcome");
            describe_counter!(RENEWALS, "Locks the watchdog renewed, by outcome");
            describe_counter!(RENEWAL_FAILURES, "Watchdog renewal calls that failed");
            describe_counter!(LOST, "Holds lost, by reason");
            describe_gauge!(HELD, "Locks held by this process");
            describe_gauge!(WAITING, "Calls waiting for a lock");
            describe_gauge!(CHANNELS, "Unlock channels this process is subscribed to");
            describe_counter!(WAKEUPS, "Waiters woken, by source");
            describe_counter!(RESUBSCRIPTIONS, "Unlock channels subscribed again");
            describe_counter!(REPLICA_SYNC, "Replica sync WAITs, by outcome");
            describe_counter!(
                CLASSES_FOLDED,
                "Lock handles counted under the class `other`, past max_lock_classes"
            );
            at_zero();
        });
    }
}

/// Makes every counter and gauge, for every label value, by adding nothing to it: a
/// recorder creates a series at its first use, and adding zero cannot undo what another
/// client counted.
#[cfg(feature = "metrics")]
fn at_zero() {
    use metrics::{counter, gauge};
    for outcome in RENEWAL_OUTCOMES {
        counter!(RENEWALS, "outcome" => outcome).increment(0);
    }
    counter!(RENEWAL_FAILURES).increment(0);
    for source in WakeUp::LABELS {
        counter!(WAKEUPS, "source" => source).increment(0);
    }
    counter!(RESUBSCRIPTIONS).increment(0);
    for outcome in REPLICA_SYNC_OUTCOMES {
        counter!(REPLICA_SYNC, "outcome" => outcome).increment(0);
    }
    counter!(CLASSES_FOLDED).increment(0);
    gauge!(CHANNELS).increment(0.0);
}

/// When a timed operation started: `None` without the feature, which spares the clock
/// read on every lock call.
pub(crate) fn start() -> Option<std::time::Instant> {
    cfg!(feature = "metrics").then(std::time::Instant::now)
}

/// One renewal call came back: `renewed` locks renewed, `not_held` found gone.
pub(crate) fn renewals(renewed: u64, not_held: u64) {
    #[cfg(feature = "metrics")]
    {
        metrics::counter!(RENEWALS, "outcome" => "renewed").increment(renewed);
        metrics::counter!(RENEWALS, "outcome" => "not_held").increment(not_held);
    }
}

/// One renewal call failed.
pub(crate) fn renewal_failed() {
    #[cfg(feature = "metrics")]
    metrics::counter!(RENEWAL_FAILURES).increment(1);
}

/// The process listens on one channel more (`1.0`) or fewer (`-1.0`).
pub(crate) fn channels(change: f64) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(CHANNELS).increment(change);
}

/// `count` waiters were woken by `source`.
pub(crate) fn woken(source: WakeUp, count: u64) {
    #[cfg(feature = "metrics")]
    metrics::counter!(WAKEUPS, "source" => source.label()).increment(count);
}

/// A channel was subscribed again.
pub(crate) fn resubscribed() {
    #[cfg(feature = "metrics")]
    metrics::counter!(RESUBSCRIPTIONS).increment(1);
}

/// A replica sync check ended with `outcome` (see [`REPLICA_SYNC`]).
pub(crate) fn replica_sync(outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(REPLICA_SYNC, "outcome" => outcome).increment(1);
}
