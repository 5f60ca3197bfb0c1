//! A `RedLock` with Redis Cluster clients among its voters: a cluster is one voter, so two
//! clients of one cluster are refused, whether they share a seed or not (the group asks
//! each cluster which nodes it is made of); clients of independent clusters and single
//! masters make a working `RedLock`; a cluster that cannot be asked does not stop the
//! group, and is asked again at the next call. Clusters of one master each, to start fast.

use std::time::Duration;

use redis_rlock::{Client, RedLock};
use testkit::group::NODE_TIMEOUT;
use testkit::{client, eventually, lock_hash, RedisCluster, RedisGroup};

async fn start_cluster() -> RedisCluster {
    tokio::task::spawn_blocking(|| RedisCluster::start_with(1, 0))
        .await
        .expect("the cluster starts")
}

async fn cluster_client(seeds: &[String]) -> Client {
    Client::connect_cluster(seeds)
        .await
        .expect("a cluster client connects")
}

/// Keys on every node of `cluster` and every server of `group`: nothing may be written
/// by a refused group.
async fn keys(cluster: &RedisCluster, group: &RedisGroup) -> i64 {
    let mut total = 0;
    for server in cluster.nodes().iter().chain(&group.servers) {
        total += testkit::dbsize(&mut server.raw().await).await;
    }
    total
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clients_of_one_cluster_are_one_voter_and_refused() {
    let cluster = start_cluster().await;
    let group = RedisGroup::start(2);
    let node = cluster.nodes()[0].port();
    // One cluster reached through two spellings of its one node's address: the seeds
    // differ, the cluster is the same.
    let a = cluster_client(&[format!("redis://127.0.0.1:{node}")]).await;
    let b = cluster_client(&[format!("redis://localhost:{node}")]).await;
    let (s1, s2) = (
        client(&group.servers[0]).await,
        client(&group.servers[1]).await,
    );

    let same_cluster =
        RedLock::new(vec![a.lock("k"), s1.lock("k"), b.lock("k")]).with_node_timeout(NODE_TIMEOUT);
    let err = same_cluster.try_lock().await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(err.to_string().contains("same Redis Cluster"), "{err}");
    let err = same_cluster.lock().await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");

    // A seed given twice is refused before anything is asked.
    let c = cluster_client(&[
        format!("redis://localhost:{node}"),
        format!("redis://127.0.0.1:{node}"),
    ])
    .await;
    let shared_seed =
        RedLock::new(vec![a.lock("k"), c.lock("k"), s2.lock("k")]).with_node_timeout(NODE_TIMEOUT);
    let err = shared_seed.try_lock().await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(err.to_string().contains("given twice"), "{err}");
    assert_eq!(keys(&cluster, &group).await, 0, "nothing written");

    // A MultiLock may take several locks on one cluster.
    let multi = redis_rlock::MultiLock::new(vec![a.lock("x"), b.lock("y")]);
    multi.lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_clusters_and_masters_make_a_redlock() {
    let (one, two) = (start_cluster().await, start_cluster().await);
    let group = RedisGroup::start(1);
    let voters = [
        cluster_client(&one.seeds()).await,
        cluster_client(&two.seeds()).await,
        client(&group.servers[0]).await,
    ];
    let redlock = RedLock::new(voters.iter().map(|c| c.lock("jobs")).collect())
        .with_node_timeout(NODE_TIMEOUT);
    let guard = redlock.lock().await.unwrap();
    // It returns at a majority; the last voter's answer joins the guard when it comes.
    eventually("every voter holds it", Duration::from_secs(5), || {
        guard.held_on() == 3
    })
    .await;
    for node in [&one.nodes()[0], &two.nodes()[0], &group.servers[0]] {
        let hash = lock_hash(&mut node.raw().await, "jobs").await;
        assert_eq!(
            hash.values().copied().collect::<Vec<_>>(),
            [1],
            "{}",
            node.port()
        );
    }
    // A rival of the same three voters waits its turn.
    let rival: Vec<Client> = vec![
        cluster_client(&one.seeds()).await,
        cluster_client(&two.seeds()).await,
        client(&group.servers[0]).await,
    ];
    let rival = RedLock::new(rival.iter().map(|c| c.lock("jobs")).collect())
        .with_node_timeout(NODE_TIMEOUT);
    assert!(rival.try_lock().await.unwrap().is_none());
    guard.unlock().await.unwrap();
    rival
        .try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_cannot_be_asked_is_asked_again_at_the_next_call() {
    let cluster = start_cluster().await;
    let group = RedisGroup::start(3);
    let node = &cluster.nodes()[0];
    let a = cluster_client(&[format!("redis://127.0.0.1:{}", node.port())]).await;
    let b = cluster_client(&[format!("redis://localhost:{}", node.port())]).await;
    let mut voters = vec![a, b];
    for server in &group.servers {
        voters.push(client(server).await);
    }
    let redlock =
        RedLock::new(voters.iter().map(|c| c.lock("k")).collect()).with_node_timeout(NODE_TIMEOUT);

    // The cluster is frozen: it cannot say what it is made of, nor vote; the three single
    // masters are a majority of five, and the lock is taken all the same.
    node.freeze();
    let guard = tokio::time::timeout(Duration::from_secs(10), redlock.lock())
        .await
        .expect("lock() returns with the cluster frozen")
        .expect("a majority of single masters takes it");
    assert_eq!(guard.held_on(), 3);
    guard.unlock().await.unwrap();

    // Thawed, it answers, and the group finds the same cluster twice.
    node.thaw();
    let err = redlock.try_lock().await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(err.to_string().contains("same Redis Cluster"), "{err}");
}
