//! [`Conn`]: the one connection type lock commands go out on, whatever the topology: a
//! multiplexed connection to one Redis, or a cluster connection that routes each command
//! to the master of its first key's hash slot. Scripts, EVALSHA and batches are written
//! against it.
//!
//! Script calls ([`EvalSha`]) are written straight into one command buffer.
//!
//! `redis::ScriptInvocation` copies every key and argument into a vector of its own, then
//! all of them again into the command it sends, and frees them all: for the scripts every
//! lock and unlock runs, that cost more client CPU than the rest of the call, and a
//! renewal round over 100,000 locks made some 300,000 allocations. An [`EvalSha`] appends
//! each argument once, into the command's single buffer, and loads the script itself when
//! Redis has lost it.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
    MultipleNodeRoutingInfo, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{
    Cmd, ErrorKind, FromRedisValue, Pipeline, RedisFuture, RedisResult, Script, ServerErrorKind,
    ToRedisArgs, Value,
};

use crate::protocol::slot::key_slot;

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
        let value = self.route(cmd, master_of(slot)).await?;
        Ok(redis::from_redis_value(value)?)
    }

    /// Sends `cmd` to every master of a cluster (this connection's node alone elsewhere):
    /// each node's address and reply, a node's refusal as its reply.
    pub(crate) async fn on_every_master(&mut self, cmd: Cmd) -> RedisResult<Vec<(String, Value)>> {
        let cluster = self.is_cluster();
        let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        Ok(match self.route(cmd, routing).await? {
            Value::Map(replies) if cluster => replies
                .into_iter()
                .map(|(node, reply)| (redis::from_redis_value(node).unwrap_or_default(), reply))
                .collect(),
            // One Redis, or one master: redis-rs may answer with its reply alone.
            reply => vec![(String::new(), reply)],
        })
    }

    /// Runs `cmd` on one node: the one Redis, or any node of a cluster (where redis-rs
    /// would otherwise send some commands, such as `PUBSUB SHARDNUMSUB`, to every node and
    /// fail when one is down).
    pub(crate) async fn query_one_node(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
        self.route(cmd.clone(), routing).await
    }

    /// Sends `cmd` on this connection to one Redis, or as `routing` says on a cluster.
    async fn route(&mut self, cmd: Cmd, routing: RoutingInfo) -> RedisResult<Value> {
        match self {
            Conn::Single(conn) => cmd.query_async(conn).await,
            Conn::Cluster(conn) => conn.route_command(cmd, routing).await,
        }
    }
}

/// The routing of a command to the master of hash slot `slot`.
fn master_of(slot: u16) -> RoutingInfo {
    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
        slot,
        SlotAddr::Master,
    )))
}

/// A Lua script: its source (a cluster node that lost it is sent the source alone, see
/// [`EvalSha::query`]) and redis-rs' script, which hashes it once.
pub(crate) struct LuaScript {
    source: String,
    pub(crate) script: Script,
}

impl LuaScript {
    pub(crate) fn new(source: String) -> Self {
        let script = Script::new(&source);
        LuaScript { source, script }
    }
}

/// The most bytes a number argument takes, for sizing a call's buffer.
pub(crate) const NUMBER_BYTES: usize = 20;

/// One `EVALSHA` of a script, built key by key and argument by argument: every key first,
/// as Redis expects, then the arguments.
pub(crate) struct EvalSha<'s> {
    script: &'s LuaScript,
    cmd: Cmd,
    keys: usize,
}

impl<'s> EvalSha<'s> {
    /// A call of `script` on `keys` keys; `args` and `bytes` size the buffer (arguments
    /// and their total length, keys included), to spare it from growing.
    pub(crate) fn new(script: &'s LuaScript, keys: usize, args: usize, bytes: usize) -> Self {
        let mut cmd = Cmd::with_capacity(3 + args, 64 + bytes);
        cmd.arg("EVALSHA").arg(script.script.get_hash()).arg(keys);
        EvalSha { script, cmd, keys }
    }

    /// The call as it goes on the wire.
    #[cfg(test)]
    pub(crate) fn packed(&self) -> Vec<u8> {
        self.cmd.get_packed_command()
    }

    /// Appends a key or an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.cmd.arg(arg);
        self
    }

    /// Sends the call; when Redis no longer has the script (a restart, `SCRIPT FLUSH`),
    /// loads it and sends the call once more. On a cluster the script is loaded on the
    /// node of the call's first key: each node has a script cache of its own, emptied when
    /// it restarts or a replica is promoted.
    pub(crate) async fn query<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        match self.cmd.query_async(conn).await {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                match (&mut *conn, self.first_key_slot()) {
                    // `SCRIPT LOAD` through a cluster connection goes to every node and
                    // fails if one is down: load it where the call runs instead, the
                    // master of its slot alone.
                    (Conn::Cluster(cluster), Some(slot)) => {
                        let mut load = redis::cmd("SCRIPT");
                        load.arg("LOAD").arg(&self.script.source);
                        cluster.route_command(load, master_of(slot)).await?;
                    }
                    (conn, _) => drop(self.script.script.load_async(conn).await?),
                }
                self.cmd.query_async(conn).await
            }
            other => other,
        }
    }

    /// The hash slot of the call's first key (after `EVALSHA`, the hash and the key
    /// count), which routes it on a cluster.
    fn first_key_slot(&self) -> Option<u16> {
        match self.cmd.args_iter().nth(3) {
            Some(redis::Arg::Simple(key)) if self.keys > 0 => Some(key_slot(key)),
            _ => None,
        }
    }
}
