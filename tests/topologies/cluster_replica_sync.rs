//! Replica sync on a Redis Cluster: `WAIT` goes to the master that took each lock, so a
//! lock is on that master's replica when `lock()` returns; a master whose replica stops
//! acknowledging fails only the acquires of its own slots, with nothing left behind; and
//! renewal rounds, which write to every master, wait on each.

use std::time::{Duration, Instant};

use redis_rlock::{Client, Error, LostReason};
use testkit::{key_exists, lock_hash, RedisCluster};

const GENEROUS: Duration = Duration::from_secs(20);
/// Roomy on a loaded machine, where a healthy replica acknowledges in about 1 ms.
const SYNC_TIMEOUT: Duration = Duration::from_millis(500);

async fn synced_client(cluster: &RedisCluster, watchdog: Duration) -> Client {
    Client::cluster_builder(cluster.seeds())
        .replica_sync(1, SYNC_TIMEOUT)
        .watchdog_timeout(watchdog)
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .expect("a cluster client with replica sync connects")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_is_on_its_masters_replica_when_lock_returns() {
    let cluster = RedisCluster::start_async().await;
    let client = synced_client(&cluster, Duration::from_secs(30)).await;
    for name in (0..3)
        .map(|i| cluster.key_on_master(i, "synced"))
        .collect::<Vec<_>>()
    {
        let master = cluster.master_of_key(&name);
        let mut on_replica = cluster.replica_of(master).raw().await;
        // A replica answers reads of its master's slots once told the client may read.
        redis::cmd("READONLY")
            .query_async::<()>(&mut on_replica)
            .await
            .unwrap();
        let guard = client.lock(&name).lock().await.unwrap();
        // Read at once from the replica: WAIT made sure it has the write.
        let hash = lock_hash(&mut on_replica, &name).await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{name} on its replica");
        guard.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_replica_fails_only_its_own_masters_acquires_and_renewals() {
    let cluster = RedisCluster::start_async().await;
    // Renewed every 2 s, each round waiting up to the sync timeout on the silent master:
    // a lock of another master has 4 s of its lease to spare for a slow round.
    let client = synced_client(&cluster, Duration::from_secs(6)).await;
    let held = (0..3)
        .map(|i| cluster.key_on_master(i, "held"))
        .collect::<Vec<_>>();
    let fresh = (0..3)
        .map(|i| cluster.key_on_master(i, "fresh"))
        .collect::<Vec<_>>();
    let masters = cluster.masters();
    let on_silent_master = client.lock(&held[0]).lock().await.unwrap();
    let elsewhere = client.lock(&held[1]).lock().await.unwrap();

    let silent = cluster.replica_of(masters[0]);
    silent.freeze();
    let began = Instant::now();
    let refused = client.lock(&fresh[0]).lock().await;
    assert!(
        matches!(refused, Err(Error::NotReplicated { .. })),
        "{refused:?}"
    );
    assert!(
        began.elapsed() < GENEROUS,
        "failed in {:?}",
        began.elapsed()
    );
    let mut on_master = masters[0].raw().await;
    assert!(
        !key_exists(&mut on_master, &fresh[0]).await,
        "the refused acquire was rolled back"
    );
    // The other masters' replicas answer: their locks are taken.
    let other = client.lock(&fresh[2]).lock().await.unwrap();

    // Renewals on the silent replica's master stop counting, and that lock runs out of
    // validity (a renewal no replica has would not survive a failover of its master);
    // the renewals of the other masters' locks go on counting.
    let reason = tokio::time::timeout(GENEROUS, on_silent_master.lost()).await;
    // A round or two more, to see the others' renewals still count.
    tokio::time::sleep(Duration::from_millis(3000)).await;
    silent.thaw();
    assert_eq!(reason.ok(), Some(LostReason::ConnectionLost));
    assert!(
        !elsewhere.is_lost(),
        "a lock of another master lost its validity"
    );
    assert!(!other.is_lost());
}
