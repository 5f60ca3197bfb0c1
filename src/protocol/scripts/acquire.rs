//! The acquire call: one lock's acquire script (its kind's), a plain lock's alone or in a
//! batch of many, and what it answered.

use std::sync::Arc;

use redis::{ErrorKind, RedisError, RedisResult};

use super::{LONE, NOT_A_LOCK};
use crate::protocol::batch::{self, Batched, Batcher};
use crate::protocol::conn::{Conn, EvalSha, NUMBER_BYTES};
use crate::protocol::kinds::fair::PlaceTerms;
use crate::protocol::kinds::reentrant::ACQUIRE;
use crate::protocol::kinds::Values;
use crate::protocol::names::LockNames;

/// One acquire attempt.
pub(crate) struct AcquireCall<'a> {
    pub(crate) names: &'a Arc<LockNames>,
    pub(crate) lease_ms: u64,
    pub(crate) owner: &'a Arc<str>,
    /// Fair locks: join the queue (or refresh the place in it) when the lock is not taken.
    pub(crate) join_queue: bool,
    /// Fair locks: how long a queued waiter keeps its place without refreshing it.
    pub(crate) place: PlaceTerms,
    /// Where a plain lock's acquire (`acquire.lua`) may be batched with others; `None`:
    /// sent alone.
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

impl Batched for AcquireItem {
    type Reply = AcquireReply;

    fn key(&self) -> &str {
        &self.names.key
    }

    /// `acquire.lua` over `items`, the first `declared` declared; `lone`: one item,
    /// answered bare. Written out rather than built from the kind's shape
    /// ([`Call::build`](crate::protocol::kinds::Call::build)), which it equals for one item
    /// (tested): this is the lock's hot path.
    #[inline]
    fn call(items: &[Self], declared: usize, lone: bool) -> EvalSha<'static> {
        let bytes = items
            .iter()
            .map(|item| item.names.key.len() + NUMBER_BYTES + item.owner.len())
            .sum();
        let mut call = EvalSha::new(&ACQUIRE, declared, 3 * items.len() + 1, bytes);
        let (named, passed) = items.split_at(declared);
        for item in named {
            call.arg(&*item.names.key);
        }
        for item in named {
            call.arg(item.lease_ms).arg(&*item.owner);
        }
        for item in passed {
            call.arg(&*item.names.key)
                .arg(item.lease_ms)
                .arg(&*item.owner);
        }
        if lone {
            call.arg(LONE);
        }
        call
    }

    /// An acquire script's integer answer: [`ACQUIRED`], [`REENTERED`], [`NOT_A_LOCK`],
    /// or how long to wait.
    fn reply(code: i64) -> AcquireReply {
        match code {
            ACQUIRED | REENTERED => AcquireReply::Acquired {
                token: None,
                new_hold: code == ACQUIRED,
            },
            NOT_A_LOCK => AcquireReply::NotALock,
            wait_ms => AcquireReply::RetryWithin(wait_ms),
        }
    }
}

impl AcquireCall<'_> {
    /// The kind's acquire script: `acquire.lua` (batched where a batcher is given),
    /// `fenced_acquire.lua`, `fair_acquire.lua`, `read_acquire.lua` or `write_acquire.lua`.
    pub(crate) async fn run(&self, mut conn: Conn) -> RedisResult<AcquireReply> {
        let item = || AcquireItem {
            names: self.names.clone(),
            lease_ms: self.lease_ms,
            owner: self.owner.clone(),
        };
        let kind = self.names.kind;
        if std::ptr::eq(&**kind.acquire.script, &*ACQUIRE) {
            return match self.batcher {
                Some(batcher) => batcher.call(conn, item()).await,
                None => batch::send_one(&mut conn, &item()).await,
            };
        }
        let values = Values {
            owner: self.owner,
            lease_ms: self.lease_ms,
            join: self.join_queue,
            place: self.place,
            ..Values::default()
        };
        let call = kind.acquire.build(self.names, &values, 0);
        let reply: redis::Value = call.query(&mut conn).await?;
        acquired(reply)
    }
}

/// What an acquire script answered: a code, or a fenced acquire's `{code, number}` (the
/// token, or the PTTL), the number a decimal string, exact over the counter's whole range.
fn acquired(reply: redis::Value) -> RedisResult<AcquireReply> {
    let (code, value): (i64, String) = match reply {
        redis::Value::Int(code) => return Ok(AcquireItem::reply(code)),
        reply => redis::from_redis_value(reply)?,
    };
    let parsed = |what: &str| {
        value.parse::<i64>().map_err(|_| {
            RedisError::from((
                ErrorKind::UnexpectedReturnType,
                "the fenced acquire answered a malformed number",
                format!("{what} `{value}`"),
            ))
        })
    };
    Ok(match code {
        1 | 2 => AcquireReply::Acquired {
            token: Some(parsed("token")?.unsigned_abs()),
            new_hold: code == 1,
        },
        _ => AcquireReply::RetryWithin(parsed("pttl")?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kinds::reentrant::REENTRANT;

    /// The hot path's lone acquire is the call the plain lock's kind describes.
    #[test]
    fn a_lone_acquire_is_the_kinds_call() {
        let names = Arc::new(LockNames::new(&REENTRANT, "app:", "jobs"));
        let item = AcquireItem {
            names: names.clone(),
            lease_ms: 30_000,
            owner: "c:7".into(),
        };
        let values = Values {
            owner: "c:7",
            lease_ms: 30_000,
            ..Values::default()
        };
        assert_eq!(
            AcquireItem::call(std::slice::from_ref(&item), 1, true).packed(),
            REENTRANT.acquire.build(&names, &values, 0).packed()
        );
    }
}
