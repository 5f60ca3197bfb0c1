//! The read-write lock in Redisson's layout: readers sharing (the hash's `mode`, fields and
//! counts, each read hold's timeout key and their PTTLs, read raw), a writer excluding
//! readers and writers, re-entry counts on both sides, who wakes whom (every reader behind
//! a writer, the writer behind the last reader), a writer reading and its unlock leaving
//! the lock held for reading with the waiting readers woken, the upgrade refused at once,
//! force unlocks by mode, and bad names and keys that hold other data refused with
//! nothing written.
//!
//! Leases, the watchdog, dead holders, cancellation, restarts and clusters are in
//! `read_write_lock_leases.rs`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_rlock::{Client, Lock, LockGuard, LockKind, LostReason};
use testkit::{bounded, client, key_exists, keys_but_latches, pttl, RedisServer, Waiting};

/// A waiter woken by a message gets the lock within this long: far below the 30 s lease
/// that bounds its wait otherwise.
const WAKE_BOUND: Duration = Duration::from_secs(2);
/// The default watchdog lease, in ms.
const LEASE_MS: i64 = 30_000;

/// The hash of `key` as raw Redis sees it: field -> value (`mode` is not a count).
async fn rw_hash(raw: &mut MultiplexedConnection, key: &str) -> HashMap<String, String> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(raw)
        .await
        .unwrap()
}

fn hash_of(fields: &[(&str, &str)]) -> HashMap<String, String> {
    fields
        .iter()
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect()
}

/// Read hold `n`'s timeout key of `owner` on the lock `name` (Redisson's
/// `{name}:<owner>:rwlock_timeout:<n>`).
fn timeout_key(name: &str, owner: &str, n: u32) -> String {
    format!("{{{name}}}:{owner}:rwlock_timeout:{n}")
}

/// A task of its own takes `lock` (so the guard has an owner of its own) and hands back
/// the guard.
async fn held<K: LockKind>(lock: &Lock<K>) -> LockGuard {
    let lock = lock.clone();
    bounded("a lock() that should not wait", async move {
        tokio::spawn(async move { lock.lock().await.expect("lock()") })
            .await
            .unwrap()
    })
    .await
}

/// A task taking `lock` with `lock()`, handing back the guard.
fn spawn_waiter<K: LockKind>(lock: &Lock<K>) -> Waiting<LockGuard> {
    let lock = lock.clone();
    Waiting::spawn(async move { lock.lock().await.expect("lock()") })
}

