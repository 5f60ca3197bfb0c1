//! Typed calls to the Lua scripts (the files of the top-level `lua/`, compiled in).
//!
//! Each call goes out as EVALSHA; `redis::Script` hashes the source once and loads it when
//! Redis answers NOSCRIPT (after a restart or `SCRIPT FLUSH`). The scripts are also loaded
//! when a client connects, so the first lock call does not pay that extra round trip.
//!
//! A plain lock and a fair lock share the hash, the lease and the renewal script; a fair
//! lock's acquire, unlock and force-unlock scripts also keep its waiting queue, and share
//! the helpers of `fair_common.lua`, prepended at build time. A read-write lock has scripts
//! of its own (`read_write`).

use std::sync::LazyLock;

use redis::{ErrorKind, RedisError, RedisResult};

use crate::protocol::channels::ChannelKind;
use crate::protocol::conn::Conn;
use crate::protocol::conn::{EvalSha, LuaScript};
use crate::protocol::names::{LockNames, QueueNames, UNLOCK_MESSAGE};

pub(crate) use read_write::renew as renew_read_write;

/// A script's source: its flags line first (Redis reads `#!lua` only on the first line),
/// then the helpers it shares with other scripts, then its body.
fn assemble(shared: &[&str], body: &str) -> String {
    let (flags, body) = match body.strip_prefix("#!") {
        Some(_) => body.split_once('\n').unwrap_or((body, "")),
        None => ("", body),
    };
    let mut source = String::with_capacity(body.len() + 64);
    if !flags.is_empty() {
        source.push_str(flags);
        source.push('\n');
    }
    for part in shared {
        source.push_str(part);
    }
    source.push_str(body);
    source
}

/// A script of this folder, with the shared helper files listed after it prepended.
macro_rules! script {
    ($file:literal $(, $shared:literal)*) => {
        LazyLock::new(|| {
            LuaScript::new(assemble(
                &[$(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $shared))),*],
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),
            ))
        })
    };
}

// After the macros, which it uses.
mod read_write;

/// A fair-lock script: the lock helpers and `fair_common.lua` prepended.
macro_rules! fair_script {
    ($file:literal) => {
        script!($file, "lock_common.lua", "fair_common.lua")
    };
}

mod synchronizers;

mod acquire;
mod unlock;

pub(crate) use acquire::{AcquireCall, AcquireItem, AcquireReply, PlaceTerms};
pub(crate) use unlock::{UnlockCall, UnlockItem, UnlockOutcome};

pub(crate) use synchronizers::{
    change_permits, count_down, delete, drain, permit_acquire, permit_count, permit_left,
    permit_release, permit_update, read_count, semaphore_acquire, try_set_count, Change,
    PermitAcquire, PermitRelease, RequestLatch, PERMITS_RANGE,
};

static ACQUIRE: LazyLock<LuaScript> = script!("acquire.lua", "lock_common.lua");
static UNLOCK: LazyLock<LuaScript> = script!("unlock.lua");
static FORCE_UNLOCK: LazyLock<LuaScript> = script!("force_unlock.lua", "lock_common.lua");
static RENEW: LazyLock<LuaScript> = script!("renew.lua");
static FENCED_ACQUIRE: LazyLock<LuaScript> = script!("fenced_acquire.lua", "lock_common.lua");
static FENCED_SET: LazyLock<LuaScript> =
    script!("fenced_set.lua", "lock_common.lua", "fence_common.lua");
static FENCED_RAISE: LazyLock<LuaScript> =
    script!("fenced_raise.lua", "lock_common.lua", "fence_common.lua");
