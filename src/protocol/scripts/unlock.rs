//! The unlock call: one release of a lock's hold (its kind's script: `unlock.lua`, or
//! `fair_unlock.lua` telling the queue's head, or a read-write lock's), a plain lock's
//! alone or in a batch of many, and what it found.

use std::sync::Arc;

use redis::RedisResult;

use super::{FREED_HEAD_UNHEARD, LONE, NOT_A_LOCK, PUBLISH_REFUSED};
use crate::protocol::batch::{self, Batched, Batcher};
use crate::protocol::channels::ChannelKind;
use crate::protocol::conn::{Conn, EvalSha, NUMBER_BYTES};
use crate::protocol::kinds::reentrant::UNLOCK;
use crate::protocol::kinds::Values;
use crate::protocol::layout::UNLOCK_MESSAGE;
use crate::protocol::names::LockNames;

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

impl Batched for UnlockItem {
    type Reply = UnlockOutcome;

    fn key(&self) -> &str {
        &self.names.key
    }

    /// `unlock.lua` over `items`; `lone`: one item, answered bare. Written out rather than
    /// built from the kind's shape ([`Call::build`](crate::protocol::kinds::Call::build)),
    /// which it equals for one item (tested): this is the lock's hot path.
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

    fn reply(code: i64) -> UnlockOutcome {
        Some(code).into()
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
                None => batch::send_one(&mut conn, &item).await,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::kinds::reentrant::REENTRANT;

    /// The hot path's lone release is the call the plain lock's kind describes.
    #[test]
    fn a_lone_release_is_the_kinds_call() {
        let names = Arc::new(LockNames::new(&REENTRANT, "app:", "jobs"));
        let latch = names.unlock_latch(7);
        let item = UnlockItem {
            names: names.clone(),
            latch: latch.clone(),
            retry: true,
            lease_ms: 30_000,
            owner: "c:7".into(),
            latch_ttl_ms: 5_000,
        };
        let values = Values {
            owner: "c:7",
            lease_ms: 30_000,
            latch: &latch,
            latch_ttl_ms: 5_000,
            retry: true,
            ..Values::default()
        };
        assert_eq!(
            UnlockItem::call(std::slice::from_ref(&item), true).packed(),
            REENTRANT.unlock.build(&names, &values, 0).packed()
        );
    }
}
