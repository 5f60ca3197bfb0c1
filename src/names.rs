//! The Redis key and channel names of one lock, exactly as Redisson derives them.

use std::sync::Arc;

/// Payload published on the unlock channel when a lock becomes free (Redisson's
/// `LockPubSub.UNLOCK_MESSAGE`): wakes one waiter.
pub(crate) const UNLOCK_MESSAGE: &str = "0";

/// Redisson's `RedissonObject.prefixName`: `prefix:{name}`, or `prefix:name` when the name
/// already carries a hash tag, so every derived key stays in the lock key's cluster slot.
fn prefixed(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

/// Every name one lock uses in Redis, computed once per lock handle.
#[derive(Debug)]
pub(crate) struct LockNames {
    /// The lock hash: the configured key prefix followed by the lock name.
    pub(crate) key: Arc<str>,
    /// `redisson_lock__channel:{key}`: where unlocks are announced.
    pub(crate) channel: Arc<str>,
    /// `redisson_unlock_latch:{key}`: joined with `:<request-id>` per unlock request.
    latch_prefix: String,
}

impl LockNames {
    pub(crate) fn new(key_prefix: &str, name: &str) -> Self {
        let key = format!("{key_prefix}{name}");
        LockNames {
            channel: prefixed("redisson_lock__channel", &key).into(),
            latch_prefix: prefixed("redisson_unlock_latch", &key),
            key: key.into(),
        }
    }

    /// The latch key of one unlock request; retries of the request reuse it.
    pub(crate) fn unlock_latch(&self, request_id: &str) -> String {
        format!("{}:{request_id}", self.latch_prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_redisson() {
        let names = LockNames::new("", "order:1001");
        assert_eq!(&*names.key, "order:1001");
        assert_eq!(&*names.channel, "redisson_lock__channel:{order:1001}");
        assert_eq!(
            names.unlock_latch("ab12"),
            "redisson_unlock_latch:{order:1001}:ab12"
        );
    }

    #[test]
    fn hash_tagged_names_keep_their_tag() {
        let names = LockNames::new("app:", "{user42}:cart");
        assert_eq!(&*names.key, "app:{user42}:cart");
        assert_eq!(&*names.channel, "redisson_lock__channel:app:{user42}:cart");
    }
}
