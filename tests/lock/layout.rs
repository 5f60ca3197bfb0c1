//! The Redis data layout, Redisson's: the hash, its field and count, the lease, the channel.

use std::time::Duration;

use futures_util::StreamExt;
use testkit::{client, lock_hash, pttl, RedisServer};

#[tokio::test]
async fn the_lock_is_a_hash_of_owner_field_to_reentry_count() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    let lock = client.lock("order:1001");

    let outer = lock.lock().await.unwrap();
    let hash = lock_hash(&mut raw, "order:1001").await;
    assert_eq!(hash.len(), 1, "one owner field: {hash:?}");
    let (field, count) = hash.iter().next().unwrap();
    assert_eq!(*count, 1);
    assert_eq!(field, outer.owner());
    let (uuid, task) = field.rsplit_once(':').unwrap();
    assert_eq!(uuid, client.id().to_string());
    assert!(task.parse::<u64>().is_ok(), "task id is decimal: {task}");

    // The default watchdog lease: 30 s.
    let ttl = pttl(&mut raw, "order:1001").await;
    assert!((29_000..=30_000).contains(&ttl), "pttl {ttl}");

    let inner = lock.lock().await.unwrap();
    assert_eq!(lock_hash(&mut raw, "order:1001").await[field], 2);
    assert_eq!(lock.hold_count().await.unwrap(), 2);

    inner.unlock().await.unwrap();
    assert_eq!(lock_hash(&mut raw, "order:1001").await[field], 1);
    assert!(lock.is_locked().await.unwrap());

    outer.unlock().await.unwrap();
    assert!(lock_hash(&mut raw, "order:1001").await.is_empty());
    assert_eq!(pttl(&mut raw, "order:1001").await, -2);
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 0);
}

#[tokio::test]
async fn the_final_unlock_publishes_0_on_the_redisson_channel() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let listener = redis::Client::open(server.url()).unwrap();
    let mut pubsub = listener.get_async_pubsub().await.unwrap();
    pubsub
        .subscribe("redisson_lock__channel:{job}")
        .await
        .unwrap();

    let lock = client.lock("job");
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    inner.unlock().await.unwrap(); // not the last hold: no message
    outer.unlock().await.unwrap();

    let mut messages = pubsub.on_message();
    let message = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("an unlock message")
        .unwrap();
    assert_eq!(message.get_channel_name(), "redisson_lock__channel:{job}");
    assert_eq!(message.get_payload::<String>().unwrap(), "0");
    // Exactly one message: the reentrant release published nothing.
    let more = tokio::time::timeout(Duration::from_millis(300), messages.next()).await;
    assert!(more.is_err(), "no second message");
}

#[tokio::test]
async fn queries_report_holder_count_and_ttl() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("report");

    assert!(!lock.is_locked().await.unwrap());
    assert!(!lock.is_held_by_current_task().await.unwrap());
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);

    let guard = lock.lock_with_lease(Duration::from_secs(10)).await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.is_held_by_current_task().await.unwrap());
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(
        ttl > Duration::from_secs(9) && ttl <= Duration::from_secs(10),
        "{ttl:?}"
    );

    // Another task is another owner: it sees the lock held, but not by itself.
    let other = lock.clone();
    let seen = tokio::spawn(async move {
        (
            other.is_locked().await.unwrap(),
            other.is_held_by_current_task().await.unwrap(),
            other.hold_count().await.unwrap(),
        )
    })
    .await
    .unwrap();
    assert_eq!(seen, (true, false, 0));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn key_prefix_and_hash_tags_follow_redisson_naming() {
    let server = RedisServer::start();
    let client = redis_rlock::Client::builder(server.url())
        .key_prefix("app:")
        .build()
        .await
        .unwrap();
    let mut raw = server.raw().await;
    let guard = client.lock("{user42}:cart").lock().await.unwrap();
    assert_eq!(
        guard.name(),
        "{user42}:cart",
        "the name, as Lock::name gives it"
    );
    assert_eq!(guard.key(), "app:{user42}:cart");
    assert_eq!(lock_hash(&mut raw, "app:{user42}:cart").await.len(), 1);

    let listener = redis::Client::open(server.url()).unwrap();
    let mut pubsub = listener.get_async_pubsub().await.unwrap();
    pubsub
        .subscribe("redisson_lock__channel:app:{user42}:cart")
        .await
        .unwrap();
    guard.unlock().await.unwrap();
    let message = tokio::time::timeout(Duration::from_secs(5), pubsub.on_message().next())
        .await
        .expect("unlock message on the hash-tagged channel");
    assert!(message.is_some());
}

#[tokio::test]
async fn a_hash_written_by_another_redisson_client_is_respected() {
    let server = RedisServer::start();
    let client = client(&server).await;
    let mut raw = server.raw().await;
    // What a Java Redisson client writes when its thread 57 takes the lock.
    let _: () = redis::pipe()
        .cmd("HSET")
        .arg("shared")
        .arg("3f1a7c9e-0000-4000-8000-000000000001:57")
        .arg(1)
        .cmd("PEXPIRE")
        .arg("shared")
        .arg(2_000)
        .query_async(&mut raw)
        .await
        .unwrap();
    let lock = client.lock("shared");
    assert!(lock.try_lock().await.unwrap().is_none());
    // The Java side releases with Redisson's unlock: DEL + PUBLISH 0. Our waiter wakes.
    let waiter = testkit::Waiting::listening(&client, 1, async move {
        lock.lock().await.map(|g| g.owner().to_string())
    })
    .await;
    let woken = waiter
        .woken_by(async {
            let _: () = redis::pipe()
                .cmd("DEL")
                .arg("shared")
                .cmd("PUBLISH")
                .arg("redisson_lock__channel:{shared}")
                .arg("0")
                .query_async(&mut raw)
                .await
                .unwrap();
        })
        .await;
    assert!(
        woken.after < Duration::from_millis(1_000),
        "woken by the Java client's unlock message, long before its 2 s lease: {:?}",
        woken.after
    );
    assert!(woken.value.unwrap().starts_with(&client.id().to_string()));
}
