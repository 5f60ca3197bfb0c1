//! Redis 7 ACL users: a user with the README's rules can use every lock kind, and a user
//! that lacks one of them is told which, by an error that names what was refused, with
//! nothing half-done in Redis: a lock is never freed without its unlock message, a
//! refused subscription fails the wait at once, and a missing command fails the connect or
//! the lock kind that needs it before anything is sent.

use std::time::{Duration, Instant};

use redis_rlock::{Client, Error};
use testkit::acl::{readme_rules, replacing, set_user, user_url, without};
use testkit::{RedisServer, Waiting};

/// The README's channel rule, and one that allows the channels of locks `app:ok*` only.
const ALL_CHANNELS: &str = "&redisson_lock__channel:*";
const OK_CHANNELS: &str = "&redisson_lock__channel:{app:ok*";

/// A server with the user `locker` holding `rules`.
fn server_with_user(rules: &[String]) -> RedisServer {
    let server = RedisServer::start();
    set_user(&server, rules);
    server
}

/// A client connected as `locker`.
async fn user_client(server: &RedisServer) -> Client {
    user_client_with_watchdog(server, Duration::from_secs(30)).await
}

/// A client connected as `locker`, with the given watchdog timeout.
async fn user_client_with_watchdog(server: &RedisServer, watchdog: Duration) -> Client {
    let outcome = Client::builder(user_url(server))
        .watchdog_timeout(watchdog)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await;
    match outcome {
        Ok(client) => client,
        Err(e) => panic!(
            "cannot connect as the ACL user: {e:?} (redis-server {})",
            if answers(server).await {
                "still answers"
            } else {
                "no longer answers: it crashed"
            }
        ),
    }
}

/// Whether the server answers `PING` (as the default user) within a second.
async fn answers(server: &RedisServer) -> bool {
    let ping = async {
        let client = redis::Client::open(server.url()).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        redis::cmd("PING")
            .query_async::<String>(&mut conn)
            .await
            .ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ping).await,
        Ok(Some(pong)) if pong == "PONG"
    )
}

/// Asserts that `error` is a refused permission whose text names each of `names`.
fn assert_denied(error: &Error, names: &[&str]) {
    assert!(
        error.is_permission_denied(),
        "expected a refused permission, got {error:?}"
    );
    let text = error.to_string();
    for name in names {
        assert!(text.contains(name), "`{text}` does not name `{name}`");
    }
}

/// The `Err` of a call that must fail.
fn refused<T>(outcome: redis_rlock::Result<T>) -> Error {
    match outcome {
        Ok(_) => panic!("the call succeeded, but its permission is missing"),
        Err(e) => e,
    }
}

/// Takes `lock` and releases it: a control that the user may use it, or the kind's first
/// use, after which its commands are known to be allowed.
async fn take_and_release(
    lock: &impl redis_rlock::DistributedLock<Guard = redis_rlock::LockGuard>,
) {
    lock.lock().await.unwrap().unlock().await.unwrap();
}

/// The owner fields of the lock hash at `key`, read as the default user.
async fn holders(server: &RedisServer, key: &str) -> Vec<String> {
    let mut raw = server.raw().await;
    let mut fields: Vec<String> = testkit::lock_hash(&mut raw, key)
        .await
        .into_keys()
        .collect();
    fields.sort();
    fields
}

async fn key_exists(server: &RedisServer, key: &str) -> bool {
    redis::cmd("EXISTS")
        .arg(key)
        .query_async::<i64>(&mut server.raw().await)
        .await
        .expect("EXISTS")
        == 1
}

/// Script calls Redis ran or refused so far: `(calls, rejected_calls)` of `EVALSHA`.
fn evalsha_counts(server: &RedisServer) -> (i64, i64) {
    let field = |sub| testkit::info_field(server, "commandstats", "cmdstat_evalsha", sub);
    (field("calls"), field("rejected_calls"))
}

// --- 1. The README's rules are enough for every lock kind ---------------------------

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

// --- 2. A refused PUBLISH never frees a lock -------------------------------------------

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

// --- 3. A refused SUBSCRIBE fails the wait at once ---------------------------------------

/// The user's client, and an admin client holding `app:bad` (whose channel the user may
/// not subscribe to) for 30 s.
async fn bad_lock_held_elsewhere(server: &RedisServer) -> (Client, Client, redis_rlock::LockGuard) {
    let admin = testkit::client(server).await;
    let held = admin
        .lock("app:bad")
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    (user_client(server).await, admin, held)
}

