//! Scripts flushed everywhere, and a promoted replica that never had them, still run; a
//! client whose first seed is dead connects and works.

use redis_rlock::Client;
use testkit::{RedisCluster, RedisServer};

use super::{connect_with_watchdog, hash_on, hash_on_master, renewed_on, GENEROUS, WATCHDOG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_flushed_everywhere_or_missing_on_a_promoted_replica_still_run() {
    let cluster = RedisCluster::start_async().await;
    let client = connect_with_watchdog(&cluster, WATCHDOG).await;
    let keys: Vec<String> = (0..3)
        .map(|i| cluster.key_on_master(i, "flushed"))
        .collect();
    let held = cluster.key_on_master(0, "renewed");
    let guard = client.lock(&held).lock().await.unwrap();

    for node in cluster.nodes() {
        let _: () = node.query(redis::cmd("SCRIPT").arg("FLUSH")).unwrap();
    }
    // Acquire, re-enter, release on every master, and the watchdog's renewal.
    for key in &keys {
        let lock = client.lock(key);
        let outer = lock.lock().await.unwrap();
        let inner = lock.lock().await.unwrap();
        assert_eq!(
            *hash_on_master(&cluster, key).await.values().next().unwrap(),
            2
        );
        inner.unlock().await.unwrap();
        outer.unlock().await.unwrap();
    }
    renewed_on(cluster.master_of_key(&held), &held).await;

    // A replica without the scripts is promoted: the next call there loads them.
    let master = cluster.master_of_key(&keys[1]);
    let replica = cluster.replica_of(master);
    let _: () = replica.query(redis::cmd("SCRIPT").arg("FLUSH")).unwrap();
    let promoted = cluster.failover(master).await;
    let lock = client.lock(&keys[1]);
    let g = lock.lock().await.unwrap();
    assert_eq!(hash_on(promoted, &keys[1]).await.values().next(), Some(&1));
    g.unlock().await.unwrap();
    assert!(hash_on(promoted, &keys[1]).await.is_empty());
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_whose_first_seed_is_dead_connects_and_works() {
    let mut cluster = RedisCluster::start_async().await;
    let dead = cluster.kill_master(0);
    cluster.wait_until_ok().await;
    let mut seeds = vec![format!("redis://127.0.0.1:{dead}")];
    seeds.extend(
        cluster
            .nodes()
            .iter()
            .filter(|n| n.port() != dead)
            .map(RedisServer::url),
    );
    let client = tokio::time::timeout(GENEROUS, Client::connect_cluster(seeds))
        .await
        .expect("connecting returns")
        .expect("a cluster client connects past a dead seed");
    // A lock on every master, the promoted one too.
    for i in 0..3 {
        let key = cluster.key_on_master(i, "seeded");
        let guard = client.lock(&key).lock().await.unwrap();
        assert_eq!(hash_on_master(&cluster, &key).await.len(), 1);
        guard.unlock().await.unwrap();
        assert!(hash_on_master(&cluster, &key).await.is_empty());
    }
}
