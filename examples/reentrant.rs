//! Nested critical sections: the task holding a lock takes it again without waiting.
//!
//! Run with `cargo run --example reentrant` against the Redis at `REDIS_URL`
//! (default `redis://127.0.0.1:6379`).

use std::collections::HashMap;
use std::process::ExitCode;

use redis_rlock::{Client, RLock};

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = match Client::connect(&url).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("Redis is not reachable at {url}: {e}");
            eprintln!("Start one with `redis-server --port 6379 --save \"\"`, or set REDIS_URL.");
            return ExitCode::FAILURE;
        }
    };
    match run(&client, &url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(client: &Client, url: &str) -> redis_rlock::Result<()> {
    let account = client.lock("reentrant:account:{A}");
    transfer(&account, url).await?;

    // Ownership is per task: a spawned task is another owner and must wait.
    let guard = account.lock().await?;
    let other = account.clone();
    let busy = tokio::spawn(async move { other.try_lock().await.map(|g| g.is_none()) })
        .await
        .expect("the task ran");
    println!("another task's try_lock while we hold it: busy = {}", busy?);

    // A guard remembers its owner, so any task may release it.
    tokio::spawn(async move { guard.unlock().await })
        .await
        .expect("the task ran")?;
    println!(
        "released from another task; locked now: {}",
        account.is_locked().await?
    );
    Ok(())
}

async fn transfer(account: &RLock, url: &str) -> redis_rlock::Result<()> {
    let guard = account.lock().await?;
    println!("transfer: hold count {}", account.hold_count().await?);
    debit(account, url).await?;
    println!(
        "transfer: back to hold count {}",
        account.hold_count().await?
    );
    guard.unlock().await
}

async fn debit(account: &RLock, url: &str) -> redis_rlock::Result<()> {
    // The same task takes the same lock again: no wait, the count goes to 2.
    let guard = account.lock().await?;
    println!("  debit: hold count {}", account.hold_count().await?);
    let mut raw = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let hash: HashMap<String, i64> = redis::cmd("HGETALL")
        .arg(guard.name())
        .query_async(&mut raw)
        .await?;
    for (field, count) in hash {
        println!(
            "  debit: Redis hash {} = {{ {field}: {count} }}",
            guard.name()
        );
    }
    guard.unlock().await
}
