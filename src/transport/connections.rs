//! Command connections: one shared multiplexed connection for lock calls, replaced from a
//! deadpool pool when it breaks, plus pooled connections for background work.
//!
//! On a Redis Cluster the shared connection is a redis-rs cluster connection, built with
//! retries off: it keeps one multiplexed socket per node and repairs them itself, so there
//! is no pool, and a "pooled" connection is a clone of it.
//!
//! Lock calls do not check a connection out of the pool per call: deadpool-redis pings on
//! every checkout (`UNWATCH` + `PING`), which would double the latency of each lock call.
//! One multiplexed connection pipelines every caller's commands instead, and the pool is
//! where a broken one is replaced from, with its connect and health-check timeouts.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use rand::Rng;
use redis::{AsyncConnectionConfig, RedisError, RedisResult};
use tokio_util::sync::CancellationToken;

use crate::config::server_url::ServerUrl;
use crate::config::settings::{Endpoints, Settings};
use crate::error::{Error, Result};
use crate::protocol::conn::Conn;
use crate::transport::bounded::within;
use crate::transport::reconnects::Reconnects;
use crate::transport::sentinel::MasterWatch;
use crate::transport::server_check;
use crate::util::lifecycle::Lifecycle;
use crate::util::poison;

/// Timed-out replies in a row, with none arriving in between, after which the shared
/// connection is taken for half-open (its peer gone without a FIN) and replaced. One timeout
/// alone may just be a slow or frozen server, where reconnecting would only add a connect
/// timeout to every error.
const RETIRE_AFTER_TIMEOUTS: u32 = 3;

/// A failed attempt to open the shared connection: for a short while, callers get its error
/// at once instead of each waiting out another connect timeout in turn.
struct FailedRefill {
    at: tokio::time::Instant,
    error: String,
    /// Set when the server answered but runs an evicting `maxmemory-policy`: the URL and
    /// the policy, so that callers get that typed error again.
    evicting: Option<(String, String)>,
}

/// A clone of the shared connection, tagged so that a failure retires only the connection
/// that failed and not a replacement another caller already installed.
#[derive(Clone)]
pub(crate) struct SharedConn {
    generation: u64,
    /// The [`Master::generation`](crate::transport::sentinel::Master::generation) it was
    /// opened to, on a Sentinel client (0 otherwise): a newer master retires it.
    master: u64,
    pub(crate) conn: Conn,
}

/// Where connections come from.
enum Backend {
    /// One Redis, or the master the sentinels name (`watch`): the pool of the master of
    /// generation `pool.0` (0 on one Redis), replaced when they name another.
    Pooled {
        watch: Option<MasterWatch>,
        pool: RwLock<(u64, Pool)>,
    },
    /// A Redis Cluster: cluster connections, each already multiplexed per node.
    Cluster(Box<redis::cluster::ClusterClient>),
}

/// A failure to open a connection to `url`, naming the address when it is one of reaching
/// it (refused, unreachable, timed out, reset): an answer (a refused password, a reply
/// that is not Redis's) stays as it is, for the checks that read it.
fn unreachable(error: Error, url: &ServerUrl) -> Error {
    match error {
        Error::Redis(e)
            if e.is_io_error()
                || e.is_connection_refusal()
                || e.is_timeout()
                || e.is_connection_dropped() =>
        {
            Error::Unreachable {
                url: url.to_string(),
                error: e,
            }
        }
        other => other,
    }
}

/// A connection for background work (see [`Connections::pooled`]): on one Redis, checked
/// out of the pool until dropped; on a cluster, a clone of the shared cluster connection.
pub(crate) struct Pooled {
    pub(crate) conn: Conn,
    /// Keeps the pool's connection checked out while in use.
    _checkout: Option<deadpool_redis::Connection>,
}

