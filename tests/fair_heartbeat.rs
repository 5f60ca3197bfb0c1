//! FairLock heartbeat: a live waiter keeps its place in the queue, with a deadline pushed
//! ahead on the server clock, for many waiter timeouts.

use std::time::Duration;

use testkit::fair::{fair_clients, queue_holder};
use testkit::{fair_deadline, fair_queue, server_millis, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_live_waiter_keeps_its_place_for_many_waiter_timeouts() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let timeout = Duration::from_millis(400);
    let [holder_client, waiter_client] = fair_clients(&server, timeout).await;
    let holder = holder_client.fair_lock("patient").lock().await.unwrap();
    let first = queue_holder(&waiter_client, &raw, "patient").await;
    let second = queue_holder(&waiter_client, &raw, "patient").await;

    // Four waiter timeouts pass: only the heartbeat keeps the places.
    tokio::time::sleep(timeout * 4).await;
    assert_eq!(
        fair_queue(&mut raw, "patient").await,
        [first.owner.clone(), second.owner.clone()]
    );
    let now = server_millis(&mut raw).await;
    let deadline = fair_deadline(&mut raw, "patient", &first.owner)
        .await
        .unwrap();
    assert!(
        deadline > now,
        "deadline refreshed: {deadline} vs server time {now}"
    );

    holder.unlock().await.unwrap();
    let (_, guard) = first.finish_within(GENEROUS).await;
    guard.unlock().await.unwrap();
    let (_, guard) = second.finish_within(GENEROUS).await;
    guard.unlock().await.unwrap();
}
