//! Failovers: a lock replicated before a manual failover stays held and renewed on the
//! promoted replica; a lock the promoted replica never had is reported lost within a renewal
//! round (under the watchdog or with a fixed lease), and its unlock touches nobody else's
//! lock.

use std::time::{Duration, Instant};

use futures_util::FutureExt;
use redis_rlock::LostReason;
use testkit::{pttl, RedisCluster, Waiting};

use super::{connect, connect_with_watchdog, hash_on, renewed_on, GENEROUS, WATCHDOG};

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