pub(crate) struct Connections {
    backend: Backend,
    /// Timeouts, retries, the URL messages name a single server by (a Sentinel master is
    /// named by its own URL), and whether a server that may evict keys is accepted
    /// (checked again on reconnection).
    settings: Settings,
    shared: RwLock<Option<SharedConn>>,
    /// Serialises replacements, so a broken connection is replaced once, not once per
    /// caller; holds the last failed attempt, which callers queued behind it share.
    refill: tokio::sync::Mutex<Option<FailedRefill>>,
    next_generation: AtomicU64,
    /// Replies that timed out since the last one that arrived.
    timeouts_in_a_row: AtomicU32,
    /// Told when a fresh shared connection replaces a broken one: Redis may have restarted
    /// or failed over and forgotten locks, which is worth checking at once.
    reconnects: Arc<Reconnects>,
    /// Cancelled when the runtime the connections were opened on has shut down: their
    /// drivers are gone with it, and every call would fail with a broken pipe.
    runtime_gone: Arc<AtomicBool>,
    /// Whether the background services last found Redis out of reach.
    outage: AtomicBool,
    /// Cancelled when the connections go (their client is gone, or shut down): the tasks
    /// started with them (the runtime watch, a Sentinel client's follower) end then.
    closing: CancellationToken,
    /// The client's way to a shutdown: once it closes them, every call is refused.
    pub(crate) lifecycle: Lifecycle,
}

impl Drop for Connections {
    fn drop(&mut self) {
        self.closing.cancel();
    }
}

/// Sets its flag when dropped: held by a task that never ends, it is dropped when the
/// runtime that runs the task shuts down. A flag rather than a `CancellationToken`: every
/// call reads it, and `is_cancelled` takes the token's lock.
struct RuntimeWatch(Arc<AtomicBool>);

impl Drop for RuntimeWatch {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

impl Connections {
    /// Builds the pool on `redis` (the client's URL and certificates) and opens the shared
    /// connection.
    pub(crate) async fn open(
        settings: &Settings,
        endpoints: &Endpoints,
        reconnects: Arc<Reconnects>,
    ) -> Result<Self> {
        let closing = CancellationToken::new();
        let backend = match (&endpoints.cluster, &endpoints.sentinel) {
            (Some(cluster), _) => Backend::Cluster(Box::new(cluster.clone())),
            (None, sentinel) => {
                let watch = match sentinel {
                    Some(sentinel) => Some(
                        MasterWatch::start(
                            sentinel.clone(),
                            settings.connect_timeout,
                            settings.response_timeout,
                            reconnects.clone(),
                            closing.clone(),
                        )
                        .await?,
                    ),
                    None => None,
                };
                let pool = match &watch {
                    Some(watch) => {
                        let master = watch.current();
                        let pool = new_pool(settings, &master.client, &master.url)?;
                        (master.generation, pool)
                    }
                    None => (0, new_pool(settings, &endpoints.nodes[0], &settings.url)?),
                };
                Backend::Pooled {
                    watch,
                    pool: RwLock::new(pool),
                }
            }
        };
        let connections = Connections {
            backend,
            settings: settings.clone(),
            shared: RwLock::new(None),
            refill: tokio::sync::Mutex::new(None),
            next_generation: AtomicU64::new(1),
            timeouts_in_a_row: AtomicU32::new(0),
            reconnects,
            runtime_gone: Arc::new(AtomicBool::new(false)),
            outage: AtomicBool::new(false),
            closing,
            lifecycle: Lifecycle::default(),
        };
        // The drivers of the connections run on the current runtime; a task that lasts as
        // long as the connections tells when it is gone first.
        let watch = RuntimeWatch(connections.runtime_gone.clone());
        let closed = connections.closing.clone();
        tokio::spawn(async move {
            // Dropped with the task: when the runtime shuts down, or (telling nobody) when
            // the connections are gone.
            let _watch = watch;
            closed.cancelled().await;
        });
        connections.shared().await?;
        Ok(connections)
    }

