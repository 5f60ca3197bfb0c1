//! The one road to Redis for a call that may be sent more than once: on the shared
//! connection (its health reported) or a pinned one, sent again after a failure to reach
//! Redis as far as the call allows ([`Retry`]), and on a cluster through a topology change
//! ([`TopologyWait`]). Unlocks, synchronizer calls, reads and force unlocks all go this
//! way; a call sent once ([`Connections::once`]: an acquire's or a wait's try, which the
//! waiting loop paces, a background service's) goes on the same shared connection, its
//! health reported the same way.

use std::future::Future;
use std::time::Duration;

use redis::RedisResult;
use tokio::time::Instant;

use crate::error::{Error, Result};
use crate::protocol::conn::Conn;
use crate::transport::connections::Connections;

/// How long a call on a Redis Cluster waits out refusals that say the cluster is changing
/// its topology (see [`Error::is_topology_change`]) before it fails with the last of them:
/// long enough for a failover at the default `cluster-node-timeout` (15 s; a replica is
/// promoted about two node timeouts after its master died).
pub(crate) const TOPOLOGY_PATIENCE: Duration = Duration::from_secs(30);

/// Waiting out a Redis Cluster's topology change, for one call: the one rule that lock
/// acquires and releases and every synchronizer call share. A call refused because the
/// cluster is moving its slot or failing over its master (it certainly did not run) is
/// sent again after the retry backoff, without counting against `retry_attempts`, for up
/// to [`TOPOLOGY_PATIENCE`]; elsewhere than on a cluster such a refusal is final.
#[derive(Default)]
pub(crate) struct TopologyWait {
    cluster: bool,
    /// When the patience began: the first refusal, or the call's start.
    since: Option<Instant>,
}

impl TopologyWait {
    /// Patience counted from the first refusal, and from the next one again after
    /// [`settled`](TopologyWait::settled).
    pub(crate) fn new(connections: &Connections) -> Self {
        TopologyWait {
            cluster: connections.is_cluster(),
            since: None,
        }
    }

    /// True when a call that failed with `error` is to be sent again after a pause: a
    /// cluster refused it for a topology change, and patience remains.
    pub(crate) fn rides_out(&mut self, error: &Error) -> bool {
        self.cluster
            && error.is_topology_change()
            && self.since.get_or_insert_with(Instant::now).elapsed() < TOPOLOGY_PATIENCE
    }

    /// The cluster answered: a later refusal starts a new patience (for [`new`]'s).
    ///
    /// [`new`]: TopologyWait::new
    pub(crate) fn settled(&mut self) {
        self.since = None;
    }
}

/// Which failures a call may be sent again after.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Any failure to reach Redis: the call is harmless to run twice (a read, an unlock
    /// whose retry knows its earlier try by the owner's count, setting a count that is not
    /// there, releasing a permit by its unique id).
    Always,
    /// Only a failure after which the call certainly did not run (a refused connection, a
    /// cluster's redirection): a count change (`DECR`, `INCRBY`) that ran twice would count
    /// twice, as in Redisson, which sends these once (`evalWriteNoRetryAsync`).
    IfUnsent,
    /// A cluster or Sentinel client's count change, with its request latch: any failure
    /// until this instant, after which the latch may be gone, and the call is sent again
    /// as [`Retry::IfUnsent`] is.
    Latched(Instant),
}

impl Retry {
    /// Whether a call that failed with `error` may be sent again, after failures of which
    /// one may have run (`earlier_may_have_run`).
    pub(crate) fn resends(self, error: &Error, earlier_may_have_run: bool) -> bool {
        let unsent = !earlier_may_have_run && !error.may_have_run();
        match self {
            Retry::Always => true,
            Retry::IfUnsent => unsent,
            Retry::Latched(until) => unsent || Instant::now() < until,
        }
    }
}

/// How one call goes to Redis.
pub(crate) struct Road {
    retry: Retry,
    /// The connection the call must use: it must reach Redis after an earlier command on
    /// that connection (Redis orders the commands of one connection, not those of two).
    pinned: Option<Conn>,
    /// No patience by default: a refusal is final, as on one Redis.
    topology: TopologyWait,
}

