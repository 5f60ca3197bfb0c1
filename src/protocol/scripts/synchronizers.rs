//! Typed calls to the scripts of the semaphores and the count-down latch (`count_*.lua`,
//! `semaphore_*.lua`, `permit_*.lua`, `latch_*.lua`), each prefixed at build time with
//! `sync_common.lua` (the count's shape check), and the expirable semaphore's with
//! `permit_common.lua` too (server clock, reclaiming expired permits).

use std::sync::{Arc, LazyLock};

use redis::{ErrorKind, RedisError, RedisResult};

use crate::protocol::conn::{Conn, EvalSha, LuaScript, NUMBER_BYTES};
use crate::protocol::names::{SyncKind, SyncNames};

/// The scripts of the synchronizers, each with `sync_common.lua` and the helpers listed
/// after it prepended, and [`all`] of them, for loading at connect.
macro_rules! sync_scripts {
    ($($name:ident = $file:literal $(+ $shared:literal)?;)*) => {
        $(static $name: LazyLock<LuaScript> = script!($file, "sync_common.lua" $(, $shared)?);)*

        /// Every script of this file, for loading at connect.
        pub(super) fn all() -> impl Iterator<Item = &'static LazyLock<LuaScript>> {
            [$(&$name),*].into_iter()
        }
    };
}

sync_scripts! {
    COUNT_TRY_SET = "count_try_set.lua";
    COUNT_READ = "count_read.lua";
    COUNT_DELETE = "count_delete.lua";
    SEMAPHORE_ACQUIRE = "semaphore_acquire.lua";
    SEMAPHORE_CHANGE = "semaphore_change.lua";
    SEMAPHORE_DRAIN = "semaphore_drain.lua";
    LATCH_COUNT_DOWN = "latch_count_down.lua";
    PERMIT_ACQUIRE = "permit_acquire.lua" + "permit_common.lua";
    PERMIT_RELEASE = "permit_release.lua" + "permit_common.lua";
    PERMIT_COUNT = "permit_count.lua" + "permit_common.lua";
    PERMIT_UPDATE = "permit_update.lua" + "permit_common.lua";
    PERMIT_LEFT = "permit_left.lua" + "permit_common.lua";
}

/// A latch's message for a new count, or a deleted latch (Redisson's
/// `CountDownLatchPubSub.NEW_COUNT_MESSAGE`); its count reaching zero is `0`.
const NEW_COUNT_MESSAGE: &str = "1";

/// The expiry score of a permit taken without a lease (Redisson's `nonExpirableTimeout`);
/// this crate never writes it, and waits for no such permit to expire.
const NO_EXPIRY: u64 = 922_337_203_685_477;

/// The counts a semaphore may take, both kinds: Redisson reads them as a Java `int`.
pub(crate) const PERMITS_RANGE: std::ops::RangeInclusive<i64> = i32::MIN as i64..=i32::MAX as i64;

/// A call of `script` on the count's key and, when given, a second key (the expirable
/// semaphore's permits, or a count change's request latch), with room for `args`
/// arguments.
fn call<'s>(
    script: &'s LuaScript,
    names: &SyncNames,
    second: Option<&str>,
    args: usize,
) -> EvalSha<'s> {
    let keys = 1 + usize::from(second.is_some());
    let second_bytes = second.map_or(0, str::len);
    let bytes = names.key.len() + second_bytes + names.channel.len() + args * NUMBER_BYTES;
    let mut call = EvalSha::new(script, keys, keys + args, bytes + 32);
    call.arg(&*names.key);
    if let Some(second) = second {
        call.arg(second);
    }
    call
}

/// A call of `script` on the count and, when it has them, its permits, whose arguments
/// start with the channel and the command that tell the waiters; room for `args` more.
fn telling<'s>(script: &'s LuaScript, names: &SyncNames, args: usize) -> EvalSha<'s> {
    let mut call = call(script, names, names.timeouts.as_deref(), 2 + args);
    call.arg(&*names.channel).arg(names.publish_command());
    call
}

