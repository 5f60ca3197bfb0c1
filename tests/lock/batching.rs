//! Many tasks of one client locking and unlocking at once: their calls are coalesced into
//! multi-key script calls, and each caller must still get exactly its own answer.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use redis_rlock::LockGuard;
use testkit::{client, lock_hash, pttl, RedisServer};
use tokio::sync::Barrier;

const TASKS: usize = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_each_get_their_own_answer() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let holder = client(&server).await;
    let mut held_elsewhere = Vec::new();
    for i in 0..8 {
        let lock = holder.lock(format!("busy:{i}"));
        held_elsewhere.push(lock.lock_with_lease(Duration::from_secs(60)).await.unwrap());
    }
    let client = client(&server).await;
    let calls_before = testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls");
    let start = Arc::new(Barrier::new(TASKS));
    let tasks: Vec<_> = (0..TASKS)
        .map(|i| {
            let name = if i % 2 == 0 {
                format!("free:{i}")
            } else {
                format!("busy:{}", i % 8)
            };
            let (lock, start) = (client.lock(name), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                lock.try_lock().await.unwrap()
            })
        })
        .collect();
    let got: Vec<Option<LockGuard>> = join_all(tasks)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let calls =
        testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls") - calls_before;
    assert!(
        calls < TASKS as i64 / 2,
        "{TASKS} acquires at once went out in {calls} script calls"
    );
    for (i, guard) in got.iter().enumerate() {
        if i % 2 == 1 {
            assert!(guard.is_none(), "busy:{} is held by another client", i % 8);
            continue;
        }
        let guard = guard.as_ref().expect("a free lock is taken");
        let key = format!("free:{i}");
        assert_eq!(guard.key(), key);
        let hash = lock_hash(&mut conn, &key).await;
        assert_eq!(hash.len(), 1, "{key}: {hash:?}");
        assert_eq!(hash.get(guard.owner()), Some(&1), "{key}: {hash:?}");
        let ttl = pttl(&mut conn, &key).await;
        assert!((20_000..=30_000).contains(&ttl), "{key}: pttl {ttl}");
    }
    for (i, guard) in held_elsewhere.iter().enumerate() {
        let hash = lock_hash(&mut conn, &format!("busy:{i}")).await;
        assert_eq!(hash.len(), 1, "busy:{i} untouched: {hash:?}");
        assert_eq!(hash.get(guard.owner()), Some(&1));
    }

    let releases = got.into_iter().flatten().map(|guard| guard.unlock());
    for released in join_all(releases).await {
        released.unwrap();
    }
    assert_eq!(testkit::keys_matching(&mut conn, "free:*").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_many_tasks_racing_for_one_lock_exactly_one_wins() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for round in 0..5 {
        let start = Arc::new(Barrier::new(TASKS));
        let tasks: Vec<_> = (0..TASKS)
            .map(|_| {
                let (lock, start) = (client.lock(format!("race:{round}")), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    lock.try_lock().await.unwrap()
                })
            })
            .collect();
        let winners: Vec<LockGuard> = join_all(tasks)
            .await
            .into_iter()
            .filter_map(Result::unwrap)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}");
        for guard in winners {
            guard.unlock().await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentries_sent_together_are_each_counted() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client(&server).await;
    let lock = client.lock("nested");
    let outer = lock.lock().await.unwrap();
    // One task, so one owner: every one of these is a re-entry, and all but the first two
    // are queued into one batch.
    let inner: Vec<LockGuard> = join_all((0..32).map(|_| lock.lock()))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        lock_hash(&mut conn, "nested").await.get(outer.owner()),
        Some(&33)
    );
    for released in join_all(inner.into_iter().map(LockGuard::unlock)).await {
        released.unwrap();
    }
    assert_eq!(
        lock_hash(&mut conn, "nested").await.get(outer.owner()),
        Some(&1)
    );
    outer.unlock().await.unwrap();
    assert!(lock_hash(&mut conn, "nested").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_releases_each_report_their_own_lost_lock() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client(&server).await;
    let taking = (0..TASKS).map(|i| {
        let lock = client.lock(format!("held:{i}"));
        async move { lock.lock().await.unwrap() }
    });
    let guards = join_all(taking).await;
    // Every third lock is deleted behind the client's back.
    for i in (0..TASKS).step_by(3) {
        let _: i64 = redis::cmd("DEL")
            .arg(format!("held:{i}"))
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let outcomes = join_all(guards.into_iter().map(LockGuard::unlock)).await;
    for (i, outcome) in outcomes.into_iter().enumerate() {
        if i % 3 == 0 {
            let e = outcome.expect_err("a deleted lock is reported lost");
            assert!(e.is_lock_lost(), "held:{i}: {e}");
        } else {
            outcome.unwrap_or_else(|e| panic!("held:{i}: {e}"));
        }
    }
    assert_eq!(testkit::keys_matching(&mut conn, "held:*").await, 0);
}
