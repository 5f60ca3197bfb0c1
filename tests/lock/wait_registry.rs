//! The opt-in wait registry: a waiting call is in its lock's `redis_rlock_waiters:{K}` and
//! in its own `redis_rlock_waiting:{<owner>}` while it waits (kept fresh past their TTL),
//! gone when the wait ends however it ends, expired when its process dies; nothing is
//! written when the registry is off.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_rlock::Client;
use testkit::{
    client, registry_keys, server_millis, settles_to, waiting_record, RedisServer, Waiting,
};

const GENEROUS: Duration = Duration::from_secs(5);

async fn registry_client(server: &RedisServer, name: &str, ttl: Duration) -> Client {
    Client::builder(server.url())
        .wait_registry(true)
        .client_name(name)
        .watchdog_timeout(ttl)
        .build()
        .await
        .unwrap()
}

/// The owners in the waiters of the lock `key`, with their expiries.
async fn waiters(conn: &MultiplexedConnection, key: &str) -> Vec<(String, i64)> {
    redis::cmd("ZRANGE")
        .arg(format!("redis_rlock_waiters:{{{key}}}"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(&mut conn.clone())
        .await
        .unwrap()
}

/// The owners waiting for `key`, once there are `n` of them.
async fn waiters_become(conn: &MultiplexedConnection, key: &str, n: usize) -> Vec<(String, i64)> {
    settles_to(n, GENEROUS, || async { waiters(conn, key).await.len() }).await;
    let last = waiters(conn, key).await;
    assert_eq!(last.len(), n, "waiters of `{key}`: {last:?}");
    last
}

#[tokio::test]
async fn a_waiter_is_registered_while_it_waits_and_gone_once_it_has_the_lock() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let holder = client(&server).await;
    let waiter = registry_client(&server, "worker-7", Duration::from_secs(30)).await;
    let guard = holder.lock("job").lock().await.unwrap();

    let lock = waiter.lock("job");
    let waiting = Waiting::listening(&waiter, 1, async move { lock.lock().await.unwrap() }).await;
    let entries = waiters_become(&raw, "job", 1).await;
    let (owner, expiry) = &entries[0];
    assert!(owner.starts_with(&format!("{}:", waiter.id())), "{owner}");
    let now = server_millis(&mut raw.clone()).await;
    let left = expiry - now;
    assert!((20_000..=30_000).contains(&left), "expires in {left} ms");
    let pttl = testkit::pttl(&mut raw.clone(), "redis_rlock_waiters:{job}").await;
    assert!((20_000..=30_000).contains(&pttl), "pttl {pttl}");
    let fields = waiting_record(&raw, owner).await;
    assert_eq!(fields[0], ("client".to_string(), "worker-7".to_string()));
    assert_eq!(fields[1], ("lock".to_string(), "job".to_string()));
    let since: i64 = fields[2].1.parse().unwrap();
    assert!(
        since <= now && now - since < 5_000,
        "since {since}, now {now}"
    );
    let pttl = testkit::pttl(
        &mut raw.clone(),
        &format!("redis_rlock_waiting:{{{owner}}}"),
    )
    .await;
    assert!((20_000..=30_000).contains(&pttl), "pttl {pttl}");

    let woken = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    let left = settles_to(0, GENEROUS, || async { registry_keys(&raw).await.len() }).await;
    assert_eq!(left, 0, "left behind: {:?}", registry_keys(&raw).await);
    woken.value.unlock().await.unwrap();
}

#[tokio::test]
async fn without_the_registry_a_wait_writes_nothing_of_it() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let holder = client(&server).await;
    let (plain, registered) = (
        client(&server).await,
        registry_client(&server, "on", Duration::from_secs(30)).await,
    );
    let _a = holder.lock("a").lock().await.unwrap();
    let _b = holder.lock("b").lock().await.unwrap();
    let lock = plain.lock("a");
    let _plain = Waiting::listening(&plain, 1, async move { lock.lock().await }).await;
    let lock = registered.lock("b");
    let _registered = Waiting::listening(&registered, 1, async move { lock.lock().await }).await;
    // Once the registered waiter's entry is there, the plain one's would be too.
    waiters_become(&raw, "b", 1).await;
    assert_eq!(waiters(&raw, "a").await, Vec::new());
    assert_eq!(
        registry_keys(&raw).await.len(),
        2,
        "only `b`'s waiter's two keys"
    );
}

