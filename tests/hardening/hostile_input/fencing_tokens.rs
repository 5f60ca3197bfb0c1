//! Fencing tokens over their whole range: exact past 2^53, up to `i64::MAX` and no further
//! (with the lock not written), and `fenced_set` comparing exactly above 2^53 and at
//! `u64::MAX`.

use testkit::{bounded, client, RedisServer};

use super::{get, set};

/// 2^53: the first integer a double cannot tell from its successor.
const TWO_POW_53: u64 = 1 << 53;

#[tokio::test]
async fn fencing_tokens_stay_exact_past_2_pow_53() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    set(&mut raw, counter, &(TWO_POW_53 - 1).to_string()).await;
    let lock = client.fenced_lock("ledger");
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let guard = lock.lock().await.unwrap();
        tokens.push(guard.fencing_token().unwrap());
        guard.unlock().await.unwrap();
    }
    assert_eq!(tokens, [TWO_POW_53, TWO_POW_53 + 1, TWO_POW_53 + 2]);
    assert_eq!(
        get(&mut raw, counter).await,
        Some((TWO_POW_53 + 2).to_string())
    );
}

#[tokio::test]
async fn fencing_tokens_reach_i64_max_then_fail_without_writing_the_lock() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let counter = "redisson_lock_token:{ledger}";
    set(&mut raw, counter, &(i64::MAX - 1).to_string()).await;
    let lock = client.fenced_lock("ledger");
    let guard = lock.lock().await.unwrap();
    assert_eq!(guard.fencing_token(), Some(i64::MAX as u64));
    guard.unlock().await.unwrap();

    for (call, result) in [
        ("lock()", bounded("lock()", lock.lock()).await.map(drop)),
        (
            "try_lock()",
            bounded("try_lock()", lock.try_lock()).await.map(drop),
        ),
    ] {
        let err = result.expect_err(call);
        assert!(!err.is_invalid_argument(), "{call}: {err}");
        assert!(!err.is_connection_error(), "{call}: {err}");
        assert!(
            !testkit::key_exists(&mut raw, "ledger").await,
            "{call}: half an acquire"
        );
    }
    assert_eq!(get(&mut raw, counter).await, Some(i64::MAX.to_string()));
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn fenced_set_compares_tokens_exactly_above_2_pow_53() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let key = "balance";
    assert!(client
        .fenced_set(key, TWO_POW_53 + 1, b"first")
        .await
        .unwrap());
    assert_eq!(
        get(&mut raw, "redis_rlock_fence:{balance}").await,
        Some((TWO_POW_53 + 1).to_string())
    );
    assert!(
        !client.fenced_set(key, TWO_POW_53, b"stale").await.unwrap(),
        "2^53 passed a fence at 2^53 + 1"
    );
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("first"));
    assert!(client
        .fenced_set(key, TWO_POW_53 + 1, b"same")
        .await
        .unwrap());
    assert!(client
        .fenced_set(key, TWO_POW_53 + 2, b"newer")
        .await
        .unwrap());
    assert!(!client
        .fenced_set(key, TWO_POW_53 + 1, b"old")
        .await
        .unwrap());
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("newer"));
    assert_eq!(
        get(&mut raw, "redis_rlock_fence:{balance}").await,
        Some((TWO_POW_53 + 2).to_string())
    );
}

#[tokio::test]
async fn fenced_set_compares_tokens_exactly_at_u64_max() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let key = "balance";
    assert!(client.fenced_set(key, u64::MAX, b"max").await.unwrap());
    assert!(
        !client
            .fenced_set(key, u64::MAX - 1, b"stale")
            .await
            .unwrap(),
        "u64::MAX - 1 passed a fence at u64::MAX"
    );
    assert!(!client.fenced_set(key, 0, b"zero").await.unwrap());
    assert!(!client.fenced_set(key, TWO_POW_53, b"low").await.unwrap());
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("max"));
    assert!(client.fenced_set(key, u64::MAX, b"again").await.unwrap());
    assert_eq!(get(&mut raw, key).await.as_deref(), Some("again"));
    assert_eq!(
        get(&mut raw, "redis_rlock_fence:{balance}").await,
        Some(u64::MAX.to_string())
    );
}
