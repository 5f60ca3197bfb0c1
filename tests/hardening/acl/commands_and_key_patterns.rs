//! A missing command is found before anything is sent (for every lock, for fair locks, for
//! fenced locks), and names outside the key patterns are refused by name, in a batch only
//! for the callers of a refused name. Releases write no unlock latch, so a lock user needs
//! no latch pattern.

use std::time::Duration;

use redis_rlock::Error;
use testkit::acl::{readme_rules, without};

use super::{
    assert_denied, evalsha_counts, holders, key_exists, refused, server_with_user,
    take_and_release, user_client,
};

/// Redis checks a script's commands one by one as they run, so a missing command would
/// leave a script's earlier writes done: the client checks every command of a lock kind at
/// its first use, and refuses the call, with nothing written, when one is missing.
#[tokio::test]
async fn a_user_without_a_command_every_lock_runs_is_refused_before_anything_is_written() {
    // `+publish`: the release would fail after the lock was taken (a fair lock's waiters
    // stalled for a lease). `+evalsha`: every call is a script.
    for rule in ["+hrandfield", "+pexpire", "+publish", "+evalsha"] {
        let server = server_with_user(&without(&readme_rules("app:*"), rule));
        let client = user_client(&server).await;
        let error = refused(client.lock("app:r").lock().await);
        assert_denied(&error, &["app:r", rule]);
        let error = refused(client.lock("app:r").try_lock().await);
        assert_denied(&error, &["app:r", rule]);
        assert!(
            !key_exists(&server, "app:r").await,
            "{rule}: the lock was written"
        );
    }
}

#[tokio::test]
async fn a_user_without_fair_lock_commands_is_refused_fair_locks_before_anything_is_written() {
    let server = server_with_user(&without(&readme_rules("app:*"), "+linsert"));
    let client = user_client(&server).await;
    take_and_release(&client.lock("app:r")).await;
    let fenced = client.fenced_lock("app:t").lock().await.unwrap();
    fenced.unlock().await.unwrap();

    let lock = client.fair_lock("app:f");
    let second = Duration::from_secs(1);
    let mut calls = testkit::every_acquire(&lock, second, second).await;
    calls.extend(testkit::every_read(&lock).await);
    let forced = testkit::bounded("force_unlock()", lock.force_unlock()).await;
    calls.push(("force_unlock()", forced.map(drop)));
    let errors: Vec<Error> = calls
        .into_iter()
        .map(|(_, outcome)| refused(outcome))
        .collect();
    for error in &errors {
        assert_denied(error, &["app:f", "+linsert"]);
    }
    for key in [
        "app:f",
        "redisson_lock_queue:{app:f}",
        "redisson_lock_timeout:{app:f}",
    ] {
        assert!(!key_exists(&server, key).await, "`{key}` was written");
    }
}

#[tokio::test]
async fn a_user_without_incr_is_refused_fenced_locks_before_anything_is_written() {
    let server = server_with_user(&without(&readme_rules("app:*"), "+incr"));
    let client = user_client(&server).await;
    take_and_release(&client.lock("app:r")).await;
    take_and_release(&client.fair_lock("app:f")).await;

    let lock = client.fenced_lock("app:t");
    let second = Duration::from_secs(1);
    let mut calls = testkit::every_acquire(&lock, second, second).await;
    calls.extend(testkit::every_read(&lock).await);
    let forced = testkit::bounded("force_unlock()", lock.force_unlock()).await;
    calls.push(("force_unlock()", forced.map(drop)));
    let errors: Vec<Error> = calls
        .into_iter()
        .map(|(_, outcome)| refused(outcome))
        .collect();
    for error in &errors {
        assert_denied(error, &["app:t", "+incr"]);
    }
    for key in ["app:t", "redisson_lock_token:{app:t}"] {
        assert!(!key_exists(&server, key).await, "`{key}` was written");
    }
}

/// Redisson's unlocks write `redisson_unlock_latch:*` keys; this crate's write none (a
/// retry knows its own earlier try by the owner's count), so a user without the latch
/// pattern releases nested and last holds of every lock kind.
#[tokio::test]
async fn a_lock_user_needs_no_latch_pattern_to_release() {
    let server = server_with_user(&without(&readme_rules("app:*"), "~redisson_unlock_latch:*"));
    let client = user_client(&server).await;
    let lock = client.lock("app:x");
    let outer = lock.lock().await.unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(holders(&server, "app:x").await, [outer.owner().to_string()]);
    outer.unlock().await.unwrap();
    assert!(!key_exists(&server, "app:x").await);
    take_and_release(&client.fair_lock("app:f")).await;
    take_and_release(&client.fenced_lock("app:t")).await;
}

#[tokio::test]
async fn a_lock_outside_the_key_patterns_is_refused_by_name() {
    let server = server_with_user(&readme_rules("app:*"));
    let client = user_client(&server).await;

    let error = refused(client.lock("other:1").lock().await);
    assert_denied(&error, &["`other:1`"]);
    let error = refused(client.lock("other:1").try_lock().await);
    assert_denied(&error, &["`other:1`"]);
    assert!(!key_exists(&server, "other:1").await);
}

/// Acquires from one client are sent together in one script call: a name the user may not
/// use fails its own caller only.
#[tokio::test]
async fn concurrent_acquires_are_refused_only_for_names_outside_the_key_patterns() {
    let server = server_with_user(&readme_rules("app:*"));
    let client = user_client(&server).await;
    // The kind's commands checked first, so that the burst goes out as lock calls.
    client
        .lock("app:warm")
        .try_lock()
        .await
        .unwrap()
        .unwrap()
        .unlock()
        .await
        .unwrap();
    let (_, rejected_before) = evalsha_counts(&server);

    let mut tasks = Vec::new();
    for i in 0..16 {
        for name in [format!("app:c:{i}"), format!("other:{i}")] {
            let lock = client.lock(&name);
            tasks.push((name, tokio::spawn(async move { lock.try_lock().await })));
        }
    }
    let mut guards = Vec::new();
    for (name, task) in tasks {
        let outcome = task.await.unwrap();
        if name.starts_with("app:") {
            let guard = outcome
                .unwrap_or_else(|e| panic!("`{name}` refused: {e}"))
                .unwrap_or_else(|| panic!("`{name}` was busy"));
            assert_eq!(holders(&server, &name).await, [guard.owner()]);
            guards.push(guard);
        } else {
            assert_denied(&refused(outcome), &[&format!("`{name}`")]);
            assert!(!key_exists(&server, &name).await);
        }
    }
    let (_, rejected) = evalsha_counts(&server);
    assert!(
        rejected - rejected_before > 16,
        "no batch was refused ({} refused calls): the acquires were not batched",
        rejected - rejected_before
    );
    for guard in guards {
        guard.unlock().await.unwrap();
    }
}
