//! Redisson's `RLock`: the hash and its channel only. Its acquires and releases are batched
//! (`acquire.lua` and `unlock.lua` take many locks), and written out by hand on that hot
//! path (`scripts::acquire` and `scripts::unlock`, tested equal to the shapes here, which
//! are those of one lock alone).

use std::sync::LazyLock;

use super::{Arg, Call, Kind};
use crate::protocol::conn::LuaScript;
use crate::protocol::layout::{Derived, UNLOCK_MESSAGE};
use crate::protocol::scripts::script;

pub(crate) static ACQUIRE: LazyLock<LuaScript> = script!("acquire.lua", "lock_common.lua");
pub(crate) static UNLOCK: LazyLock<LuaScript> = script!("unlock.lua");
static FORCE_UNLOCK: LazyLock<LuaScript> = script!("force_unlock.lua", "lock_common.lua");
static INSPECT: LazyLock<LuaScript> = script!("inspect.lua", "lock_common.lua");

/// Redisson's `RLock`: reentrant, and a release wakes any one waiter. The other kinds
/// take what they do not say from it.
pub(crate) static REENTRANT: Kind = Kind {
    label: "reentrant",
    channel: Derived::UnlockChannel,
    kept: &[],
    queued: false,
    side: None,
    fenced: false,
    // The batched scripts, as called for one lock alone (the trailing "1").
    acquire: &Call {
        script: &ACQUIRE,
        keys: &[Arg::Key],
        args: &[Arg::Lease, Arg::Owner, Arg::Text("1")],
    },
    unlock: &Call {
        script: &UNLOCK,
        keys: &[Arg::Key],
        args: &[
            Arg::Text(UNLOCK_MESSAGE),
            Arg::Publish,
            Arg::Channel,
            Arg::Lease,
            Arg::Owner,
            Arg::Retry,
            Arg::Expected,
            Arg::Text("1"),
        ],
    },
    force_unlock: &Call {
        script: &FORCE_UNLOCK,
        keys: &[Arg::Key],
        args: &[Arg::Channel, Arg::Text(UNLOCK_MESSAGE), Arg::Publish],
    },
    inspect: &Call {
        script: &INSPECT,
        keys: &[Arg::Key],
        args: &[Arg::Owner],
    },
    more_scripts: &[],
    commands: &[],
};
