//! A refused `PUBLISH` never frees a lock: the unlock of a plain or fair lock and a force
//! unlock fail and leave the lock (and the queue) as they were, and in a batch of
//! concurrent unlocks only the refused one fails.

use std::time::Duration;

use testkit::acl::{readme_rules, replacing};

use super::{
    assert_denied, evalsha_counts, holders, key_exists, refused, server_with_user,
    take_and_release, user_client, ALL_CHANNELS, OK_CHANNELS,
};

#[tokio::test]
async fn a_refused_publish_leaves_the_lock_held() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let client = user_client(&server).await;
    // Control: a lock whose channel the user may publish to is released as usual.
    take_and_release(&client.lock("app:ok1")).await;

    let guard = client.lock("app:bad").lock().await.unwrap();
    let owner = guard.owner().to_string();
    let error = refused(guard.unlock().await);
    assert_denied(&error, &["redisson_lock__channel:{app:bad}", ALL_CHANNELS]);
    assert_eq!(holders(&server, "app:bad").await, [owner]);
}

/// A fair lock's final unlock tells the head of the queue on its own channel: refused, it
/// leaves the lock and the queue as they were.
#[tokio::test]
async fn a_refused_publish_leaves_a_fair_lock_held_for_its_queue() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let client = user_client(&server).await;
    let admin = testkit::client(&server).await;
    let raw = server.raw().await;
    // The first call of a kind checks PUBLISH on its own lock's channel, which is allowed:
    // a lock whose channel is refused is taken after that, and its unlock is what refuses.
    take_and_release(&client.fair_lock("app:ok1")).await;

    let guard = client.fair_lock("app:bad").lock().await.unwrap();
    let owner = guard.owner().to_string();
    let lock = admin.fair_lock("app:bad");
    let waiting = tokio::spawn(async move { lock.lock().await });
    let queued = testkit::settles_to(1, Duration::from_secs(5), || {
        let mut raw = raw.clone();
        async move { testkit::fair_queue(&mut raw, "app:bad").await.len() }
    })
    .await;
    assert_eq!(queued, 1, "the waiter did not queue");
    let queue = testkit::fair_queue(&mut raw.clone(), "app:bad").await;

    let error = refused(guard.unlock().await);
    assert_denied(&error, &["redisson_lock__channel:{app:bad}", ALL_CHANNELS]);
    assert_eq!(holders(&server, "app:bad").await, [owner]);
    assert_eq!(
        testkit::fair_queue(&mut raw.clone(), "app:bad").await,
        queue
    );
    assert!(!waiting.is_finished(), "the waiter was handed the lock");
    waiting.abort();
}

#[tokio::test]
async fn a_refused_publish_fails_force_unlock_and_leaves_the_lock() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let client = user_client(&server).await;
    take_and_release(&client.lock("app:ok1")).await;
    let guard = client.lock("app:bad").lock().await.unwrap();

    let error = refused(client.lock("app:bad").force_unlock().await);
    assert_denied(&error, &["redisson_lock__channel:{app:bad}", ALL_CHANNELS]);
    assert_eq!(holders(&server, "app:bad").await, [guard.owner()]);
    assert!(!guard.is_lost());
}

/// Releases from one client are sent together in one script call: a refused PUBLISH fails
/// its own release only.
#[tokio::test]
async fn concurrent_unlocks_are_refused_only_where_the_publish_is() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let client = user_client(&server).await;
    let mut guards = Vec::new();
    for i in 0..16 {
        for name in [format!("app:ok:{i}"), format!("app:bad:{i}")] {
            let guard = client.lock(&name).lock().await.unwrap();
            guards.push((name, guard));
        }
    }

    let (calls_before, _) = evalsha_counts(&server);
    let tasks: Vec<_> = guards
        .into_iter()
        .map(|(name, guard)| {
            let owner = guard.owner().to_string();
            (name, owner, tokio::spawn(guard.unlock()))
        })
        .collect();
    for (name, owner, task) in tasks {
        let outcome = task.await.unwrap();
        if name.starts_with("app:ok:") {
            outcome.unwrap_or_else(|e| panic!("unlocking `{name}`: {e}"));
            assert!(!key_exists(&server, &name).await, "`{name}` still held");
        } else {
            let channel = format!("redisson_lock__channel:{{{name}}}");
            assert_denied(&refused(outcome), &[&channel]);
            assert_eq!(holders(&server, &name).await, [owner]);
        }
    }
    let (calls, _) = evalsha_counts(&server);
    assert!(
        calls - calls_before < 32,
        "{} script calls for 32 releases: they were not batched",
        calls - calls_before
    );
}
