//! Small utilities every layer may use, and which use nothing of the crate but its errors:
//! futures that finish after their caller left ([`detach`]), a client's way to shutdown
//! ([`lifecycle`]), argument checks ([`validate`]), time conversions ([`time`]),
//! poison-tolerant locks ([`poison`]) and the metrics the crate reports ([`metrics`], and
//! per lock handle [`lock_metrics`]).

pub(crate) mod detach;
pub(crate) mod lifecycle;
pub(crate) mod lock_metrics;
pub(crate) mod metrics;
pub(crate) mod poison;
pub(crate) mod time;
pub(crate) mod validate;
