//! Typed calls of the opt-in wait registry (`wait_join.lua`, `wait_note.lua`,
//! `wait_leave.lua`), and the two reads that walk it: a lock's holders and what an owner
//! waits for. The layout is in [`layout`](crate::protocol::layout): a lock's
//! [`Waiters`](crate::protocol::layout::Derived::Waiters), in the lock's slot, and each
//! owner's [`waiting_record`](crate::protocol::layout::waiting_record), in its own.

use std::sync::LazyLock;
use std::time::Duration;

use redis::RedisResult;

use crate::protocol::conn::{Conn, EvalSha, LuaScript};
use crate::protocol::layout::WRITE_SUFFIX;
use crate::protocol::scripts::script;

static JOIN: LazyLock<LuaScript> = script!("wait_join.lua");
static NOTE: LazyLock<LuaScript> = script!("wait_note.lua");
static LEAVE: LazyLock<LuaScript> = script!("wait_leave.lua");

/// `owner` waits for the lock whose waiters are at `waiters` (its entry lives `ttl`
/// unrefreshed), and its record at `record`, if given, says so: written, or refreshed.
pub(crate) async fn join(
    conn: Conn,
    waiters: &str,
    record: Option<&str>,
    owner: &str,
    lock_key: &str,
    client: &str,
    ttl: Duration,
) -> RedisResult<()> {
    let ttl = ttl.as_millis().max(1) as u64;
    let mut join = EvalSha::new(&JOIN, 1, 2, waiters.len() + owner.len() + 24);
    join.arg(waiters).arg(owner).arg(ttl);
    let note = record.map(|record| {
        let size = record.len() + lock_key.len() + client.len() + 24;
        let mut note = EvalSha::new(&NOTE, 1, 3, size);
        note.arg(record).arg(lock_key).arg(client).arg(ttl);
        note
    });
    both(conn, &join, note.as_ref()).await
}

/// `owner`'s wait for the lock of `lock_key` ended: out of its waiters, and its record at
/// `record`, if given, gone unless a later wait replaced it.
pub(crate) async fn leave(
    conn: Conn,
    waiters: &str,
    record: Option<&str>,
    owner: &str,
    lock_key: &str,
) -> RedisResult<()> {
    let mut out = EvalSha::new(&LEAVE, 1, 1, waiters.len() + owner.len());
    out.arg(waiters).arg(owner);
    let forget = record.map(|record| {
        let mut forget = EvalSha::new(&LEAVE, 1, 1, record.len() + lock_key.len());
        forget.arg(record).arg(lock_key);
        forget
    });
    both(conn, &out, forget.as_ref()).await
}

/// Sends `first` and `second`, if any, together: calls on a waiter set and on a record,
/// two slots on a cluster, so two calls.
async fn both(conn: Conn, first: &EvalSha<'_>, second: Option<&EvalSha<'_>>) -> RedisResult<()> {
    let (mut one, mut other) = (conn.clone(), conn);
    let Some(second) = second else {
        return first.query::<i64>(&mut one).await.map(drop);
    };
    let (first, second) = tokio::join!(
        first.query::<i64>(&mut one),
        second.query::<i64>(&mut other)
    );
    first.and(second).map(drop)
}

/// The owners holding the lock at `lock_key`, as owner fields without a write lock's
/// suffix (a read-write lock's `mode` field is not an owner); empty when it is free or no
/// lock.
pub(crate) async fn holders(conn: &Conn, lock_key: &str) -> RedisResult<Vec<String>> {
    let mut conn = conn.clone();
    let fields: Vec<String> = match redis::cmd("HKEYS")
        .arg(lock_key)
        .query_async(&mut conn)
        .await
    {
        Ok(fields) => fields,
        // Not a hash: nobody this registry knows holds it.
        Err(e) if e.code() == Some("WRONGTYPE") => Vec::new(),
        Err(e) => return Err(e),
    };
    Ok(fields
        .into_iter()
        .filter(|field| field != "mode")
        .map(|field| match field.strip_suffix(WRITE_SUFFIX) {
            Some(owner) => owner.to_string(),
            None => field,
        })
        .collect())
}

/// What an owner waits for, as its record says.
pub(crate) struct Waiting {
    /// The lock's key.
    pub(crate) lock: String,
    /// The waiter's client name.
    pub(crate) client: Option<String>,
}

/// What the owner whose record is at `record` waits for, if it waits.
pub(crate) async fn waits_for(conn: &Conn, record: &str) -> RedisResult<Option<Waiting>> {
    let mut conn = conn.clone();
    let (lock, client): (Option<String>, Option<String>) = redis::cmd("HMGET")
        .arg(record)
        .arg("lock")
        .arg("client")
        .query_async(&mut conn)
        .await?;
    Ok(lock.map(|lock| Waiting { lock, client }))
}
