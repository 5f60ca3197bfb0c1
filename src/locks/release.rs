//! Releasing one hold: the unlock script, retried so that a retry never releases a second
//! hold.
//!
//! # Retries without a latch
//!
//! A try whose reply is lost (a response timeout, a dropped connection) may have run, and
//! is sent again. Redisson makes the retry safe with a latch: every unlock request writes
//! its answer to a key of its own (`redisson_unlock_latch:{<name>}:<request id>`, 3.24.1)
//! for a retry to read, and deletes it afterwards. This crate's releases write no such key:
//! the client knows how many holds its owner has, and every try says how many Redis should
//! count before the release, `expected`: one for this release, and one for each of the
//! owner's guards on the lock that stay (read from the hold registry when the release is
//! made). A retry compares the count it finds (`unlock.lua`'s header has the rule for
//! every unlock script):
//!
//! - **a nested release** (`expected` > 1): a count of at least `expected` means no earlier
//!   try ran, and the retry releases; a lower count is its own earlier try's work, and the
//!   retry answers "still held", as that try did, writing nothing. The owner's field gone
//!   means the lock was lost: reported, as before.
//! - **a last release** (`expected` = 1): a count means no earlier try ran, and the retry
//!   releases. The field gone cannot tell "an earlier try freed it" from "it was lost before
//!   that try ran" ([`UnlockOutcome::Gone`]). When an earlier try may have run (its reply was
//!   lost rather than never sent), the release counts as done, as a permit's release does
//!   (`sync::permit`); when none can have run (it never reached Redis), the lock was lost,
//!   and that is reported. A guard's release is only sent for a hold its record says is
//!   alive (its validity deadline, from the last confirmed acquire or renewal, not passed).
//!
//! What remains different from a latch: a last release whose try ran and whose reply was
//! lost, where that try found the lock already gone (it expired in the moment between the
//! release's start and the try's run, or was deleted behind the client's back: a force
//! unlock, a flush, a failover that lost the write), reports "freed" where the latch
//! reported the loss. And on a Redis Cluster, where every try is treated as a retry (the
//! cluster connection may resend a command whose reply it lost), a first try of a last
//! release finding the field gone reports the loss even if such a resend had freed the
//! lock.
//!
//! Two releases of one owner's guards on one lock can be on their way at once (guards of
//! one task released from two tasks). Counting only the guards that stay, the one made
//! second would expect one hold too few: if its first try ran and lost its reply, and its
//! retry ran before the other release, the retry would release a second hold, and the
//! other release would then take a staying guard's count. So `expected` counts the
//! owner's releases on their way (this one among them, as the hold registry counts them)
//! besides the guards that stay: a retry then errs towards writing nothing, which leaves
//! at worst a count that the owner's last release takes back (see `locks::guard`).
//!
//! Force unlocks take no count: they delete whatever is there, and are idempotent as they
//! are.
//!
//! On a Redis Cluster a release refused for a topology change (a slot on the move, a master
//! failing over: the script certainly did not run) is sent again after the retry backoff
//! for up to [`TOPOLOGY_PATIENCE`](crate::transport::calls::TOPOLOGY_PATIENCE): an unlock during a migration or a failover costs time,
//! not an error.

use std::sync::Arc;

use crate::client_core::Core;
use crate::error::{channel_missing, Error, Result};
use crate::holds::HoldId;
use crate::protocol::conn::Conn;
use crate::protocol::names::LockNames;
use crate::protocol::scripts::{UnlockCall, UnlockOutcome};
use crate::transport::calls::{Retry, Road};
use crate::transport::explain;

/// What a release found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The owner held nothing.
    NotHeld,
    /// One hold was released and others remain.
    StillHeld,
    /// The last hold was released; the lock is free and one waiter was told.
    Freed,
}

/// One release request of `owner`'s hold on a lock.
pub(crate) struct Release {
    core: Arc<Core>,
    names: Arc<LockNames>,
    owner: Arc<str>,
    lease_ms: u64,
    /// The holds the owner should count before this release (see the module docs).
    expected: u32,
    /// The connection to send on instead of the shared one (see [`Release::pinned_to`]).
    pinned: Option<Conn>,
}

