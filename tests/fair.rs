//! FairLock: arrival order across clients, one waiter woken per release, leaving the queue
//! on give-up, passing over dead waiters, heartbeats keeping live ones, reentrancy, force
//! unlock, pub/sub reconnection, and many consumers under load.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, LockGuard};
use testkit::{
    fair_client, fair_deadline, fair_queue, info_field, lock_hash, queue_becomes, server_millis,
    settles_to, RedisServer,
};
use tokio::task::JoinHandle;

const GENEROUS: Duration = Duration::from_secs(5);
/// Long enough that no heartbeat runs during a test: what happens is the scripts' doing.
const NO_HEARTBEAT: Duration = Duration::from_secs(120);

/// A task waiting for a fair lock, once its place in the queue is confirmed.
struct Waiter<T> {
    owner: String,
    task: JoinHandle<T>,
}

/// Spawns `body` (which takes the fair lock `name` of `client` first) and waits until its
/// owner stands in the queue.
async fn queue_up<T, F>(
    client: &Client,
    raw: &MultiplexedConnection,
    name: &str,
    body: impl FnOnce(redis_rlock::FairLock) -> F,
) -> Waiter<T>
where
    F: std::future::Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let task = tokio::spawn(body(client.fair_lock(name)));
    let owner = format!("{}:{}", client.id(), task.id());
    let queued = settles_to(true, GENEROUS, || {
        let (mut raw, owner) = (raw.clone(), owner.clone());
        async move { fair_queue(&mut raw, name).await.contains(&owner) }
    })
    .await;
    assert!(queued, "{owner} never joined the queue of `{name}`");
    Waiter { owner, task }
}

/// A waiter that takes the lock and hands back the guard with the time it got it.
async fn queue_holder(
    client: &Client,
    raw: &MultiplexedConnection,
    name: &str,
) -> Waiter<(Instant, LockGuard)> {
    queue_up(client, raw, name, |lock| async move {
        let guard = lock.lock().await.unwrap();
        (Instant::now(), guard)
    })
    .await
}

impl<T> Waiter<T> {
    /// Waits up to `limit` for the waiter's task to finish (for most, to get the lock).
    async fn finish_within(self, limit: Duration) -> T {
        tokio::time::timeout(limit, self.task)
            .await
            .unwrap_or_else(|_| panic!("{} did not finish within {limit:?}", self.owner))
            .unwrap()
    }
}

/// `N` clients of `server` whose fair waiters keep their places for `waiter_timeout`.
async fn fair_clients<const N: usize>(
    server: &RedisServer,
    waiter_timeout: Duration,
) -> [Client; N] {
    let mut clients = Vec::with_capacity(N);
    for _ in 0..N {
        clients.push(fair_client(server, waiter_timeout).await);
    }
    clients.try_into().expect("N clients")
}

/// Waiters with a client of their own on a runtime of its own: shutting that runtime down
/// is a crash of their process (its connections close and nothing is cleaned up).
struct Doomed {
    runtime: tokio::runtime::Runtime,
    owners: Vec<String>,
}

async fn doomed_waiter(server: &RedisServer, name: &str, waiter_timeout: Duration) -> Doomed {
    doomed_waiters(server, name, waiter_timeout, 1).await
}

/// `count` waiters of one doomed process, queued one after another.
async fn doomed_waiters(
    server: &RedisServer,
    name: &str,
    waiter_timeout: Duration,
    count: usize,
) -> Doomed {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (url, name) = (server.url(), name.to_string());
    let (owner_tx, mut owner_rx) = tokio::sync::mpsc::unbounded_channel();
    runtime.spawn(async move {
        let client = Client::builder(url.clone())
            .fair_waiter_timeout(waiter_timeout)
            .build()
            .await
            .unwrap();
        let mut raw = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let mut waiters = Vec::new();
        for _ in 0..count {
            let lock = client.fair_lock(&name);
            let waiter = tokio::spawn(async move { lock.lock().await });
            let owner = format!("{}:{}", client.id(), waiter.id());
            while !fair_queue(&mut raw, &name).await.contains(&owner) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = owner_tx.send(owner);
            waiters.push(waiter);
        }
        for waiter in waiters {
            let _ = waiter.await;
        }
    });
    let mut owners = Vec::new();
    for _ in 0..count {
        owners.push(owner_rx.recv().await.unwrap());
    }
    Doomed { runtime, owners }
}