    /// [`Error::RuntimeGone`] once the client's runtime has shut down, [`Error::ShutDown`]
    /// once the client has.
    pub(super) fn check_runtime(&self) -> Result<()> {
        // First: closing the connections ends the runtime watch too.
        self.lifecycle.check_open()?;
        if self.runtime_gone.load(Ordering::Acquire) {
            return Err(Error::RuntimeGone);
        }
        Ok(())
    }

    /// Closes the connections for good, at the end of a shutdown: every call is refused
    /// from now on, the shared connection and the pools' idle ones are dropped (their
    /// drivers end with them), and the tasks started with the connections end.
    pub(crate) fn close(&self) {
        self.lifecycle.close();
        *poison::write(&self.shared) = None;
        if let Backend::Pooled { pool, .. } = &self.backend {
            poison::read(pool).1.close();
        }
        self.closing.cancel();
    }

    /// The shared connection, opened anew from the pool if the last one was retired.
    pub(crate) async fn shared(&self) -> Result<SharedConn> {
        self.check_runtime()?;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        // Boxed: a pool checkout's future is kilobytes, and inline it would be part of the
        // future of every lock call, copied whenever one is moved or boxed.
        Box::pin(self.open_shared()).await
    }

    /// Opens a fresh shared connection from the pool, once for all callers queued here.
    async fn open_shared(&self) -> Result<SharedConn> {
        let mut last_failure = self.refill.lock().await;
        if let Some(current) = self.current() {
            return Ok(current);
        }
        if let Some(failed) = last_failure.as_ref() {
            if failed.at.elapsed() < self.settings.retry_delay {
                if let Some((url, policy)) = &failed.evicting {
                    return Err(Error::EvictingServer {
                        url: url.clone(),
                        policy: policy.clone(),
                    });
                }
                return Err(Error::pool(format!(
                    "reconnecting failed: {}",
                    failed.error
                )));
            }
        }
        let opened = async {
            let (master, mut conn) = self.open_conn().await?;
            // On a reconnection (not the first connection, which `Core::start` checks with
            // the rest of the server), the server's `maxmemory-policy` is checked again:
            // Redis may have restarted with another configuration, been reconfigured
            // (`CONFIG SET`), or the sentinels may have named another master. A server that
            // now may evict keys, when the client does not accept that, fails the
            // reconnection with `EvictingServer`, and so every call, until it no longer
            // does: the client does not go on silently. Locks already held are not told
            // (the watchdog's renewals, on connections of their own, go on); new ones
            // cannot be taken. A cluster connection is never replaced (redis-rs repairs
            // it): a cluster is checked at connect only.
            if self.next_generation.load(Ordering::Relaxed) > 1 {
                let allow = self.settings.allow_evicting_policy;
                server_check::check_eviction(&mut conn, &self.server_url(), allow, false).await?;
            }
            Ok((master, conn))
        }
        .await;
        let (master, conn) = match opened {
            Ok(opened) => opened,
            Err(e) => {
                let evicting = match &e {
                    Error::EvictingServer { url, policy } => Some((url.clone(), policy.clone())),
                    _ => None,
                };
                *last_failure = Some(FailedRefill {
                    at: tokio::time::Instant::now(),
                    error: e.to_string(),
                    evicting,
                });
                return Err(e);
            }
        };
        *last_failure = None;
        let fresh = SharedConn {
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            master,
            conn,
        };
        *poison::write(&self.shared) = Some(fresh.clone());
        if fresh.generation > 1 {
            self.reconnects.tell();
        }
        Ok(fresh)
    }

    /// How messages name the server: a Sentinel master by its own URL.
    fn server_url(&self) -> ServerUrl {
        match self.master_watch() {
            Some(watch) => watch.current().url.clone(),
            None => self.settings.url.clone(),
        }
    }