#[tokio::test]
async fn a_refused_subscribe_fails_lock_at_once() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, _admin, _held) = bad_lock_held_elsewhere(&server).await;

    let started = Instant::now();
    let error = refused(client.lock("app:bad").lock().await);
    let took = started.elapsed();
    assert_denied(&error, &["redisson_lock__channel:{app:bad}", ALL_CHANNELS]);
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
}

#[tokio::test]
async fn a_refused_subscribe_fails_try_lock_for_at_once() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, _admin, _held) = bad_lock_held_elsewhere(&server).await;

    let started = Instant::now();
    let outcome = client
        .lock("app:bad")
        .try_lock_for(Duration::from_secs(3))
        .await;
    let took = started.elapsed();
    let error = match outcome {
        Err(e) => e,
        Ok(None) => panic!("Ok(None) after {took:?} instead of the refusal"),
        Ok(Some(_)) => panic!("taken while held elsewhere"),
    };
    assert_denied(&error, &["redisson_lock__channel:{app:bad}"]);
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
}

/// A fair lock's waiter subscribes to its own channel before it queues: refused, it fails
/// at once and takes no place in the queue.
#[tokio::test]
async fn a_refused_subscribe_fails_a_fair_wait_at_once_without_queueing() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let admin = testkit::client(&server).await;
    let _held = admin.fair_lock("app:bad").lock().await.unwrap();
    let client = user_client(&server).await;

    let started = Instant::now();
    let error = refused(client.fair_lock("app:bad").lock().await);
    let took = started.elapsed();
    assert_denied(&error, &["redisson_lock__channel:{app:bad}", ALL_CHANNELS]);
    assert!(took < Duration::from_secs(1), "refused after {took:?}");
    let queue = testkit::fair_queue(&mut server.raw().await, "app:bad").await;
    assert!(queue.is_empty(), "queued: {queue:?}");
}

/// The refused channel is the channel's problem, not the connection's: the pub/sub
/// connection is kept rather than reopened (and refused again) in a loop.
#[tokio::test]
async fn a_refused_subscribe_does_not_reconnect_in_a_loop() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, _admin, _held) = bad_lock_held_elsewhere(&server).await;

    let connections = || testkit::info_field(&server, "stats", "total_connections_received", "");
    let before = connections();
    refused(client.lock("app:bad").lock().await);
    // No event marks the absence of reconnections: watch for a while (a loop would open
    // about ten a second).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let opened = connections() - before;
    assert!(
        opened <= 3,
        "{opened} connections opened in the second after the refusal"
    );
}

#[tokio::test]
async fn a_refused_subscribe_leaves_the_other_waiters_of_the_client_served() {
    let server = server_with_user(&replacing(
        &readme_rules("app:*"),
        ALL_CHANNELS,
        OK_CHANNELS,
    ));
    let (client, admin, _held) = bad_lock_held_elsewhere(&server).await;
    let ok_held = admin
        .lock("app:ok1")
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();

    // At the same time: both channels may go out in one SUBSCRIBE.
    let (ok_lock, bad_lock) = (client.lock("app:ok1"), client.lock("app:bad"));
    let ok_waiting = Waiting::spawn(async move { ok_lock.lock().await.unwrap() });
    let bad_waiting = tokio::spawn(async move { bad_lock.lock().await });
    let error = refused(bad_waiting.await.unwrap());
    assert_denied(&error, &["redisson_lock__channel:{app:bad}"]);

    testkit::eventually(
        "the permitted waiter subscribed",
        Duration::from_secs(5),
        || client.status().subscribed_channels == 1,
    )
    .await;
    let woken = ok_waiting
        .woken_by(async { ok_held.unlock().await.unwrap() })
        .await;
    let woken_after = woken.after;
    assert!(
        woken_after < Duration::from_secs(2),
        "the permitted waiter took {woken_after:?}: not woken by the unlock message"
    );
    woken.value.unlock().await.unwrap();
}

// --- 4. A missing command is found before anything is sent -----------------------------

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

// --- 5. Key patterns ---------------------------------------------------------------------

#[tokio::test]
async fn a_missing_latch_pattern_fails_unlock_and_leaves_the_lock_held() {
    let server = server_with_user(&without(&readme_rules("app:*"), "~redisson_unlock_latch:*"));
    let client = user_client(&server).await;
    let guard = client.lock("app:x").lock().await.unwrap();
    let owner = guard.owner().to_string();

    let error = refused(guard.unlock().await);
    assert_denied(
        &error,
        &["`redisson_unlock_latch:{app:x}", "~redisson_unlock_latch:*"],
    );
    assert_eq!(holders(&server, "app:x").await, [owner]);
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
