//! The wait registry for groups: a waiting `RedLock` is in every master's registry for its
//! lock, a waiting `MultiLock` in the registry of the lock held elsewhere, both under the
//! group's one owner field, and gone when the wait ends, cancelled included; a
//! `MultiLock` waiting for two locks of one Redis keeps one record there; a group of
//! clients without the registry writes nothing of its wait.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, MultiLock};
use testkit::group::{clients, held_on, redlock, NODE_TIMEOUT};
use testkit::{
    eventually, registry_keys, settles_to, waiting_record, RedisGroup, RedisServer, Waiting,
};

const GENEROUS: Duration = Duration::from_secs(5);
const WATCHDOG: Duration = Duration::from_secs(30);

async fn registry_client(server: &RedisServer, name: &str) -> Client {
    Client::builder(server.url())
        .wait_registry(true)
        .client_name(name)
        .build()
        .await
        .unwrap()
}

/// One client with the registry per master of `group`, all named `name`.
async fn registry_clients(group: &RedisGroup, name: &str) -> Vec<Client> {
    let mut clients = Vec::new();
    for server in &group.servers {
        clients.push(registry_client(server, name).await);
    }
    clients
}

async fn raws(group: &RedisGroup) -> Vec<MultiplexedConnection> {
    let mut raws = Vec::new();
    for server in &group.servers {
        raws.push(server.raw().await);
    }
    raws
}

/// The owners in the waiters of the lock `key`.
async fn waiters(conn: &MultiplexedConnection, key: &str) -> Vec<String> {
    redis::cmd("ZRANGE")
        .arg(format!("redis_rlock_waiters:{{{key}}}"))
        .arg(0)
        .arg(-1)
        .query_async(&mut conn.clone())
        .await
        .unwrap()
}

/// The owners waiting for `key`, once there are `n` of them.
async fn waiters_become(conn: &MultiplexedConnection, key: &str, n: usize) -> Vec<String> {
    settles_to(n, GENEROUS, || async { waiters(conn, key).await.len() }).await;
    let last = waiters(conn, key).await;
    assert_eq!(last.len(), n, "waiters of `{key}`: {last:?}");
    last
}

/// The owner's record, without `since`: `client` and `lock`.
async fn record(conn: &MultiplexedConnection, owner: &str) -> Vec<(String, String)> {
    let mut pairs = waiting_record(conn, owner).await;
    assert_eq!(pairs.len(), 3, "{pairs:?}");
    assert_eq!(pairs[2].0, "since");
    pairs.truncate(2);
    pairs
}

fn names(client: &str, lock: &str) -> Vec<(String, String)> {
    vec![
        ("client".to_string(), client.to_string()),
        ("lock".to_string(), lock.to_string()),
    ]
}

/// Waits until no master has a registry key left.
async fn registry_empties(raws: &[MultiplexedConnection]) {
    for (index, raw) in raws.iter().enumerate() {
        let left = settles_to(0, GENEROUS, || async { registry_keys(raw).await.len() }).await;
        assert_eq!(
            left,
            0,
            "master {index} kept {:?}",
            registry_keys(raw).await
        );
    }
}

/// The owner waiting for `key` on every master, the same one on each.
async fn one_waiter_everywhere(raws: &[MultiplexedConnection], key: &str) -> String {
    let mut owners = Vec::new();
    for raw in raws {
        owners.extend(waiters_become(raw, key, 1).await);
    }
    assert!(owners.iter().all(|owner| *owner == owners[0]), "{owners:?}");
    owners.swap_remove(0)
}

