//! The faults cluster tests need: a manual failover, a killed or restarted node, the wait
//! for the cluster to settle again, and a slot migrated between masters with its keys.

use std::time::Instant;

use crate::servers::RedisServer;
use crate::wait::{off_runtime, poll_blocking};

use super::view::agreed_view;
use super::{admin, admin_port, RedisCluster, POLL, SETTLE_LIMIT, SLOTS};

/// The `MIGRATE` timeout (ms) and how many keys one `MIGRATE` moves.
const MIGRATE_TIMEOUT_MS: u64 = 5000;
const MIGRATE_BATCH: usize = 100;

impl RedisCluster {
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
