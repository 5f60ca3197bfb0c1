//! A lock name on a key that holds other data (a string, a hash of user data, a list, a
//! Redisson read-write lock): `force_unlock` and every acquire call and query refuse it with
//! `NotALock` and leave the key as it was; in a batch, only the callers of the bad key fail.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use redis_rlock::{Lock, LockKind};
use testkit::{bounded, client, lock_hash, RedisServer};
use tokio::sync::Barrier;

use super::{expect_not_a_lock, get, plant, set, snapshot, Foreign, FOREIGN, GENEROUS};

#[tokio::test]
async fn force_unlock_refuses_a_string_key_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    set(&mut raw, "user:42", "precious").await;
    let _: () = redis::cmd("PEXPIRE")
        .arg("user:42")
        .arg(600_000)
        .query_async(&mut raw)
        .await
        .unwrap();
    let before = snapshot(&mut raw, "user:42").await;
    let err = expect_not_a_lock(
        "force_unlock of a string",
        bounded("force_unlock", client.lock("user:42").force_unlock()).await,
    );
    assert!(err.to_string().contains("user:42"), "{err}");
    assert!(err.to_string().contains("string"), "{err}");
    assert_eq!(get(&mut raw, "user:42").await.as_deref(), Some("precious"));
    let after = snapshot(&mut raw, "user:42").await;
    assert_eq!(before.0, after.0, "the string changed");
    assert!(after.1 > 500_000, "its expiry changed: {}", after.1);
}

#[tokio::test]
async fn force_unlock_refuses_a_hash_of_user_data_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    plant(&mut raw, Foreign::UserHash, "user:ada").await;
    let before = snapshot(&mut raw, "user:ada").await;
    let err = expect_not_a_lock(
        "force_unlock of a user hash",
        bounded("force_unlock", client.lock("user:ada").force_unlock()).await,
    );
    assert!(err.to_string().contains("hash"), "{err}");
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg("user:ada")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(fields.get("name").map(String::as_str), Some("Ada"));
    assert_eq!(
        fields.get("email").map(String::as_str),
        Some("ada@example.com")
    );
    assert_eq!(before, snapshot(&mut raw, "user:ada").await);
}

#[tokio::test]
async fn force_unlock_refuses_a_list_and_keeps_it() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    plant(&mut raw, Foreign::List, "jobs").await;
    let before = snapshot(&mut raw, "jobs").await;
    let err = expect_not_a_lock(
        "force_unlock of a list",
        bounded("force_unlock", client.lock("jobs").force_unlock()).await,
    );
    assert!(err.to_string().contains("list"), "{err}");
    assert_eq!(before, snapshot(&mut raw, "jobs").await);
}

#[tokio::test]
async fn force_unlock_refuses_a_read_write_lock_and_says_so() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    plant(&mut raw, Foreign::ReadWriteLock, "rw").await;
    let before = snapshot(&mut raw, "rw").await;
    let err = expect_not_a_lock(
        "force_unlock of a read-write lock",
        bounded("force_unlock", client.lock("rw").force_unlock()).await,
    );
    assert!(err.to_string().contains("read-write lock"), "{err}");
    assert_eq!(before, snapshot(&mut raw, "rw").await);
}

#[tokio::test]
async fn fair_and_fenced_force_unlock_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("{kind:?}");
        plant(&mut raw, kind, &key).await;
        let before = snapshot(&mut raw, &key).await;
        let keys_before = testkit::dbsize(&mut raw).await;
        let what = format!("FairLock force_unlock of {kind:?}");
        let result = bounded(&what, client.fair_lock(&key).force_unlock()).await;
        let err = expect_not_a_lock(&what, result);
        if matches!(kind, Foreign::ReadWriteLock) {
            assert!(err.to_string().contains("read-write lock"), "{err}");
        }
        let what = format!("FencedLock force_unlock of {kind:?}");
        let result = bounded(&what, client.fenced_lock(&key).force_unlock()).await;
        let err = expect_not_a_lock(&what, result);
        if matches!(kind, Foreign::ReadWriteLock) {
            assert!(err.to_string().contains("read-write lock"), "{err}");
        }
        assert_eq!(before, snapshot(&mut raw, &key).await, "{kind:?} changed");
        assert_eq!(
            keys_before,
            testkit::dbsize(&mut raw).await,
            "{kind:?}: keys written"
        );
    }
}

