//! A long job under a watchdog lock, which stops the moment the lock is lost.
//!
//! Run with `cargo run --example worker [STEPS]` (default 5 one-second steps) against the
//! Redis at `REDIS_URL` (default `redis://127.0.0.1:6379`). The watchdog timeout is 3 s, so
//! the job outlives its lease and the renewals (every 1 s) show in the remaining TTL. Run
//! `redis-cli DEL worker:nightly-report` meanwhile to see the job told it lost the lock.
//!
//! Stop it with Ctrl-C or `kill` (SIGINT, SIGTERM): the job is abandoned and
//! [`Client::shutdown`] releases the lock at once, so the next worker need not wait for the
//! lease to run out, as it would if the process just exited.

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
    let outcome = run(&client, steps).await;
    // Whatever happened, nothing stays held past this point, and no release is cut short
    // by the runtime ending with `main`.
    let report = client.shutdown(Duration::from_secs(5)).await;
    println!(
        "shut down: {} released, {} not released",
        report.released,
        report.not_released.len()
    );
    match outcome {
        Ok(()) if report.is_complete() => ExitCode::SUCCESS,
        Ok(()) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what `kill`, systemd and Kubernetes send).
/// The handlers are installed when this is called, not when the future is first polled:
/// a signal that comes in between (right after "took" is printed, say) still counts,
/// where without a handler SIGTERM would end the process with the lock held.
fn stop_requested() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut interrupt = signal(SignalKind::interrupt()).expect("a SIGINT handler");
        let mut terminate = signal(SignalKind::terminate()).expect("a SIGTERM handler");
        async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = terminate.recv() => {}
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
    }
}

async fn run(client: &Client, steps: u32) -> redis_rlock::Result<()> {
    let stop = stop_requested();
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
        () = stop => {
            // The guard drops on the way out, and its release starts in the background:
            // `main`'s shutdown waits for it, and releases whatever else is still held.
            println!("stop requested; job abandoned");
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
