//! FairLock shared with Redisson's `RFairLock`, both ways (a Rust holder and a Java
//! holder): a mixed queue of Java and Rust waiters served in arrival order, a Java waiter
//! whose JVM died passed over, and a Java waiter keeping its turn while it subscribes.
//!
//! Each waiter joins only once the one before it is in the queue and subscribed to its own
//! channel (`redisson_lock__channel:{name}:<owner>`), so arrival order is known; each takes
//! the lock, reports, and releases at once.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis_rlock::protocol::layout;
use redis_rlock::Client;
use redis_rlock_interop::view::subscribers_become;
use redis_rlock_interop::{figure, now_us, Kind, Redisson, RedissonOptions};
use testkit::fair::queue_up;
use testkit::{fair_queue, settles_to, RedisServer};
use tokio::sync::mpsc;

const GENEROUS: Duration = Duration::from_secs(10);
/// How long a hand-over may take before the order read so far is reported.
const NEXT_LIMIT: Duration = Duration::from_secs(15);
/// The wake-up contract, for a hand-over announced by message.
const WAKE_BOUND: Duration = Duration::from_millis(500);

/// One turn at the lock: who, when it got the lock, when it began to release it.
#[derive(Debug)]
struct Turn {
    who: String,
    acquired_us: i64,
    release_us: i64,
}

/// Who holds the lock first: a Rust task or a Java thread.
enum Holder {
    Rust(redis_rlock::LockGuard),
    Java(Arc<Redisson>, &'static str),
}

impl Holder {
    async fn rust(client: &Client, name: &str) -> Holder {
        let lock = client.fair_lock(name);
        let guard = tokio::spawn(async move { lock.lock().await.unwrap() })
            .await
            .unwrap();
        Holder::Rust(guard)
    }

    async fn java(java: &Arc<Redisson>, thread: &'static str, name: &str) -> Holder {
        java.thread(thread).lock(Kind::Fair, name).await;
        Holder::Java(java.clone(), thread)
    }