/// Every acquire call and query of `lock` (named `key`, which holds `kind`) is refused
/// with `NotALock`, and the key and the key count stay as they were.
async fn refuses_to_take_over<K: LockKind>(
    server: &RedisServer,
    lock_kind: &str,
    kind: Foreign,
    key: &str,
    lock: &Lock<K>,
) {
    let mut raw = server.raw().await;
    let before = snapshot(&mut raw, key).await;
    let keys_before = testkit::dbsize(&mut raw).await;
    let wait = Duration::from_millis(300);
    let lease = Duration::from_secs(10);
    let mut calls = testkit::every_acquire(lock, wait, lease).await;
    calls.extend(testkit::every_read(lock).await);
    for (call, result) in calls {
        let err = expect_not_a_lock(&format!("{lock_kind}.{call} on {kind:?}"), result);
        assert!(err.to_string().contains(key), "{err}");
    }
    assert_eq!(
        before,
        snapshot(&mut raw, key).await,
        "{lock_kind} on {kind:?}: the key changed"
    );
    assert_eq!(
        keys_before,
        testkit::dbsize(&mut raw).await,
        "{lock_kind} on {kind:?}: keys written"
    );
}

#[tokio::test]
async fn rlock_acquire_calls_and_queries_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("r:{kind:?}");
        plant(&mut raw, kind, &key).await;
        refuses_to_take_over(&server, "RLock", kind, &key, &client.lock(&key)).await;
    }
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn fair_lock_acquire_calls_and_queries_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("f:{kind:?}");
        plant(&mut raw, kind, &key).await;
        refuses_to_take_over(&server, "FairLock", kind, &key, &client.fair_lock(&key)).await;
    }
    assert_eq!(client.status().held_locks, 0);
    assert_eq!(client.status().queued_waiters, 0);
}

#[tokio::test]
async fn fenced_lock_acquire_calls_and_queries_refuse_keys_that_are_not_locks() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    for kind in FOREIGN {
        let key = format!("x:{kind:?}");
        plant(&mut raw, kind, &key).await;
        refuses_to_take_over(&server, "FencedLock", kind, &key, &client.fenced_lock(&key)).await;
        let counter = format!("redisson_lock_token:{{{key}}}");
        assert!(
            !testkit::key_exists(&mut raw, &counter).await,
            "no token drawn"
        );
    }
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_bad_key_in_a_batch_fails_only_its_own_callers() {
    const EACH: usize = 16;
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    set(&mut raw, "not-a-lock", "user data").await;
    let calls_before = testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls");
    let start = Arc::new(Barrier::new(2 * EACH));
    let tasks: Vec<_> = (0..2 * EACH)
        .map(|i| {
            let name = if i % 2 == 0 {
                format!("good:{i}")
            } else {
                "not-a-lock".to_string()
            };
            let (lock, start) = (client.lock(name), start.clone());
            tokio::spawn(async move {
                start.wait().await;
                tokio::time::timeout(GENEROUS, lock.lock()).await
            })
        })
        .collect();
    let results: Vec<_> = join_all(tasks)
        .await
        .into_iter()
        .map(|joined| joined.unwrap().expect("no call waits"))
        .collect();
    let calls =
        testkit::info_field(&server, "commandstats", "cmdstat_evalsha", "calls") - calls_before;
    // Otherwise this would not test batching: good and bad keys share script calls.
    assert!(
        calls < 2 * EACH as i64,
        "{} acquires at once went out in {calls} script calls",
        2 * EACH
    );
    let mut guards = Vec::new();
    for (i, result) in results.into_iter().enumerate() {
        if i % 2 == 0 {
            let guard = result.unwrap_or_else(|e| panic!("good:{i} failed: {e}"));
            let hash = lock_hash(&mut raw, &format!("good:{i}")).await;
            assert_eq!(hash.get(guard.owner()), Some(&1), "good:{i}: {hash:?}");
            guards.push(guard);
        } else {
            expect_not_a_lock(&format!("task {i} on the string"), result);
        }
    }
    assert_eq!(guards.len(), EACH);
    assert_eq!(
        get(&mut raw, "not-a-lock").await.as_deref(),
        Some("user data")
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}
