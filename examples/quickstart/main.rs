//! Take a lock, see it in Redis, watch another client wait for it, release it.
//!
//! Alice takes `quickstart:order:1001` and shows its lease; Bob's `try_lock` finds it busy;
//! Bob then waits in `lock()` and is woken by Alice's unlock, and the wait is timed.
//!
//! Run with `cargo run --example quickstart`. It needs a Redis server, and finds one so:
//! - `REDIS_URL` set (e.g. `REDIS_URL=redis://127.0.0.1:6380`): that server and no other;
//!   nothing is started.
//! - Otherwise the Redis at `127.0.0.1:6379` if one answers there. If none does and
//!   `redis-server` is on `PATH`, a throwaway one is started on a free loopback port and
//!   stopped again on exit (Ctrl-C included); if there is no `redis-server` either, it
//!   explains how to install and start Redis.

mod local_redis;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use redis_rlock::Client;

use local_redis::LocalRedis;

/// What shells report for a process stopped by Ctrl-C (128 + SIGINT).
const INTERRUPTED: u8 = 130;

#[tokio::main]
async fn main() -> ExitCode {
    // Without a handler, Ctrl-C would end the process before any `Drop` runs. With it, `run`
    // is dropped mid-way instead, and with it the throwaway server it owns, which stops it.
    tokio::select! {
        code = run() => code,
        // If no handler can be installed, `Err` fails this pattern, which disables the branch
        // rather than ending the demo.
        Ok(()) = tokio::signal::ctrl_c() => {
            eprintln!("interrupted");
            ExitCode::from(INTERRUPTED)
        }
    }
}

async fn run() -> ExitCode {
    // Declared first so that it is dropped last: a throwaway server outlives the clients.
    let redis = match choose_redis().await {
        Ok(redis) => redis,
        Err(explanation) => {
            eprintln!("{explanation}");
            return ExitCode::FAILURE;
        }
    };
    let Some(alice) = connect_or_explain(&redis).await else {
        return ExitCode::FAILURE;
    };
    let Some(bob) = connect_or_explain(&redis).await else {
        return ExitCode::FAILURE;
    };
    match demo(alice, bob).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The Redis the demo talks to.
enum Redis {
    /// Named by `REDIS_URL`: the user chose it, so it is used as is, and never started.
    FromEnv(String),
    /// Found at the default address, or a throwaway server (stopped when dropped).
    Local(LocalRedis),
}

impl Redis {
    fn url(&self) -> String {
        match self {
            Redis::FromEnv(url) => url.clone(),
            Redis::Local(local) => local.url(),
        }
    }
}

async fn choose_redis() -> Result<Redis, String> {
    match std::env::var("REDIS_URL") {
        // An empty value is how shells commonly "unset" a variable for one command.
        Ok(url) if !url.is_empty() => Ok(Redis::FromEnv(url)),
        _ => match local_redis::find_or_start().await {
            Ok(local) => Ok(Redis::Local(local)),
            Err(unavailable) => Err(unavailable.to_string()),
        },
    }
}

async fn connect_or_explain(redis: &Redis) -> Option<Client> {
    let url = redis.url();
    match Client::connect(&url).await {
        Ok(client) => Some(client),
        Err(e) => {
            eprintln!("Redis is not reachable at {url}: {e}");
            if let Redis::FromEnv(_) = redis {
                eprintln!(
                    "That URL comes from REDIS_URL: start a Redis there, fix the URL, or unset \
                     REDIS_URL to use (or start) a local one."
                );
            }
            None
        }
    }
}

async fn demo(alice: Client, bob: Client) -> redis_rlock::Result<()> {
    let name = "quickstart:order:1001";
    let guard = alice.lock(name).lock().await?;
    // `<client-uuid>:<id>`: alice's client id, then the owner's: here the calling tokio
    // task's id, or outside any task (as in `main`) a per-thread id with bit 62 set.
    println!(
        "alice holds `{name}` as hash field {} (<client id>:<owner id>)",
        guard.owner()
    );
    let ttl = alice.lock(name).remaining_ttl().await?;
    println!("its lease: {ttl:?} (the watchdog renews it while alice holds the guard)");

    // Two clients are two owners: bob cannot take it while alice holds it.
    let bob_lock = bob.lock(name);
    assert!(bob_lock.try_lock().await?.is_none());
    println!("bob's try_lock: busy");

    // Bob waits; alice's unlock wakes him through the lock's unlock channel.
    let waiter = tokio::spawn(async move {
        let started = Instant::now();
        let guard = bob_lock.lock().await?;
        println!(
            "bob got it {:?} after he started waiting",
            started.elapsed()
        );
        guard.unlock().await
    });
    // Gives bob time to start waiting, so that it is the unlock message that wakes him.
    tokio::time::sleep(Duration::from_millis(50)).await;
    guard.unlock().await?;
    println!("alice released it");
    waiter.await.expect("bob's task ran to the end")?;
    println!(
        "bob released it; locked now: {}",
        alice.lock(name).is_locked().await?
    );
    Ok(())
}
