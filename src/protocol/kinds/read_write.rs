//! Redisson's `RReadWriteLock`, one hash for both sides: the read lock and the write lock
//! are two kinds on it. The scripts (`read_*.lua`, `write_*.lua`, `rw_*.lua`, each with
//! `lock_common.lua` and `rw_common.lua` prepended) are set out in the
//! [`read_write`](crate::locks::read_write) docs.

use std::sync::LazyLock;

use redis::RedisResult;

use super::reentrant::REENTRANT;
use super::{Arg, Call, Kept, Kind, Side};
use crate::protocol::conn::{Conn, EvalSha, LuaScript};
use crate::protocol::layout::{self, Derived, READ_UNLOCK_MESSAGE, UNLOCK_MESSAGE};
use crate::protocol::scripts::script;

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

/// `{<key>}` (the key as it is when it has a brace already): read hold `n` of owner `o`
/// has the timeout key `<this>:<o>:rwlock_timeout:<n>`. The scripts take it as an
/// argument: it names keys only with an owner and a number after it.
const TIMEOUTS: &[Kept] = &[Kept {
    name: layout::hash_tagged,
    checked_as: |head| format!("{head}:<owner>:rwlock_timeout:1"),
    written_by: &["set", "$", "1"],
    grant: "a `~` pattern that matches `{<lock name>}:*`, the read holds' timeout keys",
}];

/// What both sides' scripts run beyond every kind's commands (`$0`: a read hold's timeout
/// key, as the scripts name one, for any owner: the rule that grants it matches them all).
const COMMANDS: &[&[&str]] = &[
    &["hset", "$key", "f", "1"],
    &["hdel", "$key", "f"],
    &["hgetall", "$key"],
    &["hlen", "$key"],
    &["set", "$0", "1", "px", "1"],
    &["pexpire", "$0", "1"],
    &["pttl", "$0"],
    &["del", "$0"],
];

/// A release's arguments: it publishes `message` when it frees the lock.
const fn unlock_args(message: &'static str) -> [Arg; 8] {
    [
        Arg::Channel,
        Arg::Text(message),
        Arg::Publish,
        Arg::Lease,
        Arg::Owner,
        Arg::Retry,
        Arg::Expected,
        Arg::Kept(0),
    ]
}

/// A force unlock's arguments: it deletes the lock held in `mode`, publishing `message`.
const fn force_unlock_args(message: &'static str, mode: &'static str) -> [Arg; 5] {
    [
        Arg::Channel,
        Arg::Text(message),
        Arg::Publish,
        Arg::Text(mode),
        Arg::Kept(0),
    ]
}

/// The read lock of Redisson's `RReadWriteLock`: the hash has a `mode`, and each read hold
/// a timeout key of its own. A read release frees the lock for one writer.
pub(crate) static READ: Kind = Kind {
    label: "read",
    channel: Derived::ReadWriteChannel,
    kept: TIMEOUTS,
    side: Some(Side::Read),
    acquire: &Call {
        script: &READ_ACQUIRE,
        keys: &[Arg::Key, Arg::ReadTimeouts],
        args: &[Arg::Lease, Arg::Owner],
    },
    unlock: &Call {
        script: &READ_UNLOCK,
        keys: &[Arg::Key, Arg::ReadTimeouts],
        args: &unlock_args(UNLOCK_MESSAGE),
    },
    force_unlock: &Call {
        script: &FORCE_UNLOCK,
        keys: &[Arg::Key],
        args: &force_unlock_args(UNLOCK_MESSAGE, "read"),
    },
    inspect: &Call {
        script: &INSPECT,
        keys: &[Arg::Key],
        args: &[Arg::Owner, Arg::Text("read")],
    },
    more_scripts: &[&RENEW],
    commands: COMMANDS,
    ..REENTRANT
};

/// The write lock of Redisson's `RReadWriteLock`: owner fields end in `:write`. A write
/// release frees the lock for every waiting reader (Redisson's `READ_UNLOCK_MESSAGE`).
/// What it does not say is the read lock's.
pub(crate) static WRITE: Kind = Kind {
    label: "write",
    side: Some(Side::Write),
    acquire: &Call {
        script: &WRITE_ACQUIRE,
        keys: &[Arg::Key],
        args: &[Arg::Lease, Arg::Owner],
    },
    unlock: &Call {
        script: &WRITE_UNLOCK,
        keys: &[Arg::Key],
        args: &unlock_args(READ_UNLOCK_MESSAGE),
    },
    force_unlock: &Call {
        script: &FORCE_UNLOCK,
        keys: &[Arg::Key],
        args: &force_unlock_args(READ_UNLOCK_MESSAGE, "write"),
    },
    inspect: &Call {
        script: &INSPECT,
        keys: &[Arg::Key],
        args: &[Arg::Owner, Arg::Text("write")],
    },
    ..READ
};

/// `rw_renew.lua` over one batch of `(key, owner, read timeouts, lease)` (`None`: a write
/// hold): for each, whether the owner still held it (and its leases were reset).
pub(crate) async fn renew<'a>(
    conn: &mut Conn,
    batch: impl Iterator<Item = (&'a str, &'a str, Option<&'a str>, u64)> + Clone,
) -> RedisResult<Vec<bool>> {
    let (mut keys, mut bytes) = (0, 0);
    for (key, owner, timeouts, _) in batch.clone() {
        keys += 1;
        bytes += key.len() + owner.len() + timeouts.map_or(0, str::len) + 20;
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
