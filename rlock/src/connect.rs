//! Reaching Redis as the library does: one server, every master of a cluster, or the master
//! Sentinel names; with the same URLs, TLS files, credentials and key prefix.
//!
//! The inspector reads with plain redis-rs connections of its own, one per master: `SCAN`
//! and `PUBSUB NUMSUB` answer for the node asked only, so a cluster is read node by node,
//! and every key is read on the master of its slot. Force-unlocking goes through the
//! library's own client ([`Target::library_client`]), so that the kind's script runs.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, Value};
use redis_rlock::redact_url;

use crate::args::{Connection, DEFAULT_URL};
use crate::exit::Failure;
use crate::reply::masters_of;
use crate::shell::quote;

/// Where Redis is and how to talk to it, from the command line.
#[derive(Debug)]
pub struct Target {
    /// One server, a cluster or Sentinel.
    pub topology: Topology,
    /// `--tls-ca`, read.
    pub tls_ca: Option<Vec<u8>>,
    /// `--tls-cert` and `--tls-key`, read.
    pub tls_client: Option<(Vec<u8>, Vec<u8>)>,
    /// Connect and command timeout.
    pub timeout: Duration,
    /// The library's `key_prefix`.
    pub key_prefix: String,
    /// The connection flags as given, secrets as `***`: the start of the `rlock` commands
    /// that `leaks` suggests. Empty for the default URL or `REDIS_URL`.
    pub shown_flags: String,
    /// The TLS flags of the `redis-cli` commands that `leaks` suggests.
    pub redis_cli_tls: String,
}

/// The three ways the library connects.
#[derive(Debug)]
pub enum Topology {
    /// `--url`, `REDIS_URL` or the default.
    Single(String),
    /// `--cluster` seeds.
    Cluster(Vec<String>),
    /// `--sentinel` URLs and `--master`, with the master's own credentials if given.
    Sentinel {
        /// The sentinels' URLs.
        sentinels: Vec<String>,
        /// The monitored master's name.
        master: String,
        /// `--master-user`, `--master-password`.
        credentials: Option<(Option<String>, String)>,
    },
}

/// One master the inspector reads from.
pub struct Node {
    /// `host:port`, as printed.
    pub addr: String,
    /// Its connection.
    pub conn: MultiplexedConnection,
    /// How it was reached: for the `redis-cli` commands `leaks` suggests.
    pub info: ConnectionInfo,
    /// The hash slots it serves (inclusive ranges); every slot for a single server.
    pub slots: Vec<(u16, u16)>,
}

/// Every master of the deployment, connected.
pub struct Nodes {
    /// In slot order for a cluster; one node otherwise.
    pub nodes: Vec<Node>,
    /// Whether this is a Redis Cluster (some commands then say that they count per node).
    pub cluster: bool,
}

