//! Several consumers drain a shared job list, taking turns in arrival order.
//!
//! Run with `cargo run --example job_consumer [CONSUMERS] [JOBS]` (default 4 consumers and
//! 12 jobs) against the Redis at `REDIS_URL` (default `redis://127.0.0.1:6379`).
//!
//! Each consumer has its own `Client`, as if it ran on its own machine. A turn is: take the
//! fair lock, pop the next job, work on it, release the lock. Because a `FairLock` serves its
//! waiters first come, first served, and a consumer that finishes a turn queues again
//! behind the others, the turns go round: 1 2 3 4 1 2 3 4 ... An `RLock` in its place would
//! let whoever is quickest take the lock again and again.
//!
//! Stop it with Ctrl-C or `kill` (SIGINT, SIGTERM): each consumer's [`Client::shutdown`]
//! releases its turn if it has one, takes it out of the queue if it waits, and the
//! consumers stop.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use redis_rlock::Client;

const JOBS_KEY: &str = "job_consumer:jobs";
const TURN_LOCK: &str = "job_consumer:turn";

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let mut args = std::env::args().skip(1).map(|a| a.parse::<usize>().ok());
    let consumers = args.next().flatten().unwrap_or(4).max(1);
    let jobs = args.next().flatten().unwrap_or(12);
    match run(&url, consumers, jobs).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is_connection_error() => {
            eprintln!("Redis is not reachable at {url}: {e}");
            eprintln!("Start one with `redis-server --port 6379 --save \"\"`, or set REDIS_URL.");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(url: &str, consumers: usize, jobs: usize) -> redis_rlock::Result<()> {
    let stop = stop_requested();
    seed_jobs(url, jobs).await?;
    println!("{jobs} jobs in `{JOBS_KEY}`; {consumers} consumers take turns on `{TURN_LOCK}`");

    let turns = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    let mut clients = Vec::new();
    for id in 1..=consumers {
        // One client per consumer: separate owners, as on separate machines.
        let client = Client::connect(url).await?;
        let jobs = redis::Client::open(url)?
            .get_multiplexed_async_connection()
            .await?;
        clients.push(client.clone());
        tasks.push(tokio::spawn(consume(client, jobs, id, turns.clone())));
    }
    let all_done = futures_util::future::join_all(tasks.iter_mut());
    let outcomes = tokio::select! {
        outcomes = all_done => outcomes,
        () = stop => {
            println!("stop requested");
            // Each consumer's turn is released, or its place in the queue left; a
            // consumer waiting for its turn gets `Error::ShutDown` and stops.
            for client in &clients {
                let report = client.shutdown(Duration::from_secs(5)).await;
                for left in report.not_released {
                    eprintln!("not released: {} `{}`: {}", left.what, left.key, left.error);
                }
            }
            futures_util::future::join_all(tasks).await
        }
    };
    for outcome in outcomes {
        match outcome.expect("a consumer panicked") {
            Err(e) if e.is_shut_down() => {}
            other => other?,
        }
    }
    // Done: the clients have nothing left to release, and close.
    for client in &clients {
        client.shutdown(Duration::from_secs(5)).await;
    }

    let turns = turns.lock().unwrap_or_else(|p| p.into_inner());
    let order: Vec<String> = turns.iter().map(|id| id.to_string()).collect();
    println!("turns in order: {}", order.join(" "));
    Ok(())
}

/// Takes turns until the job list is empty.
async fn consume(
    client: Client,
    mut redis: redis::aio::MultiplexedConnection,
    id: usize,
    turns: Arc<Mutex<Vec<usize>>>,
) -> redis_rlock::Result<()> {
    let lock = client.fair_lock(TURN_LOCK);
    loop {
        let asked = Instant::now();
        let turn = lock.lock().await?;
        let waited = asked.elapsed();
        let job: Option<String> = redis.lpop(JOBS_KEY, None).await?;
        let Some(job) = job else {
            turn.unlock().await?;
            return Ok(());
        };
        turns.lock().unwrap_or_else(|p| p.into_inner()).push(id);
        println!(
            "consumer {id}: {job} (waited {} ms for its turn)",
            waited.as_millis()
        );
        // The work of a turn. Were it long, race it against `turn.lost()` as
        // `examples/worker.rs` does.
        tokio::time::sleep(Duration::from_millis(20)).await;
        turn.unlock().await?;
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what `kill`, systemd and Kubernetes send).
/// The handlers are installed when this is called, not when the future is first polled:
/// a signal that comes in between (while the consumers start, say) still counts,
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

async fn seed_jobs(url: &str, jobs: usize) -> redis_rlock::Result<()> {
    let mut redis = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let _: () = redis.del(JOBS_KEY).await?;
    if jobs > 0 {
        let names: Vec<String> = (1..=jobs).map(|n| format!("job-{n}")).collect();
        let _: () = redis.rpush(JOBS_KEY, names).await?;
    }
    Ok(())
}
