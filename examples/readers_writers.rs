//! Readers share a document, a writer has it alone: a `ReadWriteLock`.
//!
//! Three readers hold the read lock at once; a writer waits until the last of them leaves;
//! two more readers wait behind the writer and come in together the moment it is done.
//!
//! Run with `cargo run --example readers_writers` against the Redis at `REDIS_URL`
//! (default `redis://127.0.0.1:6379`).

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use redis_rlock::{Client, ReadWriteLock};

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
    let doc = client.read_write_lock("readers-writers:doc:7");
    let start = Instant::now();
    let at = move || format!("{:>5} ms", start.elapsed().as_millis());

    // Three readers at once: none waits for another. Each says when it is in.
    let (inside_tx, mut inside) = tokio::sync::mpsc::unbounded_channel();
    let mut readers = Vec::new();
    for i in 1..=3 {
        let (doc, at, inside) = (doc.clone(), at, inside_tx.clone());
        readers.push(tokio::spawn(async move {
            let guard = doc.read_lock().lock().await?;
            println!("{} reader {i}: reading", at());
            let _ = inside.send(());
            // Each reads for a while, the last one longest.
            tokio::time::sleep(Duration::from_millis(200 * i)).await;
            println!("{} reader {i}: done", at());
            guard.unlock().await
        }));
    }
    for _ in 0..3 {
        inside.recv().await.expect("a reader task");
    }
    println!("{} Redis hash: {:?}", at(), hash(url, &doc).await?);

    // The writer waits for the last reader; no reader gets in while it writes.
    let writer = {
        let (doc, at, inside) = (doc.clone(), at, inside_tx.clone());
        tokio::spawn(async move {
            println!("{} writer: waiting for the readers", at());
            let guard = doc.write_lock().lock().await?;
            println!("{} writer: writing, alone", at());
            let _ = inside.send(());
            tokio::time::sleep(Duration::from_millis(300)).await;
            println!("{} writer: done", at());
            guard.unlock().await
        })
    };
    for reader in readers {
        reader.await.expect("a reader task")?;
    }
    inside.recv().await.expect("the writer task");
    println!("{} Redis hash: {:?}", at(), hash(url, &doc).await?);

    // Two readers queue behind the writer; its unlock wakes both at once.
    let mut late = Vec::new();
    for i in 4..=5 {
        let (doc, at) = (doc.clone(), at);
        late.push(tokio::spawn(async move {
            println!("{} reader {i}: waiting for the writer", at());
            let guard = doc.read_lock().lock().await?;
            println!("{} reader {i}: reading", at());
            guard.unlock().await
        }));
    }
    writer.await.expect("the writer task")?;
    for reader in late {
        reader.await.expect("a reader task")?;
    }
    println!(
        "{} free again: {}",
        at(),
        !doc.read_lock().is_locked().await?
    );
    Ok(())
}

/// The lock's hash as raw Redis sees it: `mode` and one field per reader.
async fn hash(url: &str, doc: &ReadWriteLock) -> redis::RedisResult<HashMap<String, String>> {
    let mut raw = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    redis::cmd("HGETALL")
        .arg(doc.name())
        .query_async(&mut raw)
        .await
}
