//! What a client checks of its server when it connects, so that a wrong server fails
//! `build()` clearly instead of every lock call failing later: it answers as Redis 7.0 or
//! later (the scripts use `#!lua` flags and `redis.acl_check_cmd`), as a master, in
//! standalone mode (`HELLO`); and the scripts load (the user may run `EVALSHA` and
//! `SCRIPT LOAD`). A cluster client checks instead that the node it asks runs in cluster
//! mode, and a script that does not load on every node (one is down) is loaded on its
//! node at its first call there. Which commands the user may run is checked at the first use of each
//! lock kind ([`crate::transport::permissions`]).
//!
//! It also reads the server's `maxmemory-policy` and `maxmemory` ([`check_eviction`]; on a
//! cluster, every master's): a server that may evict keys when full is refused with
//! [`Error::EvictingServer`] unless the client accepts it
//! ([`ClientBuilder::allow_evicting_policy`](crate::ClientBuilder::allow_evicting_policy)).
//! The same check runs on every reconnection of a client of one Redis or of a Sentinel
//! master (see `Connections`).

use std::collections::HashMap;

use redis::Value;

use crate::config::server_url::ServerUrl;
use crate::error::{is_permission_failure, Error, Result};
use crate::protocol::conn::Conn;
use crate::protocol::scripts;

