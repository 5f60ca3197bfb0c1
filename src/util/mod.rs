//! Small utilities every layer may use, and which use nothing of the crate but its errors:
//! futures that finish after their caller left ([`detach`]), argument checks
//! ([`validate`]), time conversions ([`time`]), poison-tolerant locks ([`sync`]) and the
//! metrics the crate reports ([`metrics`]).

pub(crate) mod detach;
pub(crate) mod lifecycle;
pub(crate) mod lock_metrics;
pub(crate) mod metrics;
pub(crate) mod poison;
pub(crate) mod time;
pub(crate) mod validate;
