//! Who serves what now: the nodes, the masters and their replicas, the master of a slot or
//! a key, asked of the first node that answers; and a raw cluster connection.

use std::time::Duration;

use crate::servers::{RedisServer, QUERY_TIMEOUT};
use redis_rlock::protocol::key_slot;

use super::{RedisCluster, SLOTS};

impl RedisCluster {
    /// Every node, in start order (masters first), whatever its role now.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The node listening on `port`. Panics if none does.
    pub fn node(&self, port: u16) -> &RedisServer {
        &self.nodes[self.index_of(port)]
    }

    /// `redis://127.0.0.1:PORT` of every node, in start order: seeds for a cluster client.
    pub fn seeds(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// The masters that serve slots now, in slot order (the master of slot 0 first).
    /// Blocking: asks the first node that answers.
    pub fn masters(&self) -> Vec<&RedisServer> {
        let mut ports = Vec::new();
        for range in self.slot_map() {
            if !ports.contains(&range.master) {
                ports.push(range.master);
            }
        }
        ports.into_iter().map(|p| self.node(p)).collect()
    }

    /// The replicas the cluster lists now (not those it has marked failed), by master in
    /// slot order. Blocking: asks the first node that answers.
    pub fn replicas(&self) -> Vec<&RedisServer> {
        let mut ports = Vec::new();
        for range in self.slot_map() {
            for replica in range.replicas {
                if !ports.contains(&replica) {
                    ports.push(replica);
                }
            }
        }
        ports.into_iter().map(|p| self.node(p)).collect()
    }

    /// The replicas of `master` the cluster lists now. Blocking.
    pub fn replicas_of(&self, master: &RedisServer) -> Vec<&RedisServer> {
        let map = self.slot_map();
        let range = map
            .iter()
            .find(|r| r.master == master.port())
            .unwrap_or_else(|| panic!("node {} serves no slots", master.port()));
        range.replicas.iter().map(|&p| self.node(p)).collect()
    }

    /// The first replica of `master` (lowest port). Panics if it has none. Blocking.
    pub fn replica_of(&self, master: &RedisServer) -> &RedisServer {
        self.replicas_of(master)
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("master {} has no replica", master.port()))
    }

    /// The master serving `slot` now. Blocking: asks the first node that answers.
    pub fn node_for_slot(&self, slot: u16) -> &RedisServer {
        assert!(slot < SLOTS, "slot {slot} is out of range");
        let map = self.slot_map();
        let range = map
            .iter()
            .find(|r| r.start <= slot && slot <= r.end)
            .unwrap_or_else(|| panic!("no node serves slot {slot}"));
        self.node(range.master)
    }

    /// The first name `prefix:N` whose slot the `i`-th master (in slot order) serves now.
    pub fn key_on_master(&self, i: usize, prefix: &str) -> String {
        let port = self.masters()[i].port();
        (0..)
            .map(|n| format!("{prefix}:{n}"))
            .find(|key| self.master_of_key(key).port() == port)
            .expect("some name lands on every master")
    }

    /// The master serving `key`'s slot now (see [`key_slot`]). Blocking.
    pub fn master_of_key(&self, key: &str) -> &RedisServer {
        self.node_for_slot(key_slot(key.as_bytes()))
    }

    /// A cluster connection to this cluster (seeded with the running nodes), for looking
    /// at keys from tests. Its response timeout is 5 s, so a frozen node fails a call
    /// instead of hanging it; everything else is redis-rs's default.
    pub async fn raw(&self) -> redis::cluster_async::ClusterConnection {
        let seeds: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.is_running())
            .map(RedisServer::url)
            .collect();
        redis::cluster::ClusterClientBuilder::new(seeds)
            .connection_timeout(QUERY_TIMEOUT)
            .response_timeout(Duration::from_secs(5))
            .build()
            .expect("valid cluster seeds")
            .get_async_connection()
            .await
            .expect("connect to the test cluster")
    }
}
