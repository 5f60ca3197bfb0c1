//! RLock shared by Redisson and this crate on a Redis Cluster of three masters, in both
//! pub/sub modes (Redisson's `shardedSubscriptionMode` ON with this crate's
//! `PubSubMode::Sharded`, and OFF with `PubSubMode::Classic`): the scenarios of `rlock.rs`
//! that depend on the topology, each both ways. Wake-up by the unlock message (`PUBLISH`
//! or `SPUBLISH` from the script, heard on the master of the channel's slot) within 500 ms;
//! busy locks and re-entry counts as raw commands on the lock's master see them; watchdog
//! renewals seen from the other side; force unlock across; mutual exclusion on a counter.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_rlock::protocol::layout::Derived;
use redis_rlock::{Client, LostReason, PubSubMode};
use redis_rlock_interop::check::{count_renewals, exclusive_rounds, report_wake_ups, within};
use redis_rlock_interop::view::subscribers_become_in;
use redis_rlock_interop::{now_us, Kind, Redisson, RedissonOptions};
use testkit::{key_exists, lock_hash, pttl, RedisCluster};

use super::rlock::{hash_of, rust_holds};

const GENEROUS: Duration = Duration::from_secs(10);
const ROUNDS: usize = 3;
/// Renewed every 500 ms on both sides.
const SHORT_WATCHDOG: Duration = Duration::from_millis(1500);

/// One Redis Cluster, a Redisson client and a Rust client of it, both in one pub/sub mode.
struct Shared {
    cluster: RedisCluster,
    java: Redisson,
    rust: Client,
    sharded: bool,
}

impl Shared {
    async fn start(
        sharded: bool,
        java_watchdog: Option<Duration>,
        rust_watchdog: Duration,
    ) -> Self {
        let cluster = RedisCluster::start_async().await;
        let mut options = RedissonOptions::cluster(cluster.seeds(), sharded);
        if let Some(watchdog) = java_watchdog {
            options = options.watchdog(watchdog);
        }
        let java = options.start().await;
        let mode = if sharded {
            PubSubMode::Sharded
        } else {
            PubSubMode::Classic
        };
        let rust = Client::cluster_builder(cluster.seeds())
            .pubsub_mode(mode)
            .watchdog_timeout(rust_watchdog)
            .build()
            .await
            .expect("a cluster client connects");
        Shared {
            cluster,
            java,
            rust,
            sharded,
        }
    }

    /// A raw connection to the master serving `name` (and its channel: one slot).
    async fn raw(&self, name: &str) -> MultiplexedConnection {
        self.cluster.master_of_key(name).raw().await
    }

    async fn listeners_become(&self, name: &str, expected: i64) {
        let (raw, channel) = (self.raw(name).await, Derived::UnlockChannel.of(name));
        subscribers_become_in(&raw, &channel, expected, GENEROUS, self.sharded).await;
    }

    fn series(&self, what: &str) -> String {
        let mode = if self.sharded { "sharded" } else { "classic" };
        format!("rlock.cluster_{mode}.{what}")
    }
}

async fn java_unlock_wakes_a_rust_waiter(sharded: bool) {
    let shared = Shared::start(sharded, None, Duration::from_secs(30)).await;
    let name = "wake:java-to-rust";
    let mut raw = shared.raw(name).await;
    let t1 = shared.java.thread("t1");
    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        t1.lock(Kind::Lock, name).await;
        shared.listeners_become(name, 0).await;
        let lock = shared.rust.lock(name);
        let waiter = tokio::spawn(async move {
            let guard = lock.lock().await.expect("Rust lock()");
            (now_us(), guard)
        });
        shared.listeners_become(name, 1).await;
        let unlock = t1.unlock(Kind::Lock, name).await.ok();
        let (acquired_us, guard) = within("the Rust waiter", GENEROUS, waiter).await.unwrap();
        latencies.push((acquired_us - unlock.start_us) as f64 / 1000.0);
        assert_eq!(lock_hash(&mut raw, name).await, hash_of(guard.owner(), 1));
        assert!(pttl(&mut raw, name).await > 20_000, "woken by the message");
        guard.unlock().await.unwrap();
    }
    report_wake_ups(&shared.series("wake_up.java_unlock_to_rust_ms"), &latencies);
}

