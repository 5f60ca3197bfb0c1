//! Checks the scenarios share: the wake-up bound, a bounded await, and renewals seen from
//! outside.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::figures::figure;

/// The contract: a waiter on one side holds the lock (or the permits) within this
/// long after the other side began its unlock.
pub const WAKE_BOUND: Duration = Duration::from_millis(500);

/// Reports the figures of one series and checks them against [`WAKE_BOUND`].
///
/// # Panics
/// When a wake-up took longer.
pub fn report_wake_ups(name: &str, latencies: &[f64]) {
    for &latency in latencies {
        figure(name, latency);
    }
    let worst = latencies.iter().copied().fold(0.0, f64::max);
    assert!(
        worst < WAKE_BOUND.as_secs_f64() * 1000.0,
        "{name}: a wake-up took {worst:.1} ms (all: {latencies:?})"
    );
}

/// `f`, within `limit`.
///
/// # Panics
/// When it takes longer, naming `what`.
pub async fn within<T>(what: &str, limit: Duration, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {limit:?}"))
}

/// Samples `read` (a TTL) every 50 ms for `span` and returns how many times it went up (a
/// renewal).
///
/// # Panics
/// When it ever reads 0 or less: the lock gone, or without a lease.
pub async fn count_renewals<F, Fut>(span: Duration, mut read: F) -> usize
where
    F: FnMut() -> Fut,
    Fut: Future<Output = i64>,
{
    let end = Instant::now() + span;
    let mut last = read().await;
    let mut renewals = 0;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = read().await;
        assert!(now > 0, "the lock lost its lease: TTL {now}");
        renewals += usize::from(now > last);
        last = now;
    }
    renewals
}

/// The Rust side of the mutual-exclusion workload (the driver's `exclusive` op is the Java
/// side): `rounds` times, take `lock`; `INCR <counter>:inside` (anything but 1 is an
/// overlap); `GET` the counter and `SET` it to one more (a lost update unless exclusive);
/// `DECR <counter>:inside`; unlock. Returns the overlaps seen.
///
/// # Panics
/// When a lock call or a command fails.
pub async fn exclusive_rounds(
    lock: redis_rlock::RLock,
    mut conn: redis::aio::MultiplexedConnection,
    counter: &str,
    rounds: usize,
) -> i64 {
    let inside = format!("{counter}:inside");
    let mut overlaps = 0;
    for _ in 0..rounds {
        let guard = lock.lock().await.unwrap();
        let n: i64 = redis::cmd("INCR")
            .arg(&inside)
            .query_async(&mut conn)
            .await
            .unwrap();
        overlaps += i64::from(n != 1);
        let value: Option<i64> = redis::cmd("GET")
            .arg(counter)
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(counter)
            .arg(value.unwrap_or(0) + 1)
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: i64 = redis::cmd("DECR")
            .arg(&inside)
            .query_async(&mut conn)
            .await
            .unwrap();
        guard.unlock().await.unwrap();
    }
    overlaps
}
