//! The read-write lock's scripts (`read_*.lua`, `write_*.lua`, `rw_*.lua`, each with
//! `lock_common.lua` and `rw_common.lua` prepended) and their calls: Redisson's
//! `RReadWriteLock` layout, one hash for both sides.
//!
//! Each call names one lock and goes out alone; only the watchdog's renewals cover many.

use std::sync::LazyLock;

use redis::RedisResult;

use super::{assemble, AcquireReply, LockState, UnlockCall, UnlockOutcome, NUMBER_BYTES};
use crate::protocol::conn::Conn;
use crate::protocol::conn::{EvalSha, LuaScript};
use crate::protocol::names::{
    LockNames, ReadWriteNames, Side, READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE,
};

/// A read-write lock script: the lock helpers and `rw_common.lua` prepended.
macro_rules! rw_script {
    ($file:literal) => {
        script!($file, "lock_common.lua", "rw_common.lua")
    };
}

static READ_ACQUIRE: LazyLock<LuaScript> = rw_script!("read_acquire.lua");
static WRITE_ACQUIRE: LazyLock<LuaScript> = rw_script!("write_acquire.lua");
static READ_UNLOCK: LazyLock<LuaScript> = rw_script!("read_unlock.lua");
static WRITE_UNLOCK: LazyLock<LuaScript> = rw_script!("write_unlock.lua");
static FORCE_UNLOCK: LazyLock<LuaScript> = rw_script!("rw_force_unlock.lua");
static INSPECT: LazyLock<LuaScript> = rw_script!("rw_inspect.lua");
static RENEW: LazyLock<LuaScript> = script!("rw_renew.lua");

/// Every script of this module, for loading at connect.
pub(super) fn all() -> [&'static LazyLock<LuaScript>; 7] {
    [
        &READ_ACQUIRE,
        &WRITE_ACQUIRE,
        &READ_UNLOCK,
        &WRITE_UNLOCK,
        &FORCE_UNLOCK,
        &INSPECT,
        &RENEW,
    ]
}

/// The message a release (or force-unlock) on `side` publishes: a read unlock frees the
/// lock for one writer, a write unlock for every waiting reader (Redisson's
/// `UNLOCK_MESSAGE` and `READ_UNLOCK_MESSAGE`).
fn message(side: Side) -> &'static str {
    match side {
        Side::Read => UNLOCK_MESSAGE,
        Side::Write => READ_UNLOCK_MESSAGE,
    }
}

/// `read_acquire.lua` or `write_acquire.lua` for `owner` (a write lock's field ends in
/// `:write`).
pub(super) async fn acquire(
    conn: &mut Conn,
    names: &LockNames,
    side: Side,
    lease_ms: u64,
    owner: &str,
) -> RedisResult<AcquireReply> {
    let bytes = 2 * names.key.len() + 2 * owner.len() + NUMBER_BYTES + 32;
    let reply: i64 = match names.read_timeouts(owner) {
        Some(timeouts) => {
            let mut call = EvalSha::new(&READ_ACQUIRE, 2, 4, bytes);
            call.arg(&*names.key)
                .arg(&*timeouts)
                .arg(lease_ms)
                .arg(owner);
            call.query(conn).await?
        }
        None => {
            debug_assert_eq!(side, Side::Write);
            let mut call = EvalSha::new(&WRITE_ACQUIRE, 1, 3, bytes);
            call.arg(&*names.key).arg(lease_ms).arg(owner);
            call.query(conn).await?
        }
    };
    Ok(AcquireReply::from_code(reply))
}

/// `read_unlock.lua` or `write_unlock.lua` for the release `unlock` describes; `retry`: an
/// earlier try of it may have run.
pub(super) async fn unlock(
    mut conn: Conn,
    unlock: &UnlockCall<'_>,
    side: Side,
    rw: &ReadWriteNames,
    retry: bool,
) -> RedisResult<UnlockOutcome> {
    let names = unlock.names;
    let owner = &**unlock.owner;
    let timeouts = names.read_timeouts(owner);
    let bytes = 4 * names.key.len() + unlock.latch.len() + 2 * owner.len() + 3 * NUMBER_BYTES;
    let script = match side {
        Side::Read => &READ_UNLOCK,
        Side::Write => &WRITE_UNLOCK,
    };
    let keys = 2 + usize::from(timeouts.is_some());
    let mut call = EvalSha::new(script, keys, keys + 8, bytes);
    call.arg(&*names.key).arg(&**unlock.latch);
    if let Some(timeouts) = &timeouts {
        call.arg(&**timeouts);
    }
    call.arg(&*names.channel)
        .arg(message(side))
        .arg(names.publish_command())
        .arg(unlock.latch_ttl_ms)
        .arg(unlock.lease_ms)
        .arg(owner)
        .arg(if retry { "1" } else { "0" })
        .arg(&*rw.timeouts);
    let found: i64 = call.query(&mut conn).await?;
    Ok(Some(found).into())
}

/// `rw_force_unlock.lua`, up to its optional holders the caller saw (`seen_args`
/// arguments of `seen_bytes` bytes, added by the caller): deletes the lock if it is held
/// on `side`.
pub(super) fn force_unlock_call<'s>(
    names: &LockNames,
    side: Side,
    rw: &ReadWriteNames,
    seen_args: usize,
    seen_bytes: usize,
) -> EvalSha<'s> {
    let mut call = EvalSha::new(
        &FORCE_UNLOCK,
        1,
        6 + seen_args,
        4 * names.key.len() + 64 + seen_bytes,
    );
    call.arg(&*names.key)
        .arg(&*names.channel)
        .arg(message(side))
        .arg(names.publish_command())
        .arg(side.mode())
        .arg(&*rw.timeouts);
    call
}

/// `rw_inspect.lua`: the lock's PTTL, `owner`'s count, and whether `side` is held.
pub(super) async fn inspect(
    mut conn: Conn,
    names: &LockNames,
    side: Side,
    owner: &str,
) -> RedisResult<LockState> {
    let mut call = EvalSha::new(&INSPECT, 1, 3, names.key.len() + owner.len() + 8);
    call.arg(&*names.key).arg(owner).arg(side.mode());
    let (pttl_ms, count, locked): (i64, u32, i64) = call.query(&mut conn).await?;
    Ok(LockState {
        pttl_ms,
        count,
        locked: locked == 1,
    })
}

/// `rw_renew.lua` over one batch of `(key, owner, read timeouts, lease)` (`None`: a write
/// hold): for each, whether the owner still held it (and its leases were reset).
pub(crate) async fn renew<'a>(
    conn: &mut Conn,
    batch: impl Iterator<Item = (&'a str, &'a str, Option<&'a str>, u64)> + Clone,
) -> RedisResult<Vec<bool>> {
    let (mut keys, mut bytes) = (0, 0);
    for (key, owner, timeouts, _) in batch.clone() {
        keys += 1;
        bytes += key.len() + owner.len() + timeouts.map_or(0, str::len) + NUMBER_BYTES;
    }
    let mut call = EvalSha::new(&RENEW, keys, 4 * keys, bytes);
    for (key, _, _, _) in batch.clone() {
        call.arg(key);
    }
    for (_, owner, timeouts, lease) in batch {
        call.arg(owner).arg(timeouts.unwrap_or("")).arg(lease);
    }
    let renewed: Vec<i64> = call.query(conn).await?;
    Ok(renewed.into_iter().map(|r| r == 1).collect())
}