async fn rust_unlock_wakes_a_java_waiter(sharded: bool) {
    let shared = Shared::start(sharded, None, Duration::from_secs(30)).await;
    let name = "wake:rust-to-java";
    let mut raw = shared.raw(name).await;
    let t1 = shared.java.thread("t1");
    let owner = t1.owner().await;
    let mut latencies = Vec::new();
    for _ in 0..ROUNDS {
        let guard = rust_holds(&shared.rust, name).await;
        shared.listeners_become(name, 0).await;
        let mut waiting = t1.start_lock(Kind::Lock, name).await;
        shared.listeners_become(name, 1).await;
        assert!(waiting.try_now().is_none(), "Java got a lock Rust holds");
        let unlock_start = now_us();
        guard.unlock().await.unwrap();
        let acquired = waiting.wait().await.ok();
        latencies.push((acquired.end_us - unlock_start) as f64 / 1000.0);
        assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
        t1.unlock(Kind::Lock, name).await.ok();
    }
    report_wake_ups(&shared.series("wake_up.rust_unlock_to_java_ms"), &latencies);
}

/// Re-entry on each side, counted in the hash on the lock's master, and busy for the other.
async fn reentry_and_busy_both_ways(sharded: bool) {
    let shared = Shared::start(sharded, None, Duration::from_secs(30)).await;
    let name = "reentry:both";
    let mut raw = shared.raw(name).await;
    let t1 = shared.java.thread("t1");
    let owner = t1.owner().await;

    t1.lock(Kind::Lock, name).await;
    t1.lock(Kind::Lock, name).await;
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 2));
    let lock = shared.rust.lock(name);
    let probe = lock.clone();
    let (busy, count) = tokio::spawn(async move {
        let busy = probe.try_lock().await.unwrap().is_none();
        (busy, probe.hold_count().await.unwrap())
    })
    .await
    .unwrap();
    assert!(busy, "Rust got a lock Java holds");
    assert_eq!(count, 0);
    t1.unlock(Kind::Lock, name).await.ok();
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
    t1.unlock(Kind::Lock, name).await.ok();
    assert!(!key_exists(&mut raw, name).await);

    let (outer, inner, owner) = tokio::spawn(async move {
        let outer = lock.lock().await.unwrap();
        let inner = lock.lock().await.unwrap();
        let owner = outer.owner().to_owned();
        (outer, inner, owner)
    })
    .await
    .unwrap();
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 2));
    assert_eq!(t1.hold_count(Kind::Lock, name).await, 0);
    assert!(t1.is_locked(Kind::Lock, name).await);
    let started = Instant::now();
    assert!(
        !t1.try_lock(Kind::Lock, name, Duration::from_millis(300))
            .await
            .bool(),
        "Java got a lock Rust holds"
    );
    assert!(started.elapsed() >= Duration::from_millis(290));
    inner.unlock().await.unwrap();
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&owner, 1));
    outer.unlock().await.unwrap();
    assert!(t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());
    t1.unlock(Kind::Lock, name).await.ok();
}

/// Each side's watchdog, seen renewing by the other (three leases: without renewals the
/// key would be gone twice over).
async fn watchdogs_seen_from_the_other_side(sharded: bool) {
    let shared = Shared::start(sharded, Some(SHORT_WATCHDOG), SHORT_WATCHDOG).await;
    let t1 = shared.java.thread("t1");

    let name = "watchdog:java";
    let raw = shared.raw(name).await;
    t1.lock(Kind::Lock, name).await;
    let renewals = count_renewals(SHORT_WATCHDOG * 3, || {
        let mut raw = raw.clone();
        async move { pttl(&mut raw, name).await }
    })
    .await;
    assert!(renewals >= 4, "{renewals} Java renewals in three leases");
    t1.unlock(Kind::Lock, name).await.ok();

    let name = "watchdog:rust";
    let guard = rust_holds(&shared.rust, name).await;
    let renewals = count_renewals(SHORT_WATCHDOG * 3, || t1.ttl(Kind::Lock, name)).await;
    assert!(renewals >= 4, "{renewals} Rust renewals in three leases");
    assert!(!t1.try_lock(Kind::Lock, name, Duration::ZERO).await.bool());
    guard.unlock().await.unwrap();
    assert!(!t1.is_locked(Kind::Lock, name).await);
}

