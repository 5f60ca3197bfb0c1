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

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use deadpool_redis::{Manager, Pool, Runtime};
use rand::Rng;
use redis::{AsyncConnectionConfig, RedisError};

use crate::config::settings::{Endpoints, Settings};
use crate::error::{Error, Result};
use crate::transport::conn::Conn;
use crate::util::sync;

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
}

/// A clone of the shared connection, tagged so that a failure retires only the connection
/// that failed and not a replacement another caller already installed.
#[derive(Clone)]
pub(crate) struct SharedConn {
    generation: u64,
    pub(crate) conn: Conn,
}

/// Where connections come from.
enum Backend {
    /// One Redis: a pool of multiplexed connections.
    Single(Pool),
    /// A Redis Cluster: cluster connections, each already multiplexed per node.
    Cluster(Box<redis::cluster::ClusterClient>),
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
    connect_timeout: Duration,
    shared: RwLock<Option<SharedConn>>,
    /// Serialises replacements, so a broken connection is replaced once, not once per
    /// caller; holds the last failed attempt, which callers queued behind it share.
    refill: tokio::sync::Mutex<Option<FailedRefill>>,
    next_generation: AtomicU64,
    /// Replies that timed out since the last one that arrived.
    timeouts_in_a_row: AtomicU32,
    retry_attempts: u32,
    retry_delay: Duration,
    /// Told when a fresh shared connection replaces a broken one: Redis may have restarted
    /// or failed over and forgotten locks, which is worth checking at once.
    reconnects: Arc<Reconnects>,
    /// Set when the runtime the connections were opened on has shut down: their drivers
    /// are gone with it, and every call would fail with a broken pipe.
    runtime_gone: Arc<AtomicBool>,
}

/// The services told when the client reconnects to Redis after losing it (the shared
/// connection replaced, the pub/sub connection re-established): Redis may have restarted or
/// failed over and forgotten locks, which the watchdog and the fixed-lease check then look
/// for at once.
#[derive(Default)]
pub(crate) struct Reconnects {
    listeners: std::sync::Mutex<Vec<Arc<tokio::sync::Notify>>>,
}

impl Reconnects {
    /// A notification for one more listener. Each keeps a permit if it is busy when told,
    /// so that a reconnection during a round is seen by the next one.
    pub(crate) fn listen(&self) -> Arc<tokio::sync::Notify> {
        let notify = Arc::new(tokio::sync::Notify::new());
        sync::locked(&self.listeners).push(notify.clone());
        notify
    }

    /// Tells every listener.
    pub(crate) fn tell(&self) {
        for listener in sync::locked(&self.listeners).iter() {
            listener.notify_one();
        }
    }
}

