//! The expirable semaphore as Redis holds it: the count and the permits' sorted set read
//! raw, never more holders than permits, and the same on a cluster in both pub/sub modes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis_rlock::{Client, Error, LostReason, PubSubMode};
use testkit::{
    client, count_becomes, dbsize, raw_get, server_millis, RedisCluster, RedisServer, Waiting,
};

use super::{permits, LEASE, WOKEN_WITHIN};

#[tokio::test]
async fn the_count_and_the_permits_in_redis() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("gpu");

    assert!(
        gpu.try_acquire(LEASE).await.unwrap().is_none(),
        "nothing set"
    );
    assert!(gpu.try_set_permits(4).await.unwrap());
    assert!(!gpu.try_set_permits(9).await.unwrap());
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));

    let before = server_millis(&mut raw).await;
    let permit = gpu.acquire(Duration::from_secs(10)).await.unwrap();
    let after = server_millis(&mut raw).await;
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("3"));
    let taken = permits(&mut raw, "{gpu}:timeout").await;
    assert_eq!(taken.len(), 1);
    // The member is 16 bytes; id() is their hex, as Redisson shows it.
    assert_eq!(taken[0].0, permit.id());
    assert_eq!(permit.id().len(), 32);
    assert!(permit
        .id()
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    // The expiry: the lease from the moment the script ran, on the server's clock.
    let expiry = taken[0].1;
    assert!(
        (before + 10_000..=after + 10_000).contains(&expiry),
        "{before} {expiry} {after}"
    );
    assert_eq!(permit.semaphore(), "gpu");
    assert!(!permit.is_lost());
    let valid = permit
        .valid_until()
        .duration_since(std::time::Instant::now());
    assert!(valid > Duration::from_secs(9) && valid <= Duration::from_secs(10));
    assert_eq!(gpu.available_permits().await.unwrap(), 3);
    assert_eq!(gpu.acquired_permits().await.unwrap(), 1);
    assert_eq!(
        client.status().held_locks,
        1,
        "the client watches its permit"
    );

    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));
    assert_eq!(dbsize(&mut raw).await, 1, "the last permit's set is gone");
    assert_eq!(client.status().held_locks, 0);

    // Drop releases in the background.
    let dropped = gpu.acquire(LEASE).await.unwrap();
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("3"));
    drop(dropped);
    count_becomes(&raw, "gpu", "4").await;

    // forget() keeps it taken; its id releases it from anywhere.
    let id = gpu.acquire(LEASE).await.unwrap().forget();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("3"));
    assert_eq!(permits(&mut raw, "{gpu}:timeout").await[0].0, id);
    let other = testkit::client(&server).await;
    let elsewhere = other.permit_expirable_semaphore("gpu");
    assert!(elsewhere.try_release(&id.to_uppercase()).await.unwrap());
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));
    assert!(!elsewhere.try_release(&id).await.unwrap(), "released once");
    let again = elsewhere.release_by_id(&id).await.unwrap_err();
    assert!(matches!(
        again,
        Error::PermitLost {
            reason: LostReason::Released,
            ..
        }
    ));
    assert!(again.is_lock_lost());
    assert!(again.to_string().contains(&id), "{again}");
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));

    // Four taken: a fifth is refused until one comes back.
    let all: Vec<_> = futures_util::future::join_all((0..4).map(|_| gpu.acquire(LEASE)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(gpu.try_acquire(LEASE).await.unwrap().is_none());
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("0"));
    assert_eq!(permits(&mut raw, "{gpu}:timeout").await.len(), 4);
    for permit in all {
        permit.release().await.unwrap();
    }
    gpu.add_permits(2).await.unwrap();
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("6"));
    assert!(gpu.delete().await.unwrap());
    assert_eq!(dbsize(&mut raw).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_holders_than_permits() {
    const PERMITS: usize = 3;
    const TASKS: usize = 10;
    const ROUNDS: usize = 6;
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let clients = [client(&server).await, client(&server).await];
    assert!(clients[0]
        .permit_expirable_semaphore("pool")
        .try_set_permits(PERMITS as u64)
        .await
        .unwrap());
    let (in_use, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let pool = clients[task % clients.len()].permit_expirable_semaphore("pool");
        let (in_use, most) = (in_use.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let permit = pool.acquire(LEASE).await.unwrap();
                let now = in_use.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
                in_use.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("the tasks finish")
            .unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= PERMITS, "{most} permits at once, of {PERMITS}");
    assert!(most >= 2, "{most}");
    assert_eq!(raw_get(&mut raw, "pool").await.as_deref(), Some("3"));
    assert!(permits(&mut raw, "{pool}:timeout").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_in_both_pubsub_modes() {
    let cluster = RedisCluster::start_async().await;
    for (mode, name) in [
        (PubSubMode::Classic, "gpu:classic"),
        (PubSubMode::Sharded, "gpu:sharded"),
    ] {
        let connect = || {
            Client::cluster_builder(cluster.seeds())
                .pubsub_mode(mode)
                .build()
        };
        let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
        let gpu = a.permit_expirable_semaphore(name);
        assert!(gpu.try_set_permits(1).await.unwrap());
        let held = gpu.acquire(LEASE).await.unwrap();
        let waiter = {
            let gpu = b.permit_expirable_semaphore(name);
            Waiting::listening(&b, 1, async move { gpu.acquire(LEASE).await.unwrap() }).await
        };
        let woken = waiter
            .woken_by(async { held.release().await.unwrap() })
            .await;
        assert!(woken.after < WOKEN_WITHIN, "{mode:?}: {:?}", woken.after);
        let permit = woken.value;
        let master = cluster.master_of_key(name);
        let timeouts = format!("{{{name}}}:timeout");
        assert_eq!(master.cli(&["ZCARD", &timeouts]), "1", "{mode:?}");
        permit.release().await.unwrap();
        assert_eq!(master.cli(&["GET", name]), "1", "{mode:?}");
    }
}
