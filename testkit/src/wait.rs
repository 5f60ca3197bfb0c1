//! Bounded waits: for local state to hold, for Redis state to settle, for a call to return.
//! Every loop here ends by its limit, failing the test or returning what it last saw.

use std::time::{Duration, Instant};

use crate::inspect::fair_queue;

/// Waits until `condition` holds, checking every 5 ms, for at most `limit`; panics with
/// `what` otherwise. For local state with no event to await (a waiter reaching its wait).
pub async fn eventually(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Reads `read` every 10 ms until it returns `expected`, for at most `limit`, and returns
/// the last value read: for Redis state that background work (a release from `Drop`, a
/// latch flush) settles shortly after the call under test returns.
pub async fn settles_to<T, F, Fut>(expected: T, limit: Duration, mut read: F) -> T
where
    T: PartialEq,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = Instant::now() + limit;
    loop {
        let value = read().await;
        if value == expected || Instant::now() >= deadline {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until fair lock `name`'s queue reads `expected`, for at most `limit`; panics with
/// what it last read otherwise.
pub async fn queue_becomes(
    conn: &redis::aio::MultiplexedConnection,
    name: &str,
    expected: &[&str],
    limit: Duration,
) {
    let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    let last = settles_to(expected.clone(), limit, || {
        let mut conn = conn.clone();
        async move { fair_queue(&mut conn, name).await }
    })
    .await;
    assert_eq!(last, expected, "queue of `{name}`");
}

/// How long one call made through [`bounded`] (such as each of
/// [`every_acquire`](crate::every_acquire)) may take before the test fails.
pub const CALL_LIMIT: Duration = Duration::from_secs(5);

/// Awaits `call`, failing the test if it takes longer than [`CALL_LIMIT`].
pub async fn bounded<T>(what: &str, call: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(CALL_LIMIT, call).await {
        Ok(value) => value,
        Err(_) => panic!("{what}: did not return within {CALL_LIMIT:?}"),
    }
}

/// Calls `check` every `every` until it returns `Ok`, for at most `limit`, and returns that
/// value; panics with `what` and the last `Err` (the reason it was not there yet) otherwise.
/// Blocking: for set-up that runs outside any runtime (cluster and sentinel start-up), or
/// inside [`off_runtime`].
pub(crate) fn poll_blocking<T>(
    what: &str,
    limit: Duration,
    every: Duration,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(value) => return value,
            Err(why) if Instant::now() >= deadline => {
                panic!("timed out after {limit:?} waiting for {what}; last seen: {why}")
            }
            Err(_) => std::thread::sleep(every),
        }
    }
}

/// Runs blocking harness work (admin commands on blocking connections, [`poll_blocking`])
/// on tokio's blocking pool, so a test's runtime (often a current-thread one that also runs
/// the lock client's background tasks) keeps running meanwhile. A panic in `job` is
/// resumed in the caller, so it fails the test with its own message.
pub(crate) async fn off_runtime<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(job).await {
        Ok(value) => value,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(e) => panic!("blocking harness job did not finish: {e}"),
        },
    }
}