/// Sets its flag when dropped: held by a task that never ends, it is dropped when the
/// runtime that runs the task shuts down.
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
        let backend = match &endpoints.cluster {
            Some(cluster) => Backend::Cluster(Box::new(cluster.clone())),
            None => Backend::Single(Self::pool(settings, &endpoints.nodes[0])?),
        };
        let connections = Connections {
            backend,
            connect_timeout: settings.connect_timeout,
            shared: RwLock::new(None),
            refill: tokio::sync::Mutex::new(None),
            next_generation: AtomicU64::new(1),
            timeouts_in_a_row: AtomicU32::new(0),
            retry_attempts: settings.retry_attempts,
            retry_delay: settings.retry_delay,
            reconnects,
            runtime_gone: Arc::new(AtomicBool::new(false)),
        };
        // The drivers of the connections run on the current runtime; a task that never
        // ends tells when it is gone.
        let watch = RuntimeWatch(connections.runtime_gone.clone());
        tokio::spawn(async move {
            let _watch = watch;
            std::future::pending::<()>().await
        });
        connections.shared().await?;
        Ok(connections)
    }

    /// The pool of connections to one Redis.
    fn pool(settings: &Settings, redis: &redis::Client) -> Result<Pool> {
        let connection_config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(settings.connect_timeout))
            .set_response_timeout(Some(settings.response_timeout));
        // The redis-rs client carries the TLS certificates; its connection info is what the
        // pool's manager opens connections from.
        let info = redis.get_connection_info().clone();
        let manager = Manager::new_with_config(info, connection_config)
            .map_err(|e| Error::invalid(format!("invalid Redis URL `{}`: {e}", settings.url)))?;
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(settings.connect_timeout + settings.response_timeout))
            .create_timeout(Some(settings.connect_timeout + settings.response_timeout))
            .recycle_timeout(Some(settings.response_timeout))
            .build()
            .map_err(|e| Error::Pool {
                message: e.to_string(),
                source: Some(Box::new(e)),
            })?;
        Ok(pool)
    }

    /// [`Error::RuntimeGone`] once the client's runtime has shut down.
    fn check_runtime(&self) -> Result<()> {
        if self.runtime_gone.load(Ordering::Acquire) {
            return Err(Error::RuntimeGone);
        }
        Ok(())
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
            if failed.at.elapsed() < self.retry_delay {
                return Err(Error::pool(format!(
                    "reconnecting failed: {}",
                    failed.error
                )));
            }
        }
        let conn = match self.open_conn().await {
            Ok(conn) => conn,
            Err(e) => {
                *last_failure = Some(FailedRefill {
                    at: tokio::time::Instant::now(),
                    error: e.to_string(),
                });
                return Err(e);
            }
        };
        *last_failure = None;
        let fresh = SharedConn {
            generation: self.next_generation.fetch_add(1, Ordering::Relaxed),
            conn,
        };
        *sync::write(&self.shared) = Some(fresh.clone());
        if fresh.generation > 1 {
            self.reconnects.tell();
        }
        Ok(fresh)
    }

    /// A fresh connection for the shared one.
    async fn open_conn(&self) -> Result<Conn> {
        match &self.backend {
            // Detached from the pool: it lives as long as it works, and the pool stays free
            // for the watchdog.
            Backend::Single(pool) => match pool.get().await {
                Ok(conn) => Ok(Conn::Single(deadpool_redis::Connection::take(conn))),
                Err(e) => Err(Error::from(e)),
            },
            // Reads the slot map from the seeds; bounded, since a seed that accepts the
            // connection and never answers would hang it.
            Backend::Cluster(client) => {
                // Each node: a connect and a reply; the seeds are tried in turn.
                let limit = self.connect_timeout * 2 + Duration::from_secs(1);
                match tokio::time::timeout(limit, client.get_async_connection()).await {
                    Ok(Ok(conn)) => Ok(Conn::Cluster(conn)),
                    Ok(Err(e)) => Err(Error::Redis(e)),
                    Err(_) => Err(Error::Timeout {
                        during: "connecting to the cluster",
                        after: limit,
                    }),
                }
            }
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
        sync::read(&self.shared).clone()
    }

    /// Retires the shared connection after an error that leaves it unusable (redis-rs does
    /// not reconnect a multiplexed connection by itself once the server has gone), or
    /// suspect: a reply that timed out may mean a half-open connection that will never
    /// answer again. Callers still using a retired connection finish on it; new calls get a
    /// fresh one.
    pub(crate) fn report(&self, used: &SharedConn, error: &RedisError) {
        // A cluster connection repairs its node connections itself (redis-rs reconnects a
        // broken node and re-reads the slot map on redirections): it is never retired.
        if used.conn.is_cluster() {
            return;
        }
        let suspect = error.is_timeout()
            && self.timeouts_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 >= RETIRE_AFTER_TIMEOUTS;
        if !error.is_unrecoverable_error() && !suspect {
            return;
        }
        self.timeouts_in_a_row.store(0, Ordering::Relaxed);
        let mut slot = sync::write(&self.shared);
        if slot.as_ref().map(|c| c.generation) == Some(used.generation) {
            *slot = None;
        }
    }

    /// A reply arrived: the shared connection works.
    pub(crate) fn report_success(&self) {
        // Read first: the common case writes nothing, keeping the cache line shared.
        if self.timeouts_in_a_row.load(Ordering::Relaxed) != 0 {
            self.timeouts_in_a_row.store(0, Ordering::Relaxed);
        }
    }

    /// A connection of its own from the pool, for work that should not queue behind lock
    /// calls on the shared connection (the watchdog's large renewal batches). On a cluster,
    /// the shared cluster connection, which is multiplexed per node already.
    pub(crate) async fn pooled(&self) -> Result<Pooled> {
        self.check_runtime()?;
        match &self.backend {
            Backend::Single(pool) => {
                // Boxed for the same reason as in `shared`: an acquire awaits this with
                // replica sync.
                let checkout = Box::pin(pool.get()).await?;
                Ok(Pooled {
                    conn: Conn::Single((*checkout).clone()),
                    _checkout: Some(checkout),
                })
            }
            Backend::Cluster(_) => Ok(Pooled {
                conn: self.shared().await?.conn,
                _checkout: None,
            }),
        }
    }

    /// The pause before retry number `attempt` (1-based): the configured delay plus up to as
    /// much again of random jitter.
    pub(crate) fn backoff(&self) -> Duration {
        let jitter = rand::rng().random_range(0.0..=1.0);
        self.retry_delay + self.retry_delay.mul_f64(jitter)
    }

    pub(crate) fn retry_attempts(&self) -> u32 {
        self.retry_attempts
    }

    /// Runs an idempotent operation on the shared connection, retrying failures to reach
    /// Redis up to the configured number of attempts.
    pub(crate) async fn with_retries<T, F, Fut>(&self, operation: F) -> Result<T>
    where
        F: FnMut(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        self.with_retries_on(None, operation).await
    }

    /// [`with_retries`](Connections::with_retries) on `pinned` when given: a command that
    /// must reach Redis after an earlier one on that connection (Redis orders the commands
    /// of one connection, not those of two).
    pub(crate) async fn with_retries_on<T, F, Fut>(
        &self,
        pinned: Option<Conn>,
        mut operation: F,
    ) -> Result<T>
    where
        F: FnMut(Conn) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let mut attempt = 1;
        loop {
            let outcome = match &pinned {
                Some(conn) => match self.check_runtime() {
                    Ok(()) => operation(conn.clone()).await.map_err(Error::from),
                    Err(e) => Err(e),
                },
                None => match self.shared().await {
                    Ok(shared) => {
                        let outcome = operation(shared.conn.clone()).await;
                        match &outcome {
                            Ok(_) => self.report_success(),
                            Err(e) => self.report(&shared, e),
                        }
                        outcome.map_err(Error::from)
                    }
                    Err(e) => Err(e),
                },
            };
            match outcome {
                Err(e) if e.is_connection_error() && attempt < self.retry_attempts => {
                    tracing::debug!(attempt, error = %e, "retrying a Redis command");
                    tokio::time::sleep(self.backoff()).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}
