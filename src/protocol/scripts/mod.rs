//! The Lua scripts (the `*.lua` files beside this one, compiled in) and typed calls to them.
//!
//! Each call goes out as EVALSHA; `redis::Script` hashes the source once and loads it when
//! Redis answers NOSCRIPT (after a restart or `SCRIPT FLUSH`). The scripts are also loaded
//! when a client connects, so the first lock call does not pay that extra round trip.
//!
//! A plain lock and a fair lock share the hash, the lease and the renewal script; a fair
//! lock's acquire, unlock and force-unlock scripts also keep its waiting queue, and share
//! the helpers of `fair_common.lua`, prepended at build time. A read-write lock has scripts
//! of its own (`read_write`).

use std::sync::{Arc, LazyLock};

use redis::{ErrorKind, RedisError, RedisResult};

use crate::protocol::batch::{send_alone, Batched, Batcher};
use crate::protocol::channels::ChannelKind;
use crate::protocol::conn::RedisConn;
use crate::protocol::evalsha::{EvalSha, LuaScript};
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

mod sync;

pub(crate) use sync::{
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
pub(crate) async fn load_all<C: RedisConn>(conn: &mut C) -> RedisResult<()> {
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
    for script in all.into_iter().chain(sync::all()).chain(read_write::all()) {
        script.script().load_async(conn).await?;
    }
    Ok(())
}

/// The most bytes a number argument takes.
const NUMBER_BYTES: usize = 20;

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

/// How far ahead of the Redis server's clock a queued fair waiter's deadline is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PlaceTerms {
    /// For the waiter itself: how long it keeps its place without refreshing it.
    pub(crate) keep_ms: u64,
    /// For each waiter ahead of it in the queue: the `fairLockWaitTimeout` of the Redisson
    /// clients sharing the queue, which each of them subtracts from the deadlines behind
    /// it when it takes the lock or gives up (0: none do).
    pub(crate) per_waiter_ahead_ms: u64,
}

/// One acquire attempt, on connections of type `C`.
pub(crate) struct AcquireCall<'a, C> {
    pub(crate) names: &'a Arc<LockNames>,
    pub(crate) lease_ms: u64,
    pub(crate) owner: &'a Arc<str>,
    /// Fair locks: join the queue (or refresh the place in it) when the lock is not taken.
    pub(crate) join_queue: bool,
    /// Fair locks: how long a queued waiter keeps its place without refreshing it.
    pub(crate) place: PlaceTerms,
    /// Where a plain lock's acquire may be batched with others; `None`: sent alone.
    pub(crate) batcher: Option<&'a Arc<Batcher<AcquireItem, C>>>,
}

/// What an acquire script answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Acquired or re-entered; a fenced lock's new fencing token.
    Acquired {
        token: Option<u64>,
        /// The owner had no count before: Redis made its field anew. Where the client
        /// still counts a hold of that owner, Redis lost it (see `Holds::add`).
        new_hold: bool,
    },
    /// Not acquired: try again within this many ms at the latest (-1: no bound known).
    RetryWithin(i64),
    /// The lock key is not a lock of this kind; nothing was written.
    NotALock,
}

impl AcquireReply {
    /// An acquire script's integer answer: [`ACQUIRED`], [`REENTERED`], [`NOT_A_LOCK`],
    /// or how long to wait.
    fn from_code(reply: i64) -> Self {
        match reply {
            ACQUIRED => AcquireReply::Acquired {
                token: None,
                new_hold: true,
            },
            REENTERED => AcquireReply::Acquired {
                token: None,
                new_hold: false,
            },
            NOT_A_LOCK => AcquireReply::NotALock,
            wait_ms => AcquireReply::RetryWithin(wait_ms),
        }
    }
}

/// The acquire scripts' answer for a lock taken afresh: the owner had no count (below any
/// PTTL).
const ACQUIRED: i64 = -3;

/// The acquire scripts' answer for a re-entry: the owner's count went up from 1 or more.
const REENTERED: i64 = -6;

/// The batched scripts' answer for a key that is not a lock (below any PTTL).
const NOT_A_LOCK: i64 = -4;

/// `unlock.lua`'s answer when the user may not publish the unlock message.
const PUBLISH_REFUSED: i64 = -5;

/// The last argument of a batched script called for one item alone: the reply comes bare.
const LONE: &str = "1";

/// One plain lock's acquire, as an item of `acquire.lua`.
pub(crate) struct AcquireItem {
    names: Arc<LockNames>,
    lease_ms: u64,
    owner: Arc<str>,
}

impl AcquireItem {
    /// `acquire.lua` over `items`; `lone`: one item, answered bare.
    fn call(items: &[Self], lone: bool) -> EvalSha<'static> {
        let bytes = items
            .iter()
            .map(|item| item.names.key.len() + NUMBER_BYTES + item.owner.len())
            .sum();
        let mut call = EvalSha::new(&ACQUIRE, items.len(), 3 * items.len() + 1, bytes);
        for item in items {
            call.arg(&*item.names.key);
        }
        for item in items {
            call.arg(item.lease_ms).arg(&*item.owner);
        }
        if lone {
            call.arg(LONE);
        }
        call
    }

    fn reply(reply: i64) -> AcquireReply {
        AcquireReply::from_code(reply)
    }
}