impl Target {
    /// The target the flags describe; reads the TLS files.
    ///
    /// # Errors
    /// A usage failure for an unreadable file.
    pub fn from_args(args: &Connection) -> Result<Target, Failure> {
        let read = |path: &std::path::Path| {
            std::fs::read(path)
                .map_err(|e| Failure::usage(format!("cannot read {}: {e}", path.display())))
        };
        let tls_ca = args.tls_ca.as_deref().map(read).transpose()?;
        let tls_client = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
            _ => None,
        };
        let mut shown = Vec::new();
        let mut redis_cli_tls = Vec::new();
        for (flag, path) in [
            ("--cacert", &args.tls_ca),
            ("--cert", &args.tls_cert),
            ("--key", &args.tls_key),
        ] {
            if let Some(path) = path {
                redis_cli_tls.push(format!("{flag} {}", quote(&path.display().to_string())));
            }
        }
        let topology = if !args.cluster.is_empty() {
            shown.push(format!(
                "--cluster {}",
                quote(&redacted_list(&args.cluster))
            ));
            Topology::Cluster(args.cluster.clone())
        } else if !args.sentinel.is_empty() {
            let master = args.master.clone().unwrap_or_default();
            shown.push(format!(
                "--sentinel {} --master {}",
                quote(&redacted_list(&args.sentinel)),
                quote(&master)
            ));
            Topology::Sentinel {
                sentinels: args.sentinel.clone(),
                master,
                credentials: args
                    .master_password
                    .clone()
                    .map(|password| (args.master_user.clone(), password)),
            }
        } else {
            match &args.url {
                Some(url) => {
                    shown.push(format!("--url {}", quote(&redact_url(url))));
                    Topology::Single(url.clone())
                }
                None => Topology::Single(
                    std::env::var("REDIS_URL")
                        .ok()
                        .filter(|u| !u.is_empty())
                        .unwrap_or_else(|| DEFAULT_URL.to_string()),
                ),
            }
        };
        for (flag, path) in [
            ("--tls-ca", &args.tls_ca),
            ("--tls-cert", &args.tls_cert),
            ("--tls-key", &args.tls_key),
        ] {
            if let Some(path) = path {
                shown.push(format!("{flag} {}", quote(&path.display().to_string())));
            }
        }
        if !args.key_prefix.is_empty() {
            shown.push(format!("--key-prefix {}", quote(&args.key_prefix)));
        }
        Ok(Target {
            topology,
            tls_ca,
            tls_client,
            timeout: args.timeout,
            key_prefix: args.key_prefix.clone(),
            shown_flags: shown.join(" "),
            redis_cli_tls: redis_cli_tls.join(" "),
        })
    }

    /// Connects to every master.
    ///
    /// # Errors
    /// A connect failure (exit code 3) when no server answers, credentials or TLS are
    /// refused, the Sentinel name is unknown, or a cluster seed is not in cluster mode; a
    /// usage failure for a malformed URL or TLS files given for a non-TLS URL.
    pub async fn connect(&self) -> Result<Nodes, Failure> {
        install_crypto_provider();
        match &self.topology {
            Topology::Single(url) => {
                let info = self.parse(url)?;
                let mut conn = self.open(&info).await?;
                let addr = addr_of(&info);
                warn_if_cluster_node(&mut conn, &addr).await;
                Ok(Nodes {
                    nodes: vec![Node {
                        addr,
                        conn,
                        info,
                        slots: vec![(0, 16383)],
                    }],
                    cluster: false,
                })
            }
            Topology::Cluster(seeds) => self.connect_cluster(seeds).await,
            Topology::Sentinel {
                sentinels,
                master,
                credentials,
            } => {
                let info = self.sentinel_master(sentinels, master, credentials).await?;
                let conn = self.open(&info).await?;
                Ok(Nodes {
                    nodes: vec![Node {
                        addr: addr_of(&info),
                        conn,
                        info,
                        slots: vec![(0, 16383)],
                    }],
                    cluster: false,
                })
            }
        }
    }

    /// A library client with the same connection settings, for force-unlocking through the
    /// kind's own script.
    ///
    /// # Errors
    /// As [`connect`](Target::connect), from the library's errors.
    pub async fn library_client(&self) -> Result<redis_rlock::Client, Failure> {
        let mut builder = match &self.topology {
            Topology::Single(url) => redis_rlock::Client::builder(url.as_str()),
            Topology::Cluster(seeds) => redis_rlock::Client::cluster_builder(seeds),
            Topology::Sentinel {
                sentinels,
                master,
                credentials,
            } => {
                let builder = redis_rlock::Client::sentinel_builder(sentinels, master);
                match credentials {
                    Some((user, password)) => builder.master_credentials(user.as_deref(), password),
                    None => builder,
                }
            }
        };
        builder = builder
            .key_prefix(self.key_prefix.clone())
            .connect_timeout(self.timeout)
            .response_timeout(self.timeout);
        if let Some(ca) = &self.tls_ca {
            builder = builder.tls_root_certificate(ca.clone());
        }
        if let Some((cert, key)) = &self.tls_client {
            builder = builder.tls_client_certificate(cert.clone(), key.clone());
        }
        builder.build().await.map_err(|e| {
            let message = format!("cannot connect the lock client: {e}");
            if e.is_invalid_argument() {
                Failure::usage(message)
            } else if e.is_connection_error() || e.is_timeout() || e.is_auth_error() {
                Failure::connect(message)
            } else {
                Failure::redis(message)
            }
        })
    }

    /// A URL's connection info.
    fn parse(&self, url: &str) -> Result<ConnectionInfo, Failure> {
        url.into_connection_info()
            .map_err(|e| Failure::usage(format!("invalid Redis URL `{}`: {e}", redact_url(url))))
    }

    /// A connection to `info`, with the TLS files and the timeout.
    async fn open(&self, info: &ConnectionInfo) -> Result<MultiplexedConnection, Failure> {
        let addr = addr_of(info);
        let tls = matches!(info.addr(), ConnectionAddr::TcpTls { .. });
        let certificates = self.tls_ca.is_some() || self.tls_client.is_some();
        let client = if certificates {
            if !tls {
                return Err(Failure::usage(format!(
                    "TLS files were given for {addr}, which is not a TLS URL: use rediss://"
                )));
            }
            redis::Client::build_with_tls(
                info.clone(),
                redis::TlsCertificates {
                    client_tls: self.tls_client.as_ref().map(|(cert, key)| {
                        redis::ClientTlsConfig {
                            client_cert: cert.clone(),
                            client_key: key.clone(),
                        }
                    }),
                    root_cert: self.tls_ca.clone(),
                },
            )
        } else {
            redis::Client::open(info.clone())
        }
        .map_err(|e| Failure::usage(format!("cannot set up a connection to {addr}: {e}")))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout));
        client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| Failure::connect(format!("cannot connect to {addr}: {e}")))
    }

    /// Every master of the cluster: the slot map from the first seed that answers, then a
    /// connection to each master with the seed's credentials and TLS settings.
    async fn connect_cluster(&self, seeds: &[String]) -> Result<Nodes, Failure> {
        let mut last = Failure::connect("no cluster seed was given");
        for seed in seeds {
            let info = self.parse(seed)?;
            let mut conn = match self.open(&info).await {
                Ok(conn) => conn,
                Err(failure) if failure.exit == crate::exit::Exit::Connect => {
                    last = failure;
                    continue;
                }
                Err(failure) => return Err(failure),
            };
            let slots: Value = redis::cmd("CLUSTER")
                .arg("SLOTS")
                .query_async(&mut conn)
                .await
                .map_err(|e| {
                    Failure::connect(format!(
                        "{} is not a usable cluster node (is it in cluster mode?): {e}",
                        addr_of(&info)
                    ))
                })?;
            let masters = masters_of(&slots, seed_host(&info));
            if masters.is_empty() {
                return Err(Failure::connect(format!(
                    "{} serves no slots: the cluster is not set up",
                    addr_of(&info)
                )));
            }
            let mut nodes = Vec::with_capacity(masters.len());
            for ((host, port), slots) in masters {
                let node_info = with_addr(&info, &host, port);
                let conn = self.open(&node_info).await?;
                nodes.push(Node {
                    addr: addr_of(&node_info),
                    conn,
                    info: node_info,
                    slots,
                });
            }
            return Ok(Nodes {
                nodes,
                cluster: true,
            });
        }
        Err(last)
    }

    /// The connection info of the master that the first answering sentinel names.
    async fn sentinel_master(
        &self,
        sentinels: &[String],
        master: &str,
        credentials: &Option<(Option<String>, String)>,
    ) -> Result<ConnectionInfo, Failure> {
        let mut last = Failure::connect("no sentinel was given");
        let mut template = None;
        for url in sentinels {
            let info = self.parse(url)?;
            let sentinel_info = info
                .clone()
                .set_redis_settings(info.redis_settings().clone().set_db(0));
            template.get_or_insert_with(|| info.clone());
            let mut conn = match self.open(&sentinel_info).await {
                Ok(conn) => conn,
                Err(failure) if failure.exit == crate::exit::Exit::Connect => {
                    last = failure;
                    continue;
                }
                Err(failure) => return Err(failure),
            };
            let named: Option<(String, u16)> = match redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(master)
                .query_async(&mut conn)
                .await
            {
                Ok(named) => named,
                Err(e) => {
                    last = Failure::connect(format!(
                        "{} did not answer as a sentinel: {e}",
                        addr_of(&sentinel_info)
                    ));
                    continue;
                }
            };
            let Some((host, port)) = named else {
                last = Failure::connect(format!(
                    "sentinel {} monitors no master named `{master}`",
                    addr_of(&sentinel_info)
                ));
                continue;
            };
            let template = template.clone().expect("set above");
            let mut settings = template.redis_settings().clone();
            if let Some((user, password)) = credentials {
                settings = redis::RedisConnectionInfo::default()
                    .set_db(settings.db())
                    .set_protocol(settings.protocol())
                    .set_password(password);
                if let Some(user) = user {
                    settings = settings.set_username(user);
                }
            }
            return Ok(with_addr(&template, &host, port).set_redis_settings(settings));
        }
        Err(last)
    }
}