impl Doomed {
    /// Crashes the process, and returns once Redis has seen its connections close (as it
    /// does the moment a real process dies): no subscriber is left on its channels.
    async fn crash(self, raw: &MultiplexedConnection, name: &str) -> Vec<String> {
        self.runtime.shutdown_background();
        let channels: Vec<String> = self
            .owners
            .iter()
            .map(|owner| format!("redisson_lock__channel:{{{name}}}:{owner}"))
            .collect();
        let unheard = settles_to(true, GENEROUS, || {
            let (mut raw, channels) = (raw.clone(), channels.clone());
            async move {
                let counts: Vec<(String, i64)> = redis::cmd("PUBSUB")
                    .arg("NUMSUB")
                    .arg(&channels)
                    .query_async(&mut raw)
                    .await
                    .unwrap();
                counts.iter().all(|(_, n)| *n == 0)
            }
        })
        .await;
        assert!(unheard, "the crashed process's connections closed");
        self.owners
    }
}

async fn queue_len(raw: &MultiplexedConnection, name: &str) -> (usize, usize) {
    let mut raw = raw.clone();
    let list = fair_queue(&mut raw, name).await.len();
    let deadlines: usize = redis::cmd("ZCARD")
        .arg(format!("redisson_lock_timeout:{{{name}}}"))
        .query_async(&mut raw)
        .await
        .unwrap();
    (list, deadlines)
}

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
        waiters_client.subscribed_channel_count(),
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
async fn a_cancelled_waiter_leaves_at_once_and_the_next_gets_the_lock() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let [holder_client, a, b] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("cancel").lock().await.unwrap();
    let first = queue_holder(&a, &raw, "cancel").await;
    let second = queue_holder(&b, &raw, "cancel").await;

    let cancelled = Instant::now();
    first.task.abort();
    queue_becomes(
        &raw,
        "cancel",
        &[second.owner.as_str()],
        Duration::from_secs(1),
    )
    .await;
    assert!(cancelled.elapsed() < Duration::from_secs(1));
    assert_eq!(queue_len(&raw, "cancel").await, (1, 1));
    assert_eq!(a.queued_waiter_count(), 0);
    assert_eq!(a.subscribed_channel_count(), 0);

    let released = Instant::now();
    holder.unlock().await.unwrap();
    let (acquired, guard) = tokio::time::timeout(Duration::from_secs(1), second.task)
        .await
        .expect("the next waiter got the lock within a second of the release")
        .unwrap();
    assert!(acquired - released < Duration::from_secs(1));
    assert!(guard.owner().starts_with(&b.id().to_string()));
    guard.unlock().await.unwrap();
    assert_eq!(queue_len(&raw, "cancel").await, (0, 0));
}

#[tokio::test]
async fn a_head_that_leaves_as_the_lock_frees_passes_it_on() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [holder_client, a, b] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("pass-on").lock().await.unwrap();
    let head = queue_holder(&a, &raw, "pass-on").await;
    let next = queue_holder(&b, &raw, "pass-on").await;

    // The lock frees without a word to the head (deleted behind the library's back); the
    // head gives up before it looks again: its leaving must tell the next waiter.
    let _: i64 = redis::cmd("DEL")
        .arg("pass-on")
        .query_async(&mut raw)
        .await
        .unwrap();
    head.task.abort();
    let (_, guard) = tokio::time::timeout(Duration::from_secs(1), next.task)
        .await
        .expect("the waiter behind a leaving head got the free lock")
        .unwrap();
    assert!(guard.owner().starts_with(&b.id().to_string()));
    guard.unlock().await.unwrap();
    assert!(holder.unlock().await.unwrap_err().is_lock_lost());
}