static FAIR_ACQUIRE: LazyLock<LuaScript> = fair_script!("fair_acquire.lua");
static FAIR_UNLOCK: LazyLock<LuaScript> = fair_script!("fair_unlock.lua");
static FAIR_FORCE_UNLOCK: LazyLock<LuaScript> = fair_script!("fair_force_unlock.lua");
static FAIR_LEAVE: LazyLock<LuaScript> = fair_script!("fair_leave.lua");
static FAIR_HEARTBEAT: LazyLock<LuaScript> = fair_script!("fair_heartbeat.lua");
static FAIR_NOTIFY: LazyLock<LuaScript> = fair_script!("fair_notify.lua");
static ACL_PROBE: LazyLock<LuaScript> = script!("acl_probe.lua");
static INSPECT: LazyLock<LuaScript> = script!("inspect.lua", "lock_common.lua");
static STILL_HELD: LazyLock<LuaScript> = script!("still_held.lua");

/// Loads every script, so that later calls find them by hash.
pub(crate) async fn load_all(conn: &mut Conn) -> RedisResult<()> {
    let all = [
        &ACQUIRE,
        &UNLOCK,
        &FORCE_UNLOCK,
        &RENEW,
        &FENCED_ACQUIRE,
        &FENCED_SET,
        &FENCED_RAISE,
        &FAIR_ACQUIRE,
        &FAIR_UNLOCK,
        &FAIR_FORCE_UNLOCK,
        &FAIR_LEAVE,
        &FAIR_HEARTBEAT,
        &FAIR_NOTIFY,
        &ACL_PROBE,
        &INSPECT,
        &STILL_HELD,
    ];
    for script in all
        .into_iter()
        .chain(synchronizers::all())
        .chain(read_write::all())
    {
        script.script().load_async(conn).await?;
    }
    Ok(())
}

/// The most bytes a number argument takes.
const NUMBER_BYTES: usize = 20;

/// The batched scripts' answer for a key that is not a lock (below any PTTL).
const NOT_A_LOCK: i64 = -4;

/// `unlock.lua`'s answer when the user may not publish the unlock message.
const PUBLISH_REFUSED: i64 = -5;

/// The last argument of a batched script called for one item alone: the reply comes bare.
const LONE: &str = "1";

/// Adds the keys every fair-lock script takes for one lock: lock, queue, deadlines.
fn fair_keys(call: &mut EvalSha<'_>, names: &LockNames, queue: &QueueNames) {
    call.arg(&*names.key)
        .arg(&*queue.list)
        .arg(&*queue.deadlines);
}

/// A call of a fair-lock script on one lock: its three keys, then `more_keys` keys (to be
/// added), then the channel, the unlock message and the publish command, then `args`
/// arguments (to be added).
/// The channel is an argument, not a key: it needs no key permission (see the README's
/// ACL rules), and the lock key routes the call.
fn fair_call<'s>(
    script: &'s LuaScript,
    names: &LockNames,
    queue: &QueueNames,
    more_keys: &[&str],
    args: usize,
) -> EvalSha<'s> {
    let bytes = names.key.len() * 4 + 128 + args * NUMBER_BYTES;
    let mut call = EvalSha::new(
        script,
        3 + more_keys.len(),
        6 + more_keys.len() + args,
        bytes,
    );
    fair_keys(&mut call, names, queue);
    for key in more_keys {
        call.arg(*key);
    }
    call.arg(&*names.channel)
        .arg(UNLOCK_MESSAGE)
        .arg(names.publish_command());
    call
}

/// How long the head of a free fair lock's queue that nobody hears keeps its turn:
/// `UNHEARD_GRACE_MS` in `fair_common.lua`, where the reason is.
pub(crate) const UNHEARD_GRACE: std::time::Duration = std::time::Duration::from_millis(100);

/// What the fair scripts answer for "freed, and the queue's head did not hear it".
const FREED_HEAD_UNHEARD: i64 = 2;

