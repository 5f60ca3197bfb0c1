//! [`Settings`]: every setting of one client, checked, and the redis-rs client they make.
//!
//! Filled in by the public [`ClientBuilder`](crate::ClientBuilder); read by the connection
//! layer, which never sees the builder.

use crate::util::lock_metrics::ClassRule;
use std::fmt;
use std::time::Duration;

use redis::{ConnectionAddr, ConnectionInfo};

use crate::config::sentinel::{MasterCredentials, SentinelEndpoints};
use crate::config::server_url::ServerUrl;
use crate::error::{Error, Result};
use crate::util::validate::{self, within};

/// The largest connection pool accepted: deadpool allocates its slots up front, and more
/// connections than this to one Redis only cost it memory.
const MAX_POOL_SIZE: usize = 1024;

/// The most locks one renewal call may carry: each is a key and an argument of one script
/// call, which blocks Redis while it runs.
const MAX_BATCH: usize = 10_000;

/// What a client connects to.
#[derive(Clone, Debug)]
pub(crate) enum Topology {
    /// One Redis, at [`Settings::url`].
    Standalone,
    /// A Redis Cluster, found from these seed nodes (the first is [`Settings::url`]).
    Cluster { seeds: Vec<ServerUrl> },
    /// A master found through these sentinels (the first is [`Settings::url`]) under
    /// `master_name`, followed when they fail it over.
    Sentinel {
        sentinels: Vec<ServerUrl>,
        master_name: String,
    },
}

/// How a cluster client's unlock messages travel: Redisson's `shardedSubscriptionMode`.
/// Set with [`ClientBuilder::pubsub_mode`](crate::ClientBuilder::pubsub_mode).
///
/// Clients that share locks must hear each other's unlock messages, and the two kinds of
/// pub/sub do not mix: a sharded subscriber (`SSUBSCRIBE`) hears only `SPUBLISH`, a classic
/// one (`SUBSCRIBE`) only `PUBLISH`. The scripts publish with the command of the client's
/// mode, passed to them as an argument as Redisson does. Match the Java side:
///
/// | Redisson's `shardedSubscriptionMode` | here | on a Redis 7 cluster |
/// |---|---|---|
/// | `AUTO` (its default, since 3.22.0) | [`Auto`](PubSubMode::Auto) (the default) | sharded on both sides |
/// | `ON` | [`Sharded`](PubSubMode::Sharded) | sharded |
/// | `OFF` (and Redisson before 3.22.0) | [`Classic`](PubSubMode::Classic) | classic |
///
/// `Auto` and `AUTO` both decide with `PUBSUB SHARDNUMSUB` when the client starts, so they
/// agree as long as both may run it: an ACL user without `+pubsub|shardnumsub` makes either
/// fall back to classic pub/sub. Where that may differ between services, name the mode on
/// both sides (`Sharded` and `ON`, or `Classic` and `OFF`).
///
/// On one Redis, pub/sub is always classic (Redisson ignores its setting there); `Sharded`
/// is refused by [`build`](crate::ClientBuilder::build) with
/// [`Error::InvalidArgument`], since a client meant for a
/// cluster would otherwise not hear the Java clients it shares locks with.
///
/// On a cluster, in either mode, each waiter subscribes on the master that owns its
/// channel's hash slot, one pub/sub connection per master, and the subscription follows the
/// slot through failovers and migrations (the [`transport`](crate::transport) docs, under
/// "Topologies", give the details and the figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PubSubMode {
    /// Redisson's `AUTO`: sharded pub/sub where the cluster supports it (Redis 7.0 and later,
    /// found by running `PUBSUB SHARDNUMSUB` on one node at [`build`](crate::ClientBuilder::build)),
    /// classic pub/sub otherwise and on one Redis.
    #[default]
    Auto,
    /// Classic `SUBSCRIBE`/`PUBLISH` (Redisson's `OFF`). On a cluster a `PUBLISH` crosses the
    /// cluster bus to every node; waiters still subscribe on their slot's master, where a
    /// fair lock's script counts them.
    Classic,
    /// `SSUBSCRIBE`/`SPUBLISH` on the master of each channel's slot (Redisson's `ON`): a
    /// message stays within the shard that owns the lock. Cluster clients only.
    Sharded,
}

/// The redis-rs clients a client's connections are opened from, made by
/// [`Settings::validated`].
#[derive(Clone, Default)]
pub(crate) struct Endpoints {
    /// One per node URL given (the URL, or each cluster seed), with the TLS certificates:
    /// the pool and the pub/sub connection open theirs from these. Empty for Sentinel,
    /// whose master is known only once the sentinels are asked.
    pub(crate) nodes: Vec<redis::Client>,
    /// The cluster client, for a cluster.
    pub(crate) cluster: Option<redis::cluster::ClusterClient>,
    /// The sentinels, for a Sentinel client.
    pub(crate) sentinel: Option<SentinelEndpoints>,
}

