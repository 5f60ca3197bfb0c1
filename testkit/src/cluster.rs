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

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use redis::Value;

use crate::servers::{connect, free_port, RedisServer, MAX_TRIES, QUERY_TIMEOUT};
use crate::wait::{off_runtime, poll_blocking};
use redis_rlock::protocol::key_slot;

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

/// How long one look at one node may take. Shorter than [`QUERY_TIMEOUT`] because a frozen
/// node costs this much on every poll.
const LOOK_TIMEOUT: Duration = Duration::from_millis(500);

/// The `MIGRATE` timeout (ms) and how many keys one `MIGRATE` moves.
const MIGRATE_TIMEOUT_MS: u64 = 5000;
const MIGRATE_BATCH: usize = 100;

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

/// One range of slots as `CLUSTER SLOTS` gives it, nodes by port.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SlotRange {
    start: u16,
    end: u16,
    master: u16,
    /// Sorted: nodes list replicas in no particular order.
    replicas: Vec<u16>,
}

/// What one node says about itself and the cluster.
struct NodeView {
    port: u16,
    state: String,
    /// `role:slave` and whether its link to its master is up.
    replica: bool,
    link_up: bool,
    slots: Vec<SlotRange>,
}

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

    /// The master serving `key`'s slot now (see [`key_slot`]). Blocking.
    /// The first name `prefix:N` whose slot the `i`-th master (in slot order) serves now.
    pub fn key_on_master(&self, i: usize, prefix: &str) -> String {
        let port = self.masters()[i].port();
        (0..)
            .map(|n| format!("{prefix}:{n}"))
            .find(|key| self.master_of_key(key).port() == port)
            .expect("some name lands on every master")
    }

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

    /// Manual failover of `master`: `CLUSTER FAILOVER` on its first replica, which the
    /// master hands its slots to once the replica has caught up (about 15 ms here). Returns
    /// the promoted node once every reachable node sees it serving all of `master`'s slots,
    /// `master` is listed as its replica and the cluster is settled (see
    /// [`wait_until_ok`](Self::wait_until_ok)).
    ///
    /// Needs `master` alive: for a dead one the cluster fails over by itself (see
    /// [`kill_master`](Self::kill_master)).
    ///
    /// # Cancel safety
    ///
    /// The failover goes ahead once started, and the wait runs to its bound on the blocking
    /// pool even if this future is dropped.
    pub async fn failover(&self, master: &RedisServer) -> &RedisServer {
        let old = master.port();
        let new = self.replica_of(master).port();
        let owned: Vec<(u16, u16)> = self
            .slot_map()
            .iter()
            .filter(|r| r.master == old)
            .map(|r| (r.start, r.end))
            .collect();
        admin::<()>(self.node(new), redis::cmd("CLUSTER").arg("FAILOVER"));
        let ports = self.running_ports();
        off_runtime(move || {
            poll_blocking(
                &format!("node {new} to take over from {old}"),
                SETTLE_LIMIT,
                POLL,
                || {
                    let map = agreed_view(&ports, false, None)?;
                    for &(start, end) in &owned {
                        if let Some(r) = map
                            .iter()
                            .find(|r| r.start <= end && start <= r.end && r.master != new)
                        {
                            return Err(format!(
                                "slots {}-{} still on {}",
                                r.start, r.end, r.master
                            ));
                        }
                    }
                    if !map
                        .iter()
                        .any(|r| r.master == new && r.replicas.contains(&old))
                    {
                        return Err(format!("{old} is not listed as a replica of {new} yet"));
                    }
                    Ok(())
                },
            )
        })
        .await;
        self.node(new)
    }

    /// Kills (SIGKILL) the `i`-th of the current [`masters`](Self::masters) and returns its
    /// port. The cluster notices after the node timeout and promotes a replica about 2 s
    /// after the kill; [`wait_until_ok`](Self::wait_until_ok) waits for that.
    pub fn kill_master(&mut self, i: usize) -> u16 {
        let masters = self.masters();
        let port = masters
            .get(i)
            .unwrap_or_else(|| panic!("there are only {} masters", masters.len()))
            .port();
        self.kill_node(port);
        port
    }

    /// Kills (SIGKILL) the node on `port`, whatever its role.
    pub fn kill_node(&mut self, port: u16) {
        let i = self.index_of(port);
        self.nodes[i].kill();
    }

    /// Starts the node on `port` again on the same port and directory, so it keeps its
    /// `nodes.conf` (its identity and its view of the cluster) and rejoins: a former master
    /// whose slots were taken over comes back as a replica of the new owner. Returns once it
    /// answers `PING`; [`wait_until_ok`](Self::wait_until_ok) waits for it to catch up.
    /// (`RedisServer::restart` would wipe `nodes.conf` and bring back a stranger.)
    pub fn restart_node(&mut self, port: u16) {
        let i = self.index_of(port);
        self.nodes[i].restart_keeping_data();
    }

    /// Waits until the cluster is settled as far as it can be seen: every node that answers
    /// says `cluster_state:ok` and sees the same slot map, every slot is served by a master
    /// that answers, and every replica that answers has its link to its master up. Nodes
    /// that are killed or frozen are left out (so their slots must have moved to a promoted
    /// replica). Panics after [`SETTLE_LIMIT`].
    ///
    /// # Cancel safety
    ///
    /// The wait runs to its bound on the blocking pool even if this future is dropped.
    pub async fn wait_until_ok(&self) {
        let ports = self.running_ports();
        off_runtime(move || {
            poll_blocking("the cluster to settle", SETTLE_LIMIT, POLL, || {
                agreed_view(&ports, false, None).map(drop)
            })
        })
        .await
    }

    /// Moves `slot` from master `from` to master `to` with its keys:
    /// [`begin_migration`](Self::begin_migration), then
    /// [`finish_migration`](Self::finish_migration).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future may leave the slot mid-migration.
    pub async fn migrate_slot(&self, slot: u16, from: &RedisServer, to: &RedisServer) {
        self.begin_migration(slot, from, to).await;
        self.finish_migration(slot, from, to).await;
    }

    /// Marks `slot` `IMPORTING` on `to` and `MIGRATING` on `from` (in that order, as the
    /// Redis Cluster spec says, so that no `ASK` points at a node not yet importing), and
    /// moves no key: from now on `from` answers `ASK` for keys of the slot it lacks, which
    /// is the state tests of redirections want.
    ///
    /// # Cancel safety
    ///
    /// The commands are sent on the blocking pool; dropping the future may leave only the
    /// first one sent.
    pub async fn begin_migration(&self, slot: u16, from: &RedisServer, to: &RedisServer) {
        assert!(slot < SLOTS, "slot {slot} is out of range");
        let owner = self.node_for_slot(slot).port();
        assert_eq!(owner, from.port(), "slot {slot} is served by {owner}");
        let (from, to) = (from.port(), to.port());
        off_runtime(move || {
            let from_id: String = admin_port(from, redis::cmd("CLUSTER").arg("MYID"));
            let to_id: String = admin_port(to, redis::cmd("CLUSTER").arg("MYID"));
            admin_port::<()>(
                to,
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("IMPORTING")
                    .arg(&from_id),
            );
            admin_port::<()>(
                from,
                redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(slot)
                    .arg("MIGRATING")
                    .arg(&to_id),
            );
        })
        .await
    }

    /// Moves the keys of `slot`, which [`begin_migration`](Self::begin_migration) marked
    /// migrating from `from` to `to`, over to `to` (`MIGRATE`, a batch at a time), and
    /// leaves the slot half-way: from now on `from` answers `ASK` for every key of the slot,
    /// and `to` serves them only to a client that says `ASKING` first.
    ///
    /// # Cancel safety
    ///
    /// The work runs to its end on the blocking pool even if this future is dropped.
    pub async fn migrate_keys(&self, slot: u16, from: &RedisServer, to: &RedisServer) {
        let (from, to) = (from.port(), to.port());
        off_runtime(move || move_keys(slot, from, to)).await
    }

    /// Finishes a migration [`begin_migration`](Self::begin_migration) started: `MIGRATE`s
    /// the slot's remaining keys from `from` to `to`, then `CLUSTER SETSLOT <slot> NODE
    /// <to>` on `to`, `from` and every other master (replicas refuse `SETSLOT` and follow by
    /// gossip), and waits until the cluster is settled with `to` serving the slot.
    ///
    /// # Cancel safety
    ///
    /// The work runs to its end on the blocking pool even if this future is dropped.
    pub async fn finish_migration(&self, slot: u16, from: &RedisServer, to: &RedisServer) {
        let others: Vec<u16> = self
            .masters()
            .iter()
            .map(|m| m.port())
            .filter(|&p| p != from.port() && p != to.port())
            .collect();
        let (from, to) = (from.port(), to.port());
        let ports = self.running_ports();
        off_runtime(move || {
            move_keys(slot, from, to);
            let to_id: String = admin_port(to, redis::cmd("CLUSTER").arg("MYID"));
            // The new owner first: it then bumps its config epoch, so its claim wins
            // wherever the others' SETSLOT has not landed yet.
            for port in [to, from].into_iter().chain(others) {
                admin_port::<()>(
                    port,
                    redis::cmd("CLUSTER")
                        .arg("SETSLOT")
                        .arg(slot)
                        .arg("NODE")
                        .arg(&to_id),
                );
            }
            poll_blocking(
                &format!("slot {slot} to move to {to}"),
                SETTLE_LIMIT,
                POLL,
                || {
                    let map = agreed_view(&ports, false, None)?;
                    match map.iter().find(|r| r.start <= slot && slot <= r.end) {
                        Some(r) if r.master == to => Ok(()),
                        other => Err(format!("slot {slot} is on {other:?}")),
                    }
                },
            )
        })
        .await
    }

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

    fn index_of(&self, port: u16) -> usize {
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("no cluster node listens on {port}"))
    }

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

