//! A Redis Cluster (every master scanned, keys read on their slot's master) and Sentinel
//! (the master it names).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::{java_lock, listed, lock, rlock};
use testkit::{RedisCluster, RedisSentinels};

#[tokio::test]
async fn a_cluster_is_listed_master_by_master() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with(3, 0))
        .await
        .unwrap();
    let seeds = cluster.seeds();
    let seed = seeds[0].clone();
    let client = redis_rlock::Client::connect_cluster(&seeds).await.unwrap();

    // Names spread until every master holds at least one lock.
    let masters: BTreeSet<u16> = cluster.masters().iter().map(|m| m.port()).collect();
    assert_eq!(masters.len(), 3);
    let mut raw = cluster.raw().await;
    let mut names = Vec::new();
    let mut covered = BTreeSet::new();
    for n in 0.. {
        let name = format!("shard:{n}");
        covered.insert(cluster.master_of_key(&name).port());
        java_lock(&mut raw, &name, n, 1, Some(60_000)).await;
        names.push(name);
        if covered == masters {
            break;
        }
    }
    let guard = client.fair_lock("cluster-fair").lock().await.unwrap();
    let waiter = redis_rlock::Client::connect_cluster(&seeds).await.unwrap();
    let queued = tokio::spawn({
        let lock = waiter.fair_lock("cluster-fair");
        async move { lock.lock().await }
    });
    let queue_key = "redisson_lock_queue:{cluster-fair}";
    let mut joined = false;
    for _ in 0..100 {
        let len: i64 = redis::cmd("LLEN")
            .arg(queue_key)
            .query_async(&mut raw)
            .await
            .unwrap();
        if len == 1 {
            joined = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(joined);

    let run = rlock(&["--cluster", &seed, "list", "--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let listing = run.json();
    for name in &names {
        let found = lock(&listing, name);
        let port = cluster.master_of_key(name).port();
        assert_eq!(found["node"], format!("127.0.0.1:{port}"), "{found}");
    }
    let fair = lock(&listing, "cluster-fair");
    assert_eq!(
        (fair["kind"].as_str(), fair["queue_length"].as_u64()),
        (Some("fair"), Some(1))
    );
    let nodes: BTreeSet<&str> = listing["scan"]["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.len(), 3, "every master is scanned: {listing:#}");

    // `show` asks every master for subscribers, and says it counts per node.
    let shown = rlock(&["--cluster", &seed, "show", "cluster-fair", "--json"])
        .await
        .json();
    assert_eq!(shown["queue"].as_array().unwrap().len(), 1);
    assert_eq!(shown["queue"][0]["subscribers"], 1, "{shown:#}");
    assert_eq!(
        shown["subscribers"][0]["per_node"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(shown["subscribers_note"].as_str().unwrap().contains("node"));

    // Unlock through the library's cluster client: the queued waiter takes the lock.
    let run = rlock(&["--cluster", &seed, "unlock", "cluster-fair", "--yes"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let next = tokio::time::timeout(Duration::from_secs(5), queued)
        .await
        .expect("the cluster waiter was not woken")
        .unwrap()
        .unwrap();
    next.unlock().await.unwrap();
    drop(guard);
    let after = rlock(&["--cluster", &seed, "list", "--json"]).await.json();
    assert!(!listed(&after, "cluster-fair") || lock(&after, "cluster-fair")["held"] == false);
}

#[tokio::test]
async fn sentinel_reads_the_master_it_names() {
    let set = tokio::task::spawn_blocking(|| RedisSentinels::start("rlock-m"))
        .await
        .unwrap();
    let mut raw = set.master().raw().await;
    java_lock(&mut raw, "via-sentinel", 9, 2, Some(60_000)).await;
    let sentinel = set.sentinel_urls()[0].clone();
    let run = rlock(&[
        "--sentinel",
        &sentinel,
        "--master",
        "rlock-m",
        "list",
        "--json",
    ])
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let listing = run.json();
    let found = lock(&listing, "via-sentinel");
    assert_eq!(found["node"], format!("127.0.0.1:{}", set.master().port()));
    assert_eq!(found["holders"][0]["count"], 2);
    let unknown = rlock(&["--sentinel", &sentinel, "--master", "nobody", "list"]).await;
    assert_eq!(unknown.code, 3, "{unknown:?}");
    let run = rlock(&[
        "--sentinel",
        &sentinel,
        "--master",
        "rlock-m",
        "unlock",
        "via-sentinel",
        "--yes",
    ])
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(set.master().cli(&["EXISTS", "via-sentinel"]), "0");
}
