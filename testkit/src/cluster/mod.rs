//! A throw-away Redis Cluster on loopback: `M` masters with `R` replicas each, set up by
//! hand with cluster commands (no `redis-cli --cluster create`), and the faults cluster
//! tests need: a manual failover, a killed master, a slot migrated between masters.
//!
//! Every node is a [`RedisServer`] (free port, temporary directory, killed on drop) started
//! with `--cluster-enabled yes --cluster-node-timeout 1000` and a cluster bus port of its
//! own choosing. The set-up follows the reference notes (`cluster-and-sentinel.md`, §3):
//! distinct config epochs, `CLUSTER ADDSLOTSRANGE` on each master, `CLUSTER MEET`, `CLUSTER
//! REPLICATE`, then a bounded wait until every node says `cluster_state:ok`, every replica
//! says `master_link_status:up` and every node's `CLUSTER SLOTS` is the same. On this
//! 2-core machine that takes about 2 s, whatever the node timeout.
//!
//! Topology queries (`masters()`, `master_of_key()`, ...) are blocking, bounded by 1 s
//! timeouts and answered by the first node that answers; the waits are `async` and run
//! their polling on tokio's blocking pool, so a lock client's background tasks keep running
//! on the test's runtime meanwhile.
//!
//! By job: `start.rs` sets the cluster up, `topology.rs` answers who serves what,
//! `faults.rs` fails over, kills, restarts and migrates, and `view.rs` reads and compares
//! what the nodes say. This file holds the handle and the admin commands they share.

mod faults;
mod start;
mod topology;
mod view;

use std::time::Duration;

use crate::servers::{RedisServer, QUERY_TIMEOUT};
use view::{look, SlotRange};

/// The number of hash slots of a Redis Cluster.
pub const SLOTS: u16 = 16384;

/// `cluster-node-timeout` of every node, in ms: a killed master's replica is promoted about
/// two node timeouts after the kill (1.8–2.4 s seen here).
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// How long start-up and every wait for the cluster to settle may take: start-up takes
/// about 2 s here, an automatic failover about 2 s more; the rest is room for a loaded
/// 2-core machine.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// How often the waits look again.
const POLL: Duration = Duration::from_millis(20);

/// A local Redis Cluster. Dropping it kills every node and removes their directories.
///
/// Nodes keep their place in [`nodes`](Self::nodes) (masters first, then the replicas of
/// master 0, of master 1, ...) whatever role they have now; [`masters`](Self::masters) and
/// the other role queries ask the cluster.
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// Cluster bus port of each node, by index in `nodes` (`CLUSTER MEET` needs it, since
    /// it is not the default port + 10000: that could pass 65535 for ephemeral ports).
    bus_ports: Vec<u16>,
}

impl RedisCluster {
    /// The slot map as the first node that answers sees it.
    fn slot_map(&self) -> Vec<SlotRange> {
        let mut why = String::from("no node is running");
        for port in self.running_ports() {
            match look(port) {
                Ok(view) => return view.slots,
                Err(e) => why = e,
            }
        }
        panic!("no cluster node answers: {why}");
    }

    /// The index in `nodes` of the node on `port`. Panics if none listens there.
    fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no cluster node listens on {port}"))
    }

    /// Ports of every node, in start order.
    fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// Ports of the nodes whose process is running (frozen ones included).
    fn running_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .map(RedisServer::port)
            .collect()
    }
}

/// An admin command that must succeed during set-up or a fault: panics with the node and
/// the error otherwise.
fn admin<T: redis::FromRedisValue>(node: &RedisServer, cmd: &redis::Cmd) -> T {
    admin_port(node.port(), cmd)
}

/// An admin command on the node on `port`, as [`admin`] sends it.
fn admin_port<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> T {
    crate::servers::query_port(port, cmd, QUERY_TIMEOUT)
        .unwrap_or_else(|e| panic!("{cmd:?} on cluster node {port}: {e}"))
}
