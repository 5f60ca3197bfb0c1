//! A client's life in a service: what it leaves behind when it goes.

use std::time::{Duration, Instant};

use redis_rlock::{Client, LostReason};
use testkit::every_kind::{
    hold_everything, prepare, unix_ms, wait_on_everything, waiters_woke, GUARDS_HELD,
};
use testkit::RedisServer;

fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Waits up to `limit` for the runtime's alive tasks to come down to `at_most`.
async fn tasks_settle_to(at_most: usize, limit: Duration) -> usize {
    let started = Instant::now();
    loop {
        let alive = alive_tasks();
        if alive <= at_most || started.elapsed() > limit {
            return alive;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client built and dropped many times in one runtime, as a service that makes one per
/// request might, leaves no task behind: its connections' tasks, and its unlock
/// listener's once it has listened, end with it.
#[tokio::test]
async fn a_client_made_and_dropped_a_thousand_times_leaves_no_task_running() {
    let server = RedisServer::start();
    // One first, so that whatever a first client starts for good (nothing, today) is in
    // the baseline.
    drop(Client::connect(server.url()).await.unwrap());
    let baseline = tasks_settle_to(0, Duration::from_secs(2)).await;
    for round in 0..1_000 {
        let client = Client::connect(server.url()).await.unwrap();
        if round % 100 == 0 {
            // Now and then one that has listened for an unlock, so that its listener's
            // tasks exist.
            let lock = client.lock("lifecycle");
            let held = lock.lock().await.unwrap();
            let waiter = tokio::spawn({
                let lock = client.lock("lifecycle");
                async move { lock.try_lock_for(Duration::from_millis(50)).await }
            });
            assert!(waiter.await.unwrap().unwrap().is_none());
            held.unlock().await.unwrap();
        }
        drop(client);
    }
    let alive = tasks_settle_to(baseline, Duration::from_secs(5)).await;
    assert!(
        alive <= baseline,
        "{alive} tasks alive after 1,000 clients came and went, {baseline} before"
    );
}

/// Every key, field, list entry and set member that names the client `id`: what a client
/// leaves behind (unlock latches name none).
async fn traces_of(server: &RedisServer, id: &str) -> Vec<String> {
    let mut raw = server.raw().await;
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut raw)
        .await
        .unwrap();
    let mut traces = Vec::new();
    for key in keys {
        if key.contains(id) {
            traces.push(key.clone());
        }
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(&mut raw)
            .await
            .unwrap();
        let command = match kind.as_str() {
            "hash" => redis::cmd("HKEYS").arg(&key).clone(),
            "list" => redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).clone(),
            "zset" => redis::cmd("ZRANGE").arg(&key).arg(0).arg(-1).clone(),
            _ => continue,
        };
        // Bytes: an expirable permit's id is 16 raw bytes.
        let members: Vec<Vec<u8>> = command.query_async(&mut raw).await.unwrap();
        traces.extend(
            members
                .iter()
                .map(|member| String::from_utf8_lossy(member))
                .filter(|member| member.contains(id))
                .map(|member| format!("{key} {member}")),
        );
    }
    traces
}

/// A service told to stop mid-work: `shutdown` releases every lock, permit and queue place
/// through each kind's own script, so another client's waiters get in at once; the
/// guards learn why, and the client refuses everything afterwards, sending nothing.
#[tokio::test]
async fn shutdown_releases_every_kind_and_wakes_the_waiters_at_once() {
    let server = RedisServer::start();
    let other = testkit::client(&server).await;
    let holder = testkit::client(&server).await;
    let held_by_other = prepare(&other).await;
    let holdings = hold_everything(&holder).await;
    let raw = server.raw().await;
    testkit::fair::queue_len(&raw, "fair-queued").await;
    testkit::eventually(
        "the holder waits in the fair queue",
        Duration::from_secs(10),
        || holder.status().queued_waiters == 1,
    )
    .await;
    let waiters = wait_on_everything(&other).await;
    let lost = holdings.watchdog[0].lost();

    let report = holder.shutdown(Duration::from_secs(10)).await;
    let released_at = unix_ms();
    assert!(report.is_complete(), "{report:?}");
    assert_eq!(report.released, GUARDS_HELD, "{report:?}");
    waiters_woke(waiters, released_at).await;
    assert_eq!(
        testkit::bounded("the queued wait", holdings.queued)
            .await
            .unwrap()
            .unwrap_err()
            .to_string(),
        redis_rlock::Error::ShutDown.to_string()
    );
    assert_eq!(testkit::fair::queue_len(&raw, "fair-queued").await, (0, 0));
    let id = holder.id().to_string();
    assert_eq!(traces_of(&server, &id).await, Vec::<String>::new());

    // The guards know, and send nothing.
    assert_eq!(testkit::bounded("lost()", lost).await, LostReason::ShutDown);
    let [first, second] = holdings.watchdog;
    assert!(first.unlock().await.unwrap_err().is_shut_down());
    for guard in [
        second,
        holdings.fixed_lease,
        holdings.fair,
        holdings.read,
        holdings.write,
    ] {
        assert!(guard.is_lost());
        assert!(guard.unlock().await.unwrap_err().is_shut_down());
    }
    assert!(holdings.permits.release().await.unwrap_err().is_shut_down());
    assert!(holdings.permit.release().await.unwrap_err().is_shut_down());
    // And the client takes nothing more, nor answers.
    assert!(holder
        .lock("later")
        .try_lock()
        .await
        .unwrap_err()
        .is_shut_down());
    let refused = holder.lock("later").is_locked().await.unwrap_err();
    assert!(refused.is_shut_down(), "{refused:?}");
    assert!(holder
        .semaphore("permits")
        .try_acquire(1)
        .await
        .unwrap_err()
        .is_shut_down());
    assert!(!holder.status().watchdog_running);
    assert_eq!(holder.status().held_locks, 0);
    // A second shutdown has nothing left to do.
    assert_eq!(holder.shutdown(Duration::from_secs(1)).await.released, 0);
    held_by_other.unlock().await.unwrap();
}

/// The child process of [`a_process_that_shuts_down_and_exits_leaves_nothing_behind`]:
/// connects to the URL it is given, holds everything, prints its client id, and on a line
/// on stdin shuts down, prints when it was done, and returns.
#[tokio::test]
#[ignore = "the child process of a_process_that_shuts_down_and_exits_leaves_nothing_behind"]
async fn child_holding_everything_shuts_down() {
    let url = std::env::var(CHILD_URL).expect("run by the parent test, which sets the URL");
    let client = Client::connect(url).await.unwrap();
    let holdings = hold_everything(&client).await;
    testkit::eventually(
        "it waits in the fair queue",
        Duration::from_secs(10),
        || client.status().queued_waiters == 1,
    )
    .await;
    println!("HELD {}", client.id());
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let report = client.shutdown(Duration::from_secs(10)).await;
    println!("RELEASED {} {}", unix_ms(), report.released);
    assert!(report.is_complete(), "{report:?}");
    // Leaving `main` with the guards alive: they send nothing.
    drop(holdings);
}

/// The lines a child process prints, as they come.
fn lines_of(stdout: std::process::ChildStdout) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    use std::io::BufRead;
    let (lines, received) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line);
        }
    });
    received
}

