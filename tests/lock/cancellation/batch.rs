//! Acquires abandoned inside a batch: calls dropped before, during and after their batch's
//! script call leave no lock held.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use testkit::{client, settles_to, RedisServer};
use tokio::sync::Barrier;

const TASKS: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquires_abandoned_in_a_batch_leave_nothing_held() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client(&server).await;
    for round in 0..6u64 {
        let start = Arc::new(Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS as u64)
            .map(|i| {
                let (lock, start) = (client.lock(format!("left:{round}:{i}")), start.clone());
                // From before the first reply to after the last, across the tasks.
                let patience = Duration::from_micros((i * 37 + round * 101) % 1_500);
                tokio::spawn(async move {
                    start.wait().await;
                    // A 60 s lease: a lock left behind would outlive the test's wait.
                    tokio::time::timeout(patience, lock.lock_with_lease(Duration::from_secs(60)))
                        .await
                        .ok()
                        .map(Result::unwrap)
                })
            })
            .collect();
        // Guards that were returned are dropped here: released in the background too.
        drop(join_all(tasks).await);
    }
    let left = settles_to(0, Duration::from_secs(10), || {
        let mut conn = conn.clone();
        async move { testkit::keys_matching(&mut conn, "left:*").await }
    })
    .await;
    assert_eq!(left, 0, "locks left held by abandoned acquires");
    let _ = &mut conn;
}
