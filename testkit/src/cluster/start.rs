//! Setting a cluster up: its nodes started in parallel, each with a bus port of its own,
//! then joined, given their slots and replicas, and waited for until settled.

use crate::servers::{free_port, RedisServer, MAX_TRIES};
use crate::wait::poll_blocking;

use super::view::{agreed_view, look};
use super::{admin, RedisCluster, NODE_TIMEOUT_MS, POLL, SETTLE_LIMIT, SLOTS};

impl RedisCluster {
    /// Starts 3 masters with 1 replica each and returns once the cluster is settled.
    pub fn start() -> RedisCluster {
        Self::start_with(3, 1)
    }

    /// [`start`](Self::start) from async code: the blocking set-up runs on tokio's blocking
    /// pool, so that the runtime's other tasks keep running meanwhile.
    pub async fn start_async() -> RedisCluster {
        tokio::task::spawn_blocking(RedisCluster::start)
            .await
            .expect("the cluster starts")
    }

    /// Starts `masters` masters with `replicas_per_master` replicas each; the slots are split
    /// evenly over the masters, in order. Returns once every node says `cluster_state:ok`,
    /// every replica's link is up and every node sees the same slot map.
    ///
    /// Blocking (up to [`SETTLE_LIMIT`]); panics if the cluster does not settle.
    pub fn start_with(masters: usize, replicas_per_master: usize) -> RedisCluster {
        Self::start_with_args(masters, replicas_per_master, &[])
    }

    /// [`start_with`](Self::start_with), with `extra` command-line config given to every
    /// node (e.g. `["--cluster-allow-reads-when-down", "yes"]`).
    pub fn start_with_args(
        masters: usize,
        replicas_per_master: usize,
        extra: &[&str],
    ) -> RedisCluster {
        assert!(
            (1..=SLOTS as usize).contains(&masters),
            "a cluster needs 1 to {SLOTS} masters, not {masters}"
        );
        let count = masters * (1 + replicas_per_master);
        // Started in parallel: each start waits for its process to answer PING.
        let started: Vec<(RedisServer, u16)> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..count)
                .map(|_| scope.spawn(|| start_node(extra)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a cluster node failed to start"))
                .collect()
        });
        let (nodes, bus_ports) = started.into_iter().unzip();
        let cluster = RedisCluster { nodes, bus_ports };
        cluster.form(masters, replicas_per_master);
        cluster
    }

    /// Joins the started nodes into one cluster and waits until it is settled.
    fn form(&self, masters: usize, replicas_per_master: usize) {
        let ids: Vec<String> = self
            .nodes
            .iter()
            .map(|n| admin(n, redis::cmd("CLUSTER").arg("MYID")))
            .collect();
        // Distinct config epochs before the nodes meet, as `redis-cli --cluster create`
        // does: otherwise all start at 0 and the collision is resolved one node per
        // gossip round, and a failover before that could pick a clashing epoch.
        for (i, node) in self.nodes.iter().enumerate() {
            admin::<()>(
                node,
                redis::cmd("CLUSTER").arg("SET-CONFIG-EPOCH").arg(i + 1),
            );
        }
        for (i, node) in self.nodes[..masters].iter().enumerate() {
            let start = i * SLOTS as usize / masters;
            let end = (i + 1) * SLOTS as usize / masters - 1;
            admin::<()>(
                node,
                redis::cmd("CLUSTER")
                    .arg("ADDSLOTSRANGE")
                    .arg(start)
                    .arg(end),
            );
        }
        // Everyone meets node 0; gossip then introduces the others to each other.
        let (first_port, first_bus) = (self.nodes[0].port(), self.bus_ports[0]);
        for node in &self.nodes[1..] {
            admin::<()>(
                node,
                redis::cmd("CLUSTER")
                    .arg("MEET")
                    .arg("127.0.0.1")
                    .arg(first_port)
                    .arg(first_bus),
            );
        }
        // A replica can follow its master only once it has heard of it ("ERR Unknown node"
        // until then).
        for (i, replica) in self.nodes[masters..].iter().enumerate() {
            let master_id = &ids[i / replicas_per_master];
            poll_blocking("a replica to know its master", SETTLE_LIMIT, POLL, || {
                replica
                    .query::<()>(redis::cmd("CLUSTER").arg("REPLICATE").arg(master_id))
                    .map_err(|e| e.to_string())
            });
        }
        let ports = self.ports();
        poll_blocking("the replicas to link", SETTLE_LIMIT, POLL, || {
            for &port in &ports[masters..] {
                let view = look(port)?;
                if !view.link_up {
                    return Err(format!("replica {port}: master link down"));
                }
            }
            Ok(())
        });
        // `CLUSTER SLOTS` lists a replica only once its replication offset is known to be
        // above 0, and on a master nobody writes to that happens with the first replication
        // PING, 10 s (`repl-ping-replica-period`) after the link came up. A write that
        // changes nothing moves every offset at once.
        for master in &self.nodes[..masters] {
            admin::<()>(master, &redis::cmd("FLUSHALL"));
        }
        poll_blocking("the new cluster to settle", SETTLE_LIMIT, POLL, || {
            agreed_view(&ports, true, Some(replicas_per_master))
        });
    }
}

/// Starts one cluster node with a bus port of its own; a new pair of ports is tried when
/// either was taken meanwhile.
fn start_node(extra: &[&str]) -> (RedisServer, u16) {
    let mut last_err = String::new();
    for _ in 0..MAX_TRIES {
        let bus = free_port();
        let node_timeout = NODE_TIMEOUT_MS.to_string();
        let bus_arg = bus.to_string();
        let args = [
            "--cluster-enabled",
            "yes",
            // Relative to `--dir`, the node's own temporary directory.
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &node_timeout,
            "--cluster-port",
            &bus_arg,
            // A master otherwise waits 5 s for more replicas before its first full sync:
            // 6.2 s instead of 2.2 s to start 3 + 3.
            "--repl-diskless-sync-delay",
            "0",
        ];
        let args: Vec<String> = args.iter().chain(extra).map(|s| s.to_string()).collect();
        match RedisServer::try_start(args, None) {
            Ok(server) => return (server, bus),
            Err(e) => last_err = e,
        }
    }
    panic!("cluster node failed to start after {MAX_TRIES} attempts: {last_err}");
}
