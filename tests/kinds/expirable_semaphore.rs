//! `PermitExpirableSemaphore` (Redisson's `RPermitExpirableSemaphore`, 3.52 layout): the
//! count and the permits' sorted set as raw commands see them (ids of 16 bytes whose hex is
//! `id()`, expiries on the server's clock); never more holders than permits; a waiter woken
//! by a release far sooner than the re-check bound, and by an expiry that no message
//! announces; a killed holder's permit coming back after its lease; `lost()` at the lease's
//! end once Redis agrees (or cannot answer), on a release by id and after a restarted
//! server; a lease extended by id elsewhere or by the holder kept, and released past the
//! deadline; releasing a lost permit refused
//! and harmless; cancelled waits taking nothing; bad input writing nothing; a short cluster
//! run in both pub/sub modes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, Error, LostReason, PubSubMode};
use testkit::{
    client, count_becomes, dbsize, eventually, raw_get, server_millis, RedisCluster, RedisServer,
    Waiting,
};

/// For state that settles quickly, on a loaded machine.
const GENEROUS: Duration = Duration::from_secs(10);
/// What "woken by the message" means: well under the re-check bound.
const WOKEN_WITHIN: Duration = Duration::from_millis(1_000);
const LEASE: Duration = Duration::from_secs(30);

/// The permits' sorted set: (id in hex, expiry score).
async fn permits(raw: &mut MultiplexedConnection, timeouts: &str) -> Vec<(String, i64)> {
    let members: Vec<(Vec<u8>, f64)> = redis::cmd("ZRANGE")
        .arg(timeouts)
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query_async(raw)
        .await
        .unwrap();
    members
        .into_iter()
        .map(|(id, score)| {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            (hex, score as i64)
        })
        .collect()
}

