//! The lock kinds and synchronizers beside the reentrant lock: fair locks, read-write locks,
//! semaphores, expirable semaphores, count-down latches and fenced locks.
//!
//! One test binary for these files (each a module), so that the suite links a few
//! binaries rather than one per file. TESTING.md says what each file proves.

mod count_down_latch;
mod expirable_semaphore;
mod fair_dead_waiters;
mod fair_foreign_deadlines;
mod fair_heartbeat;
mod fair_leaving_the_queue;
mod fair_no_leftovers;
mod fair_order;
mod fenced;
mod read_write_lock;
mod read_write_lock_acl;
mod read_write_lock_leases;
mod retried_unlock;
mod semaphore;
