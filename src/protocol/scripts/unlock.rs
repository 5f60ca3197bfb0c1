//! The unlock call: one release of a lock's hold (its kind's script: `unlock.lua`, or
//! `fair_unlock.lua` telling the queue's head, or a read-write lock's), a plain lock's
//! alone or in a batch of many, and what it found.
//!
//! A retried release is told apart from a new one without a latch key: every call says how
//! many holds its owner should count before it ([`UnlockCall::expected`]), and a retry that
//! finds one fewer answers as its earlier try did, writing nothing. `unlock.lua`'s header
//! sets the rule out; [`crate::locks::release`] what the client makes of
//! [`UnlockOutcome::Gone`].

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
    /// A retry of the owner's last release found its field gone: an earlier try of it may
    /// have freed the lock, or found it gone already. Redis cannot tell which.
    Gone,
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
            Some(GONE) => UnlockOutcome::Gone,
            Some(0) => UnlockOutcome::StillHeld,
            Some(NOT_A_LOCK) => UnlockOutcome::NotALock,
            Some(PUBLISH_REFUSED) => UnlockOutcome::PublishRefused,
            Some(FREED_HEAD_UNHEARD) => UnlockOutcome::FreedHeadUnheard,
            Some(_) => UnlockOutcome::Freed,
        }
    }
}

/// The unlock scripts' answer for [`UnlockOutcome::Gone`].
const GONE: i64 = -2;

/// One call of the kind's unlock script.
pub(crate) struct UnlockCall<'a> {
    pub(crate) names: &'a Arc<LockNames>,
    pub(crate) lease_ms: u64,
    pub(crate) owner: &'a Arc<str>,
    /// The holds the owner should count before this release: one for it, one for each of
    /// the owner's guards that stay. A retry finding fewer knows an earlier try ran.
    pub(crate) expected: u32,
    /// Where a release by `unlock.lua` may be batched with others; `None`: sent alone.
    pub(crate) batcher: Option<&'a Arc<Batcher<UnlockItem>>>,
}

/// One plain lock's release, as an item of `unlock.lua`.
pub(crate) struct UnlockItem {
    names: Arc<LockNames>,
    retry: bool,
    expected: u32,
    lease_ms: u64,
    owner: Arc<str>,
}

impl UnlockItem {
    /// The item's arguments after its key: channel, lease, owner, retry, expected.
    #[inline]
    fn release(&self, call: &mut EvalSha<'static>) {
        call.arg(&*self.names.channel)
            .arg(self.lease_ms)
            .arg(&*self.owner)
            .arg(if self.retry { "1" } else { "0" })
            .arg(self.expected);
    }
}

impl Batched for UnlockItem {
    type Reply = UnlockOutcome;

    fn key(&self) -> &str {
        &self.names.key
    }

    /// `unlock.lua` over `items`, the first `declared` declared; `lone`: one item,
    /// answered bare. Written out rather than built from the kind's shape
    /// ([`Call::build`](crate::protocol::kinds::Call::build)), which it equals for one item
    /// (tested): this is the lock's hot path.
    #[inline]
    fn call(items: &[Self], declared: usize, lone: bool) -> EvalSha<'static> {
        let bytes = 1 + items
            .iter()
            .map(|item| {
                let names = &item.names;
                names.key.len() + names.channel.len() + 2 * NUMBER_BYTES + item.owner.len() + 1
            })
            .sum::<usize>();
        let mut call = EvalSha::new(&UNLOCK, declared, 3 + 6 * items.len(), bytes);
        let (named, passed) = items.split_at(declared);
        for item in named {
            call.arg(&*item.names.key);
        }
        // Every lock of one client publishes with the same command.
        let publish = items
            .first()
            .map_or(ChannelKind::Classic.publish(), |item| {
                item.names.publish_command()
            });
        call.arg(UNLOCK_MESSAGE).arg(publish);
        for item in named {
            item.release(&mut call);
        }
        for item in passed {
            item.release(call.arg(&*item.names.key));
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
                retry,
                expected: self.expected,
                lease_ms: self.lease_ms,
                owner: self.owner.clone(),
            };
            return match self.batcher {
                Some(batcher) => batcher.call(conn, item).await,
                None => batch::send_one(&mut conn, &item).await,
            };
        }
        let values = Values {
            owner: self.owner,
            lease_ms: self.lease_ms,
            retry,
            expected: self.expected,
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
        let item = UnlockItem {
            names: names.clone(),
            retry: true,
            expected: 3,
            lease_ms: 30_000,
            owner: "c:7".into(),
        };
        let values = Values {
            owner: "c:7",
            lease_ms: 30_000,
            retry: true,
            expected: 3,
            ..Values::default()
        };
        assert_eq!(
            UnlockItem::call(std::slice::from_ref(&item), 1, true).packed(),
            REENTRANT.unlock.build(&names, &values, 0).packed()
        );
    }
}