/// What a force unlock did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ForceUnlocked {
    /// There was no lock.
    Nothing,
    /// The lock was deleted and a waiter told.
    Deleted,
    /// A fair lock was deleted and the head of its queue did not hear it: as
    /// [`UnlockOutcome::FreedHeadUnheard`].
    DeletedHeadUnheard,
    /// Nothing was changed: the lock was not held by the holders the caller saw. What it
    /// found: a read-write lock's mode (`None` for other kinds or a free lock) and the
    /// owner fields (none when free).
    Changed {
        mode: Option<String>,
        holders: Vec<String>,
    },
}

/// `force_unlock.lua`, `fair_force_unlock.lua` or `rw_force_unlock.lua`; with `seen`, only
/// if the lock is held by exactly those owner fields (whatever their counts; a read-write
/// lock in the side's mode, its writer's field with `:write`).
pub(crate) async fn force_unlock(
    mut conn: Conn,
    names: &LockNames,
    seen: Option<&[String]>,
) -> RedisResult<ForceUnlocked> {
    let seen_args = seen.map_or(0, |seen| seen.len() + 1);
    let seen_bytes = seen.map_or(0, |seen| seen.iter().map(|s| s.len() + 8).sum());
    let mut call = if let Some((side, rw)) = names.read_write() {
        read_write::force_unlock_call(names, side, rw, seen_args, seen_bytes)
    } else {
        match names.queue() {
            None => {
                let mut call = EvalSha::new(
                    &FORCE_UNLOCK,
                    1,
                    4 + seen_args,
                    2 * names.key.len() + 64 + seen_bytes,
                );
                call.arg(&*names.key)
                    .arg(&*names.channel)
                    .arg(UNLOCK_MESSAGE)
                    .arg(names.publish_command());
                call
            }
            Some(queue) => fair_call(&FAIR_FORCE_UNLOCK, names, queue, &[], seen_args),
        }
    };
    if let Some(seen) = seen {
        call.arg(seen.len());
        for field in seen {
            call.arg(&**field);
        }
    }
    let reply: redis::Value = call.query(&mut conn).await?;
    force_unlocked(reply)
}

/// The reply of a force-unlock script.
fn force_unlocked(reply: redis::Value) -> RedisResult<ForceUnlocked> {
    let unexpected = || {
        RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "unexpected force-unlock reply",
        ))
    };
    match reply {
        redis::Value::Int(0) => Ok(ForceUnlocked::Nothing),
        redis::Value::Int(FREED_HEAD_UNHEARD) => Ok(ForceUnlocked::DeletedHeadUnheard),
        redis::Value::Int(_) => Ok(ForceUnlocked::Deleted),
        redis::Value::Array(items) => {
            let mut items = items
                .into_iter()
                .map(|item| redis::from_redis_value::<String>(item).map_err(|_| unexpected()));
            if items.next().transpose()?.as_deref() != Some("changed") {
                return Err(unexpected());
            }
            let mode = items.next().transpose()?.filter(|mode| !mode.is_empty());
            let holders = items.collect::<RedisResult<Vec<String>>>()?;
            Ok(ForceUnlocked::Changed { mode, holders })
        }
        _ => Err(unexpected()),
    }
}

/// `fair_notify.lua`: looks again at the queue of the fair lock `names` once the grace of
/// an unheard head has passed: drops stale waiters and, if the lock is free, tells the
/// head, or passes it over for the first waiter that hears. True when a head (a new one)
/// still keeps its turn unheard. A plain lock has no queue: nothing to do.
pub(crate) async fn notify_queue(mut conn: Conn, names: &LockNames) -> RedisResult<bool> {
    let Some(queue) = names.queue() else {
        return Ok(false);
    };
    let kept: i64 = fair_call(&FAIR_NOTIFY, names, queue, &[], 0)
        .query(&mut conn)
        .await?;
    Ok(kept == 1)
}

/// `fair_leave.lua`: `owner` leaves the fair lock's queue, and a new head is told if
/// the lock is free. A plain lock has no queue: nothing to do.
pub(crate) async fn leave_queue(mut conn: Conn, names: &LockNames, owner: &str) -> RedisResult<()> {
    let Some(queue) = names.queue() else {
        return Ok(());
    };
    let mut call = fair_call(&FAIR_LEAVE, names, queue, &[], 1);
    call.arg(owner);
    let _was_queued: i64 = call.query(&mut conn).await?;
    Ok(())
}

