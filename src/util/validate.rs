//! Checks on caller input, done before anything is sent to Redis: every duration, size and
//! name a caller can pass has a documented range, and anything outside it is
//! [`Error::InvalidArgument`].

use std::fmt::Debug;
use std::time::Duration;

use crate::error::{Error, Result};

/// The longest lease or timeout accepted: ten years in milliseconds.
///
/// Redis rejects a PEXPIRE whose deadline overflows its 64-bit millisecond clock, and
/// `Instant + Duration` panics on overflow; ten years is far past any sane lease and far
/// from both limits.
pub(crate) const MAX_MILLIS: u64 = 10 * 365 * 24 * 60 * 60 * 1000;

/// The shortest lease accepted. A lease must outlast the drift allowance (2 ms plus 1 %,
/// see `hold::drift`) and a round trip, or the guard would be lost before it is returned.
pub(crate) const MIN_LEASE: Duration = Duration::from_millis(10);

/// The longest lock name accepted, in bytes. Redis takes keys of up to 512 MB, but a name
/// that long is a bug, and sending it would time out rather than fail clearly.
pub(crate) const MAX_NAME_BYTES: usize = 64 * 1024;

/// A lease as Redis takes it: whole milliseconds, from [`MIN_LEASE`] to [`MAX_MILLIS`].
pub(crate) fn lease_millis(what: &str, lease: Duration) -> Result<u64> {
    if lease < MIN_LEASE {
        return Err(Error::invalid(format!(
            "{what} must be at least {MIN_LEASE:?} (shorter ones are spent by the clock-drift \
             allowance and a round trip before the lock could be used), got {lease:?}"
        )));
    }
    millis(what, lease)
}

/// A duration in whole milliseconds, at most [`MAX_MILLIS`].
fn millis(what: &str, value: Duration) -> Result<u64> {
    let millis = crate::util::time::millis(value);
    if millis > MAX_MILLIS {
        return Err(Error::invalid(format!(
            "{what} must be at most {MAX_MILLIS} ms (ten years), got {value:?}"
        )));
    }
    Ok(millis)
}

/// A duration that must be positive and may be long, such as a node timeout.
pub(crate) fn positive(what: &str, value: Duration) -> Result<Duration> {
    if value < Duration::from_millis(1) {
        return Err(Error::invalid(format!(
            "{what} must be at least 1 ms, got {value:?}"
        )));
    }
    millis(what, value)?;
    Ok(value)
}

/// A duration or a count within `min..=max`.
pub(crate) fn within<T: PartialOrd + Debug>(what: &str, value: T, min: T, max: T) -> Result<()> {
    if value < min || value > max {
        return Err(Error::invalid(format!(
            "{what} must be from {min:?} to {max:?}, got {value:?}"
        )));
    }
    Ok(())
}

/// A lock name: non-empty and at most [`MAX_NAME_BYTES`]. Redis keys are binary-safe, so
/// nothing else is forbidden; names containing `{` keep their own hash tag, as in Redisson.
pub(crate) fn lock_name(name: &str) -> Result<()> {
    self::name("lock", name)
}

/// The name of a `what` ("lock", "semaphore"): non-empty and at most [`MAX_NAME_BYTES`].
pub(crate) fn name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(format!("{what} name must not be empty")));
    }
    if name.len() > MAX_NAME_BYTES {
        return key_length(&format!("{what} name"), name);
    }
    Ok(())
}

/// A Redis key given by the caller (a fenced write's key, a key prefix): at most
/// [`MAX_NAME_BYTES`].
pub(crate) fn key_length(what: &str, key: &str) -> Result<()> {
    if key.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(format!(
            "{what} must be at most {MAX_NAME_BYTES} bytes, got {} bytes",
            key.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_whole_milliseconds_from_ten_ms_to_ten_years() {
        assert_eq!(lease_millis("lease", MIN_LEASE).unwrap(), 10);
        assert_eq!(
            lease_millis("lease", Duration::from_secs(30)).unwrap(),
            30_000
        );
        assert!(lease_millis("lease", Duration::ZERO).is_err());
        assert!(lease_millis("lease", Duration::from_millis(1)).is_err());
        assert!(lease_millis("lease", Duration::from_millis(9)).is_err());
        assert!(lease_millis("lease", Duration::MAX).is_err());
        assert!(lease_millis("lease", Duration::from_millis(MAX_MILLIS + 1)).is_err());
    }

    #[test]
    fn names_are_non_empty_and_bounded() {
        assert!(lock_name("").unwrap_err().is_invalid_argument());
        assert!(lock_name("order:1001").is_ok());
        assert!(lock_name(&"n".repeat(MAX_NAME_BYTES)).is_ok());
        let err = lock_name(&"n".repeat(MAX_NAME_BYTES + 1)).unwrap_err();
        assert!(err.to_string().contains("65536"), "{err}");
    }

    #[test]
    fn ranges_name_the_setting_and_its_bounds() {
        let err = within("pool_size", usize::MAX, 2, 1024).unwrap_err();
        assert!(err.is_invalid_argument());
        assert!(
            err.to_string().contains("pool_size must be from 2 to 1024"),
            "{err}"
        );
        assert!(within(
            "ping_interval",
            Duration::from_secs(1),
            Duration::from_millis(100),
            Duration::from_secs(3600)
        )
        .is_ok());
    }
}
