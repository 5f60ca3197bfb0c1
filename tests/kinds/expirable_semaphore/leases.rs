//! Permits' leases and their loss: a release by id reaching the holder, a restarted server
//! reported, a lease extended elsewhere kept and released past the deadline, the holder
//! extending its own permit, and `lost()` at the deadline whether asked or not.

use std::time::{Duration, Instant};

use redis_rlock::{Error, LostReason};
use testkit::{client, dbsize, raw_get, server_millis, RedisServer};

use super::{permits, GENEROUS, LEASE};

#[tokio::test]
async fn a_release_by_id_reaches_the_holder() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, other) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("byid");
    assert!(gpu.try_set_permits(2).await.unwrap());

    // By this client: its permit is told at once.
    let permit = gpu.acquire(LEASE).await.unwrap();
    let lost = permit.lost();
    gpu.release_by_id(permit.id()).await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_millis(100), lost)
            .await
            .unwrap(),
        LostReason::Released
    );
    assert_eq!(raw_get(&mut raw, "byid").await.as_deref(), Some("2"));
    let err = permit.release().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Released));
    assert_eq!(
        raw_get(&mut raw, "byid").await.as_deref(),
        Some("2"),
        "not twice"
    );

    // By another client: the holder finds out when it releases, and nothing is released
    // twice, even with the permit taken again by someone else meanwhile.
    let permit = gpu.acquire(LEASE).await.unwrap();
    let elsewhere = other.permit_expirable_semaphore("byid");
    elsewhere.release_by_id(permit.id()).await.unwrap();
    let _again = elsewhere.acquire(LEASE).await.unwrap();
    let _and_again = elsewhere.acquire(LEASE).await.unwrap();
    assert_eq!(raw_get(&mut raw, "byid").await.as_deref(), Some("0"));
    let err = permit.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::PermitLost {
                reason: LostReason::Released,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(raw_get(&mut raw, "byid").await.as_deref(), Some("0"));
    assert_eq!(permits(&mut raw, "{byid}:timeout").await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_is_reported_then_works() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("restart");
    assert!(gpu.try_set_permits(2).await.unwrap());
    let permit = gpu.acquire(LEASE).await.unwrap();
    let lost = permit.lost();

    server.kill();
    let started = Instant::now();
    assert!(gpu
        .available_permits()
        .await
        .unwrap_err()
        .is_connection_error());
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());

    // Back without its data: the next call reconnects, and the permit Redis forgot is
    // reported lost.
    server.restart();
    let started = Instant::now();
    let _ = gpu.available_permits().await;
    let reason = tokio::time::timeout(GENEROUS, lost).await.expect("told");
    assert_eq!(reason, LostReason::Released);
    assert!(started.elapsed() < GENEROUS);
    let err = permit.release().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    let mut raw = server.raw().await;
    assert_eq!(
        dbsize(&mut raw).await,
        0,
        "nothing written by the lost permit"
    );
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(LEASE).await.unwrap();
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "restart").await.as_deref(), Some("1"));
}

/// Another client extends a permit's lease by id (as Redisson's `updateLeaseTime` does):
/// the holder's `lost()` asks Redis at its own deadline and keeps watching instead of
/// saying `Expired`, and its release after that deadline still frees the permit.
#[tokio::test]
async fn a_lease_extended_elsewhere_is_kept_by_its_holder_and_freed_by_its_release() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, other) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("extended");
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(Duration::from_millis(600)).await.unwrap();
    let lost = tokio::spawn(permit.lost());
    let elsewhere = other.permit_expirable_semaphore("extended");
    assert!(elsewhere
        .update_lease_time(permit.id(), Duration::from_secs(5))
        .await
        .unwrap());
    let expiry = permits(&mut raw, "{extended}:timeout").await[0].1;
    let left = expiry - server_millis(&mut raw).await;
    assert!((4_500..=5_000).contains(&left), "{left} ms left in Redis");
    // Past the permit's own deadline: it asked, and watches on.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(
        !lost.is_finished(),
        "lost() resolved though Redis extended the lease"
    );
    assert!(!permit.is_lost());
    assert!(permit.valid_until() > std::time::Instant::now() + Duration::from_secs(2));
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "extended").await.as_deref(), Some("1"));
    assert!(permits(&mut raw, "{extended}:timeout").await.is_empty());
    lost.abort();
}

