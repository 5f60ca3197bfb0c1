//! A full Redis (`maxmemory` reached, `noeviction`): every release still works, for every
//! lock kind and every hold (nested and final), as do `force_unlock` and the watchdog's
//! renewals; a new acquire fails with a clear, typed error and writes nothing.

use testkit::bounded;

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_rlock::{DistributedLock, Lock, LockGuard, LockKind, LostReason};
use testkit::{client, client_with_watchdog, lock_hash, pttl, settles_to, RedisServer};

/// A bound for calls that must not wait.
const GENEROUS: Duration = Duration::from_secs(5);

/// A server that refuses writes that may grow memory once `maxmemory` is reached.
fn start() -> RedisServer {
    RedisServer::start_with_args(&["--maxmemory-policy", "noeviction"])
}

/// Sets `maxmemory` to 1 byte and proves that Redis is full: an ordinary `SET` is refused
/// with OOM.
async fn fill(server: &RedisServer, raw: &mut MultiplexedConnection) {
    assert_eq!(server.cli(&["CONFIG", "SET", "maxmemory", "1"]), "OK");
    let refused = redis::cmd("SET")
        .arg("filler")
        .arg("value")
        .query_async::<()>(raw)
        .await
        .expect_err("Redis is full");
    assert!(refused.to_string().contains("OOM"), "{refused}");
}

/// Lifts the limit again.
fn drain(server: &RedisServer) {
    assert_eq!(server.cli(&["CONFIG", "SET", "maxmemory", "0"]), "OK");
}

/// Takes `lock` (a client of `server`) twice (count 2), fills Redis, then releases the
/// inner hold (the lock stays held, count 1) and the outer one (the key is gone): both must
/// succeed.
async fn releases_work_when_full<K: LockKind>(
    kind: &str,
    server: &RedisServer,
    raw: &mut MultiplexedConnection,
    lock: &Lock<K>,
) {
    let name = lock.name().to_string();
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let owner = outer.owner().to_string();
    fill(server, raw).await;

    bounded("nested unlock", inner.unlock())
        .await
        .unwrap_or_else(|e| panic!("{kind}: nested release when full: {e}"));
    let hash = lock_hash(raw, &name).await;
    assert_eq!(hash.get(&owner), Some(&1), "{kind}: count 1 left: {hash:?}");
    assert!(pttl(raw, &name).await > 0, "{kind}: still held");
    assert!(!outer.is_lost(), "{kind}: the outer hold is intact");
    // A read-only query runs when full too.
    assert_eq!(lock.hold_count().await.unwrap(), 1, "{kind}");

    bounded("final unlock", outer.unlock())
        .await
        .unwrap_or_else(|e| panic!("{kind}: final release when full: {e}"));
    assert!(
        !testkit::key_exists(raw, &name).await,
        "{kind}: the lock is free"
    );
    assert!(!lock.is_locked().await.unwrap(), "{kind}");
    drain(server);
}

#[tokio::test]
async fn rlock_nested_and_final_releases_work_when_redis_is_full() {
    let server = start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    releases_work_when_full("RLock", &server, &mut raw, &client.lock("job")).await;
}

#[tokio::test]
async fn fenced_lock_nested_and_final_releases_work_when_redis_is_full() {
    let server = start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    releases_work_when_full("FencedLock", &server, &mut raw, &client.fenced_lock("job")).await;
}

