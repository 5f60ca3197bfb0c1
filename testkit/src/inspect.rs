//! Redis as the tests see it through raw commands, beside the library: a lock's hash and
//! TTL, a fair lock's queue and deadlines, the server clock, `INFO` figures.

use crate::servers::RedisServer;

/// The hash of lock `key` as raw Redis sees it: field -> count.
pub async fn lock_hash(
    conn: &mut redis::aio::MultiplexedConnection,
    key: &str,
) -> std::collections::HashMap<String, i64> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("HGETALL")
}

/// The string at `key` (a semaphore's or latch's count), `None` when absent.
pub async fn raw_get(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET")
        .arg(key)
        .query_async(conn)
        .await
        .expect("GET")
}

/// How many keys the database holds: what bad input must leave unchanged.
pub async fn dbsize(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    redis::cmd("DBSIZE")
        .query_async(conn)
        .await
        .expect("DBSIZE")
}

/// The wait registry's keys (`redis_rlock_wait*`), sorted (`KEYS`: a test's own small
/// server only).
pub async fn registry_keys(conn: &redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("redis_rlock_wait*")
        .query_async(&mut conn.clone())
        .await
        .expect("KEYS");
    keys.sort();
    keys
}

/// What the wait registry's record of `owner` holds (`client`, `lock`, `since`), sorted by
/// field.
pub async fn waiting_record(
    conn: &redis::aio::MultiplexedConnection,
    owner: &str,
) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = redis::cmd("HGETALL")
        .arg(format!("redis_rlock_waiting:{{{owner}}}"))
        .query_async(&mut conn.clone())
        .await
        .expect("HGETALL");
    pairs.sort();
    pairs
}

/// How many keys match `pattern` (`KEYS`: a test's own small server only).
pub async fn keys_matching(conn: &mut redis::aio::MultiplexedConnection, pattern: &str) -> usize {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(pattern)
        .query_async(conn)
        .await
        .expect("KEYS");
    keys.len()
}

/// Every key but the request latches (`redisson_unlock_latch:*`), sorted: what the calls
/// left. (Lock releases write none; a Redis Cluster client's semaphore and count-down latch
/// count changes write one each, deleted in the background, in batches, or expiring by
/// itself.)
pub async fn keys_but_latches(conn: &redis::aio::MultiplexedConnection) -> Vec<String> {
    let mut keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn.clone())
        .await
        .expect("KEYS");
    keys.retain(|key| !key.starts_with("redisson_unlock_latch:"));
    keys.sort();
    keys
}

/// Waits (up to 10 s) until the count at `key` reads `expected`; panics with the last read.
pub async fn count_becomes(conn: &redis::aio::MultiplexedConnection, key: &str, expected: &str) {
    let last = crate::wait::settles_to(
        Some(expected.to_string()),
        std::time::Duration::from_secs(10),
        || {
            let mut conn = conn.clone();
            async move { raw_get(&mut conn, key).await }
        },
    )
    .await;
    assert_eq!(last.as_deref(), Some(expected), "count of `{key}`");
}

/// PTTL of `key` in milliseconds (-2 absent, -1 no expiry).
pub async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("PTTL")
}

/// One number from `INFO <section>`: the line `name:value`, or with `sub`, the `sub=value`
/// inside a line such as `cmdstat_evalsha:calls=12,usec=...`. 0 when absent.
pub fn info_field(server: &RedisServer, section: &str, name: &str, sub: &str) -> i64 {
    let info = server.cli(&["INFO", section]);
    let Some(value) = info
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
    else {
        return 0;
    };
    let value = if sub.is_empty() {
        value
    } else {
        match value
            .split(',')
            .find_map(|part| part.strip_prefix(sub)?.strip_prefix('='))
        {
            Some(v) => v,
            None => return 0,
        }
    };
    value.trim().parse::<f64>().map(|v| v as i64).unwrap_or(0)
}

/// The waiting queue of fair lock `name` as raw Redis sees it, head first.
pub async fn fair_queue(conn: &mut redis::aio::MultiplexedConnection, name: &str) -> Vec<String> {
    redis::cmd("LRANGE")
        .arg(format!("redisson_lock_queue:{{{name}}}"))
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .expect("LRANGE")
}

/// The deadline (ms on the server clock) of `owner` in fair lock `name`'s queue.
pub async fn fair_deadline(
    conn: &mut redis::aio::MultiplexedConnection,
    name: &str,
    owner: &str,
) -> Option<i64> {
    redis::cmd("ZSCORE")
        .arg(format!("redisson_lock_timeout:{{{name}}}"))
        .arg(owner)
        .query_async::<Option<f64>>(conn)
        .await
        .expect("ZSCORE")
        .map(|score| score as i64)
}

/// The Redis server's clock in milliseconds.
pub async fn server_millis(conn: &mut redis::aio::MultiplexedConnection) -> i64 {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(conn).await.expect("TIME");
    secs * 1000 + micros / 1000
}

/// Whether `key` exists, read on `conn`.
pub async fn key_exists(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(conn)
        .await
        .expect("EXISTS");
    n == 1
}

/// One number from `INFO <section>` (the line `name:value`), asked on `conn`, so that
/// asking opens no connection (unlike [`info_field`]); 0 when absent.
pub async fn info_number(
    conn: &mut redis::aio::MultiplexedConnection,
    section: &str,
    name: &str,
) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
}