/// [`spawn_waiter`], once it listens for unlocks: the first waiter of `client`.
async fn waiting<K: LockKind>(client: &Client, lock: &Lock<K>) -> Waiting<LockGuard> {
    assert_eq!(client.status().subscribed_channels, 0);
    let lock = lock.clone();
    Waiting::listening(client, 1, async move { lock.lock().await.expect("lock()") }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_readers_share_the_lock_in_redissons_layout() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "doc:shared";
    let (read_a, read_b) = (
        a.read_write_lock(name).read_lock(),
        b.read_write_lock(name).read_lock(),
    );

    let first = held(&read_a).await;
    let second = held(&read_a).await;
    let third = held(&read_b).await;
    let owners = [first.owner(), second.owner(), third.owner()];
    assert!(owners[0] != owners[1] && owners[1] != owners[2]);
    assert!(owners[2].starts_with(&b.id().to_string()));
    // One field per reader, its count, and `mode`; one timeout key per read hold, each
    // with the 30 s watchdog lease; the hash lives as long as the longest.
    let mut expected = vec![("mode", "read")];
    expected.extend(owners.iter().map(|owner| (*owner, "1")));
    assert_eq!(rw_hash(&mut raw, name).await, hash_of(&expected));
    for owner in owners {
        let ttl = pttl(&mut raw, &timeout_key(name, owner, 1)).await;
        assert!((LEASE_MS - 2_000..=LEASE_MS).contains(&ttl), "{ttl}");
    }
    let hash_ttl = pttl(&mut raw, name).await;
    assert!(
        (LEASE_MS - 2_000..=LEASE_MS).contains(&hash_ttl),
        "{hash_ttl}"
    );
    assert!(read_a.is_locked().await.unwrap());
    assert!(!a
        .read_write_lock(name)
        .write_lock()
        .is_locked()
        .await
        .unwrap());
    assert!(!read_a.is_held_by_current_task().await.unwrap());

    // A reader with a longer fixed lease: its own key has it, and so does the hash.
    let long = read_b.clone();
    let long = tokio::spawn(async move {
        long.lock_with_lease(Duration::from_secs(120))
            .await
            .unwrap()
    })
    .await
    .unwrap();
    let long_owner = long.owner().to_string();
    let long_ttl = pttl(&mut raw, &timeout_key(name, &long_owner, 1)).await;
    assert!((118_000..=120_000).contains(&long_ttl), "{long_ttl}");
    assert!(pttl(&mut raw, name).await >= long_ttl - 100);
    assert!(pttl(&mut raw, &timeout_key(name, owners[0], 1)).await <= LEASE_MS);
    // Its release gives the hash back the longest lease left: the watchdog readers'.
    long.unlock().await.unwrap();
    assert!(!key_exists(&mut raw, &timeout_key(name, &long_owner, 1)).await);
    let after = pttl(&mut raw, name).await;
    assert!((LEASE_MS - 3_000..=LEASE_MS).contains(&after), "{after}");

    for guard in [first, second, third] {
        guard.unlock().await.unwrap();
    }
    assert_eq!(keys_but_latches(&raw).await, Vec::<String>::new());
    assert!(!read_a.is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_and_write_reentries_count_per_task() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let name = "doc:reentry";
    let rw = client.read_write_lock(name);
    let (read, write) = (rw.read_lock(), rw.write_lock());

    // Reads, from one task: the count, and a timeout key per hold.
    let (reader, outer, inner) = {
        let read = read.clone();
        tokio::spawn(async move {
            let outer = read.lock().await.unwrap();
            let inner = read.lock().await.unwrap();
            assert_eq!(read.hold_count().await.unwrap(), 2);
            assert!(read.is_held_by_current_task().await.unwrap());
            (outer.owner().to_string(), outer, inner)
        })
        .await
        .unwrap()
    };
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "read"), (&reader, "2")])
    );
    for n in [1, 2] {
        assert!(pttl(&mut raw, &timeout_key(name, &reader, n)).await > LEASE_MS - 2_000);
    }
    assert!(write.try_lock().await.unwrap().is_none(), "readers hold it");
    inner.unlock().await.unwrap();
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "read"), (&reader, "1")])
    );
    // The last acquire's key goes; the first keeps the hold's lease.
    assert!(!key_exists(&mut raw, &timeout_key(name, &reader, 2)).await);
    assert!(pttl(&mut raw, &timeout_key(name, &reader, 1)).await > LEASE_MS - 2_000);
    assert!(
        write.try_lock().await.unwrap().is_none(),
        "one read hold left"
    );
    outer.unlock().await.unwrap();
    assert_eq!(keys_but_latches(&raw).await, Vec::<String>::new());

    // Writes: `<owner>:write` counts, and the hash keeps one lease.
    let (writer, outer, inner) = {
        let write = write.clone();
        tokio::spawn(async move {
            let outer = write.lock().await.unwrap();
            let inner = write.lock().await.unwrap();
            assert_eq!(write.hold_count().await.unwrap(), 2);
            (outer.owner().to_string(), outer, inner)
        })
        .await
        .unwrap()
    };
    assert!(writer.ends_with(":write"), "{writer}");
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "write"), (&writer, "2")])
    );
    let ttl = pttl(&mut raw, name).await;
    assert!(
        (LEASE_MS - 2_000..=LEASE_MS).contains(&ttl),
        "one lease: {ttl}"
    );
    inner.unlock().await.unwrap();
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "write"), (&writer, "1")])
    );
    assert!(
        read.try_lock().await.unwrap().is_none(),
        "one write hold left"
    );
    outer.unlock().await.unwrap();
    assert_eq!(keys_but_latches(&raw).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_excludes_readers_and_other_writers() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "doc:exclusive";
    let writing = held(&a.read_write_lock(name).write_lock()).await;
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "write"), (writing.owner(), "1")])
    );

    let other = b.read_write_lock(name);
    let (read, write) = (other.read_lock(), other.write_lock());
    assert!(read.try_lock().await.unwrap().is_none());
    assert!(write.try_lock().await.unwrap().is_none());
    let started = Instant::now();
    assert!(read
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert!(write.is_locked().await.unwrap());
    assert!(!read.is_locked().await.unwrap(), "nobody reads");
    assert_eq!(write.hold_count().await.unwrap(), 0);
    let ttl = write.remaining_ttl().await.unwrap().expect("a lease");
    assert!(ttl > Duration::from_secs(25), "{ttl:?}");
    // Another task of the same client is another writer.
    assert!(held_within(&a.read_write_lock(name).write_lock())
        .await
        .is_none());
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "write"), (writing.owner(), "1")])
    );

    // Readers exclude writers in turn.
    writing.unlock().await.unwrap();
    let reading = held(&read).await;
    assert!(write.try_lock().await.unwrap().is_none());
    assert!(held_within(&a.read_write_lock(name).write_lock())
        .await
        .is_none());
    reading.unlock().await.unwrap();
    let writing = write.try_lock().await.unwrap().expect("free");
    writing.unlock().await.unwrap();
}

