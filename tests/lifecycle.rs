//! A client's life in a service: what it leaves behind when it goes.

use std::time::{Duration, Instant};

use redis_rlock::Client;
use testkit::RedisServer;

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Waits up to `limit` for the runtime's alive tasks to come down to `at_most`.
async fn tasks_settle_to(at_most: usize, limit: Duration) -> usize {
    let started = Instant::now();
    loop {
        let alive = alive_tasks();
        if alive <= at_most || started.elapsed() > limit {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client built and dropped many times in one runtime, as a service that makes one per
/// request might, leaves no task behind: its connections' tasks, and its unlock
/// listener's once it has listened, end with it.
#[tokio::test]
async fn a_client_made_and_dropped_a_thousand_times_leaves_no_task_running() {
    let server = RedisServer::start();
    // One first, so that whatever a first client starts for good (nothing, today) is in
    // the baseline.
    drop(Client::connect(server.url()).await.unwrap());
    let baseline = tasks_settle_to(0, Duration::from_secs(2)).await;
    for round in 0..1_000 {
        let client = Client::connect(server.url()).await.unwrap();
        if round % 100 == 0 {
            // Now and then one that has listened for an unlock, so that its listener's
            // tasks exist.
            let lock = client.lock("lifecycle");
            let held = lock.lock().await.unwrap();
            let waiter = tokio::spawn({
                let lock = client.lock("lifecycle");
                async move { lock.try_lock_for(Duration::from_millis(50)).await }
            });
            assert!(waiter.await.unwrap().unwrap().is_none());
            held.unlock().await.unwrap();
        }
        drop(client);
    }
    let alive = tasks_settle_to(baseline, Duration::from_secs(5)).await;
    assert!(
        alive <= baseline,
        "{alive} tasks alive after 1,000 clients came and went, {baseline} before"
    );
}
