//! [`MasterWatch`]: which node is a Sentinel client's master, asked of the sentinels and
//! followed through failovers.
//!
//! A failover leaves the old master writable until the sentinels reconfigure it, about 10 s
//! later (they turn it into a replica only when their periodic `INFO` still finds it
//! claiming to be a master: [sentinel.c, `sentinelRefreshInstanceInfo`](https://github.com/redis/redis/blob/7.0/src/sentinel.c)).
//! Waiting for its `READONLY` would let two clients hold one lock meanwhile, one on each
//! master. So the watch does not wait for the old master to refuse writes: it subscribes to
//! `+switch-master` on a sentinel, which the sentinels publish the moment they name the new
//! master, and asks `SENTINEL GET-MASTER-ADDR-BY-NAME` every [`POLL_INTERVAL`] besides, in
//! case that message is missed (a sentinel connection lost or moved at the wrong time). A
//! failed lock call on the master's connection (`READONLY`, a lost connection) makes it ask
//! at once.
//!
//! The connections and the unlock listener read [`MasterWatch::current`] and move to a new
//! master as soon as it changes; the services told of reconnections (watchdog, fixed-lease
//! check) then check every held lock on the new master, so a lock the failover lost is
//! reported at once.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::MultiplexedConnection;
use tokio::sync::{watch, Notify};

use crate::config::sentinel::SentinelEndpoints;
use crate::config::server_url::ServerUrl;
use crate::error::{Error, Result};
use crate::transport::bounded::within;
use crate::transport::reconnects::Reconnects;

/// How often the sentinels are asked for the master besides listening for `+switch-master`:
/// the bound on how long a missed message leaves the client on the old master.
const POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The master as the sentinels last named it.
pub(crate) struct Master {
    pub(crate) host: String,
    pub(crate) port: u16,
    /// Connections to the master are opened from this (credentials, database, TLS).
    pub(crate) client: redis::Client,
    /// How messages name the master (`redis://host:port`).
    pub(crate) url: ServerUrl,
    /// 1 for the first master found, one more at each change.
    pub(crate) generation: u64,
}

struct Inner {
    sentinels: Sentinels,
    current: watch::Sender<Arc<Master>>,
    /// [`Master::generation`] of `current`, readable without a lock on every lock call.
    generation: AtomicU64,
    /// The sentinel asked first next time: the last one that answered.
    next_sentinel: AtomicUsize,
    /// Wakes the follower to ask the sentinels now.
    ask_now: Notify,
    reconnects: Arc<Reconnects>,
}

/// The master of a Sentinel client, kept current by a background task. Clones share it;
/// the task ends when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct MasterWatch {
    inner: Arc<Inner>,
}

impl MasterWatch {
    /// Asks the sentinels for the master (each in turn until one names it), then follows
    /// it in a task on the current runtime.
    ///
    /// # Errors
    /// [`Error::UnsupportedServer`] when the sentinels that answer know no master of that
    /// name; the last sentinel's connection error, or [`Error::Timeout`], when none answers.
    pub(crate) async fn start(
        endpoints: SentinelEndpoints,
        connect_timeout: Duration,
        response_timeout: Duration,
        reconnects: Arc<Reconnects>,
        closing: tokio_util::sync::CancellationToken,
    ) -> Result<Self> {
        let sentinels = Sentinels {
            endpoints,
            connect_timeout,
            response_timeout,
        };
        let (index, (host, port)) = sentinels.ask_all(0, &mut None).await?;
        let master = sentinels.master(host, port, 1)?;
        let inner = Arc::new(Inner {
            sentinels,
            current: watch::Sender::new(Arc::new(master)),
            generation: AtomicU64::new(1),
            next_sentinel: AtomicUsize::new(index),
            ask_now: Notify::new(),
            reconnects,
        });
        // Until the client's connections go, rather than until it next finds them gone.
        tokio::spawn(closing.run_until_cancelled_owned(follow(Arc::downgrade(&inner))));
        Ok(MasterWatch { inner })
    }

    /// The master as last named.
    pub(crate) fn current(&self) -> Arc<Master> {
        self.inner.current.borrow().clone()
    }

    /// The current master's [`generation`](Master::generation), cheaply.
    pub(crate) fn generation(&self) -> u64 {
        self.inner.generation.load(Ordering::Acquire)
    }

    /// Told of every change of master.
    pub(crate) fn changes(&self) -> watch::Receiver<Arc<Master>> {
        self.inner.current.subscribe()
    }

    /// A call on the master failed in a way a failover explains (`READONLY`, a lost
    /// connection): ask the sentinels now rather than at the next poll.
    pub(crate) fn suspect(&self) {
        self.inner.ask_now.notify_one();
    }
}

/// The sentinels, each asked within the client's timeouts.
struct Sentinels {
    endpoints: SentinelEndpoints,
    connect_timeout: Duration,
    response_timeout: Duration,
}

/// The sentinel asked last, and the connection to it, kept for the next question.
type Cached = Option<(usize, MultiplexedConnection)>;

