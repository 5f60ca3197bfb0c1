//! Lock groups over several masters (`RedLock`, `MultiLock`), and lock writes that wait for
//! replicas.
//!
//! One test binary for these files (each a module), so that the suite links a few
//! binaries rather than one per file. TESTING.md says what each file proves.

mod group_input;
mod multilock;
mod redlock_majority;
mod redlock_unreachable_masters;
mod replica_sync;
mod wait_registry;
