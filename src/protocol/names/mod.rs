//! The Redis key and channel names of one lock, exactly as Redisson derives them: the rules
//! of the public [`layout`], applied once per handle.

use crate::util::lock_metrics::LockMetrics;
use std::sync::Arc;

use crate::protocol::channels::ChannelKind;
use crate::protocol::kinds::{Kind, Side};
use crate::protocol::layout::{self, Derived};
use crate::protocol::slot::key_slot;

/// The first of `names` that a Redis Cluster puts in another hash slot than `key`.
fn first_split(key: &str, names: impl IntoIterator<Item = String>) -> Option<SplitName> {
    let home = key_slot(key.as_bytes());
    names.into_iter().find_map(|name| {
        let slot = key_slot(name.as_bytes());
        (slot != home).then_some(SplitName {
            key_slot: home,
            name,
            slot,
        })
    })
}

/// Every name one lock uses in Redis, computed once per lock handle.
#[derive(Debug, Clone)]
pub(crate) struct LockNames {
    /// What the lock is: its scripts, and the rules of the names below.
    pub(crate) kind: &'static Kind,
    /// The lock hash: the configured key prefix followed by the lock name.
    pub(crate) key: Arc<str>,
    /// Where unlocks are announced (the kind's channel rule): `redisson_lock__channel:{key}`,
    /// or a read-write lock's `redisson_rwlock:{key}`. A fair lock announces on one
    /// channel per waiter instead, this followed by `:<owner>`.
    pub(crate) channel: Arc<str>,
    /// The keys the kind keeps beside the hash, in the order of its `kept` rules.
    pub(crate) kept: Box<[Arc<str>]>,
    /// How unlock messages on `channel` travel: the publish command the scripts get.
    channel_kind: ChannelKind,
    /// On a cluster: a derived name outside the key's slot (see
    /// [`LockNames::split_name`]), which makes the lock unusable there.
    split: Option<SplitName>,
    /// The metrics of the handles with these names (their kind and class).
    pub(crate) metrics: LockMetrics,
}

/// A derived name of a lock that a Redis Cluster would put in another hash slot than the
/// lock key: no script call could name both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SplitName {
    /// The lock key's slot.
    pub(crate) key_slot: u16,
    /// The derived name, and its slot.
    pub(crate) name: String,
    pub(crate) slot: u16,
}

impl LockNames {
    /// The names of the lock `name` of `kind`.
    pub(crate) fn new(kind: &'static Kind, key_prefix: &str, name: &str) -> Self {
        let key = format!("{key_prefix}{name}");
        LockNames {
            kind,
            channel: kind.channel.of(&key).into(),
            kept: kind
                .kept
                .iter()
                .map(|kept| (kept.name)(&key).into())
                .collect(),
            key: key.into(),
            channel_kind: ChannelKind::Classic,
            split: None,
            metrics: LockMetrics::default(),
        }
    }

    /// These names, with the metrics `metrics` (of their handle's class).
    pub(crate) fn with_metrics(mut self, metrics: LockMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// These names, for a client of a Redis Cluster whose unlock messages travel as
    /// `channel_kind` says; checks that every derived name shares the key's slot.
    pub(crate) fn on_cluster(mut self, channel_kind: ChannelKind) -> Self {
        self.channel_kind = channel_kind;
        self.split = self.split_name();
        self
    }

    /// The command the scripts publish unlock messages with: `publish` or `spublish`.
    pub(crate) fn publish_command(&self) -> &'static str {
        self.channel_kind.publish()
    }

    /// On a cluster, a derived name that is not in the key's hash slot.
    pub(crate) fn split(&self) -> Option<&SplitName> {
        self.split.as_ref()
    }

    /// On a Redis Cluster every key of one script call must be in one hash slot: the first
    /// derived name (channel, the kind's kept keys) that is not in the lock key's
    /// slot, with the slot it is in. Only names with braces can split: a `{` but no valid
    /// hash tag (such as `a{b` or `{}x`), or a `}` with no `{` before it; Redisson derives
    /// the same names (redisson#5853).
    /// Computed for cluster clients only: a standalone client never needs a slot.
    fn split_name(&self) -> Option<SplitName> {
        let kept = self.kind.kept.iter().zip(&*self.kept);
        let kept = kept.map(|(rule, name)| (rule.checked_as)(name));
        first_split(
            &self.key,
            std::iter::once(self.channel.to_string()).chain(kept),
        )
    }

    /// The key that remembers the highest fencing token a fenced write to `key` accepted,
    /// in `key`'s cluster slot.
    pub(crate) fn fence_of(key: &str) -> String {
        Derived::Fence.of(key)
    }

    /// The channel on which `owner` hears that it may take the lock: the lock's channel,
    /// shared by all waiters, or for a queued kind the waiter's own, so that an unlock
    /// wakes the head of the queue alone.
    pub(crate) fn wait_channel(&self, owner: &str) -> Arc<str> {
        if self.kind.queued {
            layout::fair_waiter_channel(&self.key, owner).into()
        } else {
            self.channel.clone()
        }
    }

    /// The hash field of the task whose field is `task` (`<client-uuid>:<task-id>`): that
    /// field, followed by the kind's suffix (a write lock's `:write`).
    pub(crate) fn owner_field(&self, task: &Arc<str>) -> Arc<str> {
        match self.kind.side {
            Some(Side::Write) => layout::write_owner(task).into(),
            _ => task.clone(),
        }
    }

