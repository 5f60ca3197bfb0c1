//! [`Core`]: what one client is made of (its id, settings, connections, local holds,
//! unlock listener and background services) and the runtime they run on.
//!
//! The public [`Client`](crate::Client) is a handle on a `Core`, and so is every lock it
//! makes: lock code reaches the client's services here, below it, and never imports the
//! public type. A client that makes lock handles and lock code that needs the client's
//! services meet in this module instead of in an import cycle.

use crate::util::lock_metrics::Classes;
use std::sync::Arc;

use uuid::Uuid;

use crate::config::server_url::ServerUrl;
use crate::config::settings::{Endpoints, PubSubMode, Settings};
use crate::error::{Error, Result};
use crate::holds::Holds;
use crate::protocol::batch::Batcher;
use crate::protocol::channels::ChannelKind;
use crate::protocol::kinds;
use crate::protocol::scripts::{AcquireItem, UnlockItem};
use crate::services::heartbeat::Heartbeat;
use crate::services::latches::LatchReaper;
use crate::services::lease_check::LeaseCheck;
use crate::services::watchdog::Watchdog;
use crate::transport::connections::Connections;
use crate::transport::permissions::CommandCheck;
use crate::transport::pubsub::UnlockListener;
use crate::transport::reconnects::Reconnects;
use crate::transport::replica_sync::ReplicaSync;
use crate::transport::server_check;
use crate::util::lifecycle::Background;
use handed_out::HandedOut;

pub(crate) mod handed_out;

/// One client's connections, state and services; shared by the client's handles and locks.
pub(crate) struct Core {
    pub(crate) id: Uuid,
    /// `id` as it appears in hash fields, formatted once.
    pub(crate) id_text: String,
    pub(crate) settings: Settings,
    pub(crate) connections: Arc<Connections>,
    pub(crate) holds: Arc<Holds>,
    /// Every guard handed out and not yet released, for the shutdown to release.
    pub(crate) handed_out: HandedOut,
    pub(crate) watchdog: Watchdog,
    /// Checks fixed-lease holds after a reconnection.
    pub(crate) lease_check: LeaseCheck,
    pub(crate) heartbeat: Heartbeat,
    pub(crate) listener: UnlockListener,
    /// How unlock messages travel: classic, or sharded on a cluster (see
    /// [`PubSubMode`]).
    pub(crate) channel_kind: ChannelKind,
    pub(crate) latches: LatchReaper,
    /// Coalesces concurrent acquires of plain locks into multi-key script calls.
    pub(crate) acquires: Arc<Batcher<AcquireItem>>,
    /// Coalesces concurrent releases of plain locks likewise.
    pub(crate) releases: Arc<Batcher<UnlockItem>>,
    /// Set when lock writes must reach a replica before they count.
    pub(crate) replica_sync: Option<Arc<ReplicaSync>>,
    /// Whether the user may run each lock kind's commands, checked at its first use.
    pub(crate) commands: CommandCheck,
    /// The `class` label of each lock handle's metrics.
    pub(crate) classes: Classes,
    /// The runtime the client was built on, where its connections are driven and its
    /// clean-up work runs.
    background: Background,
}

impl Drop for Core {
    /// The client's last handle is gone: no guard, lock handle or background release is
    /// left (each holds the core), so what remains is the request latches waiting for their
    /// batch (a cluster client's synchronizer count changes'; lock releases write none),
    /// sent now while the connections are still here.
    fn drop(&mut self) {
        self.latches.send_pending();
    }
}

