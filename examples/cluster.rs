//! Locks on a Redis Cluster: each lock lives on the master of its key's hash slot, a
//! waiter on another client is woken by the unlock, and a lock stays held through a
//! failover of its master.
//!
//! `cargo run --example cluster -- --start` starts a throw-away cluster of 3 masters with
//! a replica each on free loopback ports (about 2 s; stopped at the end) and also fails a
//! master over. Or point it at your own cluster with seed URLs, as arguments or in
//! `REDIS_CLUSTER_URLS` (comma-separated):
//! `cargo run --example cluster -- redis://10.0.0.1:7000 redis://10.0.0.2:7000`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use redis_rlock::protocol::key_slot;
use redis_rlock::Client;
use testkit::RedisCluster;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let start = args.iter().any(|a| a == "--start");
    let cluster = if start {
        println!("starting a local cluster: 3 masters, 1 replica each");
        Some(RedisCluster::start_async().await)
    } else {
        None
    };
    let seeds: Vec<String> = match &cluster {
        Some(cluster) => cluster.seeds(),
        None if args.is_empty() => std::env::var("REDIS_CLUSTER_URLS")
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect(),
        None => args,
    };
    if seeds.is_empty() {
        eprintln!("no seeds: pass --start, seed URLs, or REDIS_CLUSTER_URLS");
        return ExitCode::FAILURE;
    }
    match run(&seeds, cluster.as_ref()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(seeds: &[String], cluster: Option<&RedisCluster>) -> redis_rlock::Result<()> {
    // One client per process; it finds every master from any seed that answers.
    let client = Client::connect_cluster(seeds).await?;

    // Each lock on the master of its slot; its keys share the slot, so one script call
    // covers it.
    for name in ["orders:1001", "orders:1002", "invoices:7"] {
        let guard = client.lock(name).lock().await?;
        println!("holding `{name}` (slot {})", key_slot(name.as_bytes()));
        guard.unlock().await?;
    }

    // A waiter on another client sleeps until the holder's unlock message wakes it.
    let other = Client::connect_cluster(seeds).await?;
    let guard = client.lock("report:daily").lock().await?;
    let waiting = other.clone();
    let waiter = tokio::spawn(async move {
        let guard = waiting.lock("report:daily").lock().await?;
        let woken = Instant::now();
        guard.unlock().await?;
        Ok::<_, redis_rlock::Error>(woken)
    });
    while other.status().subscribed_channels == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let released = Instant::now();
    guard.unlock().await?;
    let woken = waiter.await.expect("the waiter panicked")?;
    println!(
        "the waiter took `report:daily` {:?} after the unlock (the lease was 30 s)",
        woken.duration_since(released)
    );

    // With our own cluster: fail the lock's master over to its replica while holding it.
    if let Some(cluster) = cluster {
        let guard = client.lock("failover:demo").lock().await?;
        let master = cluster.master_of_key("failover:demo");
        let promoted = cluster.failover(master).await;
        println!(
            "`failover:demo` moved from port {} to port {}: still held: {}",
            master.port(),
            promoted.port(),
            !guard.is_lost()
        );
        guard.unlock().await?;
        println!("unlocked on the new master");
    }
    Ok(())
}
