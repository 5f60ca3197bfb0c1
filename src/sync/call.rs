//! Running one script call of a synchronizer: on the client's shared connection, retried
//! as far as the call allows, its refusals turned into typed errors.
//!
//! # Topology changes
//!
//! On a Redis Cluster a call refused because its slot is on the move or its master is
//! failing over (`MOVED`, `ASK`, `TRYAGAIN`, `CLUSTERDOWN`, ...: it certainly did not run)
//! is sent again after the retry backoff for up to
//! [`TOPOLOGY_PATIENCE`] from its first try, as
//! a lock's unlock is (the one road of [`crate::transport::calls`]), and failures to reach Redis
//! between two refusals count afresh against `retry_attempts`: a master that died drops
//! its connections (a broken pipe, a refused reconnect) before the others answer that
//! the cluster is down, then redirect to the promoted replica.
//!
//! # Count changes sent again
//!
//! A count change (`DECRBY`, `INCRBY`, `SET` to count + n) whose connection broke after
//! it went out may have run, and run again it would count twice. Redisson sends these
//! once (`evalWriteNoRetryAsync`), and so does a client of one server here. A failover
//! breaks connections by design, though, so a client of a Redis Cluster or of a Sentinel
//! master sends each count change with a **request latch** ([`CountChange`]), as Redisson's unlocks carry an unlock latch: a key
//! in the count's slot, written by the same script run as the change with the change's
//! answer, for as long as the request may be retried ([`latch_ttl`]). A retry whose first
//! try ran finds it and answers as that try did; one whose first try did not run (or ran
//! on a master that died before its replica had it: then the latch is gone with the
//! change) makes the change. A request is sent again only while its latch certainly
//! outlives the try. Asking Redis what happened instead cannot work for a plain count: it
//! has no owner, and nothing in it tells one client's change from another's (a lock
//! release can, and writes no latch: its retry reads its owner's count, see
//! [`crate::locks::release`]).
//!
//! The latch adds one short-lived key beside Redisson's layout, in the namespace of
//! Redisson's unlock latches (`redisson_unlock_latch:{<key>}:<request id>`), which Redisson
//! reads only under its own request ids; it is deleted once the answer is in (batched,
//! see [`crate::services::latches`]) and expires by itself otherwise.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::client_core::Core;
use crate::config::settings::Settings;
use crate::error::{Error, Result};
use crate::protocol::conn::Conn;
use crate::protocol::names::SyncNames;
use crate::protocol::scripts::RequestLatch;
use crate::transport::calls::{Outcome, Retry, Road, TOPOLOGY_PATIENCE};
use crate::transport::explain::explain_sync;

/// The longest one try of a request may take, pause included: a new connection (connect
/// + handshake reply), its own reply, and a jittered pause before it.
fn longest_try(settings: &Settings) -> Duration {
    settings.connect_timeout + settings.response_timeout * 2 + settings.retry_delay * 2
}

/// How long a request latch lives (only a cluster or Sentinel client's count changes have
/// one):
/// it must outlive every retry of the request, `retry_attempts` tries, and tries refused
/// for a topology change for up to [`TOPOLOGY_PATIENCE`] from the first, after which one
/// more round of retries may start.
fn latch_ttl(settings: &Settings) -> Duration {
    longest_try(settings) * settings.retry_attempts + Duration::from_secs(1) + TOPOLOGY_PATIENCE
}

/// One count change request: its request latch on a cluster or Sentinel (see the module
/// docs), and
/// whether a try of it may have run.
pub(crate) struct CountChange {
    latch: Option<RequestLatch>,
    /// The last instant at which a try may start and still find the latch.
    until: Instant,
    may_have_run: bool,
}

impl CountChange {
    /// A new request on `names`; with a latch on a cluster or Sentinel client's names.
    pub(crate) fn new(core: &Core, names: &SyncNames) -> Self {
        let now = Instant::now();
        let settings = &core.settings;
        let ttl = latch_ttl(settings);
        let latch = names.request_latch(rand::random()).map(|key| RequestLatch {
            key,
            ttl_ms: crate::util::time::millis(ttl),
        });
        CountChange {
            latch,
            // A try started then reaches Redis within `longest_try`, pause included (only
            // a request with a latch is sent again on its account).
            until: now + ttl.saturating_sub(longest_try(settings)),
            may_have_run: false,
        }
    }

    /// The latch every try of the request carries, if any.
    pub(crate) fn latch(&self) -> Option<&RequestLatch> {
        self.latch.as_ref()
    }

    /// When the request may be sent again.
    pub(crate) fn retry(&self) -> Retry {
        match self.latch {
            Some(_) => Retry::Latched(self.until),
            None => Retry::IfUnsent,
        }
    }

    /// A try failed with `error`.
    pub(crate) fn failed(&mut self, error: &Error) {
        self.may_have_run |= error.may_have_run();
    }

    /// Whether the request may be sent again after a try failed with `error`.
    pub(crate) fn resends(&self, error: &Error) -> bool {
        self.retry().resends(error, self.may_have_run)
    }

    /// The answer is in: the latch has done its job, and is deleted in a batch.
    pub(crate) fn done(self, core: &Core) {
        if let Some(latch) = self.latch {
            core.latches.forget(latch.key);
        }
    }
}

/// How a call may be sent again.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// Harmless to run twice (a read, a set, a delete, a release by id): after any
    /// failure to reach Redis.
    Idempotent,
    /// A count change: with its request latch on a cluster or Sentinel, as far as the
    /// latch allows
    /// (see the module docs).
    CountChange,
}

/// Runs `call` (`operation` names it in errors, such as "releasing") up to the client's
/// `retry_attempts`, as its `kind` allows, and on a cluster through a topology change (see
/// the module docs), with its errors explained. `call` gets the request's latch (a count
/// change's, on a cluster or Sentinel) for every try.
pub(crate) async fn run<T, F, Fut>(
    core: &Core,
    names: &SyncNames,
    operation: &'static str,
    kind: Kind,
    mut call: F,
) -> Outcome<T>
where
    F: FnMut(Conn, Option<RequestLatch>) -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    let change = matches!(kind, Kind::CountChange).then(|| CountChange::new(core, names));
    let retry = change.as_ref().map_or(Retry::Always, CountChange::retry);
    let latch = change.as_ref().and_then(CountChange::latch);
    let connections = &core.connections;
    let road = Road::new(retry).through_topology_changes(connections);
    let mut outcome = connections
        .call(road, |conn, _| call(conn, latch.cloned()))
        .await;
    if let Err(e) = outcome.result {
        outcome.result = Err(explain_sync(connections, operation, names, e).await);
    }
    if let Some(change) = change {
        change.done(core);
    }
    outcome
}

/// One try of a waiting call, sent once on the shared connection (the waiting loop paces
/// and repeats the tries), its outcome reported to the connection's health and its
/// refusal explained. `call` runs only once the connection is there.
pub(crate) async fn once<T, Fut>(
    core: &Core,
    names: &SyncNames,
    operation: &'static str,
    call: impl FnOnce(Conn) -> Fut,
) -> Result<T>
where
    Fut: Future<Output = redis::RedisResult<T>>,
{
    match core.connections.once(call).await {
        Ok(answer) => Ok(answer),
        Err(e) => Err(explain_sync(&core.connections, operation, names, e).await),
    }
}
