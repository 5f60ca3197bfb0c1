//! A Redis 7 ACL user of read-write locks: the README's lock user plus the read-write
//! lock's rules (its timeout keys `~{app:*`, its channel `&redisson_rwlock:*`, and
//! `+hdel +hgetall +hlen`) can use both sides, wait and be woken; a user lacking one of them
//! is told which at the first call, with nothing written, and a lock is never freed
//! without its unlock message.

use std::time::Duration;

use redis_rlock::Client;
use testkit::acl::{readme_rules, set_user, user_url, without};
use testkit::{keys_but_latches, RedisServer, Waiting};

/// The read-write lock's rules beyond the README's for every lock.
const READ_WRITE_RULES: [&str; 5] = [
    "~{app:*",
    "&redisson_rwlock:*",
    "+hdel",
    "+hgetall",
    "+hlen",
];

fn rules() -> Vec<String> {
    let mut rules = readme_rules("app:*");
    rules.extend(READ_WRITE_RULES.iter().map(|rule| rule.to_string()));
    rules
}

async fn user_client(server: &RedisServer) -> Client {
    Client::builder(user_url(server))
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .expect("connect as the ACL user")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rules_allow_both_sides_waits_and_force_unlocks() {
    let server = RedisServer::start();
    set_user(&server, &rules());
    let (a, b) = (user_client(&server).await, user_client(&server).await);
    let rw = a.read_write_lock("app:doc:1");

    // The writer reads, then downgrades; a reader of another client waits and is woken.
    let writing = rw.write_lock().lock().await.unwrap();
    let reading = rw.read_lock().lock().await.unwrap();
    let other = b.read_write_lock("app:doc:1").read_lock();
    let waiting = Waiting::listening(&b, 1, async move { other.lock().await.unwrap() }).await;
    let woken = waiting
        .woken_by(async { writing.unlock().await.unwrap() })
        .await
        .value;
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 1);
    assert!(rw.read_lock().is_locked().await.unwrap());
    assert!(rw.read_lock().remaining_ttl().await.unwrap().is_some());
    reading.unlock().await.unwrap();
    assert!(rw.read_lock().force_unlock().await.unwrap());
    assert!(woken.unlock().await.is_err(), "forced away");
    assert_eq!(
        keys_but_latches(&server.raw().await).await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_the_timeout_keys_is_told_before_anything_is_written() {
    let server = RedisServer::start();
    set_user(&server, &without(&rules(), "~{app:*"));
    let client = user_client(&server).await;
    let rw = client.read_write_lock("app:doc:2");
    for (side, result) in [
        ("read", rw.read_lock().lock().await.map(drop)),
        ("write", rw.write_lock().lock().await.map(drop)),
    ] {
        let err = result.expect_err(side);
        assert!(err.is_permission_denied(), "{side}: {err}");
        assert!(err.to_string().contains("{app:doc:2}:"), "{side}: {err}");
    }
    assert_eq!(
        keys_but_latches(&server.raw().await).await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_a_command_is_told_which_at_the_first_call() {
    let server = RedisServer::start();
    set_user(&server, &without(&rules(), "+hgetall"));
    let client = user_client(&server).await;
    let err = client
        .read_write_lock("app:doc:3")
        .read_lock()
        .lock()
        .await
        .unwrap_err();
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("+hgetall"), "{err}");
    assert_eq!(
        keys_but_latches(&server.raw().await).await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_the_channel_is_refused_before_the_lock_is_written() {
    let server = RedisServer::start();
    set_user(&server, &without(&rules(), "&redisson_rwlock:*"));
    let client = user_client(&server).await;
    let read = client.read_write_lock("app:doc:4").read_lock();
    // Its release could not publish the message its waiters wait for: the first call checks
    // the publish with the kind's other commands, and takes nothing.
    let err = read.lock().await.unwrap_err();
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("&redisson_rwlock:*"), "{err}");
    assert!(err.to_string().contains("+publish"), "{err}");
    assert_eq!(
        keys_but_latches(&server.raw().await).await,
        Vec::<String>::new()
    );
}
