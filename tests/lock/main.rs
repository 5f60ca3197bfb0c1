//! The lock itself, and keeping it: its layout in Redis, mutual exclusion, a client's life,
//! waiting, errors, batching, the script cache, the watchdog and the maximum hold time,
//! cancellation, and code generic over lock kinds.
//!
//! One test binary for these files (each a module), so that the suite links a few
//! binaries rather than one per file. TESTING.md says what each file proves.

mod batching;
mod cancellation;
mod errors;
mod eviction_policy;
mod exclusion;
mod generic_locks;
mod layout;
mod lifecycle;
mod max_hold;
mod script_cache;
mod send_sync;
mod wait_registry;
mod waiting;
mod watchdog;