impl Inner {
    /// Installs `(host, port)` as the master if it is a new one, and tells everyone.
    fn install(&self, host: String, port: u16) {
        let current = self.current.borrow().clone();
        if current.host == host && current.port == port {
            return;
        }
        let master = match self.sentinels.master(host, port, current.generation + 1) {
            Ok(master) => master,
            Err(e) => {
                tracing::warn!(error = %e, "cannot connect to the master the sentinels name");
                return;
            }
        };
        tracing::info!(
            master_name = %self.sentinels.endpoints.master_name,
            from = %current.url,
            to = %master.url,
            "the sentinels switched the master; following it"
        );
        let generation = master.generation;
        self.current.send_replace(Arc::new(master));
        self.generation.store(generation, Ordering::Release);
        // A failover may have lost locks the replica never got: the watchdog and the
        // fixed-lease check look on the new master at once.
        self.reconnects.tell();
    }
}

impl Sentinels {
    /// The master at `host:port`, the `generation`th named.
    fn master(&self, host: String, port: u16, generation: u64) -> Result<Master> {
        let (client, url) = self.endpoints.master(&host, port)?;
        Ok(Master {
            host,
            port,
            client,
            url,
            generation,
        })
    }

    /// The master's address from the first sentinel that names it, starting at `first`,
    /// with that sentinel's index.
    async fn ask_all(&self, first: usize, cached: &mut Cached) -> Result<(usize, (String, u16))> {
        let count = self.endpoints.sentinels.len();
        let mut failure = None;
        for step in 0..count {
            let index = (first + step) % count;
            match self.ask(index, cached).await {
                Ok(Some(addr)) => return Ok((index, addr)),
                Ok(None) => {
                    failure = Some(Error::UnsupportedServer {
                        url: self.endpoints.sentinel_urls[index].to_string(),
                        reason: format!(
                            "the sentinel monitors no master named `{}`",
                            self.endpoints.master_name
                        ),
                    })
                }
                Err(e) => failure = Some(e),
            }
        }
        Err(failure.unwrap_or_else(|| Error::invalid("no sentinel to ask")))
    }

    /// One sentinel's answer: the address, or `None` when it knows no such master.
    async fn ask(&self, index: usize, cached: &mut Cached) -> Result<Option<(String, u16)>> {
        let url = &self.endpoints.sentinel_urls[index];
        let mut conn = match cached.take() {
            Some((cached, conn)) if cached == index => conn,
            _ => {
                let sentinel = &self.endpoints.sentinels[index];
                let connecting = sentinel.get_multiplexed_async_connection();
                within(self.connect_timeout, "connecting to a sentinel", connecting).await?
            }
        };
        let mut command = redis::cmd("SENTINEL");
        command
            .arg("GET-MASTER-ADDR-BY-NAME")
            .arg(&self.endpoints.master_name);
        let asked = command.query_async::<Option<(String, u16)>>(&mut conn);
        let during = "asking a sentinel for the master";
        match within(self.response_timeout, during, asked).await {
            Ok(addr) => {
                *cached = Some((index, conn));
                Ok(addr)
            }
            // A server that is no sentinel refuses the command: say so, rather than pass
            // on "unknown command" (refused credentials keep their own error).
            Err(Error::Redis(e)) if e.code() == Some("ERR") => Err(Error::UnsupportedServer {
                url: url.to_string(),
                reason: format!(
                    "it did not answer as a sentinel: {}",
                    url.scrub(&e.to_string())
                ),
            }),
            Err(e) => Err(e),
        }
    }
}

/// The follower task: listens for `+switch-master` on one sentinel, asks every
/// [`POLL_INTERVAL`] and whenever a call on the master looks like a failover, and installs
/// each new master. Ends when the watch is dropped.
async fn follow(inner: Weak<Inner>) {
    let mut poll = tokio::time::interval(POLL_INTERVAL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll.tick().await;
    let mut cached = None;
    loop {
        let Some(watch) = inner.upgrade() else { return };
        let sentinels = &watch.sentinels;
        let index =
            watch.next_sentinel.load(Ordering::Relaxed) % sentinels.endpoints.sentinels.len();
        let sentinel = sentinels.endpoints.sentinels[index].clone();
        let limit = sentinels.connect_timeout + sentinels.response_timeout;
        drop(watch);
        let subscribed = async {
            let mut pubsub = sentinel.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, redis::RedisError>(pubsub.into_on_message())
        };
        // On a failure polling goes on; subscribing is tried again after the next poll, on
        // the sentinel that answers it.
        let mut messages = tokio::time::timeout(limit, subscribed)
            .await
            .ok()
            .and_then(Result::ok);
        loop {
            let Some(watch) = inner.upgrade() else { return };
            let heard = async {
                match messages.as_mut() {
                    Some(stream) => stream.next().await.map(drop),
                    None => std::future::pending().await,
                }
            };
            let subscription_lost = tokio::select! {
                _ = poll.tick() => messages.is_none(),
                _ = watch.ask_now.notified() => false,
                heard = heard => heard.is_none(),
            };
            let first = watch.next_sentinel.load(Ordering::Relaxed);
            match watch.sentinels.ask_all(first, &mut cached).await {
                Ok((index, (host, port))) => {
                    watch.next_sentinel.store(index, Ordering::Relaxed);
                    watch.install(host, port);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no sentinel named the master");
                    watch.next_sentinel.fetch_add(1, Ordering::Relaxed);
                }
            }
            if subscription_lost {
                break;
            }
        }
    }
}