/// What follows `prefix` on the child's next line that starts with it.
async fn next_line(
    lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>,
    prefix: &'static str,
) -> String {
    loop {
        let line = testkit::bounded(prefix, lines.recv()).await;
        let line = line.unwrap_or_else(|| panic!("the child ended before `{prefix}`"));
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.trim().to_string();
        }
    }
}

const CHILD_URL: &str = "RLOCK_TEST_SHUTDOWN_CHILD_URL";

/// A process that holds one of every kind and calls `shutdown` before it exits leaves
/// nothing behind: its locks, permits and queue place are gone at once (not after a
/// lease), and another process's waiters get in within 100 ms.
#[tokio::test]
async fn a_process_that_shuts_down_and_exits_leaves_nothing_behind() {
    use std::io::Write;
    let server = RedisServer::start();
    let other = testkit::client(&server).await;
    let held_by_other = prepare(&other).await;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            // Its name in this binary, where the file is a module.
            "lifecycle::child_holding_everything_shuts_down",
            "--nocapture",
        ])
        .env(CHILD_URL, server.url())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines_rx = lines_of(child.stdout.take().unwrap());
    let id = next_line(&mut lines_rx, "HELD").await;
    let raw = server.raw().await;
    let waiters = wait_on_everything(&other).await;

    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let released = next_line(&mut lines_rx, "RELEASED").await;
    let mut released = released.split(' ');
    let released_at: u128 = released.next().unwrap().parse().unwrap();
    assert_eq!(released.next().unwrap(), GUARDS_HELD.to_string());
    let exited = testkit::bounded(
        "the child's exit",
        tokio::task::spawn_blocking(move || child.wait()),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(exited.success(), "the child failed: {exited}");

    waiters_woke(waiters, released_at).await;
    assert_eq!(testkit::fair::queue_len(&raw, "fair-queued").await, (0, 0));
    assert_eq!(traces_of(&server, &id).await, Vec::<String>::new());
    held_by_other.unlock().await.unwrap();
}

