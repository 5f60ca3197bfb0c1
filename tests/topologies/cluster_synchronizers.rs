//! Semaphores, expirable semaphores and latches through a Redis Cluster's topology changes
//! (3 masters, 1 replica each, started by the harness; a cluster per test, since each
//! breaks its own): every call, explicit or a guard's release on drop, made while the
//! synchronizers' slots are half-way through a migration (the old master answers `ASK`
//! for every key) or while their master is dead and its replica not yet promoted returns
//! `Ok` once the cluster settles, and the counts in Redis afterwards are exact: no permit
//! or count lost, none counted twice. Count changes whose replies time out are sent again
//! and still count once.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use redis_rlock::{
    Client, CountDownLatch, ExpirablePermit, PermitExpirableSemaphore, Semaphore, SemaphoreGuard,
};
use testkit::{key_slot, raw_get, settles_to, RedisCluster, RedisServer};

/// Bound on anything that should take milliseconds, for a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);

/// How long each call made during a fault may take: the fault itself (a migration held
/// for [`HALF_WAY`], a failover of about 2.5 s) and room for a loaded machine, well under
/// the 30 s a call waits out a topology change.
const RIDES_OUT_WITHIN: Duration = Duration::from_secs(20);

/// How long the slots stay half-way through their migration.
const HALF_WAY: Duration = Duration::from_secs(3);

/// The expirable permits' lease: longer than any test.
const LEASE: Duration = Duration::from_secs(120);

/// The permits each semaphore starts with, and a latch's count.
const PERMITS: u64 = 10;
const EXPIRABLE_PERMITS: u64 = 3;
const COUNT: u64 = 3;

async fn connect(cluster: &RedisCluster) -> Client {
    Client::connect_cluster(cluster.seeds())
        .await
        .expect("a cluster client connects")
}

/// One synchronizer of each kind, named so that all three live on master `i`.
struct Synchronizers {
    pool: Semaphore,
    gpu: PermitExpirableSemaphore,
    batch: CountDownLatch,
}

impl Synchronizers {
    fn on_master(cluster: &RedisCluster, client: &Client, i: usize) -> Self {
        Synchronizers {
            pool: client.semaphore(cluster.key_on_master(i, "pool")),
            gpu: client.permit_expirable_semaphore(cluster.key_on_master(i, "gpu")),
            batch: client.count_down_latch(cluster.key_on_master(i, "batch")),
        }
    }

    /// The Redis keys whose slots the faults move: the counts (an expirable semaphore's
    /// permits share its count's slot).
    fn keys(&self) -> [&str; 3] {
        [self.pool.name(), self.gpu.name(), self.batch.name()]
    }

    fn timeouts(&self) -> String {
        format!("{{{}}}:timeout", self.gpu.name())
    }
}

/// What the fault finds held: guards to release explicitly and to drop, taken before it.
struct Held {
    /// 2 permits, released with `release()` during the fault.
    to_release: SemaphoreGuard,
    /// 2 permits, dropped during the fault: given back in the background.
    to_drop: SemaphoreGuard,
    /// Released during the fault with `ExpirablePermit::release`.
    permit_to_release: ExpirablePermit,
    /// Dropped during the fault.
    permit_to_drop: ExpirablePermit,
}

/// Sets every count and takes what the fault will release: of [`PERMITS`], 5 free (2 + 2
/// held, 1 forgotten, given back by `Semaphore::release` during the fault); of
/// [`EXPIRABLE_PERMITS`], 1 free.
async fn set_up(s: &Synchronizers) -> Held {
    assert!(s.pool.try_set_permits(PERMITS).await.unwrap());
    assert!(s.gpu.try_set_permits(EXPIRABLE_PERMITS).await.unwrap());
    assert!(s.batch.try_set_count(COUNT).await.unwrap());
    let held = Held {
        to_release: s.pool.acquire(2).await.unwrap(),
        to_drop: s.pool.acquire(2).await.unwrap(),
        permit_to_release: s.gpu.acquire(LEASE).await.unwrap(),
        permit_to_drop: s.gpu.acquire(LEASE).await.unwrap(),
    };
    assert_eq!(s.pool.acquire(1).await.unwrap().forget(), 1);
    assert_eq!(s.pool.available_permits().await.unwrap(), 5);
    assert_eq!(s.gpu.available_permits().await.unwrap(), 1);
    held
}

type Call = Pin<Box<dyn Future<Output = redis_rlock::Result<String>> + Send>>;

fn call<T: std::fmt::Debug>(
    future: impl Future<Output = redis_rlock::Result<T>> + Send + 'static,
) -> Call {
    Box::pin(async move { future.await.map(|value| format!("{value:?}")) })
}

