//! Maximum hold time: the watchdog renews a lock until its cap and no further, no lease
//! reaches past the cap, and the holder is told (`MaxHoldReached`) before anyone else can
//! take the lock.

use std::time::{Duration, Instant};

use redis_rlock::{LostReason, RedLock};
use testkit::{client, client_with_watchdog, pttl, RedisGroup, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn the_watchdog_renews_until_the_cap_then_the_holder_is_told_before_a_rival_gets_in() {
    let server = RedisServer::start();
    // A 300 ms lease renewed every 100 ms: the cap, not a missed renewal, ends the hold.
    let holder = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let rival = client(&server).await;
    let cap = Duration::from_millis(1200);
    let lock = holder.lock("capped").with_max_hold(cap);
    assert_eq!(lock.max_hold(), Some(cap));

    let started = Instant::now();
    let guard = lock.lock().await.unwrap();
    let lost = guard.lost();
    // Rival waits from well before the cap; it can only get in once the key expires.
    let waiting = {
        let rival = rival.lock("capped");
        tokio::spawn(async move {
            let guard = rival.lock().await.unwrap();
            let at = Instant::now();
            guard.unlock().await.unwrap();
            at
        })
    };

    // Past two leases, the watchdog still keeps it.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!guard.is_lost());
    let mut raw = server.raw().await;
    assert!(pttl(&mut raw, "capped").await > 0);
    assert!(!waiting.is_finished());

    let reason = tokio::time::timeout(GENEROUS, lost).await.unwrap();
    assert_eq!(reason, LostReason::MaxHoldReached);
    let held_for = started.elapsed();
    // The last renewal applied only what was left of the cap, not a whole lease.
    let left = pttl(&mut raw, "capped").await;
    assert!(left < 60, "pttl {left} ms once the cap was reached");
    assert!(
        held_for >= Duration::from_millis(1000) && held_for < Duration::from_millis(2500),
        "held for {held_for:?} with a cap of {cap:?}"
    );
    let rival_in = tokio::time::timeout(GENEROUS, waiting)
        .await
        .unwrap()
        .unwrap();
    // The guard's validity ended before the rival could take the lock.
    assert!(
        rival_in >= guard.valid_until(),
        "rival got in {:?} before the holder's validity ended",
        guard.valid_until() - rival_in
    );
    let err = guard.unlock().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::MaxHoldReached));
    assert!(matches!(
        err,
        redis_rlock::Error::LockLost {
            expired_ago: Some(_),
            ..
        }
    ));
}

#[tokio::test]
async fn no_lease_reaches_past_the_cap_not_even_a_reentry_without_one() {
    let server = RedisServer::start();
    // A watchdog lease longer than the cap: the very first acquire is cut to the cap.
    let holder = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let mut raw = server.raw().await;
    let capped = holder
        .lock("nested")
        .with_max_hold(Duration::from_millis(800));
    let outer = capped.lock().await.unwrap();
    let ttl = pttl(&mut raw, "nested").await;
    assert!(ttl > 0 && ttl <= 800, "pttl {ttl} after a capped acquire");

    tokio::time::sleep(Duration::from_millis(400)).await;
    // A nested call through a handle without a cap re-enters, within the outer cap.
    let inner = holder.lock("nested").lock().await.unwrap();
    let ttl = pttl(&mut raw, "nested").await;
    assert!(
        ttl > 0 && ttl <= 450,
        "pttl {ttl} after a re-entry 400 ms in"
    );
    let reason = tokio::time::timeout(GENEROUS, inner.lost()).await.unwrap();
    assert_eq!(reason, LostReason::MaxHoldReached);
    drop(inner);
    assert_eq!(
        outer.unlock().await.unwrap_err().lost_reason(),
        Some(LostReason::MaxHoldReached)
    );

    // A fixed lease longer than the cap is cut to it too.
    let guard = holder
        .lock("fixed")
        .with_max_hold(Duration::from_millis(500))
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let ttl = pttl(&mut raw, "fixed").await;
    assert!(ttl > 0 && ttl <= 500, "pttl {ttl}");
    let reason = tokio::time::timeout(GENEROUS, guard.lost()).await.unwrap();
    assert_eq!(reason, LostReason::MaxHoldReached);
}

