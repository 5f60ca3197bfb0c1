//! Lock groups for tests: one client per master of a [`RedisGroup`], a `RedLock` with a
//! node timeout roomy enough for a loaded machine, and which masters hold a key.

use std::time::Duration;

use redis_rlock::{Client, RedLock};

use crate::clients::client_with_watchdog;
use crate::servers::RedisGroup;
use crate::wait::settles_to;

/// Per-node timeout for tests that are not about it: roomy on a loaded 2-core machine.
pub const NODE_TIMEOUT: Duration = Duration::from_millis(500);

/// How long background releases may take to land on every master.
const GENEROUS: Duration = Duration::from_secs(5);

/// One client per master, with the given watchdog timeout.
pub async fn clients(group: &RedisGroup, watchdog: Duration) -> Vec<Client> {
    let mut clients = Vec::new();
    for server in &group.servers {
        clients.push(client_with_watchdog(server, watchdog).await);
    }
    clients
}

/// A `RedLock` on lock `name` of each client, with [`NODE_TIMEOUT`].
pub fn redlock(clients: &[Client], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.lock(name)).collect()).with_node_timeout(NODE_TIMEOUT)
}

/// Whether each server holds `key`, read until it settles to `expected` (background
/// releases land shortly after the call that started them). A server that is not running
/// counts as `expected`.
pub async fn held_on(group: &RedisGroup, key: &str, expected: &[bool]) -> Vec<bool> {
    let mut held = Vec::new();
    for (server, expected) in group.servers.iter().zip(expected) {
        if !server.is_running() {
            held.push(*expected);
            continue;
        }
        let raw = server.raw().await;
        let exists = settles_to(*expected, GENEROUS, || {
            let mut raw = raw.clone();
            async move {
                redis::cmd("EXISTS")
                    .arg(key)
                    .query_async::<i64>(&mut raw)
                    .await
                    .unwrap()
                    == 1
            }
        })
        .await;
        held.push(exists);
    }
    held
}