impl Road {
    /// On the shared connection, sent again as `retry` allows; a cluster's topology
    /// change is final.
    pub(crate) fn new(retry: Retry) -> Self {
        Road {
            retry,
            pinned: None,
            topology: TopologyWait::default(),
        }
    }

    /// On `pinned` when given, rather than the shared connection.
    pub(crate) fn on(mut self, pinned: Option<Conn>) -> Self {
        self.pinned = pinned;
        self
    }

    /// Through a cluster's topology change, with patience counted from now, so that the
    /// request's tries end within a known time of its first: a lock's release (see
    /// [`crate::locks::release`]), and a synchronizer's count change, whose request latch
    /// must outlive every try (see `sync::call`).
    pub(crate) fn through_topology_changes(mut self, connections: &Connections) -> Self {
        self.topology.since = Some(Instant::now());
        self.topology.cluster = connections.is_cluster();
        self
    }
}

/// What a call came to, and whether a try before the last one may have run in Redis (its
/// reply lost): the last answer may then be about the state that try left.
pub(crate) struct Outcome<T> {
    pub(crate) result: Result<T>,
    pub(crate) earlier_may_have_run: bool,
}

impl Connections {
    /// Runs `call` (given the connection and the number of tries before this one) down
    /// `road`. Failures to reach Redis are sent again up to `retry_attempts` tries,
    /// counted afresh after each topology refusal: a master that died drops its
    /// connections (a broken pipe, a refused reconnect) before the others answer that the
    /// cluster is down, then redirect to the promoted replica.
    pub(crate) async fn call<T, F, Fut>(&self, road: Road, mut call: F) -> Outcome<T>
    where
        F: FnMut(Conn, u32) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let Road {
            retry,
            pinned,
            mut topology,
        } = road;
        let (mut tries, mut failures, mut earlier_may_have_run) = (0, 0, false);
        loop {
            let outcome = async {
                // Not through `once`: its future, moved into this one, would be copied on
                // every unlock.
                let Some(conn) = &pinned else {
                    let shared = self.shared().await?;
                    let outcome = call(shared.conn.clone(), tries).await;
                    self.report(&shared, &outcome);
                    return Ok(outcome?);
                };
                self.check_runtime()?;
                Ok(call(conn.clone(), tries).await?)
            }
            .await;
            tries += 1;
            match outcome {
                Err(e) if topology.rides_out(&e) && retry.resends(&e, earlier_may_have_run) => {
                    tracing::debug!(error = %e, "the cluster is changing its topology; sending again");
                    failures = 0;
                }
                Err(e)
                    if e.is_connection_error()
                        && failures + 1 < self.retry_attempts()
                        && retry.resends(&e, earlier_may_have_run) =>
                {
                    failures += 1;
                    tracing::debug!(failures, error = %e, "sending a Redis call again");
                    earlier_may_have_run |= e.may_have_run();
                }
                result => {
                    return Outcome {
                        result,
                        earlier_may_have_run,
                    }
                }
            }
            tokio::time::sleep(self.backoff()).await;
        }
    }

    /// Sends `call` once on the shared connection, its outcome reported to the connection's
    /// health: for a try that its caller paces and repeats (a waiting loop's, a background
    /// round's) and for best-effort calls.
    pub(crate) async fn once<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: FnOnce(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let shared = self.shared().await?;
        let outcome = call(shared.conn.clone()).await;
        self.report(&shared, &outcome);
        Ok(outcome?)
    }

    /// Runs an idempotent operation on the shared connection, sending it again after
    /// failures to reach Redis up to the configured number of attempts.
    pub(crate) async fn with_retries<T, F, Fut>(&self, mut operation: F) -> Result<T>
    where
        F: FnMut(Conn) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        self.call(Road::new(Retry::Always), |conn, _| operation(conn))
            .await
            .result
    }
}