    /// A fresh connection for the shared one, with the generation of the master it goes
    /// to on a Sentinel client (0 otherwise).
    async fn open_conn(&self) -> Result<(u64, Conn)> {
        let opened = match &self.backend {
            // Detached from the pool: it lives as long as it works, and the pool stays free
            // for the watchdog.
            Backend::Pooled { watch, pool } => {
                let (master, pool) = current_pool(&self.settings, watch.as_ref(), pool)?;
                let checkout = pool.get().await.inspect_err(|_| self.suspect());
                checkout
                    .map(|conn| (master, Conn::Single(deadpool_redis::Connection::take(conn))))
                    .map_err(Error::from)
            }
            // Reads the slot map from the seeds, each in turn with a connect and a reply;
            // bounded, since a seed that accepts the connection and never answers would
            // hang it.
            Backend::Cluster(client) => {
                let limit = self.settings.connect_timeout * 2 + Duration::from_secs(1);
                let connecting = client.get_async_connection();
                let connected = within(limit, "connecting to the cluster", connecting).await;
                connected.map(|conn| (0, Conn::Cluster(conn)))
            }
        };
        opened.map_err(|e| unreachable(e, &self.server_url()))
    }

    /// A call on the master failed: on a Sentinel client, it may have been failed over.
    fn suspect(&self) {
        if let Some(watch) = self.master_watch() {
            watch.suspect();
        }
    }

    /// True for a cluster client.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.backend, Backend::Cluster(_))
    }

    /// Who is told each time a fresh shared connection replaces a broken one.
    pub(crate) fn reconnects(&self) -> &Arc<Reconnects> {
        &self.reconnects
    }

    fn current(&self) -> Option<SharedConn> {
        let current = poison::read(&self.shared).clone()?;
        // A connection to a master the sentinels no longer name is retired: the old master
        // takes writes for seconds after a failover, and a lock taken there is worthless.
        match self.master_watch() {
            Some(watch) if current.master != watch.generation() => None,
            _ => Some(current),
        }
    }

    /// The master the sentinels name, on a Sentinel client.
    pub(crate) fn master_watch(&self) -> Option<&MasterWatch> {
        match &self.backend {
            Backend::Pooled { watch, .. } => watch.as_ref(),
            Backend::Cluster(_) => None,
        }
    }

    /// Reports what a call on the shared connection `used` came to. A reply says the
    /// connection works. An error that leaves it unusable (redis-rs does not reconnect a
    /// multiplexed connection by itself once the server has gone) retires it, and so do
    /// suspect ones: a reply that timed out may mean a half-open connection that will never
    /// answer again. Callers still using a retired connection finish on it; new calls get a
    /// fresh one.
    pub(crate) fn report<T>(&self, used: &SharedConn, outcome: &RedisResult<T>) {
        let Err(error) = outcome else {
            // Read first: the common case writes nothing, keeping the cache line shared.
            if self.timeouts_in_a_row.load(Ordering::Relaxed) != 0 {
                self.timeouts_in_a_row.store(0, Ordering::Relaxed);
            }
            if self.outage.load(Ordering::Relaxed) {
                self.reachable();
            }
            return;
        };
        self.retire_if_broken(used, error);
    }

    /// The failure half of [`report`](Connections::report), out of line: every lock call
    /// reports, and almost all of them a reply.
    fn retire_if_broken(&self, used: &SharedConn, error: &RedisError) {
        // A cluster connection repairs its node connections itself (redis-rs reconnects a
        // broken node and re-reads the slot map on redirections): it is never retired.
        if used.conn.is_cluster() {
            return;
        }
        // The master may have been failed over: a demoted master refuses writes with
        // READONLY, a dead one drops the connection.
        if error.is_unrecoverable_error() || error.code() == Some("READONLY") {
            self.suspect();
        }
        let suspect = error.is_timeout()
            && self.timeouts_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 >= RETIRE_AFTER_TIMEOUTS;
        if !error.is_unrecoverable_error() && !suspect {
            return;
        }
        self.timeouts_in_a_row.store(0, Ordering::Relaxed);
        let mut slot = poison::write(&self.shared);
        if slot.as_ref().map(|c| c.generation) == Some(used.generation) {
            *slot = None;
        }
    }

