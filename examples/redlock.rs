//! A RedLock over five independent Redis masters: taken on all five, refused to a rival,
//! and still taken with two masters down.
//!
//! `cargo run --example redlock -- --start` starts five throw-away `redis-server`s on free
//! loopback ports (and stops them at the end); or point it at your own masters with
//! `REDIS_URLS=redis://host1:6379,redis://host2:6379,...` (the part that stops two masters
//! runs only with `--start`).

use std::net::TcpListener;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use redis_rlock::{Client, RedLock};

/// A `redis-server` this example started; killed when dropped.
struct Master {
    child: Option<Child>,
    url: String,
}

impl Master {
    fn start() -> std::io::Result<Master> {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Master {
            child: Some(child),
            url: format!("redis://127.0.0.1:{port}"),
        })
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Master {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Connects to `url`, giving a just-started server a few seconds to come up.
async fn connect(url: &str) -> redis_rlock::Result<Client> {
    let started = Instant::now();
    loop {
        match Client::connect(url).await {
            Ok(client) => return Ok(client),
            Err(e) if started.elapsed() > Duration::from_secs(5) => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let start = std::env::args().any(|arg| arg == "--start");
    let mut masters = Vec::new();
    let urls: Vec<String> = if start {
        for _ in 0..5 {
            match Master::start() {
                Ok(master) => masters.push(master),
                Err(e) => {
                    eprintln!("cannot start redis-server (is it on PATH?): {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        masters.iter().map(|m| m.url.clone()).collect()
    } else {
        match std::env::var("REDIS_URLS") {
            Ok(urls) => urls.split(',').map(str::to_string).collect(),
            Err(_) => {
                eprintln!("Run with `--start` to start five local masters, or set REDIS_URLS.");
                return ExitCode::FAILURE;
            }
        }
    };
    match run(&urls, &mut masters).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(urls: &[String], masters: &mut [Master]) -> redis_rlock::Result<()> {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for url in urls {
        ours.push(connect(url).await?);
        theirs.push(connect(url).await?);
    }
    let name = "redlock-example:payout";
    let redlock = RedLock::new(ours.iter().map(|c| c.lock(name)).collect());
    let rival = RedLock::new(theirs.iter().map(|c| c.lock(name)).collect());
    println!(
        "{} masters, quorum {}: {}",
        urls.len(),
        redlock.quorum(),
        urls.join(" ")
    );

    let asked = Instant::now();
    let guard = redlock.lock().await?;
    println!(
        "acquired after {:?}, as soon as {} masters said yes; valid for {:?} more (renewed \
         by the watchdog)",
        asked.elapsed(),
        guard.held_on(),
        guard
            .valid_until()
            .saturating_duration_since(std::time::Instant::now())
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    println!(
        "held on {} masters once the others answered",
        guard.held_on()
    );
    println!(
        "a rival group's try_lock: {}",
        match rival.try_lock().await? {
            Some(_) => "acquired (should not happen)",
            None => "refused",
        }
    );
    guard.unlock().await?;
    println!("released on every master");

    if masters.len() >= 5 {
        masters[0].stop();
        masters[3].stop();
        println!("stopped two masters");
        let asked = Instant::now();
        let guard = redlock.lock().await?;
        println!(
            "held on {} of {} masters after {:?}: still a majority",
            guard.held_on(),
            urls.len(),
            asked.elapsed()
        );
        guard.unlock().await?;
        println!("released; the two stopped masters could not confirm, the majority did");
    }
    Ok(())
}