#[tokio::test]
async fn a_cap_the_hold_never_reaches_changes_nothing() {
    let server = RedisServer::start();
    // A 1 s watchdog renews every 333 ms: a renewal late by up to 366 ms on a loaded
    // machine still leaves more than 300 ms.
    let holder = client_with_watchdog(&server, Duration::from_secs(1)).await;
    let guard = holder
        .lock("roomy")
        .with_max_hold(Duration::from_secs(60))
        .lock()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(!guard.is_lost());
    let ttl = pttl(&mut server.raw().await, "roomy").await;
    assert!(
        ttl > 300 && ttl <= 1_000,
        "pttl {ttl}: full watchdog leases"
    );
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_bad_cap_is_refused_with_nothing_sent() {
    let server = RedisServer::start();
    let holder = client(&server).await;
    let lock = holder.lock("refused").with_max_hold(Duration::ZERO);
    assert!(lock.lock().await.unwrap_err().is_invalid_argument());
    assert!(lock.try_lock().await.unwrap_err().is_invalid_argument());
    assert!(lock
        .try_lock_with(Duration::from_secs(1), Duration::from_secs(1))
        .await
        .unwrap_err()
        .is_invalid_argument());
    let huge = holder.lock("refused").with_max_hold(Duration::MAX);
    assert!(huge.lock().await.unwrap_err().is_invalid_argument());
    let group = RedLock::new(vec![holder.lock("refused")]).with_max_hold(Duration::ZERO);
    assert!(group.lock().await.unwrap_err().is_invalid_argument());
    assert_eq!(pttl(&mut server.raw().await, "refused").await, -2);
}

#[tokio::test]
async fn a_redlock_with_a_cap_is_lost_with_max_hold_reached_on_every_master() {
    let group = RedisGroup::start(3);
    let mut clients = Vec::new();
    for server in &group.servers {
        clients.push(client_with_watchdog(server, Duration::from_millis(300)).await);
    }
    let redlock = RedLock::new(clients.iter().map(|c| c.lock("capped")).collect())
        .with_node_timeout(Duration::from_millis(200))
        .with_max_hold(Duration::from_millis(900));
    let guard = redlock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!guard.is_lost(), "renewed past its first lease");
    let reason = tokio::time::timeout(GENEROUS, guard.lost()).await.unwrap();
    assert_eq!(reason, LostReason::MaxHoldReached);
    assert!(guard.is_lost());
    assert!(
        guard.valid_until() <= Instant::now(),
        "a lost group's validity is when it was lost"
    );
    for server in &group.servers {
        let mut raw = server.raw().await;
        assert!(pttl(&mut raw, "capped").await < 100);
    }
    assert_eq!(
        guard.unlock().await.unwrap_err().lost_reason(),
        Some(LostReason::MaxHoldReached)
    );
}

#[tokio::test]
async fn capped_and_uncapped_locks_renewed_in_one_batch_each_get_their_own_lease() {
    let server = RedisServer::start();
    // One renewal batch of all six locks every 100 ms.
    let holder = client_with_watchdog(&server, Duration::from_millis(300)).await;
    let mut guards = Vec::new();
    for (name, cap) in [
        ("free:1", None),
        ("capped:1", Some(500)),
        ("free:2", None),
        ("capped:2", Some(700)),
        ("free:3", None),
        ("capped:3", Some(600)),
    ] {
        let mut lock = holder.lock(name);
        if let Some(ms) = cap {
            lock = lock.with_max_hold(Duration::from_millis(ms));
        }
        guards.push((name, cap, Instant::now(), lock.lock().await.unwrap()));
    }
    // Past the first renewals, the capped ones are near their caps.
    tokio::time::sleep(Duration::from_millis(380)).await;
    let mut raw = server.raw().await;
    for (name, cap, taken, _) in &guards {
        let ttl = pttl(&mut raw, name).await;
        match cap {
            None => assert!(ttl > 150 && ttl <= 300, "{name}: pttl {ttl}"),
            Some(ms) => {
                let left = *ms as i64 - taken.elapsed().as_millis() as i64;
                assert!(
                    ttl > 0 && ttl <= left + 20,
                    "{name}: pttl {ttl}, {left} ms of cap left"
                );
            }
        }
    }
    for (name, cap, _, guard) in guards {
        if cap.is_some() {
            let reason = tokio::time::timeout(GENEROUS, guard.lost()).await.unwrap();
            assert_eq!(reason, LostReason::MaxHoldReached, "{name}");
            // Once lost, its validity is in the past.
            assert!(guard.valid_until() <= Instant::now());
        } else {
            assert!(!guard.is_lost(), "{name}");
            guard.unlock().await.unwrap();
        }
    }
}
