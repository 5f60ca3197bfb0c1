//! What a hold's lease is: how it is kept ([`Lease`]), what one request applies of it
//! ([`Applied`]), what an acquire asks for ([`Terms`]), and the clock-drift allowance
//! ([`drift`]) every validity deadline subtracts.

use std::time::Duration;

use tokio::time::Instant;

use crate::util::time::millis;

/// The allowance for the Redis server's clock running faster than ours, as in the Redlock
/// algorithm: 1 % of the lease plus 2 ms.
pub(crate) fn drift(lease_ms: u64) -> Duration {
    Duration::from_millis(lease_ms / 100 + 2)
}

/// The lease one request applies to a hold's key: the hold's own, shortened where the
/// hold's maximum hold time ends sooner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    pub(crate) ms: u64,
    /// The maximum hold time shortened it: once this lease runs out, the hold ends for good.
    pub(crate) capped: bool,
}

impl Applied {
    /// `lease_ms`, cut short so that, applied at `at`, it ends by `cap` at the latest.
    pub(crate) fn within(lease_ms: u64, cap: Option<Instant>, at: Instant) -> Applied {
        let left = cap.map_or(u64::MAX, |cap| millis(cap.saturating_duration_since(at)));
        let capped = left < lease_ms;
        Applied {
            // At least 1 ms: PEXPIRE 0 would delete the key, which is the unlock's job.
            ms: if capped { left.max(1) } else { lease_ms },
            capped,
        }
    }

    /// Whether a renewal with this lease would end before the drift allowance: nothing is
    /// left to renew.
    pub(crate) fn is_spent(self) -> bool {
        Duration::from_millis(self.ms) <= drift(self.ms)
    }

    /// The local validity deadline of this lease applied by a request sent at `started`.
    pub(super) fn deadline(self, started: Instant) -> Instant {
        started + Duration::from_millis(self.ms).saturating_sub(drift(self.ms))
    }
}

/// How a hold's lease is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// Renewed by the watchdog with the client's watchdog timeout.
    Watchdog(u64),
    /// A fixed lease in milliseconds, never renewed.
    Fixed(u64),
}

impl Lease {
    pub(crate) fn millis(self) -> u64 {
        match self {
            Lease::Watchdog(ms) | Lease::Fixed(ms) => ms,
        }
    }
}

/// What an acquire asks of the hold it joins or starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Terms {
    pub(crate) lease: Lease,
    /// When the hold must end, whatever the watchdog: acquire start + the maximum hold time.
    pub(crate) max_until: Option<Instant>,
}
