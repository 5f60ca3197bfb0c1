//! Redis forgetting the lock scripts (`SCRIPT FLUSH`, or a restart without them) does not
//! fail a lock call: the script is loaded again and the call sent once more.

use std::sync::Arc;

use futures_util::future::join_all;
use testkit::{client, lock_hash, RedisServer};
use tokio::sync::Barrier;

#[tokio::test]
async fn a_flushed_script_cache_is_refilled_by_the_next_lock_and_unlock() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client(&server).await;
    let lock = client.lock("flushed");
    lock.lock().await.unwrap().unlock().await.unwrap();

    server.cli(&["SCRIPT", "FLUSH"]);
    let guard = lock
        .lock()
        .await
        .expect("the acquire script is loaded again");
    assert_eq!(lock_hash(&mut conn, "flushed").await.len(), 1);

    server.cli(&["SCRIPT", "FLUSH"]);
    guard
        .unlock()
        .await
        .expect("the unlock script is loaded again");
    assert!(!lock.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_calls_survive_a_flushed_script_cache() {
    const TASKS: usize = 32;
    let server = RedisServer::start();
    let client = client(&server).await;
    server.cli(&["SCRIPT", "FLUSH"]);
    let start = Arc::new(Barrier::new(TASKS));
    let tasks = (0..TASKS).map(|i| {
        let (client, start) = (client.clone(), start.clone());
        tokio::spawn(async move {
            let lock = client.lock(format!("flushed:{i}"));
            start.wait().await;
            for _ in 0..5 {
                lock.lock().await.unwrap().unlock().await.unwrap();
            }
        })
    });
    for task in join_all(tasks).await {
        task.unwrap();
    }
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test]
async fn fair_lock_calls_survive_a_flushed_script_cache() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = client(&server).await;
    let lock = client.fair_lock("fair-flushed");
    server.cli(&["SCRIPT", "FLUSH"]);
    let guard = lock
        .lock()
        .await
        .expect("the fair acquire script is loaded again");
    assert_eq!(lock_hash(&mut conn, "fair-flushed").await.len(), 1);
    server.cli(&["SCRIPT", "FLUSH"]);
    guard
        .unlock()
        .await
        .expect("the fair unlock script is loaded again");
    server.cli(&["SCRIPT", "FLUSH"]);
    let held = lock.lock().await.unwrap();
    server.cli(&["SCRIPT", "FLUSH"]);
    assert!(
        lock.force_unlock().await.unwrap(),
        "force unlock after a flush"
    );
    assert!(lock_hash(&mut conn, "fair-flushed").await.is_empty());
    drop(held);
}
