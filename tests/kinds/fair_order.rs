//! FairLock: who gets the lock next. Arrival order across clients, with the queue list and
//! deadlines from the server clock meanwhile; one waiter woken per release; reentrancy
//! without queueing; `force_unlock` waking the head; order kept through a killed pub/sub
//! connection; and FIFO order checked against the queue each holder saw, under load.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis_rlock::Client;
use testkit::fair::{fair_clients, queue_holder, queue_len, queue_up};
use testkit::{fair_deadline, fair_queue, info_field, lock_hash, server_millis, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);
/// Long enough that no heartbeat runs during a test: what happens is the scripts' doing.
const NO_HEARTBEAT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn waiters_from_several_clients_get_the_lock_in_arrival_order() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let timeout = Duration::from_secs(5);
    let clients: [Client; 3] = fair_clients(&server, timeout).await;
    let holder = clients[0].fair_lock("jobs").lock().await.unwrap();

    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiters = Vec::new();
    for i in 0..9 {
        let order = order.clone();
        let waiter = queue_up(&clients[i % 3], &raw, "jobs", move |lock| async move {
            let guard = lock.lock().await.unwrap();
            let acquired = Instant::now();
            order.lock().unwrap().push(i);
            guard.unlock().await.unwrap();
            acquired
        })
        .await;
        waiters.push(waiter);
    }

    // The queue holds every waiter, in arrival order, each with a deadline on the Redis
    // server's clock no further ahead than the waiter timeout.
    let owners: Vec<String> = waiters.iter().map(|w| w.owner.clone()).collect();
    assert_eq!(fair_queue(&mut raw, "jobs").await, owners);
    let now = server_millis(&mut raw).await;
    for owner in &owners {
        let deadline = fair_deadline(&mut raw, "jobs", owner).await.unwrap();
        assert!(
            deadline > now && deadline <= now + timeout.as_millis() as i64,
            "deadline {deadline} for server time {now}"
        );
    }

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let mut acquired = Vec::new();
    for waiter in waiters {
        acquired.push(waiter.finish_within(GENEROUS).await);
    }
    assert_eq!(*order.lock().unwrap(), (0..9).collect::<Vec<_>>());
    let mut previous = released;
    for at in &acquired {
        let handover = at.saturating_duration_since(previous);
        assert!(
            handover < Duration::from_millis(500),
            "hand-over took {handover:?}"
        );
        previous = *at;
    }
    assert_eq!(queue_len(&raw, "jobs").await, (0, 0));
}

#[tokio::test]
async fn a_release_wakes_the_head_of_the_queue_alone() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let [holder_client, waiters_client] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("herd").lock().await.unwrap();

    // Each waiter reports when it has the lock, then holds it until told to let go.
    let (acquired_tx, mut acquired_rx) = tokio::sync::mpsc::unbounded_channel();
    let let_go = Arc::new(tokio::sync::Semaphore::new(0));
    let mut waiters = Vec::new();
    for i in 0..8 {
        let (acquired_tx, let_go) = (acquired_tx.clone(), let_go.clone());
        waiters.push(
            queue_up(&waiters_client, &raw, "herd", move |lock| async move {
                let guard = lock.lock().await.unwrap();
                acquired_tx.send(i).unwrap();
                let_go.acquire().await.unwrap().forget();
                guard.unlock().await.unwrap();
            })
            .await,
        );
    }
    assert_eq!(
        waiters_client.status().subscribed_channels,
        8,
        "one channel per waiter"
    );

    let scripts_before = info_field(&server, "commandstats", "cmdstat_evalsha", "calls");
    holder.unlock().await.unwrap();
    let first = tokio::time::timeout(GENEROUS, acquired_rx.recv())
        .await
        .unwrap();
    assert_eq!(first, Some(0));
    // Give any other waiter woken by mistake the time to show up in the server's counts.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let scripts = info_field(&server, "commandstats", "cmdstat_evalsha", "calls") - scripts_before;
    // The unlock and the head's acquire; a thundering herd would add one per waiter.
    assert!(scripts <= 3, "{scripts} script calls for one hand-over");

    for expected in 1..8 {
        let_go.add_permits(1);
        let next = tokio::time::timeout(GENEROUS, acquired_rx.recv())
            .await
            .unwrap();
        assert_eq!(next, Some(expected));
    }
    let_go.add_permits(1);
    for waiter in waiters {
        waiter.task.await.unwrap();
    }
}

