//! The one clock every process of a run reads: the wall clock in microseconds.
//!
//! Events from different processes are compared by time (was this worker inside its
//! critical section when it was paused? did that acquire come after this lease ran out?),
//! so they need a clock shared by all of them. `std::time::Instant` is the machine's
//! monotonic clock but has no value that can cross a process boundary; the wall clock can.
//! It is only stepped by an administrator or an NTP jump, which a run on one machine over
//! minutes does not meet in practice.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch, on the wall clock.
pub type Micros = i64;

/// Now, on the shared clock.
pub fn now() -> Micros {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    i64::try_from(since_epoch.as_micros()).unwrap_or(i64::MAX)
}

/// The shared-clock time of `at`, an instant of this process's monotonic clock (such as a
/// guard's `valid_until()`).
///
/// The two clocks are read back to back; a pair read across a preemption is read again, so
/// that the error stays within microseconds rather than a scheduler's time slice.
pub fn shared_time_of(at: Instant) -> Micros {
    let mut best: Option<(Duration, Instant, Micros)> = None;
    for _ in 0..5 {
        let before = Instant::now();
        let wall = now();
        let spread = before.elapsed();
        if best.map_or(true, |(tightest, _, _)| spread < tightest) {
            best = Some((spread, before, wall));
        }
        if spread < Duration::from_micros(50) {
            break;
        }
    }
    let (_, mono, wall) = best.expect("at least one reading");
    if at >= mono {
        wall + micros(at - mono)
    } else {
        wall - micros(mono - at)
    }
}

/// A duration in whole microseconds.
pub fn micros(d: Duration) -> Micros {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A count of microseconds as a duration (negative counts as zero).
pub fn duration(us: Micros) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}