/// Checks the server on `conn` (see the module docs) and loads the scripts.
/// `allow_evicting`: the client accepts a server that may evict keys.
pub(crate) async fn check_server(
    conn: &mut Conn,
    url: &ServerUrl,
    allow_evicting: bool,
) -> Result<()> {
    check_identity(conn, url).await?;
    check_eviction(conn, url, allow_evicting, true).await?;
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
    let refusal = match (field("mode").as_str(), conn.is_cluster()) {
        // The cluster connection sends HELLO to a master; replicas are never written to.
        ("cluster", true) => return Ok(()),
        (_, true) => "it does not run in cluster mode; connect to it with Client::connect",
        ("sentinel", false) => "it is a Redis Sentinel; connect to the master it monitors",
        ("cluster", false) => {
            "it runs in cluster mode: connect with Client::connect_cluster (a lock call \
             on one node would be refused with MOVED or CROSSSLOT)"
        }
        _ => match field("role").as_str() {
            "replica" | "slave" => {
                "it is a replica, and replicas are read-only; connect to its master"
            }
            _ => return Ok(()),
        },
    };
    Err(unsupported(url, refusal))
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

/// A server's memory settings, as far as evictions go.
#[derive(Debug, PartialEq, Eq)]
struct Memory {
    /// `maxmemory-policy`.
    policy: String,
    /// `maxmemory` in bytes; 0 means no limit.
    maxmemory: u64,
}

impl Memory {
    /// `INFO memory`'s `maxmemory_policy:` and `maxmemory:` lines.
    fn from_info(info: &str) -> Option<Memory> {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        Some(Memory {
            policy: field("maxmemory_policy")?.to_string(),
            maxmemory: field("maxmemory")?.parse().ok()?,
        })
    }

    /// `CONFIG GET maxmemory-policy maxmemory`: a map (RESP3) or pairs (RESP2).
    fn from_config(reply: Value) -> Option<Memory> {
        let config: HashMap<String, String> = redis::from_redis_value(reply).ok()?;
        Some(Memory {
            policy: config.get("maxmemory-policy")?.clone(),
            maxmemory: config.get("maxmemory")?.parse().ok()?,
        })
    }

    /// Whether the server may evict keys when full: any policy but `noeviction` (every
    /// `allkeys-*`; every `volatile-*` too, since lock keys have TTLs), with a limit. With
    /// `maxmemory 0` nothing is evicted (on 64-bit builds; a 32-bit Redis caps itself at
    /// 3 GB, which this crate does not look for).
    fn evicts(&self) -> bool {
        self.policy != "noeviction" && self.maxmemory > 0
    }
}

/// The memory settings of every master (on one Redis, of it; node `""`): `INFO memory`,
/// which the README's ACL rules grant (`+info`), else `CONFIG GET`, which they do not
/// (`CONFIG` is an admin command: asking first would fill the `ACL LOG` of every
/// well-configured user with a refusal per connection). `None` for a node where both are
/// refused, renamed or unreadable.
async fn memory_settings(conn: &mut Conn) -> Result<Vec<(String, Option<Memory>)>> {
    let mut info = redis::cmd("INFO");
    info.arg("memory");
    let replies = refused_as_nil(conn.on_every_master(info).await)?;
    let mut nodes: Vec<(String, Option<Memory>)> = replies
        .into_iter()
        .map(|(node, reply)| {
            let info = redis::from_redis_value::<String>(reply).ok();
            (node, info.and_then(|info| Memory::from_info(&info)))
        })
        .collect();
    if nodes.iter().any(|(_, memory)| memory.is_none()) {
        let mut config = redis::cmd("CONFIG");
        config.arg("GET").arg("maxmemory-policy").arg("maxmemory");
        let replies = refused_as_nil(conn.on_every_master(config).await)?;
        for (node, reply) in replies {
            if let Some(entry) = nodes
                .iter_mut()
                .find(|(known, memory)| *known == node && memory.is_none())
            {
                entry.1 = Memory::from_config(reply);
            }
        }
    }
    Ok(nodes)
}

/// The replies of a command sent to every master, with a refusal on one Redis (an error
/// reply: the user may not run it, it is renamed away) as its node's reply (nil); a
/// failure to reach Redis stays an error.
fn refused_as_nil(
    replies: redis::RedisResult<Vec<(String, Value)>>,
) -> Result<Vec<(String, Value)>> {
    match replies {
        Ok(replies) => Ok(replies),
        Err(e) if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() => Err(e.into()),
        Err(_) => Ok(vec![(String::new(), Value::Nil)]),
    }
}

/// Refuses a server that may evict keys (see [`Memory::evicts`]) with
/// [`Error::EvictingServer`], unless `allow`; on a cluster, every master is read. `first`:
/// at connect, where what is accepted is logged (at `INFO` when the client accepts an
/// evicting server, with its policy) and a server whose settings cannot be read is
/// warned about; on a reconnection, these go to `DEBUG`.
///
/// A `maxmemory` of 0 (no limit: nothing is evicted) is accepted whatever the policy; a
/// later `CONFIG SET maxmemory` would start evictions, and is seen at the next
/// reconnection only. A node that cannot be asked (a cluster master down at connect) is
/// not checked.
pub(crate) async fn check_eviction(
    conn: &mut Conn,
    url: &ServerUrl,
    allow: bool,
    first: bool,
) -> Result<()> {
    let nodes = match memory_settings(conn).await {
        Ok(nodes) => nodes,
        Err(e) if e.is_connection_error() => return Err(e),
        Err(e) => {
            tracing::debug!(%url, error = %e, "cannot ask for maxmemory-policy; not checked");
            return Ok(());
        }
    };
    for (node, memory) in nodes {
        let server = if node.is_empty() {
            url.to_string()
        } else {
            node
        };
        let Some(memory) = memory else {
            if first {
                tracing::warn!(%server, "cannot read maxmemory-policy (INFO memory and CONFIG GET refused): a policy that evicts keys would lose locks silently");
            } else {
                tracing::debug!(%server, "cannot read maxmemory-policy");
            }
            continue;
        };
        let policy = memory.policy.as_str();
        if !memory.evicts() {
            if first && policy != "noeviction" {
                tracing::info!(%server, policy, "maxmemory-policy evicts keys, but maxmemory is 0 (no limit), so nothing is evicted; accepted (a later CONFIG SET maxmemory would start evictions, and is refused at the next reconnection)");
            }
            continue;
        }
        if !allow {
            return Err(Error::EvictingServer {
                url: server,
                policy: memory.policy,
            });
        }
        if first {
            tracing::info!(%server, policy, maxmemory = memory.maxmemory, "maxmemory-policy may evict lock keys; accepted (allow_evicting_policy): an evicted lock is lost silently");
        } else {
            tracing::debug!(%server, policy, "maxmemory-policy may evict lock keys; accepted");
        }
    }
    Ok(())
}

fn unsupported(url: &ServerUrl, reason: &str) -> Error {
    Error::UnsupportedServer {
        url: url.to_string(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_settings_are_read_from_info_and_config() {
        let info = "# Memory\r\nused_memory:1\r\nmaxmemory:104857600\r\nmaxmemory_human:100.00M\r\nmaxmemory_policy:allkeys-lru\r\n";
        let memory = Memory::from_info(info).unwrap();
        assert_eq!(memory.policy, "allkeys-lru");
        assert!(memory.evicts());
        let config = Value::Array(vec![
            Value::BulkString(b"maxmemory-policy".to_vec()),
            Value::BulkString(b"volatile-lru".to_vec()),
            Value::BulkString(b"maxmemory".to_vec()),
            Value::BulkString(b"0".to_vec()),
        ]);
        let memory = Memory::from_config(config).unwrap();
        assert_eq!(memory.policy, "volatile-lru");
        assert!(!memory.evicts(), "no limit: nothing is evicted");
        assert!(Memory::from_info("# Memory\r\n").is_none());
    }
}