#[tokio::test]
async fn the_count_and_the_permits_in_redis() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("gpu");

    assert!(
        gpu.try_acquire(LEASE).await.unwrap().is_none(),
        "nothing set"
    );
    assert!(gpu.try_set_permits(4).await.unwrap());
    assert!(!gpu.try_set_permits(9).await.unwrap());
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));

    let before = server_millis(&mut raw).await;
    let permit = gpu.acquire(Duration::from_secs(10)).await.unwrap();
    let after = server_millis(&mut raw).await;
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("3"));
    let taken = permits(&mut raw, "{gpu}:timeout").await;
    assert_eq!(taken.len(), 1);
    // The member is 16 bytes; id() is their hex, as Redisson shows it.
    assert_eq!(taken[0].0, permit.id());
    assert_eq!(permit.id().len(), 32);
    assert!(permit
        .id()
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    // The expiry: the lease from the moment the script ran, on the server's clock.
    let expiry = taken[0].1;
    assert!(
        (before + 10_000..=after + 10_000).contains(&expiry),
        "{before} {expiry} {after}"
    );
    assert_eq!(permit.semaphore(), "gpu");
    assert!(!permit.is_lost());
    let valid = permit
        .valid_until()
        .duration_since(std::time::Instant::now());
    assert!(valid > Duration::from_secs(9) && valid <= Duration::from_secs(10));
    assert_eq!(gpu.available_permits().await.unwrap(), 3);
    assert_eq!(gpu.acquired_permits().await.unwrap(), 1);
    assert_eq!(
        client.status().held_locks,
        1,
        "the client watches its permit"
    );

    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));
    assert_eq!(dbsize(&mut raw).await, 1, "the last permit's set is gone");
    assert_eq!(client.status().held_locks, 0);

    // Drop releases in the background.
    let dropped = gpu.acquire(LEASE).await.unwrap();
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("3"));
    drop(dropped);
    count_becomes(&raw, "gpu", "4").await;

    // forget() keeps it taken; its id releases it from anywhere.
    let id = gpu.acquire(LEASE).await.unwrap().forget();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("3"));
    assert_eq!(permits(&mut raw, "{gpu}:timeout").await[0].0, id);
    let other = testkit::client(&server).await;
    let elsewhere = other.permit_expirable_semaphore("gpu");
    assert!(elsewhere.try_release(&id.to_uppercase()).await.unwrap());
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));
    assert!(!elsewhere.try_release(&id).await.unwrap(), "released once");
    let again = elsewhere.release_by_id(&id).await.unwrap_err();
    assert!(matches!(
        again,
        Error::PermitLost {
            reason: LostReason::Released,
            ..
        }
    ));
    assert!(again.is_lock_lost());
    assert!(again.to_string().contains(&id), "{again}");
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("4"));

    // Four taken: a fifth is refused until one comes back.
    let all: Vec<_> = futures_util::future::join_all((0..4).map(|_| gpu.acquire(LEASE)))
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(gpu.try_acquire(LEASE).await.unwrap().is_none());
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("0"));
    assert_eq!(permits(&mut raw, "{gpu}:timeout").await.len(), 4);
    for permit in all {
        permit.release().await.unwrap();
    }
    gpu.add_permits(2).await.unwrap();
    assert_eq!(raw_get(&mut raw, "gpu").await.as_deref(), Some("6"));
    assert!(gpu.delete().await.unwrap());
    assert_eq!(dbsize(&mut raw).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_more_holders_than_permits() {
    const PERMITS: usize = 3;
    const TASKS: usize = 10;
    const ROUNDS: usize = 6;
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let clients = [client(&server).await, client(&server).await];
    assert!(clients[0]
        .permit_expirable_semaphore("pool")
        .try_set_permits(PERMITS as u64)
        .await
        .unwrap());
    let (in_use, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let pool = clients[task % clients.len()].permit_expirable_semaphore("pool");
        let (in_use, most) = (in_use.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..ROUNDS {
                let permit = pool.acquire(LEASE).await.unwrap();
                let now = in_use.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
                in_use.fetch_sub(1, Ordering::SeqCst);
                permit.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("the tasks finish")
            .unwrap();
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most <= PERMITS, "{most} permits at once, of {PERMITS}");
    assert!(most >= 2, "{most}");
    assert_eq!(raw_get(&mut raw, "pool").await.as_deref(), Some("3"));
    assert!(permits(&mut raw, "{pool}:timeout").await.is_empty());
}

#[tokio::test]
async fn a_release_wakes_a_waiter_far_sooner_than_the_recheck() {
    let server = RedisServer::start();
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("wake");
    assert!(gpu.try_set_permits(1).await.unwrap());
    for _ in 0..3 {
        let held = gpu.acquire(LEASE).await.unwrap();
        let waiter = {
            let gpu = waiter_client.permit_expirable_semaphore("wake");
            Waiting::listening(&waiter_client, 1, async move {
                gpu.acquire(LEASE).await.unwrap()
            })
            .await
        };
        assert_eq!(
            server.cli(&["PUBSUB", "NUMSUB", "redisson_sc:{wake}"]),
            "redisson_sc:{wake}\n1"
        );
        let woken = waiter
            .woken_by(async { held.release().await.unwrap() })
            .await;
        let took = woken.after;
        assert!(took < WOKEN_WITHIN, "woken after {took:?}");
        woken.value.release().await.unwrap();
        eventually("the waiter unsubscribed", GENEROUS, || {
            waiter_client.status().subscribed_channels == 0
        })
        .await;
    }
}

#[tokio::test]
async fn a_lease_that_runs_out_frees_the_permit_for_a_waiter_without_any_message() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, waiter_client) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("lease");
    assert!(gpu.try_set_permits(1).await.unwrap());

    let stale = gpu.acquire(Duration::from_millis(600)).await.unwrap();
    let lost = stale.lost();
    let taken_at = Instant::now();
    let waiter = {
        let gpu = waiter_client.permit_expirable_semaphore("lease");
        tokio::spawn(async move {
            let permit = gpu.acquire(LEASE).await.unwrap();
            (Instant::now(), permit)
        })
    };
    // The holder is told at its deadline, once Redis agreed (a round trip): nobody else
    // extended the lease.
    let deadline = stale.valid_until();
    let reason = tokio::time::timeout(GENEROUS, lost).await.unwrap();
    assert_eq!(reason, LostReason::Expired);
    let late = std::time::Instant::now().saturating_duration_since(deadline);
    assert!(
        late < Duration::from_millis(400),
        "told {late:?} after the deadline"
    );
    let (got, permit) = tokio::time::timeout(GENEROUS, waiter)
        .await
        .unwrap()
        .unwrap();
    let waited = got - taken_at;
    // No message announces an expiry: the waiter re-checked at the nearest expiry, far
    // sooner than the 5 s re-check.
    assert!(
        waited >= Duration::from_millis(550) && waited < Duration::from_millis(1_600),
        "{waited:?}"
    );
    assert!(stale.is_lost());
    // Releasing the lost permit: refused, nothing sent, the new holder untouched.
    let err = stale.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::PermitLost {
                reason: LostReason::Expired,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(raw_get(&mut raw, "lease").await.as_deref(), Some("0"));
    assert_eq!(permits(&mut raw, "{lease}:timeout").await[0].0, permit.id());
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "lease").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn a_killed_holders_permit_comes_back_after_its_lease() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let survivor = client(&server).await;
    let gpu = survivor.permit_expirable_semaphore("crash");
    assert!(gpu.try_set_permits(1).await.unwrap());

    let doomed = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = server.url();
    let (taken_tx, taken_rx) = tokio::sync::oneshot::channel();
    doomed.spawn(async move {
        let client = Client::connect(url).await.unwrap();
        let permit = client
            .permit_expirable_semaphore("crash")
            .acquire(Duration::from_millis(800))
            .await
            .unwrap();
        let _ = taken_tx.send(Instant::now());
        std::future::pending::<()>().await;
        drop(permit);
    });
    let taken_at = taken_rx.await.unwrap();
    doomed.shutdown_background();
    assert_eq!(raw_get(&mut raw, "crash").await.as_deref(), Some("0"));
    let permit = tokio::time::timeout(GENEROUS, gpu.acquire(LEASE))
        .await
        .unwrap()
        .unwrap();
    let waited = taken_at.elapsed();
    assert!(waited >= Duration::from_millis(750), "{waited:?}");
    assert!(waited < Duration::from_millis(2_500), "{waited:?}");
    let taken = permits(&mut raw, "{crash}:timeout").await;
    assert_eq!(taken.len(), 1, "the dead holder's permit was given back");
    assert_eq!(taken[0].0, permit.id());
    permit.release().await.unwrap();
}

#[tokio::test]
async fn a_release_by_id_reaches_the_holder() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, other) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("byid");
    assert!(gpu.try_set_permits(2).await.unwrap());

    // By this client: its permit is told at once.
    let permit = gpu.acquire(LEASE).await.unwrap();
    let lost = permit.lost();
    gpu.release_by_id(permit.id()).await.unwrap();
    assert_eq!(
        tokio::time::timeout(Duration::from_millis(100), lost)
            .await
            .unwrap(),
        LostReason::Released
    );
    assert_eq!(raw_get(&mut raw, "byid").await.as_deref(), Some("2"));
    let err = permit.release().await.unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Released));
    assert_eq!(
        raw_get(&mut raw, "byid").await.as_deref(),
        Some("2"),
        "not twice"
    );

    // By another client: the holder finds out when it releases, and nothing is released
    // twice, even with the permit taken again by someone else meanwhile.
    let permit = gpu.acquire(LEASE).await.unwrap();
    let elsewhere = other.permit_expirable_semaphore("byid");
    elsewhere.release_by_id(permit.id()).await.unwrap();
    let _again = elsewhere.acquire(LEASE).await.unwrap();
    let _and_again = elsewhere.acquire(LEASE).await.unwrap();
    assert_eq!(raw_get(&mut raw, "byid").await.as_deref(), Some("0"));
    let err = permit.release().await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::PermitLost {
                reason: LostReason::Released,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(raw_get(&mut raw, "byid").await.as_deref(), Some("0"));
    assert_eq!(permits(&mut raw, "{byid}:timeout").await.len(), 2);
}

