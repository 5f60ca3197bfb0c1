//! The crate's metrics (cargo feature `metrics`) served as Prometheus text on a loopback
//! port, with `metrics-exporter-prometheus` as the application's exporter, while a few
//! workers take turns on one lock.
//!
//! `REDIS_URL=redis://HOST:PORT cargo run --features metrics --example metrics` uses that
//! Redis; without `REDIS_URL` it starts a throwaway `redis-server` (from `PATH`) on a free
//! loopback port and stops it on exit. `--port N` picks the metrics port (default: a free
//! one); `--seconds N` how long the workers run (default 30). Then
//! `curl http://127.0.0.1:PORT/metrics`.
//!
//! In your service: enable the feature, install any `metrics` exporter once at start-up,
//! before the first `Client` is built, with the histogram buckets below (as `serve_metrics`
//! does), and the lock calls report to it. Only `main` and `serve_metrics` are about that;
//! the rest runs the demo.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder};
use redis_rlock::Client;

/// Buckets of `rlock_acquire_wait_seconds`, as the `operations` module docs give them: from
/// an uncontended acquire (a round trip, about a millisecond) to the default 30 s lease and
/// beyond, with 5 s, the docs' alert threshold, a bucket edge.
const ACQUIRE_WAIT_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];
/// Buckets of `rlock_hold_seconds` (see the `operations` module docs): from a short critical
/// section to an hour-long job kept by the watchdog, with the 30 s default lease an edge.
const HOLD_BUCKETS: [f64; 12] = [
    0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    let port = match value_of("--port") {
        Some(port) => port as u16,
        None => free_port(),
    };
    let run_for = Duration::from_secs(value_of("--seconds").unwrap_or(30));

    // Loopback only: metrics name no lock, but they are nobody else's business either.
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    // Before the first client: it makes every counter and gauge at zero in the exporter.
    if let Err(e) = serve_metrics(address) {
        eprintln!("cannot serve metrics on {address}: {e}");
        return ExitCode::FAILURE;
    }
    println!("serving http://{address}/metrics");

    // Declared before the client, so that it is dropped after it.
    let (url, _server) = match std::env::var("REDIS_URL") {
        Ok(url) => (url, None),
        Err(_) => match ThrowawayRedis::start() {
            Ok(server) => (server.url(), Some(server)),
            Err(e) => {
                eprintln!("no REDIS_URL, and no throwaway redis-server: {e}");
                return ExitCode::FAILURE;
            }
        },
    };

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
    let joined = async {
        for (worker, handle) in workers.into_iter().enumerate() {
            let turns = handle.await.unwrap_or(0);
            println!("worker {worker}: {turns} turns");
        }
    };
    tokio::select! {
        () = joined => {}
        // Returning drops the client, then the throwaway server, which stops it. If no
        // handler can be installed, `Err` fails this pattern and disables the branch.
        Ok(()) = tokio::signal::ctrl_c() => {
            eprintln!("interrupted");
            return ExitCode::FAILURE;
        }
    }
    println!("done");
    ExitCode::SUCCESS
}

/// Installs the Prometheus exporter as the process's recorder, serving `/metrics` on
/// `address`, with buckets for both histograms: without them the exporter renders
/// summaries, whose quantiles cannot be added up across replicas.
fn serve_metrics(address: SocketAddr) -> Result<(), BuildError> {
    PrometheusBuilder::new()
        .with_http_listener(address)
        .set_buckets_for_metric(
            Matcher::Full("rlock_acquire_wait_seconds".into()),
            &ACQUIRE_WAIT_BUCKETS,
        )?
        .set_buckets_for_metric(Matcher::Full("rlock_hold_seconds".into()), &HOLD_BUCKETS)?
        .install()
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

/// A `redis-server` on a free loopback port, keeping nothing on disk outside its own
/// temporary directory; dropping it kills the process and removes the directory.
struct ThrowawayRedis {
    port: u16,
    dir: PathBuf,
    process: Child,
}

impl ThrowawayRedis {
    /// Starts one and waits until it answers `PING` (at most 10 s).
    fn start() -> Result<ThrowawayRedis, String> {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("redis-rlock-metrics-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("temporary directory: {e}"))?;
        let log = File::create(dir.join("redis.log")).map_err(|e| format!("log file: {e}"))?;
        let process = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run redis-server: {e}"))?;
        // Owned from here on: a server that does not come up is stopped and cleaned away.
        let server = ThrowawayRedis { port, dir, process };
        let until = Instant::now() + Duration::from_secs(10);
        while !server.answers_ping() {
            if Instant::now() > until {
                return Err(format!("redis-server did not answer on port {port}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        println!("started a throwaway redis-server on 127.0.0.1:{port}");
        Ok(server)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn answers_ping(&self) -> bool {
        let ping = || -> std::io::Result<bool> {
            let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
            stream.set_read_timeout(Some(Duration::from_millis(300)))?;
            stream.write_all(b"PING\r\n")?;
            let mut reply = [0u8; 7];
            stream.read_exact(&mut reply)?;
            Ok(&reply == b"+PONG\r\n")
        };
        ping().unwrap_or(false)
    }
}

impl Drop for ThrowawayRedis {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