impl Batched for AcquireItem {
    type Reply = AcquireReply;

    fn key(&self) -> &str {
        &self.names.key
    }

    async fn send<C: RedisConn>(conn: &mut C, items: &[Self]) -> RedisResult<Vec<AcquireReply>> {
        let replies: Vec<i64> = Self::call(items, false).query(conn).await?;
        Ok(replies.into_iter().map(Self::reply).collect())
    }

    async fn send_one<C: RedisConn>(conn: &mut C, item: &Self) -> RedisResult<AcquireReply> {
        let reply: i64 = Self::call(std::slice::from_ref(item), true)
            .query(conn)
            .await?;
        Ok(Self::reply(reply))
    }
}

impl<C: RedisConn> AcquireCall<'_, C> {
    /// `acquire.lua`, `fenced_acquire.lua`, `fair_acquire.lua`, or a read-write lock's
    /// `read_acquire.lua` or `write_acquire.lua`.
    pub(crate) async fn run(&self, mut conn: C) -> RedisResult<AcquireReply> {
        if let Some((side, _)) = self.names.read_write() {
            return read_write::acquire(&mut conn, self.names, side, self.lease_ms, self.owner)
                .await;
        }
        if let Some(token) = self.names.token_counter() {
            let bytes = self.names.key.len() + token.len() + NUMBER_BYTES + self.owner.len();
            let mut call = EvalSha::new(&FENCED_ACQUIRE, 2, 4, bytes);
            call.arg(&*self.names.key)
                .arg(&**token)
                .arg(self.lease_ms)
                .arg(&**self.owner);
            // The token arrives as a decimal string: exact over the counter's whole range.
            let (acquired, value): (i64, String) = call.query(&mut conn).await?;
            let parsed = |what: &str| {
                value.parse::<i64>().map_err(|_| {
                    RedisError::from((
                        ErrorKind::UnexpectedReturnType,
                        "the fenced acquire answered a malformed number",
                        format!("{what} `{value}`"),
                    ))
                })
            };
            return Ok(match acquired {
                1 | 2 => AcquireReply::Acquired {
                    token: Some(parsed("token")?.unsigned_abs()),
                    new_hold: acquired == 1,
                },
                _ => AcquireReply::RetryWithin(parsed("pttl")?),
            });
        }
        let Some(queue) = self.names.queue() else {
            let item = AcquireItem {
                names: self.names.clone(),
                lease_ms: self.lease_ms,
                owner: self.owner.clone(),
            };
            return match self.batcher {
                Some(batcher) => batcher.call(conn, item).await,
                None => send_alone(&mut conn, item).await,
            };
        };
        let mut call = fair_call(&FAIR_ACQUIRE, self.names, queue, &[], 4);
        call.arg(self.lease_ms)
            .arg(&**self.owner)
            .arg(self.place.keep_ms)
            .arg(if self.join_queue { "queue" } else { "try" })
            .arg(self.place.per_waiter_ahead_ms);
        let reply: i64 = call.query(&mut conn).await?;
        Ok(AcquireReply::from_code(reply))
    }
}

/// What the unlock script found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnlockOutcome {
    /// The owner held nothing.
    NotHeld,
    /// One hold was released and others remain.
    StillHeld,
    /// The last hold was released; the lock is free and one waiter was told.
    Freed,
    /// The last hold of a fair lock was released, and the head of its queue did not hear it
    /// (it may be subscribing yet): it keeps its turn for [`UNHEARD_GRACE`], after which
    /// the client should look again ([`notify_queue`]).
    FreedHeadUnheard,
    /// The key is not a lock; nothing was written.
    NotALock,
    /// The user may not publish the unlock message; nothing was written (the lock is still
    /// held).
    PublishRefused,
}

impl From<Option<i64>> for UnlockOutcome {
    fn from(found: Option<i64>) -> Self {
        match found {
            None | Some(-1) => UnlockOutcome::NotHeld,
            Some(0) => UnlockOutcome::StillHeld,
            Some(NOT_A_LOCK) => UnlockOutcome::NotALock,
            Some(PUBLISH_REFUSED) => UnlockOutcome::PublishRefused,
            Some(FREED_HEAD_UNHEARD) => UnlockOutcome::FreedHeadUnheard,
            Some(_) => UnlockOutcome::Freed,
        }
    }
}

