//! A `RedLock` re-entry whose nodes answer only after the call gave up is never sent again:
//! each node then counts the re-entry once at most. Three masters are frozen (SIGSTOP) past
//! the node timeout while re-entries are in flight; their scripts run when they thaw.

use std::time::Duration;

use redis_rlock::{Client, RedLock};
use testkit::group::{held_on, redlock};
use testkit::{lock_hash, RedisGroup};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_entries_that_outlive_their_timeout_count_once_per_node() {
    let group = RedisGroup::start(3);
    let mut clients = Vec::new();
    for server in &group.servers {
        let client = Client::builder(server.url())
            .response_timeout(Duration::from_millis(150))
            .retry_attempts(5)
            .retry_delay(Duration::from_millis(50))
            .build()
            .await
            .unwrap();
        clients.push(client);
    }
    let red = RedLock::new(clients.iter().map(|c| c.lock("slow-red")).collect())
        .with_node_timeout(Duration::from_millis(150));
    // The outer hold must be on every node, or a node's count says nothing about its
    // re-entries: taken with a roomy node timeout, whose late answers join the guard, and
    // read back from each node before any is frozen. (With 150 ms a loaded machine can
    // leave one node out of a quorum of two.)
    let first = redlock(&clients, "slow-red").lock().await.unwrap();
    assert_eq!(held_on(&group, "slow-red", &[true; 3]).await, [true; 3]);

    for server in &group.servers {
        server.freeze();
    }
    let thaw = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for server in &group.servers {
            server.thaw();
        }
    };
    let tries = futures_util::future::join_all((0..3).map(|_| red.lock()));
    let (entered, ()) = tokio::join!(tries, thaw);
    let failed = entered.iter().filter(|r| r.is_err()).count() as i64;
    let held: Vec<_> = entered.into_iter().filter_map(Result::ok).collect();
    // Each late script has run once the node answers again.
    for server in &group.servers {
        let _: String = redis::cmd("PING")
            .query_async(&mut server.raw().await)
            .await
            .unwrap();
    }
    for server in &group.servers {
        let hash = lock_hash(&mut server.raw().await, "slow-red").await;
        let counted = hash.get(first.owner()).copied().unwrap_or(0);
        let extra = counted - 1 - held.len() as i64;
        assert!(
            (0..=failed).contains(&extra),
            "port {}: {} re-entries given, {failed} failed, counted {counted}",
            server.port(),
            held.len()
        );
    }
    drop(held);
    drop(first);
}
