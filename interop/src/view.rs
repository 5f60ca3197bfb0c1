//! Redis as raw commands see it: the unlock channels and who listens on them, the hashes
//! and keys of read-write locks. Names come from the crate's public [`layout`], which
//! `tests/lock/layout.rs` pins to literal Redisson names; here Redisson itself checks them,
//! since its clients subscribe to and write the same names.

use redis::aio::MultiplexedConnection;
use redis_rlock::protocol::layout;

/// A read-write lock's hash as raw Redis sees it: field -> value (`mode` is no count).
pub async fn rwlock_hash(
    conn: &mut MultiplexedConnection,
    name: &str,
) -> std::collections::HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(name)
        .query_async(conn)
        .await
        .expect("HGETALL")
}

/// `{name}:<owner>:rwlock_timeout:<n>`: the key that carries read hold `n`'s lease of
/// reader `owner` on the read-write lock `name`.
pub fn rwlock_timeout(name: &str, owner: &str, n: u32) -> String {
    format!("{}:{n}", layout::read_timeout_prefix(name, owner))
}

/// How many clients are subscribed to `channel` (`PUBSUB NUMSUB`).
pub async fn subscribers(conn: &mut MultiplexedConnection, channel: &str) -> i64 {
    counted(conn, channel, false).await
}

/// How many clients of the node behind `conn` are subscribed to `channel`: with
/// `PUBSUB SHARDNUMSUB` when `sharded` (`SSUBSCRIBE`rs), else `PUBSUB NUMSUB`. On a cluster
/// both count the node's own subscribers only: ask the master of the channel's slot, where
/// Redisson and this crate subscribe.
async fn counted(conn: &mut MultiplexedConnection, channel: &str, sharded: bool) -> i64 {
    let count = if sharded { "SHARDNUMSUB" } else { "NUMSUB" };
    let (_, n): (String, i64) = redis::cmd("PUBSUB")
        .arg(count)
        .arg(channel)
        .query_async(conn)
        .await
        .unwrap_or_else(|e| panic!("PUBSUB {count}: {e}"));
    n
}

/// [`subscribers_become`], counting the subscribers of sharded pub/sub when `sharded`.
pub async fn subscribers_become_in(
    conn: &MultiplexedConnection,
    channel: &str,
    expected: i64,
    limit: std::time::Duration,
    sharded: bool,
) {
    let last = testkit::settles_to(expected, limit, || {
        let mut conn = conn.clone();
        async move { counted(&mut conn, channel, sharded).await }
    })
    .await;
    assert_eq!(
        last, expected,
        "subscribers of `{channel}` (sharded: {sharded})"
    );
}

/// Waits until `channel` has `expected` subscribers, for at most `limit`; panics with the
/// last count otherwise. A waiter subscribed is a waiter that an unlock message reaches.
pub async fn subscribers_become(
    conn: &MultiplexedConnection,
    channel: &str,
    expected: i64,
    limit: std::time::Duration,
) {
    subscribers_become_in(conn, channel, expected, limit, false).await;
}

/// Whether `field` has the shape of an owner field, `<uuid>:<decimal id>`, as Redisson
/// writes it (and parses it: the id must fit a Java `long`).
pub fn is_owner_field(field: &str) -> bool {
    layout::parse_owner(field)
        .is_some_and(|(uuid, id)| uuid.len() == 36 && id.parse::<i64>().is_ok())
}