/// A Java force unlock frees a Rust hold (which learns it lost the lock) and wakes a Rust
/// waiter; a Rust force unlock frees a Java hold and wakes a Java waiter.
async fn force_unlock_both_ways(sharded: bool) {
    let shared = Shared::start(sharded, Some(SHORT_WATCHDOG), SHORT_WATCHDOG).await;
    let (t1, t2) = (shared.java.thread("t1"), shared.java.thread("t2"));

    let name = "force:java-frees-rust";
    let mut raw = shared.raw(name).await;
    let guard = rust_holds(&shared.rust, name).await;
    let lock = shared.rust.lock(name);
    let waiter = tokio::spawn(async move { (lock.lock().await.unwrap(), now_us()) });
    shared.listeners_become(name, 1).await;
    let forced = t1.call(&[Kind::Lock.word(), "forceunlock", name]).await;
    assert!(forced.clone().bool());
    let (woken, woken_us) = within("the Rust waiter", GENEROUS, waiter).await.unwrap();
    report_wake_ups(
        &shared.series("wake_up.java_force_unlock_to_rust_ms"),
        &[(woken_us - forced.start_us) as f64 / 1000.0],
    );
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(woken.owner(), 1));
    let reason = within("lost()", GENEROUS, guard.lost()).await;
    assert_eq!(reason, LostReason::Released);
    assert!(guard.unlock().await.unwrap_err().is_lock_lost());
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(woken.owner(), 1));
    woken.unlock().await.unwrap();

    let name = "force:rust-frees-java";
    let mut raw = shared.raw(name).await;
    let t2_owner = t2.owner().await;
    t1.lock(Kind::Lock, name).await;
    let waiting = t2.start_lock(Kind::Lock, name).await;
    shared.listeners_become(name, 1).await;
    let forced_at = now_us();
    assert!(shared.rust.lock(name).force_unlock().await.unwrap());
    let acquired = waiting.wait().await.ok();
    report_wake_ups(
        &shared.series("wake_up.rust_force_unlock_to_java_ms"),
        &[(acquired.end_us - forced_at) as f64 / 1000.0],
    );
    assert_eq!(lock_hash(&mut raw, name).await, hash_of(&t2_owner, 1));
    t2.unlock(Kind::Lock, name).await.ok();
}

/// Java threads and Rust tasks on one counter under one lock: no overlap, no lost update.
async fn java_threads_and_rust_tasks_exclude_each_other(sharded: bool) {
    const ROUNDS_EACH: usize = 15;
    const EACH_SIDE: usize = 2;
    let shared = Shared::start(sharded, None, Duration::from_secs(30)).await;
    // The counter in the lock's slot, so that one raw connection reaches both.
    let (name, counter) = ("exclusive", "{exclusive}:counter");
    let mut raw = shared.raw(name).await;
    let rounds = ROUNDS_EACH.to_string();
    let mut java_runs = Vec::new();
    for i in 0..EACH_SIDE {
        let thread = shared.java.thread(&format!("worker{i}"));
        java_runs.push(
            thread
                .request(&["lock", "exclusive", name, counter, &rounds])
                .await,
        );
    }
    let mut rust_runs = Vec::new();
    for _ in 0..EACH_SIDE {
        let (lock, conn) = (shared.rust.lock(name), raw.clone());
        rust_runs.push(tokio::spawn(exclusive_rounds(
            lock,
            conn,
            counter,
            ROUNDS_EACH,
        )));
    }
    let limit = Duration::from_secs(120);
    let mut overlaps = 0;
    for run in java_runs {
        overlaps += run.wait_for(limit).await.int();
    }
    for run in rust_runs {
        overlaps += within("a Rust task", limit, run).await.unwrap();
    }
    assert_eq!(overlaps, 0, "critical sections overlapped");
    let total: i64 = redis::cmd("GET")
        .arg(counter)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(total, (2 * EACH_SIDE * ROUNDS_EACH) as i64, "lost updates");
    assert!(!key_exists(&mut raw, name).await);
}

/// Each scenario twice: sharded pub/sub (`SPUBLISH`, `SSUBSCRIBE`) and classic.
macro_rules! both_modes {
    ($($scenario:ident),* $(,)?) => {
        mod sharded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(true).await;
                }
            )*
        }
        mod classic {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario(false).await;
                }
            )*
        }
    };
}

both_modes!(
    java_unlock_wakes_a_rust_waiter,
    rust_unlock_wakes_a_java_waiter,
    reentry_and_busy_both_ways,
    watchdogs_seen_from_the_other_side,
    force_unlock_both_ways,
    java_threads_and_rust_tasks_exclude_each_other,
);