#[tokio::test]
async fn a_cancelled_wait_takes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("cancel");
    assert!(gpu.try_set_permits(0).await.unwrap());
    let waiting = {
        let gpu = gpu.clone();
        tokio::spawn(async move { gpu.acquire(LEASE).await })
    };
    eventually("the waiter subscribed", GENEROUS, || {
        client.status().subscribed_channels == 1
    })
    .await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    eventually("the subscription left", GENEROUS, || {
        client.status().subscribed_channels == 0
    })
    .await;
    gpu.add_permits(1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(raw_get(&mut raw, "cancel").await.as_deref(), Some("1"));
    assert!(permits(&mut raw, "{cancel}:timeout").await.is_empty());

    for delay_us in [0, 100, 300, 600, 1_000, 2_000] {
        let gpu = gpu.clone();
        let call = tokio::spawn(async move {
            tokio::time::timeout(Duration::from_micros(delay_us), gpu.acquire(LEASE)).await
        });
        if let Ok(Ok(permit)) = call.await.unwrap() {
            drop(permit);
        }
        count_becomes(&raw, "cancel", "1").await;
        assert!(permits(&mut raw, "{cancel}:timeout").await.is_empty());
    }
    assert_eq!(client.status().held_locks, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_is_reported_then_works() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("restart");
    assert!(gpu.try_set_permits(2).await.unwrap());
    let permit = gpu.acquire(LEASE).await.unwrap();
    let lost = permit.lost();

    server.kill();
    let started = Instant::now();
    assert!(gpu
        .available_permits()
        .await
        .unwrap_err()
        .is_connection_error());
    assert!(started.elapsed() < GENEROUS, "{:?}", started.elapsed());

    // Back without its data: the next call reconnects, and the permit Redis forgot is
    // reported lost.
    server.restart();
    let started = Instant::now();
    let _ = gpu.available_permits().await;
    let reason = tokio::time::timeout(GENEROUS, lost).await.expect("told");
    assert_eq!(reason, LostReason::Released);
    assert!(started.elapsed() < GENEROUS);
    let err = permit.release().await.unwrap_err();
    assert!(err.is_lock_lost(), "{err}");
    let mut raw = server.raw().await;
    assert_eq!(
        dbsize(&mut raw).await,
        0,
        "nothing written by the lost permit"
    );
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(LEASE).await.unwrap();
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "restart").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn bad_input_writes_nothing() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let gpu = client.permit_expirable_semaphore("bad");
    assert!(gpu.try_set_permits(1).await.unwrap());
    let invalid = |e: Error| assert!(e.is_invalid_argument(), "{e}");
    invalid(gpu.acquire(Duration::from_millis(9)).await.unwrap_err());
    invalid(gpu.acquire(Duration::MAX).await.unwrap_err());
    invalid(gpu.try_acquire(Duration::ZERO).await.unwrap_err());
    invalid(gpu.try_release("").await.unwrap_err());
    invalid(gpu.try_release("xyz").await.unwrap_err());
    invalid(gpu.release_by_id(&"g".repeat(32)).await.unwrap_err());
    invalid(gpu.try_set_permits(u64::MAX).await.unwrap_err());
    invalid(gpu.add_permits(0).await.unwrap_err());
    invalid(
        client
            .permit_expirable_semaphore("")
            .acquire(LEASE)
            .await
            .unwrap_err(),
    );
    assert_eq!(dbsize(&mut raw).await, 1);

    // The count a lock hash or another string; the permits' key not a sorted set.
    let lock = client.lock("taken").lock().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg("{plain}:timeout")
        .arg("x")
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("plain")
        .arg("1")
        .query_async(&mut raw)
        .await
        .unwrap();
    let before = dbsize(&mut raw).await;
    for name in ["taken", "plain"] {
        let sem = client.permit_expirable_semaphore(name);
        let not = |e: Error| assert!(e.is_not_a_lock(), "{name}: {e}");
        not(sem.acquire(LEASE).await.unwrap_err());
        not(sem.try_acquire(LEASE).await.unwrap_err());
        not(sem.try_release(&"00".repeat(16)).await.unwrap_err());
        not(sem.available_permits().await.unwrap_err());
        not(sem.acquired_permits().await.unwrap_err());
        not(sem.delete().await.unwrap_err());
    }
    let err = client
        .permit_expirable_semaphore("plain")
        .acquire(LEASE)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("{plain}:timeout"), "{err}");
    assert_eq!(dbsize(&mut raw).await, before);
    assert_eq!(raw_get(&mut raw, "plain").await.as_deref(), Some("1"));
    lock.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_in_both_pubsub_modes() {
    let cluster = RedisCluster::start_async().await;
    for (mode, name) in [
        (PubSubMode::Classic, "gpu:classic"),
        (PubSubMode::Sharded, "gpu:sharded"),
    ] {
        let connect = || {
            Client::cluster_builder(cluster.seeds())
                .pubsub_mode(mode)
                .build()
        };
        let (a, b) = (connect().await.unwrap(), connect().await.unwrap());
        let gpu = a.permit_expirable_semaphore(name);
        assert!(gpu.try_set_permits(1).await.unwrap());
        let held = gpu.acquire(LEASE).await.unwrap();
        let waiter = {
            let gpu = b.permit_expirable_semaphore(name);
            Waiting::listening(&b, 1, async move { gpu.acquire(LEASE).await.unwrap() }).await
        };
        let woken = waiter
            .woken_by(async { held.release().await.unwrap() })
            .await;
        assert!(woken.after < WOKEN_WITHIN, "{mode:?}: {:?}", woken.after);
        let permit = woken.value;
        let master = cluster.master_of_key(name);
        let timeouts = format!("{{{name}}}:timeout");
        assert_eq!(master.cli(&["ZCARD", &timeouts]), "1", "{mode:?}");
        permit.release().await.unwrap();
        assert_eq!(master.cli(&["GET", name]), "1", "{mode:?}");
    }
}