/// An admin command that must succeed during set-up or a fault: panics with the node and
/// the error otherwise.
fn admin<T: redis::FromRedisValue>(node: &RedisServer, cmd: &redis::Cmd) -> T {
    admin_port(node.port(), cmd)
}

/// `MIGRATE`s every key of `slot` from the node on port `from` to the one on `to`, a batch
/// at a time, until `from` has none left. Blocking.
fn move_keys(slot: u16, from: u16, to: u16) {
    let deadline = Instant::now() + SETTLE_LIMIT;
    loop {
        let keys: Vec<Vec<u8>> = admin_port(
            from,
            redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(MIGRATE_BATCH),
        );
        if keys.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "slot {slot} still has keys on {from} after {SETTLE_LIMIT:?}"
        );
        // No REPLACE: a key on both sides is a bug in the test, not something to paper
        // over by keeping the older copy.
        admin_port::<()>(
            from,
            redis::cmd("MIGRATE")
                .arg("127.0.0.1")
                .arg(to)
                .arg("")
                .arg(0)
                .arg(MIGRATE_TIMEOUT_MS)
                .arg("KEYS")
                .arg(keys),
        );
    }
}

fn admin_port<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> T {
    crate::servers::query_port(port, cmd, QUERY_TIMEOUT)
        .unwrap_or_else(|e| panic!("{cmd:?} on cluster node {port}: {e}"))
}