    /// A background service (`service`: the watchdog, the queue heartbeat) could not
    /// reach Redis. The first failure of an outage is logged at WARN, the ones after it at
    /// DEBUG: a service retrying every 500 ms would otherwise fill the log.
    pub(crate) fn unreachable(&self, service: &'static str, error: &dyn std::fmt::Display) {
        if self.outage.swap(true, Ordering::AcqRel) {
            tracing::debug!(service, %error, "still cannot reach Redis");
        } else {
            tracing::warn!(service, %error, server = %self.settings.url, "cannot reach Redis; retrying");
        }
    }

    /// A call reached Redis: logs the end of an outage, once, at INFO.
    pub(crate) fn reachable(&self) {
        if self.outage.swap(false, Ordering::AcqRel) {
            tracing::info!(server = %self.settings.url, "Redis is reachable again");
        }
    }

    /// A connection of its own from the pool, for work that should not queue behind lock
    /// calls on the shared connection (the watchdog's large renewal batches). On a cluster,
    /// the shared cluster connection, which is multiplexed per node already.
    pub(crate) async fn pooled(&self) -> Result<Pooled> {
        self.check_runtime()?;
        let Backend::Pooled { watch, pool } = &self.backend else {
            return Ok(Pooled {
                conn: self.shared().await?.conn,
                _checkout: None,
            });
        };
        let (_, pool) = current_pool(&self.settings, watch.as_ref(), pool)?;
        // Boxed for the same reason as in `shared`: an acquire awaits this with replica sync.
        let checkout = Box::pin(pool.get()).await.inspect_err(|_| self.suspect())?;
        Ok(Pooled {
            conn: Conn::Single((*checkout).clone()),
            _checkout: Some(checkout),
        })
    }

    /// The pause before retry number `attempt` (1-based): the configured delay plus up to as
    /// much again of random jitter.
    pub(crate) fn backoff(&self) -> Duration {
        let jitter = rand::rng().random_range(0.0..=1.0);
        let delay = self.settings.retry_delay;
        delay + delay.mul_f64(jitter)
    }

    pub(crate) fn retry_attempts(&self) -> u32 {
        self.settings.retry_attempts
    }
}

/// The pool of the current master (of the one Redis, without a `watch`), and its
/// generation; the pools of later masters are built with `settings`.
fn current_pool(
    settings: &Settings,
    watch: Option<&MasterWatch>,
    pool: &RwLock<(u64, Pool)>,
) -> Result<(u64, Pool)> {
    let current = poison::read(pool).clone();
    let Some(watch) = watch.filter(|watch| watch.generation() != current.0) else {
        return Ok(current);
    };
    let master = watch.current();
    let fresh = new_pool(settings, &master.client, &master.url)?;
    let mut current = poison::write(pool);
    if current.0 < master.generation {
        *current = (master.generation, fresh);
    }
    Ok(current.clone())
}

/// The pool of connections to one Redis, which messages name `url`.
fn new_pool(settings: &Settings, redis: &redis::Client, url: &ServerUrl) -> Result<Pool> {
    let connection_config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(settings.connect_timeout))
        .set_response_timeout(Some(settings.response_timeout));
    // The redis-rs client carries the TLS certificates; its connection info is what the
    // pool's manager opens connections from.
    let info = redis.get_connection_info().clone();
    let manager = Manager::new_with_config(info, connection_config)
        .map_err(|e| Error::invalid(format!("invalid Redis URL `{url}`: {e}")))?;
    let bound = settings.connect_timeout + settings.response_timeout;
    Pool::builder(manager)
        .max_size(settings.pool_size)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(bound))
        .create_timeout(Some(bound))
        .recycle_timeout(Some(settings.response_timeout))
        .build()
        .map_err(|e| Error::Pool {
            message: e.to_string(),
            source: Some(Box::new(e)),
        })
}