/// The ACL rules a user of the semaphores and latches needs beyond the README's lock rules,
/// for names under `app:`.
fn sync_rules() -> Vec<String> {
    let mut rules = testkit::acl::readme_rules("app:*");
    rules.extend(
        [
            "~{app:*}:timeout",
            "&redisson_sc:*",
            "&redisson_countdownlatch__channel__*",
            "+incrby",
            "+decrby",
            "+decr",
            "+zrange",
            "+zcard",
        ]
        .map(String::from),
    );
    rules
}

#[tokio::test]
async fn a_user_without_a_command_is_refused_before_anything_is_written() {
    use testkit::acl::{set_user, user_url, without};
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    assert!(client(&server)
        .await
        .permit_expirable_semaphore("app:gpu")
        .try_set_permits(1)
        .await
        .unwrap());

    // Without ZADD, a permit would be counted and never recorded: refused up front.
    set_user(&server, &without(&sync_rules(), "+zadd"));
    let user = Client::connect(user_url(&server)).await.unwrap();
    let err = user
        .permit_expirable_semaphore("app:gpu")
        .acquire(LEASE)
        .await
        .unwrap_err();
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("+zadd"), "{err}");
    assert_eq!(raw_get(&mut raw, "app:gpu").await.as_deref(), Some("1"));
    assert_eq!(dbsize(&mut raw).await, 1);

    // Without the channel: refused, nothing written.
    set_user(&server, &without(&sync_rules(), "&redisson_sc:*"));
    let user = Client::connect(user_url(&server)).await.unwrap();
    let err = user
        .semaphore("app:pool")
        .try_set_permits(1)
        .await
        .unwrap_err();
    assert!(err.is_permission_denied(), "{err}");
    assert!(err.to_string().contains("&redisson_sc:*"), "{err}");
    assert_eq!(dbsize(&mut raw).await, 1);

    // With every rule, each kind works.
    set_user(&server, &sync_rules());
    let user = Client::connect(user_url(&server)).await.unwrap();
    let permit = user
        .permit_expirable_semaphore("app:gpu")
        .acquire(LEASE)
        .await
        .unwrap();
    permit.release().await.unwrap();
    let pool = user.semaphore("app:pool");
    assert!(pool.try_set_permits(1).await.unwrap());
    pool.acquire(1).await.unwrap().release().await.unwrap();
    let latch = user.count_down_latch("app:batch");
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    latch.wait().await.unwrap();
    let held = user
        .permit_expirable_semaphore("app:gpu")
        .acquire(LEASE)
        .await
        .unwrap();
    let waiting = {
        let gpu = user.permit_expirable_semaphore("app:gpu");
        Waiting::listening(&user, 1, async move { gpu.acquire(LEASE).await.unwrap() }).await
    };
    let woken = waiting
        .woken_by(async { held.release().await.unwrap() })
        .await;
    woken.value.release().await.unwrap();
    assert!(testkit::acl::refusals(&server).await.is_empty());
}

