//! Locks through a Redis Cluster's failovers and slot migrations (3 masters, 1 replica
//! each, started by the harness; each test has a cluster of its own, since every test here
//! breaks it): a lock replicated before a manual failover stays held and renewed on the
//! promoted replica; a lock the promoted replica never had is reported lost within a
//! renewal round, and its unlock touches nobody else's lock; redirections and a cluster
//! changing its topology cost time, never an error; no script runs twice; scripts flushed
//! everywhere, and a replica promoted without them, still run; a client whose first seed is
//! dead connects; thousands of watchdog locks over all slots renewed well inside a third of
//! their lease.
//!
//! One file per fault: `failover.rs` (a lock held through a failover, and one lost to it),
//! `migrations.rs` (redirections, waits and re-entry counts through slot migrations and
//! failovers), `scripts_and_seeds.rs` (flushed scripts, a dead first seed) and
//! `renewal_rounds.rs` (thousands of watchdog locks over all slots). This file holds the
//! clients and raw reads they share.

mod failover;
mod migrations;
mod renewal_rounds;
mod scripts_and_seeds;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis_rlock::Client;
use testkit::{lock_hash, pttl, RedisCluster, RedisServer};

/// Bound on anything that should take milliseconds, for a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);

/// The watchdog timeout of the tests that watch renewals: a renewal every second.
const WATCHDOG: Duration = Duration::from_secs(3);

/// A cluster client with the default settings.
async fn connect(cluster: &RedisCluster) -> Client {
    Client::connect_cluster(cluster.seeds())
        .await
        .expect("a cluster client connects")
}

/// A cluster client with the given watchdog timeout.
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