impl Release {
    /// `lease_ms` is re-applied to the lock if holds remain after this one; 0 leaves its
    /// TTL as it is.
    ///
    /// Made once the released guard has let go of its hold (or, for an undone acquire,
    /// with no guard for it): the owner's guards that stay on the lock, if any, are its
    /// live hold's, and Redis should count them and every release of the owner on its way
    /// (at least this one).
    pub(crate) fn new(core: Arc<Core>, names: Arc<LockNames>, id: &HoldId, lease_ms: u64) -> Self {
        let owner = id.owner.clone();
        let staying = core.holds.live(id).map_or(0, |hold| hold.guard_count());
        let releasing = core.holds.releases_on_their_way(id).max(1);
        let expected = u32::try_from(releasing)
            .unwrap_or(u32::MAX)
            .saturating_add(staying);
        Release {
            core,
            names,
            owner,
            lease_ms,
            expected,
            pinned: None,
        }
    }

    /// Sends the request on `conn` (when given) rather than the shared connection: to undo
    /// an acquire sent there, which Redis may not have run yet; on another connection the
    /// undo could overtake it.
    pub(crate) fn pinned_to(mut self, conn: Option<Conn>) -> Self {
        self.pinned = conn;
        self
    }

    fn call(&self) -> UnlockCall<'_> {
        UnlockCall {
            names: &self.names,
            lease_ms: self.lease_ms,
            owner: &self.owner,
            expected: self.expected,
            // A pinned request must go out on its own connection, right behind what it
            // follows there.
            batcher: self.pinned.is_none().then_some(&self.core.releases),
        }
    }

    /// Runs the request, retrying failures to reach Redis.
    ///
    /// # Errors
    /// A connection error after the retries; [`Error::NotALock`] when the key is no lock
    /// any more, and [`Error::PermissionDenied`] when the user may not publish the unlock
    /// message or reach a key (nothing was written then: the lock stays until its lease
    /// runs out); [`Error::Rejected`] for any other refusal.
    pub(crate) async fn run(self) -> Result<Released> {
        let call = self.call();
        // On a cluster every try is a retry, the first too: a command whose reply was lost
        // may have run (redis-rs reconnects and re-reads the slot map under it).
        let connections = &self.core.connections;
        let cluster = connections.is_cluster();
        let road = Road::new(Retry::Always)
            .on(self.pinned.clone())
            .through_topology_changes(connections);
        let outcome = connections
            .call(road, |conn, tries| call.run(conn, cluster || tries > 0))
            .await;
        match outcome.result {
            Ok(UnlockOutcome::NotHeld) => Ok(Released::NotHeld),
            // An earlier try may have freed it (see the module docs).
            Ok(UnlockOutcome::Gone) if outcome.earlier_may_have_run => Ok(Released::Freed),
            Ok(UnlockOutcome::Gone) => Ok(Released::NotHeld),
            Ok(UnlockOutcome::StillHeld) => Ok(Released::StillHeld),
            Ok(UnlockOutcome::Freed) => Ok(Released::Freed),
            Ok(UnlockOutcome::FreedHeadUnheard) => {
                crate::locks::fair::look_again_after_grace(&self.core, &self.names);
                Ok(Released::Freed)
            }
            Ok(UnlockOutcome::NotALock) => {
                Err(explain::not_a_lock(connections, self.names.key.to_string()).await)
            }
            Ok(UnlockOutcome::PublishRefused) => Err(Error::PermissionDenied {
                operation: "unlocking",
                target: self.names.key.to_string(),
                missing: channel_missing(
                    &self.names.publish_command().to_uppercase(),
                    &self.names.channel,
                ),
            }),
            Err(e) => Err(explain::explain(connections, "unlocking", &self.names, e).await),
        }
    }

    /// One try, ignoring the outcome: for undoing an acquire whose reply was lost.
    pub(crate) async fn run_once(self) {
        let conn = match &self.pinned {
            Some(conn) => Some(conn.clone()),
            None => self.core.connections.shared().await.ok().map(|s| s.conn),
        };
        if let Some(conn) = conn {
            let retry = self.core.connections.is_cluster();
            if let Err(e) = self.call().run(conn, retry).await {
                tracing::debug!(lock = %self.names.key, error = %e, "could not undo an acquire");
            }
        }
    }
}