/// What the heartbeat found of one queued waiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Still queued; its deadline was pushed forward.
    Kept,
    /// It heads the queue of a free lock: it should take the lock now.
    TurnCame,
    /// No longer queued: it took the lock, left, or was dropped as stale.
    Gone,
}

/// `renew.lua` over one batch of `(key, owner, lease)`: for each, whether the owner
/// still held it (and its lease was reset). Leases that differ from `lease_ms` (near a
/// maximum hold time) are sent one per key.
pub(crate) async fn renew<'a>(
    conn: &mut Conn,
    lease_ms: u64,
    batch: impl Iterator<Item = (&'a str, &'a str, u64)> + Clone,
) -> RedisResult<Vec<bool>> {
    let (mut keys, mut bytes, mut differ) = (0, 0, false);
    for (key, owner, lease) in batch.clone() {
        keys += 1;
        bytes += key.len() + owner.len() + 2 * NUMBER_BYTES;
        differ |= lease != lease_ms;
    }
    let args = 1 + keys * if differ { 3 } else { 2 };
    let mut call = EvalSha::new(&RENEW, keys, args, bytes);
    for (key, _, _) in batch.clone() {
        call.arg(key);
    }
    call.arg(lease_ms);
    for (_, owner, _) in batch.clone() {
        call.arg(owner);
    }
    if differ {
        for (_, _, lease) in batch {
            call.arg(lease);
        }
    }
    let renewed: Vec<i64> = call.query(conn).await?;
    Ok(renewed.into_iter().map(|r| r == 1).collect())
}

/// `fair_heartbeat.lua` over one batch of fair waiters: for each `(lock, queue,
/// owner)` what became of its place (a kept place's deadline is pushed ahead by `place`).
pub(crate) async fn refresh_places<'a>(
    conn: &mut Conn,
    place: PlaceTerms,
    batch: impl Iterator<Item = (&'a LockNames, &'a QueueNames, &'a str)> + Clone,
) -> RedisResult<Vec<Place>> {
    let (waiters, bytes) = batch.clone().fold((0, 0), |(n, bytes), (names, _, owner)| {
        (n + 1, bytes + 4 * names.key.len() + 128 + owner.len())
    });
    // Every lock of one client publishes with the same command.
    let publish = batch
        .clone()
        .next()
        .map_or(ChannelKind::Classic.publish(), |(names, _, _)| {
            names.publish_command()
        });
    let mut call = EvalSha::new(&FAIR_HEARTBEAT, 3 * waiters, 5 * waiters + 4, bytes);
    for (names, queue, _) in batch.clone() {
        fair_keys(&mut call, names, queue);
    }
    call.arg(place.keep_ms)
        .arg(UNLOCK_MESSAGE)
        .arg(publish)
        .arg(place.per_waiter_ahead_ms);
    for (names, _, owner) in batch {
        call.arg(&*names.channel).arg(owner);
    }
    let places: Vec<i64> = call.query(conn).await?;
    Ok(places
        .into_iter()
        .map(|place| match place {
            1 => Place::Kept,
            2 => Place::TurnCame,
            _ => Place::Gone,
        })
        .collect())
}

/// `fenced_set.lua`: sets `key` to `value` unless a write with a higher fencing token
/// than `token` was accepted before. True when written.
pub(crate) async fn fenced_set(
    mut conn: Conn,
    key: &str,
    fence: &str,
    token: u64,
    value: &[u8],
) -> RedisResult<bool> {
    let mut call = EvalSha::new(&FENCED_SET, 2, 4, key.len() + fence.len() + value.len());
    call.arg(key).arg(fence).arg(token).arg(value);
    call.query(&mut conn).await
}