/// Settings of a client, checked by [`Settings::validated`].
///
/// `Debug` is derived, and safe to print: each setting that carries a secret has a type
/// whose own `Debug` hides it ([`ServerUrl`], [`TlsSettings`], [`MasterCredentials`]), as
/// a new secret setting must.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    /// The URL (standalone), the first seed (cluster) or the first sentinel: what messages
    /// name.
    pub(crate) url: ServerUrl,
    pub(crate) topology: Topology,
    pub(crate) pubsub: PubSubMode,
    pub(crate) key_prefix: String,
    pub(crate) watchdog_timeout: Duration,
    pub(crate) watchdog_batch_size: usize,
    pub(crate) connect_timeout: Duration,
    pub(crate) response_timeout: Duration,
    pub(crate) retry_attempts: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) subscribe_timeout: Duration,
    pub(crate) pool_size: usize,
    pub(crate) fair_waiter_timeout: Duration,
    /// The `fairLockWaitTimeout` of the Redisson clients sharing this client's fair queues.
    pub(crate) redisson_fair_lock_wait: Duration,
    /// Replicas to `WAIT` for after lock writes, and for how long; `None`: no waiting.
    pub(crate) replica_sync: Option<(usize, Duration)>,
    /// Whether a server whose `maxmemory-policy` may evict keys is accepted.
    pub(crate) allow_evicting_policy: bool,
    /// How often the pub/sub connection is pinged while it waits for messages.
    pub(crate) ping_interval: Duration,
    pub(crate) tls: TlsSettings,
    /// A Sentinel client's credentials for the master, when not the sentinels'.
    pub(crate) master_credentials: Option<MasterCredentials>,
    /// Whether waiting calls record themselves in the wait registry.
    pub(crate) wait_registry: bool,
    /// How long a registered wait lasts before it logs a warning.
    pub(crate) long_wait_warning: Duration,
    /// How this client names itself in the wait registry.
    pub(crate) client_name: std::sync::Arc<str>,
    /// How a lock's name becomes the `class` label of its metrics.
    pub(crate) class_rule: ClassRule,
    /// The most classes a client gives its metrics; past it, `other`.
    pub(crate) max_lock_classes: usize,
}

/// The default [`Settings::client_name`]: the host's name and the process id, which is
/// what someone reading the registry on call needs to find the process.
fn default_client_name() -> std::sync::Arc<str> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|host| host.trim().to_string())
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "unknown-host".to_string());
    format!("{host}:{}", std::process::id()).into()
}

/// Certificates for `rediss://` URLs, beyond the system's trusted roots.
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// PEM: the certificate authorities to trust instead of the system's.
    pub(crate) root_certificate: Option<Vec<u8>>,
    /// PEM: the client's certificate chain and private key, for mutual TLS.
    pub(crate) client_certificate: Option<(Vec<u8>, Vec<u8>)>,
}

impl TlsSettings {
    pub(crate) fn is_set(&self) -> bool {
        self.root_certificate.is_some() || self.client_certificate.is_some()
    }

    /// The certificates as redis-rs takes them.
    #[cfg(feature = "tls")]
    fn certificates(&self) -> redis::TlsCertificates {
        let client_tls =
            self.client_certificate
                .as_ref()
                .map(|(chain, key)| redis::ClientTlsConfig {
                    client_cert: chain.clone(),
                    client_key: key.clone(),
                });
        redis::TlsCertificates {
            client_tls,
            root_cert: self.root_certificate.clone(),
        }
    }
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Neither certificate is secret, but the key is: print what is set, never contents.
        f.debug_struct("TlsSettings")
            .field("root_certificate", &self.root_certificate.is_some())
            .field("client_certificate", &self.client_certificate.is_some())
            .finish()
    }
}

impl Settings {
    /// The defaults, for `url`.
    pub(crate) fn new(url: String) -> Self {
        Settings {
            url: ServerUrl::new(url),
            topology: Topology::Standalone,
            pubsub: PubSubMode::Auto,
            key_prefix: String::new(),
            watchdog_timeout: Duration::from_secs(30),
            watchdog_batch_size: 100,
            connect_timeout: Duration::from_secs(2),
            response_timeout: Duration::from_secs(1),
            retry_attempts: 3,
            retry_delay: Duration::from_millis(100),
            subscribe_timeout: Duration::from_secs(5),
            pool_size: 4,
            fair_waiter_timeout: Duration::from_secs(5),
            redisson_fair_lock_wait: Duration::ZERO,
            replica_sync: None,
            allow_evicting_policy: false,
            ping_interval: Duration::from_secs(5),
            tls: TlsSettings::default(),
            master_credentials: None,
            wait_registry: false,
            long_wait_warning: Duration::from_secs(60),
            client_name: default_client_name(),
            class_rule: ClassRule::One,
            max_lock_classes: 64,
        }
    }

