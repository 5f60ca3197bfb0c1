//! The README's rules are enough for every lock kind: connecting leaves Redis running, and a
//! user holding exactly those rules locks, re-enters, waits and is woken, renews, force
//! unlocks, uses fair and fenced locks and fenced writes, with an empty `ACL LOG`.

use std::time::{Duration, Instant};

use redis_rlock::Client;
use testkit::acl::{readme_rules, user_url};
use testkit::Waiting;

use super::{
    answers, holders, key_exists, server_with_user, take_and_release, user_client,
    user_client_with_watchdog,
};

/// The client checks the user's permissions when it connects: that check must not take
/// Redis down for a user limited to key patterns (as every README user is).
#[tokio::test]
async fn connecting_as_the_readme_user_leaves_redis_running() {
    let server = server_with_user(&readme_rules("app:*"));
    let outcome = Client::connect(user_url(&server)).await;
    assert!(
        answers(&server).await,
        "redis-server stopped answering when the user connected (connect: {:?})",
        outcome.map(|_| ())
    );
    outcome.expect("connect as the README user");
}

#[tokio::test]
async fn the_readme_rules_allow_locking_reentry_and_queries() {
    let server = server_with_user(&readme_rules("app:*"));
    let client = user_client(&server).await;
    let lock = client.lock("app:order:1");

    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert!(lock.is_locked().await.unwrap());
    let ttl = lock
        .remaining_ttl()
        .await
        .unwrap()
        .expect("a held lock has a TTL");
    assert!(
        ttl > Duration::ZERO && ttl <= Duration::from_secs(30),
        "{ttl:?}"
    );
    assert_eq!(holders(&server, "app:order:1").await, [outer.owner()]);

    inner.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert!(!key_exists(&server, "app:order:1").await);
}

#[tokio::test]
async fn a_waiter_with_the_readme_rules_is_woken_by_the_unlock() {
    let server = server_with_user(&readme_rules("app:*"));
    let holder = user_client(&server).await;
    let waiter = user_client(&server).await;
    let guard = holder
        .lock("app:order:2")
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();

    let lock = waiter.lock("app:order:2");
    let waiting = Waiting::listening(&waiter, 1, async move {
        lock.lock().await.expect("the waiter takes the lock")
    })
    .await;
    let woken = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    let woken_after = woken.after;
    assert!(
        woken_after < Duration::from_secs(2),
        "the waiter took {woken_after:?}: not woken by the unlock message"
    );
    woken.value.unlock().await.unwrap();
}

#[tokio::test]
async fn the_readme_rules_let_the_watchdog_renew() {
    let server = server_with_user(&readme_rules("app:*"));
    let client = user_client_with_watchdog(&server, Duration::from_millis(600)).await;
    let guard = client.lock("app:order:3").lock().await.unwrap();
    let mut raw = server.raw().await;
    // Well past the 600 ms lease: only renewals keep it.
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        let pttl = testkit::pttl(&mut raw, "app:order:3").await;
        assert!(pttl > 0, "the lock ran out while held (PTTL {pttl})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!guard.is_lost());
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn the_readme_rules_allow_try_lock_for_and_force_unlock() {
    let server = server_with_user(&readme_rules("app:*"));
    let holder = user_client(&server).await;
    let other = user_client(&server).await;
    let held = holder.lock("app:order:4").lock().await.unwrap();

    let lock = other.lock("app:order:4");
    let busy = lock.try_lock_for(Duration::from_millis(200)).await.unwrap();
    assert!(busy.is_none(), "taken while held elsewhere");
    assert!(lock.force_unlock().await.unwrap(), "it was held");
    assert!(!lock.is_locked().await.unwrap());
    let taken = lock
        .try_lock_for(Duration::from_secs(1))
        .await
        .unwrap()
        .expect("free after the force unlock");
    assert_eq!(holders(&server, "app:order:4").await, [taken.owner()]);
    taken.unlock().await.unwrap();
    drop(held);
}

#[tokio::test]
async fn the_readme_rules_let_a_fair_lock_serve_waiters_in_order() {
    let server = server_with_user(&readme_rules("app:*"));
    let holder = user_client(&server).await;
    let raw = server.raw().await;
    let turn = holder.fair_lock("app:fair:1").lock().await.unwrap();

    let (served, mut order) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for number in 1..=2 {
        let client = user_client(&server).await;
        let served = served.clone();
        waiters.push(tokio::spawn(async move {
            let guard = client.fair_lock("app:fair:1").lock().await.unwrap();
            served.send(number).unwrap();
            guard.unlock().await.unwrap();
        }));
        let queued = testkit::settles_to(number, Duration::from_secs(5), || {
            let mut raw = raw.clone();
            async move { testkit::fair_queue(&mut raw, "app:fair:1").await.len() }
        })
        .await;
        assert_eq!(queued, number, "waiter {number} did not queue");
    }
    turn.unlock().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("every waiter is served")
            .unwrap();
    }
    assert_eq!(order.recv().await, Some(1));
    assert_eq!(order.recv().await, Some(2));
}

#[tokio::test]
async fn the_readme_rules_allow_fenced_locks_and_fenced_writes() {
    let server = server_with_user(&readme_rules("app:*"));
    let client = user_client(&server).await;
    let lock = client.fenced_lock("app:fenced:1");

    let first = lock.lock().await.unwrap();
    let older = first.fencing_token().expect("a fenced lock draws tokens");
    first.unlock().await.unwrap();
    let second = lock.lock().await.unwrap();
    let newer = second.fencing_token().expect("a fenced lock draws tokens");
    assert!(newer > older, "tokens {older} then {newer}");

    assert!(client.fenced_set("app:res", newer, b"v").await.unwrap());
    assert!(!client.fenced_set("app:res", older, b"stale").await.unwrap());
    let value: String = redis::cmd("GET")
        .arg("app:res")
        .query_async(&mut server.raw().await)
        .await
        .unwrap();
    assert_eq!(value, "v");
    second.unlock().await.unwrap();
}

/// Nothing a lock user does is refused by Redis: every command the client and its
/// libraries send (on connect, on a pool checkout, in scripts) is in the README's rules.
#[tokio::test]
async fn the_readme_rules_leave_the_acl_log_empty() {
    let server = server_with_user(&readme_rules("app:*"));
    let client = user_client_with_watchdog(&server, Duration::from_millis(600)).await;
    let waiter = user_client(&server).await;

    let guard = client.lock("app:log").lock().await.unwrap();
    let lock = waiter.lock("app:log");
    let waiting = Waiting::listening(&waiter, 1, async move { lock.lock().await.unwrap() }).await;
    // A few watchdog rounds (every 200 ms), on pooled connections, which deadpool checks
    // with UNWATCH + PING when it hands them out again.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let woken = waiting
        .woken_by(async { guard.unlock().await.unwrap() })
        .await;
    woken.value.unlock().await.unwrap();
    take_and_release(&client.fair_lock("app:log:fair")).await;
    let fenced = client.fenced_lock("app:log:fenced").lock().await.unwrap();
    let token = fenced.fencing_token().unwrap();
    client.fenced_set("app:log:res", token, b"v").await.unwrap();
    fenced.unlock().await.unwrap();

    let refusals = testkit::acl::refusals(&server).await;
    assert!(
        refusals.is_empty(),
        "Redis refused the README user (reason, object): {refusals:?}"
    );
}