#[tokio::test]
async fn a_fair_lock_is_reentrant_without_queueing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [client, other] = fair_clients(&server, NO_HEARTBEAT).await;
    let lock = client.fair_lock("nested");
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert!(lock.is_held_by_current_task().await.unwrap());
    assert_eq!(
        lock_hash(&mut raw, "nested")
            .await
            .into_iter()
            .collect::<Vec<_>>(),
        [(outer.owner().to_string(), 2)]
    );
    assert_eq!(queue_len(&raw, "nested").await, (0, 0));

    let waiter = queue_holder(&other, &raw, "nested").await;
    inner.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert_eq!(
        fair_queue(&mut raw, "nested").await,
        [waiter.owner.as_str()]
    );
    let released = Instant::now();
    outer.unlock().await.unwrap();
    let (acquired, guard) = waiter.finish_within(GENEROUS).await;
    assert!(acquired - released < Duration::from_millis(500));
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn force_unlock_wakes_the_head_of_the_queue() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let [holder_client, waiter_client, admin] = fair_clients(&server, NO_HEARTBEAT).await;
    let held = holder_client.fair_lock("stuck").lock().await.unwrap();
    let waiter = queue_holder(&waiter_client, &raw, "stuck").await;

    let forced = Instant::now();
    assert!(admin.fair_lock("stuck").force_unlock().await.unwrap());
    let (acquired, guard) = waiter.finish_within(GENEROUS).await;
    assert!(
        acquired - forced < Duration::from_millis(500),
        "woken by its message"
    );
    let err = held.unlock().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    assert!(admin.fair_lock("stuck").is_locked().await.unwrap());
    guard.unlock().await.unwrap();
    assert!(!admin.fair_lock("stuck").force_unlock().await.unwrap());
    assert_eq!(queue_len(&raw, "stuck").await, (0, 0));
}

#[tokio::test]
async fn waiters_keep_their_order_through_a_killed_pubsub_connection() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let [holder_client, waiters] = fair_clients(&server, Duration::from_secs(5)).await;
    let holder = holder_client.fair_lock("resub").lock().await.unwrap();
    let first = queue_holder(&waiters, &raw, "resub").await;
    let second = queue_holder(&waiters, &raw, "resub").await;

    assert_eq!(server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]), "1");
    // Released while the waiters' client may be reconnecting: nobody may hear it.
    holder.unlock().await.unwrap();
    let (first_at, guard) = tokio::time::timeout(GENEROUS, first.task)
        .await
        .expect("the head got the lock after its pub/sub connection was killed")
        .unwrap();
    assert!(
        !second.task.is_finished(),
        "the second waiter stays behind the first"
    );
    guard.unlock().await.unwrap();
    let (second_at, guard) = second.finish_within(GENEROUS).await;
    assert!(second_at > first_at);
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn many_consumers_under_load_are_all_served_in_queue_order() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let clients: [Client; 3] = fair_clients(&server, Duration::from_secs(5)).await;
    const TASKS: usize = 12;
    const ROUNDS: usize = 6;
    // Each acquisition: who took the lock, how long it waited, and the queue it saw while
    // holding the lock.
    let log = Arc::new(Mutex::new(Vec::<(String, Duration, Vec<String>)>::new()));
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (lock, log, raw) = (clients[i % 3].fair_lock("load"), log.clone(), raw.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let asked = Instant::now();
                let guard = lock.lock().await.unwrap();
                let waited = asked.elapsed();
                let queue = fair_queue(&mut raw.clone(), "load").await;
                log.lock()
                    .unwrap()
                    .push((guard.owner().to_string(), waited, queue));
                tokio::time::sleep(Duration::from_millis(2)).await;
                guard.unlock().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("every consumer finished its rounds")
            .unwrap();
    }
    let log = log.lock().unwrap();
    assert_eq!(log.len(), TASKS * ROUNDS);
    let mut per_owner = std::collections::HashMap::<&str, usize>::new();
    for (owner, _, _) in log.iter() {
        *per_owner.entry(owner).or_default() += 1;
    }
    assert_eq!(per_owner.len(), TASKS);
    assert!(per_owner.values().all(|&n| n == ROUNDS), "{per_owner:?}");
    // Only the head may take a free lock, and a queue only grows at its tail while the lock
    // is held: whoever headed the queue the holder saw is the next to get the lock.
    for pair in log.windows(2) {
        let (seen_queue, next_owner) = (&pair[0].2, &pair[1].0);
        if let Some(head) = seen_queue.first() {
            assert_eq!(
                head, next_owner,
                "served out of order after queue {seen_queue:?}"
            );
        }
    }
    let longest = log.iter().map(|(_, waited, _)| *waited).max().unwrap();
    assert!(longest < GENEROUS, "a consumer waited {longest:?}");
}
