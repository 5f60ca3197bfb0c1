//! The acquire call: one lock's acquire script (plain, fenced, fair; read and write in
//! [`read_write`](super::read_write)), alone or in a batch of many, and what it answered.

use std::sync::Arc;

use redis::{ErrorKind, RedisError, RedisResult};

use super::{fair_call, read_write, LONE, NOT_A_LOCK, NUMBER_BYTES};
use super::{ACQUIRE, FAIR_ACQUIRE, FENCED_ACQUIRE};
use crate::protocol::batch::{Batched, Batcher};
use crate::protocol::conn::Conn;
use crate::protocol::conn::EvalSha;
use crate::protocol::names::LockNames;

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

/// One acquire attempt.
pub(crate) struct AcquireCall<'a> {
    pub(crate) names: &'a Arc<LockNames>,
    pub(crate) lease_ms: u64,
    pub(crate) owner: &'a Arc<str>,
    /// Fair locks: join the queue (or refresh the place in it) when the lock is not taken.
    pub(crate) join_queue: bool,
    /// Fair locks: how long a queued waiter keeps its place without refreshing it.
    pub(crate) place: PlaceTerms,
    /// Where a plain lock's acquire may be batched with others; `None`: sent alone.
    pub(crate) batcher: Option<&'a Arc<Batcher<AcquireItem>>>,
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
    pub(super) fn from_code(reply: i64) -> Self {
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

    async fn send(conn: &mut Conn, items: &[Self]) -> RedisResult<Vec<AcquireReply>> {
        let replies: Vec<i64> = Self::call(items, false).query(conn).await?;
        Ok(replies.into_iter().map(Self::reply).collect())
    }

    async fn send_one(conn: &mut Conn, item: &Self) -> RedisResult<AcquireReply> {
        let reply: i64 = Self::call(std::slice::from_ref(item), true)
            .query(conn)
            .await?;
        Ok(Self::reply(reply))
    }
}

impl AcquireCall<'_> {
    /// `acquire.lua`, `fenced_acquire.lua`, `fair_acquire.lua`, or a read-write lock's
    /// `read_acquire.lua` or `write_acquire.lua`.
    pub(crate) async fn run(&self, mut conn: Conn) -> RedisResult<AcquireReply> {
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
                None => Batched::send_one(&mut conn, &item).await,
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
