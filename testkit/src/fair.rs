//! Fair-lock waiters for tests: a task whose place in the queue is confirmed before the
//! test goes on, clients with a chosen waiter timeout, and waiters of a process that
//! crashes (a runtime of their own, shut down).

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, LockGuard};
use tokio::task::JoinHandle;

use crate::clients::fair_client;
use crate::inspect::fair_queue;
use crate::servers::RedisServer;
use crate::wait::settles_to;

/// How long a waiter may take to show up in the queue, or a crashed process's connections
/// to close.
const GENEROUS: Duration = Duration::from_secs(5);

/// A task waiting for a fair lock, once its place in the queue is confirmed.
pub struct Waiter<T> {
    /// Its field in the queue: `client id:task id`.
    pub owner: String,
    pub task: JoinHandle<T>,
}

/// Spawns `body` (which takes the fair lock `name` of `client` first) and waits until its
/// owner stands in the queue.
pub async fn queue_up<T, F>(
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
pub async fn queue_holder(
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
    pub async fn finish_within(self, limit: Duration) -> T {
        tokio::time::timeout(limit, self.task)
            .await
            .unwrap_or_else(|_| panic!("{} did not finish within {limit:?}", self.owner))
            .unwrap()
    }
}

/// `N` clients of `server` whose fair waiters keep their places for `waiter_timeout`.
pub async fn fair_clients<const N: usize>(
    server: &RedisServer,
    waiter_timeout: Duration,
) -> [Client; N] {
    let mut clients = Vec::with_capacity(N);
    for _ in 0..N {
        clients.push(fair_client(server, waiter_timeout).await);
    }
    clients.try_into().unwrap_or_else(|_| panic!("{N} clients"))
}

/// The lengths of fair lock `name`'s queue list and of its deadline set: `(0, 0)` once
/// nobody is queued.
pub async fn queue_len(raw: &MultiplexedConnection, name: &str) -> (usize, usize) {
    let mut raw = raw.clone();
    let list = fair_queue(&mut raw, name).await.len();
    let deadlines: usize = redis::cmd("ZCARD")
        .arg(format!("redisson_lock_timeout:{{{name}}}"))
        .query_async(&mut raw)
        .await
        .unwrap();
    (list, deadlines)
}

/// Waiters with a client of their own on a runtime of its own: shutting that runtime down
/// is a crash of their process (its connections close and nothing is cleaned up).
pub struct Doomed {
    runtime: tokio::runtime::Runtime,
    /// The waiters' fields in the queue, in the order they joined it.
    pub owners: Vec<String>,
}

/// One doomed waiter of fair lock `name`, in the queue when this returns.
pub async fn doomed_waiter(server: &RedisServer, name: &str, waiter_timeout: Duration) -> Doomed {
    doomed_waiters(server, name, waiter_timeout, 1).await
}

/// `count` waiters of one doomed process, queued one after another.
pub async fn doomed_waiters(
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
            let deadline = Instant::now() + GENEROUS;
            while !fair_queue(&mut raw, &name).await.contains(&owner) {
                // Ends this task, which drops the sender: the test is told below.
                assert!(Instant::now() < deadline, "{owner} never joined the queue");
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
        let owner = owner_rx.recv().await;
        owners.push(owner.expect("a doomed waiter never joined the queue"));
    }
    Doomed { runtime, owners }
}

impl Doomed {
    /// Crashes the process, and returns once Redis has seen its connections close (as it
    /// does the moment a real process dies): no subscriber is left on its channels.
    pub async fn crash(self, raw: &MultiplexedConnection, name: &str) -> Vec<String> {
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
