//! Locks through a Redis Cluster's failovers and slot migrations (3 masters, 1 replica
//! each, started by the harness; each test has a cluster of its own, since every test here
//! breaks it): a lock replicated before a manual failover stays held and renewed on the
//! promoted replica; a lock the promoted replica never had is reported lost within a
//! renewal round, and its unlock touches nobody else's lock; redirections and a cluster
//! changing its topology cost time, never an error; no script runs twice; scripts flushed
//! everywhere, and a replica promoted without them, still run; a client whose first seed is
//! dead connects; thousands of watchdog locks over all slots renewed well inside a third of
//! their lease.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::FutureExt;
use redis_rlock::{Client, LostReason};
use testkit::{key_slot, lock_hash, pttl, RedisCluster, RedisServer, Waiting};

/// Bound on anything that should take milliseconds, for a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);

/// The watchdog timeout of the tests that watch renewals: a renewal every second.
const WATCHDOG: Duration = Duration::from_secs(3);

async fn connect(cluster: &RedisCluster) -> Client {
    Client::connect_cluster(cluster.seeds())
        .await
        .expect("a cluster client connects")
}

async fn connect_with_watchdog(cluster: &RedisCluster, watchdog: Duration) -> Client {
    Client::cluster_builder(cluster.seeds())
        .watchdog_timeout(watchdog)
        .build()
        .await
        .expect("a cluster client connects")
}

/// The lock hash of `key`, read raw on `node`.
async fn hash_on(node: &RedisServer, key: &str) -> HashMap<String, i64> {
    lock_hash(&mut node.raw().await, key).await
}

/// The lock hash of `key`, read raw on the master of its slot now.
async fn hash_on_master(cluster: &RedisCluster, key: &str) -> HashMap<String, i64> {
    hash_on(cluster.master_of_key(key), key).await
}