/// One call of `unlock.lua`, `fair_unlock.lua` or a read-write lock's unlock script, on
/// connections of type `C`.
pub(crate) struct UnlockCall<'a, C> {
    pub(crate) names: &'a Arc<LockNames>,
    pub(crate) latch: &'a Arc<str>,
    pub(crate) lease_ms: u64,
    pub(crate) owner: &'a Arc<str>,
    pub(crate) latch_ttl_ms: u64,
    /// Where a plain lock's release may be batched with others; `None`: sent alone.
    pub(crate) batcher: Option<&'a Arc<Batcher<UnlockItem, C>>>,
}

/// One plain lock's release, as an item of `unlock.lua`.
pub(crate) struct UnlockItem {
    names: Arc<LockNames>,
    latch: Arc<str>,
    retry: bool,
    lease_ms: u64,
    owner: Arc<str>,
    latch_ttl_ms: u64,
}

impl UnlockItem {
    /// `unlock.lua` over `items`; `lone`: one item, answered bare.
    fn call(items: &[Self], lone: bool) -> EvalSha<'static> {
        let bytes = 1
            + NUMBER_BYTES
            + items
                .iter()
                .map(|item| {
                    let names = &item.names;
                    names.key.len()
                        + names.channel.len()
                        + item.latch.len()
                        + NUMBER_BYTES
                        + item.owner.len()
                        + 1
                })
                .sum::<usize>();
        let mut call = EvalSha::new(&UNLOCK, 2 * items.len(), 4 + 6 * items.len(), bytes);
        for item in items {
            call.arg(&*item.names.key).arg(&*item.latch);
        }
        // Every item of one client asks for the same latch lifetime; the longest is safe.
        let latch_ttl_ms = items.iter().map(|i| i.latch_ttl_ms).max().unwrap_or(0);
        // Every lock of one client publishes with the same command.
        let publish = items
            .first()
            .map_or(ChannelKind::Classic.publish(), |item| {
                item.names.publish_command()
            });
        call.arg(UNLOCK_MESSAGE).arg(latch_ttl_ms).arg(publish);
        for item in items {
            call.arg(&*item.names.channel)
                .arg(item.lease_ms)
                .arg(&*item.owner)
                .arg(if item.retry { "1" } else { "0" });
        }
        if lone {
            call.arg(LONE);
        }
        call
    }
}

impl Batched for UnlockItem {
    type Reply = UnlockOutcome;

    fn key(&self) -> &str {
        &self.names.key
    }

    async fn send<C: RedisConn>(conn: &mut C, items: &[Self]) -> RedisResult<Vec<UnlockOutcome>> {
        let found: Vec<i64> = Self::call(items, false).query(conn).await?;
        Ok(found.into_iter().map(|f| Some(f).into()).collect())
    }

    async fn send_one<C: RedisConn>(conn: &mut C, item: &Self) -> RedisResult<UnlockOutcome> {
        let found: i64 = Self::call(std::slice::from_ref(item), true)
            .query(conn)
            .await?;
        Ok(Some(found).into())
    }
}

impl<C: RedisConn> UnlockCall<'_, C> {
    /// `retry`: an earlier try of this request may have run.
    pub(crate) async fn run(&self, mut conn: C, retry: bool) -> RedisResult<UnlockOutcome> {
        if let Some((side, rw)) = self.names.read_write() {
            return read_write::unlock(conn, self, side, rw, retry).await;
        }
        let Some(queue) = self.names.queue() else {
            let item = UnlockItem {
                names: self.names.clone(),
                latch: self.latch.clone(),
                retry,
                lease_ms: self.lease_ms,
                owner: self.owner.clone(),
                latch_ttl_ms: self.latch_ttl_ms,
            };
            return match self.batcher {
                Some(batcher) => batcher.call(conn, item).await,
                None => send_alone(&mut conn, item).await,
            };
        };
        let mut call = fair_call(&FAIR_UNLOCK, self.names, queue, &[self.latch], 3);
        call.arg(self.lease_ms)
            .arg(&**self.owner)
            .arg(self.latch_ttl_ms);
        let found: Option<i64> = call.query(&mut conn).await?;
        Ok(found.into())
    }
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
pub(crate) async fn force_unlock<C: RedisConn>(
    mut conn: C,
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
pub(crate) async fn notify_queue<C: RedisConn>(
    mut conn: C,
    names: &LockNames,
) -> RedisResult<bool> {
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
pub(crate) async fn leave_queue<C: RedisConn>(
    mut conn: C,
    names: &LockNames,
    owner: &str,
) -> RedisResult<()> {
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
pub(crate) async fn renew<'a, C: RedisConn>(
    conn: &mut C,
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
pub(crate) async fn refresh_places<'a, C: RedisConn>(
    conn: &mut C,
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
pub(crate) async fn fenced_set<C: RedisConn>(
    mut conn: C,
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
pub(crate) async fn fenced_raise<C: RedisConn>(
    mut conn: C,
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
pub(crate) async fn refused_checks<C: RedisConn>(
    conn: &mut C,
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
pub(crate) async fn inspect<C: RedisConn>(
    mut conn: C,
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
pub(crate) async fn still_held<'a, C: RedisConn>(
    conn: &mut C,
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
