//! What this client holds, kept locally: one [`Hold`] per (lock key, owner), shared by
//! that owner's reentrant guards, in the registry [`Holds`] that the watchdog renews from.
//!
//! A hold keeps a local validity deadline on the monotonic clock: the start of the last
//! confirmed acquire or renewal, plus the lease, minus a clock-drift allowance ([`drift`]).
//! Past it the lock may already have expired in Redis, so the guard must assume it lost.
//!
//! This layer talks to nobody: the lock engine adds and releases holds, the background
//! services renew and check them.

mod hold;
mod lease;
mod registry;
mod watch_list;

pub(crate) use hold::{Hold, Renewal};
pub(crate) use lease::{drift, Applied, Lease, Terms};
pub(crate) use registry::{HoldId, Holds};