/// Waits until `key`'s PTTL on `node` rises above what it read the time before: a renewal
/// landed there. (Against the first read alone, a first read just after a renewal would
/// leave nothing to rise above.)
async fn renewed_on(node: &RedisServer, key: &str) {
    let mut conn = node.raw().await;
    let mut last = pttl(&mut conn, key).await;
    assert!(last > 0, "{key} on {}: pttl {last}", node.port());
    let deadline = Instant::now() + GENEROUS;
    loop {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = pttl(&mut conn, key).await;
        if now > last {
            return;
        }
        assert!(now > 0, "{key} expired on {}", node.port());
        assert!(
            Instant::now() < deadline,
            "{key} not renewed on {}",
            node.port()
        );
        last = now;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_replicated_before_a_manual_failover_stays_held_and_renewed() {
    let cluster = RedisCluster::start_async().await;
    let holder = connect_with_watchdog(&cluster, WATCHDOG).await;
    let waiter = connect(&cluster).await;
    let key = "failover:held";
    let guard = holder.lock(key).lock().await.unwrap();
    let lost = guard.lost();
    let old = cluster.master_of_key(key);
    let old_port = old.port();
    let before = hash_on(old, key).await;

    let promoted = cluster.failover(old).await;
    assert_ne!(promoted.port(), old_port);
    assert_eq!(cluster.master_of_key(key).port(), promoted.port());
    assert_eq!(
        hash_on(promoted, key).await,
        before,
        "the replica had the lock"
    );

    // Two renewals land on the new master, and nothing says the lock was lost.
    renewed_on(promoted, key).await;
    renewed_on(promoted, key).await;
    assert!(!guard.is_lost());
    let mut lost = Box::pin(lost);
    assert!((&mut lost).now_or_never().is_none(), "lost() resolved");

    // A waiter on another client is woken by the unlock, not by the lease running out.
    let lock = waiter.lock(key);
    let waiting = Waiting::listening(&waiter, 1, async move { lock.lock().await.unwrap() }).await;
    let left = pttl(&mut promoted.raw().await, key).await;
    let woken = waiting
        .woken_by(async { guard.unlock().await.expect("unlock on the new master") })
        .await;
    let after = woken.after;
    assert!(
        after + Duration::from_millis(500) < Duration::from_millis(left as u64),
        "woken {after:?} after the unlock, with {left} ms of lease left"
    );
    woken.value.unlock().await.unwrap();
    assert!(hash_on(promoted, key).await.is_empty());
}

/// The deterministic lost lock: a client takes a lock (under a `watchdog`, or with a fixed
/// `lease`) on a master whose replica is frozen and cut off, the master dies, the replica
/// is promoted without the lock, and another client takes it there. Checks that the
/// holder's unlock says it lost the lock and leaves the other client's alone; returns what
/// `lost()` said and how long after the cluster was reachable again.
async fn lose_a_lock_to_a_failover(
    watchdog: Duration,
    lease: Option<Duration>,
) -> (LostReason, Duration) {
    let mut cluster = RedisCluster::start_async().await;
    let holder = connect_with_watchdog(&cluster, watchdog).await;
    let rival = connect(&cluster).await;
    // Not on the first seed's master: the unlock listener's connection stays up, so no
    // reconnection tells the watchdog anything.
    let key = cluster.key_on_master(1, "lost");
    let master = cluster.master_of_key(&key);
    let master_port = master.port();
    let replica = cluster.replica_of(master);
    let replica_port = replica.port();

    // The replica must not get the lock: frozen, and cut off so that the write does not
    // wait in its socket buffer either (both are needed; see the reference notes).
    replica.freeze();
    let killed: i64 = master
        .query(redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica"))
        .unwrap();
    assert_eq!(killed, 1);
    let guard = match lease {
        Some(lease) => holder.lock(&key).lock_with_lease(lease).await.unwrap(),
        None => holder.lock(&key).lock().await.unwrap(),
    };
    let lost = tokio::spawn({
        let lost = guard.lost();
        async move {
            let reason = lost.await;
            (reason, Instant::now())
        }
    });
    let mut conn = master.raw().await;
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(100)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(acked, 0, "the replica acknowledged nothing");
    drop(conn);

    cluster.kill_node(master_port);
    cluster.node(replica_port).thaw();
    cluster.wait_until_ok().await;
    let reachable = Instant::now();
    let promoted = cluster.master_of_key(&key);
    assert_eq!(promoted.port(), replica_port);
    assert!(
        hash_on(promoted, &key).await.is_empty(),
        "promoted without it"
    );

    // Another client takes the lock the cluster forgot.
    let theirs = tokio::time::timeout(GENEROUS, rival.lock(&key).lock())
        .await
        .expect("the rival's lock() returns")
        .expect("the rival takes the free lock");
    let (reason, at) = tokio::time::timeout(GENEROUS, lost)
        .await
        .expect("lost() resolves")
        .unwrap();
    let late = at.saturating_duration_since(reachable);
    eprintln!(
        "watchdog {watchdog:?}, lease {lease:?}: lost() said {reason:?} {late:?} after the cluster was reachable"
    );

    // The holder's unlock says it lost the lock, and leaves the rival's alone.
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    let hash = hash_on(promoted, &key).await;
    assert_eq!(hash.len(), 1, "{hash:?}");
    let (field, count) = hash.iter().next().unwrap();
    assert!(field.starts_with(&rival.id().to_string()), "{field}");
    assert_eq!(*count, 1);
    assert!(pttl(&mut promoted.raw().await, &key).await > 0);
    theirs.unlock().await.unwrap();
    (reason, late)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_the_promoted_replica_never_had_is_reported_lost_within_a_round() {
    // The outage (about 2 s until the replica is promoted) may outlast the 3 s lease since
    // the last renewal: then the deadline reports it (`ConnectionLost`) before the first
    // renewal on the promoted replica finds it gone (`Released`).
    let (reason, late) = lose_a_lock_to_a_failover(WATCHDOG, None).await;
    assert!(
        matches!(reason, LostReason::Released | LostReason::ConnectionLost),
        "{reason:?}"
    );
    // One renewal round is a second; twice that for a loaded machine.
    assert!(
        late < WATCHDOG / 3 * 2,
        "lost() {late:?} after the cluster was reachable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_the_promoted_replica_never_had_is_found_gone_by_the_first_renewal_there() {
    // The default 30 s watchdog, which the outage cannot outlast: only a renewal on the
    // promoted replica can tell. The client reads the cluster's epoch every second to know
    // when to look; the next regular renewal could be up to 10 s after the promotion.
    let watchdog = Duration::from_secs(30);
    let (reason, late) = lose_a_lock_to_a_failover(watchdog, None).await;
    assert_eq!(reason, LostReason::Released);
    assert!(
        late < Duration::from_secs(4),
        "lost() {late:?} after the cluster was reachable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_lock_the_promoted_replica_never_had_is_reported_lost() {
    // No renewal to find it gone: the epoch read tells the client to check its fixed-lease
    // holds. Without it nothing would until the 30 s lease ran out.
    let (reason, late) = lose_a_lock_to_a_failover(WATCHDOG, Some(Duration::from_secs(30))).await;
    assert_eq!(reason, LostReason::Released);
    assert!(
        late < Duration::from_secs(4),
        "lost() {late:?} after the cluster was reachable"
    );
}

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

/// Holds `count` watchdog locks spread over all slots on one cluster client for a few
/// rounds, and returns how long each round took, as seen from Redis: keyspace
/// notifications tell when each renewal's PEXPIRE ran.
async fn renewal_rounds(count: usize) -> Vec<(usize, Duration)> {
    let cluster = RedisCluster::start_async().await;
    let client = connect_with_watchdog(&cluster, WATCHDOG).await;
    let names: Vec<String> = (0..count).map(|i| format!("many:{i}")).collect();
    let mut guards = Vec::with_capacity(count);
    for chunk in names.chunks(500) {
        let acquired = futures_util::future::join_all(chunk.iter().map(|name| {
            let lock = client.lock(name);
            async move { lock.lock().await }
        }))
        .await;
        for guard in acquired {
            guards.push(guard.expect("acquired"));
        }
    }
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let mut listeners = Vec::new();
    for master in cluster.masters() {
        let _: () = master
            .query(
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("notify-keyspace-events")
                    .arg("Eg"),
            )
            .unwrap();
        let mut pubsub = redis::Client::open(master.url())
            .unwrap()
            .get_async_pubsub()
            .await
            .unwrap();
        pubsub.subscribe("__keyevent@0__:expire").await.unwrap();
        let tx = events_tx.clone();
        listeners.push(tokio::spawn(async move {
            use futures_util::StreamExt;
            let mut messages = pubsub.on_message();
            while messages.next().await.is_some() {
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        }));
    }
    drop(events_tx);
    // Rounds are a second apart; a gap of a third of that separates them.
    let gap = WATCHDOG / 9;
    let mut rounds = Vec::new();
    let (mut first, mut last, mut n) = (None::<Instant>, Instant::now(), 0usize);
    // A few rounds, and the one under way then; bounded however long rounds take.
    let until = Instant::now() + WATCHDOG * 2;
    let hard_stop = until + WATCHDOG * 2;
    while (Instant::now() < until || first.is_some()) && Instant::now() < hard_stop {
        let next = tokio::time::timeout(gap, events.recv()).await;
        match next {
            Ok(Some(at)) => {
                if first.is_none() {
                    first = Some(at);
                }
                last = at;
                n += 1;
            }
            Ok(None) => break,
            Err(_) => {
                if let Some(began) = first.take() {
                    rounds.push((n, last.duration_since(began)));
                    n = 0;
                }
            }
        }
    }
    if let Some(began) = first {
        rounds.push((n, last.duration_since(began)));
    }
    assert!(guards.iter().all(|g| !g.is_lost()), "a lock was lost");
    for listener in listeners {
        listener.abort();
    }
    let unlocked =
        futures_util::future::join_all(guards.into_iter().map(|guard| guard.unlock())).await;
    assert!(unlocked.iter().all(Result::is_ok));
    rounds
}

/// Checks the rounds [`renewal_rounds`] saw with `count` locks: every lock renewed once a
/// round, each round over before the next is due (a third of the lease), most well before.
fn check_rounds(count: usize, rounds: &[(usize, Duration)]) {
    eprintln!("{count} locks: rounds (renewals, duration) {rounds:?}");
    // The first round seen may have begun before the listeners did.
    let mut whole: Vec<Duration> = rounds.iter().skip(1).map(|(_, took)| *took).collect();
    assert!(whole.len() >= 2, "{rounds:?}");
    for (renewals, took) in &rounds[1..] {
        assert_eq!(*renewals, count, "{rounds:?}");
        assert!(*took < WATCHDOG / 3, "a round took {took:?}");
    }
    whole.sort();
    let median = whole[whole.len() / 2];
    assert!(median < WATCHDOG / 6, "rounds took {median:?} (median)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_watchdog_locks_over_all_slots_renewed_well_inside_a_third_of_the_lease() {
    let rounds = renewal_rounds(2000).await;
    check_rounds(2000, &rounds);
}

/// The same with 10,000 locks: about 20 s in a debug build, so left out of `cargo test`
/// (see TESTING.md for the command and its figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "long: run with --ignored (see TESTING.md)"]
async fn ten_thousand_watchdog_locks_over_all_slots_renewed_well_inside_a_third_of_the_lease() {
    let rounds = renewal_rounds(10_000).await;
    check_rounds(10_000, &rounds);
}