#[tokio::test]
async fn a_waiting_redlock_is_in_every_masters_registry_until_it_has_the_lock() {
    let group = RedisGroup::start(3);
    let raws = raws(&group).await;
    let holders = clients(&group, WATCHDOG).await;
    let waiters = registry_clients(&group, "redlock-waiter").await;
    let held = redlock(&holders, "job").lock().await.unwrap();
    held_on(&group, "job", &[true; 3]).await;

    let lock = redlock(&waiters, "job");
    let waiting = Waiting::spawn(async move { lock.lock().await.unwrap() });
    let owner = one_waiter_everywhere(&raws, "job").await;
    assert!(
        owner.starts_with(&format!("{}:", waiters[0].id())),
        "the group's owner field, with its first client's id: {owner}"
    );
    for raw in &raws {
        assert_eq!(record(raw, &owner).await, names("redlock-waiter", "job"));
    }

    let woken = waiting
        .woken_by(async { held.unlock().await.unwrap() })
        .await;
    let guard = woken.value;
    assert_eq!(guard.owner(), owner);
    registry_empties(&raws).await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_redlock_wait_leaves_no_entry_on_any_master() {
    let group = RedisGroup::start(3);
    let raws = raws(&group).await;
    let holders = clients(&group, WATCHDOG).await;
    let waiters = registry_clients(&group, "cancelled").await;
    let _held = redlock(&holders, "job").lock().await.unwrap();

    let lock = redlock(&waiters, "job");
    // Dropped by its caller, as a `timeout` running out or a `select!` would drop it.
    let waiting = tokio::spawn(async move { lock.lock().await });
    one_waiter_everywhere(&raws, "job").await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    registry_empties(&raws).await;
}

#[tokio::test]
async fn a_waiting_multilock_is_recorded_for_the_lock_held_elsewhere() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let client = registry_client(&server, "multi").await;
    // Held by this task; the group waits in another.
    let held = client.lock("b").lock().await.unwrap();

    let multi =
        MultiLock::new(vec![client.lock("a"), client.lock("b")]).with_node_timeout(NODE_TIMEOUT);
    let waiting = Waiting::listening(&client, 1, async move { multi.lock().await.unwrap() }).await;
    let owner = waiters_become(&raw, "b", 1).await.swap_remove(0);
    assert_ne!(owner, held.owner());
    assert!(owner.starts_with(&format!("{}:", client.id())), "{owner}");
    assert_eq!(record(&raw, &owner).await, names("multi", "b"));
    // `a` is free: nothing waits for it.
    assert_eq!(waiters(&raw, "a").await, Vec::<String>::new());

    let woken = waiting
        .woken_by(async { held.unlock().await.unwrap() })
        .await;
    let guard = woken.value;
    assert_eq!(guard.owner(), owner);
    registry_empties(std::slice::from_ref(&raw)).await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_multilock_waiting_for_two_locks_of_one_redis_keeps_one_record_through_its_refreshes() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    // Entries refreshed every third of a second: two that fought over the owner's one
    // record would replace it, and restart its `since`, within the samples below.
    let client = Client::builder(server.url())
        .wait_registry(true)
        .client_name("multi")
        .watchdog_timeout(Duration::from_secs(1))
        .build()
        .await
        .unwrap();
    let holder = registry_client(&server, "holder").await;
    let a = holder.lock("a").lock().await.unwrap();

    let multi =
        MultiLock::new(vec![client.lock("a"), client.lock("b")]).with_node_timeout(NODE_TIMEOUT);
    let waiting = Waiting::listening(&client, 1, async move { multi.lock().await.unwrap() }).await;
    let owner = waiters_become(&raw, "a", 1).await.swap_remove(0);
    assert_eq!(record(&raw, &owner).await, names("multi", "a"));
    // `b` taken and `a` freed: the group's next round finds `b` held and waits for it too.
    let b = holder.lock("b").lock().await.unwrap();
    a.unlock().await.unwrap();
    assert_eq!(waiters_become(&raw, "b", 1).await, vec![owner.clone()]);
    let moved = settles_to(names("multi", "b"), GENEROUS, || record(&raw, &owner)).await;
    assert_eq!(
        moved,
        names("multi", "b"),
        "the record names the lock found held last"
    );
    // Through several refreshes of both entries, one record, never replaced.
    let first = waiting_record(&raw, &owner).await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(
            waiting_record(&raw, &owner).await,
            first,
            "the record changed"
        );
    }

    let woken = waiting.woken_by(async { b.unlock().await.unwrap() }).await;
    registry_empties(std::slice::from_ref(&raw)).await;
    woken.value.unlock().await.unwrap();
}

#[tokio::test]
async fn a_group_without_the_registry_writes_nothing_of_its_wait() {
    let group = RedisGroup::start(3);
    let raws = raws(&group).await;
    let holders = clients(&group, WATCHDOG).await;
    let plain = clients(&group, WATCHDOG).await;
    let registered = registry_clients(&group, "on").await;
    let _a = redlock(&holders, "a").lock().await.unwrap();
    let _b = redlock(&holders, "b").lock().await.unwrap();

    let lock = redlock(&plain, "a");
    let _plain = tokio::spawn(async move { lock.lock().await });
    let lock = redlock(&registered, "b");
    let _registered = tokio::spawn(async move { lock.lock().await });
    // The plain group waits: it listens on the masters that answered busy (two at least).
    eventually("the plain group listens", GENEROUS, || {
        let channels = plain.iter().map(|c| c.status().subscribed_channels);
        channels.sum::<usize>() >= 2
    })
    .await;
    // Once the registered group's entries are there, the plain one's would be too.
    let owner = one_waiter_everywhere(&raws, "b").await;
    for raw in &raws {
        assert_eq!(waiters(raw, "a").await, Vec::<String>::new());
        assert_eq!(
            registry_keys(raw).await,
            [
                "redis_rlock_waiters:{b}".to_string(),
                format!("redis_rlock_waiting:{{{owner}}}"),
            ],
            "only the registered group's two keys"
        );
    }
}
