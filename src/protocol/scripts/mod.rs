//! Typed calls to the Lua scripts (the files of the top-level `lua/`, compiled in).
//!
//! Each call goes out as EVALSHA; `redis::Script` hashes the source once and loads it when
//! Redis answers NOSCRIPT (after a restart or `SCRIPT FLUSH`). The scripts are also loaded
//! when a client connects, so the first lock call does not pay that extra round trip.
//!
//! Which script a lock's call runs, and with which keys and arguments, its kind says
//! ([`kinds`](crate::protocol::kinds)); the calls here run any kind's: acquire (a plain
//! lock's batched with others, `acquire`), unlock (`unlock`), force unlock and inspect.
//! The watchdog's renewal, the ACL probe, the fixed-lease check and the synchronizers'
//! scripts are here too.

use std::sync::LazyLock;

use redis::{ErrorKind, RedisError, RedisResult};

use crate::protocol::conn::{Conn, EvalSha, LuaScript, NUMBER_BYTES};
use crate::protocol::kinds::{Kind, Values};
use crate::protocol::names::LockNames;

/// A script's source: its flags line first (Redis reads `#!lua` only on the first line),
/// then the helpers it shares with other scripts, then its body.
pub(crate) fn assemble(shared: &[&str], body: &str) -> String {
    let flags_end = body
        .strip_prefix("#!")
        .map_or(0, |_| body.find('\n').map_or(body.len(), |end| end + 1));
    let (flags, body) = body.split_at(flags_end);
    [&[flags], shared, &[body]].concat().concat()
}

/// A script of the top-level `lua/`, with the shared helper files listed after it
/// prepended.
macro_rules! script {
    ($file:literal $(, $shared:literal)*) => {
        std::sync::LazyLock::new(|| {
            $crate::protocol::conn::LuaScript::new($crate::protocol::scripts::assemble(
                &[$(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $shared))),*],
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/lua/", $file)),
            ))
        })
    };
}
pub(crate) use script;

mod acquire;
mod synchronizers;
mod unlock;

pub(crate) use acquire::{AcquireCall, AcquireItem, AcquireReply};
pub(crate) use unlock::{UnlockCall, UnlockItem, UnlockOutcome};

pub(crate) use synchronizers::{
    change_permits, count_down, delete, drain, permit_acquire, permit_count, permit_left,
    permit_release, permit_update, read_count, semaphore_acquire, try_set_count, Change,
    PermitAcquire, PermitRelease, RequestLatch, PERMITS_RANGE,
};

static RENEW: LazyLock<LuaScript> = script!("renew.lua");
static ACL_PROBE: LazyLock<LuaScript> = script!("acl_probe.lua");
static STILL_HELD: LazyLock<LuaScript> = script!("still_held.lua");

/// Loads every script, so that later calls find them by hash.
pub(crate) async fn load_all(conn: &mut Conn) -> RedisResult<()> {
    for script in [&RENEW, &ACL_PROBE, &STILL_HELD]
        .into_iter()
        .chain(Kind::scripts())
        .chain(synchronizers::all())
    {
        script.script.load_async(conn).await?;
    }
    Ok(())
}

/// The last argument of a batched script called for one item alone: the reply comes bare.
const LONE: &str = "1";

/// The batched scripts' answer for a key that is not a lock (below any PTTL).
const NOT_A_LOCK: i64 = -4;

/// `unlock.lua`'s answer when the user may not publish the unlock message.
const PUBLISH_REFUSED: i64 = -5;

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

/// The kind's force unlock (`force_unlock.lua`, `fair_force_unlock.lua` or
/// `rw_force_unlock.lua`); with `seen`, only if the lock is held by exactly those owner
/// fields (whatever their counts; a read-write lock in the side's mode, its writer's field
/// with `:write`).
pub(crate) async fn force_unlock(
    mut conn: Conn,
    names: &LockNames,
    seen: Option<&[String]>,
) -> RedisResult<ForceUnlocked> {
    let seen_args = seen.map_or(0, |seen| seen.len() + 1);
    let mut call = names
        .kind
        .force_unlock
        .build(names, &Values::default(), seen_args);
    if let Some(seen) = seen {
        // A slice goes out as one argument per field.
        call.arg(seen.len()).arg(seen);
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
        call.arg(check.len()).arg(check);
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

/// The kind's inspect (`inspect.lua`, or for a read-write lock `rw_inspect.lua`): the
/// state of the lock of `names` as seen by `owner`, or a NOTALOCK error when the key is
/// not a lock.
pub(crate) async fn inspect(
    mut conn: Conn,
    names: &LockNames,
    owner: &str,
) -> RedisResult<LockState> {
    let values = Values {
        owner,
        ..Values::default()
    };
    let call = names.kind.inspect.build(names, &values, 0);
    // `{pttl, count}`, and a read-write lock's `locked` for the asked side.
    let state: Vec<i64> = call.query(&mut conn).await?;
    let unexpected =
        || RedisError::from((ErrorKind::UnexpectedReturnType, "unexpected inspect reply"));
    let [pttl_ms, count, ref locked @ ..] = state[..] else {
        return Err(unexpected());
    };
    Ok(LockState {
        pttl_ms,
        count: u32::try_from(count).map_err(|_| unexpected())?,
        locked: locked.first().map_or(pttl_ms != -2, |&locked| locked == 1),
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