    /// The defaults, for a cluster reached through `seeds`.
    pub(crate) fn cluster(seeds: Vec<String>) -> Self {
        Settings::through(seeds, |seeds| Topology::Cluster { seeds })
    }

    /// The defaults, for the master the `sentinels` monitor as `master_name`.
    pub(crate) fn sentinel(sentinels: Vec<String>, master_name: String) -> Self {
        Settings::through(sentinels, |sentinels| Topology::Sentinel {
            sentinels,
            master_name,
        })
    }

    /// The defaults, for the `topology` reached through `urls`, the first of which
    /// messages name.
    fn through(urls: Vec<String>, topology: impl FnOnce(Vec<ServerUrl>) -> Topology) -> Self {
        let mut settings = Settings::new(urls.first().cloned().unwrap_or_default());
        settings.topology = topology(urls.into_iter().map(ServerUrl::new).collect());
        settings
    }

    /// Checks every setting against its documented range, and makes the redis-rs clients
    /// every connection of the client is opened from (a malformed URL or certificate fails
    /// here, before anything is sent).
    pub(crate) fn validated(self) -> Result<(Self, Endpoints)> {
        let s = self;
        let ms = Duration::from_millis;
        let secs = Duration::from_secs;
        let day = secs(86_400);
        within("watchdog_timeout", s.watchdog_timeout, ms(10), day)?;
        within("watchdog_batch_size", s.watchdog_batch_size, 1, MAX_BATCH)?;
        within("connect_timeout", s.connect_timeout, ms(1), secs(300))?;
        within("response_timeout", s.response_timeout, ms(1), secs(300))?;
        within("subscribe_timeout", s.subscribe_timeout, ms(1), secs(3600))?;
        within("retry_attempts", s.retry_attempts, 1, 100)?;
        within("retry_delay", s.retry_delay, Duration::ZERO, secs(60))?;
        within("fair_waiter_timeout", s.fair_waiter_timeout, ms(100), day)?;
        let fair_lock_wait = s.redisson_fair_lock_wait;
        within("redisson_fair_lock_wait", fair_lock_wait, ms(0), day)?;
        within("pool_size", s.pool_size, 2, MAX_POOL_SIZE)?;
        within("ping_interval", s.ping_interval, ms(100), secs(3600))?;
        validate::key_length("key_prefix", &s.key_prefix)?;
        within("long_wait_warning", s.long_wait_warning, ms(10), day)?;
        within("max_lock_classes", s.max_lock_classes, 1, 10_000)?;
        if s.client_name.is_empty() || s.client_name.len() > 256 {
            return Err(Error::invalid(format!(
                "client_name must be 1 to 256 bytes long, got {} bytes",
                s.client_name.len()
            )));
        }
        if let Some((replicas, timeout)) = s.replica_sync {
            within("replica_sync replicas", replicas, 1, 1000)?;
            if timeout < ms(1) || timeout >= s.response_timeout {
                return Err(Error::invalid(format!(
                    "the replica_sync timeout must be at least 1 ms and shorter than the \
                     response timeout ({:?}), got {timeout:?}",
                    s.response_timeout
                )));
            }
        }
        // Sharded pub/sub exists on a cluster only; Redisson ignores its setting off a
        // cluster, but a client asked for it on one Redis was most likely meant for a
        // cluster, and would not hear Java clients that were.
        if s.pubsub == PubSubMode::Sharded && !matches!(s.topology, Topology::Cluster { .. }) {
            return Err(Error::invalid(
                "PubSubMode::Sharded needs a Redis Cluster client (Client::cluster_builder): \
                 on one Redis or a Sentinel master use PubSubMode::Auto or PubSubMode::Classic",
            ));
        }
        let endpoints = match &s.topology {
            Topology::Standalone => Endpoints {
                nodes: vec![s.redis_client(&s.url)?],
                ..Endpoints::default()
            },
            Topology::Cluster { seeds } if seeds.is_empty() => {
                return Err(Error::invalid(
                    "a cluster client needs at least one seed URL",
                ))
            }
            Topology::Cluster { seeds } => {
                let nodes = seeds.iter().map(|seed| s.redis_client(seed));
                let nodes = nodes.collect::<Result<Vec<_>>>()?;
                Endpoints {
                    cluster: Some(s.cluster_client(seeds, &nodes)?),
                    nodes,
                    ..Endpoints::default()
                }
            }
            Topology::Sentinel {
                sentinels,
                master_name,
            } => Endpoints {
                sentinel: Some(SentinelEndpoints::new(
                    sentinels,
                    master_name,
                    s.master_credentials.as_ref(),
                    &s.tls,
                )?),
                ..Endpoints::default()
            },
        };
        if s.master_credentials.is_some() && !matches!(s.topology, Topology::Sentinel { .. }) {
            return Err(Error::invalid(
                "master_credentials is for Sentinel clients: put the credentials in the URL",
            ));
        }
        Ok((s, endpoints))
    }

