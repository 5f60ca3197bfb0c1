//! The watchdog: renews while held, stops at release, renews many locks per call, and
//! reports a lock it could not keep.

use std::time::{Duration, Instant};

use redis_rlock::LostReason;
use testkit::{client, client_with_watchdog, pttl, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn the_watchdog_keeps_a_one_second_lease_alive_and_stops_on_unlock() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let mut raw = server.raw().await;
    let guard = client.lock("long-job").lock().await.unwrap();
    assert!(pttl(&mut raw, "long-job").await <= 1_000);

    // Hold it for more than three leases: only renewals keep it.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    let ttl = pttl(&mut raw, "long-job").await;
    assert!(ttl > 0 && ttl <= 1_000, "renewed lease, got pttl {ttl}");
    assert!(!guard.is_lost());
    assert!(guard.valid_until() > Instant::now());
    assert!(client.status().watchdog_running);

    guard.unlock().await.unwrap();
    assert_eq!(pttl(&mut raw, "long-job").await, -2);
    assert!(
        !client.status().watchdog_running,
        "nothing is renewed once the last watchdog hold is released"
    );
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn a_fixed_lease_expires_and_the_guard_reports_it() {
    let server = RedisServer::start();
    let (holder, other) = (client(&server).await, client(&server).await);
    let guard = holder
        .lock("leased")
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    assert!(
        !holder.status().watchdog_running,
        "no watchdog for a fixed lease"
    );
    let started = Instant::now();
    let reason = tokio::time::timeout(GENEROUS, guard.lost()).await.unwrap();
    assert_eq!(reason, LostReason::Expired);
    // Told at the lease's end (300 ms after the acquire was sent, at the latest); the
    // slack is for a late timer on a loaded machine.
    assert!(
        started.elapsed() <= Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );

    // Once Redis expired it, another client takes it; the stale guard cannot release it.
    let taken = other.lock("leased").lock().await.unwrap();
    let err = guard.unlock().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Expired));
    assert!(other.lock("leased").is_locked().await.unwrap());
    taken.unlock().await.unwrap();
}

#[tokio::test]
async fn a_holder_whose_runtime_dies_releases_by_expiry() {
    let server = RedisServer::start();
    let url = server.url();
    // A "process" with its own runtime takes the lock and dies without unlocking.
    let leaked = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let guard = runtime.block_on(async {
            let client = redis_rlock::Client::builder(url)
                .watchdog_timeout(Duration::from_secs(1))
                .build()
                .await
                .unwrap();
            client.lock("crashy").lock().await.unwrap()
        });
        drop(runtime); // the watchdog dies with it
        guard // dropped outside any runtime by the caller: no release is sent
    })
    .join()
    .unwrap();
    drop(leaked);

    let waiter = client(&server).await;
    let started = Instant::now();
    let guard = waiter.lock("crashy").lock().await.unwrap();
    let waited = started.elapsed();
    assert!(
        waited < Duration::from_millis(2_500),
        "expired after its 1 s lease: {waited:?}"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_lock_deleted_behind_the_holders_back_is_reported_released() {
    let server = RedisServer::start();
    let holder = client_with_watchdog(&server, Duration::from_millis(600)).await;
    let guard = holder.lock("stolen").lock().await.unwrap();
    let mut raw = server.raw().await;
    let _: () = redis::cmd("DEL")
        .arg("stolen")
        .query_async(&mut raw)
        .await
        .unwrap();
    // The next renewal (every 200 ms) finds the field gone.
    let reason = tokio::time::timeout(GENEROUS, guard.lost()).await.unwrap();
    assert_eq!(reason, LostReason::Released);
    assert!(guard.is_lost());
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lock_lost());
    assert_eq!(holder.status().held_locks, 0);
}

#[tokio::test]
async fn a_frozen_server_makes_the_guard_lost_by_its_deadline() {
    let server = RedisServer::start();
    let holder = redis_rlock::Client::builder(server.url())
        .watchdog_timeout(Duration::from_millis(900))
        .response_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap();
    let guard = holder.lock("frozen").lock().await.unwrap();
    let deadline = guard.valid_until();
    server.freeze();
    let reason = tokio::time::timeout(GENEROUS, guard.lost()).await.unwrap();
    let noticed = Instant::now();
    server.thaw();
    assert_eq!(reason, LostReason::ConnectionLost);
    // Told no later than the local deadline, which is before Redis' own expiry.
    assert!(noticed >= deadline);
    assert!(
        noticed - deadline < Duration::from_millis(300),
        "{:?} late",
        noticed - deadline
    );
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());
}