/// A count change's request latch, sent by a cluster or Sentinel client (see `sync::call`): the key
/// (in the count's slot) where the change's answer is kept for `ttl_ms`, so that a retry
/// of a request whose first try ran answers as that try did instead of counting again.
#[derive(Debug, Clone)]
pub(crate) struct RequestLatch {
    pub(crate) key: Arc<str>,
    pub(crate) ttl_ms: u64,
}

/// Sends the count change `script`: on the count and the request latch when there is
/// one, with the arguments `args` appends (`count` of them), and the latch's time-to-live
/// last.
async fn change<T: redis::FromRedisValue>(
    mut conn: Conn,
    script: &LuaScript,
    names: &SyncNames,
    latch: Option<&RequestLatch>,
    count: usize,
    args: impl FnOnce(&mut EvalSha<'_>),
) -> RedisResult<T> {
    let mut call = call(script, names, latch.map(|l| &*l.key), count + 1);
    args(&mut call);
    if let Some(latch) = latch {
        call.arg(latch.ttl_ms);
    }
    call.query(&mut conn).await
}

/// `count_try_set.lua`: sets the count to `count` if there is none, telling the waiters.
/// True when set.
pub(crate) async fn try_set_count(
    mut conn: Conn,
    names: &SyncNames,
    count: u64,
) -> RedisResult<bool> {
    let mut call = call(&COUNT_TRY_SET, names, None, 4);
    call.arg(count)
        .arg(&*names.channel)
        .arg(names.publish_command());
    match names.kind {
        SyncKind::Latch => call.arg(NEW_COUNT_MESSAGE),
        SyncKind::Semaphore | SyncKind::ExpirableSemaphore => call.arg(count),
    };
    call.query(&mut conn).await
}

/// `count_read.lua`: the count (0 when there is none).
pub(crate) async fn read_count(mut conn: Conn, names: &SyncNames) -> RedisResult<i64> {
    // A decimal string, as Redis keeps the count.
    let text: String = call(&COUNT_READ, names, None, 0).query(&mut conn).await?;
    text.parse().map_err(|_| {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "a count script answered a malformed number",
            text,
        ))
    })
}

/// `count_delete.lua`: deletes the count (and an expirable semaphore's permits); a latch's
/// waiters are told. True when something was there.
pub(crate) async fn delete(mut conn: Conn, names: &SyncNames) -> RedisResult<bool> {
    let mut call = telling(&COUNT_DELETE, names, 1);
    match names.kind {
        SyncKind::Latch => call.arg(NEW_COUNT_MESSAGE),
        SyncKind::Semaphore | SyncKind::ExpirableSemaphore => call.arg(""),
    };
    call.query(&mut conn).await
}

/// `semaphore_acquire.lua`: takes `permits` if that many are free. True when taken.
pub(crate) async fn semaphore_acquire(
    conn: Conn,
    names: &SyncNames,
    latch: Option<RequestLatch>,
    permits: u64,
) -> RedisResult<bool> {
    change(conn, &SEMAPHORE_ACQUIRE, names, latch.as_ref(), 1, |call| {
        call.arg(permits);
    })
    .await
}

/// How `semaphore_change.lua` changes a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// `RSemaphore.release`: INCRBY, the new count told.
    Release,
    /// `RSemaphore.addPermits`: SET to the new count, which is told.
    Add,
    /// `RPermitExpirableSemaphore.addPermits`: SET, the permits added told.
    AddExpirable,
}

/// `semaphore_change.lua`: adds `permits` (negative: takes them away) as `change` says,
/// keeping the count in [`PERMITS_RANGE`]. The new count.
pub(crate) async fn change_permits(
    conn: Conn,
    names: &SyncNames,
    latch: Option<RequestLatch>,
    permits: i64,
    how: Change,
) -> RedisResult<i64> {
    change(conn, &SEMAPHORE_CHANGE, names, latch.as_ref(), 6, |call| {
        call.arg(permits)
            .arg(&*names.channel)
            .arg(names.publish_command())
            .arg(match how {
                Change::Release => "release",
                Change::Add => "add",
                Change::AddExpirable => "add-expirable",
            })
            .arg(*PERMITS_RANGE.start())
            .arg(*PERMITS_RANGE.end());
    })
    .await
}