/// The cluster as every node in `ports` sees it, if they all agree and it is whole: the
/// agreed slot map, or why not. Nodes that do not answer fail the check when `all` is set
/// and are left out otherwise. With `replicas`, every master must list that many replicas.
fn agreed_view(
    ports: &[u16],
    all: bool,
    replicas: Option<usize>,
) -> Result<Vec<SlotRange>, String> {
    let mut views = Vec::new();
    for &port in ports {
        match look(port) {
            Ok(view) => views.push(view),
            Err(e) if all => return Err(e),
            Err(_) => {}
        }
    }
    let Some(first) = views.first() else {
        return Err("no node answers".into());
    };
    let answering: BTreeSet<u16> = views.iter().map(|v| v.port).collect();
    for view in &views {
        if view.state != "ok" {
            return Err(format!("node {}: cluster_state:{}", view.port, view.state));
        }
        if view.replica && !view.link_up {
            return Err(format!("replica {}: master link down", view.port));
        }
    }
    let mut next = 0u32;
    for range in &first.slots {
        if u32::from(range.start) != next {
            return Err(format!(
                "node {} sees slots {next}-{} unserved",
                first.port, range.start
            ));
        }
        next = u32::from(range.end) + 1;
        if !answering.contains(&range.master) {
            return Err(format!(
                "slots {}-{} are served by {}, which does not answer",
                range.start, range.end, range.master
            ));
        }
        if let Some(n) = replicas {
            if range.replicas.len() != n {
                return Err(format!(
                    "master {} has replicas {:?}",
                    range.master, range.replicas
                ));
            }
        }
    }
    if next != u32::from(SLOTS) {
        return Err(format!(
            "node {} sees slots {next}-16383 unserved",
            first.port
        ));
    }
    for view in &views[1..] {
        if view.slots != first.slots {
            return Err(format!(
                "node {} sees {:?}, node {} sees {:?}",
                first.port, first.slots, view.port, view.slots
            ));
        }
    }
    Ok(first.slots.clone())
}

