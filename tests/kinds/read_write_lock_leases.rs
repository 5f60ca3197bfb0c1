//! The read-write lock's leases: the watchdog renewing read holds (their timeout keys and
//! the hash, never shortening another holder's lease) and write holds, beside a plain
//! lock's renewals, read raw past the lease; a dead reader that stops counting once its lease runs out; a killed writer's lock
//! expiring and a frozen writer's lost, with a waiter getting the lock either way; waits
//! cancelled at any point leaving nothing behind; a restarted server reported lost for
//! both sides; and a Redis Cluster in both pub/sub modes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, LostReason, PubSubMode};
use testkit::{
    client, client_with_watchdog, eventually, key_exists, keys_but_latches, pttl, settles_to,
};
use testkit::{RedisCluster, RedisServer, Waiting};

/// Bound on anything that should take milliseconds, on a loaded 2-core machine.
const GENEROUS: Duration = Duration::from_secs(10);
/// A short watchdog lease, renewed every 500 ms, so that renewals show within seconds.
const SHORT_WATCHDOG: Duration = Duration::from_millis(1500);

fn timeout_key(name: &str, owner: &str, n: u32) -> String {
    format!("{{{name}}}:{owner}:rwlock_timeout:{n}")
}

/// Waits until no lock key is left (a release from `Drop` runs in the background).
async fn nothing_left(raw: &MultiplexedConnection) {
    let left = settles_to(Vec::new(), GENEROUS, || keys_but_latches(raw)).await;
    assert_eq!(left, Vec::<String>::new(), "left behind");
}

/// Samples the PTTLs of `keys` every 50 ms for `span`; fails if one is ever gone or has
/// no lease, and returns how many times each went up (a renewal).
async fn renewals_of(raw: &MultiplexedConnection, keys: &[String], span: Duration) -> Vec<usize> {
    let mut raw = raw.clone();
    let mut last = Vec::new();
    for key in keys {
        last.push(pttl(&mut raw, key).await);
    }
    let mut renewals = vec![0; keys.len()];
    let end = Instant::now() + span;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
        for (i, key) in keys.iter().enumerate() {
            let now = pttl(&mut raw, key).await;
            assert!(now > 0, "{key} lost its lease: PTTL {now}");
            if now > last[i] {
                renewals[i] += 1;
            }
            last[i] = now;
        }
    }
    renewals
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_read_holds_with_their_timeout_keys_past_the_lease() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let client = client_with_watchdog(&server, SHORT_WATCHDOG).await;
    let name = "doc:renewed-reads";
    let read = client.read_write_lock(name).read_lock();
    let (outer, inner) = {
        let read = read.clone();
        tokio::spawn(async move { (read.lock().await.unwrap(), read.lock().await.unwrap()) })
            .await
            .unwrap()
    };
    // A reader with a fixed lease longer than the watchdog's: renewals of the others must
    // not cut it short.
    let fixed = {
        let read = read.clone();
        tokio::spawn(async move { read.lock_with_lease(Duration::from_secs(8)).await.unwrap() })
            .await
            .unwrap()
    };
    // A plain lock of the same client: its renewals go in the same rounds, by their own
    // script.
    let plain = client.lock("plain:beside").lock().await.unwrap();
    let owner = outer.owner().to_string();
    // The hash's own TTL does not go up: the fixed lease keeps it above the watchdog's.
    let keys = [
        timeout_key(name, &owner, 1),
        timeout_key(name, &owner, 2),
        "plain:beside".to_string(),
    ];
    // Three leases: without renewals the keys would be gone twice over.
    let renewals = renewals_of(&raw, &keys, SHORT_WATCHDOG * 3).await;
    for (key, count) in keys.iter().zip(&renewals) {
        assert!(*count >= 4, "{key}: {count} renewals in three leases");
    }
    assert!(!plain.is_lost());
    let mut conn = raw.clone();
    let hash_ttl = pttl(&mut conn, name).await;
    let fixed_ttl = pttl(&mut conn, &timeout_key(name, fixed.owner(), 1)).await;
    assert!(
        hash_ttl >= fixed_ttl,
        "the hash ({hash_ttl} ms) outlives every read hold ({fixed_ttl} ms)"
    );
    assert!(!outer.is_lost() && !inner.is_lost() && !fixed.is_lost());
    assert!(client
        .read_write_lock(name)
        .write_lock()
        .try_lock()
        .await
        .unwrap()
        .is_none());

    inner.unlock().await.unwrap();
    outer.unlock().await.unwrap();
    fixed.unlock().await.unwrap();
    plain.unlock().await.unwrap();
    nothing_left(&raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_renews_write_holds_and_the_writers_reads() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let client = client_with_watchdog(&server, SHORT_WATCHDOG).await;
    let name = "doc:renewed-write";
    let rw = client.read_write_lock(name);
    let writing = rw.write_lock().lock().await.unwrap();
    let reading = rw.read_lock().lock().await.unwrap();
    let keys = vec![name.to_string(), timeout_key(name, reading.owner(), 1)];
    let renewals = renewals_of(&raw, &keys, SHORT_WATCHDOG * 3).await;
    for (key, count) in keys.iter().zip(&renewals) {
        assert!(*count >= 4, "{key}: {count} renewals in three leases");
    }
    assert!(!writing.is_lost() && !reading.is_lost());

    writing.unlock().await.unwrap();
    // Held for reading now, and still renewed.
    let renewals = renewals_of(&raw, &keys, SHORT_WATCHDOG * 2).await;
    assert!(renewals.iter().all(|&count| count >= 2), "{renewals:?}");
    let mode: Option<String> = redis::cmd("HGET")
        .arg(name)
        .arg("mode")
        .query_async(&mut raw.clone())
        .await
        .unwrap();
    assert_eq!(mode.as_deref(), Some("read"));
    reading.unlock().await.unwrap();
    nothing_left(&raw).await;
}

