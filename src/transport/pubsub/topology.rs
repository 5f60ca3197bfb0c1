//! [`Topology`]: where the listener connects. The one place that turns "the node this
//! channel belongs on" into an address to connect to: on one Redis, the client's URL; on a
//! cluster, the master of the channel's slot, at the address the cluster announces, opened
//! with the seeds' credentials and TLS settings.
//!
//! On a Sentinel client, the one node is the master the sentinels name now: each node task
//! asks at every (re)connection, and drops its connection when the master changes
//! ([`master_changes`](Topology::master_changes)), since the old master keeps the
//! connection open, and hears nothing the new one publishes, until it is demoted.

use std::fmt;
use std::sync::Arc;

use redis::{ConnectionAddr, ConnectionInfo, ProtocolVersion};
use tokio::sync::watch;

use crate::config::settings::at_address;
use crate::error::{Error, Result};
use crate::protocol::slot_map::{NodeAddr, SlotMap};
use crate::transport::sentinel::{Master, MasterWatch};

/// A node the listener keeps a pub/sub connection to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum NodeId {
    /// The one Redis of a standalone client, wherever it is now (see
    /// [`Topology::client_for`]).
    Only,
    /// A cluster node, at the address the cluster announces for it.
    At(NodeAddr),
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeId::Only => f.write_str("the server"),
            NodeId::At(addr) => addr.fmt(f),
        }
    }
}

/// Where the listener's connections go.
pub(super) enum Topology {
    /// One Redis: every channel on it.
    Single(Box<ConnectionInfo>),
    /// A Redis Cluster: each channel on the master of its slot. The seeds are the nodes the
    /// client was given, to read the slot map from when no node it learned of answers, and
    /// nodes are opened with the first one's credentials, database and TLS settings, as
    /// redis-rs' cluster client does.
    Cluster(Vec<ConnectionInfo>),
    /// The master a Sentinel client follows: every channel on it.
    Sentinel { master: MasterWatch },
}

impl Topology {
    /// `nodes`: the redis-rs clients of the URL (standalone) or of each seed (cluster),
    /// with the client's TLS settings.
    /// `master`: on a Sentinel client, where the master is (`nodes` is then empty).
    pub(super) fn new(
        nodes: &[redis::Client],
        cluster: bool,
        master: Option<MasterWatch>,
    ) -> Result<Self> {
        if let Some(master) = master {
            return Ok(Topology::Sentinel { master });
        }
        let mut seeds: Vec<_> = nodes
            .iter()
            .map(|n| n.get_connection_info().clone())
            .collect();
        match seeds.is_empty() {
            true => Err(Error::invalid("no node to connect to for pub/sub")),
            false if cluster => Ok(Topology::Cluster(seeds)),
            false => Ok(Topology::Single(Box::new(seeds.swap_remove(0)))),
        }
    }

    pub(super) fn is_cluster(&self) -> bool {
        matches!(self, Topology::Cluster(_))
    }

    /// The node `channel`'s subscription belongs on: the one Redis; on a cluster, the
    /// master of the channel's slot as `slots` (the last map read) says, or `None` before
    /// a map was read or while no node serves the slot.
    pub(super) fn node_of(&self, slots: Option<&SlotMap>, channel: &str) -> Option<NodeId> {
        match self {
            Topology::Cluster(_) => slots?.master_of(channel).cloned().map(NodeId::At),
            _ => Some(NodeId::Only),
        }
    }

    /// Where `node` is now, with the settings it is opened with; `None` for a node of
    /// another topology.
    fn info_of(&self, node: &NodeId) -> Option<ConnectionInfo> {
        match (self, node) {
            (Topology::Single(info), NodeId::Only) => Some(ConnectionInfo::clone(info)),
            (Topology::Sentinel { master }, NodeId::Only) => {
                Some(master.current().client.get_connection_info().clone())
            }
            (Topology::Cluster(seeds), NodeId::At(addr)) => Some(info_for(seeds, addr)),
            _ => None,
        }
    }

    /// Where `node` is, as logs name it: `host:port`, which holds no credentials.
    pub(super) fn address_of(&self, node: &NodeId) -> String {
        match self.info_of(node) {
            Some(info) => info.addr().to_string(),
            None => node.to_string(),
        }
    }

    /// How to open a pub/sub connection to `node`: RESP3, so that subscription changes
    /// the server makes on its own (a shard channel's `sunsubscribe` after a failover or a
    /// slot migration) arrive as pushes (see the module docs).
    pub(super) fn client_for(&self, node: &NodeId) -> Result<redis::Client> {
        let Some(info) = self.info_of(node) else {
            return Err(Error::invalid(format!(
                "no way to reach {node} for pub/sub"
            )));
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
        let Topology::Cluster(seeds) = self else {
            return Vec::new();
        };
        let mut sources: Vec<ConnectionInfo> = last
            .map(|map| map.nodes().iter().map(|n| info_for(seeds, n)).collect())
            .unwrap_or_default();
        sources.extend(seeds.iter().cloned());
        sources
    }

    /// On a Sentinel client, told when the sentinels name another master; taken before
    /// [`client_for`](Self::client_for), so that a change in between is seen.
    pub(super) fn master_changes(&self) -> Option<watch::Receiver<Arc<Master>>> {
        match self {
            Topology::Sentinel { master } => Some(master.changes()),
            _ => None,
        }
    }
}

/// The first seed's settings, at `addr`.
fn info_for(seeds: &[ConnectionInfo], addr: &NodeAddr) -> ConnectionInfo {
    at_address(&seeds[0], &addr.host, addr.port)
}

/// The host part of `info`'s address, for nodes that announce none (see
/// [`SlotMap::parse`]).
pub(super) fn host_of(info: &ConnectionInfo) -> String {
    match info.addr() {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => host.clone(),
        _ => String::new(),
    }
}
