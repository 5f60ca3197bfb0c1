//! Checks on caller input, done before anything is sent to Redis.

use std::time::Duration;

use crate::error::{Error, Result};

/// The longest lease or timeout accepted: ten years in milliseconds.
///
/// Redis rejects a PEXPIRE whose deadline overflows its 64-bit millisecond clock, and
/// `Instant + Duration` panics on overflow; ten years is far past any sane lease and far
/// from both limits.
pub(crate) const MAX_MILLIS: u64 = 10 * 365 * 24 * 60 * 60 * 1000;

/// A lease as Redis takes it: whole milliseconds, at least 1, at most [`MAX_MILLIS`].
pub(crate) fn lease_millis(what: &str, lease: Duration) -> Result<u64> {
    if lease < Duration::from_millis(1) {
        return Err(Error::invalid(format!(
            "{what} must be at least 1 ms, got {lease:?}"
        )));
    }
    let millis = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
    if millis > MAX_MILLIS {
        return Err(Error::invalid(format!(
            "{what} must be at most {MAX_MILLIS} ms (ten years), got {lease:?}"
        )));
    }
    Ok(millis)
}

/// A duration that must be positive and may be long, such as a timeout.
pub(crate) fn positive(what: &str, value: Duration) -> Result<Duration> {
    if value.is_zero() {
        return Err(Error::invalid(format!("{what} must be greater than zero")));
    }
    lease_millis(what, value)?;
    Ok(value)
}

/// A lock name: any non-empty string. Redis keys are binary-safe, so nothing else is
/// forbidden; names containing `{` keep their own hash tag, as in Redisson.
pub(crate) fn lock_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid("lock name must not be empty"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_whole_positive_milliseconds_within_ten_years() {
        assert_eq!(lease_millis("lease", Duration::from_millis(1)).unwrap(), 1);
        assert_eq!(
            lease_millis("lease", Duration::from_secs(30)).unwrap(),
            30_000
        );
        assert!(lease_millis("lease", Duration::ZERO).is_err());
        assert!(lease_millis("lease", Duration::from_micros(999)).is_err());
        assert!(lease_millis("lease", Duration::MAX).is_err());
        assert!(lease_millis("lease", Duration::from_millis(MAX_MILLIS + 1)).is_err());
    }

    #[test]
    fn names_must_not_be_empty() {
        assert!(lock_name("").unwrap_err().is_invalid_argument());
        assert!(lock_name("order:1001").is_ok());
    }
}
