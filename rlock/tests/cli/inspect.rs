//! `list`, `show`, `leaks` and `watch` on one server, with locks made by the library and
//! by raw Redisson-layout commands (as a Java client leaves them).

use std::time::Duration;

use crate::support::{java_lock, listed, lock, rlock, JAVA_CLIENT};
use testkit::fair::{fair_clients, queue_up};
use testkit::RedisServer;

#[tokio::test]
async fn list_and_show_every_kind_with_holders_ttls_queues_and_tokens() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    let [client, waiter_a, waiter_b] = fair_clients::<3>(&server, Duration::from_secs(5)).await;

    // A reentrant lock held twice by the test's task.
    let reentrant = client.lock("orders:1001");
    let outer = reentrant.lock().await.unwrap();
    let inner = reentrant.lock().await.unwrap();
    // A fair lock held, with two waiters queued behind it, in this order.
    let fair_guard = client.fair_lock("jobs").lock().await.unwrap();
    let first = queue_up(
        &waiter_a,
        &raw,
        "jobs",
        |lock| async move { lock.lock().await },
    )
    .await;
    let second = queue_up(
        &waiter_b,
        &raw,
        "jobs",
        |lock| async move { lock.lock().await },
    )
    .await;
    // A fenced lock.
    let fenced_guard = client.fenced_lock("ledger").lock().await.unwrap();
    let token = fenced_guard.fencing_token().unwrap();
    // A Java client's lock, thread 77, re-entered 3 times, 20 s lease.
    java_lock(&mut raw, "java:lock", 77, 3, Some(20_000)).await;
    // A hash of other data: never a lock.
    let _: () = redis::cmd("HSET")
        .arg("user:1")
        .arg("name")
        .arg("alice")
        .query_async(&mut raw)
        .await
        .unwrap();

    let run = rlock(&["--url", &url, "list", "--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let listing = run.json();
    assert_eq!(listing["scan"]["complete"], true);
    assert!(
        !listed(&listing, "user:1"),
        "a non-lock hash is listed: {listing:#}"
    );

    let orders = lock(&listing, "orders:1001");
    assert_eq!(orders["kind"], "reentrant");
    assert_eq!(orders["holders"][0]["client_id"], client.id().to_string());
    assert_eq!(orders["holders"][0]["count"], 2);
    let pttl = orders["pttl_ms"].as_i64().unwrap();
    assert!((1..=30_000).contains(&pttl), "{orders}");

    let jobs = lock(&listing, "jobs");
    assert_eq!(jobs["kind"], "fair");
    assert_eq!(jobs["queue_length"], 2);
    assert_eq!(jobs["stale_waiters"], 0);
    assert_eq!(jobs["holders"].as_array().unwrap().len(), 1);

    let ledger = lock(&listing, "ledger");
    assert_eq!(ledger["kind"], "fenced");
    assert_eq!(ledger["fencing_token"], token);

    let java = lock(&listing, "java:lock");
    assert_eq!(java["kind"], "reentrant");
    assert_eq!(java["holders"][0]["client_id"], JAVA_CLIENT);
    assert_eq!(java["holders"][0]["task_id"], "77");
    assert_eq!(java["holders"][0]["count"], 3);
    assert_eq!(listing["total"], 4);

    // The table names every lock, and no other key.
    let table = rlock(&["--url", &url, "list"]).await;
    assert_eq!(table.code, 0, "{table:?}");
    for name in [
        "orders:1001",
        "jobs",
        "ledger",
        "java:lock",
        "KIND",
        "HOLDERS",
    ] {
        assert!(
            table.stdout.contains(name),
            "{name} missing:\n{}",
            table.stdout
        );
    }
    assert!(!table.stdout.contains("user:1"));
    // Shown with `cargo test -- --nocapture`: what an operator sees.
    println!("$ rlock list\n{}", table.stdout);
    // A pattern narrows the list, derived keys included.
    let narrowed = rlock(&["--url", &url, "list", "--pattern", "jo*", "--json"])
        .await
        .json();
    assert_eq!(narrowed["total"], 1, "{narrowed:#}");
    assert!(listed(&narrowed, "jobs"));

    // `show` lists the queue in order, with deadlines ahead of the server clock and each
    // waiter subscribed to its own channel.
    let run = rlock(&["--url", &url, "show", "jobs", "--json"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let shown = run.json();
    let now = shown["server_time_ms"].as_i64().unwrap();
    let queue = shown["queue"].as_array().unwrap();
    let owners: Vec<&str> = queue.iter().map(|w| w["owner"].as_str().unwrap()).collect();
    assert_eq!(owners, [first.owner.as_str(), second.owner.as_str()]);
    for (i, waiter) in queue.iter().enumerate() {
        assert_eq!(waiter["position"], i + 1);
        let deadline = waiter["deadline_ms"].as_i64().unwrap();
        assert!(deadline > now, "{waiter}");
        assert_eq!(waiter["remaining_ms"].as_i64().unwrap(), deadline - now);
        assert_eq!(waiter["subscribers"], 1, "{waiter}");
    }
    assert_eq!(
        shown["subscribers"][0]["channel"],
        "redisson_lock__channel:{jobs}"
    );
    let text = rlock(&["--url", &url, "show", "jobs"]).await;
    assert!(text.stdout.contains(&first.owner), "{}", text.stdout);
    assert!(text.stdout.find(&first.owner) < text.stdout.find(&second.owner));
    println!("$ rlock show jobs\n{}", text.stdout);

    // The reentrant lock: its holder and count, and one waiter's subscription once a
    // second client waits.
    let waiting = tokio::spawn({
        let lock = waiter_a.lock("orders:1001");
        async move { lock.lock().await.map(drop) }
    });
    let subscribed = testkit::settles_to(true, Duration::from_secs(5), || {
        let url = url.clone();
        async move {
            let shown = rlock(&["--url", &url, "show", "orders:1001", "--json"])
                .await
                .json();
            shown["subscribers"][0]["total"] == 1
        }
    })
    .await;
    assert!(subscribed, "the waiter's subscription is never counted");
    let text = rlock(&["--url", &url, "show", "orders:1001"]).await;
    assert!(
        text.stdout.contains(&client.id().to_string()),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("redisson_lock__channel:{orders:1001}"));

    // No such lock; not a lock.
    let missing = rlock(&["--url", &url, "show", "nothing-here"]).await;
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(missing.stderr.contains("no lock named"), "{missing:?}");
    let other = rlock(&["--url", &url, "show", "user:1"]).await;
    assert_eq!(other.code, 1, "{other:?}");
    assert!(other.stderr.contains("not a lock"), "{other:?}");

    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    waiting.await.unwrap().unwrap();
    fair_guard.unlock().await.unwrap();
    first
        .finish_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    second
        .finish_within(Duration::from_secs(5))
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    fenced_guard.unlock().await.unwrap();
}

#[tokio::test]
async fn leaks_name_each_problem_and_the_fix_and_the_fixes_work() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    let cmd = |args: &[&str]| {
        let mut cmd = redis::cmd(args[0]);
        for arg in &args[1..] {
            cmd.arg(*arg);
        }
        cmd
    };

    // Healthy: a lock with a lease.
    java_lock(&mut raw, "healthy", 1, 1, Some(30_000)).await;
    // A Java client's lock without TTL.
    java_lock(&mut raw, "forever", 5, 1, None).await;
    // A free fair lock whose two waiters died long ago (deadlines in 1970).
    let owner = |n: u32| format!("{JAVA_CLIENT}:{n}");
    let _: () = cmd(&[
        "RPUSH",
        "redisson_lock_queue:{dead-queue}",
        &owner(1),
        &owner(2),
    ])
    .query_async(&mut raw)
    .await
    .unwrap();
    let _: () = cmd(&[
        "ZADD",
        "redisson_lock_timeout:{dead-queue}",
        "1000",
        &owner(1),
        "2000",
        &owner(2),
    ])
    .query_async(&mut raw)
    .await
    .unwrap();
    // An unlock latch without TTL, and one with the usual short one.
    let stale_latch = "redisson_unlock_latch:{healthy}:0123456789abcdef0123456789abcdef";
    let _: () = cmd(&["SET", stale_latch, "1"])
        .query_async(&mut raw)
        .await
        .unwrap();
    let fresh_latch = "redisson_unlock_latch:{healthy}:fedcba9876543210fedcba9876543210";
    let _: () = cmd(&["SET", fresh_latch, "1", "PX", "20000"])
        .query_async(&mut raw)
        .await
        .unwrap();
    // Not a lock, without TTL: not a leak.
    let _: () = cmd(&["HSET", "settings", "color", "blue"])
        .query_async(&mut raw)
        .await
        .unwrap();

    let run = rlock(&["--url", &url, "leaks", "--json"]).await;
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    let leaks = report["leaks"].as_array().unwrap();
    let problems: Vec<(&str, &str)> = leaks
        .iter()
        .map(|l| (l["problem"].as_str().unwrap(), l["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        problems,
        [
            ("dead_queue", "dead-queue"),
            ("no_ttl", "forever"),
            ("stale_latch", "healthy")
        ],
        "{report:#}"
    );
    let fix = |problem: &str| {
        leaks.iter().find(|l| l["problem"] == problem).unwrap()["fix"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        fix("no_ttl"),
        format!("rlock --url {url} unlock --yes -- forever")
    );
    assert_eq!(
        fix("dead_queue"),
        format!("rlock --url {url} unlock --yes -- dead-queue")
    );
    assert_eq!(
        fix("stale_latch"),
        format!(
            "redis-cli -h 127.0.0.1 -p {} DEL '{stale_latch}'",
            server.port()
        )
    );
    let text = rlock(&["--url", &url, "leaks"]).await;
    assert_eq!(text.code, 1);
    assert!(text.stdout.contains("fix:  rlock"), "{}", text.stdout);

    // The suggested commands fix every one.
    for problem in ["no_ttl", "dead_queue"] {
        let command = fix(problem);
        let words: Vec<&str> = command.split(' ').skip(1).collect();
        let fixed = rlock(&words).await;
        assert_eq!(fixed.code, 0, "{command}: {fixed:?}");
    }
    server.cli(&["DEL", stale_latch]);
    let after = rlock(&["--url", &url, "leaks", "--json"]).await;
    assert_eq!(after.code, 0, "{after:?}");
    assert_eq!(after.json()["leaks"].as_array().unwrap().len(), 0);
    // The other keys are untouched.
    assert_eq!(server.cli(&["HGET", "settings", "color"]), "blue");
    assert_eq!(server.cli(&["EXISTS", "healthy"]), "1");
    assert_eq!(
        server.cli(&["EXISTS", "redisson_lock_queue:{dead-queue}"]),
        "0"
    );
}

#[tokio::test]
async fn watch_refreshes_until_its_iterations_and_scans_stop_at_their_bound() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    for n in 0..40 {
        java_lock(&mut raw, &format!("bulk:{n}"), n, 1, Some(60_000)).await;
    }

    let run = rlock(&[
        "--url",
        &url,
        "watch",
        "--interval",
        "100ms",
        "--iterations",
        "3",
        "--json",
    ])
    .await;
    assert_eq!(run.code, 0, "{run:?}");
    let frames: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(frames.len(), 3, "{}", run.stdout);
    for (i, frame) in frames.iter().enumerate() {
        assert_eq!(frame["refresh"], i + 1);
        assert_eq!(frame["locks"]["total"], 40);
    }
    let one = rlock(&[
        "--url",
        &url,
        "watch",
        "bulk:7",
        "--interval",
        "100ms",
        "--iterations",
        "2",
    ])
    .await;
    assert_eq!(one.code, 0, "{one:?}");
    assert_eq!(one.stdout.matches("refresh").count(), 2, "{}", one.stdout);
    assert!(one.stdout.contains("bulk:7"));

    // A limit on the locks printed, and on the keys a scan walks.
    let limited = rlock(&["--url", &url, "list", "--limit", "5", "--json"])
        .await
        .json();
    assert_eq!(limited["locks"].as_array().unwrap().len(), 5);
    assert_eq!(
        (limited["total"].as_u64(), limited["truncated"].as_bool()),
        (Some(40), Some(true))
    );
    let bounded = rlock(&[
        "--url",
        &url,
        "list",
        "--scan-count",
        "5",
        "--scan-limit",
        "10",
        "--json",
    ])
    .await;
    assert_eq!(bounded.code, 0, "{bounded:?}");
    let bounded = bounded.json();
    assert_eq!(bounded["scan"]["complete"], false, "{bounded:#}");
    assert!(bounded["total"].as_u64().unwrap() < 40);
    let text = rlock(&[
        "--url",
        &url,
        "list",
        "--scan-count",
        "5",
        "--scan-limit",
        "10",
    ])
    .await;
    assert!(text.stdout.contains("may be incomplete"), "{}", text.stdout);
}

/// `show` on a semaphore, an expirable semaphore and a latch made by the library: the
/// number in Redis, the taken permits with the ids their holders see, and who waits.
#[tokio::test]
async fn show_gives_semaphores_and_latches() {
    let server = RedisServer::start();
    let url = server.url();
    let client = testkit::client(&server).await;

    let pool = client.semaphore("db:pool");
    assert!(pool.try_set_permits(3).await.unwrap());
    let taken = pool.acquire(1).await.unwrap();
    let shown = rlock(&["--url", &url, "show", "db:pool", "--json"]).await;
    assert_eq!(shown.code, 0, "{shown:?}");
    let shown = shown.json();
    assert_eq!(shown["value"], 2, "{shown}");
    assert_eq!(shown["pttl_ms"], -1);
    assert_eq!(shown["permits"].as_array().unwrap().len(), 0);
    taken.release().await.unwrap();

    let gpu = client.permit_expirable_semaphore("gpu");
    assert!(gpu.try_set_permits(2).await.unwrap());
    let permit = gpu.acquire(Duration::from_secs(60)).await.unwrap();
    let shown = rlock(&["--url", &url, "show", "gpu", "--json"])
        .await
        .json();
    assert_eq!(shown["value"], 1, "{shown}");
    assert_eq!(shown["permits"][0]["id"], permit.id(), "{shown}");
    let remaining = shown["permits"][0]["remaining_ms"].as_i64().unwrap();
    assert!((50_000..=60_000).contains(&remaining), "{remaining}");
    let text = rlock(&["--url", &url, "show", "gpu"]).await;
    assert!(
        text.stdout.contains("permit-expirable semaphore"),
        "{text:?}"
    );
    assert!(text.stdout.contains(permit.id()), "{text:?}");
    permit.release().await.unwrap();

    // A latch with a waiter: the latch channel has a listener.
    let batch = client.count_down_latch("batch:42");
    assert!(batch.try_set_count(2).await.unwrap());
    let waiter = {
        let latch = client.count_down_latch("batch:42");
        tokio::spawn(async move { latch.wait().await })
    };
    let channel = "redisson_countdownlatch__channel__{batch:42}";
    let listened = testkit::settles_to(1, Duration::from_secs(5), || async {
        let shown = rlock(&["--url", &url, "show", "batch:42", "--json"])
            .await
            .json();
        shown["subscribers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["channel"] == channel)
            .map_or(0, |c| c["total"].as_i64().unwrap())
    })
    .await;
    assert_eq!(listened, 1);
    batch.count_down().await.unwrap();
    batch.count_down().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    // Not a number: still not a lock nor a synchronizer.
    server.cli(&["SET", "note", "hello"]);
    let run = rlock(&["--url", &url, "show", "note"]).await;
    assert_eq!(run.code, 1, "{run:?}");
}

/// `list` shows the semaphores and latches it can tell from other data: an expirable
/// semaphore by its taken permits, and a semaphore with a waiter by its channel. A plain
/// semaphore nobody waits on is a bare number, and is not listed.
#[tokio::test]
async fn list_shows_expirable_semaphores_and_synchronizers_with_waiters() {
    let server = RedisServer::start();
    let url = server.url();
    let client = testkit::client(&server).await;

    let gpu = client.permit_expirable_semaphore("gpu");
    assert!(gpu.try_set_permits(1).await.unwrap());
    let permit = gpu.acquire(Duration::from_secs(60)).await.unwrap();
    let idle = client.semaphore("idle");
    assert!(idle.try_set_permits(5).await.unwrap());
    let busy = client.semaphore("busy");
    assert!(busy.try_set_permits(0).await.unwrap());
    let waiter = {
        let busy = busy.clone();
        tokio::spawn(async move { busy.acquire(1).await })
    };
    let named = |listing: &serde_json::Value| -> Vec<String> {
        listing["synchronizers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_string())
            .collect()
    };
    let names = testkit::settles_to(2, Duration::from_secs(5), || async {
        named(&rlock(&["--url", &url, "list", "--json"]).await.json()).len()
    })
    .await;
    assert_eq!(names, 2);
    let listing = rlock(&["--url", &url, "list", "--json"]).await.json();
    assert_eq!(named(&listing), ["busy", "gpu"], "{listing}");
    assert_eq!(listing["synchronizers"][1]["permits"][0]["id"], permit.id());
    assert_eq!(listing["synchronizers"][0]["value"], 0);
    let text = rlock(&["--url", &url, "list"]).await;
    assert!(text.stdout.contains("expirable semaphore"), "{text:?}");
    assert!(text.stdout.contains("redisson_sc:{busy} (1)"), "{text:?}");

    busy.release(1).await.unwrap();
    let guard = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    guard.release().await.unwrap();
    permit.release().await.unwrap();
}
