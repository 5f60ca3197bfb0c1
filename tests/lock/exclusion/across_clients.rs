//! Mutual exclusion across clients and tasks: only one task of many clients is ever inside;
//! re-entry is per task; a guard dropped releases in the background, a guard moved to
//! another task unlocks there, a re-entrant drop keeps the outer hold; holds that Redis
//! counts beyond the guards are taken back with the last release, even when an acquire of
//! the same owner waited for it and was dropped.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use testkit::{client, RedisServer, Waiting};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_task_of_many_clients_is_ever_inside() {
    const CLIENTS: usize = 3;
    const TASKS_PER_CLIENT: usize = 6;
    const ROUNDS: u64 = 15;
    let server = RedisServer::start();
    let counter = Arc::new(AtomicU64::new(0));
    let inside = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = client(&server).await;
        for _ in 0..TASKS_PER_CLIENT {
            let (lock, counter, inside) = (client.lock("counter"), counter.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    let guard = lock.lock().await.unwrap();
                    assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                    // A non-atomic read-modify-write with a yield in the middle: lost updates
                    // would show if two tasks ever overlapped.
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    inside.store(false, Ordering::SeqCst);
                    guard.unlock().await.unwrap();
                }
            }));
        }
    }
    let all = futures_util::future::join_all(tasks);
    for result in tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .unwrap()
    {
        result.unwrap();
    }
    assert_eq!(
        counter.load(Ordering::SeqCst),
        (CLIENTS * TASKS_PER_CLIENT) as u64 * ROUNDS
    );
}

#[tokio::test]
async fn reentry_is_per_task() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("per-task");
    let outer = lock.lock().await.unwrap();
    // Same task (here: the test's block_on thread): re-entry.
    let again = lock
        .try_lock()
        .await
        .unwrap()
        .expect("re-entry by the holder");
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    // Another task of the same client is another owner.
    let other = lock.clone();
    let blocked = tokio::spawn(async move { other.try_lock().await.unwrap().is_none() });
    assert!(blocked.await.unwrap(), "another task must wait");
    again.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

#[tokio::test]
async fn a_dropped_guard_releases_in_the_background() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    // Dropped in a task, then on a thread outside any runtime: released on the client's
    // runtime either way, at once, not when the lease runs out.
    for on_a_plain_thread in [false, true] {
        let guard = holder.lock("dropped").lock().await.unwrap();
        let lock = waiter_client.lock("dropped");
        let waiter =
            Waiting::listening(&waiter_client, 1, async move { lock.lock().await.unwrap() }).await;
        let woken = waiter
            .woken_by(async {
                if on_a_plain_thread {
                    std::thread::spawn(move || drop(guard)).join().unwrap();
                } else {
                    drop(guard);
                }
            })
            .await;
        assert!(
            woken.after < Duration::from_millis(500),
            "released at drop, not at expiry (plain thread: {on_a_plain_thread})"
        );
        assert_eq!(holder.status().held_locks, 0);
        woken.value.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn a_guard_moved_to_another_task_unlocks_there() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("moved");
    let guard = lock.lock().await.unwrap();
    let owner = guard.owner().to_string();
    let unlocked = tokio::spawn(async move {
        assert_eq!(guard.owner(), owner, "the guard keeps its owner");
        guard.unlock().await
    });
    unlocked.await.unwrap().unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn a_reentrant_drop_keeps_the_outer_hold() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("nested");
    let outer = lock.lock().await.unwrap();
    drop(lock.lock().await.unwrap());
    let raw = server.raw().await;
    let owner = outer.owner().to_string();
    let count = testkit::settles_to(1, Duration::from_secs(1), || {
        let (mut raw, owner) = (raw.clone(), owner.clone());
        async move { testkit::lock_hash(&mut raw, "nested").await[&owner] }
    })
    .await;
    assert_eq!(count, 1, "the inner drop released one hold");
    assert!(!outer.is_lost());
    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test]
async fn counts_redis_holds_beyond_the_guards_are_taken_back_with_the_last_release() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    // Redis counts one more hold than this client has guards, as after an acquire whose
    // reply was lost, or a re-entry into a hold lost just before its key expired.
    for drop_it in [false, true] {
        let guard = client.lock("leftover").lock().await.unwrap();
        let _: i64 = redis::cmd("HINCRBY")
            .arg("leftover")
            .arg(guard.owner())
            .arg(1)
            .query_async(&mut raw)
            .await
            .unwrap();
        if drop_it {
            drop(guard);
        } else {
            guard.unlock().await.unwrap();
        }
        let held = testkit::settles_to(false, Duration::from_secs(5), || {
            let lock = client.lock("leftover");
            async move { lock.is_locked().await.unwrap() }
        })
        .await;
        assert!(
            !held,
            "freed at the last release, not when its lease runs out"
        );
    }
}

/// An acquire of the same owner that waits for the last release, and is dropped while it
/// waits (a timeout, a `select!` that took another branch), does not keep that release
/// from taking back the counts Redis holds beyond the guards: the lock is free at once,
/// not held by nobody until its lease runs out.
#[tokio::test]
async fn an_acquire_dropped_while_it_waits_for_the_last_release_keeps_nothing_held() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let lock = client.lock("leftover-waited");
    let guard = lock.lock().await.unwrap();
    let _: i64 = redis::cmd("HINCRBY")
        .arg("leftover-waited")
        .arg(guard.owner())
        .arg(1)
        .query_async(&mut raw)
        .await
        .unwrap();
    // The release goes on in the background; the acquire, polled once, waits for it.
    drop(guard);
    let mut acquire = Box::pin(lock.lock());
    std::future::poll_fn(|cx| {
        assert!(
            acquire.as_mut().poll(cx).is_pending(),
            "waits for the release"
        );
        std::task::Poll::Ready(())
    })
    .await;
    // Long enough for the release and its leftovers to be answered; the acquire is never
    // polled again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(acquire);
    let held = testkit::settles_to(false, Duration::from_secs(5), || {
        let lock = client.lock("leftover-waited");
        async move { lock.is_locked().await.unwrap() }
    })
    .await;
    assert!(!held, "held by nobody until its lease runs out");
}
