//! [`Conn`]: the one connection type lock commands go out on, whatever the topology: a
//! multiplexed connection to one Redis, or a cluster connection that routes each command
//! to the master of its first key's hash slot. Scripts, EVALSHA and batches are written
//! against it.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Cmd, Pipeline, RedisFuture, RedisResult, Value};

use crate::protocol::evalsha::LuaScript;

/// A connection to one Redis or to a Redis Cluster. Cheap to clone: clones share the
/// underlying sockets (one per node on a cluster).
#[derive(Clone)]
pub(crate) enum Conn {
    Single(MultiplexedConnection),
    /// Built with retries off: redis-rs would otherwise re-send a script after a timeout
    /// or an I/O error, when it may already have run (see `transport` module docs).
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(conn) => conn.req_packed_command(cmd),
            Conn::Cluster(conn) => conn.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(conn) => conn.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(conn) => conn.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(conn) => conn.get_db(),
            Conn::Cluster(conn) => conn.get_db(),
        }
    }
}

impl Conn {
    /// Loads `script` where a call whose first key is in hash slot `slot` runs: on a
    /// cluster, that slot's master alone (so that a node that is down elsewhere does not
    /// fail the call); `None`, or on one node, wherever this connection sends it.
    pub(crate) async fn load_script(
        &mut self,
        script: &LuaScript,
        slot: Option<u16>,
    ) -> RedisResult<()> {
        match (self, slot) {
            // `SCRIPT LOAD` through a cluster connection goes to every node and fails if
            // one is down: load it where the call runs instead.
            (Conn::Cluster(conn), Some(slot)) => {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(script.source());
                let route = Route::new(slot, SlotAddr::Master);
                conn.route_command(
                    load,
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                )
                .await
                .map(drop)
            }
            (conn, _) => script.script().load_async(conn).await.map(drop),
        }
    }
}

impl Conn {
    /// True for a cluster connection.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self, Conn::Cluster(_))
    }

    /// Sends `cmd` where a lock of `slot` lives: on a cluster, to the master of `slot`
    /// (over the same node connection as the slot's lock calls, which `WAIT` depends on);
    /// elsewhere, on this connection.
    pub(crate) async fn on_slot_master<T: redis::FromRedisValue>(
        &mut self,
        cmd: Cmd,
        slot: u16,
    ) -> RedisResult<T> {
        match self {
            Conn::Cluster(conn) => {
                let route = Route::new(slot, SlotAddr::Master);
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                let value = conn.route_command(cmd, routing).await?;
                Ok(redis::from_redis_value(value)?)
            }
            conn => cmd.query_async(conn).await,
        }
    }

    /// Sends `cmd` to every master of a cluster (this connection's node alone elsewhere):
    /// each node's address and reply, a node's refusal as its reply.
    pub(crate) async fn on_every_master(&mut self, cmd: Cmd) -> RedisResult<Vec<(String, Value)>> {
        match self {
            Conn::Cluster(conn) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                match conn.route_command(cmd, routing).await? {
                    Value::Map(replies) => Ok(replies
                        .into_iter()
                        .map(|(node, reply)| {
                            let node = redis::from_redis_value::<String>(node).unwrap_or_default();
                            (node, reply)
                        })
                        .collect()),
                    // One master: redis-rs may answer with its reply alone.
                    reply => Ok(vec![(String::new(), reply)]),
                }
            }
            conn => Ok(vec![(String::new(), cmd.query_async(conn).await?)]),
        }
    }

    /// Runs `cmd` on one node: the one Redis, or any node of a cluster (where redis-rs
    /// would otherwise send some commands, such as `PUBSUB SHARDNUMSUB`, to every node and
    /// fail when one is down).
    pub(crate) async fn query_one_node(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Conn::Single(conn) => cmd.query_async(conn).await,
            Conn::Cluster(conn) => {
                conn.route_command(
                    cmd.clone(),
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                )
                .await
            }
        }
    }
}