    /// Releases the lock; returns when the release began (wall clock).
    async fn release(self, name: &str) -> i64 {
        let start = now_us();
        match self {
            Holder::Rust(guard) => guard.unlock().await.unwrap(),
            Holder::Java(java, thread) => {
                java.thread(thread).unlock(Kind::Fair, name).await.ok();
            }
        }
        start
    }
}

/// Waits until `owner` is in the queue of `name` and subscribed to its own channel: from
/// then on, an unlock message for it is heard.
async fn confirm_waiting(raw: &MultiplexedConnection, name: &str, owner: &str) {
    let queued = settles_to(true, GENEROUS, || {
        let mut raw = raw.clone();
        async move { fair_queue(&mut raw, name).await.iter().any(|o| o == owner) }
    })
    .await;
    assert!(queued, "{owner} never joined the queue of `{name}`");
    subscribers_become(raw, &layout::fair_waiter_channel(name, owner), 1, GENEROUS).await;
}

/// A Java thread waiting for fair lock `name`, in the queue when this returns; it reports
/// its turn on `turns` and releases at once.
async fn java_waiter(
    java: &Arc<Redisson>,
    thread: &'static str,
    raw: &MultiplexedConnection,
    name: &'static str,
    turns: &mpsc::UnboundedSender<Turn>,
) -> String {
    let owner = java.thread(thread).owner().await;
    let waiting = java.thread(thread).start_lock(Kind::Fair, name).await;
    confirm_waiting(raw, name, &owner).await;
    let (java, turns, who) = (java.clone(), turns.clone(), format!("java {thread}"));
    tokio::spawn(async move {
        let acquired = waiting.wait_for(Duration::from_secs(60)).await.ok();
        let release_us = now_us();
        java.thread(thread).unlock(Kind::Fair, name).await.ok();
        let _ = turns.send(Turn {
            who,
            acquired_us: acquired.end_us,
            release_us,
        });
    });
    owner
}

/// A Rust task waiting for fair lock `name`, in the queue when this returns; it reports its
/// turn on `turns` and releases at once.
async fn rust_waiter(
    client: &Client,
    raw: &MultiplexedConnection,
    name: &'static str,
    who: &'static str,
    turns: &mpsc::UnboundedSender<Turn>,
) -> String {
    let turns = turns.clone();
    let waiter = queue_up(client, raw, name, move |lock| async move {
        let guard = lock.lock().await.unwrap();
        let acquired_us = now_us();
        let release_us = now_us();
        guard.unlock().await.unwrap();
        let _ = turns.send(Turn {
            who: format!("rust {who}"),
            acquired_us,
            release_us,
        });
    })
    .await;
    confirm_waiting(raw, name, &waiter.owner).await;
    waiter.owner
}

/// Collects `n` turns, or as many as come with at most [`NEXT_LIMIT`] between two, in the
/// order they took the lock (reports arrive after each release, and a Java one takes a
/// detour through the driver, so the next holder's may come first).
async fn turns_taken(turns: &mut mpsc::UnboundedReceiver<Turn>, n: usize) -> Vec<Turn> {
    let mut taken = Vec::new();
    while taken.len() < n {
        match tokio::time::timeout(NEXT_LIMIT, turns.recv()).await {
            Ok(Some(turn)) => taken.push(turn),
            _ => break,
        }
    }
    taken.sort_by_key(|turn| turn.acquired_us);
    taken
}

/// Reports the hand-over times (from one release's start to the next holder's acquire).
fn report_hand_overs(series: &str, released_us: i64, turns: &[Turn]) -> Vec<f64> {
    let mut previous = released_us;
    let mut hand_overs = Vec::new();
    for turn in turns {
        let ms = (turn.acquired_us - previous) as f64 / 1000.0;
        figure(series, ms);
        hand_overs.push(ms);
        previous = turn.release_us;
    }
    hand_overs
}

/// A waiter joining the queue: a Java thread of the driver, or a Rust task.
#[derive(Clone, Copy)]
enum Arrival {
    Java(&'static str),
    Rust(&'static str),
}

use Arrival::{Java, Rust};

/// The waiters of the mixed queue, in their order of arrival.
const MIXED: [Arrival; 4] = [Java("t1"), Rust("r1"), Java("t2"), Rust("r2")];

/// `arrivals` join the queue in that order behind a holder (Java or Rust); its release must
/// serve them in that order, each hand-over within the wake-up bound.
/// `java_fair_wait`: the Java side's `fairLockWaitTimeout` (`None`: Redisson's default,
/// 5 min); `told`: whether the Rust client is given it
/// ([`redisson_fair_lock_wait`](redis_rlock::ClientBuilder::redisson_fair_lock_wait)).
async fn served_in_arrival_order(
    holder_is_java: bool,
    java_fair_wait: Option<Duration>,
    told: bool,
    arrivals: &[Arrival],
) {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let mut options = RedissonOptions::new(server.url());
    if let Some(wait) = java_fair_wait {
        options = options.fair_wait(wait);
    }
    let java = Arc::new(options.start().await);
    let mut rust = redis_rlock::Client::builder(server.url());
    if told {
        rust = rust.redisson_fair_lock_wait(java_fair_wait.unwrap_or(REDISSON_FAIR_WAIT));
    }
    let rust = rust.build().await.unwrap();
    let name = "fair:queue";
    let holder = if holder_is_java {
        Holder::java(&java, "t0", name).await
    } else {
        Holder::rust(&rust, name).await
    };

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut owners = Vec::new();
    let mut expected = Vec::new();
    for arrival in arrivals {
        let owner = match *arrival {
            Java(thread) => {
                expected.push(format!("java {thread}"));
                java_waiter(&java, thread, &raw, name, &tx).await
            }
            Rust(task) => {
                expected.push(format!("rust {task}"));
                rust_waiter(&rust, &raw, name, task, &tx).await
            }
        };
        owners.push(owner);
    }
    assert_eq!(
        fair_queue(&mut raw.clone(), name).await,
        owners,
        "the queue in arrival order"
    );

    let released = holder.release(name).await;
    let turns = turns_taken(&mut rx, arrivals.len()).await;
    let order: Vec<&str> = turns.iter().map(|t| t.who.as_str()).collect();
    assert_eq!(order, expected, "served in arrival order ({turns:?})");
    let series = match (holder_is_java, arrivals.len() == MIXED.len()) {
        (true, true) => "fair.hand_over.java_holder_mixed_queue_ms",
        (false, true) => "fair.hand_over.rust_holder_mixed_queue_ms",
        (true, false) => "fair.hand_over.java_holder_rust_queue_ms",
        (false, false) => "fair.hand_over.rust_holder_java_queue_ms",
    };
    let hand_overs = report_hand_overs(series, released, &turns);
    let worst = hand_overs.iter().copied().fold(0.0, f64::max);
    assert!(
        worst < WAKE_BOUND.as_secs_f64() * 1000.0,
        "a hand-over took {worst:.1} ms: {hand_overs:?}"
    );
}

/// Redisson's default `fairLockWaitTimeout`.
const REDISSON_FAIR_WAIT: Duration = Duration::from_secs(5 * 60);

/// A mixed queue with Redisson's defaults, the Rust client told the Java side's
/// `fairLockWaitTimeout` (5 min): a Java waiter that takes the lock subtracts 5 min from
/// every deadline behind it, and the Rust waiters' deadlines, 5 min further ahead per
/// waiter ahead of them, stay in the future.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_behind_a_rust_holder_is_served_in_arrival_order() {
    served_in_arrival_order(false, None, true, &MIXED).await;
}

/// The same, with a Java holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_behind_a_java_holder_is_served_in_arrival_order() {
    served_in_arrival_order(true, None, true, &MIXED).await;
}

/// Difference D1 (see interop/README.md), when the Rust client is not told the Java side's wait:
/// the first Java waiter to take the lock puts the Rust waiters' deadlines (server time +
/// `fair_waiter_timeout`, 5 s) 5 min in the past; they are dropped from the queue and
/// rejoin at its tail, and the order seen is J1, J2, R1, R2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "difference D1: Rust fair waiters not told Redisson's fairLockWaitTimeout are dropped when a Redisson waiter takes the lock"]
async fn a_mixed_queue_is_served_in_arrival_order_without_the_redisson_wait_set() {
    served_in_arrival_order(true, None, false, &MIXED).await;
}

/// A Redisson `fairLockWaitTimeout` well under this crate's `fair_waiter_timeout` needs
/// no setting (here 1 s against 5 s: the subtraction never reaches a Rust waiter's
/// deadline, which its heartbeat keeps 3.75 to 5 s ahead).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_behind_a_rust_holder_is_served_in_arrival_order_with_a_short_java_wait() {
    served_in_arrival_order(false, Some(Duration::from_secs(1)), false, &MIXED).await;
}

