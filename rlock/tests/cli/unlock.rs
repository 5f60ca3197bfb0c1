//! `unlock`: through the kind's own script, so that library waiters wake at once; never
//! without `--yes` when there is no terminal to ask on; never on keys that are not locks;
//! never of a holder it did not show (the question answered on a terminal after the
//! holder changed: exit code 5, the new holder kept), unless `--any-holder`.

use std::time::Duration;

use futures_util::StreamExt;

use crate::support::{java_lock, rlock, rlock_on_terminal};
use testkit::fair::queue_up;
use testkit::{RedisServer, Waiting};

/// Far below the 30 s watchdog lease the waiters would otherwise wait out.
const WOKEN_WITHIN: Duration = Duration::from_secs(3);

#[tokio::test]
async fn unlock_wakes_a_waiter_of_each_kind_and_refuses_without_yes() {
    let server = RedisServer::start();
    let url = server.url();
    let raw = server.raw().await;
    let holder = testkit::client(&server).await;
    let waiter = testkit::fair_client(&server, Duration::from_secs(5)).await;

    // A reentrant lock held (watchdog, 30 s lease) with a waiter subscribed.
    let held = holder.lock("job").lock().await.unwrap();
    let waiting = {
        let lock = waiter.lock("job");
        Waiting::listening(&waiter, 1, async move { lock.lock().await.unwrap() }).await
    };

    // Without --yes and without a terminal: refused, and nothing is sent.
    let refused = rlock(&["--url", &url, "unlock", "job"]).await;
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(refused.stderr.contains("--yes"), "{refused:?}");
    assert!(holder.lock("job").is_locked().await.unwrap());
    assert!(!waiting.is_finished());

    let woken = waiting
        .woken_by(async {
            let run = rlock(&["--url", &url, "unlock", "job", "--yes", "--json"]).await;
            assert_eq!(run.code, 0, "{run:?}");
            let done = run.json();
            assert_eq!(
                (done["kind"].as_str(), done["was_held"].as_bool()),
                (Some("reentrant"), Some(true))
            );
            assert_eq!(done["holders"][0]["client_id"], holder.id().to_string());
        })
        .await;
    assert!(
        woken.after < WOKEN_WITHIN,
        "the waiter was not woken: {:?}",
        woken.after
    );
    woken.value.unlock().await.unwrap();
    // The first holder's guard would learn at its next renewal (10 s) that it lost the
    // lock; dropping it releases nothing of the new owner's.
    drop(held);

    // A fair lock: its queued waiter, told by the fair script, takes it at once.
    let fair = holder.fair_lock("queue").lock().await.unwrap();
    let next = queue_up(
        &waiter,
        &raw,
        "queue",
        |lock| async move { lock.lock().await },
    )
    .await;
    let run = rlock(&["--url", &url, "unlock", "queue", "--yes"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("force-unlocked `queue` (fair)"),
        "{run:?}"
    );
    next.finish_within(WOKEN_WITHIN)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    drop(fair);

    // A fenced lock: unlocked, its counter kept.
    let fenced = holder.fenced_lock("ledger").lock().await.unwrap();
    let run = rlock(&["--url", &url, "unlock", "ledger", "--yes", "--json"]).await;
    assert_eq!(run.json()["kind"], "fenced");
    assert_eq!(server.cli(&["EXISTS", "ledger"]), "0");
    assert_eq!(server.cli(&["GET", "redisson_lock_token:{ledger}"]), "1");
    drop(fenced);
}

#[tokio::test]
async fn unlock_leaves_what_is_not_a_held_lock_alone() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    server.cli(&["HSET", "profile", "name", "alice"]);
    server.cli(&["SET", "counter", "7"]);
    java_lock(&mut raw, "java:held", 12, 2, Some(60_000)).await;

    for name in ["profile", "counter", "absent"] {
        let run = rlock(&["--url", &url, "unlock", name, "--yes"]).await;
        assert_eq!(run.code, 1, "{name}: {run:?}");
    }
    assert_eq!(server.cli(&["HGET", "profile", "name"]), "alice");
    assert_eq!(server.cli(&["GET", "counter"]), "7");

    // A Java client's lock: force-unlocked too.
    let run = rlock(&["--url", &url, "unlock", "java:held", "--yes"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.cli(&["EXISTS", "java:held"]), "0");
    // Nothing left to unlock.
    let again = rlock(&["--url", &url, "unlock", "java:held", "--yes"]).await;
    assert_eq!(again.code, 1, "{again:?}");

    // A read-write lock as a Java reader leaves it: listed, and unlocked through the read
    // side's script, which takes its timeout key too.
    let reader = format!("{}:3", crate::support::JAVA_CLIENT);
    let timeout = format!("{{rw}}:{reader}:rwlock_timeout:1");
    server.cli(&["HSET", "rw", "mode", "read", &reader, "1"]);
    server.cli(&["PEXPIRE", "rw", "60000"]);
    server.cli(&["SET", &timeout, "1", "PX", "60000"]);
    let listing = rlock(&["--url", &url, "list", "--json"]).await.json();
    assert_eq!(crate::support::lock(&listing, "rw")["kind"], "read_write");
    let run = rlock(&["--url", &url, "unlock", "rw", "--yes"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.cli(&["EXISTS", "rw", &timeout]), "0");
}

/// A read-write lock held for writing by the library, with readers waiting: `unlock`
/// frees it through the write side's script, and every waiting reader gets in at once.
#[tokio::test]
async fn unlock_frees_a_write_lock_and_wakes_every_reader() {
    let server = RedisServer::start();
    let url = server.url();
    let holder = testkit::client(&server).await;
    let readers = testkit::client(&server).await;
    let doc = holder.read_write_lock("doc");
    let writing = doc.write_lock().lock().await.unwrap();
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let lock = readers.read_write_lock("doc").read_lock();
            Waiting::spawn(async move { lock.lock().await.unwrap() })
        })
        .collect();
    // One channel, shared by the client's readers.
    testkit::eventually("the readers listen", Duration::from_secs(5), || {
        readers.status().subscribed_channels == 1
    })
    .await;

    let woken = Waiting::all_woken_by(waiting, async {
        let run = rlock(&["--url", &url, "unlock", "doc", "--yes", "--json"]).await;
        assert_eq!(run.code, 0, "{run:?}");
        assert_eq!(run.json()["kind"], "read_write");
    })
    .await;
    // From the moment the command returned: starting a process is no part of the wake-up.
    let after = woken.after_release_returned();
    assert!(after < WOKEN_WITHIN, "a reader was not woken: {after:?}");
    drop(woken.value);
    drop(writing);
}

