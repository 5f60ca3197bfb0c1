//! Coalesced calls on a Redis Cluster go out one per master, not one per slot: many tasks'
//! acquires, re-entries and releases over many slots end with the right holders and counts
//! in far fewer script calls than slots; an item whose slot moved to another master while
//! the client's map still placed it on the old one (a migration the client has not seen)
//! is answered "not here" and sent again alone, and is taken and released exactly once;
//! a sharded unlock sent undeclared beside another slot's still wakes its waiter.

use std::collections::HashSet;
use std::future::Future;
use std::time::Duration;

use futures_util::future::join_all;
use redis_rlock::{Client, LockGuard, PubSubMode};
use testkit::{info_field, key_slot, lock_hash, RedisCluster, RedisServer, Waiting};

/// Bound on anything that should take milliseconds, for a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(20);

/// What "woken by the message" means here: the holder's lease is 30 s (the default
/// watchdog lease).
const WOKEN_WITHIN: Duration = Duration::from_secs(5);

async fn start(masters: usize) -> RedisCluster {
    tokio::task::spawn_blocking(move || RedisCluster::start_with(masters, 0))
        .await
        .expect("the cluster starts")
}

async fn client(cluster: &RedisCluster, mode: PubSubMode) -> Client {
    Client::cluster_builder(cluster.seeds())
        .pubsub_mode(mode)
        .build()
        .await
        .expect("a cluster client connects")
}

/// Script calls every master has run so far.
fn script_calls(cluster: &RedisCluster) -> i64 {
    cluster
        .masters()
        .into_iter()
        .map(|master| info_field(master, "commandstats", "cmdstat_evalsha", "calls"))
        .sum()
}

/// The owner fields and counts of lock `key`, read on the master of its slot now.
async fn hash_of(cluster: &RedisCluster, key: &str) -> Vec<(String, i64)> {
    let mut conn = cluster.master_of_key(key).raw().await;
    let mut hash: Vec<(String, i64)> = lock_hash(&mut conn, key).await.into_iter().collect();
    hash.sort();
    hash
}

async fn within<T>(what: &str, work: impl Future<Output = T>) -> T {
    tokio::time::timeout(GENEROUS, work)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {GENEROUS:?}"))
}

/// Every guard released at once, from one task: all calls of one go.
async fn unlock_all(guards: Vec<LockGuard>) {
    for released in within(
        "the releases",
        join_all(guards.into_iter().map(LockGuard::unlock)),
    )
    .await
    {
        released.expect("a release succeeds");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_over_many_slots_cost_fewer_calls_than_slots() {
    let cluster = start(3).await;
    let client = client(&cluster, PubSubMode::Auto).await;
    let names: Vec<String> = (0..256).map(|i| format!("batch:{i}")).collect();
    let slots: HashSet<u16> = names.iter().map(|n| key_slot(n.as_bytes())).collect();
    assert!(slots.len() > 200, "{} slots", slots.len());
    let before = script_calls(&cluster);

    // One task per lock, all at once, each taking its lock and re-entering it.
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(names.len()));
    let tasks: Vec<_> = names
        .iter()
        .map(|name| {
            let (lock, start) = (client.lock(name), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                let outer = lock.lock().await.expect("an acquire succeeds");
                let inner = lock.lock().await.expect("a re-entry succeeds");
                (outer, inner)
            })
        })
        .collect();
    let (outers, inners): (Vec<LockGuard>, Vec<LockGuard>) =
        within("the acquires", join_all(tasks))
            .await
            .into_iter()
            .map(Result::unwrap)
            .unzip();
    for guard in &outers {
        let owner = guard.owner().to_string();
        assert_eq!(
            hash_of(&cluster, guard.key()).await,
            [(owner, 2)],
            "{}",
            guard.key()
        );
    }

    unlock_all(inners).await;
    for guard in &outers {
        let owner = guard.owner().to_string();
        assert_eq!(
            hash_of(&cluster, guard.key()).await,
            [(owner, 1)],
            "{}",
            guard.key()
        );
    }
    unlock_all(outers).await;
    for name in &names {
        assert!(hash_of(&cluster, name).await.is_empty(), "{name} released");
    }

    let calls = script_calls(&cluster) - before;
    let items = 4 * names.len();
    assert!(
        calls < slots.len() as i64,
        "{items} acquires and releases over {} slots took {calls} script calls",
        slots.len()
    );
}

/// Names `prefix:N` on `master`, `count` of them.
fn names_on(
    cluster: &RedisCluster,
    master: &RedisServer,
    prefix: &str,
    count: usize,
) -> Vec<String> {
    (0..)
        .map(|n| format!("{prefix}:{n}"))
        .filter(|name| cluster.master_of_key(name).port() == master.port())
        .take(count)
        .collect()
}