#[tokio::test]
async fn a_wait_that_runs_out_or_is_dropped_leaves_the_registry() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let holder = client(&server).await;
    let waiter = registry_client(&server, "w", Duration::from_secs(30)).await;
    let _held = holder.lock("job").lock().await.unwrap();

    // Runs out.
    let lock = waiter.lock("job");
    let out = tokio::spawn(async move {
        lock.try_lock_for(Duration::from_millis(1_500))
            .await
            .unwrap()
    });
    waiters_become(&raw, "job", 1).await;
    let out = tokio::time::timeout(GENEROUS, out).await.unwrap().unwrap();
    assert!(out.is_none());
    waiters_become(&raw, "job", 0).await;
    let left = settles_to(0, GENEROUS, || async { registry_keys(&raw).await.len() }).await;
    assert_eq!(left, 0);

    // Dropped by its caller.
    let lock = waiter.lock("job");
    let dropped = tokio::spawn(async move { lock.lock().await });
    waiters_become(&raw, "job", 1).await;
    dropped.abort();
    waiters_become(&raw, "job", 0).await;
    let left = settles_to(0, GENEROUS, || async { registry_keys(&raw).await.len() }).await;
    assert_eq!(left, 0);
}

#[tokio::test]
async fn a_long_wait_keeps_its_entry_past_the_ttl() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let holder = client(&server).await;
    // Refreshed every third of it: a loaded machine would have to stall the waiter for a
    // whole second to lose the entry.
    let ttl = Duration::from_millis(1_000);
    let waiter = registry_client(&server, "w", ttl).await;
    let guard = holder.lock("job").lock().await.unwrap();
    let lock = waiter.lock("job");
    let waiting = Waiting::listening(&waiter, 1, async move { lock.lock().await.unwrap() }).await;
    let first = waiters_become(&raw, "job", 1).await;
    // Time itself is what is tested: three TTLs later, the entry is still there, renewed.
    tokio::time::sleep(ttl * 3).await;
    let later = waiters(&raw, "job").await;
    assert_eq!(later.len(), 1, "{later:?}");
    assert_eq!(later[0].0, first[0].0);
    assert!(
        later[0].1 > first[0].1,
        "refreshed: {first:?} then {later:?}"
    );
    assert_eq!(waiting_record(&raw, &first[0].0).await.len(), 3);
    let woken = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    woken.value.unlock().await.unwrap();
}

#[test]
fn a_crashed_waiters_entries_expire() {
    let server = RedisServer::start();
    let ttl = Duration::from_millis(800);
    let check = tokio::runtime::Runtime::new().unwrap();
    let raw = check.block_on(server.raw());
    let holder = check.block_on(client(&server));
    let _held = check.block_on(holder.lock("job").lock()).unwrap();

    // The waiter's process, as far as its client can tell: a runtime that stops dead,
    // with no chance to clean up.
    let doomed = tokio::runtime::Runtime::new().unwrap();
    doomed.block_on(async {
        let waiter = registry_client(&server, "doomed", ttl).await;
        let lock = waiter.lock("job");
        tokio::spawn(async move { lock.lock().await });
        std::mem::forget(waiter);
    });
    check.block_on(waiters_become(&raw, "job", 1));
    doomed.shutdown_background();

    let left = check.block_on(settles_to(0, ttl * 4, || async {
        registry_keys(&raw).await.len()
    }));
    assert_eq!(
        left,
        0,
        "left behind: {:?}",
        check.block_on(registry_keys(&raw))
    );
}

#[tokio::test]
async fn every_lock_kind_registers_its_waiters() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let holder = client(&server).await;
    let waiter = registry_client(&server, "w", Duration::from_secs(30)).await;
    let _fair = holder.fair_lock("fair").lock().await.unwrap();
    let _fenced = holder.fenced_lock("fenced").lock().await.unwrap();
    let _write = holder
        .read_write_lock("rw")
        .write_lock()
        .lock()
        .await
        .unwrap();

    let (fair, fenced, read) = (
        waiter.fair_lock("fair"),
        waiter.fenced_lock("fenced"),
        waiter.read_write_lock("rw").read_lock(),
    );
    let _waits = [
        tokio::spawn(async move { fair.lock().await.map(drop) }),
        tokio::spawn(async move { fenced.lock().await.map(drop) }),
        tokio::spawn(async move { read.lock().await.map(drop) }),
    ];
    for key in ["fair", "fenced", "rw"] {
        let entries = waiters_become(&raw, key, 1).await;
        let fields = waiting_record(&raw, &entries[0].0).await;
        assert_eq!(fields[1], ("lock".to_string(), key.to_string()));
    }
}

#[tokio::test]
async fn bad_registry_and_class_settings_are_refused_before_anything_is_sent() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let long_name = "n".repeat(257);
    let refused = [
        Client::builder(server.url()).client_name("").build().await,
        Client::builder(server.url())
            .client_name(long_name)
            .build()
            .await,
        Client::builder(server.url())
            .long_wait_warning(Duration::ZERO)
            .build()
            .await,
        Client::builder(server.url())
            .max_lock_classes(0)
            .build()
            .await,
        Client::builder(server.url())
            .max_lock_classes(10_001)
            .build()
            .await,
    ];
    for outcome in refused {
        let error = outcome.expect_err("refused");
        assert!(error.is_invalid_argument(), "{error}");
    }
    assert_eq!(registry_keys(&raw).await.len(), 0);
    assert_eq!(testkit::dbsize(&mut raw.clone()).await, 0);
}
