//! Tasks sharing a pool of permits: at most N of them use the resource at once, however
//! many processes run this.
//!
//! Run with `cargo run --example rate_limited_pool [TASKS] [PERMITS]` (default 8 tasks, 3
//! permits) against the Redis at `REDIS_URL` (default `redis://127.0.0.1/`). Each task takes
//! a permit of the semaphore `example:pool`, "uses a connection" for 200 ms, and gives it
//! back; the output shows how many are in use at each moment, never more than the permits.
//! Run it in two terminals at once: the permits are shared between the processes.
//! `redis-cli GET example:pool` shows the free permits meanwhile.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_rlock::Client;

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into());
    let mut args = std::env::args().skip(1).map(|arg| arg.parse::<u64>().ok());
    let tasks = args.next().flatten().unwrap_or(8);
    let permits = args.next().flatten().unwrap_or(3);
    let client = match Client::connect(&url).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("Redis is not reachable at {url}: {e}");
            eprintln!("Start one with `redis-server --port 6379 --save \"\"`, or set REDIS_URL.");
            return ExitCode::FAILURE;
        }
    };
    match run(&client, tasks, permits).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(client: &Client, tasks: u64, permits: u64) -> redis_rlock::Result<()> {
    let pool = client.semaphore("example:pool");
    // The first process sets the pool up; later ones find it set.
    if pool.try_set_permits(permits).await? {
        println!("pool set up with {permits} permits");
    } else {
        println!(
            "pool already set up ({} free now)",
            pool.available_permits().await?
        );
    }

    let in_use = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for task in 0..tasks {
        let (pool, in_use) = (pool.clone(), in_use.clone());
        workers.push(tokio::spawn(async move {
            // Waits, without polling, until a permit is free anywhere.
            let permit = pool.acquire(1).await?;
            let now = in_use.fetch_add(1, Ordering::SeqCst) + 1;
            println!(
                "{:>6} ms  task {task} got a permit ({now} in use here)",
                started.elapsed().as_millis()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            in_use.fetch_sub(1, Ordering::SeqCst);
            // Dropping the guard gives it back too, in the background; release() says
            // whether that worked.
            permit.release().await
        }));
    }
    for worker in workers {
        worker.await.expect("a worker task panicked")?;
    }
    println!(
        "{tasks} tasks done in {} ms; {} permits free",
        started.elapsed().as_millis(),
        pool.available_permits().await?
    );
    Ok(())
}