/// Calls of `command` that `server` refused: inside a script, a key of a slot the node does
/// not serve (only the lock scripts run `EXISTS`, the acquire's first access, and `HGET`,
/// the release's).
fn refused(server: &RedisServer, command: &str) -> i64 {
    info_field(
        server,
        "commandstats",
        &format!("cmdstat_{command}"),
        "rejected_calls",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_whose_slot_moved_is_sent_again_and_counted_once() {
    let cluster = start(3).await;
    let client = client(&cluster, PubSubMode::Auto).await;
    let masters = cluster.masters();
    let (from, to) = (masters[0], masters[1]);
    let stays = names_on(&cluster, from, "stays", 40);
    // The first calls of a go are sent alone (a few in flight before batches form): the
    // moved lock is last, in a batch, and not in its batch's lowest slot, which the call
    // declares: it goes undeclared, beside the others.
    let lowest = stays[10..]
        .iter()
        .map(|n| key_slot(n.as_bytes()))
        .min()
        .unwrap();
    let stay_slots: HashSet<u16> = stays.iter().map(|n| key_slot(n.as_bytes())).collect();
    let moved = names_on(&cluster, from, "moved", 1000)
        .into_iter()
        .find(|n| {
            let slot = key_slot(n.as_bytes());
            slot > lowest && !stay_slots.contains(&slot)
        })
        .expect("a name on the first master above its lowest slot");
    let mut names = stays.clone();
    names.push(moved.clone());
    let locks: Vec<_> = names.iter().map(|name| client.lock(name)).collect();
    let lock_all = || async {
        within(
            "the acquires",
            join_all(locks.iter().map(|lock| lock.lock())),
        )
        .await
        .into_iter()
        .map(|taken| taken.expect("an acquire succeeds"))
        .collect::<Vec<LockGuard>>()
    };

    // The client reads the slot map at its first batches, with `moved` on `from`.
    unlock_all(lock_all().await).await;
    cluster
        .migrate_slot(key_slot(moved.as_bytes()), from, to)
        .await;
    assert_eq!(cluster.master_of_key(&moved).port(), to.port());

    let outers = lock_all().await;
    assert!(
        refused(from, "exists") > 0,
        "{moved}'s acquire was sent to {} undeclared",
        from.port()
    );
    let inners = lock_all().await;
    for (outer, name) in outers.iter().zip(&names) {
        let owner = outer.owner().to_string();
        assert_eq!(hash_of(&cluster, name).await, [(owner, 2)], "{name}");
    }
    let mut on_new = to.raw().await;
    assert_eq!(
        lock_hash(&mut on_new, &moved).await.len(),
        1,
        "{moved} on its new master"
    );

    unlock_all(inners).await;
    assert!(
        refused(from, "hget") > 0,
        "{moved}'s release was sent to {} undeclared",
        from.port()
    );
    for (outer, name) in outers.iter().zip(&names) {
        let owner = outer.owner().to_string();
        assert_eq!(hash_of(&cluster, name).await, [(owner, 1)], "{name}");
    }
    unlock_all(outers).await;
    for name in &names {
        assert!(hash_of(&cluster, name).await.is_empty(), "{name} released");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_unlocks_batched_over_slots_wake_their_waiters() {
    let cluster = start(3).await;
    let (holder, waiter) = (
        client(&cluster, PubSubMode::Sharded).await,
        client(&cluster, PubSubMode::Sharded).await,
    );
    let names: Vec<String> = (0..48).map(|i| format!("wake:{i}")).collect();
    let locks: Vec<_> = names.iter().map(|name| holder.lock(name)).collect();
    let guards: Vec<LockGuard> = within("the acquires", join_all(locks.iter().map(|l| l.lock())))
        .await
        .into_iter()
        .map(|taken| taken.expect("an acquire succeeds"))
        .collect();
    let mut waiters = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let lock = waiter.lock(name);
        let wait = async move { lock.lock().await.expect("the waiter gets in") };
        waiters.push(Waiting::listening(&waiter, i + 1, wait).await);
    }

    // From one task: the first releases go out alone, the rest as one call per master,
    // each declaring one slot's lock and passing the others undeclared, their SPUBLISH too.
    let woken = Waiting::all_woken_by(waiters, unlock_all(guards)).await;
    assert!(
        woken.after < WOKEN_WITHIN,
        "the waiters got in {:?} after the release began",
        woken.after
    );
    unlock_all(woken.value).await;
}