/// What one call made during a fault returned, and when.
struct Outcome {
    what: &'static str,
    returned: Instant,
    took: Duration,
    result: redis_rlock::Result<String>,
}

/// Every call, started at once while the fault is on. What the acquires take stays taken
/// (`forget`), for the counts to tell.
async fn during_the_fault(s: &Synchronizers, held: Held) -> Vec<Outcome> {
    let Held {
        to_release,
        to_drop,
        permit_to_release,
        permit_to_drop,
    } = held;
    let began = Instant::now();
    // The drops first: their background releases run alongside the calls.
    drop(to_drop);
    drop(permit_to_drop);
    let (pool, gpu, batch) = (s.pool.clone(), s.gpu.clone(), s.batch.clone());
    let calls: Vec<(&'static str, Call)> = vec![
        ("semaphore acquire", {
            let pool = pool.clone();
            call(async move { pool.acquire(1).await.map(SemaphoreGuard::forget) })
        }),
        ("semaphore guard release", call(to_release.release())),
        ("semaphore release(1)", {
            let pool = pool.clone();
            call(async move { pool.release(1).await })
        }),
        ("semaphore add_permits(3)", {
            let pool = pool.clone();
            call(async move { pool.add_permits(3).await })
        }),
        ("semaphore available_permits", {
            let pool = pool.clone();
            call(async move { pool.available_permits().await })
        }),
        ("expirable acquire", {
            let gpu = gpu.clone();
            call(async move { gpu.acquire(LEASE).await.map(ExpirablePermit::forget) })
        }),
        (
            "expirable permit release",
            call(permit_to_release.release()),
        ),
        ("expirable available_permits", {
            let gpu = gpu.clone();
            call(async move { gpu.available_permits().await })
        }),
        ("latch count_down 1", {
            let batch = batch.clone();
            call(async move { batch.count_down().await })
        }),
        ("latch count_down 2", {
            let batch = batch.clone();
            call(async move { batch.count_down().await })
        }),
        ("latch count", {
            let batch = batch.clone();
            call(async move { batch.count().await })
        }),
    ];
    let running: Vec<_> = calls
        .into_iter()
        .map(|(what, call)| {
            tokio::spawn(async move {
                let outcome = tokio::time::timeout(RIDES_OUT_WITHIN, call).await;
                let outcome = outcome.unwrap_or_else(|_| {
                    panic!("{what} did not return within {RIDES_OUT_WITHIN:?}")
                });
                Outcome {
                    what,
                    returned: Instant::now(),
                    took: began.elapsed(),
                    result: outcome,
                }
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for call in running {
        outcomes.push(call.await.expect("no call panics"));
    }
    outcomes
}

/// The counts after the fault, read raw on the master that serves each now: every call
/// counted once, the background releases included.
async fn counts_are_exact(cluster: &RedisCluster, s: &Synchronizers) {
    // 5 free, then: -1 acquired, +2 released, +2 dropped, +1 released by hand, +3 added.
    let pool_master = cluster.master_of_key(s.pool.name());
    let pool = settles_to(Some("12".to_string()), GENEROUS, || async {
        raw_get(&mut pool_master.raw().await, s.pool.name()).await
    })
    .await;
    assert_eq!(pool.as_deref(), Some("12"), "the semaphore's count");
    // 1 free, then: -1 acquired, +1 released, +1 dropped; one taken permit left.
    let gpu_master = cluster.master_of_key(s.gpu.name());
    let gpu = settles_to(Some("2".to_string()), GENEROUS, || async {
        raw_get(&mut gpu_master.raw().await, s.gpu.name()).await
    })
    .await;
    assert_eq!(gpu.as_deref(), Some("2"), "the expirable semaphore's count");
    assert_eq!(
        gpu_master.cli(&["ZCARD", &s.timeouts()]),
        "1",
        "the expirable semaphore's taken permits"
    );
    // 3, counted down twice.
    let batch_master = cluster.master_of_key(s.batch.name());
    assert_eq!(
        raw_get(&mut batch_master.raw().await, s.batch.name())
            .await
            .as_deref(),
        Some("1"),
        "the latch's count"
    );
}

fn all_rode_it_out(outcomes: &[Outcome]) {
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|o| o.result.is_err())
        .map(|o| format!("{} after {:?}: {:?}", o.what, o.took, o.result))
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Makes sure the replicas of `master` have everything written to it so far: a write on
/// the slot of `key`, then `WAIT` for one replica (replication keeps order).
async fn replicated(master: &RedisServer, key: &str) {
    let mut conn = master.raw().await;
    let _: () = redis::cmd("SET")
        .arg(format!("{{{key}}}:replicated"))
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(GENEROUS.as_millis() as u64)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(acked, 1, "a replica of {} acknowledged", master.port());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_rides_out_a_migration_half_way_and_counts_once() {
    let cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let s = Synchronizers::on_master(&cluster, &client, 0);
    let held = set_up(&s).await;
    // A waiter from before the fault, woken by the last count-down after it.
    let waiter = {
        let batch = s.batch.clone();
        tokio::spawn(async move { batch.wait_for(Duration::from_secs(60)).await })
    };

    // Every slot of the three moves to master 1, keys first: the old master then answers
    // ASK for every key, for HALF_WAY, before the slots are handed over.
    let (from, to) = (cluster.masters()[0], cluster.masters()[1]);
    let slots: Vec<u16> = s.keys().iter().map(|k| key_slot(k.as_bytes())).collect();
    for &slot in &slots {
        cluster.begin_migration(slot, from, to).await;
        cluster.migrate_keys(slot, from, to).await;
    }
    let calls = during_the_fault(&s, held);
    let migration = async {
        tokio::time::sleep(HALF_WAY).await;
        let finished = Instant::now();
        for &slot in &slots {
            cluster.finish_migration(slot, from, to).await;
        }
        finished
    };
    // A latch wait made during the fault too: it rides out, then waits for the count.
    let waiting = {
        let batch = s.batch.clone();
        tokio::spawn(async move { batch.wait_for(Duration::from_secs(60)).await })
    };
    let (outcomes, finished) = tokio::join!(calls, migration);
    all_rode_it_out(&outcomes);
    // The old master refused every call (ASK) until the slots moved: none got through
    // before. (The background releases are checked by the counts.)
    for o in &outcomes {
        assert!(
            o.returned >= finished,
            "{} returned {:?} after {:?}, half-way",
            o.what,
            o.result,
            o.took
        );
    }
    for slot in slots {
        assert_eq!(cluster.node_for_slot(slot).port(), to.port());
    }
    counts_are_exact(&cluster, &s).await;

    latch_opens_for(&s, [waiter, waiting]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_rides_out_a_failover_after_a_master_died_and_counts_once() {
    let mut cluster = RedisCluster::start_async().await;
    let client = connect(&cluster).await;
    let s = Synchronizers::on_master(&cluster, &client, 0);
    let held = set_up(&s).await;
    let waiter = {
        let batch = s.batch.clone();
        tokio::spawn(async move { batch.wait_for(Duration::from_secs(60)).await })
    };
    let master = cluster.masters()[0];
    replicated(master, s.pool.name()).await;

    let dead = cluster.kill_master(0);
    let waiting = {
        let batch = s.batch.clone();
        tokio::spawn(async move { batch.wait_for(Duration::from_secs(60)).await })
    };
    let outcomes = during_the_fault(&s, held).await;
    all_rode_it_out(&outcomes);
    cluster.wait_until_ok().await;
    for key in s.keys() {
        assert_ne!(cluster.master_of_key(key).port(), dead, "{key} failed over");
    }
    counts_are_exact(&cluster, &s).await;

    latch_opens_for(&s, [waiter, waiting]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_changes_whose_replies_time_out_are_sent_again_and_count_once() {
    // Short, so that the freeze outlasts it; the freeze stays well under the cluster's 1 s
    // node timeout, so that no failover starts meanwhile.
    const RESPONSE_TIMEOUT: Duration = Duration::from_millis(150);
    const FREEZE: Duration = Duration::from_millis(500);
    let cluster = RedisCluster::start_async().await;
    let client = Client::cluster_builder(cluster.seeds())
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(5)
        .retry_delay(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let s = Synchronizers::on_master(&cluster, &client, 0);
    let held = set_up(&s).await;

    // Every call's first try waits in the frozen master's socket past its timeout, and may
    // have run: each is sent again, and runs once the master thaws, after the first.
    let master = cluster.masters()[0];
    master.freeze();
    let thaw = async {
        tokio::time::sleep(FREEZE).await;
        master.thaw();
    };
    let (outcomes, ()) = tokio::join!(during_the_fault(&s, held), thaw);
    all_rode_it_out(&outcomes);
    counts_are_exact(&cluster, &s).await;
}

/// The latch's waits, one started before the fault and one during it, are still waiting
/// after it, and return `true` at the last count-down.
async fn latch_opens_for(
    s: &Synchronizers,
    waits: [tokio::task::JoinHandle<redis_rlock::Result<bool>>; 2],
) {
    assert!(waits.iter().all(|wait| !wait.is_finished()));
    s.batch.count_down().await.unwrap();
    for wait in waits {
        let opened = tokio::time::timeout(GENEROUS, wait)
            .await
            .expect("the waits return once the latch opens")
            .unwrap();
        assert!(matches!(opened, Ok(true)), "{opened:?}");
    }
}
