//! The unlock call: one release of a lock's hold (its kind's script: `unlock.lua`, or
//! `fair_unlock.lua` telling the queue's head, or a read-write lock's), a plain lock's
//! alone or in a batch of many, and what it found.

use std::sync::Arc;

use redis::RedisResult;

use super::{FREED_HEAD_UNHEARD, NOT_A_LOCK, NUMBER_BYTES, PUBLISH_REFUSED};
use crate::protocol::batch::{Batched, Batcher};
use crate::protocol::channels::ChannelKind;
use crate::protocol::conn::Conn;
use crate::protocol::conn::EvalSha;
use crate::protocol::kinds::reentrant::UNLOCK;
use crate::protocol::kinds::Values;
use crate::protocol::names::{LockNames, UNLOCK_MESSAGE};

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
    /// (it may be subscribing yet): it keeps its turn for
    /// [`UNHEARD_GRACE`](crate::protocol::kinds::fair::UNHEARD_GRACE), after which the
    /// client should look again
    /// ([`notify_queue`](crate::protocol::kinds::fair::notify_queue)).
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

/// One call of the kind's unlock script.
pub(crate) struct UnlockCall<'a> {
    pub(crate) names: &'a Arc<LockNames>,
    pub(crate) latch: &'a Arc<str>,
    pub(crate) lease_ms: u64,
    pub(crate) owner: &'a Arc<str>,
    pub(crate) latch_ttl_ms: u64,
    /// Where a release by `unlock.lua` may be batched with others; `None`: sent alone.
    pub(crate) batcher: Option<&'a Arc<Batcher<UnlockItem>>>,
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
    /// `unlock.lua` over `items`, answered as an array (an item sent alone is called with
    /// its kind's shape, answered bare).
    fn call(items: &[Self]) -> EvalSha<'static> {
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
        let mut call = EvalSha::new(&UNLOCK, 2 * items.len(), 3 + 6 * items.len(), bytes);
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
        call
    }
}

impl Batched for UnlockItem {
    type Reply = UnlockOutcome;

    fn key(&self) -> &str {
        &self.names.key
    }

    async fn send(conn: &mut Conn, items: &[Self]) -> RedisResult<Vec<UnlockOutcome>> {
        let found: Vec<i64> = Self::call(items).query(conn).await?;
        Ok(found.into_iter().map(|f| Some(f).into()).collect())
    }

    async fn send_one(conn: &mut Conn, item: &Self) -> RedisResult<UnlockOutcome> {
        let values = Values {
            owner: &item.owner,
            lease_ms: item.lease_ms,
            latch: &item.latch,
            latch_ttl_ms: item.latch_ttl_ms,
            retry: item.retry,
            ..Values::default()
        };
        let call = item.names.kind.unlock.build(&item.names, &values, 0);
        let found: i64 = call.query(conn).await?;
        Ok(Some(found).into())
    }
}

impl UnlockCall<'_> {
    /// `retry`: an earlier try of this request may have run.
    pub(crate) async fn run(&self, mut conn: Conn, retry: bool) -> RedisResult<UnlockOutcome> {
        let kind = self.names.kind;
        if std::ptr::eq(&**kind.unlock.script, &*UNLOCK) {
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
                None => Batched::send_one(&mut conn, &item).await,
            };
        }
        let values = Values {
            owner: self.owner,
            lease_ms: self.lease_ms,
            latch: self.latch,
            latch_ttl_ms: self.latch_ttl_ms,
            retry,
            ..Values::default()
        };
        let found: Option<i64> = kind
            .unlock
            .build(self.names, &values, 0)
            .query(&mut conn)
            .await?;
        Ok(found.into())
    }
}
