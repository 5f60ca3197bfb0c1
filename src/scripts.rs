//! The Lua scripts (`lua/*.lua`, compiled in) and typed calls to them.
//!
//! Each call goes out as EVALSHA; `redis::Script` hashes the source once and loads it when
//! Redis answers NOSCRIPT (after a restart or `SCRIPT FLUSH`). The scripts are also loaded
//! when a client connects, so the first lock call does not pay that extra round trip.

use std::sync::LazyLock;

use redis::aio::MultiplexedConnection;
use redis::{RedisResult, Script};

use crate::names::UNLOCK_MESSAGE;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/acquire.lua")));
static UNLOCK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/unlock.lua")));
static FORCE_UNLOCK: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/force_unlock.lua")));
static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../lua/renew.lua")));

/// Loads every script, so that later calls find them by hash.
pub(crate) async fn load_all(conn: &mut MultiplexedConnection) -> RedisResult<()> {
    for script in [&ACQUIRE, &UNLOCK, &FORCE_UNLOCK, &RENEW] {
        script.prepare_invoke().load_async(conn).await?;
    }
    Ok(())
}

/// `lua/acquire.lua`: `None` when acquired (or re-entered), else the holder's PTTL in ms.
pub(crate) async fn acquire(
    mut conn: MultiplexedConnection,
    key: &str,
    lease_ms: u64,
    owner: &str,
) -> RedisResult<Option<i64>> {
    ACQUIRE
        .key(key)
        .arg(lease_ms)
        .arg(owner)
        .invoke_async(&mut conn)
        .await
}

/// What `lua/unlock.lua` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnlockOutcome {
    /// The owner held nothing.
    NotHeld,
    /// One hold was released and others remain.
    StillHeld,
    /// The last hold was released; the lock is free and one waiter was told.
    Freed,
}

/// One call of `lua/unlock.lua`.
pub(crate) struct UnlockCall<'a> {
    pub(crate) key: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) latch: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) owner: &'a str,
    pub(crate) latch_ttl_ms: u64,
}

impl UnlockCall<'_> {
    pub(crate) async fn run(&self, mut conn: MultiplexedConnection) -> RedisResult<UnlockOutcome> {
        let found: Option<i64> = UNLOCK
            .key(self.key)
            .key(self.channel)
            .key(self.latch)
            .arg(UNLOCK_MESSAGE)
            .arg(self.lease_ms)
            .arg(self.owner)
            .arg(self.latch_ttl_ms)
            .invoke_async(&mut conn)
            .await?;
        Ok(match found {
            None => UnlockOutcome::NotHeld,
            Some(0) => UnlockOutcome::StillHeld,
            Some(_) => UnlockOutcome::Freed,
        })
    }
}

/// `lua/force_unlock.lua`: true when a lock was deleted (and a waiter told).
pub(crate) async fn force_unlock(
    mut conn: MultiplexedConnection,
    key: &str,
    channel: &str,
) -> RedisResult<bool> {
    FORCE_UNLOCK
        .key(key)
        .key(channel)
        .arg(UNLOCK_MESSAGE)
        .invoke_async(&mut conn)
        .await
}

/// `lua/renew.lua` over one batch: for each `(key, owner)` whether the owner still held it
/// (and its lease was reset).
pub(crate) async fn renew<'a>(
    conn: &mut MultiplexedConnection,
    lease_ms: u64,
    batch: impl Iterator<Item = (&'a str, &'a str)>,
) -> RedisResult<Vec<bool>> {
    let mut call = RENEW.prepare_invoke();
    call.arg(lease_ms);
    for (key, owner) in batch {
        call.key(key).arg(owner);
    }
    let renewed: Vec<i64> = call.invoke_async(conn).await?;
    Ok(renewed.into_iter().map(|r| r == 1).collect())
}
