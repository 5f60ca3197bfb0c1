//! FairLock heartbeat: a live waiter keeps its place in the queue, with a deadline pushed
//! ahead on the server clock, for many waiter timeouts.

use std::time::Duration;

use testkit::fair::{fair_clients, queue_holder};
use testkit::{fair_deadline, fair_queue, server_millis, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_live_waiter_keeps_its_place_for_many_waiter_timeouts() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let timeout = Duration::from_millis(400);
    let [holder_client, waiter_client] = fair_clients(&server, timeout).await;
    let holder = holder_client.fair_lock("patient").lock().await.unwrap();
    let first = queue_holder(&waiter_client, &raw, "patient").await;
    let second = queue_holder(&waiter_client, &raw, "patient").await;

    // Four waiter timeouts pass: only the heartbeat keeps the places.
    tokio::time::sleep(timeout * 4).await;
    assert_eq!(
        fair_queue(&mut raw, "patient").await,
        [first.owner.clone(), second.owner.clone()]
    );
    let now = server_millis(&mut raw).await;
    let deadline = fair_deadline(&mut raw, "patient", &first.owner)
        .await
        .unwrap();
    assert!(
        deadline > now,
        "deadline refreshed: {deadline} vs server time {now}"
    );

    holder.unlock().await.unwrap();
    let (_, guard) = first.finish_within(GENEROUS).await;
    guard.unlock().await.unwrap();
    let (_, guard) = second.finish_within(GENEROUS).await;
    guard.unlock().await.unwrap();
}

/// With [`redisson_fair_lock_wait`](redis_rlock::ClientBuilder::redisson_fair_lock_wait)
/// set, a waiter's deadline is pushed that much further ahead for each waiter ahead of it,
/// so that a Redisson waiter taking the lock, which subtracts its `fairLockWaitTimeout`
/// from every deadline behind it (done here raw, as RedissonFairLock's acquire script
/// does), never puts a live waiter's deadline in the past: the queue is served in order.
#[tokio::test]
async fn deadlines_leave_room_for_the_waits_redisson_waiters_subtract() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java_wait = Duration::from_secs(60);
    let client = redis_rlock::Client::builder(server.url())
        .redisson_fair_lock_wait(java_wait)
        .build()
        .await
        .unwrap();
    let holder = client.fair_lock("mixed").lock().await.unwrap();
    let waiters = [
        queue_holder(&client, &raw, "mixed").await,
        queue_holder(&client, &raw, "mixed").await,
        queue_holder(&client, &raw, "mixed").await,
    ];
    let keep = 5_000 / 4 * 3;
    let now = server_millis(&mut raw).await;
    for (ahead, waiter) in waiters.iter().enumerate() {
        let deadline = fair_deadline(&mut raw, "mixed", &waiter.owner)
            .await
            .unwrap();
        let expected = now + 60_000 * ahead as i64;
        assert!(
            (expected..=expected + keep).contains(&deadline),
            "waiter {ahead}: deadline {deadline} against server time {now}"
        );
    }

    // Had the first two waiters been Redisson's, each would have subtracted its wait from
    // every deadline behind it on taking the lock.
    for taker in 0..2 {
        for waiter in &waiters[taker + 1..] {
            let _: f64 = redis::cmd("ZINCRBY")
                .arg("redisson_lock_timeout:{mixed}")
                .arg(-(java_wait.as_millis() as i64))
                .arg(&waiter.owner)
                .query_async(&mut raw)
                .await
                .unwrap();
        }
    }
    let now = server_millis(&mut raw).await;
    for waiter in &waiters {
        let deadline = fair_deadline(&mut raw, "mixed", &waiter.owner)
            .await
            .unwrap();
        assert!(
            deadline > now,
            "a deadline in the past: {deadline} vs {now}"
        );
    }

    holder.unlock().await.unwrap();
    let owners: Vec<String> = waiters.iter().map(|w| w.owner.clone()).collect();
    let mut served = Vec::new();
    for waiter in waiters {
        let owner = waiter.owner.clone();
        let (_, guard) = waiter.finish_within(GENEROUS).await;
        served.push(owner);
        guard.unlock().await.unwrap();
    }
    assert_eq!(served, owners, "served in arrival order");
}
