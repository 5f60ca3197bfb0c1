//! A release whose reply is lost is sent again, and the retry must not release a second
//! hold: for every kind, a nested release and a last release whose first try ran while
//! Redis was frozen (its reply timed out, the retry went out, and Redis ran both once
//! thawed). The retry knows its own earlier try by the owner's count in the hash, with no
//! latch key: these releases write none.

use std::collections::HashMap;
use std::time::Duration;

use redis_rlock::{Client, Lock, LockGuard, LockKind};
use testkit::{keys_matching, RedisServer};

/// Short enough for the first try to time out while Redis is frozen, with room for the
/// retry to go out before it is thawed.
async fn impatient(server: &RedisServer) -> Client {
    Client::builder(server.url())
        .response_timeout(Duration::from_millis(300))
        .retry_attempts(4)
        .retry_delay(Duration::from_millis(50))
        .build()
        .await
        .unwrap()
}

/// The lock's hash without a read-write lock's `mode`: owner field -> count.
async fn counts(server: &RedisServer, name: &str) -> HashMap<String, i64> {
    let hash: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(name)
        .query_async(&mut server.raw().await)
        .await
        .unwrap();
    hash.into_iter()
        .filter(|(field, _)| field != "mode")
        .map(|(field, count)| (field, count.parse().unwrap()))
        .collect()
}

/// Keys named like Redisson's unlock latches.
async fn latches(server: &RedisServer) -> usize {
    keys_matching(&mut server.raw().await, "redisson_unlock_latch:*").await
}

/// Runs `release` while Redis is frozen: its first try times out at 300 ms and its retry
/// goes out within 400 ms; Redis runs both, in order, once thawed at 500 ms.
async fn retried<F>(server: &RedisServer, release: F) -> redis_rlock::Result<()>
where
    F: std::future::Future<Output = redis_rlock::Result<()>> + Send + 'static,
{
    server.freeze();
    let releasing = tokio::spawn(release);
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.thaw();
    releasing.await.unwrap()
}

/// A fresh server, an impatient client, and its lock from `make` held twice: the outer
/// guard and the inner one.
async fn nested<K: LockKind>(
    make: impl Fn(&Client) -> Lock<K>,
) -> (RedisServer, Client, Lock<K>, LockGuard, LockGuard) {
    let server = RedisServer::start();
    let client = impatient(&server).await;
    let lock = make(&client);
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    (server, client, lock, outer, inner)
}

/// A nested release retried: one hold released, the other still held and valid.
async fn a_retried_nested_release_releases_one_hold<K: LockKind>(
    kind: &str,
    make: impl Fn(&Client) -> Lock<K>,
) {
    let (server, _client, lock, outer, inner) = nested(&make).await;
    let owner = outer.owner().to_string();

    let released = retried(&server, inner.unlock()).await;
    assert!(released.is_ok(), "{kind}: {released:?}");
    assert_eq!(
        counts(&server, lock.name()).await,
        HashMap::from([(owner.clone(), 1)]),
        "{kind}: one hold released, not two"
    );
    assert!(!outer.is_lost(), "{kind}");
    assert_eq!(lock.hold_count().await.unwrap(), 1, "{kind}");
    assert_eq!(latches(&server).await, 0, "{kind}: a latch was written");

    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap(), "{kind}");
    assert_eq!(latches(&server).await, 0, "{kind}: a latch was written");
}

/// A last release retried: the lock is freed, and the release says so (not lost).
async fn a_retried_last_release_frees_the_lock<K: LockKind>(
    kind: &str,
    make: impl Fn(&Client) -> Lock<K>,
) {
    let server = RedisServer::start();
    let client = impatient(&server).await;
    let lock = make(&client);
    let guard = lock.lock().await.unwrap();

    let released = retried(&server, guard.unlock()).await;
    assert!(released.is_ok(), "{kind}: reported {released:?}");
    assert!(
        counts(&server, lock.name()).await.is_empty(),
        "{kind}: the lock was not freed"
    );
    assert!(!lock.is_locked().await.unwrap(), "{kind}");
    assert_eq!(latches(&server).await, 0, "{kind}: a latch was written");
    // Free for another client at once, not after a lease.
    let other = testkit::client(&server).await;
    let taken = make(&other).try_lock().await.unwrap();
    assert!(taken.is_some(), "{kind}: another client could not take it");
}

/// A retried nested release of a lock lost before it ran reports the loss: the retry finds
/// the owner's field gone while a guard of it stays, which no earlier try of its could do.
async fn a_retried_release_of_a_lost_lock_reports_the_loss<K: LockKind>(
    kind: &str,
    make: impl Fn(&Client) -> Lock<K>,
) {
    let (server, _client, _lock, outer, inner) = nested(&make).await;
    let other = testkit::client(&server).await;
    assert!(make(&other).force_unlock().await.unwrap(), "{kind}");

    let released = retried(&server, inner.unlock()).await;
    let error = released.expect_err(kind);
    assert!(error.is_lock_lost(), "{kind}: {error}");
    assert!(outer.unlock().await.unwrap_err().is_lock_lost(), "{kind}");
    assert_eq!(latches(&server).await, 0, "{kind}: a latch was written");
}

/// Runs `check` on a lock named `l` of each kind that releases through a count: reentrant,
/// fair, fenced, and either side of a read-write lock.
macro_rules! every_kind {
    ($check:ident) => {
        $check("reentrant", |c| c.lock("l")).await;
        $check("fair", |c| c.fair_lock("l")).await;
        $check("fenced", |c| c.fenced_lock("l")).await;
        $check("read", |c| c.read_write_lock("l").read_lock()).await;
        $check("write", |c| c.read_write_lock("l").write_lock()).await;
    };
}

#[tokio::test]
async fn a_retried_nested_release_releases_one_hold_of_every_kind() {
    every_kind!(a_retried_nested_release_releases_one_hold);
}

#[tokio::test]
async fn a_retried_last_release_frees_every_kind_and_reports_it_freed() {
    every_kind!(a_retried_last_release_frees_the_lock);
}

#[tokio::test]
async fn a_retried_release_of_a_lost_lock_of_every_kind_reports_the_loss() {
    every_kind!(a_retried_release_of_a_lost_lock_reports_the_loss);
}

/// Two guards of one owner released at once while Redis is frozen, a third staying: each
/// release's retry must count the other release as on its way, so that together they take
/// two holds at most, never the staying guard's.
#[tokio::test]
async fn two_retried_releases_of_one_owner_leave_the_staying_guard_its_hold() {
    let server = RedisServer::start();
    let client = impatient(&server).await;
    let lock = client.lock("l");
    let staying = lock.lock().await.unwrap();
    let first = lock.lock().await.unwrap();
    let second = lock.lock().await.unwrap();
    let owner = staying.owner().to_string();

    let both = async move {
        let (a, b) = tokio::join!(tokio::spawn(first.unlock()), tokio::spawn(second.unlock()));
        a.unwrap().and(b.unwrap())
    };
    let released = retried(&server, both).await;
    assert!(released.is_ok(), "{released:?}");
    assert_eq!(
        counts(&server, "l").await,
        HashMap::from([(owner, 1)]),
        "two holds released, and only two"
    );
    assert!(!staying.is_lost());
    staying.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}
