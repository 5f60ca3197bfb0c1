//! `rlock deadlocks` and `show`'s registered waiters, with the waits made by other
//! processes (this test binary run again as a worker, see [`worker`]): a two-lock and a
//! three-lock cycle are found, on one Redis and on a cluster, and broken by the printed
//! fix; a healthy contended run has none.

use std::collections::BTreeSet;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::support::{rlock, Run};
use testkit::{RedisCluster, RedisSentinels, RedisServer};

/// The environment variable that makes [`worker`] a worker: `connect|client name|plan`.
const WORKER: &str = "RLOCK_DEADLOCK_WORKER";
/// How long a worker, or a reading of the registry, may take.
const LIMIT: Duration = Duration::from_secs(20);

/// Not a test when run by `cargo test`: the body of a worker process. `connect` is a URL,
/// `cluster=` and seed URLs joined by `,`, or `sentinel=<master name>=` and sentinel URLs
/// joined by `,`. The plan is `hold:NAME,wait:NAME` (hold one
/// lock, print `held <owner>`, wait for a line on stdin, then wait for the other for as
/// long as it takes) or `contend:NAME` (take and release the lock 20 times, holding it
/// 100 ms each, then print `done`).
#[test]
#[ignore = "a worker process of the deadlock tests, run by them"]
fn worker() {
    let Ok(spec) = std::env::var(WORKER) else {
        return;
    };
    let parts: Vec<String> = spec.splitn(3, '|').map(str::to_string).collect();
    let [connect, name, plan] = <[String; 3]>::try_from(parts).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let builder = if let Some(seeds) = connect.strip_prefix("cluster=") {
            redis_rlock::Client::cluster_builder(seeds.split(','))
        } else if let Some(rest) = connect.strip_prefix("sentinel=") {
            let (master, sentinels) = rest.split_once('=').unwrap();
            redis_rlock::Client::sentinel_builder(sentinels.split(','), master)
        } else {
            redis_rlock::Client::builder(connect.as_str())
        };
        let client = builder
            .wait_registry(true)
            .client_name(name.as_str())
            .build()
            .await
            .unwrap();
        // In a task, so that both locks have one owner: the task.
        let work = tokio::spawn(async move {
            if let Some(lock) = plan.strip_prefix("contend:") {
                for _ in 0..20 {
                    let guard = client.lock(lock).lock().await.unwrap();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    guard.unlock().await.unwrap();
                }
                println!("done");
                return;
            }
            let (hold, wait) = plan
                .strip_prefix("hold:")
                .and_then(|rest| rest.split_once(",wait:"))
                .unwrap();
            let held = client.lock(hold).lock().await.unwrap();
            println!("held {}", held.owner());
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            let _also = client.lock(wait).lock().await.unwrap();
            println!("acquired");
            std::future::pending::<()>().await;
        });
        work.await.unwrap();
    });
}

/// A worker process, killed when dropped.
struct Worker {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Worker {
    fn start(connect: &str, name: &str, plan: &str) -> Worker {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["deadlocks::worker", "--exact", "--ignored", "--nocapture"])
            .env(WORKER, format!("{connect}|{name}|{plan}"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Worker { child, lines }
    }

    /// The rest of the first line the worker prints that starts with `word`.
    async fn says(&mut self, word: &str) -> String {
        let read = async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                if let Some(rest) = line.strip_prefix(word) {
                    return rest.trim().to_string();
                }
            }
            panic!("the worker ended before it said `{word}`");
        };
        tokio::time::timeout(LIMIT, read).await.unwrap()
    }

    async fn go(&mut self) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").await.unwrap();
        stdin.flush().await.unwrap();
    }
}

/// Starts one worker per `(client name, hold, wait)`, each holding its lock before any
/// waits; returns them with their owner fields.
async fn cycle_of(connect: &str, plans: &[(&str, &str, &str)]) -> (Vec<Worker>, Vec<String>) {
    let mut workers = Vec::new();
    let mut owners = Vec::new();
    for (name, hold, wait) in plans {
        let mut worker = Worker::start(connect, name, &format!("hold:{hold},wait:{wait}"));
        owners.push(worker.says("held").await);
        workers.push(worker);
    }
    for worker in &mut workers {
        worker.go().await;
    }
    (workers, owners)
}

