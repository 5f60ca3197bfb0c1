//! Refused input: leases, ids, counts and names out of range, and keys that hold other data,
//! refused with nothing written; a user without a command the semaphore runs refused before
//! anything is written.

use std::time::Duration;

use redis_rlock::{Client, Error};
use testkit::{client, dbsize, raw_get, RedisServer, Waiting};

use super::LEASE;

#[tokio::test]
async fn bad_input_writes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("bad");
    assert!(gpu.try_set_permits(1).await.unwrap());
    let invalid = |e: Error| assert!(e.is_invalid_argument(), "{e}");
    invalid(gpu.acquire(Duration::from_millis(9)).await.unwrap_err());
    invalid(gpu.acquire(Duration::MAX).await.unwrap_err());
    invalid(gpu.try_acquire(Duration::ZERO).await.unwrap_err());
    invalid(gpu.try_release("").await.unwrap_err());
    invalid(gpu.try_release("xyz").await.unwrap_err());
    invalid(gpu.release_by_id(&"g".repeat(32)).await.unwrap_err());
    invalid(gpu.try_set_permits(u64::MAX).await.unwrap_err());
    invalid(gpu.add_permits(0).await.unwrap_err());
    invalid(
        client
            .permit_expirable_semaphore("")
            .acquire(LEASE)
            .await
            .unwrap_err(),
    );
    assert_eq!(dbsize(&mut raw).await, 1);

    // The count a lock hash or another string; the permits' key not a sorted set.
    let lock = client.lock("taken").lock().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("{plain}:timeout")
        .arg("x")
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("plain")
        .arg("1")
        .query_async(&mut raw)
        .await
        .unwrap();
    let before = dbsize(&mut raw).await;
    for name in ["taken", "plain"] {
        let sem = client.permit_expirable_semaphore(name);
        let not = |e: Error| assert!(e.is_not_a_lock(), "{name}: {e}");
        not(sem.acquire(LEASE).await.unwrap_err());
        not(sem.try_acquire(LEASE).await.unwrap_err());
        not(sem.try_release(&"00".repeat(16)).await.unwrap_err());
        not(sem.available_permits().await.unwrap_err());
        not(sem.acquired_permits().await.unwrap_err());
        not(sem.delete().await.unwrap_err());
    }
    let err = client
        .permit_expirable_semaphore("plain")
        .acquire(LEASE)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("{plain}:timeout"), "{err}");
    assert_eq!(dbsize(&mut raw).await, before);
    assert_eq!(raw_get(&mut raw, "plain").await.as_deref(), Some("1"));
    lock.unlock().await.unwrap();
}

/// The ACL rules a user of the semaphores and latches needs beyond the README's lock rules,
/// for names under `app:`.
fn sync_rules() -> Vec<String> {
    let mut rules = testkit::acl::readme_rules("app:*");
    rules.extend(
        [
            "~{app:*}:timeout",
            "&redisson_sc:*",
            "&redisson_countdownlatch__channel__*",
            "+incrby",
            "+decrby",
            "+decr",
            "+zrange",
            "+zcard",
        ]
        .map(String::from),
    );
    rules
}

#[tokio::test]
async fn a_user_without_a_command_is_refused_before_anything_is_written() {
    use testkit::acl::{set_user, user_url, without};
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    assert!(client(&server)
        .await
        .permit_expirable_semaphore("app:gpu")
        .try_set_permits(1)
        .await
        .unwrap());

    // Without ZADD, a permit would be counted and never recorded: refused up front.
    set_user(&server, &without(&sync_rules(), "+zadd"));
    let user = Client::connect(user_url(&server)).await.unwrap();
    let err = user
        .permit_expirable_semaphore("app:gpu")
        .acquire(LEASE)
        .await
        .unwrap_err();
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("+zadd"), "{err}");
    assert_eq!(raw_get(&mut raw, "app:gpu").await.as_deref(), Some("1"));
    assert_eq!(dbsize(&mut raw).await, 1);

    // Without the channel: refused, nothing written.
    set_user(&server, &without(&sync_rules(), "&redisson_sc:*"));
    let user = Client::connect(user_url(&server)).await.unwrap();
    let err = user
        .semaphore("app:pool")
        .try_set_permits(1)
        .await
        .unwrap_err();
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("&redisson_sc:*"), "{err}");
    assert_eq!(dbsize(&mut raw).await, 1);

    // With every rule, each kind works.
    set_user(&server, &sync_rules());
    let user = Client::connect(user_url(&server)).await.unwrap();
    let permit = user
        .permit_expirable_semaphore("app:gpu")
        .acquire(LEASE)
        .await
        .unwrap();
    permit.release().await.unwrap();
    let pool = user.semaphore("app:pool");
    assert!(pool.try_set_permits(1).await.unwrap());
    pool.acquire(1).await.unwrap().release().await.unwrap();
    let latch = user.count_down_latch("app:batch");
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    latch.wait().await.unwrap();
    let held = user
        .permit_expirable_semaphore("app:gpu")
        .acquire(LEASE)
        .await
        .unwrap();
    let waiting = {
        let gpu = user.permit_expirable_semaphore("app:gpu");
        Waiting::listening(&user, 1, async move { gpu.acquire(LEASE).await.unwrap() }).await
    };
    let woken = waiting
        .woken_by(async { held.release().await.unwrap() })
        .await;
    woken.value.release().await.unwrap();
    assert!(testkit::acl::refusals(&server).await.is_empty());
}
