//! Releasing one hold: the unlock script, retried idempotently.
//!
//! Each release is one request with a random id. Every try of it carries the same latch key,
//! so a retry after a lost reply gets the first try's answer instead of releasing a second
//! hold (Redisson's unlock latch, 3.24.1). The latch is deleted once the answer is in, in a
//! batch with others ([`crate::services::latches`]).
//!
//! On a Redis Cluster a release refused for a topology change (a slot on the move, a master
//! failing over: the script certainly did not run) is sent again after the retry backoff
//! for up to [`TOPOLOGY_PATIENCE`], within the latch's lifetime: an unlock during a
//! migration or a failover costs time, not an error.

use std::sync::Arc;
use std::time::Duration;

use crate::client_core::Core;
use crate::config::settings::Settings;
use crate::error::{channel_missing, Error, Result};
use crate::protocol::conn::Conn;
use crate::protocol::names::LockNames;
use crate::protocol::scripts::{UnlockCall, UnlockOutcome};
use crate::transport::calls::{Retry, Road, TOPOLOGY_PATIENCE};
use crate::transport::explain;

/// The longest one try of a request may take, pause included: a new connection (connect
/// + handshake reply), its own reply, and a jittered pause before it.
pub(crate) fn longest_try(settings: &Settings) -> Duration {
    settings.connect_timeout + settings.response_timeout * 2 + settings.retry_delay * 2
}

/// How long a request's latch lives (an unlock's, or a synchronizer's count change's): it
/// must outlive every retry of the request, `retry_attempts` tries, and on a cluster
/// (`cluster`) tries refused for a topology change for up to [`TOPOLOGY_PATIENCE`] from
/// the first, after which one more round of retries may start.
pub(crate) fn latch_ttl(settings: &Settings, cluster: bool) -> Duration {
    let mut ttl = longest_try(settings) * settings.retry_attempts + Duration::from_secs(1);
    if cluster {
        ttl += TOPOLOGY_PATIENCE;
    }
    ttl
}

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
    latch: Arc<str>,
    /// The connection to send on instead of the shared one (see [`Release::pinned_to`]).
    pinned: Option<Conn>,
}

impl Release {
    /// `lease_ms` is re-applied to the lock if holds remain after this one; 0 leaves its
    /// TTL as it is.
    pub(crate) fn new(
        core: Arc<Core>,
        names: Arc<LockNames>,
        owner: Arc<str>,
        lease_ms: u64,
    ) -> Self {
        let latch = names.unlock_latch(rand::random());
        Release {
            core,
            names,
            owner,
            lease_ms,
            latch,
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
        let latch_ttl = latch_ttl(&self.core.settings, self.core.connections.is_cluster());
        UnlockCall {
            names: &self.names,
            latch: &self.latch,
            lease_ms: self.lease_ms,
            owner: &self.owner,
            latch_ttl_ms: crate::util::time::millis(latch_ttl),
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
        // On a cluster every try checks the latch, the first too: a command whose reply
        // was lost may have run (redis-rs reconnects and re-reads the slot map under it).
        let connections = &self.core.connections;
        let cluster = connections.is_cluster();
        // Patience from the first try on: the latch's lifetime counts from there.
        let road = Road::new(Retry::Always)
            .on(self.pinned.clone())
            .through_topology_changes(connections);
        let outcome = connections
            .call(road, |conn, tries| call.run(conn, cluster || tries > 0))
            .await
            .result;
        let outcome = match outcome {
            Ok(UnlockOutcome::NotHeld) => Ok(Released::NotHeld),
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
        };
        self.forget_latch();
        outcome
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
        self.forget_latch();
    }

    /// Hands the latch over for deletion: nothing waits on it, and it expires anyway.
    fn forget_latch(self) {
        self.core.latches.forget(self.latch);
    }
}