#[tokio::test]
async fn thousands_of_locks_are_renewed_in_batches() {
    const LOCKS: usize = 2_000;
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let mut guards = Vec::with_capacity(LOCKS);
    for i in 0..LOCKS {
        guards.push(client.lock(format!("many:{i}")).lock().await.unwrap());
    }
    let evalsha_before = testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls");
    tokio::time::sleep(Duration::from_millis(2_500)).await; // 2.5 leases
    let renewal_calls =
        testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls") - evalsha_before;

    let mut raw = server.raw().await;
    for i in (0..LOCKS).step_by(97) {
        let ttl = pttl(&mut raw, &format!("many:{i}")).await;
        assert!(ttl > 0, "many:{i} kept alive, pttl {ttl}");
    }
    assert!(guards.iter().all(|g| !g.is_lost()));
    // About 7 ticks x 20 batches of 100; one call per lock per tick would be 14,000.
    assert!(
        (20..=300).contains(&renewal_calls),
        "{renewal_calls} renewal calls for {LOCKS} locks"
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    let locks_left = testkit::keys_matching(&mut raw, "many:*").await;
    assert!(locks_left == 0, "{locks_left} locks left");
    // Nothing else either: releases write no unlock latch, and the client leaves no key
    // behind when it goes away.
    drop(client);
    let left: i64 = testkit::settles_to(0, Duration::from_secs(2), || {
        let mut raw = raw.clone();
        async move { testkit::dbsize(&mut raw).await }
    })
    .await;
    assert_eq!(left, 0, "every key gone");
}

#[tokio::test]
async fn locks_taken_in_the_slots_of_released_ones_are_renewed_and_released_ones_stay_free() {
    const LOCKS: usize = 300;
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let mut kept = Vec::new();
    for i in 0..LOCKS {
        let guard = client.lock(format!("churn:{i}")).lock().await.unwrap();
        if i % 2 == 0 {
            kept.push(guard);
        } else {
            guard.unlock().await.unwrap();
        }
    }
    // Taken after the releases: these reuse the watchdog's freed places.
    for i in 0..LOCKS / 2 {
        kept.push(client.lock(format!("late:{i}")).lock().await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await; // 2.5 leases
    let mut raw = server.raw().await;
    for guard in &kept {
        assert!(!guard.is_lost(), "{} lost", guard.key());
        let ttl = pttl(&mut raw, guard.key()).await;
        assert!(ttl > 0, "{} kept alive, pttl {ttl}", guard.key());
    }
    for i in (1..LOCKS).step_by(2) {
        let hash = testkit::lock_hash(&mut raw, &format!("churn:{i}")).await;
        assert!(hash.is_empty(), "churn:{i} was released: {hash:?}");
    }
    for guard in kept {
        guard.unlock().await.unwrap();
    }
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn locks_left_scattered_by_releases_are_still_renewed_a_full_batch_per_call() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let mut guards = Vec::new();
    for i in 0..400 {
        guards.push(client.lock(format!("sparse:{i}")).lock().await.unwrap());
    }
    let mut kept = Vec::new();
    for (i, guard) in guards.into_iter().enumerate() {
        if i % 4 == 0 {
            kept.push(guard);
        } else {
            guard.unlock().await.unwrap();
        }
    }
    // 100 locks held, one in four of the watchdog's places: one call a round, not four.
    let calls_before = testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls");
    tokio::time::sleep(Duration::from_millis(2_000)).await; // 6 rounds of 333 ms
    let calls =
        testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls") - calls_before;
    assert!(
        (1..=10).contains(&calls),
        "{calls} renewal calls in 6 rounds"
    );
    assert!(kept.iter().all(|guard| !guard.is_lost()));
    for guard in kept {
        guard.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn a_watchdog_reentry_into_a_long_fixed_lease_shortens_the_validity_to_match_redis() {
    let server = RedisServer::start();
    let client = client_with_watchdog(&server, Duration::from_secs(2)).await;
    let lock = client.lock("mixed");
    let outer = lock
        .lock_with_lease(Duration::from_secs(600))
        .await
        .unwrap();
    let inner = lock.lock().await.unwrap();
    // The re-entry set the key's expiry to the 2 s watchdog lease: the guards must not
    // claim the 600 s any more.
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(ttl <= Duration::from_secs(2), "{ttl:?}");
    for guard in [&outer, &inner] {
        let valid_for = guard
            .valid_until()
            .saturating_duration_since(Instant::now());
        assert!(valid_for <= Duration::from_secs(2), "{valid_for:?}");
    }
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
}

#[tokio::test]
async fn lost_stays_pending_after_a_clean_unlock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let guard = client
        .lock("clean")
        .lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    let lost = guard.lost();
    guard.unlock().await.unwrap();
    // Well past the lease: a released lock is not "lost".
    assert!(tokio::time::timeout(Duration::from_millis(600), lost)
        .await
        .is_err());
}

#[tokio::test]
async fn a_restart_that_forgets_the_lock_is_reported_as_soon_as_the_client_reconnects() {
    let mut server = RedisServer::start();
    // Renewals every 10 s: the report below must not wait for one.
    let client = client_with_watchdog(&server, Duration::from_secs(30)).await;
    let guard = client.lock("forgotten").lock().await.unwrap();
    // Restarted without persistence: the lock is gone.
    server.restart();
    // Any lock call finds the connection broken and opens a new one.
    let reconnected = Instant::now();
    assert!(!client.lock("other").is_locked().await.unwrap());
    let reason = tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("told within a moment of reconnecting, not at the next renewal");
    assert_eq!(reason, LostReason::Released);
    assert!(reconnected.elapsed() < Duration::from_secs(3));
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());
}

#[tokio::test]
async fn renewals_go_on_after_redis_forgets_the_scripts() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client_with_watchdog(&server, Duration::from_secs(3)).await;
    let guard = client.lock("flushed").lock().await.unwrap();
    let _: String = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    // The next renewal meets NOSCRIPT, loads the script and renews: the TTL jumps back up.
    let flushed_at = Instant::now();
    let mut last = pttl(&mut conn, "flushed").await;
    let renewed = loop {
        assert!(
            flushed_at.elapsed() < Duration::from_secs(5),
            "no renewal after SCRIPT FLUSH; pttl {last}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = pttl(&mut conn, "flushed").await;
        if now > last + 500 {
            break now;
        }
        last = now;
    };
    assert!(renewed > 2_500, "pttl {renewed}");
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}
