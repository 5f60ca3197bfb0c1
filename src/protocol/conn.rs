//! [`RedisConn`]: what the protocol needs of a connection. Scripts, EVALSHA and batches are
//! written once against it; the transport layer's connection (one node or a cluster)
//! implements it.

use std::future::Future;

use redis::aio::ConnectionLike;
use redis::RedisResult;

use crate::protocol::evalsha::LuaScript;

/// A cloneable, multiplexed connection that script calls go out on.
pub(crate) trait RedisConn: ConnectionLike + Clone + Send + Sync + 'static {
    /// Loads `script` where a call whose first key is in hash slot `slot` runs: on a
    /// cluster, that slot's master alone (so that a node that is down elsewhere does not
    /// fail the call); `None`, or on one node, wherever this connection sends it.
    fn load_script<'a>(
        &'a mut self,
        script: &'a LuaScript,
        slot: Option<u16>,
    ) -> impl Future<Output = RedisResult<()>> + Send + 'a {
        let _ = slot;
        async move { script.script().load_async(self).await.map(drop) }
    }
}
