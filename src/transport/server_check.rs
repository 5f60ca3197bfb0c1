//! What a client checks of its server when it connects, so that a wrong server fails
//! `build()` clearly instead of every lock call failing later: it answers as Redis 7.0 or
//! later (the scripts use `#!lua` flags and `redis.acl_check_cmd`), as a master, in
//! standalone mode (`HELLO`); and the scripts load (the user may run `EVALSHA` and
//! `SCRIPT LOAD`). A cluster client checks instead that the node it asks runs in cluster
//! mode, and a script that does not load on every node (one is down) is loaded on its
//! node at its first call there. Which commands the user may run is checked at the first use of each
//! lock kind ([`crate::transport::permissions`]).

use std::collections::HashMap;

use redis::Value;

use crate::config::server_url::ServerUrl;
use crate::error::{is_permission_failure, Error, Result};
use crate::protocol::scripts;
use crate::transport::conn::Conn;

/// Checks the server on `conn` (see the module docs) and loads the scripts.
pub(crate) async fn check_server(conn: &mut Conn, url: &ServerUrl) -> Result<()> {
    check_identity(conn, url).await?;
    match scripts::load_all(conn).await {
        Ok(()) => Ok(()),
        Err(e) if is_permission_failure(&e) => Err(Error::PermissionDenied {
            operation: "connecting to",
            target: url.to_string(),
            missing: e.detail().unwrap_or("a permission").to_string(),
        }),
        // `SCRIPT LOAD` on a cluster goes to every node and fails if one is down: each
        // call loads its script on its own node when that node answers NOSCRIPT.
        Err(e) if conn.is_cluster() => {
            tracing::debug!(%url, error = %e, "scripts not loaded on every cluster node");
            Ok(())
        }
        Err(e) => Err(Error::Redis(e)),
    }
}

/// `HELLO` (with no arguments: it answers without changing the protocol) tells the
/// server's version, role and mode in one round trip, with a command every user may run
/// under the usual `+@connection` rule. A user refused even that skips these checks.
async fn check_identity(conn: &mut Conn, url: &ServerUrl) -> Result<()> {
    let hello: redis::RedisResult<HashMap<String, Value>> =
        redis::cmd("HELLO").query_async(conn).await;
    let hello = match hello {
        Ok(hello) => hello,
        Err(e) if is_permission_failure(&e) => {
            tracing::debug!(%url, "HELLO refused; the server's version and role are not checked");
            return Ok(());
        }
        Err(e) if e.code() == Some("ERR") && e.to_string().contains("unknown command") => {
            return Err(unsupported(url, "it is older than Redis 6 (it does not know HELLO); redis-rlock needs Redis 7.0 or later"));
        }
        Err(e) => return Err(e.into()),
    };
    let field = |name: &str| -> String {
        hello
            .get(name)
            .and_then(|value| redis::from_redis_value_ref::<String>(value).ok())
            .unwrap_or_default()
    };
    let version = field("version");
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|major| major.parse().ok())
        .unwrap_or(0);
    if major < 7 {
        return Err(unsupported(
            url,
            &format!("it runs version {version}; redis-rlock needs Redis 7.0 or later (or Valkey)"),
        ));
    }
    let cluster = conn.is_cluster();
    match field("mode").as_str() {
        // The cluster connection sends HELLO to a master; replicas are never written to.
        "cluster" if cluster => return Ok(()),
        _ if cluster => {
            return Err(unsupported(
                url,
                "it does not run in cluster mode; connect to it with Client::connect",
            ))
        }
        "sentinel" => {
            return Err(unsupported(
                url,
                "it is a Redis Sentinel; connect to the master it monitors",
            ))
        }
        "cluster" => {
            return Err(unsupported(
                url,
                "it runs in cluster mode: connect with Client::connect_cluster (a lock call \
                 on one node would be refused with MOVED or CROSSSLOT)",
            ))
        }
        _ => {}
    }
    match field("role").as_str() {
        "replica" | "slave" => Err(unsupported(
            url,
            "it is a replica, and replicas are read-only; connect to its master",
        )),
        _ => Ok(()),
    }
}

/// Whether the server takes sharded pub/sub (Redis 7.0): what [`PubSubMode::Auto`] asks,
/// as Redisson's `shardedSubscriptionMode = AUTO` does, with `PUBSUB SHARDNUMSUB`. Any
/// refusal (an older server, a proxy, an ACL user without `+pubsub|shardnumsub`) means no.
///
/// [`PubSubMode::Auto`]: crate::PubSubMode::Auto
pub(crate) async fn supports_sharded_pubsub(conn: &mut Conn) -> bool {
    let mut probe = redis::cmd("PUBSUB");
    probe.arg("SHARDNUMSUB");
    match conn.query_one_node(&probe).await {
        Ok(_) => true,
        Err(e) => {
            tracing::debug!(error = %e, "sharded pub/sub unavailable; using classic pub/sub");
            false
        }
    }
}

fn unsupported(url: &ServerUrl, reason: &str) -> Error {
    Error::UnsupportedServer {
        url: url.to_string(),
        reason: reason.to_string(),
    }
}
