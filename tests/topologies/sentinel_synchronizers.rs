//! Semaphores and latches on a Sentinel master that stops answering for a moment: a
//! Sentinel client's count changes carry request latches, as a cluster client's do, so
//! those whose replies time out are sent again and still count once; their latches are
//! gone afterwards. A failover breaks connections by design, and a count change must not
//! fail, or count twice, for it.

use std::time::Duration;

use redis_rlock::{Client, SemaphoreGuard};
use testkit::{keys_matching, raw_get, settles_to, RedisSentinels};

/// Bound on anything that should take milliseconds, for a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_changes_whose_replies_time_out_are_sent_again_and_count_once() {
    // Short, so that the freeze outlasts it; the freeze stays well under the sentinels' 1 s
    // `down-after-milliseconds`, so that no failover starts meanwhile.
    const RESPONSE_TIMEOUT: Duration = Duration::from_millis(150);
    const FREEZE: Duration = Duration::from_millis(500);
    let sentinels = RedisSentinels::start("m1");
    let client = Client::sentinel_builder(sentinels.sentinel_urls(), sentinels.master_name())
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(5)
        .retry_delay(Duration::from_millis(100))
        .build()
        .await
        .expect("a Sentinel client connects");
    let pool = client.semaphore("s:pool");
    let batch = client.count_down_latch("s:batch");
    assert!(pool.try_set_permits(10).await.unwrap());
    assert!(batch.try_set_count(3).await.unwrap());
    let to_release = pool.acquire(2).await.unwrap();

    // Every call's first try waits in the frozen master's socket past its timeout, and may
    // have run: each is sent again, and runs once the master thaws, after the first.
    let master = sentinels.master();
    master.freeze();
    let thaw = async {
        tokio::time::sleep(FREEZE).await;
        master.thaw();
    };
    let calls = tokio::time::timeout(GENEROUS, async {
        tokio::join!(
            async { pool.acquire(1).await.map(SemaphoreGuard::forget) },
            to_release.release(),
            pool.release(1),
            pool.add_permits(3),
            batch.count_down(),
            batch.count_down(),
        )
    });
    let (outcomes, ()) = tokio::join!(calls, thaw);
    let outcomes = outcomes.expect("every call returns in bounded time");
    let (acquired, released, released_by_hand, added, down, down_again) = outcomes;
    assert_eq!(acquired.unwrap(), 1, "semaphore acquire");
    released.expect("guard release");
    released_by_hand.expect("semaphore release(1)");
    added.expect("add_permits(3)");
    down.expect("latch count_down");
    down_again.expect("latch count_down");

    let mut on_master = master.raw().await;
    // 8 free, then: -1 acquired, +2 released, +1 released by hand, +3 added.
    assert_eq!(
        raw_get(&mut on_master, "s:pool").await.as_deref(),
        Some("13"),
        "the semaphore's count"
    );
    assert_eq!(
        raw_get(&mut on_master, "s:batch").await.as_deref(),
        Some("1"),
        "the latch's count, 3 counted down twice"
    );
    // The latches did their job; the client deletes them when it goes.
    drop((pool, batch, client));
    let left = settles_to(0, GENEROUS, || {
        let mut on_master = on_master.clone();
        async move { keys_matching(&mut on_master, "redisson_unlock_latch:*").await }
    })
    .await;
    assert_eq!(left, 0, "request latches left behind");
}