/// Nobody asked `lost()`: a release after the permit's local deadline asks Redis all the
/// same, and frees a permit whose lease another client extended (the permit would stay
/// taken until the new expiry otherwise).
#[tokio::test]
async fn a_release_past_the_deadline_frees_a_permit_extended_elsewhere() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, other) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("late");
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(Duration::from_millis(400)).await.unwrap();
    assert!(other
        .permit_expirable_semaphore("late")
        .update_lease_time(permit.id(), Duration::from_secs(8))
        .await
        .unwrap());
    tokio::time::sleep_until((permit.valid_until() + Duration::from_millis(300)).into()).await;
    assert!(
        permit.is_lost(),
        "past its deadline it must be assumed lost"
    );
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "late").await.as_deref(), Some("1"));
    assert!(permits(&mut raw, "{late}:timeout").await.is_empty());
}

/// The holder sets a new lease itself: Redis has it, the guard's deadline moves, and a
/// permit that is gone cannot be extended.
#[tokio::test]
async fn a_holder_extends_its_own_permit_and_not_a_lost_one() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let holder = client(&server).await;
    let gpu = holder.permit_expirable_semaphore("own");
    assert!(gpu.try_set_permits(2).await.unwrap());
    let permit = gpu.acquire(Duration::from_millis(500)).await.unwrap();
    let lost = tokio::spawn(permit.lost());
    permit
        .update_lease_time(Duration::from_secs(5))
        .await
        .unwrap();
    let expiry = permits(&mut raw, "{own}:timeout").await[0].1;
    let left = expiry - server_millis(&mut raw).await;
    assert!((4_500..=5_000).contains(&left), "{left} ms left in Redis");
    assert!(permit.valid_until() > std::time::Instant::now() + Duration::from_secs(4));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!lost.is_finished() && !permit.is_lost());
    permit.release().await.unwrap();
    lost.abort();

    // Released by id: lost, and extending it sends nothing.
    let permit = gpu.acquire(LEASE).await.unwrap();
    gpu.release_by_id(permit.id()).await.unwrap();
    let err = permit
        .update_lease_time(Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Released), "{err:?}");
    // By id: false for a permit nobody holds; bad input refused.
    assert!(!gpu
        .update_lease_time(permit.id(), Duration::from_secs(5))
        .await
        .unwrap());
    assert!(gpu
        .update_lease_time("not-hex", Duration::from_secs(5))
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(gpu
        .update_lease_time(permit.id(), Duration::from_millis(1))
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert_eq!(raw_get(&mut raw, "own").await.as_deref(), Some("2"));
}

/// At its deadline a permit nobody extended is lost once Redis agrees, a round trip later;
/// and with Redis unreachable, at the deadline all the same.
#[tokio::test]
async fn a_permit_nobody_extended_is_lost_at_its_deadline_asked_or_not() {
    let mut server = RedisServer::start();
    let holder = client(&server).await;
    let gpu = holder.permit_expirable_semaphore("ends");
    assert!(gpu.try_set_permits(2).await.unwrap());
    for unreachable in [false, true] {
        let permit = gpu.acquire(Duration::from_millis(500)).await.unwrap();
        let deadline = permit.valid_until();
        if unreachable {
            server.kill();
        }
        let reason = tokio::time::timeout(GENEROUS, permit.lost()).await.unwrap();
        let late = std::time::Instant::now().saturating_duration_since(deadline);
        assert_eq!(reason, LostReason::Expired);
        assert!(
            late < Duration::from_millis(400),
            "told {late:?} after the deadline"
        );
        drop(permit);
    }
    server.restart();
}
