//! Locks on a Redis Cluster (3 masters, 1 replica each, started by the harness): the same
//! keys as on one Redis, on the master of each key's slot; calls coalesced and renewals
//! batched per slot, so that no CROSSSLOT reaches a user; names whose braces would split a
//! lock over slots refused; waiters woken by the unlock message; a manual failover while
//! holding. Each test has a cluster of its own (about 2 s to start).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis_rlock::{Client, MultiLock};
use testkit::{key_slot, lock_hash, pttl, RedisCluster, Waiting};

/// Bound on anything that should take milliseconds, for a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);

async fn connect(cluster: &RedisCluster) -> Client {
    Client::connect_cluster(cluster.seeds())
        .await
        .expect("a cluster client connects")
}

/// The lock hash of `key`, read raw on the master of its slot.
async fn hash_on_master(cluster: &RedisCluster, key: &str) -> HashMap<String, i64> {
    let mut conn = cluster.master_of_key(key).raw().await;
    lock_hash(&mut conn, key).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_lives_on_its_key_master_and_re_enters() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let lock = client.lock("order:1001");

    let outer = lock.lock().await.unwrap();
    let hash = hash_on_master(&cluster, "order:1001").await;
    assert_eq!(hash.len(), 1, "{hash:?}");
    let (field, count) = hash.iter().next().unwrap();
    assert!(field.starts_with(&client.id().to_string()), "{field}");
    assert_eq!(*count, 1);

    let inner = lock.lock().await.unwrap();
    assert_eq!(
        hash_on_master(&cluster, "order:1001").await.values().next(),
        Some(&2)
    );
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    inner.unlock().await.unwrap();
    assert_eq!(
        hash_on_master(&cluster, "order:1001").await.values().next(),
        Some(&1)
    );
    outer.unlock().await.unwrap();
    assert!(hash_on_master(&cluster, "order:1001").await.is_empty());
    assert!(!lock.is_locked().await.unwrap());
}

