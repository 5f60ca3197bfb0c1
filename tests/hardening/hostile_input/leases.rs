//! Leases and hold caps: under 10 ms or over ten years refused with nothing written, for
//! single locks and groups; 10 ms and ten years accepted.

use std::time::Duration;

use redis_rlock::{DistributedLock, LockGuard, MultiLock, RedLock};
use testkit::{bounded, client, RedisServer};

use super::{expect_invalid, BoxedLock, KINDS, MIN_LEASE, NS, TEN_YEARS};

/// Leases just outside the range (10 ms to ten years) and far outside it.
fn bad_leases() -> [Duration; 6] {
    [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_millis(9),
        MIN_LEASE - NS,
        TEN_YEARS + Duration::from_millis(1),
        Duration::MAX,
    ]
}

/// Every call of `lock` that takes a lease refuses each of [`bad_leases`].
async fn refuses_bad_leases(kind: &str, lock: &impl DistributedLock<Guard = LockGuard>) {
    for lease in bad_leases() {
        let what = format!("{kind} lock_with_lease({lease:?})");
        expect_invalid(&what, bounded(&what, lock.lock_with_lease(lease)).await);
        let what = format!("{kind} try_lock_with(1 s, {lease:?})");
        let result = lock.try_lock_with(Duration::from_secs(1), lease);
        expect_invalid(&what, bounded(&what, result).await);
    }
}

#[tokio::test]
async fn leases_under_ten_ms_or_over_ten_years_are_refused_with_nothing_written() {
    let server = RedisServer::start();
    let client = client(&server).await;
    refuses_bad_leases("RLock", &client.lock("lease")).await;
    refuses_bad_leases("FairLock", &client.fair_lock("lease")).await;
    refuses_bad_leases("FencedLock", &client.fenced_lock("lease")).await;
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn a_ten_ms_lease_and_a_ten_year_lease_are_accepted() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in KINDS {
        let lock = BoxedLock::of(&client, kind, &format!("short:{kind}"));
        // A 10 ms lease may run out before the call returns on a slow machine: then the
        // guard is lost at once, but the lease itself was taken, not refused.
        let guard = lock.lock_with_lease(MIN_LEASE).await;
        assert!(guard.is_ok(), "{kind} 10 ms lease: {guard:?}");
        drop(guard);
        let guard = lock.try_lock_with(Duration::from_secs(1), MIN_LEASE).await;
        assert!(guard.is_ok(), "{kind} try_lock_with 10 ms lease: {guard:?}");
        drop(guard);

        let name = format!("long:{kind}");
        let lock = BoxedLock::of(&client, kind, &name);
        let guard = lock.lock_with_lease(TEN_YEARS).await.unwrap();
        let ttl = testkit::pttl(&mut raw, &name).await;
        assert!(
            ttl > (TEN_YEARS - Duration::from_secs(60)).as_millis() as i64,
            "{kind}: pttl {ttl}"
        );
        guard.unlock().await.unwrap();
        let guard = lock
            .try_lock_with(Duration::ZERO, TEN_YEARS)
            .await
            .unwrap()
            .expect("a free lock is taken");
        guard.unlock().await.unwrap();
        assert!(
            !testkit::key_exists(&mut raw, &name).await,
            "{kind}: released"
        );
    }
}

#[tokio::test]
async fn group_leases_under_ten_ms_or_over_ten_years_are_refused_with_nothing_written() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let red = RedLock::new(vec![client.lock("group:red")]);
    let fenced_red = RedLock::new(vec![client.fenced_lock("group:fenced")]);
    let multi = MultiLock::new(vec![client.lock("group:a"), client.lock("group:b")]);
    for lease in bad_leases() {
        for (kind, lock_with_lease, try_lock_with) in [
            (
                "RedLock",
                red.lock_with_lease(lease).await.map(drop),
                red.try_lock_with(Duration::from_secs(1), lease)
                    .await
                    .map(drop),
            ),
            (
                "RedLock<Fenced>",
                fenced_red.lock_with_lease(lease).await.map(drop),
                fenced_red
                    .try_lock_with(Duration::from_secs(1), lease)
                    .await
                    .map(drop),
            ),
            (
                "MultiLock",
                multi.lock_with_lease(lease).await.map(drop),
                multi
                    .try_lock_with(Duration::from_secs(1), lease)
                    .await
                    .map(drop),
            ),
        ] {
            expect_invalid(
                &format!("{kind} lock_with_lease({lease:?})"),
                lock_with_lease,
            );
            expect_invalid(&format!("{kind} try_lock_with({lease:?})"), try_lock_with);
        }
    }
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
}

