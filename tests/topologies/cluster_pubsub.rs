//! Unlock messages on a Redis Cluster, classic and sharded: waiters subscribe on the master
//! of their channel's slot (checked with `PUBSUB NUMSUB`/`SHARDNUMSUB` on that node) and
//! wake by message far sooner than the holder's 30 s lease; subscriptions follow their slot
//! through a manual failover, a slot migration and a killed pub/sub connection; Java
//! clients are emulated with raw `SPUBLISH`, `PUBLISH` and `SSUBSCRIBE`; a fair lock passes
//! over a dead waiter at once. Each test starts a cluster of its own (about 2 s).

use std::future::Future;
use std::time::{Duration, Instant};

use redis::aio::ConnectionLike;
use redis::{PushInfo, PushKind, Value};
use redis_rlock::{Client, LockGuard, PubSubMode};
use testkit::{fair_queue, server_millis, settles_to, RedisCluster, RedisServer, Waiting};

/// Bound on anything that should take milliseconds, for a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);

/// What "woken by the message" means here: the holders' leases are 30 s (the default
/// watchdog lease), so a waiter that only re-checked at the end of it would take 30 s.
const WOKEN_WITHIN: Duration = Duration::from_secs(5);

async fn start(masters: usize, replicas: usize) -> RedisCluster {
    tokio::task::spawn_blocking(move || RedisCluster::start_with(masters, replicas))
        .await
        .expect("the cluster starts")
}

async fn client(cluster: &RedisCluster, mode: PubSubMode) -> Client {
    Client::cluster_builder(cluster.seeds())
        .pubsub_mode(mode)
        .fair_waiter_timeout(Duration::from_secs(30))
        .build()
        .await
        .expect("a cluster client connects")
}

fn channel_of(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// Subscribers of `channel` on `node`: shard subscribers with `sharded`, classic otherwise.
async fn subscribers(node: &RedisServer, sharded: bool, channel: &str) -> i64 {
    let (_, count): (String, i64) = redis::cmd("PUBSUB")
        .arg(if sharded { "SHARDNUMSUB" } else { "NUMSUB" })
        .arg(channel)
        .query_async(&mut node.raw().await)
        .await
        .expect("PUBSUB");
    count
}

/// Waits until `node` counts `expected` subscribers of `channel`; returns how long that took.
async fn subscribers_become(
    node: &RedisServer,
    sharded: bool,
    channel: &str,
    expected: i64,
) -> Duration {
    let started = Instant::now();
    let last = settles_to(expected, GENEROUS, || subscribers(node, sharded, channel)).await;
    assert_eq!(
        last,
        expected,
        "{} subscribers of {channel} on node {}",
        if sharded { "shard" } else { "classic" },
        node.port()
    );
    started.elapsed()
}

/// `count` lock names whose slots the master `port` serves, in different slots.
fn names_on(cluster: &RedisCluster, port: u16, prefix: &str, count: usize) -> Vec<String> {
    let mut slots = std::collections::HashSet::new();
    (0..)
        .map(|i| format!("{prefix}:{i}"))
        .filter(|name| cluster.master_of_key(name).port() == port)
        .filter(|name| slots.insert(testkit::key_slot(name.as_bytes())))
        .take(count)
        .collect()
}

/// `lock()` of `name` on `client`, for a waiter: hands back the guard.
fn lock_of(client: &Client, name: &str) -> impl Future<Output = LockGuard> + Send + 'static {
    let lock = client.lock(name);
    async move { lock.lock().await.expect("the waiter takes the lock") }
}

/// Unlocks what the waiters took.
async fn unlock_all(guards: Vec<LockGuard>) {
    for guard in guards {
        guard.unlock().await.expect("the waiter unlocks");
    }
}