/// One node's view: `CLUSTER INFO`, `CLUSTER SLOTS` and `INFO replication` in one round
/// trip, within [`LOOK_TIMEOUT`].
fn look(port: u16) -> Result<NodeView, String> {
    let mut conn = connect(port, LOOK_TIMEOUT).map_err(|e| format!("node {port}: {e}"))?;
    let (info, slots, replication): (String, Value, String) = redis::pipe()
        .cmd("CLUSTER")
        .arg("INFO")
        .cmd("CLUSTER")
        .arg("SLOTS")
        .cmd("INFO")
        .arg("replication")
        .query(&mut conn)
        .map_err(|e| format!("node {port}: {e}"))?;
    let field = |text: &str, name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(|v| v.trim().to_string())
            .unwrap_or_default()
    };
    Ok(NodeView {
        port,
        state: field(&info, "cluster_state"),
        replica: field(&replication, "role") == "slave",
        link_up: field(&replication, "master_link_status") == "up",
        slots: parse_slots(&slots).map_err(|e| format!("node {port}: CLUSTER SLOTS: {e}"))?,
    })
}

/// `CLUSTER SLOTS`: `[[start, end, [ip, port, id, ...], [replica ...]...], ...]`, sorted by
/// start.
fn parse_slots(reply: &Value) -> Result<Vec<SlotRange>, String> {
    let int = |v: &Value| match v {
        Value::Int(n) => u16::try_from(*n).map_err(|e| e.to_string()),
        other => Err(format!("expected an integer, got {other:?}")),
    };
    let port = |v: &Value| match v {
        Value::Array(node) if node.len() >= 2 => int(&node[1]),
        other => Err(format!("expected a node, got {other:?}")),
    };
    let Value::Array(entries) = reply else {
        return Err(format!("expected an array, got {reply:?}"));
    };
    let mut ranges = Vec::new();
    for entry in entries {
        let Value::Array(items) = entry else {
            return Err(format!("expected a range, got {entry:?}"));
        };
        if items.len() < 3 {
            return Err(format!("short range {items:?}"));
        }
        let mut replicas = items[3..].iter().map(port).collect::<Result<Vec<_>, _>>()?;
        replicas.sort_unstable();
        ranges.push(SlotRange {
            start: int(&items[0])?,
            end: int(&items[1])?,
            master: port(&items[2])?,
            replicas,
        });
    }
    ranges.sort_by_key(|r| r.start);
    Ok(ranges)
}