#[tokio::test]
async fn a_group_accepts_a_ten_ms_lease() {
    let server = RedisServer::start();
    let client = client(&server).await;
    // The node timeout must leave time within the lease; 10 ms is then a valid lease.
    let node_timeout = Duration::from_millis(5);
    let red = RedLock::new(vec![client.lock("group:red")]).with_node_timeout(node_timeout);
    let multi = MultiLock::new(vec![client.lock("group:a"), client.lock("group:b")])
        .with_node_timeout(node_timeout);
    // On a loaded machine a 5 ms node timeout or a 10 ms lease may run out in a round;
    // what matters is that the lease is not refused.
    for (kind, result) in [
        (
            "RedLock",
            red.try_lock_with(Duration::from_secs(2), MIN_LEASE)
                .await
                .map(drop),
        ),
        (
            "MultiLock",
            multi
                .try_lock_with(Duration::from_secs(2), MIN_LEASE)
                .await
                .map(drop),
        ),
    ] {
        if let Err(e) = result {
            assert!(!e.is_invalid_argument(), "{kind}: 10 ms lease refused: {e}");
        }
    }
    let long = RedLock::new(vec![client.lock("group:long")]);
    let guard = long.lock_with_lease(TEN_YEARS).await.unwrap();
    guard.unlock().await.unwrap();
}

/// Hold caps just outside the range (10 ms to ten years) and far outside it.
fn bad_caps() -> [Duration; 5] {
    [
        Duration::ZERO,
        Duration::from_millis(1),
        Duration::from_millis(9),
        TEN_YEARS + Duration::from_millis(1),
        Duration::MAX,
    ]
}

#[tokio::test]
async fn max_hold_under_ten_ms_or_over_ten_years_is_refused_with_nothing_written() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let wait = Duration::from_secs(1);
    let lease = Duration::from_secs(10);
    for cap in bad_caps() {
        let lock = client.lock("capped").with_max_hold(cap);
        let fair = client.fair_lock("capped").with_max_hold(cap);
        let fenced = client.fenced_lock("capped").with_max_hold(cap);
        for (kind, lock) in [
            ("RLock", BoxedLock::R(lock)),
            ("FairLock", BoxedLock::Fair(fair)),
            ("FencedLock", BoxedLock::Fenced(fenced)),
        ] {
            for (call, result) in lock.acquire_all(wait, lease).await {
                expect_invalid(&format!("{kind} with_max_hold({cap:?}).{call}"), result);
            }
        }
        let red = RedLock::new(vec![client.lock("capped")]).with_max_hold(cap);
        expect_invalid(
            &format!("RedLock cap {cap:?}"),
            red.try_lock().await.map(drop),
        );
        expect_invalid(&format!("RedLock cap {cap:?}"), red.lock().await.map(drop));
        // A lock's own cap is checked inside a group too.
        let inner = RedLock::new(vec![client.lock("capped").with_max_hold(cap)]);
        expect_invalid(
            &format!("RedLock of a lock capped {cap:?}"),
            inner.try_lock_for(wait).await.map(drop),
        );
        let multi = MultiLock::new(vec![client.lock("capped")]).with_max_hold(cap);
        expect_invalid(
            &format!("MultiLock cap {cap:?}"),
            multi.try_lock_with(wait, lease).await.map(drop),
        );
    }
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
}

#[tokio::test]
async fn max_hold_of_ten_ms_and_of_ten_years_is_accepted() {
    let server = RedisServer::start();
    let client = client(&server).await;
    for cap in [MIN_LEASE, TEN_YEARS] {
        let lock = client
            .lock(format!("capped:{}", cap.as_millis()))
            .with_max_hold(cap);
        let guard = lock.try_lock().await;
        assert!(matches!(guard, Ok(Some(_))), "RLock cap {cap:?}: {guard:?}");
        drop(guard);
        let red =
            RedLock::new(vec![client.lock(format!("red:{}", cap.as_millis()))]).with_max_hold(cap);
        // A 10 ms cap may leave a group no validity after a slow round; it is not refused.
        if let Err(e) = red.try_lock().await {
            assert!(!e.is_invalid_argument(), "RedLock cap {cap:?}: {e}");
        }
    }
}
