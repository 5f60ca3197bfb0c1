//! Slot migrations and failovers under contention: redirections cost time, never an error;
//! a wait that runs out during a migration is not acquired rather than an error; re-entry
//! counts stay exact across a migration and a failover.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::{key_slot, RedisCluster};

use super::{connect, hash_on, hash_on_master, GENEROUS};

/// One contender of the exclusion loop: takes the lock (with `lock()`, or `try_lock_for`
/// when `bounded`), checks it is alone inside, and unlocks, until `stop`. Returns how many
/// times it got in, and every error it saw.
async fn contend(
    lock: redis_rlock::RLock,
    inside: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    bounded: bool,
) -> (u64, Vec<String>) {
    let (mut entries, mut errors) = (0, Vec::new());
    while !stop.load(Ordering::Relaxed) {
        let began = Instant::now();
        let guard = if bounded {
            match lock.try_lock_for(GENEROUS).await {
                Ok(Some(guard)) => guard,
                Ok(None) => {
                    errors.push(format!("not acquired within {GENEROUS:?}"));
                    continue;
                }
                Err(e) => {
                    errors.push(format!("try_lock_for: {e}"));
                    continue;
                }
            }
        } else {
            match lock.lock().await {
                Ok(guard) => guard,
                Err(e) => {
                    errors.push(format!("lock: {e}"));
                    continue;
                }
            }
        };
        if began.elapsed() > GENEROUS * 2 {
            errors.push(format!("an acquire took {:?}", began.elapsed()));
        }
        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
        tokio::time::sleep(Duration::from_millis(2)).await;
        inside.fetch_sub(1, Ordering::SeqCst);
        entries += 1;
        if let Err(e) = guard.unlock().await {
            errors.push(format!("unlock: {e}"));
        }
    }
    (entries, errors)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirections_during_a_migration_and_failovers_cost_time_not_errors() {
    let mut cluster = RedisCluster::start_async().await;
    let (a, b) = (connect(&cluster).await, connect(&cluster).await);
    let key = "moving:lock";
    let slot = key_slot(key.as_bytes());
    let inside = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = [(&a, false), (&a, true), (&b, false), (&b, true)]
        .into_iter()
        .map(|(client, bounded)| {
            tokio::spawn(contend(
                client.lock(key),
                inside.clone(),
                stop.clone(),
                bounded,
            ))
        })
        .collect();
    let let_them_run = || async {
        tokio::time::sleep(Duration::from_millis(300)).await;
    };

    // The slot moves to the next master, keys and all; then back in two steps, with a
    // pause while it is half-way (the source answers ASK or TRYAGAIN for what it lacks).
    let masters = cluster.masters();
    let from = cluster.node_for_slot(slot);
    let to = masters
        .iter()
        .find(|m| m.port() != from.port())
        .copied()
        .unwrap();
    let_them_run().await;
    cluster.migrate_slot(slot, from, to).await;
    let_them_run().await;
    cluster.begin_migration(slot, to, from).await;
    let_them_run().await;
    cluster.finish_migration(slot, to, from).await;
    let_them_run().await;
    // A manual failover of the slot's master; then that master dies, and the cluster
    // promotes its replica (the master before) about two node timeouts later.
    let master = cluster.node_for_slot(slot);
    cluster.failover(master).await;
    let_them_run().await;
    let master = cluster.node_for_slot(slot).port();
    cluster.kill_node(master);
    cluster.wait_until_ok().await;
    assert_ne!(cluster.node_for_slot(slot).port(), master);
    let_them_run().await;

    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for task in tasks {
        let (entries, errors) = tokio::time::timeout(GENEROUS * 3, task)
            .await
            .expect("every contender stops")
            .unwrap();
        assert!(errors.is_empty(), "{errors:#?}");
        total += entries;
    }
    assert!(total > 20, "{total} entries");
    assert!(hash_on_master(&cluster, key).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_that_runs_out_during_a_migration_is_not_acquired_rather_than_an_error() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let key = "paused:migration";
    let slot = key_slot(key.as_bytes());
    let from = cluster.node_for_slot(slot);
    let to = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != from.port())
        .unwrap();
    // Half-way: the source lacks the (free) lock's key, so it answers ASK until the slot
    // has moved.
    cluster.begin_migration(slot, from, to).await;
    let lock = client.lock(key);
    let began = Instant::now();
    let outcome = lock.try_lock_for(Duration::from_millis(300)).await;
    assert!(matches!(outcome, Ok(None)), "{outcome:?}");
    assert!(began.elapsed() < GENEROUS, "{:?}", began.elapsed());
    // Given no wait, `try_lock` makes its one try and says why it failed.
    let err = lock.try_lock().await.unwrap_err();
    assert!(err.is_connection_error(), "{err}");

    // `lock()` waits the migration out.
    let waiting = tokio::spawn({
        let lock = client.lock(key);
        async move { lock.lock().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());
    cluster.finish_migration(slot, from, to).await;
    let guard = tokio::time::timeout(GENEROUS, waiting)
        .await
        .expect("lock() returns once the slot has moved")
        .unwrap()
        .expect("no error");
    assert_eq!(hash_on(to, key).await.len(), 1);
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_entry_counts_stay_exact_across_a_migration_and_a_failover() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let key = "counted:lock";
    let slot = key_slot(key.as_bytes());
    let lock = client.lock(key);
    let count = |hash: HashMap<String, i64>| {
        assert!(hash.len() <= 1, "{hash:?}");
        hash.values().next().copied().unwrap_or(0)
    };
    let mut guards = Vec::new();
    for _ in 0..3 {
        guards.push(lock.lock().await.unwrap());
    }
    assert_eq!(count(hash_on_master(&cluster, key).await), 3);

    // Re-entries race the migration of the slot: each counts once wherever it lands.
    let from = cluster.node_for_slot(slot);
    let to = cluster
        .masters()
        .into_iter()
        .find(|m| m.port() != from.port())
        .unwrap();
    let racing = async {
        let mut more = Vec::new();
        for _ in 0..20 {
            more.push(lock.lock().await.unwrap());
            tokio::task::yield_now().await;
        }
        more
    };
    let (more, ()) = tokio::join!(racing, cluster.migrate_slot(slot, from, to));
    guards.extend(more);
    assert_eq!(cluster.node_for_slot(slot).port(), to.port());
    assert_eq!(count(hash_on(to, key).await), 23);

    // Half the holds released while the slot's master fails over.
    let promoted = async {
        let master = cluster.node_for_slot(slot);
        cluster.failover(master).await.port()
    };
    let releasing = async {
        for guard in guards.drain(..12) {
            guard.unlock().await.unwrap();
        }
    };
    let (promoted, ()) = tokio::join!(promoted, releasing);
    assert_eq!(cluster.node_for_slot(slot).port(), promoted);
    assert_eq!(count(hash_on(cluster.node(promoted), key).await), 11);
    assert_eq!(lock.hold_count().await.unwrap(), 11);

    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert!(hash_on_master(&cluster, key).await.is_empty());
}
