//! FairLock waits that end leave no key behind: a queued waiter that nobody could tell its
//! turn (its pub/sub connection gone, so the release recorded it as an unheard head) and
//! that then gives up leaves neither the queue nor the deadlines set, and a churn of
//! waiters over 300 names, many of them cancelled at random points while a pub/sub
//! connection is killed now and then, ends with an empty database once every guard is
//! released. A fair lock's queue and deadlines have no TTL (Redisson's layout), so a key
//! left there stays forever.

use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;
use redis_rlock::Client;
use testkit::acl;
use testkit::fair::{queue_len, queue_up};
use testkit::{fair_client, keys_but_latches, settles_to, RedisServer};

const GENEROUS: Duration = Duration::from_secs(5);
/// Long enough that no heartbeat runs during a test: what happens is the scripts' doing.
const NO_HEARTBEAT: Duration = Duration::from_secs(120);

/// Subscribers of `owner`'s own channel of fair lock `name`.
async fn hearers(raw: &MultiplexedConnection, name: &str, owner: &str) -> i64 {
    let mut raw = raw.clone();
    let (_, count): (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(format!("redisson_lock__channel:{{{name}}}:{owner}"))
        .query_async(&mut raw)
        .await
        .expect("PUBSUB NUMSUB");
    count
}

#[tokio::test]
async fn an_unheard_head_that_gives_up_leaves_nothing() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    acl::set_user(&server, &acl::readme_rules("unheard*"));
    let holder_client = fair_client(&server, NO_HEARTBEAT).await;
    let waiter_client = Client::builder(acl::user_url(&server))
        .fair_waiter_timeout(NO_HEARTBEAT)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    // Every connection of the waiter's pool open now: once its user is switched off below,
    // its calls must not need a new one.
    let lock = waiter_client.fair_lock("unheard");
    let warm = futures_util::future::join_all((0..8).map(|_| lock.is_locked())).await;
    assert!(warm.into_iter().all(|locked| !locked.unwrap()));

    let holder = holder_client.fair_lock("unheard").lock().await.unwrap();
    let waiter = queue_up(&waiter_client, &raw, "unheard", |lock| async move {
        lock.lock().await
    })
    .await;
    let subscribed = settles_to(1, GENEROUS, || hearers(&raw, "unheard", &waiter.owner)).await;
    assert_eq!(subscribed, 1, "the waiter subscribed to its channel");

    // The waiter's pub/sub connection goes, and cannot come back (its user may no longer
    // log in); its command connections, logged in already, stay.
    assert_eq!(server.cli(&["ACL", "SETUSER", acl::USER, "off"]), "OK");
    assert_eq!(
        server.cli(&["CLIENT", "KILL", "USER", acl::USER, "TYPE", "pubsub"]),
        "1"
    );
    let deaf = settles_to(0, GENEROUS, || hearers(&raw, "unheard", &waiter.owner)).await;
    assert_eq!(deaf, 0);

    // The release finds the head unheard: it is told all the same, and the deadlines set
    // records since when it has not heard.
    holder.unlock().await.unwrap();
    let record = testkit::fair_deadline(
        &mut raw.clone(),
        "unheard",
        &format!("unheard:{}", waiter.owner),
    )
    .await;
    assert!(record.is_some(), "the release recorded the unheard head");

    // Its wait is cancelled: it leaves the queue, and the record goes with it.
    waiter.task.abort();
    let left = settles_to(Vec::new(), GENEROUS, || keys_but_latches(&raw)).await;
    assert_eq!(left, Vec::<String>::new(), "keys left behind");
    assert_eq!(queue_len(&raw, "unheard").await, (0, 0));
}

/// What one contender of the churn does.
#[derive(Clone, Copy, Debug)]
enum Move {
    /// Waits (2 s at most), holds for a few ms and unlocks.
    LockAndUnlock { hold_ms: u64 },
    /// Waits and is cancelled after a few ms; unlocks if it got the lock by then.
    CancelAfter { ms: u64 },
    /// `try_lock_for` a few ms.
    TryFor { ms: u64 },
    /// Waits (2 s at most), and drops the guard (released in the background).
    LockAndDrop,
}

fn draw(rng: &mut StdRng) -> Move {
    match rng.random_range(0..4) {
        0 => Move::LockAndUnlock {
            hold_ms: rng.random_range(0..5),
        },
        1 => Move::CancelAfter {
            ms: rng.random_range(0..15),
        },
        2 => Move::TryFor {
            ms: rng.random_range(0..20),
        },
        _ => Move::LockAndDrop,
    }
}

async fn play(lock: redis_rlock::FairLock, step: Move) {
    let patience = Duration::from_secs(2);
    match step {
        Move::LockAndUnlock { hold_ms } => {
            if let Some(guard) = lock.try_lock_for(patience).await.unwrap() {
                tokio::time::sleep(Duration::from_millis(hold_ms)).await;
                guard.unlock().await.unwrap();
            }
        }
        Move::CancelAfter { ms } => {
            if let Ok(got) = tokio::time::timeout(Duration::from_millis(ms), lock.lock()).await {
                got.unwrap().unlock().await.unwrap();
            }
        }
        Move::TryFor { ms } => {
            if let Some(guard) = lock.try_lock_for(Duration::from_millis(ms)).await.unwrap() {
                guard.unlock().await.unwrap();
            }
        }
        Move::LockAndDrop => {
            if let Some(guard) = lock.try_lock_for(patience).await.unwrap() {
                drop(guard);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_churn_of_cancelled_waits_leaves_an_empty_database() {
    const NAMES: usize = 300;
    const CONTENDERS: usize = 4;
    const AT_ONCE: usize = 8;
    // FAIR_CHURN_SEED=<seed> replays a run.
    let seed: u64 = std::env::var("FAIR_CHURN_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(rand::random);
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);

    let server = RedisServer::start();
    let raw = server.raw().await;
    let mut clients = Vec::new();
    for _ in 0..CONTENDERS {
        clients.push(fair_client(&server, GENEROUS).await);
    }

    let started = Instant::now();
    let mut kills = 0;
    for batch in 0..NAMES / AT_ONCE {
        let mut tasks = Vec::new();
        for n in 0..AT_ONCE {
            let name = format!("churn:{}", batch * AT_ONCE + n);
            for client in &clients {
                let (lock, step) = (client.fair_lock(&name), draw(&mut rng));
                tasks.push(tokio::spawn(play(lock, step)));
            }
        }
        // Now and then a pub/sub connection goes while waiters are queued: heads that
        // nobody hears for a while, as a waiter that queued before it subscribed is.
        if rng.random_range(0..6) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..10))).await;
            server.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
            kills += 1;
        }
        for task in tasks {
            tokio::time::timeout(Duration::from_secs(10), task)
                .await
                .expect("a contender finished")
                .unwrap();
        }
    }
    let churn = started.elapsed();
    println!("churn of {NAMES} names took {churn:?}, {kills} pub/sub kills");
    assert!(churn < Duration::from_secs(20), "the churn took {churn:?}");

    // Every guard is released (those dropped, in the background) and every cancelled wait
    // has left: nothing is left, whatever the waits went through.
    let left = settles_to(Vec::new(), GENEROUS, || keys_but_latches(&raw)).await;
    assert!(
        left.is_empty(),
        "{} keys left behind (seed {seed}), such as {:?}",
        left.len(),
        &left[..left.len().min(5)]
    );
    for client in &clients {
        assert_eq!(client.status().queued_waiters, 0);
    }
}