/// `try_lock()` of `lock` in a task of its own: `None` when it is held elsewhere.
async fn held_within<K: LockKind>(lock: &Lock<K>) -> Option<LockGuard> {
    let lock = lock.clone();
    tokio::spawn(async move { lock.try_lock().await.unwrap() })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_reader_waiting_behind_a_writer_wakes_on_its_unlock() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (a, b, c) = (
        client(&server).await,
        client(&server).await,
        client(&server).await,
    );
    let name = "doc:readers-wait";
    let writing = held(&a.read_write_lock(name).write_lock()).await;
    // Three readers of one client (one subscription) and one of another. A reader still
    // on its way to its wait when the unlock comes tries again once subscribed: no bound
    // below needs it to be waiting already.
    let read_b = b.read_write_lock(name).read_lock();
    let mut readers = vec![waiting(&b, &read_b).await];
    readers.extend([spawn_waiter(&read_b), spawn_waiter(&read_b)]);
    readers.push(waiting(&c, &c.read_write_lock(name).read_lock()).await);

    let woken = Waiting::all_woken_by(readers, async { writing.unlock().await.unwrap() }).await;
    let after = woken.after;
    assert!(
        after < WAKE_BOUND,
        "a reader got in {after:?} after the unlock"
    );
    let guards = woken.value;
    let hash = rw_hash(&mut raw, name).await;
    assert_eq!(hash.len(), 5, "mode and four readers: {hash:?}");
    assert_eq!(hash["mode"], "read");
    for guard in guards {
        guard.unlock().await.unwrap();
    }
    assert_eq!(keys_but_latches(&raw).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_reader_to_leave_wakes_a_waiting_writer() {
    let server = RedisServer::start();
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "doc:writer-waits";
    let read = a.read_write_lock(name).read_lock();
    let (first, second) = (held(&read).await, held(&read).await);
    let writer = waiting(&b, &b.read_write_lock(name).write_lock()).await;

    first.unlock().await.unwrap();
    // One reader left: the writer must not get in. Given time to (wrongly) take it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "the writer got in beside a reader");
    let woken = writer
        .woken_by(async { second.unlock().await.unwrap() })
        .await;
    let after = woken.after;
    assert!(
        after < WAKE_BOUND,
        "the writer got in {after:?} after the last unlock"
    );
    let guard = woken.value;
    assert!(guard.owner().ends_with(":write"));
    guard.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_reads_and_its_unlock_leaves_the_lock_read_and_wakes_the_readers() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "doc:downgrade";
    let rw = a.read_write_lock(name);

    // The test's body is one owner: it writes, then reads.
    let writing = rw.write_lock().lock().await.unwrap();
    let reading = rw.read_lock().lock().await.unwrap();
    let task = reading.owner().to_string();
    assert_eq!(writing.owner(), format!("{task}:write"));
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "write"), (writing.owner(), "1"), (&task, "1")])
    );
    assert!(pttl(&mut raw, &timeout_key(name, &task, 1)).await > LEASE_MS - 2_000);
    // Re-entering the write lock while reading is a re-entry, not an upgrade.
    let again = rw.write_lock().lock().await.unwrap();
    again.unlock().await.unwrap();
    // The writer's reads count on the read side.
    assert!(rw.read_lock().is_locked().await.unwrap());
    assert!(rw.write_lock().is_locked().await.unwrap());

    let other = b.read_write_lock(name).read_lock();
    let reader = waiting(&b, &other).await;
    let woken = reader
        .woken_by(async { writing.unlock().await.unwrap() })
        .await;
    let after = woken.after;
    assert!(after < WAKE_BOUND, "woken {after:?} after the write unlock");
    let guard = woken.value;
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "read"), (&task, "1"), (guard.owner(), "1")])
    );
    assert!(pttl(&mut raw, name).await > LEASE_MS - 2_000);
    assert!(!reading.is_lost());
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 1);
    assert!(!rw.write_lock().is_locked().await.unwrap());

    guard.unlock().await.unwrap();
    reading.unlock().await.unwrap();
    assert_eq!(keys_but_latches(&raw).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_asking_for_the_write_lock_is_refused_at_once() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let name = "doc:upgrade";
    let rw = client.read_write_lock(name);
    let (read, write) = (rw.read_lock(), rw.write_lock());

    let reading = read.lock().await.unwrap();
    let before = rw_hash(&mut raw, name).await;
    let keys = keys_but_latches(&raw).await;
    let started = Instant::now();
    let wait = Duration::from_secs(5);
    let lease = Duration::from_secs(10);
    let refused = [
        write.lock().await.map(drop),
        write.lock_with_lease(lease).await.map(drop),
        write.try_lock().await.map(drop),
        write.try_lock_for(wait).await.map(drop),
        write.try_lock_with(wait, lease).await.map(drop),
    ];
    for (i, result) in refused.into_iter().enumerate() {
        let err = result.expect_err("an upgrade");
        assert!(err.is_upgrade_refused(), "call {i}: {err}");
        assert!(err.to_string().contains(name), "{err}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once, not after the waits"
    );
    assert_eq!(rw_hash(&mut raw, name).await, before);
    assert_eq!(keys_but_latches(&raw).await, keys);
    assert_eq!(client.status().subscribed_channels, 0);

    // Other tasks are refused nothing: they wait, as writers behind a reader do.
    assert!(held_within(&write).await.is_none());
    reading.unlock().await.unwrap();
    let writing = write.lock().await.expect("no read hold left");
    writing.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_deletes_the_lock_held_in_its_own_mode_and_wakes_the_waiters() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let (a, b) = (client(&server).await, client(&server).await);
    let name = "doc:force";
    let rw = a.read_write_lock(name);
    let (first, second) = (held(&rw.read_lock()).await, held(&rw.read_lock()).await);
    let writer = waiting(&b, &b.read_write_lock(name).write_lock()).await;

    // The write lock's force unlock leaves a lock held for reading alone.
    assert!(!b
        .read_write_lock(name)
        .write_lock()
        .force_unlock()
        .await
        .unwrap());
    assert_eq!(rw_hash(&mut raw, name).await.len(), 3);
    let woken = writer
        .woken_by(async {
            assert!(b
                .read_write_lock(name)
                .read_lock()
                .force_unlock()
                .await
                .unwrap());
        })
        .await;
    assert!(woken.after < WAKE_BOUND);
    let writing = woken.value;
    // The readers' timeout keys went with the hash.
    assert_eq!(keys_but_latches(&raw).await, vec![name.to_string()]);
    // Another client's readers find out at their next renewal; this test's client
    // forced nothing of its own. Their unlocks leave the writer's hold alone.
    assert!(first.unlock().await.is_err());
    assert!(second.unlock().await.is_err());
    assert_eq!(
        rw_hash(&mut raw, name).await,
        hash_of(&[("mode", "write"), (writing.owner(), "1")])
    );

    // The read lock's force unlock leaves a lock held for writing alone; the write
    // lock's deletes it, and this client's writer is told at once.
    assert!(!a
        .read_write_lock(name)
        .read_lock()
        .force_unlock()
        .await
        .unwrap());
    assert!(b
        .read_write_lock(name)
        .write_lock()
        .force_unlock()
        .await
        .unwrap());
    assert_eq!(writing.lost().await, LostReason::Released);
    assert_eq!(keys_but_latches(&raw).await, Vec::<String>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_names_and_keys_that_hold_other_data_are_refused_with_nothing_written() {
    let server = RedisServer::start();
    let mut raw = server.raw().await;
    let client = client(&server).await;
    let wait = Duration::from_millis(200);
    let lease = Duration::from_secs(10);

    // Empty names: refused before anything is sent.
    let empty = client.read_write_lock("");
    let mut calls = testkit::every_acquire(&empty.read_lock(), wait, lease).await;
    calls.extend(testkit::every_acquire(&empty.write_lock(), wait, lease).await);
    calls.extend(testkit::every_read(&empty.read_lock()).await);
    calls.extend(testkit::every_read(&empty.write_lock()).await);
    for (call, result) in calls {
        let err = result.expect_err(call);
        assert!(err.is_invalid_argument(), "{call}: {err}");
    }

    // Keys that hold other data, a plain RLock's hash among them.
    let plain = client.lock("plain");
    let plain_guard = held(&plain).await;
    let plants: [(&str, &[&str]); 5] = [
        ("string", &["SET", "string", "user data"]),
        ("list", &["RPUSH", "list", "a", "b"]),
        ("zset", &["ZADD", "zset", "1", "a"]),
        ("hash", &["HSET", "hash", "name", "Ada", "mode", "admin"]),
        ("plain", &[]),
    ];
    for (_, command) in plants {
        if let Some((first, rest)) = command.split_first() {
            let _: () = redis::cmd(first)
                .arg(rest)
                .query_async(&mut raw)
                .await
                .unwrap();
        }
    }
    let keys_before = keys_but_latches(&raw).await;
    for (key, _) in plants {
        let dump_before = dump(&mut raw, key).await;
        let rw = client.read_write_lock(key);
        let mut calls = testkit::every_acquire(&rw.read_lock(), wait, lease).await;
        calls.extend(testkit::every_acquire(&rw.write_lock(), wait, lease).await);
        calls.extend(testkit::every_read(&rw.read_lock()).await);
        calls.extend(testkit::every_read(&rw.write_lock()).await);
        for (call, result) in calls {
            let err = result.expect_err(call);
            assert!(err.is_not_a_lock(), "{call} on {key}: {err}");
            assert!(err.to_string().contains(key), "{err}");
        }
        assert_eq!(dump(&mut raw, key).await, dump_before, "{key} changed");
    }
    let err = client
        .read_write_lock("plain")
        .read_lock()
        .lock()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("RLock"),
        "says what it found: {err}"
    );
    assert_eq!(keys_but_latches(&raw).await, keys_before, "keys written");
    assert_eq!(client.status().held_locks, 1, "the plain lock only");
    plain_guard.unlock().await.unwrap();

    // The other kinds refuse a read-write lock, the task's own reader field included.
    let reading = client
        .read_write_lock("shared")
        .read_lock()
        .lock()
        .await
        .unwrap();
    let before = dump(&mut raw, "shared").await;
    let err = client.lock("shared").lock().await.unwrap_err();
    assert!(
        err.is_not_a_lock() && err.to_string().contains("read-write"),
        "{err}"
    );
    let err = client.fenced_lock("shared").try_lock().await.unwrap_err();
    assert!(err.is_not_a_lock(), "{err}");
    assert!(client
        .fair_lock("shared")
        .try_lock()
        .await
        .unwrap_err()
        .is_not_a_lock());
    assert!(client
        .lock("shared")
        .force_unlock()
        .await
        .unwrap_err()
        .is_not_a_lock());
    assert_eq!(dump(&mut raw, "shared").await, before);
    reading.unlock().await.unwrap();
}

/// `DUMP` of `key` (its type and content), `None` when absent.
async fn dump(raw: &mut MultiplexedConnection, key: &str) -> Option<Vec<u8>> {
    redis::cmd("DUMP").arg(key).query_async(raw).await.unwrap()
}

/// Compile-time: the handles and their futures move between tasks.
#[allow(dead_code, unused_must_use, clippy::let_underscore_future)]
fn handles_and_futures_are_send(rw: redis_rlock::ReadWriteLock) {
    fn is_send_sync<T: Send + Sync>(_: &T) {}
    fn is_send<T: Send>(_: &T) {}
    is_send_sync(&rw);
    let (read, write): (redis_rlock::ReadLock, redis_rlock::WriteLock) =
        (rw.read_lock(), rw.write_lock());
    is_send(&read.lock());
    is_send(&write.try_lock_for(Duration::from_secs(1)));
    is_send(&read.force_unlock());
    is_send(&write.hold_count());
}
