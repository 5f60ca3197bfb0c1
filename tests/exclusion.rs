//! Mutual exclusion across clients and tasks, reentrancy per task, and guards that are
//! dropped or moved.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::{client, eventually, RedisServer};

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
        let waiter = tokio::spawn(async move { lock.lock().await.unwrap() });
        eventually("the waiter subscribed", Duration::from_secs(5), || {
            waiter_client.status().subscribed_channels == 1
        })
        .await;
        let dropped = Instant::now();
        if on_a_plain_thread {
            std::thread::spawn(move || drop(guard)).join().unwrap();
        } else {
            drop(guard);
        }
        let guard = waiter.await.unwrap();
        assert!(
            dropped.elapsed() < Duration::from_millis(500),
            "released at drop, not at expiry (plain thread: {on_a_plain_thread})"
        );
        assert_eq!(holder.status().held_locks, 0);
        guard.unlock().await.unwrap();
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

// --- A re-entry after an unnoticed loss -------------------------------------------------
//
// The task holds `g1`; the lock leaves Redis before the client notices (a force unlock by
// another client, or a restart without persistence); another client may take it meanwhile.
// The task then takes the lock again. Redis makes the owner's field anew, so `g1` is lost:
// it must say so at once, and `g2` is a hold of its own whose release never leaves `g1`
// looking valid while the lock is free.

use redis_rlock::{Client, Lock, LockKind, LostReason};

/// `make(client)` gives the lock under test on `client`; `rival(client)` the lock another
/// client takes meanwhile (for a read lock, the write side: a writer is the rival).
async fn a_reentry_after_a_force_unlock_tells_the_first_guard<K: LockKind, R: LockKind>(
    make: impl Fn(&Client) -> Lock<K>,
    rival: impl Fn(&Client) -> Lock<R>,
    fixed_lease: bool,
) {
    let server = RedisServer::start();
    let (mine, other) = (client(&server).await, client(&server).await);
    let lock = make(&mine);
    let g1 = if fixed_lease {
        lock.lock_with_lease(Duration::from_secs(30)).await.unwrap()
    } else {
        lock.lock().await.unwrap()
    };
    let lost = g1.lost();
    assert!(make(&other).force_unlock().await.unwrap());
    let theirs = testkit::bounded("the rival's lock()", rival(&other).lock())
        .await
        .unwrap();
    theirs.unlock().await.unwrap();

    let g2 = testkit::bounded("the re-entry", lock.lock()).await.unwrap();
    assert!(g1.is_lost(), "the first guard's hold left Redis before g2");
    let told = tokio::time::timeout(Duration::from_secs(1), lost).await;
    assert_eq!(told, Ok(LostReason::Released), "lost() resolves at once");
    assert!(!g2.is_lost());
    assert_eq!(lock.hold_count().await.unwrap(), 1, "one count, g2's");

    g2.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap(), "g2 was the only hold");
    let third = client(&server).await;
    let theirs = rival(&third).try_lock().await.unwrap();
    assert!(theirs.is_some(), "the lock is free for anyone");
    let err = g1.unlock().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    assert!(
        rival(&third).is_locked().await.unwrap(),
        "g1's unlock leaves the third client's hold alone"
    );
}

#[tokio::test]
async fn rlock_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(|c| c.lock("l"), |c| c.lock("l"), false)
        .await;
}

#[tokio::test]
async fn rlock_fixed_lease_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(|c| c.lock("l"), |c| c.lock("l"), true)
        .await;
}

#[tokio::test]
async fn fair_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.fair_lock("l"),
        |c| c.fair_lock("l"),
        false,
    )
    .await;
}

#[tokio::test]
async fn fenced_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.fenced_lock("l"),
        |c| c.fenced_lock("l"),
        false,
    )
    .await;
}

#[tokio::test]
async fn write_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.read_write_lock("l").write_lock(),
        |c| c.read_write_lock("l").write_lock(),
        false,
    )
    .await;
}

#[tokio::test]
async fn read_reentry_after_a_force_unlock_reports_the_loss() {
    a_reentry_after_a_force_unlock_tells_the_first_guard(
        |c| c.read_write_lock("l").read_lock(),
        |c| c.read_write_lock("l").write_lock(),
        false,
    )
    .await;
}

/// After Redis restarted empty, a re-entry finds no field: the first guard is lost by the
/// time the second is handed out, whether or not the reconnect's renewal round got there
/// first (a race: the issue saw it hidden in 5 of 11 runs, so each kind tries 3 times).
async fn a_reentry_after_a_restart_tells_the_first_guard<K: LockKind>(
    make: impl Fn(&Client) -> Lock<K>,
) {
    let mut server = RedisServer::start();
    let mine = client(&server).await;
    let lock = make(&mine);
    for round in 0..3 {
        let g1 = lock.lock().await.unwrap();
        server.restart();
        // A re-entry that meets the broken connection may have run, so it is not sent
        // again (it could count twice): the caller sees the error and tries again.
        let mut tries = 0;
        let g2 = loop {
            tries += 1;
            match testkit::bounded("the re-entry", lock.lock()).await {
                Err(e) if e.is_connection_error() && tries < 5 => continue,
                outcome => break outcome.unwrap(),
            }
        };
        assert!(g1.is_lost(), "round {round}: g1 still looks valid");
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(1), g1.lost()).await,
            Ok(LostReason::Released),
            "round {round}"
        );
        assert!(!g2.is_lost());
        assert_eq!(lock.hold_count().await.unwrap(), 1, "round {round}");
        g2.unlock().await.unwrap();
        assert!(!lock.is_locked().await.unwrap(), "round {round}");
        assert!(g1.unlock().await.unwrap_err().is_lock_lost());
    }
}

#[tokio::test]
async fn reentries_after_a_restart_report_the_loss_for_every_kind() {
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.lock("l")).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.fair_lock("l")).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.fenced_lock("l")).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.read_write_lock("l").write_lock()).await;
    a_reentry_after_a_restart_tells_the_first_guard(|c| c.read_write_lock("l").read_lock()).await;
}

/// Redis counting fewer holds than the guards (a count taken away behind the client's back):
/// a release that frees the lock leaves no other guard of the hold looking valid.
#[tokio::test]
async fn a_release_that_frees_the_lock_marks_the_remaining_guards_lost() {
    let server = RedisServer::start();
    let mine = client(&server).await;
    let lock = mine.lock("l");
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    let mut raw = server.raw().await;
    let _: () = redis::cmd("HSET")
        .arg(outer.key())
        .arg(outer.owner())
        .arg(1)
        .query_async(&mut raw)
        .await
        .unwrap();
    inner.unlock().await.unwrap();
    assert!(
        !lock.is_locked().await.unwrap(),
        "the release freed the lock"
    );
    assert!(outer.is_lost(), "the outer guard must not look valid");
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(1), outer.lost()).await,
        Ok(LostReason::Released)
    );
}