/// `target/<profile>/examples/<name>`, which plain `cargo test` builds beside the tests.
fn example_binary(name: &str) -> std::path::PathBuf {
    let test_binary = std::env::current_exe().unwrap();
    let profile_dir = test_binary
        .parent()
        .and_then(std::path::Path::parent)
        .unwrap();
    let binary = profile_dir.join("examples").join(name);
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(format!("{name}.rs"));
    let modified = |path: &std::path::Path| std::fs::metadata(path).and_then(|m| m.modified());
    assert!(
        matches!((modified(&binary), modified(&source)), (Ok(built), Ok(written)) if built >= written),
        "{} is missing or older than its source: build it with `cargo build --example {name}` \
         (plain `cargo test` does)",
        binary.display()
    );
    binary
}

/// Sends SIGTERM to `child` and waits, bounded, for it to exit (`what` names the wait).
#[cfg(unix)]
async fn terminate(mut child: std::process::Child, what: &'static str) -> std::process::ExitStatus {
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    testkit::bounded(what, tokio::task::spawn_blocking(move || child.wait()))
        .await
        .unwrap()
        .unwrap()
}

/// The `worker` example, stopped by SIGTERM in the middle of its job, releases its lock
/// before it exits: the key is gone when the process is, well before its lease would end.
#[cfg(unix)]
#[tokio::test]
async fn the_worker_example_stopped_by_sigterm_frees_its_lock_at_once() {
    let server = RedisServer::start();
    let mut worker = std::process::Command::new(example_binary("worker"))
        .arg("60")
        .env("REDIS_URL", server.url())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines_rx = lines_of(worker.stdout.take().unwrap());
    next_line(&mut lines_rx, "took").await;
    let mut raw = server.raw().await;
    let lease_left: i64 = redis::cmd("PTTL")
        .arg("worker:nightly-report")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(lease_left > 0, "the worker holds its lock");
    let signalled = Instant::now();
    let exited = terminate(worker, "the worker's exit").await;
    let took = signalled.elapsed();
    assert!(exited.success(), "the worker failed: {exited}");
    let held: bool = redis::cmd("EXISTS")
        .arg("worker:nightly-report")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(!held, "the lock outlived the worker");
    assert!(
        took < Duration::from_millis(u64::try_from(lease_left).unwrap()),
        "the worker took {took:?} to exit, longer than the {lease_left} ms its lease had left: \
         this run cannot tell a release from an expiry"
    );
    next_line(&mut lines_rx, "stop requested").await;
}

