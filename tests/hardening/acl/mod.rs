//! Redis 7 ACL users: a user with the README's rules can use every lock kind, and a user
//! that lacks one of them is told which, by an error that names what was refused, with
//! nothing half-done in Redis: a lock is never freed without its unlock message, a
//! refused subscription fails the wait at once, and a missing command fails the connect or
//! the lock kind that needs it before anything is sent.
//!
//! One file per promise: `readme_rules.rs` (the README's rules are enough for every lock
//! kind), `refused_publish.rs` (a refused `PUBLISH` never frees a lock),
//! `refused_subscribe.rs` (a refused `SUBSCRIBE` fails the wait at once) and
//! `commands_and_key_patterns.rs` (a missing command found before anything is sent, and
//! names outside the key patterns refused by name). This file holds the users, clients and
//! raw reads they share.

mod commands_and_key_patterns;
mod readme_rules;
mod refused_publish;
mod refused_subscribe;

use std::time::Duration;

use redis_rlock::{Client, Error};
use testkit::acl::{set_user, user_url};
use testkit::RedisServer;

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

/// Whether `key` exists, read as the default user.
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