/// `semaphore_drain.lua`: takes every free permit; the count there was.
pub(crate) async fn drain(
    conn: Conn,
    names: &SyncNames,
    latch: Option<RequestLatch>,
) -> RedisResult<i64> {
    change(conn, &SEMAPHORE_DRAIN, names, latch.as_ref(), 0, |_| {}).await
}

/// `latch_count_down.lua`: counts the latch down by one, opening it at zero. The count left.
pub(crate) async fn count_down(
    conn: Conn,
    names: &SyncNames,
    latch: Option<RequestLatch>,
) -> RedisResult<i64> {
    change(conn, &LATCH_COUNT_DOWN, names, latch.as_ref(), 2, |call| {
        call.arg(&*names.channel).arg(names.publish_command());
    })
    .await
}

/// What `permit_acquire.lua` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PermitAcquire {
    /// Taken, with the id asked for.
    Acquired,
    /// Not enough permits free; the nearest expiry of a taken one is this many ms away
    /// (`None`: no taken permit expires).
    Busy(Option<u64>),
}

/// `permit_acquire.lua`: takes one permit with the id `id` (the script takes one per id
/// given, as Redisson's takes several), expiring `lease_ms` after the script ran (on the
/// server's clock).
pub(crate) async fn permit_acquire(
    mut conn: Conn,
    names: &SyncNames,
    lease_ms: u64,
    id: &[u8; 16],
) -> RedisResult<PermitAcquire> {
    let mut call = telling(&PERMIT_ACQUIRE, names, 3);
    call.arg(lease_ms).arg(NO_EXPIRY).arg(&id[..]);
    let (taken, nearest_ms): (i64, i64) = call.query(&mut conn).await?;
    Ok(if taken == 1 {
        PermitAcquire::Acquired
    } else {
        PermitAcquire::Busy(u64::try_from(nearest_ms).ok())
    })
}

/// What `permit_release.lua` found of a permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PermitRelease {
    /// Released before its expiry.
    Released,
    /// Its expiry had passed and nobody had given it back yet: given back now.
    Expired,
    /// Not there: released, or given back after its expiry, or never taken.
    NotFound,
}

/// `permit_release.lua`: releases the permit `id`.
pub(crate) async fn permit_release(
    mut conn: Conn,
    names: &SyncNames,
    id: &[u8; 16],
) -> RedisResult<PermitRelease> {
    let mut call = telling(&PERMIT_RELEASE, names, 1);
    let found: i64 = call.arg(&id[..]).query(&mut conn).await?;
    Ok(match found {
        1 => PermitRelease::Released,
        2 => PermitRelease::Expired,
        _ => PermitRelease::NotFound,
    })
}

/// `permit_update.lua`: sets the lease of the permit `id` to `lease_ms` from now (on the
/// server's clock); false when the permit is not taken.
pub(crate) async fn permit_update(
    mut conn: Conn,
    names: &SyncNames,
    id: &[u8; 16],
    lease_ms: u64,
) -> RedisResult<bool> {
    let mut call = telling(&PERMIT_UPDATE, names, 2);
    let updated: i64 = call.arg(&id[..]).arg(lease_ms).query(&mut conn).await?;
    Ok(updated == 1)
}

/// `permit_left.lua`: how many milliseconds the permit `id` has left (0: expired, not yet
/// given back), or `None` when it is not taken.
pub(crate) async fn permit_left(
    mut conn: Conn,
    names: &SyncNames,
    id: &[u8; 16],
) -> RedisResult<Option<u64>> {
    let mut call = call(&PERMIT_LEFT, names, names.timeouts.as_deref(), 1);
    let left: i64 = call.arg(&id[..]).query(&mut conn).await?;
    Ok(u64::try_from(left).ok())
}

/// `permit_count.lua`: the free permits, or with `acquired` the permits taken, after
/// the expired ones were given back.
pub(crate) async fn permit_count(
    mut conn: Conn,
    names: &SyncNames,
    acquired: bool,
) -> RedisResult<i64> {
    let mut call = telling(&PERMIT_COUNT, names, 1);
    call.arg(if acquired { "acquired" } else { "available" })
        .query(&mut conn)
        .await
}