/// The `job_consumer` example, stopped by SIGTERM while one consumer has its turn and the
/// others queue for theirs, leaves nothing of the fair lock behind: the turn is released and
/// every place in the queue left before the process exits (only the job list stays).
#[cfg(unix)]
#[tokio::test]
async fn the_job_consumer_example_stopped_by_sigterm_leaves_no_turn_or_queue_behind() {
    let server = RedisServer::start();
    let mut consumers = std::process::Command::new(example_binary("job_consumer"))
        // Jobs enough to last minutes, twenty milliseconds each: the signal finds the
        // consumers at work.
        .args(["4", "20000"])
        .env("REDIS_URL", server.url())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines_rx = lines_of(consumers.stdout.take().unwrap());
    let mut raw = server.raw().await;
    // Every consumer has had a turn, so each holds the lock or waits in its queue.
    let mut served = std::collections::HashSet::new();
    while served.len() < 4 {
        let line = next_line(&mut lines_rx, "consumer").await;
        served.insert(line.split(':').next().unwrap_or_default().to_string());
    }
    let queued: i64 = redis::cmd("LLEN")
        .arg("redisson_lock_queue:{job_consumer:turn}")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(
        queued > 0,
        "no consumer waits in the queue: the test would not see it left"
    );
    let exited = terminate(consumers, "the consumers' exit").await;
    assert!(exited.success(), "the consumers failed: {exited}");
    next_line(&mut lines_rx, "stop requested").await;
    let mut left: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut raw)
        .await
        .unwrap();
    left.sort();
    assert_eq!(
        left,
        ["job_consumer:jobs"],
        "the fair lock's hash, queue or deadlines outlived the consumers"
    );
}

/// Releases write no unlock latch (a retry knows its own earlier try by the owner's count),
/// so a client leaves none behind to delete or to expire: after nested and last releases,
/// kept or dropped, and the client's end, the lock's hash is all there was.
#[tokio::test]
async fn releases_write_no_unlock_latch_for_a_dropped_client_to_leave_behind() {
    let server = RedisServer::start();
    let client = testkit::client(&server).await;
    let lock = client.lock("latched");
    let outer = lock.lock().await.unwrap();
    lock.lock().await.unwrap().unlock().await.unwrap();
    outer.unlock().await.unwrap();
    let raw = server.raw().await;
    let latches = || {
        let mut raw = raw.clone();
        async move { testkit::keys_matching(&mut raw, "redisson_unlock_latch:*").await }
    };
    assert_eq!(latches().await, 0, "an unlock wrote a latch");
    // Released in the background, then the client goes.
    drop(lock.lock().await.unwrap());
    drop(client);
    let keys = || {
        let mut raw = raw.clone();
        async move { testkit::dbsize(&mut raw).await }
    };
    assert_eq!(
        testkit::settles_to(0, Duration::from_secs(2), keys).await,
        0,
        "the dropped guard's release left keys"
    );
    assert_eq!(latches().await, 0, "an unlock wrote a latch");
}

/// A shutdown whose caller stops waiting at once still runs to its end: the lock is freed
/// for another client, and the client is closed. A group's guard then says `ShutDown`;
/// a timeout too large for the clock is no panic.
#[tokio::test]
async fn a_shutdown_whose_caller_leaves_still_releases_and_closes() {
    let server = RedisServer::start();
    let (holder, other) = (
        testkit::client(&server).await,
        testkit::client(&server).await,
    );
    let held = holder.lock("left-behind").lock().await.unwrap();
    let both = redis_rlock::MultiLock::new(vec![holder.lock("pair:1"), holder.lock("pair:2")]);
    let pair = both.lock().await.unwrap();
    let lost = held.lost();
    // Polled once and dropped: on this one-thread runtime its work has not run yet.
    let gave_up = futures_util::FutureExt::now_or_never(holder.shutdown(Duration::MAX));
    assert!(
        gave_up.is_none(),
        "the shutdown ended within its first poll"
    );
    assert_eq!(testkit::bounded("lost()", lost).await, LostReason::ShutDown);
    let taken = other
        .lock("left-behind")
        .try_lock_for(Duration::from_secs(5))
        .await
        .unwrap();
    assert!(taken.is_some(), "the lock was not released");
    assert!(pair.unlock().await.unwrap_err().is_shut_down());
    // The first shutdown ends; a second one finds it over.
    assert_eq!(holder.shutdown(Duration::MAX).await.released, 0);
    let refused = holder.lock("left-behind").is_locked().await.unwrap_err();
    assert!(refused.is_shut_down(), "{refused:?}");
    drop(held);
}