/// Runs `rlock deadlocks --json` until it finds `cycles` cycles, for at most [`LIMIT`].
async fn deadlocks_until(connect: &[&str], cycles: usize) -> Run {
    let started = Instant::now();
    loop {
        let run = rlock(&[connect, &["deadlocks", "--json"]].concat()).await;
        let found = run.json()["deadlocks"].as_array().map_or(0, Vec::len);
        if found == cycles || started.elapsed() > LIMIT {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The owners of a reported cycle, and the client names beside them.
fn cycle_owners(deadlock: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let steps = deadlock["steps"].as_array().unwrap();
    let owners = steps
        .iter()
        .map(|s| s["owner"].as_str().unwrap().to_string());
    let clients = steps
        .iter()
        .map(|s| s["client"].as_str().unwrap().to_string());
    (owners.collect(), clients.collect())
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn a_two_lock_and_a_three_lock_cycle_across_processes_are_found_and_broken() {
    let server = RedisServer::start();
    let url = server.url();
    let connect = ["--url", url.as_str()];
    let (_two, two_owners) = cycle_of(&url, &[("svc-a", "x", "y"), ("svc-b", "y", "x")]).await;
    let (_three, three_owners) = cycle_of(
        &url,
        &[
            ("svc-c", "p", "q"),
            ("svc-d", "q", "r"),
            ("svc-e", "r", "p"),
        ],
    )
    .await;

    let run = deadlocks_until(&connect, 2).await;
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    let found: Vec<_> = report["deadlocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(cycle_owners)
        .collect();
    let two: BTreeSet<String> = two_owners.into_iter().collect();
    let three: BTreeSet<String> = three_owners.into_iter().collect();
    assert!(
        found.contains(&(two, set(&["svc-a", "svc-b"]))),
        "{report:#}"
    );
    assert!(
        found.contains(&(three, set(&["svc-c", "svc-d", "svc-e"]))),
        "{report:#}"
    );
    for deadlock in report["deadlocks"].as_array().unwrap() {
        for step in deadlock["steps"].as_array().unwrap() {
            let waited = step["waited_ms"].as_i64().unwrap();
            assert!((0..60_000).contains(&waited), "{step}");
        }
    }

    // The table says the same, with the fix.
    let text = rlock(&[&connect[..], &["deadlocks"]].concat()).await;
    assert_eq!(text.code, 1, "{text:?}");
    assert!(text.stdout.contains("deadlock 1: "), "{}", text.stdout);
    assert!(
        text.stdout.contains("svc-a") && text.stdout.contains("svc-e"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("unlock --yes -- "), "{}", text.stdout);

    // `show` lists a lock's registered waiter, with its client.
    let shown = rlock(&[&connect[..], &["show", "y", "--json"]].concat()).await;
    let waiters = shown.json()["registered_waiters"].clone();
    assert_eq!(waiters.as_array().unwrap().len(), 1, "{waiters:#}");
    assert_eq!(waiters[0]["client"], "svc-a");

    // The printed fix breaks the two-lock cycle: its waiter gets the lock.
    let two_lock = report["deadlocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["steps"].as_array().unwrap().len() == 2)
        .unwrap()
        .clone();
    let fix = two_lock["fix"].as_str().unwrap();
    let words: Vec<&str> = fix.split(' ').skip(1).collect();
    let unlocked = rlock(&words).await;
    assert_eq!(unlocked.code, 0, "{fix}: {unlocked:?}");
    let run = deadlocks_until(&connect, 1).await;
    let left: Vec<_> = run.json()["deadlocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| cycle_owners(d).1)
        .collect();
    assert_eq!(left, vec![set(&["svc-c", "svc-d", "svc-e"])]);
}

#[tokio::test]
async fn a_healthy_contended_run_has_no_deadlock() {
    let server = RedisServer::start();
    let url = server.url();
    let connect = ["--url", url.as_str()];
    let mut workers: Vec<Worker> = (0..4)
        .map(|i| Worker::start(&url, &format!("busy-{i}"), "contend:hot"))
        .collect();
    let mut waits_seen = 0;
    for _ in 0..5 {
        let run = rlock(&[&connect[..], &["deadlocks", "--json"]].concat()).await;
        assert_eq!(run.code, 0, "{run:?}");
        let report = run.json();
        assert_eq!(report["deadlocks"], Value::Array(Vec::new()), "{report:#}");
        waits_seen = waits_seen.max(report["waits_examined"].as_u64().unwrap());
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    // Three of four always wait: the registry was read, and found them.
    assert!(waits_seen >= 1, "no registered wait was ever seen");
    for worker in &mut workers {
        worker.says("done").await;
    }
}

#[tokio::test]
async fn a_cycle_across_cluster_masters_is_found() {
    let cluster = tokio::task::spawn_blocking(|| RedisCluster::start_with(3, 0))
        .await
        .unwrap();
    let seeds = cluster.seeds();
    // Two locks on two different masters.
    let first = "m:0";
    let second = (1..)
        .map(|n| format!("m:{n}"))
        .find(|name| cluster.master_of_key(name).port() != cluster.master_of_key(first).port())
        .unwrap();
    let connect = format!("cluster={}", seeds.join(","));
    let (_workers, owners) = cycle_of(
        &connect,
        &[("east", first, &second), ("west", &second, first)],
    )
    .await;
    let run = deadlocks_until(&["--cluster", &seeds[0]], 1).await;
    assert_eq!(run.code, 1, "{run:?}");
    let report = run.json();
    let (found, clients) = cycle_owners(&report["deadlocks"][0]);
    assert_eq!(found, owners.into_iter().collect::<BTreeSet<_>>());
    assert_eq!(clients, set(&["east", "west"]));
    let nodes: BTreeSet<&str> = report["deadlocks"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["node"].as_str().unwrap())
        .collect();
    assert_eq!(
        nodes.len(),
        2,
        "the two locks are on two masters: {report:#}"
    );
}

#[tokio::test]
async fn a_cycle_on_the_master_sentinel_names_is_found() {
    let group = tokio::task::spawn_blocking(|| RedisSentinels::start("deadlocks"))
        .await
        .unwrap();
    let sentinels = group.sentinel_urls();
    let connect = format!("sentinel={}={}", group.master_name(), sentinels.join(","));
    let (_workers, owners) = cycle_of(
        &connect,
        &[("north", "s:1", "s:2"), ("south", "s:2", "s:1")],
    )
    .await;
    let run = deadlocks_until(
        &["--sentinel", &sentinels[0], "--master", group.master_name()],
        1,
    )
    .await;
    assert_eq!(run.code, 1, "{run:?}");
    let (found, clients) = cycle_owners(&run.json()["deadlocks"][0]);
    assert_eq!(found, owners.into_iter().collect::<BTreeSet<_>>());
    assert_eq!(clients, set(&["north", "south"]));
}