impl Core {
    /// `endpoints`: the redis-rs clients of the settings' URLs and certificates.
    pub(crate) async fn start(settings: Settings, endpoints: Endpoints) -> Result<Arc<Core>> {
        // Background tasks (watchdog, unlock listener) run here, where the connections'
        // drivers run too, so that a lock call from another runtime cannot tie them to a
        // runtime that may go away first.
        let runtime = tokio::runtime::Handle::current();
        let reconnects = Arc::new(Reconnects::default());
        let connections = match Connections::open(&settings, &endpoints, reconnects.clone()).await {
            Ok(connections) => Arc::new(connections),
            Err(e) => return Err(first_contact(&settings.url, e).await),
        };
        let master = connections.master_watch().cloned();
        // What messages name: the master the sentinels found, rather than a sentinel.
        let master_url = master.as_ref().map(|watch| watch.current().url.clone());
        let url = master_url.as_ref().unwrap_or(&settings.url);
        let mut conn = connections.shared().await?.conn;
        // On a cluster, the connection read the slot map from a seed already; PING would go
        // to every master and fail the start for one that is down.
        if !conn.is_cluster() {
            let pong: String = match redis::cmd("PING").query_async(&mut conn).await {
                Ok(pong) => pong,
                Err(e) => return Err(first_contact(url, e.into()).await),
            };
            if pong != "PONG" {
                return Err(Error::NotRedis {
                    url: url.to_string(),
                    detail: format!("PING answered `{pong}`"),
                });
            }
        }
        server_check::check_server(&mut conn, url, settings.allow_evicting_policy).await?;
        let cluster = conn.is_cluster();
        let channel_kind = match settings.pubsub {
            // Refused off a cluster by the settings' validation.
            PubSubMode::Sharded => ChannelKind::Sharded,
            PubSubMode::Auto
                if cluster && server_check::supports_sharded_pubsub(&mut conn).await =>
            {
                ChannelKind::Sharded
            }
            PubSubMode::Auto | PubSubMode::Classic => ChannelKind::Classic,
        };
        let listener = UnlockListener::new(
            &endpoints.nodes,
            cluster,
            master,
            channel_kind,
            settings.connect_timeout,
            settings.subscribe_timeout,
            settings.ping_interval,
            reconnects,
            runtime.clone(),
        )?;
        let holds = Arc::new(Holds::default());
        let background = connections.lifecycle.background(runtime.clone());
        let latches = LatchReaper::new(&connections, background.clone());
        let replica_sync = settings
            .replica_sync
            .map(|(replicas, timeout)| Arc::new(ReplicaSync::new(replicas, timeout)));
        let watchdog = Watchdog::renewing(&holds, &connections, &settings, &replica_sync, &runtime);
        let lease_check = LeaseCheck::checking(&holds, &connections, &settings, &runtime);
        let heartbeat = Heartbeat::keeping_places(&connections, &listener, &settings, &runtime);
        let id = Uuid::new_v4();
        // At INFO, once per client: the line that maps a holder's client id, as `rlock show`
        // prints it, to this process.
        tracing::info!(client = %id, url = %settings.url, ?channel_kind, "connected");
        crate::util::metrics::describe();
        Ok(Arc::new(Core {
            id,
            id_text: id.to_string(),
            commands: CommandCheck::new(settings.replica_sync.is_some(), channel_kind),
            classes: Classes::new(
                settings.class_rule.clone(),
                settings.max_lock_classes,
                &kinds::LABELS,
            ),
            settings,
            holds,
            handed_out: HandedOut::default(),
            watchdog,
            lease_check,
            heartbeat,
            listener,
            channel_kind,
            latches,
            acquires: Batcher::new(runtime.clone(), cluster),
            releases: Batcher::new(runtime.clone(), cluster),
            replica_sync,
            background,
            connections,
        }))
    }

    /// Runs clean-up work (a release from a `Drop`, the undo of an abandoned acquire) on the
    /// client's runtime, which drives its connections: it works from a `Drop` outside any
    /// runtime too, does not die with a caller's runtime that is shutting down, and is
    /// waited for by [`Client::shutdown`](crate::Client::shutdown). If the client's own
    /// runtime is gone, nothing can be sent: locks expire with their leases.
    pub(crate) fn spawn(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        self.background.spawn(work);
    }

    /// Where clean-up work runs (see [`Core::spawn`]).
    pub(crate) fn background(&self) -> &Background {
        &self.background
    }

    /// Counts a release (a guard's, from any task) as on its way until the token drops, so
    /// that a shutdown waits for it before it closes the connections.
    pub(crate) fn track(&self) -> tokio_util::task::task_tracker::TaskTrackerToken {
        self.connections.lifecycle.track()
    }

    /// Counts a call that may take something (an acquire, a wait for permits) as on its
    /// way until the token drops, so that a shutdown waits for it; or refuses it with
    /// [`Error::ShutDown`] once a shutdown has begun.
    pub(crate) fn admit(&self) -> Result<tokio_util::task::task_tracker::TaskTrackerToken> {
        self.connections.lifecycle.admit()
    }
}

/// The first failure to reach the server, in words for a user who may have the wrong
/// address: a reply redis-rs cannot parse means something else listens there.
async fn first_contact(url: &ServerUrl, error: Error) -> Error {
    match error {
        // A cluster client's first `CLUSTER SLOTS`, answered by a Redis not in cluster mode.
        Error::Redis(e) if e.to_string().contains("cluster support disabled") => {
            Error::UnsupportedServer {
                url: url.to_string(),
                reason: "it does not run in cluster mode; connect to it with Client::connect"
                    .to_string(),
            }
        }
        Error::Redis(e) if e.kind() == redis::ErrorKind::Parse => Error::NotRedis {
            url: url.to_string(),
            detail: what_answered(url).await,
        },
        other => other,
    }
}

/// What the server at `url` answers to a plain `PING`, in words: its first line, quoted and
/// escaped (an HTTP server's status line, a TLS alert's bytes), rather than the parser
/// error redis-rs gives (`Unexpected \`72\``). One short-lived connection, bounded in time,
/// on an error path.
async fn what_answered(url: &ServerUrl) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let unknown = "it answered something that is not the Redis protocol".to_string();
    let Ok(info) = redis::IntoConnectionInfo::into_connection_info(url.raw()) else {
        return unknown;
    };
    let (host, port) = match info.addr() {
        redis::ConnectionAddr::Tcp(host, port)
        | redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
        _ => return unknown,
    };
    let answer = async {
        let mut stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        stream.write_all(b"PING\r\n").await?;
        let mut buffer = [0; 64];
        let read = stream.read(&mut buffer).await?;
        std::io::Result::Ok(buffer[..read].to_vec())
    };
    match tokio::time::timeout(std::time::Duration::from_secs(1), answer).await {
        Ok(Ok(bytes)) if !bytes.is_empty() => {
            let line = bytes.split(|b| *b == b'\n').next().unwrap_or(&bytes);
            let shown: String = line
                .iter()
                .flat_map(|b| std::ascii::escape_default(*b))
                .map(char::from)
                .collect();
            format!(
                "it answered `{}`, not the Redis protocol",
                url.scrub(&shown)
            )
        }
        _ => unknown,
    }
}
