//! FencedLock shared with Redisson's `RFencedLock`: one counter
//! (`redisson_lock_token:{name}`), so one increasing token sequence across both languages,
//! step by step (re-entries and busy tries included) and under contention, where the tokens
//! follow the order in which holders got the lock.

use std::sync::Arc;
use std::time::Duration;

use redis_rlock::protocol::layout::Derived;
use redis_rlock_interop::{now_us, Kind, Redisson};
use testkit::RedisServer;

async fn counter(raw: &mut redis::aio::MultiplexedConnection, name: &str) -> Option<u64> {
    redis::cmd("GET")
        .arg(Derived::FencingToken.of(name))
        .query_async(raw)
        .await
        .expect("GET")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_and_rust_draw_one_increasing_token_sequence() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Redisson::start_default(server.url()).await;
    let rust = testkit::client(&server).await;
    let t1 = java.thread("t1");
    let name = "fenced:sequence";
    let lock = rust.fenced_lock(name);
    let mut tokens: Vec<u64> = Vec::new();

    // Java takes it and re-enters: two tokens; a busy Rust try draws none.
    tokens.push(t1.lock(Kind::Fenced, name).await.int() as u64);
    tokens.push(t1.lock(Kind::Fenced, name).await.int() as u64);
    let busy = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_lock().await.unwrap().is_none() })
    };
    assert!(busy.await.unwrap(), "Rust got a lock Java holds");
    assert_eq!(counter(&mut raw, name).await, tokens.last().copied());
    t1.unlock(Kind::Fenced, name).await.ok();
    t1.unlock(Kind::Fenced, name).await.ok();

    // Rust takes it and re-enters: the next two; a busy Java try draws none (null).
    let (outer, inner) = {
        let lock = lock.clone();
        tokio::spawn(async move {
            let outer = lock.lock().await.unwrap();
            let inner = lock.lock().await.unwrap();
            (outer, inner)
        })
        .await
        .unwrap()
    };
    tokens.push(outer.fencing_token().expect("a fenced guard"));
    tokens.push(inner.fencing_token().expect("a fenced guard"));
    assert_eq!(
        t1.try_lock(Kind::Fenced, name, Duration::ZERO)
            .await
            .opt_int(),
        None
    );
    assert_eq!(
        t1.token(name).await.map(|t| t as u64),
        tokens.last().copied()
    );
    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();

    // And back again, with every acquire method.
    let token = t1
        .try_lock(Kind::Fenced, name, Duration::from_secs(1))
        .await
        .opt_int()
        .expect("free");
    tokens.push(token as u64);
    t1.unlock(Kind::Fenced, name).await.ok();
    let guard = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(1)).await.unwrap() })
            .await
            .unwrap()
            .expect("free")
    };
    tokens.push(guard.fencing_token().unwrap());
    guard.unlock().await.unwrap();

    assert_eq!(tokens, (1..=6).collect::<Vec<u64>>(), "one sequence");
    assert_eq!(counter(&mut raw, name).await, Some(6));
    assert_eq!(t1.token(name).await, Some(6));
}

/// One hold: its token, when the holder had the lock (wall clock, after the acquire
/// returned) and when it began to release it.
#[derive(Debug)]
struct Hold {
    who: String,
    token: u64,
    acquired_us: i64,
    release_us: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contending_java_threads_and_rust_tasks_get_tokens_in_hold_order() {
    const EACH: usize = 15;
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let java = Arc::new(Redisson::start_default(server.url()).await);
    let rust = testkit::client(&server).await;
    let name = "fenced:contended";

    let mut runs = Vec::new();
    for thread in ["t1", "t2"] {
        let java = java.clone();
        runs.push(tokio::spawn(async move {
            let t = java.thread(thread);
            let mut holds = Vec::new();
            for _ in 0..EACH {
                let acquired = t
                    .start_lock(Kind::Fenced, name)
                    .await
                    .wait_for(Duration::from_secs(60))
                    .await;
                let acquired_us = acquired.end_us;
                let token = acquired.int() as u64;
                let released = t.unlock(Kind::Fenced, name).await;
                let release_us = released.start_us;
                released.ok();
                holds.push(Hold {
                    who: format!("java {thread}"),
                    token,
                    acquired_us,
                    release_us,
                });
            }
            holds
        }));
    }
    for task in ["r1", "r2"] {
        let lock = rust.fenced_lock(name);
        runs.push(tokio::spawn(async move {
            let mut holds = Vec::new();
            for _ in 0..EACH {
                let guard = lock.lock().await.unwrap();
                let acquired_us = now_us();
                let token = guard.fencing_token().unwrap();
                let release_us = now_us();
                guard.unlock().await.unwrap();
                holds.push(Hold {
                    who: format!("rust {task}"),
                    token,
                    acquired_us,
                    release_us,
                });
            }
            holds
        }));
    }
    let mut holds = Vec::new();
    for run in runs {
        let run = tokio::time::timeout(Duration::from_secs(120), run)
            .await
            .expect("a contender finished");
        holds.extend(run.unwrap());
    }

    holds.sort_by_key(|hold| hold.token);
    let tokens: Vec<u64> = holds.iter().map(|hold| hold.token).collect();
    assert_eq!(
        tokens,
        (1..=4 * EACH as u64).collect::<Vec<_>>(),
        "one sequence"
    );
    assert!(holds.iter().any(|h| h.who.starts_with("java")));
    assert!(holds.iter().any(|h| h.who.starts_with("rust")));
    // A greater token was drawn by a later holder: each had the lock only after the one
    // before it (by token) began to release it.
    for pair in holds.windows(2) {
        assert!(
            pair[1].acquired_us >= pair[0].release_us,
            "token {} ({}) held before token {} ({}) was released: {pair:?}",
            pair[1].token,
            pair[1].who,
            pair[0].token,
            pair[0].who
        );
    }
    assert_eq!(counter(&mut raw, name).await, Some(4 * EACH as u64));
}
