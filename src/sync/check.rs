//! Checks on the arguments of the synchronizers, done before anything is sent to Redis:
//! out of range is [`Error::InvalidArgument`].

use std::time::Duration;

use crate::error::{Error, Result};
use crate::protocol::scripts::PERMITS_RANGE;
use crate::util::validate::lease_millis;
pub(crate) use crate::util::validate::name;

/// The most permits a semaphore holds, or one call takes, gives back or adds: Redisson
/// reads a semaphore's count as a Java `int`.
pub(crate) const MAX_PERMITS: u64 = *PERMITS_RANGE.end() as u64;

/// The largest count a latch takes: Redisson's `long`, Redis' integers.
pub(crate) const MAX_COUNT: u64 = i64::MAX as u64;

/// Permits one call takes or gives back: from 1 to [`MAX_PERMITS`].
pub(crate) fn permits(what: &str, permits: u64) -> Result<u64> {
    if permits == 0 || permits > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "{what} must be from 1 to {MAX_PERMITS} permits, got {permits}"
        )));
    }
    Ok(permits)
}

/// The permits a semaphore is set to: from 0 (closed) to [`MAX_PERMITS`].
pub(crate) fn permits_to_set(permits: u64) -> Result<u64> {
    if permits > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "a semaphore holds at most {MAX_PERMITS} permits (a Java int, as Redisson reads \
             it), got {permits}"
        )));
    }
    Ok(permits)
}

/// Permits added (negative: taken away): not 0, at most [`MAX_PERMITS`] either way.
pub(crate) fn permits_added(permits: i64) -> Result<i64> {
    if permits == 0 || permits.unsigned_abs() > MAX_PERMITS {
        return Err(Error::invalid(format!(
            "permits added must be from -{MAX_PERMITS} to {MAX_PERMITS} and not 0, got {permits}"
        )));
    }
    Ok(permits)
}

/// A latch's count: from 0 to [`MAX_COUNT`].
pub(crate) fn count(count: u64) -> Result<u64> {
    if count > MAX_COUNT {
        return Err(Error::invalid(format!(
            "a latch counts from at most {MAX_COUNT} (a Redis integer, a Java long), got {count}"
        )));
    }
    Ok(count)
}

/// A permit's lease: from 10 ms to ten years, in whole milliseconds.
pub(crate) fn lease(lease: Duration) -> Result<u64> {
    lease_millis("a permit's lease", lease)
}

/// The 16 bytes a permit id spells in 32 hex digits (either case), as Redisson writes it.
pub(crate) fn permit_id(id: &str) -> Result<[u8; 16]> {
    // Checked digit by digit first: `from_str_radix` would also take a leading `+`.
    let digits = id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit());
    match u128::from_str_radix(id, 16) {
        Ok(value) if digits => Ok(value.to_be_bytes()),
        _ => {
            let shown: String = id.chars().take(40).collect();
            Err(Error::invalid(format!(
                "a permit id is 32 hex digits (16 bytes), got `{shown}`"
            )))
        }
    }
}

/// `bytes` in lowercase hex: a permit's id as Redisson shows it (`ByteBufUtil.hexDump`).
pub(crate) fn hex(bytes: &[u8; 16]) -> String {
    format!("{:032x}", u128::from_be_bytes(*bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::validate::MAX_NAME_BYTES;

    #[test]
    fn permits_are_positive_java_ints() {
        assert!(permits("acquire", 0).unwrap_err().is_invalid_argument());
        assert_eq!(permits("acquire", 1).unwrap(), 1);
        assert_eq!(permits("acquire", 2_147_483_647).unwrap(), 2_147_483_647);
        assert!(permits("acquire", 2_147_483_648).is_err());
        assert_eq!(permits_to_set(0).unwrap(), 0);
        assert!(permits_to_set(1 << 31).is_err());
        assert!(permits_added(0).is_err());
        assert_eq!(permits_added(-5).unwrap(), -5);
        assert!(permits_added(i64::MIN).is_err());
        assert!(count(u64::MAX).is_err());
        assert_eq!(count(i64::MAX as u64).unwrap(), i64::MAX as u64);
    }

    #[test]
    fn permit_ids_are_32_hex_digits() {
        let id = permit_id("00ff10AB00ff10ab00ff10ab00ff10ab").unwrap();
        assert_eq!(id[1], 0xff);
        assert_eq!(hex(&id), "00ff10ab00ff10ab00ff10ab00ff10ab");
        for bad in [
            "",
            "00",
            "zz".repeat(16).as_str(),
            &"0".repeat(33),
            "é".repeat(16).as_str(),
        ] {
            assert!(permit_id(bad).unwrap_err().is_invalid_argument(), "{bad}");
        }
    }

    #[test]
    fn names_are_non_empty_and_bounded() {
        assert!(name("semaphore", "").is_err());
        assert!(name("semaphore", &"n".repeat(MAX_NAME_BYTES + 1)).is_err());
        assert!(name("semaphore", "db:pool").is_ok());
    }
}
