//! W6's two targets side by side: one Redis, and a local Redis Cluster of three masters
//! (no replicas: a replica would only add replication work to the masters' CPU), every
//! server on the server CPU; and the figures read from every server of a target at once.

use crate::common::placement::{pin_server, pin_this_thread, CLIENT_CPU, SPLIT};
use crate::support::{RedisCluster, RedisServer};

/// Masters of W6's cluster.
pub const MASTERS: usize = 3;

/// Where a workload runs: one Redis or the cluster.
#[derive(Clone)]
pub struct Target {
    /// In JSON lines and in `TARGETS`.
    pub id: &'static str,
    pub described: &'static str,
    /// The URL of the one server, or every cluster node (seeds).
    pub urls: Vec<String>,
    pub cluster: bool,
}

impl Target {
    /// A client builder for this target, default settings.
    pub fn builder(&self) -> redis_rlock::ClientBuilder {
        if self.cluster {
            redis_rlock::Client::cluster_builder(&self.urls)
        } else {
            redis_rlock::Client::builder(self.urls[0].clone())
        }
    }
}

/// The servers behind both targets, kept running for the whole benchmark.
pub struct Servers {
    pub single: RedisServer,
    pub cluster: RedisCluster,
    /// Whether the client and every server were pinned.
    pub pinned: bool,
}

impl Servers {
    /// Starts one Redis and the cluster (about 2 s), pins the client to [`CLIENT_CPU`] and
    /// every server to the split placement's server CPU.
    pub fn start() -> Servers {
        let single = RedisServer::start();
        let cluster = RedisCluster::start_with(MASTERS, 0);
        let client = pin_this_thread(CLIENT_CPU);
        let mut pinned = client && pin_server(&single, SPLIT.server_cpu);
        for node in cluster.nodes() {
            pinned &= pin_server(node, SPLIT.server_cpu);
        }
        Servers {
            single,
            cluster,
            pinned,
        }
    }

    /// The two targets: one Redis first.
    pub fn targets(&self) -> [Target; 2] {
        [
            Target {
                id: "one_node",
                described: "one Redis",
                urls: vec![self.single.url()],
                cluster: false,
            },
            Target {
                id: "cluster",
                described: "Redis Cluster, 3 masters",
                urls: self.cluster.seeds(),
                cluster: true,
            },
        ]
    }

    /// The servers of `target`: the one Redis, or every master of the cluster.
    pub fn of(&self, target: &Target) -> Vec<&RedisServer> {
        if target.cluster {
            self.cluster.masters()
        } else {
            vec![&self.single]
        }
    }
}

/// Redis CPU seconds of every server in `servers`, added up.
pub fn cpu_seconds(servers: &[&RedisServer]) -> f64 {
    servers
        .iter()
        .map(|s| crate::common::server::cpu_seconds(s))
        .sum()
}

/// Commands run on every server in `servers` (see [`crate::common::server::commands`]).
pub fn commands(servers: &[&RedisServer]) -> u64 {
    servers
        .iter()
        .map(|s| crate::common::server::commands(s))
        .sum()
}

/// EVALSHA calls on every server in `servers`: script calls, renewals among them.
pub fn script_calls(servers: &[&RedisServer]) -> i64 {
    servers
        .iter()
        .map(|s| crate::common::server::evalsha_calls_and_usec(s).0)
        .sum()
}

/// Empties every server in `servers`, so that keys an earlier run left to expire (unlock
/// latches) are not expired on the next one's CPU time.
pub fn flush(servers: &[&RedisServer]) {
    for server in servers {
        server.cli(&["FLUSHALL"]);
    }
}
