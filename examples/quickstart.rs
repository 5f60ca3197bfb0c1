//! Take a lock, see it in Redis, watch another client wait for it, release it.
//!
//! Run with `cargo run --example quickstart` against the Redis at `REDIS_URL`
//! (default `redis://127.0.0.1:6379`).

use std::process::ExitCode;

use redis_rlock::Client;

async fn connect_or_explain(url: &str) -> Option<Client> {
    match Client::connect(url).await {
        Ok(client) => Some(client),
        Err(e) => {
            eprintln!("Redis is not reachable at {url}: {e}");
            eprintln!("Start one with `redis-server --port 6379 --save \"\"`, or set REDIS_URL.");
            None
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let Some(alice) = connect_or_explain(&url).await else {
        return ExitCode::FAILURE;
    };
    let Some(bob) = connect_or_explain(&url).await else {
        return ExitCode::FAILURE;
    };
    match run(alice, bob).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(alice: Client, bob: Client) -> redis_rlock::Result<()> {
    let name = "quickstart:order:1001";
    let guard = alice.lock(name).lock().await?;
    println!("alice holds `{name}` as hash field {}", guard.owner());
    let ttl = alice.lock(name).remaining_ttl().await?;
    println!("its lease: {ttl:?} (the watchdog renews it while alice holds the guard)");

    // Two clients are two owners: bob cannot take it while alice holds it.
    let bob_lock = bob.lock(name);
    assert!(bob_lock.try_lock().await?.is_none());
    println!("bob's try_lock: busy");

    // Bob waits; alice's unlock wakes him through the lock's unlock channel.
    let waiter = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let guard = bob_lock.lock().await?;
        println!(
            "bob got it {:?} after he started waiting",
            started.elapsed()
        );
        guard.unlock().await
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    guard.unlock().await?;
    println!("alice released it");
    waiter.await.expect("bob's task ran to the end")?;
    println!(
        "bob released it; locked now: {}",
        alice.lock(name).is_locked().await?
    );
    Ok(())
}
