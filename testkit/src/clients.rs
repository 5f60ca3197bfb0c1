//! Lock clients set up for tests: short retry pauses, so that failure tests finish quickly.

use std::time::Duration;

use crate::servers::RedisServer;

/// A client of `server` with the given watchdog timeout and short retry pauses, so that
/// failure tests finish quickly.
pub async fn client_with_watchdog(server: &RedisServer, watchdog: Duration) -> redis_rlock::Client {
    redis_rlock::Client::builder(server.url())
        .watchdog_timeout(watchdog)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .expect("connect to the test redis-server")
}

/// A client of `server` with default settings.
pub async fn client(server: &RedisServer) -> redis_rlock::Client {
    client_with_watchdog(server, Duration::from_secs(30)).await
}

/// A client of `server` whose fair-lock waiters keep their places for `waiter_timeout`
/// without a heartbeat, with short retry pauses.
pub async fn fair_client(server: &RedisServer, waiter_timeout: Duration) -> redis_rlock::Client {
    redis_rlock::Client::builder(server.url())
        .fair_waiter_timeout(waiter_timeout)
        .retry_delay(Duration::from_millis(20))
        .build()
        .await
        .expect("connect to the test redis-server")
}
