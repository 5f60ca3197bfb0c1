//! A Redis that may evict keys when full (`maxmemory-policy` other than `noeviction`, with
//! a `maxmemory` limit) is refused at `build()` with `Error::EvictingServer`, nothing
//! written, unless the client accepts it with `allow_evicting_policy(true)`; with no limit
//! any policy is accepted; an ACL user without `CONFIG` is checked through `INFO memory`
//! (and one without `INFO` through `CONFIG GET`); a policy switched while connected is
//! caught at the next reconnection, until it is switched back; on a cluster, every master
//! is checked.

use std::time::Duration;

use redis_rlock::Client;
use testkit::{acl, dbsize, RedisCluster, RedisServer};

fn evicting(policy: &str) -> RedisServer {
    RedisServer::start_with_args(&["--maxmemory", "100mb", "--maxmemory-policy", policy])
}

async fn build(url: String, allow: bool) -> redis_rlock::Result<Client> {
    Client::builder(url)
        .retry_delay(Duration::from_millis(20))
        .allow_evicting_policy(allow)
        .build()
        .await
}

#[tokio::test]
async fn an_evicting_policy_is_refused_with_nothing_written_unless_accepted() {
    for policy in ["allkeys-lru", "volatile-lru"] {
        let server = evicting(policy);
        let error = build(server.url(), false).await.unwrap_err();
        assert!(error.is_evicting_server(), "{policy}: {error:?}");
        let message = error.to_string();
        assert!(message.contains(policy), "{message}");
        assert!(message.contains("allow_evicting_policy"), "{message}");
        assert_eq!(dbsize(&mut server.raw().await).await, 0);

        let client = build(server.url(), true).await.unwrap();
        let guard = client.lock("evictable").lock().await.unwrap();
        guard.unlock().await.unwrap();
    }
}

#[tokio::test]
async fn without_a_maxmemory_limit_any_policy_is_accepted() {
    let server = RedisServer::start_with_args(&["--maxmemory-policy", "allkeys-lru"]);
    let client = build(server.url(), false).await.unwrap();
    client
        .lock("unlimited")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}

#[tokio::test]
async fn an_acl_user_is_checked_through_info_or_config_get() {
    let server = evicting("allkeys-lfu");
    // The README's rules: INFO, no CONFIG. Refused, and CONFIG was never tried.
    acl::set_user(&server, &acl::readme_rules("app:*"));
    let error = build(acl::user_url(&server), false).await.unwrap_err();
    assert!(error.is_evicting_server(), "{error:?}");
    assert!(error.to_string().contains("allkeys-lfu"), "{error}");
    assert_eq!(acl::refusals(&server).await, Vec::new());

    // Without INFO, with CONFIG GET: read there.
    let rules = acl::without(&acl::readme_rules("app:*"), "+info");
    let mut rules = rules;
    rules.push("+config|get".to_string());
    acl::set_user(&server, &rules);
    let error = build(acl::user_url(&server), false).await.unwrap_err();
    assert!(error.is_evicting_server(), "{error:?}");

    // Neither: not checked (a warning), and the client connects.
    let rules = acl::without(&acl::readme_rules("app:*"), "+info");
    acl::set_user(&server, &rules);
    build(acl::user_url(&server), false).await.unwrap();
    assert_eq!(dbsize(&mut server.raw().await).await, 0);
}

#[tokio::test]
async fn a_policy_switched_while_connected_is_caught_at_the_next_reconnection() {
    let server = RedisServer::start();
    let client = build(server.url(), false).await.unwrap();
    let lock = client.lock("switched");
    lock.lock().await.unwrap().unlock().await.unwrap();

    assert_eq!(server.cli(&["CONFIG", "SET", "maxmemory", "100mb"]), "OK");
    assert_eq!(
        server.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        "OK"
    );
    // Not seen while the connection lasts; the reconnection sees it.
    server.cli(&["CLIENT", "KILL", "TYPE", "normal"]);
    let mut refused = None;
    for _ in 0..5 {
        match lock.try_lock().await {
            Err(e) if e.is_evicting_server() => {
                refused = Some(e);
                break;
            }
            Err(e) if e.is_connection_error() => continue,
            other => panic!("the reconnection went on: {other:?}"),
        }
    }
    let refused = refused.expect("the reconnection was refused");
    assert!(refused.to_string().contains("allkeys-lru"), "{refused}");
    assert!(!testkit::key_exists(&mut server.raw().await, "switched").await);
    // Calls keep failing so until the policy is fixed (past the retry delay, each call
    // tries a fresh connection again).
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(lock.try_lock().await.unwrap_err().is_evicting_server());

    assert_eq!(
        server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]),
        "OK"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    let guard = lock.try_lock().await.unwrap().expect("free");
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn on_a_cluster_every_master_is_checked() {
    let cluster = RedisCluster::start_async().await;
    let master = cluster.masters()[2];
    assert_eq!(master.cli(&["CONFIG", "SET", "maxmemory", "100mb"]), "OK");
    assert_eq!(
        master.cli(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]),
        "OK"
    );
    let error = Client::cluster_builder(cluster.seeds())
        .build()
        .await
        .unwrap_err();
    assert!(error.is_evicting_server(), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("volatile-ttl"), "{message}");
    assert!(
        message.contains(&master.port().to_string()),
        "names the node: {message}"
    );
    Client::cluster_builder(cluster.seeds())
        .allow_evicting_policy(true)
        .build()
        .await
        .unwrap();
}
