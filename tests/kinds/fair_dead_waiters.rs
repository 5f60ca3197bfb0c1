//! FairLock waiters that will never take their turn: a crashed waiter passed over once its
//! 100 ms grace to subscribe has passed, and dropped within the waiter timeout, 20 crashed
//! waiters of one process passed over together, a frozen waiter and an idle one (a wait nobody polls) holding the queue up no
//! longer than the timeout, and 20 consumers with one crashing and one giving up, the rest
//! served in order.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis_rlock::Client;
use testkit::fair::{
    doomed_waiter, doomed_waiters, fair_clients, queue_holder, queue_len, queue_up,
};
use testkit::{fair_queue, queue_becomes, server_millis, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_crashed_waiter_is_passed_over_and_dropped_within_the_timeout() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let timeout = Duration::from_secs(2);
    let [holder_client, e, f] = fair_clients(&server, timeout).await;
    let holder = holder_client.fair_lock("crash").lock().await.unwrap();
    let doomed = doomed_waiter(&server, "crash", timeout).await;
    queue_becomes(&raw, "crash", &[doomed.owners[0].as_str()], GENEROUS).await;
    let next = queue_holder(&e, &raw, "crash").await;
    let last = queue_holder(&f, &raw, "crash").await;

    let crashed = Instant::now();
    let dead = doomed.crash(&raw, "crash").await;
    // A crash leaves its place behind: nothing ran to take it back.
    let mut conn = raw.clone();
    assert_eq!(fair_queue(&mut conn, "crash").await[0], dead[0]);

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, guard) = tokio::time::timeout(Duration::from_secs(1), next.task)
        .await
        .expect("the dead head was passed over")
        .unwrap();
    let handover = acquired - released;
    assert!(
        handover < Duration::from_millis(500),
        "hand-over took {handover:?}"
    );

    // The dead waiter stepped back behind the live one, and its deadline drops it.
    queue_becomes(&raw, "crash", &[last.owner.as_str()], timeout + GENEROUS).await;
    let gone_after = crashed.elapsed();
    assert!(
        gone_after <= timeout + Duration::from_millis(500),
        "dropped {gone_after:?} after the crash; the bound is {timeout:?}"
    );
    guard.unlock().await.unwrap();
    let (_, guard) = last.finish_within(GENEROUS).await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_crashed_process_with_many_waiters_is_passed_over_together() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let timeout = Duration::from_secs(5);
    let [holder_client, live_client] = fair_clients(&server, timeout).await;
    let holder = holder_client.fair_lock("many-dead").lock().await.unwrap();
    let doomed = doomed_waiters(&server, "many-dead", timeout, 20).await;
    let live = queue_holder(&live_client, &raw, "many-dead").await;
    let dead = doomed.crash(&raw, "many-dead").await;

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, guard) = live.finish_within(GENEROUS).await;
    let handover = acquired - released;
    assert!(
        handover < Duration::from_millis(500),
        "20 dead waiters ahead cost {handover:?}"
    );
    // They stepped back behind the live waiter, in their order, until their deadlines run out.
    let mut conn = raw.clone();
    assert_eq!(fair_queue(&mut conn, "many-dead").await, dead);
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_frozen_waiter_holds_the_queue_up_for_at_most_the_waiter_timeout() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let timeout = Duration::from_secs(1);
    let [holder_client, waiter_client] = fair_clients(&server, timeout).await;
    let holder = holder_client.fair_lock("frozen").lock().await.unwrap();

    // A frozen process: its pub/sub connection is open and subscribed, so it is counted as
    // hearing the unlock, but it never acts and never refreshes its place (deadline as a
    // live waiter's last heartbeat would have set it).
    let frozen = "00000000-0000-0000-0000-000000000000:1";
    let mut pubsub = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    pubsub
        .subscribe(format!("redisson_lock__channel:{{frozen}}:{frozen}"))
        .await
        .unwrap();
    let deadline = server_millis(&mut raw).await + timeout.as_millis() as i64 * 3 / 4;
    let _: () = redis::pipe()
        .cmd("ZADD")
        .arg("redisson_lock_timeout:{frozen}")
        .arg(deadline)
        .arg(frozen)
        .ignore()
        .cmd("RPUSH")
        .arg("redisson_lock_queue:{frozen}")
        .arg(frozen)
        .ignore()
        .query_async(&mut raw)
        .await
        .unwrap();
    let live = queue_holder(&waiter_client, &raw, "frozen").await;
    assert_eq!(
        fair_queue(&mut raw, "frozen").await,
        [frozen.to_string(), live.owner.clone()]
    );

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, guard) = live.finish_within(GENEROUS).await;
    let stalled = acquired - released;
    assert!(
        stalled <= timeout + Duration::from_millis(500),
        "the frozen head held the queue up for {stalled:?}; the bound is {timeout:?}"
    );
    guard.unlock().await.unwrap();
    assert_eq!(queue_len(&raw, "frozen").await, (0, 0));
    drop(pubsub);
}