/// `fenced_raise.lua`: raises the token counter of a fenced lock that `owner` holds to
/// at least `token`. False when `owner` no longer holds the lock (nothing written).
pub(crate) async fn fenced_raise(
    mut conn: Conn,
    names: &LockNames,
    owner: &str,
    token: u64,
) -> RedisResult<bool> {
    let Some(counter) = names.token_counter() else {
        return Ok(false);
    };
    let mut call = EvalSha::new(&FENCED_RAISE, 2, 4, names.key.len() * 2 + owner.len() + 64);
    call.arg(&*names.key).arg(&**counter).arg(owner).arg(token);
    call.query(&mut conn).await
}

/// `acl_probe.lua`: which of `checks` (each a command and its arguments) the connected
/// user may not run, by their index in `checks`.
pub(crate) async fn refused_checks(
    conn: &mut Conn,
    checks: &[Vec<String>],
) -> RedisResult<Vec<usize>> {
    let args: usize = checks.iter().map(|check| check.len() + 1).sum();
    let bytes = checks.iter().flatten().map(String::len).sum::<usize>() + args * 4;
    let mut call = EvalSha::new(&ACL_PROBE, 0, args, bytes);
    for check in checks {
        call.arg(check.len());
        for word in check {
            call.arg(word.as_str());
        }
    }
    let refused: Vec<usize> = call.query(conn).await?;
    Ok(refused
        .into_iter()
        .filter_map(|n| n.checked_sub(1))
        .collect())
}

/// What [`inspect`] read of one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LockState {
    /// The lock's PTTL: -2 when it is not held, -1 when it has no expiry.
    pub(crate) pttl_ms: i64,
    /// How many holds the asked owner has.
    pub(crate) count: u32,
    /// Whether the lock is held: for a read-write lock, on the asked side.
    pub(crate) locked: bool,
}

/// `inspect.lua` (or for a read-write lock `rw_inspect.lua`): the state of the lock of
/// `names` as seen by `owner`, or a NOTALOCK error when the key is not a lock.
pub(crate) async fn inspect(
    mut conn: Conn,
    names: &LockNames,
    owner: &str,
) -> RedisResult<LockState> {
    if let Some((side, _)) = names.read_write() {
        return read_write::inspect(conn, names, side, owner).await;
    }
    let key = &*names.key;
    let mut call = EvalSha::new(&INSPECT, 1, 2, key.len() + owner.len());
    call.arg(key).arg(owner);
    let (pttl_ms, count): (i64, u32) = call.query(&mut conn).await?;
    Ok(LockState {
        pttl_ms,
        count,
        locked: pttl_ms != -2,
    })
}

/// `still_held.lua` over one batch of `(key, owner)`: for each, whether the owner still
/// holds the lock.
pub(crate) async fn still_held<'a>(
    conn: &mut Conn,
    batch: impl Iterator<Item = (&'a str, &'a str)> + Clone,
) -> RedisResult<Vec<bool>> {
    let (keys, bytes) = batch.clone().fold((0, 0), |(n, bytes), (key, owner)| {
        (n + 1, bytes + key.len() + owner.len())
    });
    let mut call = EvalSha::new(&STILL_HELD, keys, 2 * keys, bytes);
    for (key, _) in batch.clone() {
        call.arg(key);
    }
    for (_, owner) in batch {
        call.arg(owner);
    }
    let held: Vec<i64> = call.query(conn).await?;
    Ok(held.into_iter().map(|h| h == 1).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The client waits out the grace that `fair_common.lua` gives an unheard head.
    #[test]
    fn the_unheard_grace_is_the_scripts() {
        let line = format!("local UNHEARD_GRACE_MS = {}\n", UNHEARD_GRACE.as_millis());
        assert!(
            include_str!("../../../lua/fair_common.lua").contains(&line),
            "{line}"
        );
    }
}