/// Another client extends a permit's lease by id (as Redisson's `updateLeaseTime` does):
/// the holder's `lost()` asks Redis at its own deadline and keeps watching instead of
/// saying `Expired`, and its release after that deadline still frees the permit.
#[tokio::test]
async fn a_lease_extended_elsewhere_is_kept_by_its_holder_and_freed_by_its_release() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, other) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("extended");
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(Duration::from_millis(600)).await.unwrap();
    let lost = tokio::spawn(permit.lost());
    let elsewhere = other.permit_expirable_semaphore("extended");
    assert!(elsewhere
        .update_lease_time(permit.id(), Duration::from_secs(5))
        .await
        .unwrap());
    let expiry = permits(&mut raw, "{extended}:timeout").await[0].1;
    let left = expiry - server_millis(&mut raw).await;
    assert!((4_500..=5_000).contains(&left), "{left} ms left in Redis");
    // Past the permit's own deadline: it asked, and watches on.
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    assert!(
        !lost.is_finished(),
        "lost() resolved though Redis extended the lease"
    );
    assert!(!permit.is_lost());
    assert!(permit.valid_until() > std::time::Instant::now() + Duration::from_secs(2));
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "extended").await.as_deref(), Some("1"));
    assert!(permits(&mut raw, "{extended}:timeout").await.is_empty());
    lost.abort();
}