    /// For a read lock, the prefix of `owner`'s timeout keys,
    /// `{<key>}:<owner>:rwlock_timeout`; `None` for other kinds.
    pub(crate) fn read_timeouts(&self, owner: &str) -> Option<Arc<str>> {
        (self.kind.side == Some(Side::Read))
            .then(|| layout::read_timeout_prefix(&self.key, owner).into())
    }
}

/// The synchronizers, as the protocol sees them: which names and scripts a call uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SyncKind {
    /// Redisson's `RSemaphore`: a count at the name.
    Semaphore,
    /// Redisson's `RPermitExpirableSemaphore`: a count at the name, and the taken permits'
    /// expiries in a sorted set beside it.
    ExpirableSemaphore,
    /// Redisson's `RCountDownLatch`: a count at the name.
    Latch,
}

impl SyncKind {
    /// The kind as a metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            SyncKind::Semaphore => "semaphore",
            SyncKind::ExpirableSemaphore => "expirable_semaphore",
            SyncKind::Latch => "latch",
        }
    }
}

/// Every name one semaphore, expirable semaphore or count-down latch uses in Redis (see the
/// [`sync`](crate::sync) docs), computed once per handle.
#[derive(Debug)]
pub(crate) struct SyncNames {
    pub(crate) kind: SyncKind,
    /// The count: the configured key prefix followed by the name.
    pub(crate) key: Arc<str>,
    /// An expirable semaphore's `{key}:timeout`: permit id → expiry (ms since the epoch).
    pub(crate) timeouts: Option<Arc<str>>,
    /// `redisson_sc:{key}` for both semaphores, `redisson_countdownlatch__channel__{key}`
    /// for a latch (Redisson writes this one by hand, braces always added).
    pub(crate) channel: Arc<str>,
    /// `redisson_unlock_latch:{key}`: joined with `:<request-id>` per count change sent
    /// with a latch, set by [`SyncNames::with_request_latches`] (see `sync::call`). The lock's
    /// unlock latches' namespace: users given the lock's ACL rules may write there
    /// already, and Redisson reads a latch only under a request id of its own, never
    /// these. Built as the channel is, so that it shares the key's slot whenever the
    /// channel does.
    latch_prefix: Option<String>,
    channel_kind: ChannelKind,
    split: Option<SplitName>,
    /// The metrics of the handles with these names (their kind and class).
    pub(crate) metrics: LockMetrics,
}

impl SyncNames {
    /// These names, with the metrics `metrics` (of their handle's class).
    pub(crate) fn with_metrics(mut self, metrics: LockMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// The names of the synchronizer `name` of kind `kind`.
    pub(crate) fn new(kind: SyncKind, key_prefix: &str, name: &str) -> Self {
        let key = format!("{key_prefix}{name}");
        let (channel, timeouts) = match kind {
            SyncKind::Semaphore => (Derived::SemaphoreChannel.of(&key), None),
            SyncKind::ExpirableSemaphore => (
                Derived::SemaphoreChannel.of(&key),
                Some(layout::permit_timeouts(&key).into()),
            ),
            SyncKind::Latch => (layout::latch_channel(&key), None),
        };
        SyncNames {
            kind,
            latch_prefix: None,
            key: key.into(),
            timeouts,
            channel: channel.into(),
            channel_kind: ChannelKind::Classic,
            split: None,
            metrics: LockMetrics::default(),
        }
    }

    /// The latch key of one count change request, `<prefix>:<request id in 32 hex
    /// digits>`, in the key's slot; retries of the request reuse it. Only the count changes
    /// of a client that follows failovers (a cluster's, a Sentinel's) carry one (see
    /// `sync::call`): `None` elsewhere.
    pub(crate) fn request_latch(&self, request_id: u128) -> Option<Arc<str>> {
        let prefix = self.latch_prefix.as_deref()?;
        Some(format!("{prefix}:{request_id:032x}").into())
    }

    /// These names, with a request latch for each count change: for a client that follows
    /// failovers, which break connections by design (see `sync::call`).
    pub(crate) fn with_request_latches(mut self) -> Self {
        let key = &self.key;
        self.latch_prefix = Some(match self.kind {
            SyncKind::Latch => format!("{}:{{{key}}}", Derived::UnlockLatch.prefix()),
            SyncKind::Semaphore | SyncKind::ExpirableSemaphore => Derived::UnlockLatch.of(key),
        });
        self
    }

    /// These names, for a client of a Redis Cluster whose messages travel as
    /// `channel_kind` says, with request latches; checks that every derived name shares
    /// the key's slot.
    pub(crate) fn on_cluster(mut self, channel_kind: ChannelKind) -> Self {
        self.channel_kind = channel_kind;
        self = self.with_request_latches();
        let mut derived = vec![self.channel.to_string()];
        derived.extend(self.timeouts.as_ref().map(|t| t.to_string()));
        derived.extend(self.request_latch(0).map(|latch| latch.to_string()));
        self.split = first_split(&self.key, derived);
        self
    }

    /// The command the scripts publish with: `publish` or `spublish`.
    pub(crate) fn publish_command(&self) -> &'static str {
        self.channel_kind.publish()
    }

    /// On a cluster, a derived name that is not in the key's hash slot.
    pub(crate) fn split(&self) -> Option<&SplitName> {
        self.split.as_ref()
    }
}

#[cfg(test)]
mod tests;
