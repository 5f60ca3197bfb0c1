//! Bad input is refused before anything is sent; an unreachable, killed or frozen Redis
//! gives an error in bounded time.

use std::time::{Duration, Instant};

use redis_rlock::{Client, Error};
use testkit::{client, RedisServer};

/// The error and its sources, joined as `anyhow`'s `{:#}` prints them.
fn chain(err: &Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn total_connections(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "stats"])
        .lines()
        .find_map(|line| line.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO stats reports total_connections_received")
}

#[tokio::test]
async fn bad_input_is_a_typed_error_and_writes_nothing() {
    let server = RedisServer::start();
    let client = client(&server).await;

    let empty = client.lock("");
    assert!(empty.lock().await.unwrap_err().is_invalid_argument());
    assert!(empty.try_lock().await.unwrap_err().is_invalid_argument());
    assert!(empty
        .try_lock_for(Duration::from_secs(1))
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(empty
        .force_unlock()
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(empty.is_locked().await.unwrap_err().is_invalid_argument());
    assert!(empty.hold_count().await.unwrap_err().is_invalid_argument());
    assert!(empty
        .remaining_ttl()
        .await
        .unwrap_err()
        .is_invalid_argument());

    let lock = client.lock("fine");
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::MAX,
        Duration::from_secs(400 * 365 * 86_400),
    ] {
        let err = lock.lock_with_lease(lease).await.unwrap_err();
        assert!(err.is_invalid_argument(), "lease {lease:?}: {err}");
        let err = lock.try_lock_with(Duration::ZERO, lease).await.unwrap_err();
        assert!(err.is_invalid_argument(), "lease {lease:?}: {err}");
    }
    let empty_fair = client.fair_lock("");
    assert!(empty_fair.lock().await.unwrap_err().is_invalid_argument());
    assert!(empty_fair
        .try_lock_for(Duration::from_secs(1))
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(empty_fair
        .force_unlock()
        .await
        .unwrap_err()
        .is_invalid_argument());
    let fair = client.fair_lock("fine");
    assert!(fair
        .lock_with_lease(Duration::ZERO)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert!(fair
        .try_lock_with(Duration::from_secs(1), Duration::MAX)
        .await
        .unwrap_err()
        .is_invalid_argument());
    assert_eq!(client.status().queued_waiters, 0);
    assert_eq!(
        testkit::dbsize(&mut server.raw().await).await,
        0,
        "nothing written"
    );

    let connections_before = total_connections(&server);
    for builder in [
        Client::builder(server.url()).watchdog_timeout(Duration::ZERO),
        Client::builder(server.url()).watchdog_timeout(Duration::MAX),
        Client::builder(server.url()).watchdog_batch_size(0),
        Client::builder(server.url()).retry_attempts(0),
        Client::builder(server.url()).response_timeout(Duration::ZERO),
        Client::builder(server.url()).fair_waiter_timeout(Duration::ZERO),
        Client::builder(server.url()).fair_waiter_timeout(Duration::from_millis(99)),
        Client::builder(server.url()).fair_waiter_timeout(Duration::MAX),
        Client::builder("not a url"),
        Client::builder("http://127.0.0.1:6379"),
    ] {
        let err = builder.build().await.unwrap_err();
        assert!(err.is_invalid_argument(), "{err}");
    }
    // Only `cli` itself connected: the rejected builders never did.
    assert_eq!(total_connections(&server), connections_before + 1);
}

#[tokio::test]
async fn an_unreachable_redis_fails_connect_quickly() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let err = Client::connect(format!("redis://app:s3cret@127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    // Said once, however the chain is printed, with the address and without the password.
    let printed = chain(&err);
    assert_eq!(printed.matches("refused").count(), 1, "{printed}");
    assert!(
        printed.contains(&format!("redis://app:***@127.0.0.1:{port}")),
        "{printed}"
    );
    assert!(!printed.contains("s3cret"), "{printed}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_killed_server_gives_errors_in_bounded_time_and_a_restarted_one_works_again() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("outage");
    lock.lock().await.unwrap().unlock().await.unwrap();

    server.kill();
    let started = Instant::now();
    let err = lock.lock().await.unwrap_err();
    assert!(err.is_connection_error(), "{err}");
    let printed = chain(&err);
    assert_eq!(printed.matches("refused").count(), 1, "{printed}");
    // Which Redis: the address is in the message.
    assert!(
        printed.contains(&format!("127.0.0.1:{}", server.port())),
        "{printed}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let err = lock.is_locked().await.unwrap_err();
    assert!(err.is_connection_error(), "{err}");

    server.restart();
    let guard = tokio::time::timeout(Duration::from_secs(10), lock.lock())
        .await
        .expect("reconnects after the restart")
        .unwrap();
    guard.unlock().await.unwrap();
}

#[tokio::test]
async fn a_frozen_server_gives_errors_in_bounded_time() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .response_timeout(Duration::from_millis(300))
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .unwrap();
    let (holder, lock) = (testkit::client(&server).await, client.lock("frozen"));
    let held = holder.lock("frozen").lock().await.unwrap();
    server.freeze();
    // Without a wait budget: an error after the retries.
    let started = Instant::now();
    let outcome = lock.lock().await;
    let took = started.elapsed();
    // With one: an error once the budget is spent (it rides out what may be brief).
    let budgeted = Instant::now();
    let within_budget = lock.try_lock_for(Duration::from_secs(2)).await;
    let budget_took = budgeted.elapsed();
    server.thaw();
    let err = outcome.unwrap_err();
    assert!(err.is_timeout() || err.is_connection_error(), "{err}");
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(matches!(
        err,
        Error::Redis(_) | Error::Unreachable { .. } | Error::Timeout { .. } | Error::Pool { .. }
    ));
    let err = within_budget.unwrap_err();
    assert!(err.is_timeout() || err.is_connection_error(), "{err}");
    assert!(budget_took < Duration::from_secs(6), "{budget_took:?}");
    held.unlock().await.unwrap();
}

#[tokio::test]
async fn a_connection_that_keeps_timing_out_is_replaced() {
    let server = RedisServer::start();
    let client = Client::builder(server.url())
        .response_timeout(Duration::from_millis(200))
        .retry_attempts(1)
        .build()
        .await
        .unwrap();
    let lock = client.lock("half-open");
    let connections_before = total_connections(&server);
    server.freeze();
    // A frozen server looks like a half-open connection from here: replies never come.
    for _ in 0..3 {
        assert!(lock.is_locked().await.unwrap_err().is_timeout());
    }
    server.thaw();
    assert!(!lock.is_locked().await.unwrap());
    // `cli` connects once per call; the client opened one more: its new shared connection.
    assert_eq!(total_connections(&server), connections_before + 2);
}

#[tokio::test]
async fn a_retried_unlock_whose_first_try_ran_releases_one_hold_only() {
    let server = RedisServer::start();
    let mut conn = server.raw().await;
    let client = Client::builder(server.url())
        .response_timeout(Duration::from_millis(300))
        .retry_attempts(4)
        .retry_delay(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    let lock = client.lock("retried");
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    server.freeze();
    let unlocking = tokio::spawn(inner.unlock());
    // The first try times out at 300 ms and its retry goes out within 400 ms; Redis runs
    // both, in order, once thawed: the retry must find the first try's answer, not
    // release a second hold.
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.thaw();
    unlocking.await.unwrap().unwrap();
    let hash = testkit::lock_hash(&mut conn, "retried").await;
    assert_eq!(hash.get(outer.owner()), Some(&1), "{hash:?}");
    outer.unlock().await.unwrap();
}

/// A server that answers every connection like a web server would, then hangs up.
fn http_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0; 1024];
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let _ = stream.read(&mut request);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    port
}

#[tokio::test]
async fn a_server_that_is_not_redis_is_named_as_such_and_not_retried() {
    let port = http_server();
    let started = Instant::now();
    let err = Client::connect(format!("redis://127.0.0.1:{port}"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NotRedis { .. }), "{err:?}");
    assert!(!err.is_connection_error(), "retrying cannot help: {err}");
    assert!(err.to_string().contains("did not answer as Redis"), "{err}");
    // What answered, in words, not the parser's internals.
    assert!(!chain(&err).contains("Unexpected"), "{err}");
    assert!(err.to_string().contains("HTTP"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_replica_is_refused_at_connect() {
    let master = RedisServer::start();
    let replica = testkit::start_replica_of(&master).await;
    let err = Client::connect(replica.url()).await.unwrap_err();
    assert!(matches!(err, Error::UnsupportedServer { .. }), "{err:?}");
    assert!(err.to_string().contains("replica"), "{err}");
    Client::connect(master.url()).await.unwrap();
}

#[test]
fn a_client_whose_runtime_shut_down_says_so() {
    let server = RedisServer::start();
    let first = tokio::runtime::Runtime::new().unwrap();
    let (client, guard) = first.block_on(async {
        let client = Client::connect(server.url()).await.unwrap();
        let guard = client
            .lock("held")
            .lock_with_lease(Duration::from_secs(30))
            .await
            .unwrap();
        (client, guard)
    });
    drop(first);

    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let err = client.lock("other").lock().await.unwrap_err();
        assert!(matches!(err, Error::RuntimeGone), "{err:?}");
        assert!(err.to_string().contains("runtime"), "{err}");
        let err = guard.unlock().await.unwrap_err();
        assert!(matches!(err, Error::RuntimeGone), "{err:?}");
        let err = client.lock("held").is_locked().await.unwrap_err();
        assert!(matches!(err, Error::RuntimeGone), "{err:?}");
    });
}

#[tokio::test]
async fn a_fixed_lease_holder_is_told_when_a_restarted_redis_forgot_its_lock() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let guard = client
        .lock("fixed")
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let lost = guard.lost();

    server.restart();
    // Any call after the restart makes the client replace its connection.
    let _ = client.lock("another").try_lock().await;
    let reason = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .expect("told long before the 60 s lease runs out");
    assert_eq!(reason, redis_rlock::LostReason::Released);
    assert!(guard.is_lost());
    let err = guard.unlock().await.unwrap_err();
    assert!(err.is_lock_lost());
    // What an engineer reads during the incident names the restart as a cause.
    assert!(err.to_string().contains("forgotten by Redis"), "{err}");
}

#[tokio::test]
async fn a_cluster_node_is_refused_at_connect_until_cluster_support_exists() {
    let node = RedisServer::start_with_args(&["--cluster-enabled", "yes"]);
    let err = Client::connect(node.url()).await.unwrap_err();
    assert!(matches!(err, Error::UnsupportedServer { .. }), "{err:?}");
    assert!(err.to_string().contains("cluster mode"), "{err}");
}

/// A call with a wait budget rides out a brief outage: Redis stopped, and started again 3 s
/// later while `try_lock_for(10 s)` waits, and the call takes the lock.
#[tokio::test]
async fn a_budgeted_call_rides_out_a_brief_outage() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("outage");
    lock.lock().await.unwrap().unlock().await.unwrap();

    server.kill();
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock_for(Duration::from_secs(10)).await }
    });
    // A semaphore's timed wait too: its permit is set once Redis is back.
    let permits = client.semaphore("outage:pool");
    let waiting_permit = tokio::spawn({
        let permits = permits.clone();
        async move {
            permits
                .try_acquire_for(1, Duration::from_secs(10))
                .await
                .map(|guard| guard.map(|g| g.forget()))
        }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !waiting.is_finished(),
        "it gave up while it had time to wait"
    );
    assert!(!waiting_permit.is_finished(), "the semaphore gave up");
    server.restart();
    assert!(permits.try_set_permits(1).await.unwrap());
    let permit = tokio::time::timeout(Duration::from_secs(10), waiting_permit)
        .await
        .expect("the semaphore's wait ends within its budget")
        .unwrap();
    assert!(matches!(permit, Ok(Some(1))), "{permit:?}");
    let guard = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the call ends within its budget")
        .unwrap()
        .expect("no error once Redis is back")
        .expect("the lock is free");
    guard.unlock().await.unwrap();
}

/// A budget spent while Redis stays down ends in the last connection error, at the budget's
/// end: not after the first few retries.
#[tokio::test]
async fn a_budgeted_call_returns_the_connection_error_when_its_budget_is_spent() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let lock = client.lock("outage");
    lock.lock().await.unwrap().unlock().await.unwrap();

    server.kill();
    let started = Instant::now();
    let err = lock
        .try_lock_for(Duration::from_secs(2))
        .await
        .expect_err("Redis stayed down");
    let took = started.elapsed();
    assert!(err.is_connection_error(), "{err}");
    assert!(
        took >= Duration::from_millis(1500),
        "gave up after {took:?}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    // `lock()`, without a budget, keeps its contract: an error after its retries.
    let started = Instant::now();
    assert!(lock.lock().await.unwrap_err().is_connection_error());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
