//! The interop scenarios, one module per primitive, in one test binary (one link, and
//! one process for a filter such as `interop/redisson/run fair::`). Each test starts its own
//! redis-server and JVMs; `interop/redisson/run` builds the Java driver first.

/// Microseconds as milliseconds, the unit the run's figures are printed in.
fn ms(micros: i64) -> f64 {
    micros as f64 / 1000.0
}

mod count_down_latch;
mod expirable_semaphore;
mod fair;
mod fenced;
mod read_write_lock;
mod read_write_lock_holds;
mod rlock;
mod rlock_cluster;
mod semaphore;
