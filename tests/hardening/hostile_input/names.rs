//! Lock names and fenced-write keys: empty or over 64 KiB refused at once by every call, a
//! huge name refused within a second, a name of exactly 64 KiB working end to end.

use std::time::{Duration, Instant};

use redis_rlock::{Lock, LockKind, MultiLock, RedLock};
use testkit::{bounded, client, lock_hash, RedisServer};

use super::{expect_invalid, get, BoxedLock, GENEROUS, MAX_NAME};

/// Every call of `lock` refuses its name at once.
async fn every_call_refuses_the_name<K: LockKind>(kind: &str, label: &str, lock: &Lock<K>) {
    let wait = Duration::from_secs(1);
    let lease = Duration::from_secs(10);
    let mut calls = testkit::every_acquire(lock, wait, lease).await;
    calls.extend(testkit::every_read(lock).await);
    calls.push((
        "force_unlock()",
        bounded("force_unlock()", lock.force_unlock())
            .await
            .map(drop),
    ));
    for (call, result) in calls {
        expect_invalid(&format!("{kind} named {label}: {call}"), result);
    }
}

#[tokio::test]
async fn empty_and_oversized_names_are_refused_at_once_by_every_call() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let names = [
        ("empty".to_string(), String::new()),
        ("65,537 bytes".to_string(), "n".repeat(MAX_NAME + 1)),
        ("1 MB".to_string(), "n".repeat(1024 * 1024)),
    ];
    for (label, name) in &names {
        let started = Instant::now();
        every_call_refuses_the_name("RLock", label, &client.lock(name)).await;
        every_call_refuses_the_name("FairLock", label, &client.fair_lock(name)).await;
        every_call_refuses_the_name("FencedLock", label, &client.fenced_lock(name)).await;

        let red = RedLock::new(vec![client.lock(name)]);
        expect_invalid(&format!("RedLock {label}"), red.lock().await.map(drop));
        expect_invalid(&format!("RedLock {label}"), red.try_lock().await.map(drop));
        let fenced = RedLock::new(vec![client.fenced_lock(name)]);
        expect_invalid(
            &format!("RedLock<Fenced> {label}"),
            fenced.try_lock_for(Duration::from_secs(1)).await.map(drop),
        );
        // A good lock next to a bad one: nothing is taken, not even the good one.
        let multi = MultiLock::new(vec![client.lock("good"), client.lock(name)]);
        expect_invalid(
            &format!("MultiLock {label}"),
            multi
                .lock_with_lease(Duration::from_secs(10))
                .await
                .map(drop),
        );
        let took = started.elapsed();
        // 30 calls: a name that was sent would take seconds (a 600 MB name once took 25 s).
        assert!(
            took < Duration::from_secs(3),
            "{label}: the refusals took {took:?}"
        );
    }
    let mut raw = server.raw().await;
    assert_eq!(testkit::dbsize(&mut raw).await, 0, "nothing written");
    assert_eq!(client.status().held_locks, 0);
    assert_eq!(client.status().subscribed_channels, 0);
}

#[tokio::test]
async fn a_single_call_with_a_huge_name_returns_within_a_second() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let name = "x".repeat(1024 * 1024);
    let lock = client.lock(&name);
    for (call, started, result) in [
        ("lock()", Instant::now(), lock.lock().await.map(drop)),
        (
            "try_lock()",
            Instant::now(),
            lock.try_lock().await.map(drop),
        ),
        (
            "force_unlock()",
            Instant::now(),
            lock.force_unlock().await.map(drop),
        ),
        (
            "is_locked()",
            Instant::now(),
            lock.is_locked().await.map(drop),
        ),
    ] {
        let took = started.elapsed();
        expect_invalid(call, result);
        assert!(took < Duration::from_secs(1), "{call} took {took:?}");
    }
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_of_exactly_64_kib_works_end_to_end() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let mut raw = server.raw().await;
    for (kind, prefix) in [("RLock", 'r'), ("FairLock", 'f'), ("FencedLock", 'x')] {
        let name = prefix.to_string().repeat(MAX_NAME);
        assert_eq!(name.len(), 65_536);
        let (holder, waiter) = (
            BoxedLock::of(&a, kind, &name),
            BoxedLock::of(&b, kind, &name),
        );
        let guard = holder
            .lock_with_lease(Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        if kind == "FencedLock" {
            assert!(guard.fencing_token().is_some());
            let counter = format!("redisson_lock_token:{{{name}}}");
            assert_eq!(
                get(&mut raw, &counter).await,
                guard.fencing_token().map(|t| t.to_string())
            );
        }
        let hash = lock_hash(&mut raw, &name).await;
        assert_eq!(hash.get(guard.owner()), Some(&1), "{kind}");
        // The other client waits on the lock's channel and is woken by the release.
        let waiting = testkit::Waiting::listening(&b, 1, async move {
            let got = waiter
                .try_lock_with(Duration::from_secs(10), Duration::from_secs(30))
                .await;
            got.map(|g| g.expect("woken by the release"))
        })
        .await;
        let woken = waiting
            .woken_by(async { guard.unlock().await.unwrap() })
            .await;
        assert!(woken.after < GENEROUS, "{kind}: {:?}", woken.after);
        let second = woken.value.unwrap();
        let hash = lock_hash(&mut raw, &name).await;
        assert_eq!(hash.get(second.owner()), Some(&1), "{kind}");
        second.unlock().await.unwrap();
        assert!(
            !testkit::key_exists(&mut raw, &name).await,
            "{kind}: released"
        );
    }
    // The queries and force_unlock take it too.
    let name = "q".repeat(MAX_NAME);
    let lock = a.lock(&name);
    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(lock.remaining_ttl().await.unwrap().is_some());
    assert!(lock.force_unlock().await.unwrap());
    assert!(!testkit::key_exists(&mut raw, &name).await);
    drop(guard);
}

#[tokio::test]
async fn fenced_set_refuses_an_empty_key_and_keys_over_64_kib() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for (label, key) in [
        ("empty", String::new()),
        ("65,537 bytes", "k".repeat(MAX_NAME + 1)),
        ("1 MB", "k".repeat(1024 * 1024)),
    ] {
        let started = Instant::now();
        let result = bounded(label, client.fenced_set(&key, 7, b"value")).await;
        expect_invalid(&format!("fenced_set key {label}"), result);
        assert!(started.elapsed() < Duration::from_secs(1), "{label}");
    }
    assert_eq!(testkit::dbsize(&mut raw).await, 0, "nothing written");

    let key = "k".repeat(MAX_NAME);
    assert!(client.fenced_set(&key, 7, b"value").await.unwrap());
    assert_eq!(get(&mut raw, &key).await.as_deref(), Some("value"));
    assert!(!client.fenced_set(&key, 6, b"stale").await.unwrap());
}
