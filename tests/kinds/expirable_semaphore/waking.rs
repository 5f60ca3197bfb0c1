//! Waiters woken: by a release far sooner than the re-check bound, by an expiry no message
//! announces, by a killed holder's lease running out; and a cancelled wait taking nothing.

use std::time::{Duration, Instant};

use redis_rlock::{Client, Error, LostReason};
use testkit::{client, count_becomes, eventually, raw_get, RedisServer, Waiting};

use super::{permits, GENEROUS, LEASE, WOKEN_WITHIN};

#[tokio::test]
async fn a_release_wakes_a_waiter_far_sooner_than_the_recheck() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("wake");
    assert!(gpu.try_set_permits(1).await.unwrap());
    for _ in 0..3 {
        let held = gpu.acquire(LEASE).await.unwrap();
        let waiter = {
            let gpu = waiter_client.permit_expirable_semaphore("wake");
            Waiting::listening(&waiter_client, 1, async move {
                gpu.acquire(LEASE).await.unwrap()
            })
            .await
        };
        assert_eq!(
            server.cli(&["PUBSUB", "NUMSUB", "redisson_sc:{wake}"]),
            "redisson_sc:{wake}\n1"
        );
        let woken = waiter
            .woken_by(async { held.release().await.unwrap() })
            .await;
        let took = woken.after;
        assert!(took < WOKEN_WITHIN, "woken after {took:?}");
        woken.value.release().await.unwrap();
        eventually("the waiter unsubscribed", GENEROUS, || {
            waiter_client.status().subscribed_channels == 0
        })
        .await;
    }
}

#[tokio::test]
async fn a_lease_that_runs_out_frees_the_permit_for_a_waiter_without_any_message() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("lease");
    assert!(gpu.try_set_permits(1).await.unwrap());

    let stale = gpu.acquire(Duration::from_millis(600)).await.unwrap();
    let lost = stale.lost();
    let taken_at = Instant::now();
    let waiter = {
        let gpu = waiter_client.permit_expirable_semaphore("lease");
        tokio::spawn(async move {
            let permit = gpu.acquire(LEASE).await.unwrap();
            (Instant::now(), permit)
        })
    };
    // The holder is told at its deadline, once Redis agreed (a round trip): nobody else
    // extended the lease.
    let deadline = stale.valid_until();
    let reason = tokio::time::timeout(GENEROUS, lost).await.unwrap();
    assert_eq!(reason, LostReason::Expired);
    let late = std::time::Instant::now().saturating_duration_since(deadline);
    assert!(
        late < Duration::from_millis(400),
        "told {late:?} after the deadline"
    );
    let (got, permit) = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    let waited = got - taken_at;
    // No message announces an expiry: the waiter re-checked at the nearest expiry, far
    // sooner than the 5 s re-check.
    assert!(
        waited >= Duration::from_millis(550) && waited < Duration::from_millis(1_600),
        "{waited:?}"
    );
    assert!(stale.is_lost());
    // Releasing the lost permit: refused, nothing sent, the new holder untouched.
    let err = stale.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::PermitLost {
                reason: LostReason::Expired,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(raw_get(&mut raw, "lease").await.as_deref(), Some("0"));
    assert_eq!(permits(&mut raw, "{lease}:timeout").await[0].0, permit.id());
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "lease").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn a_killed_holders_permit_comes_back_after_its_lease() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let survivor = client(&server).await;
    let gpu = survivor.permit_expirable_semaphore("crash");
    assert!(gpu.try_set_permits(1).await.unwrap());

    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = server.url();
    let (taken_tx, taken_rx) = tokio::sync::oneshot::channel();
    doomed.spawn(async move {
        let client = Client::connect(url).await.unwrap();
        let permit = client
            .permit_expirable_semaphore("crash")
            .acquire(Duration::from_millis(800))
            .await
            .unwrap();
        let _ = taken_tx.send(Instant::now());
        std::future::pending::<()>().await;
        drop(permit);
    });
    let taken_at = taken_rx.await.unwrap();
    doomed.shutdown_background();
    assert_eq!(raw_get(&mut raw, "crash").await.as_deref(), Some("0"));
    let permit = tokio::time::timeout(GENEROUS, gpu.acquire(LEASE))
        .await
        .unwrap()
        .unwrap();
    let waited = taken_at.elapsed();
    assert!(waited >= Duration::from_millis(750), "{waited:?}");
    assert!(waited < Duration::from_millis(2_500), "{waited:?}");
    let taken = permits(&mut raw, "{crash}:timeout").await;
    assert_eq!(taken.len(), 1, "the dead holder's permit was given back");
    assert_eq!(taken[0].0, permit.id());
    permit.release().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_wait_takes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("cancel");
    assert!(gpu.try_set_permits(0).await.unwrap());
    let waiting = {
        let gpu = gpu.clone();
        tokio::spawn(async move { gpu.acquire(LEASE).await })
    };
    eventually("the waiter subscribed", GENEROUS, || {
        client.status().subscribed_channels == 1
    })
    .await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    eventually("the subscription left", GENEROUS, || {
        client.status().subscribed_channels == 0
    })
    .await;
    gpu.add_permits(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(raw_get(&mut raw, "cancel").await.as_deref(), Some("1"));
    assert!(permits(&mut raw, "{cancel}:timeout").await.is_empty());

    for delay_us in [0, 100, 300, 600, 1_000, 2_000] {
        let gpu = gpu.clone();
        let call = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_micros(delay_us), gpu.acquire(LEASE)).await
        });
        if let Ok(Ok(permit)) = call.await.unwrap() {
            drop(permit);
        }
        count_becomes(&raw, "cancel", "1").await;
        assert!(permits(&mut raw, "{cancel}:timeout").await.is_empty());
    }
    assert_eq!(client.status().held_locks, 0);
}