impl Nodes {
    /// The index of the node serving `key`'s slot (the only node of a single server).
    pub fn of_key(&self, key: &[u8]) -> usize {
        if self.nodes.len() == 1 {
            return 0;
        }
        let slot = redis_rlock::protocol::key_slot(key);
        self.nodes
            .iter()
            .position(|node| node.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            // A slot no master serves (a cluster being resharded): ask the first, whose
            // error reply says so.
            .unwrap_or(0)
    }

    /// Each node's clock, in ms (`TIME`): fair waiters' deadlines are on the server clock.
    ///
    /// # Errors
    /// When a node does not answer.
    pub async fn server_times(&self) -> Result<Vec<i64>, Failure> {
        let mut times = Vec::with_capacity(self.nodes.len());
        for node in &self.nodes {
            let (seconds, micros): (i64, i64) = redis::cmd("TIME")
                .query_async(&mut node.conn.clone())
                .await
                .map_err(|e| {
                    let context = format!("TIME on {}", node.addr);
                    crate::acl::failure(&context, &node.addr, "time", None, &e)
                })?;
            times.push(seconds * 1000 + micros / 1000);
        }
        Ok(times)
    }
}

/// rustls needs a process-wide crypto provider; ring's, as the library installs.
fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Fails only when another thread installed one meanwhile, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A one-server URL that points at a cluster node sees only that node's keys: say so.
async fn warn_if_cluster_node(conn: &mut MultiplexedConnection, addr: &str) {
    let info: redis::RedisResult<String> =
        redis::cmd("INFO").arg("cluster").query_async(conn).await;
    if info.is_ok_and(|text| text.contains("cluster_enabled:1")) {
        eprintln!(
            "rlock: note: {addr} is a cluster node; only its own keys are read: use --cluster \
             to read every master"
        );
    }
}

/// `host:port` of a connection, or the socket path.
pub fn addr_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        _ => "?".to_string(),
    }
}

/// The seed's host: what `CLUSTER SLOTS` means by an empty host.
fn seed_host(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        _ => "127.0.0.1".to_string(),
    }
}

/// `info` at another address, keeping TLS (and its hostname check setting).
fn with_addr(info: &ConnectionInfo, host: &str, port: u16) -> ConnectionInfo {
    let addr = match info.addr() {
        ConnectionAddr::TcpTls { insecure, .. } => ConnectionAddr::TcpTls {
            host: host.to_string(),
            port,
            insecure: *insecure,
            tls_params: None,
        },
        _ => ConnectionAddr::Tcp(host.to_string(), port),
    };
    info.clone().set_addr(addr)
}

/// Several URLs, comma-separated, passwords redacted.
fn redacted_list(urls: &[String]) -> String {
    urls.iter()
        .map(|u| redact_url(u))
        .collect::<Vec<_>>()
        .join(",")
}
