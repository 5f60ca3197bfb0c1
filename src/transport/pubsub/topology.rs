//! [`Topology`]: where the listener connects. The one place that turns "the node this
//! channel belongs on" into an address to connect to: on one Redis, the client's URL; on a
//! cluster, the master of the channel's slot, at the address the cluster announces, opened
//! with the seeds' credentials and TLS settings.
//!
//! A client that finds its Redis elsewhere (Sentinel) hooks in here: a variant whose
//! [`client_for`](Topology::client_for) asks where the master is now (it is async for that).
//! Each node task asks it at every (re)connection, so a master that moved is found at the
//! next reconnection; to leave a demoted master that keeps the connection open, such a
//! variant would also have the node's connection dropped when the master changes.

use std::sync::Arc;

use redis::{ConnectionAddr, ConnectionInfo, ProtocolVersion};
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::transport::pubsub::slot_map::{NodeAddr, NodeId, SlotMap};

/// Where the listener's connections go.
pub(super) enum Topology {
    /// One Redis: every channel on it.
    Standalone { node: ConnectionInfo },
    /// A Redis Cluster: each channel on the master of its slot.
    Cluster(Cluster),
}

pub(super) struct Cluster {
    /// The seeds the client was given, to read the slot map from when no node it learned
    /// of answers.
    seeds: Vec<ConnectionInfo>,
    /// The credentials, database and TLS settings nodes are opened with: the first seed's,
    /// as redis-rs' cluster client does.
    template: ConnectionInfo,
    /// Asks the cluster watcher to read the slot map again.
    refresh: Arc<Notify>,
}

impl Topology {
    /// `nodes`: the redis-rs clients of the URL (standalone) or of each seed (cluster),
    /// with the client's TLS settings.
    pub(super) fn new(nodes: &[redis::Client], cluster: bool) -> Result<Self> {
        let mut infos = nodes.iter().map(|n| n.get_connection_info().clone());
        let first = infos
            .next()
            .ok_or_else(|| Error::invalid("no node to connect to for pub/sub"))?;
        if !cluster {
            return Ok(Topology::Standalone { node: first });
        }
        Ok(Topology::Cluster(Cluster {
            seeds: std::iter::once(first.clone()).chain(infos).collect(),
            template: first,
            refresh: Arc::new(Notify::new()),
        }))
    }

    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Topology::Cluster(_))
    }

    /// The node `channel`'s subscription belongs on: the one Redis; on a cluster, the
    /// master of the channel's slot as `slots` (the last map read) says, or `None` before
    /// a map was read or while no node serves the slot.
    pub(super) fn node_of(&self, slots: Option<&SlotMap>, channel: &str) -> Option<NodeId> {
        match self {
            Topology::Standalone { .. } => Some(NodeId::Only),
            Topology::Cluster(_) => slots?.master_of(channel).cloned().map(NodeId::At),
        }
    }

    /// How to open a pub/sub connection to `node`: RESP3, so that subscription changes
    /// the server makes on its own (a shard channel's `sunsubscribe` after a failover or a
    /// slot migration) arrive as pushes (see the module docs).
    pub(super) async fn client_for(&self, node: &NodeId) -> Result<redis::Client> {
        let info = match (self, node) {
            (Topology::Standalone { node }, NodeId::Only) => node.clone(),
            (Topology::Cluster(cluster), NodeId::At(addr)) => cluster.info_for(addr),
            _ => {
                return Err(Error::invalid(format!(
                    "no way to reach {node} for pub/sub"
                )))
            }
        };
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(ProtocolVersion::RESP3);
        redis::Client::open(info.set_redis_settings(settings)).map_err(Error::from)
    }

    /// Where to read a cluster's slot map from, best first: the nodes of the last map (the
    /// seeds may be long gone), then the seeds. Empty on one Redis.
    pub(super) fn map_sources(&self, last: Option<&SlotMap>) -> Vec<ConnectionInfo> {
        let Topology::Cluster(cluster) = self else {
            return Vec::new();
        };
        let mut sources: Vec<ConnectionInfo> = last
            .map(|map| map.nodes().iter().map(|n| cluster.info_for(n)).collect())
            .unwrap_or_default();
        sources.extend(cluster.seeds.iter().cloned());
        sources
    }

    /// Asks the cluster watcher to read the slot map again (a node's connection was lost,
    /// a subscription was dropped or redirected by the server); nothing on one Redis.
    pub(super) fn request_refresh(&self) {
        if let Topology::Cluster(cluster) = self {
            cluster.refresh.notify_one();
        }
    }

    /// What [`request_refresh`](Self::request_refresh) signals.
    pub(super) fn refresh_signal(&self) -> Arc<Notify> {
        match self {
            Topology::Cluster(cluster) => cluster.refresh.clone(),
            Topology::Standalone { .. } => Arc::new(Notify::new()),
        }
    }
}

impl Cluster {
    /// The first seed's settings, at `addr`.
    fn info_for(&self, addr: &NodeAddr) -> ConnectionInfo {
        let (host, port) = (addr.host.to_string(), addr.port);
        let addr = match self.template.addr() {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host, port),
        };
        self.template.clone().set_addr(addr)
    }
}

/// The host part of `info`'s address, for nodes that announce none (see
/// [`SlotMap::parse`]).
pub(super) fn host_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        _ => String::new(),
    }
}