/// A fair lock whose queue head died (queued, nobody listening on its channel) with a
/// Redisson-style waiter behind it, which only a message moves: after `unlock`, the head
/// keeps its turn for its 100 ms grace, and the inspector stays until the library has
/// looked again and told the waiter behind.
#[tokio::test]
async fn unlock_of_a_fair_lock_moves_a_queue_behind_a_dead_head() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    let holder = testkit::client(&server).await;
    let held = holder.fair_lock("jobs").lock().await.unwrap();
    let (dead, live) = (
        format!("{}:1", crate::support::JAVA_CLIENT),
        format!("{}:2", crate::support::JAVA_CLIENT),
    );
    let now: i64 = testkit::server_millis(&mut raw).await;
    for (waiter, ahead) in [(&dead, 1), (&live, 2)] {
        let _: () = redis::pipe()
            .cmd("RPUSH")
            .arg("redisson_lock_queue:{jobs}")
            .arg(waiter)
            .ignore()
            .cmd("ZADD")
            .arg("redisson_lock_timeout:{jobs}")
            .arg(now + 300_000 * ahead)
            .arg(waiter)
            .ignore()
            .query_async(&mut raw)
            .await
            .unwrap();
    }
    let mut listener = redis::Client::open(url.as_str())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    listener
        .subscribe(format!("redisson_lock__channel:{{jobs}}:{live}"))
        .await
        .unwrap();

    let run = rlock(&["--url", &url, "unlock", "jobs", "--yes"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let told = tokio::time::timeout(WOKEN_WITHIN, listener.on_message().next())
        .await
        .expect("the live waiter behind the dead head was never told");
    assert!(told.is_some());
    let queue = testkit::fair_queue(&mut raw, "jobs").await;
    assert_eq!(queue.first(), Some(&live), "{queue:?}");
    drop(held);
}

/// The question shows holder X; X releases and Y takes the lock before the answer: "y"
/// frees nobody (exit code 5, Y named), Y keeps the lock; `--any-holder` frees Y. With the
/// holder unchanged, "y" frees it.
#[tokio::test]
async fn unlock_frees_only_the_holder_it_showed() {
    let server = RedisServer::start();
    let url = server.url();
    let mut raw = server.raw().await;
    let (x, y) = (
        testkit::client(&server).await,
        testkit::client(&server).await,
    );

    // Answered while the holder shown still holds it: freed.
    let held = x.lock("job").lock().await.unwrap();
    let mut asked = rlock_on_terminal(&["--url", &url, "unlock", "job"]);
    let question = asked.question().await;
    assert!(question.contains(&x.id().to_string()), "{question}");
    asked.answer("y");
    let run = asked.finish().await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!y.lock("job").is_locked().await.unwrap());
    // Its guard learns it at its unlock (not in the background, where it could meet the
    // same task's next hold).
    assert!(held.unlock().await.unwrap_err().is_lock_lost());

    // The holder changes while the question is open.
    let held = x.lock("job").lock().await.unwrap();
    let mut asked = rlock_on_terminal(&["--url", &url, "unlock", "job"]);
    let question = asked.question().await;
    assert!(question.contains(&x.id().to_string()), "{question}");
    held.unlock().await.unwrap();
    let taken = y.lock("job").lock().await.unwrap();
    asked.answer("y");
    let run = asked.finish().await;
    assert_eq!(run.code, 5, "{run:?}");
    assert!(run.stderr.contains("not unlocked"), "{run:?}");
    assert!(run.stderr.contains(&y.id().to_string()), "{run:?}");
    let hash = testkit::lock_hash(&mut raw, "job").await;
    assert_eq!(hash.len(), 1, "{hash:?}");
    assert!(hash
        .keys()
        .all(|field| field.starts_with(&y.id().to_string())));
    assert!(taken.valid_until() > std::time::Instant::now());

    // --any-holder: whoever holds it, printed first.
    let run = rlock(&["--url", &url, "unlock", "job", "--yes", "--any-holder"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains(&y.id().to_string()), "{run:?}");
    assert_eq!(server.cli(&["EXISTS", "job"]), "0");
    drop(taken);
}

/// A read-write lock shown held for writing by X; X releases and Y takes it for reading
/// before the answer: nothing freed (exit code 5, the new mode and holder named, in JSON
/// too), Y keeps reading; `--any-holder` frees Y's read hold.
#[tokio::test]
async fn unlock_of_a_read_write_lock_frees_only_the_mode_and_holder_it_showed() {
    let server = RedisServer::start();
    let url = server.url();
    let (x, y) = (
        testkit::client(&server).await,
        testkit::client(&server).await,
    );

    let writing = x.read_write_lock("doc").write_lock().lock().await.unwrap();
    let mut asked = rlock_on_terminal(&["--url", &url, "unlock", "doc", "--json"]);
    let question = asked.question().await;
    assert!(question.contains(&x.id().to_string()), "{question}");
    assert!(question.contains("(write)"), "{question}");
    writing.unlock().await.unwrap();
    let reading = y.read_write_lock("doc").read_lock().lock().await.unwrap();
    asked.answer("y");
    let run = asked.finish().await;
    assert_eq!(run.code, 5, "{run:?}");
    let done = run.json();
    assert_eq!(done["changed"], true, "{done}");
    assert_eq!(done["was_held"], false, "{done}");
    assert_eq!(done["found"]["mode"], "read", "{done}");
    let found = done["found"]["holders"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{done}");
    assert!(found[0].as_str().unwrap().starts_with(&y.id().to_string()));
    assert_eq!(server.cli(&["HGET", "doc", "mode"]), "read");
    let fields = server.cli(&["HKEYS", "doc"]);
    assert!(fields.contains(&y.id().to_string()), "{fields}");
    assert!(!fields.contains(&x.id().to_string()), "{fields}");
    assert!(reading.valid_until() > std::time::Instant::now());

    let run = rlock(&["--url", &url, "unlock", "doc", "--yes", "--any-holder"]).await;
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(server.cli(&["EXISTS", "doc"]), "0");
    drop(reading);
}
