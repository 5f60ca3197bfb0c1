//! Durations as Redis takes them (whole milliseconds) and monotonic instants as atomics
//! store them (nanoseconds since one process-wide origin).

use std::sync::LazyLock;
use std::time::Duration;

use tokio::time::Instant;

/// The origin of every instant stored as nanoseconds: the first time one is stored.
static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

/// `duration` in whole milliseconds, saturating at `u64::MAX` (which no Redis command
/// takes: the callers bound their durations well below it).
pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `at` as nanoseconds since the process-wide origin, for an atomic; saturating.
pub(crate) fn to_nanos(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX)
}

/// The instant [`to_nanos`] turned into `nanos`.
pub(crate) fn from_nanos(nanos: u64) -> Instant {
    *EPOCH + Duration::from_nanos(nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_survive_their_nanoseconds() {
        let now = Instant::now();
        assert_eq!(from_nanos(to_nanos(now)), now);
        assert_eq!(millis(Duration::from_micros(2_999)), 2);
        assert_eq!(millis(Duration::MAX), u64::MAX);
    }
}