/// A holder in a process of its own (a thread with its own runtime and client, watchdog
/// lease `watchdog`) that takes `name`'s side with `take` and dies without unlocking:
/// the runtime, and its watchdog, go; the guard is dropped where no release can be sent.
/// Returns the owner field it held.
fn dies_holding(url: String, name: &'static str, write: bool, watchdog: Duration) -> String {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let guard = runtime.block_on(async {
            let client = Client::builder(url)
                .watchdog_timeout(watchdog)
                .build()
                .await
                .unwrap();
            let rw = client.read_write_lock(name);
            if write {
                rw.write_lock().lock().await.unwrap()
            } else {
                rw.read_lock().lock().await.unwrap()
            }
        });
        drop(runtime);
        let owner = guard.owner().to_string();
        drop(guard);
        owner
    })
    .join()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_reader_stops_counting_once_its_lease_runs_out() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (live, writer) = (client(&server).await, client(&server).await);
    let name = "doc:dead-reader";
    let reading = live.read_write_lock(name).read_lock().lock().await.unwrap();
    let dead = dies_holding(server.url(), name, false, Duration::from_secs(1));
    let write = writer.read_write_lock(name).write_lock();
    let waiting = Waiting::spawn(async move { write.lock().await.unwrap() });
    // The dead reader's timeout key runs out with its 1 s lease; its count stays in the
    // hash, which the live reader keeps alive.
    let dead_key = timeout_key(name, &dead, 1);
    let gone = settles_to(false, GENEROUS, || {
        let (mut raw, key) = (raw.clone(), dead_key.clone());
        async move { key_exists(&mut raw, &key).await }
    })
    .await;
    assert!(!gone, "the dead reader's key outlived its lease");
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(name)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(fields.contains_key(&dead), "{fields:?}");
    assert!(
        !waiting.is_finished(),
        "the writer got in beside a live reader"
    );

    // The live reader's unlock frees the lock: the dead count holds nothing up.
    let woken = waiting
        .woken_by(async { reading.unlock().await.unwrap() })
        .await;
    let (after, guard) = (woken.after, woken.value);
    assert!(
        after < Duration::from_secs(2),
        "the writer got in {after:?} after the unlock"
    );
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(name)
        .query_async(&mut raw)
        .await
        .unwrap();
    assert_eq!(fields.len(), 2, "mode and the writer: {fields:?}");
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_lock_expires_and_a_waiting_reader_gets_it() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let reader = client(&server).await;
    let name = "doc:killed-writer";
    let died = Instant::now();
    dies_holding(server.url(), name, true, Duration::from_secs(1));
    let guard = reader
        .read_write_lock(name)
        .read_lock()
        .lock()
        .await
        .unwrap();
    let waited = died.elapsed();
    assert!(
        waited < Duration::from_millis(2_500),
        "in after {waited:?}, for a 1 s lease"
    );
    assert!(guard.owner().starts_with(&reader.id().to_string()));
    guard.unlock().await.unwrap();
    nothing_left(&raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_writer_is_told_it_lost_the_lock_a_waiting_reader_got() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let reader = client(&server).await;
    let name = "doc:frozen-writer";
    let url = server.url();
    let (taken_tx, taken_rx) = tokio::sync::oneshot::channel();
    // A process that freezes while it writes: its runtime is blocked, watchdog and all.
    let frozen = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let client = Client::builder(url)
                .watchdog_timeout(Duration::from_secs(1))
                .build()
                .await
                .unwrap();
            let guard = client
                .read_write_lock(name)
                .write_lock()
                .lock()
                .await
                .unwrap();
            taken_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_secs(3));
            let lost = guard.is_lost();
            let unlocked = guard.unlock().await;
            (lost, unlocked.map_err(|e| e.is_lock_lost()))
        })
    });
    taken_rx.await.unwrap();
    let frozen_at = Instant::now();
    let guard = reader
        .read_write_lock(name)
        .read_lock()
        .lock()
        .await
        .unwrap();
    let waited = frozen_at.elapsed();
    assert!(waited < Duration::from_millis(2_500), "in after {waited:?}");
    let (lost, unlocked) = tokio::task::spawn_blocking(move || frozen.join().unwrap())
        .await
        .unwrap();
    assert!(lost, "the thawed writer knows its lock is gone");
    assert_eq!(unlocked, Err(true), "its unlock is refused as lost");
    // And touched nothing of the reader's.
    let mut conn = raw.clone();
    let count: Option<String> = redis::cmd("HGET")
        .arg(name)
        .arg(guard.owner())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(count.as_deref(), Some("1"));
    guard.unlock().await.unwrap();
    nothing_left(&raw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_cancelled_at_any_point_leave_nothing_behind() {
    let server = RedisServer::start();
    let raw = server.raw().await;
    let (holder, waiter) = (client(&server).await, client(&server).await);
    let name = "doc:cancelled";
    let cuts: Vec<Duration> = [0, 1, 2, 3, 5, 8, 13, 21, 50]
        .into_iter()
        .map(Duration::from_millis)
        .collect();

    // Readers giving up behind a writer, writers behind a reader, and either side on a
    // free lock, its lock() dropped at different points: before its first try, after it,
    // while subscribing, while waiting.
    for (held_side, asked_side) in [(true, false), (false, true), (true, true)] {
        let rw = holder.read_write_lock(name);
        let guard = if held_side {
            Some(rw.write_lock().lock().await.unwrap())
        } else {
            Some(rw.read_lock().lock().await.unwrap())
        };
        for &cut in &cuts {
            let rw = waiter.read_write_lock(name);
            let call = tokio::spawn(async move {
                if asked_side {
                    tokio::time::timeout(cut, rw.write_lock().lock())
                        .await
                        .map(drop)
                } else {
                    tokio::time::timeout(cut, rw.read_lock().lock())
                        .await
                        .map(drop)
                }
            });
            assert!(call.await.unwrap().is_err(), "held by the other side");
        }
        eventually("the cancelled waits unsubscribe", GENEROUS, || {
            waiter.status().subscribed_channels == 0
        })
        .await;
        assert_eq!(waiter.status().held_locks, 0);
        guard.unwrap().unlock().await.unwrap();
        nothing_left(&raw).await;
    }
    // On a free lock a cancelled call may take it in its last moment: it is released.
    for &cut in &cuts {
        for write in [false, true] {
            let rw = waiter.read_write_lock(name);
            let _ = tokio::spawn(async move {
                if write {
                    tokio::time::timeout(cut, rw.write_lock().lock())
                        .await
                        .map(drop)
                } else {
                    tokio::time::timeout(cut, rw.read_lock().lock())
                        .await
                        .map(drop)
                }
            })
            .await;
        }
    }
    nothing_left(&raw).await;
    eventually("nothing held", GENEROUS, || waiter.status().held_locks == 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_forgets_the_lock_is_reported_to_readers_and_writers() {
    let mut server = RedisServer::start();
    let client = client(&server).await;
    let reading = client
        .read_write_lock("doc:r")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let fixed = client
        .read_write_lock("doc:f")
        .read_lock()
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let writing = client
        .read_write_lock("doc:w")
        .write_lock()
        .lock()
        .await
        .unwrap();
    server.restart();
    // Any lock call finds the connection broken and opens a new one.
    assert!(!client
        .read_write_lock("other")
        .read_lock()
        .is_locked()
        .await
        .unwrap());
    for (side, guard) in [
        ("read", &reading),
        ("fixed-lease read", &fixed),
        ("write", &writing),
    ] {
        let reason = tokio::time::timeout(Duration::from_secs(3), guard.lost())
            .await
            .unwrap_or_else(|_| panic!("the {side} hold was not told within 3 s"));
        assert_eq!(reason, LostReason::Released, "{side}");
    }
    for guard in [reading, fixed, writing] {
        assert!(guard.unlock().await.unwrap_err().is_lock_lost());
    }
}

/// Readers waiting behind a writer on a cluster client in `mode`, woken by its unlock; the
/// hash and a read hold's timeout key on the master of the name's slot.
async fn woken_on_a_cluster(cluster: &RedisCluster, mode: PubSubMode, name: &str) {
    let connect = || async {
        Client::cluster_builder(cluster.seeds())
            .pubsub_mode(mode)
            .build()
            .await
            .expect("a cluster client connects")
    };
    let (holder, waiter) = (connect().await, connect().await);
    let writing = holder
        .read_write_lock(name)
        .write_lock()
        .lock()
        .await
        .unwrap();
    let read = waiter.read_write_lock(name).read_lock();
    let waiting = Waiting::listening(&waiter, 1, async move { read.lock().await.unwrap() }).await;
    let woken = waiting
        .woken_by(async { writing.unlock().await.unwrap() })
        .await;
    let (after, guard) = (woken.after, woken.value);
    assert!(
        after < Duration::from_secs(2),
        "{mode:?}: woken {after:?} after the unlock"
    );
    let master = cluster.master_of_key(name);
    let key = timeout_key(name, guard.owner(), 1);
    assert_eq!(cluster.master_of_key(&key).port(), master.port());
    let mut conn = master.raw().await;
    assert!(pttl(&mut conn, name).await > 20_000, "{mode:?}");
    assert!(pttl(&mut conn, &key).await > 20_000, "{mode:?}");
    guard.unlock().await.unwrap();
    assert!(!key_exists(&mut conn, name).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_a_write_unlock_wakes_readers_in_both_pubsub_modes() {
    let cluster = RedisCluster::start_async().await;
    woken_on_a_cluster(&cluster, PubSubMode::Classic, "doc:classic").await;
    woken_on_a_cluster(&cluster, PubSubMode::Sharded, "doc:sharded").await;
}
