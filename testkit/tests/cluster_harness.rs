//! The cluster and sentinel harness itself: each set-up settles, keys land where the harness
//! says, and its faults (manual failover, killed master, slot migration, sentinel failover)
//! end in the topology it reports. Each test has its own processes, since most are
//! destructive. Start-up and fault times are printed (`--nocapture`) to keep an eye on them.

use std::time::Instant;

use redis_rlock_testkit::{key_slot, RedisCluster, RedisSentinels};

async fn set(conn: &mut redis::cluster_async::ClusterConnection, key: &str, value: &str) {
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async::<()>(conn)
        .await
        .expect("SET through the cluster connection");
}

async fn get(conn: &mut impl redis::aio::ConnectionLike, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(conn)
        .await
        .expect("GET")
}

#[tokio::test]
async fn cluster_starts_and_keys_land_on_their_master() {
    let began = Instant::now();
    let cluster = RedisCluster::start();
    eprintln!("3 masters + 3 replicas settled in {:?}", began.elapsed());

    assert_eq!(cluster.seeds().len(), 6);
    let masters = cluster.masters();
    assert_eq!(masters.len(), 3);
    assert_eq!(cluster.replicas().len(), 3);
    assert_eq!(cluster.node_for_slot(0).port(), masters[0].port());
    assert_eq!(cluster.node_for_slot(16383).port(), masters[2].port());
    for master in &masters {
        let replica = cluster.replica_of(master);
        assert!(masters.iter().all(|m| m.port() != replica.port()));
    }

    let mut conn = cluster.raw().await;
    for key in [
        "harness:{alpha}",
        "harness:{beta}",
        "harness:{gamma}",
        "plain",
    ] {
        set(&mut conn, key, key).await;
        let owner = cluster.master_of_key(key);
        assert_eq!(
            cluster.node_for_slot(key_slot(key.as_bytes())).port(),
            owner.port()
        );
        // Only the owner has it: a plain connection to it reads it without a redirection.
        let value = get(&mut owner.raw().await, key).await;
        assert_eq!(value.as_deref(), Some(key), "{key} on its master");
    }
}

#[tokio::test]
async fn failover_promotes_the_replica() {
    let cluster = RedisCluster::start_with(3, 1);
    let key = "harness:{failover}";
    let mut conn = cluster.raw().await;
    set(&mut conn, key, "before").await;
    let old = cluster.master_of_key(key);
    let replica = cluster.replica_of(old).port();

    let began = Instant::now();
    let new = cluster.failover(old).await;
    eprintln!("manual failover settled in {:?}", began.elapsed());

    assert_eq!(new.port(), replica);
    assert_eq!(cluster.master_of_key(key).port(), replica);
    assert_eq!(cluster.replica_of(new).port(), old.port());
    // The cluster connection follows the MOVED, and the write had reached the replica.
    assert_eq!(get(&mut conn, key).await.as_deref(), Some("before"));
}

#[tokio::test]
async fn a_killed_master_is_replaced_and_rejoins_as_a_replica() {
    let mut cluster = RedisCluster::start_with(3, 1);
    let first = cluster.masters()[0].port();
    let replica = cluster.replica_of(cluster.node(first)).port();

    let began = Instant::now();
    assert_eq!(cluster.kill_master(0), first);
    cluster.wait_until_ok().await;
    eprintln!("killed master replaced in {:?}", began.elapsed());
    assert_eq!(cluster.node_for_slot(0).port(), replica);

    let began = Instant::now();
    cluster.restart_node(first);
    cluster.wait_until_ok().await;
    eprintln!("restarted master rejoined in {:?}", began.elapsed());
    assert_eq!(cluster.node_for_slot(0).port(), replica);
    assert_eq!(cluster.replica_of(cluster.node(replica)).port(), first);
}

#[tokio::test]
async fn a_slot_migrates_with_its_keys() {
    let cluster = RedisCluster::start_with(2, 1);
    let (key, absent) = ("harness:{move}:a", "harness:{move}:b");
    let slot = key_slot(key.as_bytes());
    let mut conn = cluster.raw().await;
    set(&mut conn, key, "moved").await;
    let from = cluster.master_of_key(key);
    let to = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != from.port())
        .expect("a second master");

    cluster.begin_migration(slot, from, to).await;
    // Mid-migration the source still serves the keys it has and sends the rest to `to`.
    assert_eq!(
        get(&mut from.raw().await, key).await.as_deref(),
        Some("moved")
    );
    let asked = redis::cmd("GET")
        .arg(absent)
        .query_async::<Option<String>>(&mut from.raw().await)
        .await
        .expect_err("ASK for a key the source lacks");
    let target = format!("127.0.0.1:{}", to.port());
    assert_eq!(
        asked.redirect_node(),
        Some((target.as_str(), slot)),
        "{asked}"
    );

    let began = Instant::now();
    cluster.finish_migration(slot, from, to).await;
    eprintln!("slot migration settled in {:?}", began.elapsed());
    assert_eq!(cluster.node_for_slot(slot).port(), to.port());
    assert_eq!(
        get(&mut to.raw().await, key).await.as_deref(),
        Some("moved")
    );
    assert_eq!(get(&mut conn, key).await.as_deref(), Some("moved"));
}

#[tokio::test]
async fn sentinels_name_the_master_and_follow_a_failover() {
    let began = Instant::now();
    let sentinels = RedisSentinels::start("harness-master");
    eprintln!(
        "master + replica + 3 sentinels settled in {:?}",
        began.elapsed()
    );
    assert_eq!(sentinels.sentinel_urls().len(), 3);
    assert_eq!(sentinels.master_name(), "harness-master");
    let (old, replica) = (sentinels.master().port(), sentinels.replica().port());
    assert_eq!(
        sentinels.current_master_addr(),
        ("127.0.0.1".to_string(), old)
    );

    let began = Instant::now();
    let new = sentinels.failover().await;
    eprintln!("sentinel failover settled in {:?}", began.elapsed());
    assert_eq!(new.port(), replica);
    assert_eq!(sentinels.master().port(), replica);
    assert_eq!(sentinels.replica().port(), old);
    assert_eq!(
        sentinels.current_master_addr(),
        ("127.0.0.1".to_string(), replica)
    );
    let role: Vec<redis::Value> = new.query(&redis::cmd("ROLE")).expect("ROLE");
    assert_eq!(role[0], redis::Value::BulkString(b"master".to_vec()));

    let began = Instant::now();
    sentinels.wait_until_replicated().await;
    eprintln!("old master converted to a replica in {:?}", began.elapsed());
}
