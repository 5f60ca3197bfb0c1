//! How unlock messages travel: classic pub/sub (`PUBLISH`/`SUBSCRIBE`) or sharded pub/sub
//! (`SPUBLISH`/`SSUBSCRIBE`, Redis 7.0, cluster only), Redisson's `shardedSubscriptionMode`
//! `OFF` and `ON`. Both ends of one lock must use the same kind: a sharded subscriber does not
//! hear `PUBLISH`, nor a classic one `SPUBLISH`.

/// Which pub/sub commands a client's scripts publish with and its listener subscribes with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum ChannelKind {
    /// `PUBLISH`, `SUBSCRIBE`, `PUBSUB NUMSUB`: the default, and the only kind off a cluster.
    #[default]
    Classic,
    /// `SPUBLISH`, `SSUBSCRIBE`, `PUBSUB SHARDNUMSUB`: the message stays on the shard that owns
    /// the channel's slot instead of crossing the cluster bus to every node.
    Sharded,
}

impl ChannelKind {
    /// The word of this kind: `classic`'s or `sharded`'s.
    fn pick(self, classic: &'static str, sharded: &'static str) -> &'static str {
        match self {
            ChannelKind::Classic => classic,
            ChannelKind::Sharded => sharded,
        }
    }

    /// The publish command, as the scripts take it (an argument, as in Redisson).
    pub(crate) fn publish(self) -> &'static str {
        self.pick("publish", "spublish")
    }

    /// The command that subscribes to channels of this kind.
    pub(crate) fn subscribe(self) -> &'static str {
        self.pick("SUBSCRIBE", "SSUBSCRIBE")
    }

    /// The command that unsubscribes from channels of this kind.
    pub(crate) fn unsubscribe(self) -> &'static str {
        self.pick("UNSUBSCRIBE", "SUNSUBSCRIBE")
    }

    /// The `PUBSUB` subcommand that counts a channel's subscribers on one node.
    pub(crate) fn count_subscribers(self) -> &'static str {
        self.pick("numsub", "shardnumsub")
    }
}
