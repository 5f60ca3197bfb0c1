//! The crate's metrics (cargo feature `metrics`) served as Prometheus text on a loopback
//! port, with `metrics-exporter-prometheus` as the application's exporter, while a few
//! workers take turns on one lock.
//!
//! `cargo run --features metrics --example metrics -- --start` starts a throw-away
//! redis-server; without `--start` it uses `REDIS_URL` (default `redis://127.0.0.1/`).
//! `--port N` picks the port (default: a free one); `--seconds N` how long the workers run
//! (default 30). Then `curl http://127.0.0.1:PORT/metrics`.
//!
//! In your service: enable the feature, install any `metrics` exporter once at start-up
//! (as `main` does below), and the lock calls report to it.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusBuilder;
use redis_rlock::Client;
use testkit::RedisServer;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let server = args.iter().any(|a| a == "--start").then(RedisServer::start);
    let url = match &server {
        Some(server) => server.url(),
        None => std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1/".into()),
    };
    let port = match value_of("--port") {
        Some(port) => port as u16,
        None => free_port(),
    };
    let run_for = Duration::from_secs(value_of("--seconds").unwrap_or(30));

    // Loopback only: metrics name no lock, but they are nobody else's business either.
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    if let Err(e) = PrometheusBuilder::new()
        .with_http_listener(address)
        .install()
    {
        eprintln!("cannot serve metrics on {address}: {e}");
        return ExitCode::FAILURE;
    }
    println!("serving http://{address}/metrics");

    let client = match Client::connect(&url).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("cannot connect to {url}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let until = Instant::now() + run_for;
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let lock = client.lock("metrics:example");
            tokio::spawn(async move {
                let mut turns = 0u64;
                while Instant::now() < until {
                    // Some give up after 20 ms, to show both outcomes.
                    let guard = if worker % 2 == 0 {
                        lock.lock().await.map(Some)
                    } else {
                        lock.try_lock_for(Duration::from_millis(20)).await
                    };
                    match guard {
                        Ok(Some(guard)) => {
                            turns += 1;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                            let _ = guard.unlock().await;
                        }
                        Ok(None) => {}
                        Err(e) => eprintln!("worker {worker}: {e}"),
                    }
                }
                turns
            })
        })
        .collect();
    for (worker, handle) in workers.into_iter().enumerate() {
        let turns = handle.await.unwrap_or(0);
        println!("worker {worker}: {turns} turns");
    }
    println!("done");
    ExitCode::SUCCESS
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}