    /// The redis-rs cluster client: retries off, so that redis-rs never sends a script
    /// again after it may have run (the crate retries only what certainly did not run), and
    /// the client's timeouts on every node. Credentials and TLS come from the seed URLs.
    fn cluster_client(
        &self,
        seeds: &[ServerUrl],
        nodes: &[redis::Client],
    ) -> Result<redis::cluster::ClusterClient> {
        let infos = nodes.iter().map(|n| n.get_connection_info().clone());
        #[allow(unused_mut)]
        let mut builder = redis::cluster::ClusterClient::builder(infos)
            .retries(0)
            .connection_timeout(self.connect_timeout)
            .response_timeout(self.response_timeout);
        #[cfg(feature = "tls")]
        if self.tls.is_set() {
            builder = builder.certs(self.tls.certificates());
        }
        builder.build().map_err(|e| {
            let mut message = e.to_string();
            for seed in seeds {
                message = seed.scrub(&message);
            }
            Error::invalid(format!("invalid cluster seeds: {message}"))
        })
    }

    /// The redis-rs client for `url`, with its TLS certificates: what every connection
    /// to that node (pooled, shared, pub/sub) is opened from.
    fn redis_client(&self, url: &ServerUrl) -> Result<redis::Client> {
        use redis::IntoConnectionInfo;
        let info = url.raw().into_connection_info().map_err(|e| {
            if url.raw().starts_with("rediss://") && !cfg!(feature = "tls") {
                Error::invalid(format!(
                    "invalid Redis URL `{url}`: rediss:// needs the `tls` feature of \
                     redis-rlock (on by default)"
                ))
            } else {
                url.invalid("Redis URL", &e)
            }
        })?;
        client_with_tls(&self.tls, url, info)
    }
}

/// `info`'s settings (credentials, database, TLS) for the node at `host:port`.
pub(crate) fn at_address(info: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let mut addr = info.addr().clone();
    match &mut addr {
        ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => (*h, *p) = (host.to_string(), port),
        _ => addr = ConnectionAddr::Tcp(host.to_string(), port),
    }
    info.clone().set_addr(addr)
}

/// The redis-rs client for `info` (the node `url` names), with the TLS certificates.
pub(crate) fn client_with_tls(
    tls: &TlsSettings,
    url: &ServerUrl,
    info: ConnectionInfo,
) -> Result<redis::Client> {
    #[cfg(feature = "tls")]
    if matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
        install_crypto_provider();
    }
    if !tls.is_set() {
        return redis::Client::open(info).map_err(|e| url.invalid("Redis URL", &e));
    }
    #[cfg(not(feature = "tls"))]
    return Err(Error::invalid(
        "TLS certificates need the `tls` feature of redis-rlock (on by default)",
    ));
    #[cfg(feature = "tls")]
    tls_client(tls, url, info)
}

#[cfg(feature = "tls")]
fn tls_client(tls: &TlsSettings, url: &ServerUrl, info: ConnectionInfo) -> Result<redis::Client> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    if !matches!(info.addr(), ConnectionAddr::TcpTls { .. }) {
        return Err(Error::invalid(format!(
            "TLS certificates were given for `{url}`, which does not use TLS: use rediss://"
        )));
    }
    let certificates = |what: &str, pem: &[u8]| -> Result<()> {
        let parsed: std::result::Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
        match parsed {
            Ok(chain) if !chain.is_empty() => Ok(()),
            Ok(_) => Err(Error::invalid(format!(
                "the {what} holds no PEM certificate"
            ))),
            Err(e) => Err(Error::invalid(format!("the {what} is not valid PEM: {e}"))),
        }
    };
    if let Some(root) = &tls.root_certificate {
        certificates("TLS root certificate", root)?;
    }
    if let Some((chain, key)) = &tls.client_certificate {
        certificates("TLS client certificate", chain)?;
        // The parser's error never quotes the key.
        PrivateKeyDer::from_pem_slice(key).map_err(|e| {
            Error::invalid(format!("the TLS client key is not a PEM private key: {e}"))
        })?;
    }
    redis::Client::build_with_tls(info, tls.certificates())
        .map_err(|e| Error::invalid(format!("TLS settings for `{url}`: {e}")))
}

/// rustls needs a process-wide crypto provider when more than one is compiled in (another
/// crate of the application may enable aws-lc-rs besides this crate's ring): install ring
/// unless the application installed one.
#[cfg(feature = "tls")]
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Fails only if another thread installed one meanwhile, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}