#[tokio::test]
async fn try_lock_variants_leave_the_queue_and_never_jump_it() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [holder_client, other, queued] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("try").lock().await.unwrap();
    let lock = other.fair_lock("try");

    let started = Instant::now();
    assert!(lock
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(290),
        "gave up early: {waited:?}"
    );
    assert!(
        waited < Duration::from_millis(1_500),
        "gave up late: {waited:?}"
    );
    // Already out of the queue when the call returns.
    assert_eq!(queue_len(&raw, "try").await, (0, 0));
    assert_eq!(other.queued_waiter_count(), 0);

    assert!(lock.try_lock().await.unwrap().is_none());
    assert_eq!(
        queue_len(&raw, "try").await,
        (0, 0),
        "try_lock never queues"
    );

    // A free lock with a waiter at the head of the queue belongs to that waiter: try_lock
    // does not take it, and its look tells the head, which takes it at once.
    let head = queue_holder(&queued, &raw, "try").await;
    let _: i64 = redis::cmd("DEL")
        .arg("try")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(lock.try_lock().await.unwrap().is_none());
    let (_, guard) = tokio::time::timeout(Duration::from_secs(1), head.task)
        .await
        .expect("the head was told the lock is free")
        .unwrap();
    guard.unlock().await.unwrap();

    // Nobody queued: try_lock takes the lock with one script call.
    let got = lock.try_lock().await.unwrap().expect("free, nobody queued");
    got.unlock().await.unwrap();
    drop(holder);
}

#[tokio::test]
async fn a_crashed_waiter_is_passed_over_at_once_and_dropped_within_the_timeout() {
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

#[tokio::test]
async fn a_crashed_process_with_many_waiters_is_passed_over_at_once() {
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
async fn two_waits_of_one_task_share_one_place() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let [holder_client, client, other] = fair_clients(&server, NO_HEARTBEAT).await;
    let holder = holder_client.fair_lock("two-waits").lock().await.unwrap();
    let (gave_up_tx, gave_up_rx) = tokio::sync::oneshot::channel();
    let both = queue_up(&client, &raw, "two-waits", |lock| async move {
        let (got, ()) = tokio::join!(lock.lock(), async {
            let gave_up = lock.try_lock_for(Duration::from_millis(300)).await;
            let _ = gave_up_tx.send(gave_up.unwrap().is_none());
        });
        got.unwrap()
    })
    .await;
    let behind = queue_holder(&other, &raw, "two-waits").await;

    assert!(gave_up_rx.await.unwrap(), "the short wait gave up");
    // The task's other wait still wants its place: it is still at the head.
    assert_eq!(
        fair_queue(&mut raw, "two-waits").await,
        [both.owner.as_str(), behind.owner.as_str()]
    );
    holder.unlock().await.unwrap();
    let guard = both.finish_within(GENEROUS).await;
    assert!(!behind.task.is_finished());
    guard.unlock().await.unwrap();
    let (_, guard) = behind.finish_within(GENEROUS).await;
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn fair_calls_on_a_frozen_server_end_in_bounded_time() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let holder_client = fair_client(&server, Duration::from_secs(5)).await;
    // Each try on a frozen server costs at most a reconnect and a reply: 0.8 s.
    let client = Client::builder(server.url())
        .connect_timeout(Duration::from_millis(500))
        .response_timeout(Duration::from_millis(300))
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    let holder = holder_client.fair_lock("ice").lock().await.unwrap();
    let waiter = queue_up(&client, &raw, "ice", |lock| async move {
        lock.try_lock_for(Duration::from_secs(2)).await
    })
    .await;

    // Frozen while a waiter is queued: its wait still ends, by its own bound.
    server.freeze();
    let frozen = Instant::now();
    let outcome = waiter.finish_within(Duration::from_secs(10)).await;
    assert!(
        matches!(&outcome, Ok(None)) || outcome.as_ref().is_err_and(|e| e.is_connection_error()),
        "{outcome:?}"
    );
    assert!(
        frozen.elapsed() < Duration::from_secs(5),
        "{:?}",
        frozen.elapsed()
    );

    // A new waiting call on the frozen server fails within its retries.
    let started = Instant::now();
    let err = tokio::time::timeout(Duration::from_secs(10), client.fair_lock("ice").lock())
        .await
        .expect("bounded")
        .unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
    server.thaw();
    drop(holder);
}