/// `shutdown` on a cluster client releases every kind on its slot's master, through its
/// script: another client's waiters get in within 100 ms, the fair queue place is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_every_kind_on_its_master() {
    let cluster = RedisCluster::start_async().await;
    let (holder, other) = (connect(&cluster).await, connect(&cluster).await);
    testkit::every_kind::shutdown_releases_everything(&holder, &other).await;
    let mut on_master = cluster.master_of_key("fair-queued").raw().await;
    assert_eq!(
        testkit::fair_queue(&mut on_master, "fair-queued").await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_is_woken_by_the_unlock_message() {
    let cluster = RedisCluster::start_async().await;
    let (holder, waiter) = (connect(&cluster).await, connect(&cluster).await);
    // The default 30 s lease: only the unlock message can let the waiter in quickly.
    let guard = holder.lock("wake:me").lock().await.unwrap();
    let lock = waiter.lock("wake:me");
    let waiting = Waiting::listening(&waiter, 1, async move { lock.lock().await.unwrap() }).await;
    let woken = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    assert!(
        woken.after < Duration::from_secs(5),
        "woken {:?} after the unlock (the lease is 30 s)",
        woken.after
    );
    woken.value.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_over_many_slots_all_succeed() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let names: Vec<String> = (0..256).map(|i| format!("many:{i}")).collect();
    let slots: std::collections::HashSet<u16> =
        names.iter().map(|n| key_slot(n.as_bytes())).collect();
    assert!(slots.len() > 200, "{} slots", slots.len());

    // All at once from one client: the acquires and the unlocks coalesce into batches,
    // which must be split per slot.
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let lock = client.lock(name);
            tokio::spawn(async move {
                let guard = lock.lock().await?;
                guard.unlock().await
            })
        })
        .collect();
    for task in tasks {
        tokio::time::timeout(GENEROUS, task)
            .await
            .expect("an acquire and unlock return")
            .unwrap()
            .expect("no acquire or unlock fails");
    }
    let mut raw = cluster.raw().await;
    for name in names.iter().step_by(16) {
        let exists: bool = redis::cmd("EXISTS")
            .arg(name)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(!exists, "{name} released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchdog_renews_thousands_of_locks_over_many_slots() {
    let cluster = RedisCluster::start_async().await;
    let client = Client::cluster_builder(cluster.seeds())
        // Roomy for a loaded 2-core machine: a round of 2,000 locks over ~1,400 slots
        // must end within the lease, and a 1 s lease lost locks when the machine stalled.
        .watchdog_timeout(Duration::from_secs(3))
        .build()
        .await
        .unwrap();
    let names: Vec<String> = (0..2000).map(|i| format!("renew:{i}")).collect();
    let mut guards = Vec::with_capacity(names.len());
    for chunk in names.chunks(250) {
        let acquired = futures_util::future::join_all(chunk.iter().map(|name| {
            let lock = client.lock(name);
            async move { lock.lock().await }
        }))
        .await;
        for guard in acquired {
            guards.push(guard.expect("acquired"));
        }
    }
    // Several renewal rounds (one a second) past two 3 s leases.
    tokio::time::sleep(Duration::from_millis(7000)).await;
    assert!(guards.iter().all(|g| !g.is_lost()), "a lock was lost");
    let mut raw = cluster.raw().await;
    for name in names.iter().step_by(10) {
        let ttl: i64 = redis::cmd("PTTL")
            .arg(name)
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(ttl > 0, "{name}: pttl {ttl}");
    }
    let unlocked =
        futures_util::future::join_all(guards.into_iter().map(|guard| guard.unlock())).await;
    let failed: Vec<_> = unlocked.iter().filter_map(|r| r.as_ref().err()).collect();
    assert!(
        failed.is_empty(),
        "{} unlocks failed, first: {:?}",
        failed.len(),
        failed.first()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_whose_braces_split_slots_are_refused_with_nothing_written() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    for name in ["a{b", "{}x"] {
        let err = client.lock(name).lock().await.unwrap_err();
        assert!(err.is_cross_slot_name(), "{name}: {err}");
        assert!(err.to_string().contains(name), "{err}");
        let err = client.fair_lock(name).try_lock().await.unwrap_err();
        assert!(err.is_cross_slot_name(), "{name}: {err}");
        let err = client.fenced_lock(name).is_locked().await.unwrap_err();
        assert!(err.is_cross_slot_name(), "{name}: {err}");
    }
    for master in cluster.masters() {
        let keys = testkit::dbsize(&mut master.raw().await).await;
        assert_eq!(keys, 0, "nothing written on {}", master.port());
    }
    // A valid tag is fine.
    client
        .lock("{a}b")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_serves_waiters_in_order_and_fenced_tokens_grow() {
    let cluster = RedisCluster::start_async().await;
    let holder = connect(&cluster).await;
    let guard = holder.fair_lock("fair:jobs").lock().await.unwrap();
    let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut clients = Vec::new();
    let mut queue_conn = cluster.master_of_key("fair:jobs").raw().await;
    for i in 0..3 {
        let client = connect(&cluster).await;
        let lock = client.fair_lock("fair:jobs");
        let order = order_tx.clone();
        tokio::spawn(async move {
            let guard = lock.lock().await.unwrap();
            order.send(i).unwrap();
            guard.unlock().await.unwrap();
        });
        clients.push(client);
        let deadline = Instant::now() + GENEROUS;
        loop {
            let queued: i64 = redis::cmd("LLEN")
                .arg("redisson_lock_queue:{fair:jobs}")
                .query_async(&mut queue_conn)
                .await
                .unwrap();
            if queued == i + 1 {
                break;
            }
            assert!(Instant::now() < deadline, "waiter {i} queues");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    guard.unlock().await.unwrap();
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(
            tokio::time::timeout(GENEROUS, order_rx.recv())
                .await
                .expect("every waiter gets the lock")
                .unwrap(),
        );
    }
    assert_eq!(order, [0, 1, 2]);

    let fenced = holder.fenced_lock("fenced:res");
    let first = fenced.lock().await.unwrap();
    let t1 = first.fencing_token().unwrap();
    first.unlock().await.unwrap();
    let second = fenced.lock().await.unwrap();
    let t2 = second.fencing_token().unwrap();
    second.unlock().await.unwrap();
    assert!(t2 > t1, "{t1} then {t2}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_held_through_a_manual_failover_stays_held() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let guard = client.lock("failover:1").lock().await.unwrap();
    let old = cluster.master_of_key("failover:1");
    let old_port = old.port();
    let promoted = cluster.failover(old).await;
    assert_ne!(promoted.port(), old_port);
    assert_eq!(cluster.master_of_key("failover:1").port(), promoted.port());

    // The new master has the replicated lock.
    let mut conn = promoted.raw().await;
    assert_eq!(lock_hash(&mut conn, "failover:1").await.len(), 1);
    assert!(pttl(&mut conn, "failover:1").await > 0);
    assert!(client.lock("failover:1").is_locked().await.unwrap());
    assert!(!guard.is_lost());
    guard.unlock().await.expect("unlock after the failover");
    assert!(lock_hash(&mut conn, "failover:1").await.is_empty());
    let again = tokio::time::timeout(GENEROUS, client.lock("failover:1").lock())
        .await
        .expect("a later acquire returns")
        .unwrap();
    again.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multilock_spans_keys_in_different_slots() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let (a, b) = ("{alpha}:x", "{omega}:y");
    assert_ne!(key_slot(a.as_bytes()), key_slot(b.as_bytes()));
    let multi = MultiLock::new(vec![client.lock(a), client.lock(b)]);
    let guard = multi.lock().await.unwrap();
    assert_eq!(hash_on_master(&cluster, a).await.len(), 1);
    assert_eq!(hash_on_master(&cluster, b).await.len(), 1);
    guard.unlock().await.unwrap();
    assert!(hash_on_master(&cluster, a).await.is_empty());
    assert!(hash_on_master(&cluster, b).await.is_empty());
}

#[tokio::test]
async fn sharded_pubsub_and_no_seeds_are_refused_before_connecting() {
    use redis_rlock::PubSubMode;
    // Nothing listens on port 1: the settings are refused before anything is sent.
    // Sharded pub/sub needs a cluster client (cluster_pubsub.rs covers it there).
    let err = Client::builder("redis://127.0.0.1:1")
        .pubsub_mode(PubSubMode::Sharded)
        .build()
        .await
        .unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
    assert!(err.to_string().contains("Sharded"), "{err}");
    let none: [&str; 0] = [];
    let err = Client::connect_cluster(none).await.unwrap_err();
    assert!(err.is_invalid_argument(), "{err}");
}

#[tokio::test]
async fn seed_passwords_never_show() {
    let builder = Client::cluster_builder(["redis://:hunter22secret@127.0.0.1:1"])
        .connect_timeout(Duration::from_millis(200));
    assert!(!format!("{builder:?}").contains("hunter22secret"));
    let err = builder.build().await.unwrap_err();
    assert!(!err.to_string().contains("hunter22secret"), "{err}");
    assert!(!format!("{err:?}").contains("hunter22secret"), "{err:?}");
}