/// The same, with a Java holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_queue_behind_a_java_holder_is_served_in_arrival_order_with_a_short_java_wait() {
    served_in_arrival_order(true, Some(Duration::from_secs(1)), false, &MIXED).await;
}

/// Redisson's defaults, one kind of waiter behind a holder of the other kind: a Rust
/// release serves Redisson's waiters in their order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_waiters_behind_a_rust_holder_are_served_in_arrival_order() {
    served_in_arrival_order(false, None, false, &[Java("t1"), Java("t2"), Java("t3")]).await;
}

/// Redisson's defaults: a Redisson release hands the lock to the first Rust waiter, and
/// the Rust waiters go on in their order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_waiters_behind_a_java_holder_are_served_in_arrival_order() {
    served_in_arrival_order(true, None, false, &[Rust("r1"), Rust("r2"), Rust("r3")]).await;
}

/// A Java waiter whose JVM died (SIGKILL: its connections close) stands first in the queue,
/// a live Java waiter and a Rust waiter behind it.
async fn dead_java_waiter_passed_over(holder_is_java: bool) {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = Arc::new(Redisson::start_default(server.url()).await);
    let mut doomed = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let name = if holder_is_java {
        "fair:dead:java-holds"
    } else {
        "fair:dead:rust-holds"
    };
    let holder = if holder_is_java {
        Holder::java(&java, "t0", name).await
    } else {
        Holder::rust(&rust, name).await
    };

    let dead = doomed.thread("t1").owner().await;
    let _never = doomed.thread("t1").start_lock(Kind::Fair, name).await;
    confirm_waiting(&raw, name, &dead).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let live = if holder_is_java {
        // A Java holder's unlock tells the dead head alone (Redisson's script): the Rust
        // waiter's heartbeat finds the lock free under a head nobody hears.
        rust_waiter(&rust, &raw, name, "r1", &tx).await
    } else {
        java_waiter(&java, "t1", &raw, name, &tx).await
    };
    doomed.kill().await;
    subscribers_become(&raw, &layout::fair_waiter_channel(name, &dead), 0, GENEROUS).await;
    assert_eq!(
        fair_queue(&mut raw.clone(), name).await,
        vec![dead.clone(), live]
    );

    let released = holder.release(name).await;
    let turns = turns_taken(&mut rx, 1).await;
    assert_eq!(turns.len(), 1, "the live waiter never got the lock");
    let series = if holder_is_java {
        "fair.dead_java_waiter.java_unlock_to_rust_ms"
    } else {
        "fair.dead_java_waiter.rust_unlock_to_java_ms"
    };
    let hand_over = report_hand_overs(series, released, &turns)[0];
    // A Rust unlock passes the dead head over once its 100 ms grace has passed (the
    // releasing client looks again); after a Java unlock the Rust waiter's heartbeat (every
    // quarter of the 5 s waiter timeout) finds it.
    let bound = if holder_is_java {
        Duration::from_secs(3)
    } else {
        WAKE_BOUND
    };
    assert!(
        hand_over < bound.as_secs_f64() * 1000.0,
        "the live waiter got the lock {hand_over:.1} ms after the release"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_java_waiter_is_passed_over_when_rust_unlocks() {
    dead_java_waiter_passed_over(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_java_waiter_is_passed_over_when_java_unlocks() {
    dead_java_waiter_passed_over(true).await;
}

/// Difference D2 (see interop/README.md), fixed: Redisson's `lock()` joins the queue with its
/// first script call and subscribes to its own channel after that reply. A Rust release in
/// between finds nobody listening for that head; it tells the head all the same, as
/// Redisson does, and the head keeps its turn for 100 ms, enough to subscribe and take it.
/// The driver holds the Java waiter in that window (`firstattempt`: `lock()`'s first script
/// call alone), which otherwise lasts one round trip.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_waiter_subscribing_keeps_its_turn_through_a_rust_release() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = Arc::new(Redisson::start_default(server.url()).await);
    let rust = testkit::client(&server).await;
    let name = "fair:subscribing";
    let holder = Holder::rust(&rust, name).await;

    let t1 = java.thread("t1");
    let owner = t1.owner().await;
    let ttl = t1
        .call(&[Kind::Fair.word(), "firstattempt", name])
        .await
        .opt_int();
    assert!(ttl.is_some(), "queued behind the Rust holder");
    let (tx, mut rx) = mpsc::unbounded_channel();
    rust_waiter(&rust, &raw, name, "r1", &tx).await;
    assert_eq!(fair_queue(&mut raw.clone(), name).await[0], owner);

    holder.release(name).await;
    // lock() goes on: it subscribes, and tries again.
    let waiting = t1.start_lock(Kind::Fair, name).await;
    let turns_tx = tx.clone();
    let java_side = java.clone();
    tokio::spawn(async move {
        let acquired = waiting.wait_for(Duration::from_secs(60)).await.ok();
        let release_us = now_us();
        java_side.thread("t1").unlock(Kind::Fair, name).await.ok();
        let _ = turns_tx.send(Turn {
            who: "java t1".to_owned(),
            acquired_us: acquired.end_us,
            release_us,
        });
    });
    let turns = turns_taken(&mut rx, 2).await;
    let order: Vec<&str> = turns.iter().map(|t| t.who.as_str()).collect();
    assert_eq!(
        order,
        ["java t1", "rust r1"],
        "the head kept its turn ({turns:?})"
    );
}

/// The reference for D2, Redisson alone: the same window, a Java holder and a Java waiter
/// behind; the head keeps its turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_waiter_subscribing_keeps_its_turn_through_a_java_release() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let java = Arc::new(Redisson::start_default(server.url()).await);
    let name = "fair:subscribing";
    let holder = Holder::java(&java, "t0", name).await;

    let t1 = java.thread("t1");
    let owner = t1.owner().await;
    let ttl = t1
        .call(&[Kind::Fair.word(), "firstattempt", name])
        .await
        .opt_int();
    assert!(ttl.is_some(), "queued behind the Java holder");
    let (tx, mut rx) = mpsc::unbounded_channel();
    java_waiter(&java, "t2", &raw, name, &tx).await;
    assert_eq!(fair_queue(&mut raw.clone(), name).await[0], owner);

    holder.release(name).await;
    let waiting = t1.start_lock(Kind::Fair, name).await;
    let acquired = waiting.wait().await.ok();
    let release_us = now_us();
    t1.unlock(Kind::Fair, name).await.ok();
    tx.send(Turn {
        who: "java t1".to_owned(),
        acquired_us: acquired.end_us,
        release_us,
    })
    .unwrap();
    let turns = turns_taken(&mut rx, 2).await;
    let order: Vec<&str> = turns.iter().map(|t| t.who.as_str()).collect();
    assert_eq!(
        order,
        ["java t1", "java t2"],
        "the head kept its turn ({turns:?})"
    );
}
