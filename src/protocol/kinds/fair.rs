//! Redisson's `RFairLock`: the hash, a waiting queue and its waiters' deadlines; each
//! waiter hears on a channel of its own. Besides the calls every kind has, its waiters
//! leave the queue (`fair_leave.lua`), the client's heartbeat keeps their places
//! (`fair_heartbeat.lua`), and a free lock whose head did not hear is looked at again
//! (`fair_notify.lua`). Every script is prefixed with the lock helpers and
//! `fair_common.lua`.

use std::sync::LazyLock;
use std::time::Duration;

use redis::RedisResult;

use super::reentrant::REENTRANT;
use super::{Arg, Call, Kept, Kind, Values};
use crate::protocol::channels::ChannelKind;
use crate::protocol::conn::{Conn, EvalSha, LuaScript};
use crate::protocol::layout::{Derived, UNLOCK_MESSAGE};
use crate::protocol::names::LockNames;
use crate::protocol::scripts::script;

/// A fair-lock script: the lock helpers and `fair_common.lua` prepended.
macro_rules! fair_script {
    ($file:literal) => {
        script!($file, "lock_common.lua", "fair_common.lua")
    };
}

static ACQUIRE: LazyLock<LuaScript> = fair_script!("fair_acquire.lua");
static UNLOCK: LazyLock<LuaScript> = fair_script!("fair_unlock.lua");
static FORCE_UNLOCK: LazyLock<LuaScript> = fair_script!("fair_force_unlock.lua");
static LEAVE: LazyLock<LuaScript> = fair_script!("fair_leave.lua");
static HEARTBEAT: LazyLock<LuaScript> = fair_script!("fair_heartbeat.lua");
static NOTIFY: LazyLock<LuaScript> = fair_script!("fair_notify.lua");

/// Every fair script's keys: the lock, the queue, the deadlines.
const KEYS: &[Arg] = &[Arg::Key, Arg::Kept(0), Arg::Kept(1)];

/// Redisson's `RFairLock`: reentrant, and served in arrival order.
pub(crate) static FAIR: Kind = Kind {
    label: "fair",
    kept: &[
        Kept::itself(
            |key| Derived::FairQueue.of(key),
            &["rpush", "$", "x"],
            "`~redisson_lock_queue:*`",
        ),
        Kept::itself(
            |key| Derived::FairTimeouts.of(key),
            &["zadd", "$", "1", "x"],
            "`~redisson_lock_timeout:*`",
        ),
    ],
    queued: true,
    acquire: &Call {
        script: &ACQUIRE,
        keys: KEYS,
        args: &[
            Arg::Channel,
            Arg::Text(UNLOCK_MESSAGE),
            Arg::Publish,
            Arg::Lease,
            Arg::Owner,
            Arg::KeepPlace,
            Arg::Join,
            Arg::Ahead,
        ],
    },
    unlock: &Call {
        script: &UNLOCK,
        keys: KEYS,
        args: &[
            Arg::Channel,
            Arg::Text(UNLOCK_MESSAGE),
            Arg::Publish,
            Arg::Lease,
            Arg::Owner,
            Arg::Retry,
            Arg::Expected,
        ],
    },
    force_unlock: &Call {
        script: &FORCE_UNLOCK,
        keys: KEYS,
        args: TELL_HEAD,
    },
    more_scripts: &[&LEAVE, &HEARTBEAT, &NOTIFY],
    commands: &[
        &["hset", "$key", "f", "1"],
        &["lindex", "$0", "0"],
        &["lpop", "$0"],
        &["rpush", "$0", "f"],
        &["linsert", "$0", "after", "f", "g"],
        &["lrange", "$0", "0", "1"],
        &["lrem", "$0", "0", "f"],
        &["exists", "$0"],
        &["zadd", "$1", "1", "f"],
        &["zrem", "$1", "f"],
        &["zscore", "$1", "f"],
        &["zrangebyscore", "$1", "-inf", "0", "LIMIT", "0", "1"],
        &["del", "$1"],
        &["pubsub", "$count", "$channel"],
        &["time"],
    ],
    ..REENTRANT
};

/// The arguments with which a fair script tells the queue's head: its channel is the
/// lock's followed by `:<owner>`.
const TELL_HEAD: &[Arg] = &[Arg::Channel, Arg::Text(UNLOCK_MESSAGE), Arg::Publish];

/// How long the head of a free fair lock's queue that nobody hears keeps its turn:
/// `UNHEARD_GRACE_MS` in `fair_common.lua`, where the reason is.
pub(crate) const UNHEARD_GRACE: Duration = Duration::from_millis(100);

/// `fair_notify.lua`: looks again at the queue of the fair lock `names` once the grace of
/// an unheard head has passed: drops stale waiters and, if the lock is free, tells the
/// head, or passes it over for the first waiter that hears. True when a head (a new one)
/// still keeps its turn unheard.
pub(crate) async fn notify_queue(mut conn: Conn, names: &LockNames) -> RedisResult<bool> {
    let call = Call {
        script: &NOTIFY,
        keys: KEYS,
        args: TELL_HEAD,
    };
    let kept: i64 = call
        .build(names, &Values::default(), 0)
        .query(&mut conn)
        .await?;
    Ok(kept == 1)
}

/// `fair_leave.lua`: `owner` leaves the fair lock's queue, and a new head is told if the
/// lock is free.
pub(crate) async fn leave_queue(mut conn: Conn, names: &LockNames, owner: &str) -> RedisResult<()> {
    let call = Call {
        script: &LEAVE,
        keys: KEYS,
        args: &[
            Arg::Channel,
            Arg::Text(UNLOCK_MESSAGE),
            Arg::Publish,
            Arg::Owner,
        ],
    };
    let values = Values {
        owner,
        ..Values::default()
    };
    let _was_queued: i64 = call.build(names, &values, 0).query(&mut conn).await?;
    Ok(())
}

/// How far ahead of the Redis server's clock a queued fair waiter's deadline is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PlaceTerms {
    /// For the waiter itself: how long it keeps its place without refreshing it.
    pub(crate) keep_ms: u64,
    /// For each waiter ahead of it in the queue: the `fairLockWaitTimeout` of the Redisson
    /// clients sharing the queue, which each of them subtracts from the deadlines behind
    /// it when it takes the lock or gives up (0: none do).
    pub(crate) per_waiter_ahead_ms: u64,
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

/// `fair_heartbeat.lua` over one batch of fair waiters: for each `(lock, owner)` what
/// became of its place (a kept place's deadline is pushed ahead by `place`).
pub(crate) async fn refresh_places<'a>(
    conn: &mut Conn,
    place: PlaceTerms,
    batch: impl Iterator<Item = (&'a LockNames, &'a str)> + Clone,
) -> RedisResult<Vec<Place>> {
    let (waiters, bytes) = batch.clone().fold((0, 0), |(n, bytes), (names, owner)| {
        (n + 1, bytes + 4 * names.key.len() + 128 + owner.len())
    });
    // Every lock of one client publishes with the same command.
    let publish = batch
        .clone()
        .next()
        .map_or(ChannelKind::Classic.publish(), |(names, _)| {
            names.publish_command()
        });
    let mut call = EvalSha::new(&HEARTBEAT, 3 * waiters, 5 * waiters + 4, bytes);
    for (names, _) in batch.clone() {
        call.arg(&*names.key)
            .arg(&*names.kept[0])
            .arg(&*names.kept[1]);
    }
    call.arg(place.keep_ms)
        .arg(UNLOCK_MESSAGE)
        .arg(publish)
        .arg(place.per_waiter_ahead_ms);
    for (names, owner) in batch {
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