/// Nobody asked `lost()`: a release after the permit's local deadline asks Redis all the
/// same, and frees a permit whose lease another client extended (the permit would stay
/// taken until the new expiry otherwise).
#[tokio::test]
async fn a_release_past_the_deadline_frees_a_permit_extended_elsewhere() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (holder, other) = (client(&server).await, client(&server).await);
    let gpu = holder.permit_expirable_semaphore("late");
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(Duration::from_millis(400)).await.unwrap();
    assert!(other
        .permit_expirable_semaphore("late")
        .update_lease_time(permit.id(), Duration::from_secs(8))
        .await
        .unwrap());
    tokio::time::sleep_until((permit.valid_until() + Duration::from_millis(300)).into()).await;
    assert!(
        permit.is_lost(),
        "past its deadline it must be assumed lost"
    );
    permit.release().await.unwrap();
    assert_eq!(raw_get(&mut raw, "late").await.as_deref(), Some("1"));
    assert!(permits(&mut raw, "{late}:timeout").await.is_empty());
}

/// The holder sets a new lease itself: Redis has it, the guard's deadline moves, and a
/// permit that is gone cannot be extended.
#[tokio::test]
async fn a_holder_extends_its_own_permit_and_not_a_lost_one() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let holder = client(&server).await;
    let gpu = holder.permit_expirable_semaphore("own");
    assert!(gpu.try_set_permits(2).await.unwrap());
    let permit = gpu.acquire(Duration::from_millis(500)).await.unwrap();
    let lost = tokio::spawn(permit.lost());
    permit
        .update_lease_time(Duration::from_secs(5))
        .await
        .unwrap();
    let expiry = permits(&mut raw, "{own}:timeout").await[0].1;
    let left = expiry - server_millis(&mut raw).await;
    assert!((4_500..=5_000).contains(&left), "{left} ms left in Redis");
    assert!(permit.valid_until() > std::time::Instant::now() + Duration::from_secs(4));
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!lost.is_finished() && !permit.is_lost());
    permit.release().await.unwrap();
    lost.abort();

    // Released by id: lost, and extending it sends nothing.
    let permit = gpu.acquire(LEASE).await.unwrap();
    gpu.release_by_id(permit.id()).await.unwrap();
    let err = permit
        .update_lease_time(Duration::from_secs(5))
        .await
        .unwrap_err();
    assert_eq!(err.lost_reason(), Some(LostReason::Released), "{err:?}");
    // By id: false for a permit nobody holds; bad input refused.
    assert!(!gpu
        .update_lease_time(permit.id(), Duration::from_secs(5))
        .await
        .unwrap());
    assert!(gpu
        .update_lease_time("not-hex", Duration::from_secs(5))
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(gpu
        .update_lease_time(permit.id(), Duration::from_millis(1))
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert_eq!(raw_get(&mut raw, "own").await.as_deref(), Some("2"));
}

/// At its deadline a permit nobody extended is lost once Redis agrees, a round trip later;
/// and with Redis unreachable, at the deadline all the same.
#[tokio::test]
async fn a_permit_nobody_extended_is_lost_at_its_deadline_asked_or_not() {
    let mut server = RedisServer::start();
    let holder = client(&server).await;
    let gpu = holder.permit_expirable_semaphore("ends");
    assert!(gpu.try_set_permits(2).await.unwrap());
    for unreachable in [false, true] {
        let permit = gpu.acquire(Duration::from_millis(500)).await.unwrap();
        let deadline = permit.valid_until();
        if unreachable {
            server.kill();
        }
        let reason = tokio::time::timeout(GENEROUS, permit.lost()).await.unwrap();
        let late = std::time::Instant::now().saturating_duration_since(deadline);
        assert_eq!(reason, LostReason::Expired);
        assert!(
            late < Duration::from_millis(400),
            "told {late:?} after the deadline"
        );
        drop(permit);
    }
    server.restart();
}