async fn subscribed(client: &Client, count: usize) {
    testkit::eventually("the waiters subscribe", GENEROUS, || {
        client.status().subscribed_channels == count
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_over_many_slots_wake_by_message_in_every_mode() {
    let cluster = start(3, 0).await;
    let masters: Vec<u16> = cluster.masters().iter().map(|m| m.port()).collect();
    // Auto is sharded on Redis 7, as Redisson's AUTO.
    for (mode, sharded) in [
        (PubSubMode::Classic, false),
        (PubSubMode::Sharded, true),
        (PubSubMode::Auto, true),
    ] {
        let (holder, waiter) = (client(&cluster, mode).await, client(&cluster, mode).await);
        let names: Vec<String> = (0..30).map(|i| format!("spread:{mode:?}:{i}")).collect();
        let homes: Vec<u16> = names
            .iter()
            .map(|n| cluster.master_of_key(n).port())
            .collect();
        for master in &masters {
            assert!(homes.contains(master), "no lock on master {master}");
        }
        let mut guards = Vec::new();
        for name in &names {
            guards.push(holder.lock(name).lock().await.unwrap());
        }
        let waiting: Vec<_> = names
            .iter()
            .map(|n| Waiting::spawn(lock_of(&waiter, n)))
            .collect();
        subscribed(&waiter, names.len()).await;

        // Each channel on its slot's master, in the mode's kind only, and nowhere else.
        for (name, home) in names.iter().zip(&homes) {
            let channel = channel_of(name);
            for node in cluster.masters() {
                let expected = i64::from(node.port() == *home);
                assert_eq!(
                    subscribers(node, sharded, &channel).await,
                    expected,
                    "{mode:?}: {channel} on {}",
                    node.port()
                );
                assert_eq!(subscribers(node, !sharded, &channel).await, 0);
            }
        }

        let woken = Waiting::all_woken_by(waiting, async {
            for guard in guards {
                guard.unlock().await.unwrap();
            }
        })
        .await;
        let slowest = woken.after;
        println!(
            "{mode:?}: {} waiters over {} masters woken, the last {slowest:?} after the unlocks",
            names.len(),
            masters.len()
        );
        assert!(
            slowest < WOKEN_WITHIN,
            "{mode:?}: the last woke after {slowest:?}"
        );
        unlock_all(woken.value).await;
    }
}

/// A waiter whose slot's master fails over: its subscription moves to the promoted replica,
/// which counts it, and the unlock sent there wakes it.
async fn a_waiter_follows_its_slot_through_a_failover(mode: PubSubMode, sharded: bool) {
    let cluster = start(3, 1).await;
    let (holder, waiter) = (client(&cluster, mode).await, client(&cluster, mode).await);
    let name = "failover:wake";
    let channel = channel_of(name);
    let guard = holder.lock(name).lock().await.unwrap();
    let waiting = Waiting::listening(&waiter, 1, lock_of(&waiter, name)).await;
    let old = cluster.master_of_key(name);
    let old_port = old.port();
    assert_eq!(subscribers(old, sharded, &channel).await, 1);

    let failover = Instant::now();
    let promoted = cluster.failover(old).await;
    let settled = failover.elapsed();
    let moved = subscribers_become(promoted, sharded, &channel, 1).await;
    subscribers_become(cluster.node(old_port), sharded, &channel, 0).await;
    subscribed(&waiter, 1).await;

    let woken = waiting
        .woken_by(async { guard.unlock().await.expect("unlock after the failover") })
        .await;
    let (unlocked, took) = (woken.release_took, woken.after_release_returned());
    println!(
        "{mode:?} failover: cluster settled {settled:?} after CLUSTER FAILOVER, the waiter \
         subscribed on the new master {moved:?} later; the unlock call took {unlocked:?} \
         (redirected), the waiter woke {took:?} after it returned"
    );
    assert!(took < WOKEN_WITHIN, "woken {took:?} after the unlock");
    woken.value.unlock().await.expect("the waiter unlocks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_waiter_follows_its_slot_through_a_failover() {
    a_waiter_follows_its_slot_through_a_failover(PubSubMode::Sharded, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_waiter_follows_its_slot_through_a_failover() {
    a_waiter_follows_its_slot_through_a_failover(PubSubMode::Classic, false).await;
}

/// The master of a sharded waiter's slot is killed: its connection is lost, the slot map is
/// read again until the replica is promoted, and the waiter subscribes there. The unlock is
/// sent raw on the new master (as a Java client would), so that only the listener is
/// tested, not how the holder's client reaches the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_waiter_follows_its_slot_when_its_master_dies() {
    let mut cluster = start(3, 1).await;
    let (holder, waiter) = (
        client(&cluster, PubSubMode::Sharded).await,
        client(&cluster, PubSubMode::Sharded).await,
    );
    let name = "dying:master";
    let channel = channel_of(name);
    let _guard = holder.lock(name).lock().await.unwrap();
    let waiting = Waiting::listening(&waiter, 1, lock_of(&waiter, name)).await;
    let dead = cluster.master_of_key(name).port();
    let index = cluster
        .masters()
        .iter()
        .position(|m| m.port() == dead)
        .unwrap();

    let killed = Instant::now();
    cluster.kill_master(index);
    cluster.wait_until_ok().await;
    let promoted = killed.elapsed();
    let new = cluster.master_of_key(name);
    assert_ne!(new.port(), dead);
    let moved = subscribers_become(new, true, &channel, 1).await;
    subscribed(&waiter, 1).await;
    let mut raw = new.raw().await;
    let hash = testkit::lock_hash(&mut raw, name).await;
    assert!(
        hash.keys()
            .all(|field| field.starts_with(&holder.id().to_string())),
        "the holder's lock survived on the promoted replica: {hash:?}"
    );

    let woken = waiting
        .woken_by(async {
            let _: () = redis::pipe()
                .cmd("DEL")
                .arg(name)
                .ignore()
                .cmd("SPUBLISH")
                .arg(&channel)
                .arg("0")
                .ignore()
                .query_async(&mut raw)
                .await
                .unwrap();
        })
        .await;
    let took = woken.after;
    println!(
        "killed master: cluster settled {promoted:?} after the kill, the waiter subscribed \
         on the promoted replica {moved:?} later; woken {took:?} after the unlock message"
    );
    assert!(
        took < WOKEN_WITHIN,
        "woken {took:?} after the unlock message"
    );
    woken.value.unlock().await.expect("the waiter unlocks");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_follow_their_slots_through_a_migration() {
    let cluster = start(3, 0).await;
    let masters: Vec<u16> = cluster.masters().iter().map(|m| m.port()).collect();
    let (from, to) = (masters[0], masters[1]);
    let names = names_on(&cluster, from, "migrating", 2);
    for (name, mode, sharded) in [
        (&names[0], PubSubMode::Sharded, true),
        (&names[1], PubSubMode::Classic, false),
    ] {
        let (holder, waiter) = (client(&cluster, mode).await, client(&cluster, mode).await);
        let channel = channel_of(name);
        let guard = holder.lock(name).lock().await.unwrap();
        let waiting = Waiting::listening(&waiter, 1, lock_of(&waiter, name)).await;
        assert_eq!(subscribers(cluster.node(from), sharded, &channel).await, 1);

        let slot = testkit::key_slot(name.as_bytes());
        let migration = Instant::now();
        cluster
            .migrate_slot(slot, cluster.node(from), cluster.node(to))
            .await;
        let settled = migration.elapsed();
        let moved = subscribers_become(cluster.node(to), sharded, &channel, 1).await;
        subscribers_become(cluster.node(from), sharded, &channel, 0).await;
        subscribed(&waiter, 1).await;

        let woken = waiting
            .woken_by(async { guard.unlock().await.expect("unlock after the migration") })
            .await;
        let (unlocked, took) = (woken.release_took, woken.after_release_returned());
        println!(
            "{mode:?} migration of slot {slot}: settled {settled:?}, the waiter subscribed \
             on the new owner {moved:?} later; the unlock call took {unlocked:?} \
             (redirected), the waiter woke {took:?} after it returned"
        );
        assert!(took < WOKEN_WITHIN, "woken {took:?} after the unlock");
        woken.value.unlock().await.expect("the waiter unlocks");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_pubsub_connection_resubscribes_every_slot() {
    let cluster = start(3, 0).await;
    let node = cluster.masters()[0];
    let names = names_on(&cluster, node.port(), "killed", 12);
    let (sharded_names, classic_names) = names.split_at(6);
    let mut holders = Vec::new();
    let mut all_waiting = Vec::new();
    let mut waiters = Vec::new();
    let mut holder_clients = Vec::new();
    for (names, mode) in [
        (sharded_names, PubSubMode::Sharded),
        (classic_names, PubSubMode::Classic),
    ] {
        let (holder, waiter) = (client(&cluster, mode).await, client(&cluster, mode).await);
        for name in names {
            holders.push(holder.lock(name).lock().await.unwrap());
            all_waiting.push(Waiting::spawn(lock_of(&waiter, name)));
        }
        subscribed(&waiter, names.len()).await;
        waiters.push(waiter);
        holder_clients.push(holder);
    }

    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut node.raw().await)
        .await
        .unwrap();
    assert!(killed >= 2, "{killed} pub/sub connections killed");
    let killed_at = Instant::now();
    for name in sharded_names {
        subscribers_become(node, true, &channel_of(name), 1).await;
    }
    for name in classic_names {
        subscribers_become(node, false, &channel_of(name), 1).await;
    }
    let back = killed_at.elapsed();
    for waiter in &waiters {
        subscribed(waiter, 6).await;
    }

    let woken = Waiting::all_woken_by(all_waiting, async {
        for guard in holders {
            guard.unlock().await.unwrap();
        }
    })
    .await;
    let slowest = woken.after;
    println!(
        "CLIENT KILL TYPE pubsub: {killed} connections, 12 channels over 12 slots back \
         within {back:?}; the last waiter woken {slowest:?} after the unlocks"
    );
    assert!(slowest < WOKEN_WITHIN, "the last woke after {slowest:?}");
    unlock_all(woken.value).await;
}

/// A lock held by a Java client (Redisson's hash, written raw) and released as Redisson's
/// unlock script does: `DEL`, then `SPUBLISH` (sharded) or `PUBLISH` (classic) of `0`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_unlocks_wake_our_waiters_and_ours_reach_redisson() {
    let cluster = start(3, 0).await;
    for (mode, publish) in [
        (PubSubMode::Sharded, "SPUBLISH"),
        (PubSubMode::Classic, "PUBLISH"),
    ] {
        let name = format!("java:{publish}");
        let waiter = client(&cluster, mode).await;
        let mut master = cluster.master_of_key(&name).raw().await;
        let _: () = redis::pipe()
            .cmd("HSET")
            .arg(&name)
            .arg("2d1f7c4e-0000-4000-8000-000000000000:1")
            .arg(1)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&name)
            .arg(30_000)
            .ignore()
            .query_async(&mut master)
            .await
            .unwrap();
        let waiting = Waiting::listening(&waiter, 1, lock_of(&waiter, &name)).await;
        let woken = waiting
            .woken_by(async {
                let _: () = redis::pipe()
                    .cmd("DEL")
                    .arg(&name)
                    .ignore()
                    .cmd(publish)
                    .arg(channel_of(&name))
                    .arg("0")
                    .ignore()
                    .query_async(&mut master)
                    .await
                    .unwrap();
            })
            .await;
        let took = woken.after;
        assert!(took < WOKEN_WITHIN, "{publish}: woken {took:?} after it");
        woken.value.unlock().await.expect("the waiter unlocks");
    }

    // Our unlock in sharded mode, heard by a raw shard subscriber on the slot's master (a
    // Redisson client with shardedSubscriptionMode ON or AUTO).
    let name = "rust:to:java";
    let channel = channel_of(name);
    let (pushes_in, mut pushes) = tokio::sync::mpsc::unbounded_channel::<PushInfo>();
    let node = cluster.master_of_key(name);
    let mut java = redis::Client::open(format!("{}?protocol=resp3", node.url()))
        .unwrap()
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_push_sender(pushes_in),
        )
        .await
        .unwrap();
    java.req_packed_command(redis::cmd("SSUBSCRIBE").arg(&channel))
        .await
        .unwrap();
    let ours = client(&cluster, PubSubMode::Sharded).await;
    ours.lock(name)
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let heard = tokio::time::timeout(GENEROUS, async {
        loop {
            let push = pushes
                .recv()
                .await
                .expect("the raw subscriber's connection");
            if push.kind == PushKind::SMessage {
                return push.data;
            }
        }
    })
    .await
    .expect("the shard subscriber hears the unlock");
    assert_eq!(
        heard,
        vec![
            Value::BulkString(channel.into_bytes()),
            Value::BulkString(b"0".to_vec())
        ]
    );
}

/// A fair lock's head that nobody hears (its process died: its place and deadline are
/// there, no subscriber) is passed over once its 100 ms grace to subscribe has passed,
/// not after `fair_waiter_timeout` (30 s here): the look for a waiter that hears runs on
/// the slot's master, where waiters subscribe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_fair_waiter_is_passed_over_within_its_grace() {
    let cluster = start(3, 0).await;
    for mode in [PubSubMode::Sharded, PubSubMode::Classic] {
        let name = format!("fair:dead:{mode:?}");
        let (holder, live) = (client(&cluster, mode).await, client(&cluster, mode).await);
        let guard = holder.fair_lock(&name).lock().await.unwrap();
        let mut master = cluster.master_of_key(&name).raw().await;
        let now = server_millis(&mut master).await;
        let dead = "dead-client:1";
        let _: () = redis::pipe()
            .cmd("RPUSH")
            .arg(format!("redisson_lock_queue:{{{name}}}"))
            .arg(dead)
            .ignore()
            .cmd("ZADD")
            .arg(format!("redisson_lock_timeout:{{{name}}}"))
            .arg(now + 60_000)
            .arg(dead)
            .ignore()
            .query_async(&mut master)
            .await
            .unwrap();
        let lock = live.fair_lock(&name);
        let waiting =
            Waiting::spawn(
                async move { lock.lock().await.expect("the live waiter takes the lock") },
            );
        let queued = settles_to(2, GENEROUS, || {
            let mut master = master.clone();
            let name = name.clone();
            async move { fair_queue(&mut master, &name).await.len() }
        })
        .await;
        assert_eq!(queued, 2, "the live waiter queues behind the dead one");
        subscribed(&live, 1).await;

        let woken = waiting
            .woken_by(async { guard.unlock().await.unwrap() })
            .await;
        let (handover, guard) = (woken.after, woken.value);
        println!("{mode:?}: a dead head passed over, hand-over in {handover:?}");
        assert!(
            handover < Duration::from_secs(2),
            "{mode:?}: hand-over took {handover:?} (the waiter timeout is 30 s)"
        );
        // The dead waiter stepped back; its deadline drops it later.
        assert_eq!(fair_queue(&mut master, &name).await, vec![dead.to_string()]);
        guard.unlock().await.unwrap();
    }
}

/// The README's rules plus those a cluster client needs (`+cluster|slots +cluster|info`) and those of
/// sharded pub/sub. A user without `+spublish` is refused by name before anything is
/// written; with them, a sharded waiter is woken and no node logs a refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_acl_user_needs_the_sharded_commands() {
    use testkit::acl::{readme_rules, refusals, set_user, without, PASSWORD, USER};
    let cluster = start(3, 0).await;
    let mut rules = readme_rules("app:*");
    for rule in [
        "+cluster|slots",
        "+cluster|info",
        "+spublish",
        "+ssubscribe",
        "+sunsubscribe",
        "+pubsub|shardnumsub",
    ] {
        rules.push(rule.to_string());
    }
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("redis://{USER}:{PASSWORD}@127.0.0.1:{}", n.port()))
        .collect();
    let user_client = || async {
        Client::cluster_builder(seeds.clone())
            .pubsub_mode(PubSubMode::Sharded)
            .build()
            .await
            .expect("the ACL user connects")
    };

    for node in cluster.nodes() {
        set_user(node, &without(&rules, "+spublish"));
    }
    let client = user_client().await;
    let error = client.lock("app:acl").lock().await.unwrap_err();
    assert!(error.is_permission_denied(), "{error}");
    assert!(error.to_string().contains("+spublish"), "{error}");
    let mut raw = cluster.master_of_key("app:acl").raw().await;
    assert!(!testkit::key_exists(&mut raw, "app:acl").await);

    for node in cluster.nodes() {
        set_user(node, &rules);
    }
    let (holder, waiter) = (user_client().await, user_client().await);
    let guard = holder.lock("app:acl").lock().await.unwrap();
    let waiting = Waiting::listening(&waiter, 1, lock_of(&waiter, "app:acl")).await;
    let woken = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    let took = woken.after;
    assert!(took < WOKEN_WITHIN, "woken {took:?} after the unlock");
    woken.value.unlock().await.expect("the waiter unlocks");
    for node in cluster.nodes() {
        let refused = refusals(node).await;
        assert!(refused.is_empty(), "node {}: {refused:?}", node.port());
    }
}
