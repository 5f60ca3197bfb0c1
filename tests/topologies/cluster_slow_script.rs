//! A script that runs after its call timed out is never run twice by a cluster client. The
//! key's master is frozen (SIGSTOP) past the response timeout while acquires, re-entries
//! and unlocks are in flight: each call's script waits in the socket and runs when the
//! master thaws, after the client gave up on its reply. Whatever each call returned, the
//! hash then counts exactly the holds the callers were given, and no unlock went twice.

use std::collections::HashMap;
use std::time::Duration;

use redis_rlock::Client;
use testkit::{lock_hash, RedisCluster, RedisServer};

/// Short, so that a freeze outlasts it; the freeze stays well under the cluster's 1 s node
/// timeout, so that no failover starts meanwhile.
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(150);
const FREEZE: Duration = Duration::from_millis(500);

async fn hash_on(node: &RedisServer, key: &str) -> HashMap<String, i64> {
    lock_hash(&mut node.raw().await, key).await
}

/// Runs `calls` while `node` is frozen for [`FREEZE`].
async fn while_frozen<T>(node: &RedisServer, calls: impl std::future::Future<Output = T>) -> T {
    node.freeze();
    let thaw = async {
        tokio::time::sleep(FREEZE).await;
        node.thaw();
    };
    let (out, ()) = tokio::join!(calls, thaw);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_that_outlive_their_timeout_count_once() {
    let cluster = RedisCluster::start_async().await;
    let client = Client::cluster_builder(cluster.seeds())
        .response_timeout(RESPONSE_TIMEOUT)
        .retry_attempts(5)
        .retry_delay(Duration::from_millis(100))
        .build()
        .await
        .unwrap();
    let key = "slow:lock";
    let master = cluster.master_of_key(key);
    let lock = client.lock(key);
    let first = lock.lock().await.unwrap();

    // Re-entries sent while the master is frozen: each either counts once or not at all.
    let entered = while_frozen(master, async {
        let tries = (0..4).map(|_| lock.lock_with_lease(Duration::from_secs(30)));
        futures_util::future::join_all(tries).await
    })
    .await;
    let failed_entries = entered.iter().filter(|r| r.is_err()).count() as i64;
    let held: Vec<_> = entered.into_iter().filter_map(Result::ok).collect();
    let count = |hash: HashMap<String, i64>| hash.get(first.owner()).copied().unwrap_or(0);
    // Every call's script runs once the master thaws. A re-entry given to its caller
    // counts once; one whose reply was lost fails, and its script counts once at most
    // (it is not sent again: it cannot be undone).
    let counted = count(hash_on(master, key).await);
    let extra = counted - 1 - held.len() as i64;
    assert!(
        (0..=failed_entries).contains(&extra),
        "{} re-entries given, {failed_entries} failed, the hash counts {counted}",
        held.len()
    );

    // Unlocks sent while frozen: none counts twice (each unlock's latch).
    let released = while_frozen(master, async {
        futures_util::future::join_all(held.into_iter().map(|guard| guard.unlock())).await
    })
    .await;
    let failed = released.iter().filter(|r| r.is_err()).count() as i64;
    let left = count(hash_on(master, key).await);
    // A failed unlock may have run after all (its reply lost), never twice.
    assert!(
        (1 + extra..=1 + extra + failed).contains(&left),
        "{left} left of {counted} after {released:?}"
    );
    drop(first);
    lock.force_unlock().await.unwrap();
    assert!(hash_on(master, key).await.is_empty());
}
