//! Redisson's `RFencedLock`: the hash, and the token counter every acquire increments.
//! Besides the calls every kind has: the write a token guards (`fenced_set.lua`, a
//! resource's side of fencing) and a fenced `RedLock`'s write-back (`fenced_raise.lua`).

use std::sync::LazyLock;

use redis::RedisResult;

use super::reentrant::REENTRANT;
use super::{Arg, Call, Kept, Kind};
use crate::protocol::conn::{Conn, EvalSha, LuaScript};
use crate::protocol::layout::Derived;
use crate::protocol::names::LockNames;
use crate::protocol::scripts::script;

static ACQUIRE: LazyLock<LuaScript> = script!("fenced_acquire.lua", "lock_common.lua");
static SET: LazyLock<LuaScript> = script!("fenced_set.lua", "lock_common.lua", "fence_common.lua");
static RAISE: LazyLock<LuaScript> =
    script!("fenced_raise.lua", "lock_common.lua", "fence_common.lua");

/// Redisson's `RFencedLock`: reentrant, and every acquire draws a fencing token.
pub(crate) static FENCED: Kind = Kind {
    label: "fenced",
    kept: &[Kept::itself(
        |key| Derived::FencingToken.of(key),
        &["incr", "$"],
        "`~redisson_lock_token:*`",
    )],
    fenced: true,
    acquire: &Call {
        script: &ACQUIRE,
        keys: &[Arg::Key, Arg::Kept(0)],
        args: &[Arg::Lease, Arg::Owner],
    },
    more_scripts: &[&SET, &RAISE],
    commands: &[&["incr", "$0"]],
    // A plain lock's release: it goes with theirs.
    ..REENTRANT
};

/// `fenced_set.lua`: sets `key` to `value` unless a write with a higher fencing token
/// than `token` was accepted before. True when written.
pub(crate) async fn fenced_set(
    mut conn: Conn,
    key: &str,
    fence: &str,
    token: u64,
    value: &[u8],
) -> RedisResult<bool> {
    let mut call = EvalSha::new(&SET, 2, 4, key.len() + fence.len() + value.len());
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
    let counter = &names.kept[0];
    let mut call = EvalSha::new(&RAISE, 2, 4, names.key.len() * 2 + owner.len() + 64);
    call.arg(&*names.key).arg(&**counter).arg(owner).arg(token);
    call.query(&mut conn).await
}
