//! Small utilities every layer may use, and which use nothing of the crate but its errors:
//! futures that finish after their caller left ([`detach`]), argument checks
//! ([`validate`]), time conversions ([`time`]) and poison-tolerant locks ([`sync`]).

pub(crate) mod detach;
pub(crate) mod sync;
pub(crate) mod time;
pub(crate) mod validate;
