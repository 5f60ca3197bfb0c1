//! A long job under a watchdog lock, which stops the moment the lock is lost.
//!
//! Run with `cargo run --example worker [STEPS]` (default 5 one-second steps) against the
//! Redis at `REDIS_URL` (default `redis://127.0.0.1:6379`). The watchdog timeout is 3 s, so
//! the job outlives its lease and the renewals (every 1 s) show in the remaining TTL. Run
//! `redis-cli DEL worker:nightly-report` meanwhile to see the job told it lost the lock.

use std::process::ExitCode;
use std::time::Duration;

use redis_rlock::{Client, LockGuard};

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let steps: u32 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let client = match Client::builder(&url)
        .watchdog_timeout(Duration::from_secs(3))
        .build()
        .await
    {
        Ok(client) => client,
        Err(e) => {
            eprintln!("Redis is not reachable at {url}: {e}");
            eprintln!("Start one with `redis-server --port 6379 --save \"\"`, or set REDIS_URL.");
            return ExitCode::FAILURE;
        }
    };
    match run(&client, steps).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(client: &Client, steps: u32) -> redis_rlock::Result<()> {
    let lock = client.lock("worker:nightly-report");
    let guard = lock.lock().await?;
    println!("took {} (lease 3 s, renewed every 1 s)", guard.name());

    // The future does not borrow the guard, so it can race the job.
    let lost = guard.lost();
    tokio::select! {
        () = job(&lock, &guard, steps) => {
            // `unlock` says whether the lock was still ours at the end.
            println!("job done; unlock: {:?}", guard.unlock().await);
        }
        reason = lost => {
            // Someone else may hold the lock now: stop touching the resource.
            println!("lock lost ({reason}); job abandoned");
        }
    }
    Ok(())
}

async fn job(lock: &redis_rlock::RLock, guard: &LockGuard, steps: u32) {
    for step in 1..=steps {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let ttl = lock.remaining_ttl().await.ok().flatten();
        println!(
            "step {step}/{steps} done; remaining lease {ttl:?}; valid for {:?} more",
            guard
                .valid_until()
                .saturating_duration_since(std::time::Instant::now())
        );
    }
}