#[tokio::test]
async fn fair_lock_nested_and_final_releases_work_when_redis_is_full() {
    let server = start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    releases_work_when_full("FairLock", &server, &mut raw, &client.fair_lock("job")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_final_release_when_full_hands_the_lock_to_the_queued_waiter() {
    let server = start();
    let mut raw = server.raw().await;
    let (holder, other) = (client(&server).await, client(&server).await);
    let guard = holder.fair_lock("jobs").lock().await.unwrap();
    let waiting = tokio::spawn(async move { other.fair_lock("jobs").lock().await });
    let queued = settles_to(1, GENEROUS, || {
        let mut raw = raw.clone();
        async move { testkit::fair_queue(&mut raw, "jobs").await.len() }
    })
    .await;
    assert_eq!(queued, 1, "the waiter is queued before Redis fills");
    fill(&server, &mut raw).await;

    bounded("final unlock", guard.unlock())
        .await
        .expect("the final release works when full");
    drain(&server);
    let raised = Instant::now();
    let waiter: LockGuard = tokio::time::timeout(Duration::from_secs(2), waiting)
        .await
        .expect("the waiter gets the lock within 2 s of memory being raised")
        .unwrap()
        .expect("the waiter's lock() succeeds");
    assert!(raised.elapsed() < Duration::from_secs(2));
    let hash = lock_hash(&mut raw, "jobs").await;
    assert_eq!(hash.get(waiter.owner()), Some(&1), "{hash:?}");
    waiter.unlock().await.unwrap();
}

#[tokio::test]
async fn force_unlock_works_for_every_kind_when_redis_is_full() {
    let server = start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let plain = client.lock("plain");
    let fair = client.fair_lock("fair");
    let fenced = client.fenced_lock("fenced");
    let guards = [
        plain.lock().await.unwrap(),
        fair.lock().await.unwrap(),
        fenced.lock().await.unwrap(),
    ];
    let lost: Vec<_> = guards.iter().map(LockGuard::lost).collect();
    fill(&server, &mut raw).await;

    for (kind, deleted) in [
        ("RLock", bounded("force_unlock", plain.force_unlock()).await),
        (
            "FairLock",
            bounded("force_unlock", fair.force_unlock()).await,
        ),
        (
            "FencedLock",
            bounded("force_unlock", fenced.force_unlock()).await,
        ),
    ] {
        let deleted = deleted.unwrap_or_else(|e| panic!("{kind}: force_unlock when full: {e}"));
        assert!(deleted, "{kind}: it was held");
    }
    for name in ["plain", "fair", "fenced"] {
        assert!(
            !testkit::key_exists(&mut raw, name).await,
            "{name} is deleted"
        );
    }
    for lost in lost {
        let reason = bounded("lost()", lost).await;
        assert_eq!(reason, LostReason::Released);
    }
    drain(&server);
    drop(guards);
}

#[tokio::test]
async fn the_watchdog_keeps_renewing_when_redis_is_full() {
    let server = start();
    let mut raw = server.raw().await;
    let client = client_with_watchdog(&server, Duration::from_millis(600)).await;
    let guards = [
        client.lock("plain").lock().await.unwrap(),
        client.fair_lock("fair").lock().await.unwrap(),
        client.fenced_lock("fenced").lock().await.unwrap(),
    ];
    fill(&server, &mut raw).await;

    // 1.5 s is two and a half leases: without renewals the keys would be gone.
    let lost = futures_util::future::select_all(guards.iter().map(|g| Box::pin(g.lost())));
    if let Ok((reason, index, _)) = tokio::time::timeout(Duration::from_millis(1500), lost).await {
        panic!(
            "{} was lost while Redis was full: {reason}",
            guards[index].key()
        );
    }
    for guard in &guards {
        let ttl = pttl(&mut raw, guard.key()).await;
        assert!(ttl > 0, "{}: pttl {ttl}", guard.key());
        assert!(!guard.is_lost(), "{}", guard.key());
    }
    drain(&server);
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}

/// Whether `text` holds a run of 40 hex digits (a script's SHA).
fn has_sha(text: &str) -> bool {
    let mut run = 0;
    for c in text.chars() {
        run = if c.is_ascii_hexdigit() { run + 1 } else { 0 };
        if run >= 40 {
            return true;
        }
    }
    false
}

/// Every acquire call of `lock` fails with a clear OOM error, not a connection error.
async fn every_acquire_fails_clearly(kind: &str, lock: &impl DistributedLock<Guard = LockGuard>) {
    let name = lock.name().to_string();
    let wait = Duration::from_millis(300);
    let lease = Duration::from_secs(10);
    for (call, result) in testkit::every_acquire(lock, wait, lease).await {
        let err = match result {
            Err(e) => e,
            Ok(()) => panic!("{kind}.{call} acquired while Redis was full"),
        };
        let text = err.to_string();
        assert!(
            !err.is_connection_error(),
            "{kind}.{call}: a connection error: {text}"
        );
        assert!(
            !err.is_invalid_argument(),
            "{kind}.{call}: invalid argument: {text}"
        );
        assert!(
            text.contains(&name),
            "{kind}.{call}: lock not named: {text}"
        );
        assert!(text.contains("OOM"), "{kind}.{call}: OOM not said: {text}");
        assert!(
            !text.contains("@user_script"),
            "{kind}.{call}: script location: {text}"
        );
        assert!(!has_sha(&text), "{kind}.{call}: script hash: {text}");
    }
}

#[tokio::test]
async fn acquiring_when_full_fails_with_a_clear_oom_error_and_writes_nothing() {
    let server = start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    assert_eq!(testkit::dbsize(&mut raw).await, 0);
    fill(&server, &mut raw).await;

    let started = Instant::now();
    every_acquire_fails_clearly("RLock", &client.lock("new-plain")).await;
    every_acquire_fails_clearly("FairLock", &client.fair_lock("new-fair")).await;
    every_acquire_fails_clearly("FencedLock", &client.fenced_lock("new-fenced")).await;
    // Refused by Redis, not retried: no call waits for retries or a subscription.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "15 refused acquires took {:?}",
        started.elapsed()
    );
    assert_eq!(testkit::dbsize(&mut raw).await, 0, "nothing written");
    assert_eq!(client.status().held_locks, 0);
    assert_eq!(client.status().queued_waiters, 0);
    drain(&server);
}