#[tokio::test]
async fn a_head_that_never_takes_its_turn_is_passed_over_within_the_timeout() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let timeout = Duration::from_secs(1);
    let [holder_client, idle_client, next_client] = fair_clients(&server, timeout).await;
    let holder = holder_client.fair_lock("idle").lock().await.unwrap();
    // A wait that is queued, and then never polled again while its client lives on: it
    // hears its turn and does nothing with it.
    let lock = idle_client.fair_lock("idle");
    let mut idle = Box::pin(lock.lock());
    let queued = async {
        let mut conn = raw.clone();
        while fair_queue(&mut conn, "idle").await.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::select! {
        _ = &mut idle => panic!("the lock is held"),
        _ = tokio::time::timeout(GENEROUS, queued) => {}
    }
    let next = queue_holder(&next_client, &raw, "idle").await;

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, guard) = tokio::time::timeout(GENEROUS, next.task)
        .await
        .expect("the queue went on past a head that did not take its turn")
        .unwrap();
    let stalled = acquired - released;
    assert!(
        stalled <= timeout + Duration::from_millis(500),
        "an idle head held the queue up for {stalled:?}; the bound is {timeout:?}"
    );
    guard.unlock().await.unwrap();
    drop(idle);
}

#[tokio::test]
async fn twenty_consumers_one_crashed_one_gave_up_the_rest_served_in_order() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let timeout = Duration::from_secs(2);
    let clients: [Client; 3] = fair_clients(&server, timeout).await;
    let holder = clients[0].fair_lock("consumers").lock().await.unwrap();
    const CRASHES: usize = 5;
    const GIVES_UP: usize = 11;

    let served = Arc::new(Mutex::new(Vec::new()));
    let mut consumers = Vec::new();
    let mut doomed = None;
    let mut gives_up = None;
    for i in 0..20 {
        let client = &clients[i % 3];
        match i {
            CRASHES => {
                let waiter = doomed_waiter(&server, "consumers", timeout).await;
                doomed = Some(waiter);
            }
            GIVES_UP => {
                gives_up = Some(
                    queue_up(client, &raw, "consumers", |lock| async move {
                        lock.try_lock_for(Duration::from_millis(300)).await.unwrap()
                    })
                    .await,
                );
            }
            _ => {
                let served = served.clone();
                consumers.push(
                    queue_up(client, &raw, "consumers", move |lock| async move {
                        let guard = lock.lock().await.unwrap();
                        served.lock().unwrap().push((i, Instant::now()));
                        guard.unlock().await.unwrap();
                    })
                    .await,
                );
            }
        }
    }
    assert!(gives_up.unwrap().task.await.unwrap().is_none(), "gave up");
    let dead = doomed.unwrap().crash(&raw, "consumers").await;
    let mut conn = raw.clone();
    let queue = fair_queue(&mut conn, "consumers").await;
    assert_eq!(
        queue.len(),
        19,
        "the one that gave up left; the crashed one did not"
    );
    assert!(queue.contains(&dead[0]));

    let released = Instant::now();
    holder.unlock().await.unwrap();
    for consumer in consumers {
        consumer.finish_within(GENEROUS).await;
    }
    let served = served.lock().unwrap();
    let order: Vec<usize> = served.iter().map(|(i, _)| *i).collect();
    let expected: Vec<usize> = (0..20).filter(|&i| i != CRASHES && i != GIVES_UP).collect();
    assert_eq!(order, expected);
    let mut previous = released;
    let mut handovers = Vec::new();
    for (_, at) in served.iter() {
        handovers.push(at.saturating_duration_since(previous));
        previous = *at;
    }
    let slowest = handovers.iter().max().unwrap();
    assert!(
        *slowest < Duration::from_millis(250),
        "slowest hand-over {slowest:?}, past the crashed consumer too: {handovers:?}"
    );
}
